//! The account's profile item: the name its person's sign-in provider gave at the last
//! sign-in that named one (the OpenID `name`, else `preferred_username` claim). Kept apart
//! from the account item, so a sign-in never races an operator's policy change. Shown to
//! the person and to owners of rooms they joined; never a key, never an authority.

use super::super::attrs::{DISPLAY_NAME, UPDATED_AT, text};
use super::account_key;
use crate::store::{Item, Key, Store, StoreError};
use std::collections::HashMap;

/// The longest name kept, in characters (a longer one is cut, not refused: a sign-in
/// never fails over a name).
pub const MAX_DISPLAY_NAME_CHARS: usize = 80;

pub fn profile_key(account_id: &str) -> Key {
    Key::new(account_key(account_id).pk, "PROFILE")
}

/// A provider's name as kept: control characters dropped, whitespace runs made one space,
/// trimmed, cut to [`MAX_DISPLAY_NAME_CHARS`]; None when nothing is left.
pub fn clean_display_name(raw: &str) -> Option<String> {
    let words: Vec<&str> = raw.split(|c: char| c.is_whitespace() || c.is_control()).filter(|w| !w.is_empty()).collect();
    let name: String = words.join(" ").chars().filter(|c| !c.is_control()).take(MAX_DISPLAY_NAME_CHARS).collect();
    let name = name.trim().to_owned();
    (!name.is_empty()).then_some(name)
}

/// The profile item of an account.
pub fn profile_item(account_id: &str, display_name: &str, now: &str) -> Item {
    let key = profile_key(account_id);
    Item::new(key.pk, key.sk).with_s(DISPLAY_NAME, display_name).with_s(UPDATED_AT, now)
}

/// The display names of these accounts (those that have one), by account id.
pub async fn display_names(store: &dyn Store, account_ids: &[String]) -> Result<HashMap<String, String>, StoreError> {
    let mut names = HashMap::new();
    // One batch read per 100 keys (DynamoDB's BatchGetItem bound).
    for chunk in account_ids.chunks(100) {
        let keys: Vec<Key> = chunk.iter().map(|a| profile_key(a)).collect();
        for (id, item) in chunk.iter().zip(store.batch_get(&keys).await?) {
            if let Some(name) = item.map(|i| text(&i, DISPLAY_NAME)).filter(|n| !n.is_empty()) {
                names.insert(id.clone(), name);
            }
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provider_name_is_kept_clean_and_bounded() {
        assert_eq!(clean_display_name("  Ada \t Lovelace\n").as_deref(), Some("Ada Lovelace"));
        assert_eq!(clean_display_name("Ada\u{0}\u{1b}[31m").as_deref(), Some("Ada [31m"));
        assert_eq!(clean_display_name(" \n\t "), None);
        assert_eq!(clean_display_name(&"é".repeat(200)).map(|n| n.chars().count()), Some(MAX_DISPLAY_NAME_CHARS));
    }

    #[test]
    fn the_profile_lives_in_the_account_partition_beside_the_account_item() {
        assert_eq!(profile_key("acct_a").pk, account_key("acct_a").pk);
        assert_eq!(profile_key("acct_a").sk, "PROFILE");
        let item = profile_item("acct_a", "Ada", "2026-12-06T04:00:00.000Z");
        assert_eq!(item.s(DISPLAY_NAME), Some("Ada"));
    }
}
