//! The one timestamp format of stored and projected times: RFC 3339, UTC, milliseconds,
//! `Z` suffix (`2026-11-30T12:00:00.000Z`). Pure; must not depend on `store` or `service`.

use chrono::{DateTime, SecondsFormat, Utc};

/// A time as every stored attribute and projection writes it.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// An epoch (seconds) in the same format; an epoch out of chrono's range is empty.
pub fn epoch_rfc3339(epoch: i64) -> String {
    DateTime::<Utc>::from_timestamp(epoch, 0).map(rfc3339).unwrap_or_default()
}

/// A time kept as epoch milliseconds; out of range reads as the epoch itself.
pub fn from_millis(ms: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp_millis(ms).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_written_in_utc_with_milliseconds() {
        let t = from_millis(1_796_160_137_105);
        assert_eq!(rfc3339(t), "2026-12-01T21:22:17.105Z");
        assert_eq!(epoch_rfc3339(1_796_160_137), "2026-12-01T21:22:17.000Z");
        assert_eq!(epoch_rfc3339(i64::MAX), "");
        assert_eq!(from_millis(i64::MAX), DateTime::<Utc>::default());
    }
}
