//! Rate-limit window counters: one atomic counter item per window key and minute. The
//! kernel only shapes the key; what a window counts (and the stable text of its key)
//! belongs to the HTTP limiter. Depends on the store's key type and the hash only.

use crate::domain::hash_parts;
use crate::store::Key;

/// The counter item of window `window` in `minute`. The window key is hashed: it may
/// carry an address. Changing this shape resets every deployed window.
pub fn counter_key(window: &str, minute: i64) -> Key {
    Key::new(format!("RL#{}#{minute}", hash_parts(&["rl.v1", window])), "RL")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_keys_are_per_minute_and_do_not_carry_the_window_key() {
        let a = counter_key("ip:Mcp:203.0.113.9", 100);
        assert!(a.pk.starts_with("RL#") && a.pk.ends_with("#100"), "{a:?}");
        assert!(!a.pk.contains("203.0.113.9"));
        assert_ne!(a, counter_key("ip:Mcp:203.0.113.9", 101));
        assert_ne!(a, counter_key("ip:Mcp:203.0.113.8", 100));
    }

    #[test]
    fn the_stored_counter_key_is_pinned() {
        let k = counter_key("ip:Mcp:203.0.113.9", 100);
        assert_eq!(k.sk, "RL");
        assert_eq!(k.pk, "RL#ce9dbf88dd41c4d64f5f6c30ec8238dffbce4bb406e04eee65f5f8de62534ab7#100");
    }
}
