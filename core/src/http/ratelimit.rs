//! Per-minute fixed-window limits, per process (on Lambda: per warm instance).
//! Fail closed on overflow: the window count saturates, it never wraps.

use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct RateLimiter {
    windows: Mutex<HashMap<String, (i64, u32)>>,
}

impl RateLimiter {
    /// Counts one request for `key` in the minute of `now_epoch`; Err(seconds to wait)
    /// when `limit` is already reached. A limit of 0 disables the check.
    pub fn check(&self, key: &str, limit: u32, now_epoch: i64) -> Result<(), u64> {
        if limit == 0 {
            return Ok(());
        }
        let minute = now_epoch / 60;
        let mut map = self.windows.lock().expect("rate limiter");
        if map.len() > 50_000 {
            map.retain(|_, (m, _)| *m == minute);
        }
        let entry = map.entry(key.to_owned()).or_insert((minute, 0));
        if entry.0 != minute {
            *entry = (minute, 0);
        }
        if entry.1 >= limit {
            return Err((60 - now_epoch.rem_euclid(60)) as u64);
        }
        entry.1 = entry.1.saturating_add(1);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_admits_the_limit_then_refuses_until_the_next_minute() {
        let rl = RateLimiter::default();
        assert!(rl.check("ip:1", 2, 120).is_ok());
        assert!(rl.check("ip:1", 2, 121).is_ok());
        assert_eq!(rl.check("ip:1", 2, 130), Err(50));
        assert!(rl.check("ip:2", 2, 130).is_ok(), "keys are independent");
        assert!(rl.check("ip:1", 2, 180).is_ok(), "next minute");
    }
}
