//! How the pages say a time to a person: relative, to the minute ("2 min ago", "in 5 min"),
//! with the exact instant beside it for the machine and the curious (`<time datetime>` and
//! its `title`, whole seconds, UTC). No page shows a fraction of a second. Pure: knows no
//! store, no session.

use chrono::{DateTime, SecondsFormat, Utc};

/// A time as a page shows it (the `when` macro of templates/macros.html).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct When {
    /// The `datetime` attribute: RFC 3339, UTC, whole seconds.
    pub datetime: String,
    /// The exact time in words a person reads (`2026-12-06 04:31 UTC`), the `title`.
    pub exact: String,
    /// The relative time shown (`2 min ago`).
    pub relative: String,
}

/// `at` as seen at `now`.
pub fn when(at: DateTime<Utc>, now: DateTime<Utc>) -> When {
    When {
        datetime: at.to_rfc3339_opts(SecondsFormat::Secs, true),
        exact: at.format("%Y-%m-%d %H:%M UTC").to_string(),
        relative: relative(at, now),
    }
}

/// A stored RFC 3339 text as seen at `now`; a text that is not one is shown as it is (never
/// hidden), with no `datetime`.
pub fn when_text(at: &str, now: DateTime<Utc>) -> When {
    match DateTime::parse_from_rfc3339(at) {
        Ok(t) => when(t.with_timezone(&Utc), now),
        Err(_) => When { datetime: String::new(), exact: at.to_owned(), relative: at.to_owned() },
    }
}

/// An epoch (seconds) as seen at `now`.
pub fn when_epoch(epoch: i64, now: DateTime<Utc>) -> When {
    DateTime::<Utc>::from_timestamp(epoch, 0).map(|t| when(t, now)).unwrap_or_default()
}

/// "just now", "2 min ago", "3 h 5 min ago", "4 days ago", or the date past a month; the
/// future reads "in 5 min". Minutes are whole and rounded down: a page never claims more
/// time has passed than has.
pub fn relative(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let secs = (now - at).num_seconds();
    let (minutes, future) = ((secs.abs() / 60), secs < 0);
    let span = match minutes {
        0 => return "just now".into(),
        1..60 => format!("{minutes} min"),
        60..1440 if minutes % 60 == 0 => format!("{} h", minutes / 60),
        60..1440 => format!("{} h {} min", minutes / 60, minutes % 60),
        1440..2880 => "1 day".into(),
        2880..43200 => format!("{} days", minutes / 1440),
        _ => return format!("on {}", at.format("%Y-%m-%d")),
    };
    if future { format!("in {span}") } else { format!("{span} ago") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    #[test]
    fn times_read_as_a_person_says_them_to_the_minute() {
        let now = DateTime::parse_from_rfc3339("2026-12-06T04:31:59.123456789Z").unwrap().with_timezone(&Utc);
        let ago = |d: Duration| relative(now - d, now);
        assert_eq!(ago(Duration::seconds(5)), "just now");
        assert_eq!(ago(Duration::seconds(-5)), "just now");
        assert_eq!(ago(Duration::seconds(150)), "2 min ago");
        assert_eq!(ago(Duration::minutes(-5)), "in 5 min");
        assert_eq!(ago(Duration::hours(2)), "2 h ago");
        assert_eq!(ago(Duration::minutes(185)), "3 h 5 min ago");
        assert_eq!(ago(Duration::hours(30)), "1 day ago");
        assert_eq!(ago(Duration::days(4)), "4 days ago");
        assert_eq!(ago(Duration::days(-4)), "in 4 days");
        assert_eq!(ago(Duration::days(60)), "on 2026-10-07");
    }

    #[test]
    fn the_exact_time_has_whole_seconds_and_no_fraction() {
        let at = DateTime::parse_from_rfc3339("2026-12-06T04:29:07.987654321Z").unwrap().with_timezone(&Utc);
        let w = when(at, at + Duration::minutes(2));
        assert_eq!(w.datetime, "2026-12-06T04:29:07Z");
        assert_eq!(w.exact, "2026-12-06 04:29 UTC");
        assert_eq!(w.relative, "2 min ago");
        let stored = when_text("2026-12-06T04:29:07.987Z", at + Duration::minutes(2));
        assert_eq!(stored, w);
        assert_eq!(when_text("not a time", at).relative, "not a time");
        assert_eq!(when_epoch(at.timestamp(), at).datetime, "2026-12-06T04:29:07Z");
    }
}
