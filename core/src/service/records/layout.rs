//! The table's layout as data: one row per item kind, kept beside the key functions
//! that build them. docs/round-trips.md carries the same table ("Items"); a test keeps
//! the two equal, so the documented layout cannot drift from the code.

/// One kind of item: its name and the shape of its keys (`<...>` are variable parts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ItemLayout {
    pub item: &'static str,
    pub pk: &'static str,
    pub sk: &'static str,
}

const fn row(item: &'static str, pk: &'static str, sk: &'static str) -> ItemLayout {
    ItemLayout { item, pk, sk }
}

/// Runs, their events and idempotency receipts.
pub const RUN_ITEMS: &[ItemLayout] = &[
    row("run", "RUN#<run_id>", "RUN"),
    row("run event", "RUN#<run_id>", "EVT#<seq, 20 digits>"),
    row("idempotency receipt", "IDEM#<sha256(identity, operation, key)>", "IDEM"),
    row("consumed approval receipt", "APPROVAL#<sha256(issuer, key_id, receipt_id)>", "APPROVAL"),
];

/// Accounts, links, agent bindings, browser sessions and sign-in intents.
pub const ACCOUNT_ITEMS: &[ItemLayout] = &[
    row("account link", "LINK#<sha256(provider, subject)>", "LINK"),
    row("agent account binding", "AGENTBIND#<binding_hash>", "AGENTBIND"),
    row("account", "ACCOUNT#<account_id>", "ACCOUNT"),
    row("account's profile", "ACCOUNT#<account_id>", "PROFILE"),
    row("account's binding entry", "ACCOUNT#<account_id>", "AGENTBIND#<binding_hash>"),
    row("account's run entry", "ACCOUNT#<account_id>", "RUN#<newest-first created-at ms, 15 digits>#<run_id>"),
    row("browser session", "SESSION#<sha256(token)>", "SESSION"),
    row("sign-in intent", "INTENT#<sha256(state)>", "INTENT"),
];

/// Shared Live Rooms: rooms, memberships and consent, run and chat bindings, observers.
pub const ROOM_ITEMS: &[ItemLayout] = &[
    row("room", "ROOM#<room_id>", "ROOM"),
    row("room membership", "ROOM#<room_id>", "MEM#<account_id>"),
    row("consent receipt", "ROOM#<room_id>", "CONSENT#<account_id>#<version, 10 digits>"),
    row("account's room entry", "ACCOUNT#<account_id>", "ROOM#<room_id>"),
    row("run-room slot", "RUNROOM#<run_id>", "SLOT"),
    row("run-chat slot", "RUNCHAT#<run_id>", "SLOT"),
    row("room binding", "BIND#<sha256(binding_ref)>", "BIND"),
    row("chat claim handle", "CLAIM#<sha256(handle)>", "CLAIM"),
    row("room invite", "INVITE#<sha256(code)>", "INVITE"),
    row("observer", "OBS#<observer_ref>", "OBS"),
    row("observer snapshot", "OBS#<observer_ref>", "SNAP"),
];

/// Room sources, their credential delivery and bearer lookup, their reports and probes.
pub const SOURCE_ITEMS: &[ItemLayout] = &[
    row("room source", "ROOM#<room_id>", "SRC#<source_id>"),
    row("source credential delivery", "SRCCLAIM#<sha256(handle)>", "CLAIM"),
    row("source bearer lookup", "SRCBEARER#<sha256(bearer)>", "BEARER"),
    row("source observation", "SRCOBS#<source_id>", "OBS#<observed-at ms, 15 digits>#<request_id>"),
    row("source request marker", "SRCOBS#<source_id>", "REQ#<request_id>"),
    row("source health marker", "SRCOBS#<source_id>", "HEALTH"),
    row("probe record", "SRCPROBE#<source_id>", "PROBE#<probe_id>"),
    row("pending probe marker", "SRCPROBE#<source_id>", "PENDING#<probe_id>"),
];

/// Player embodiment: environment bindings, their credential lookup, workflows, and
/// per binding its open workflows (copies) and its pending-work marker.
pub const EMBODIMENT_ITEMS: &[ItemLayout] = &[
    row("environment binding", "ROOM#<room_id>", "ENV#<binding_id>"),
    row("connector credential lookup", "EMBCRED#<sha256(credential)>", "CRED"),
    row("player-action workflow", "ROOM#<room_id>", "EMBWF#<workflow_ref>"),
    row("open workflow marker", "EMBOPEN#<binding_id>", "WF#<workflow_ref>"),
    row("binding work marker", "EMBOPEN#<binding_id>", "WORK"),
];

/// Per-minute rate-limit counters (shared store only).
pub const LIMIT_ITEMS: &[ItemLayout] = &[row("rate-limit window", "RL#<sha256(window key)>#<minute>", "RL")];

/// Clients registered with the development issuer, the hourly registration count, and
/// what it keeps while authorizing: pending authorizations, codes, refresh families.
pub const OAUTH_ITEMS: &[ItemLayout] = &[
    row("registered OAuth client", "OAUTHCLIENT#<client_id>", "CLIENT"),
    row("client registration counter", "OAUTHREG#<hour>", "COUNT"),
    row("pending authorization (once signed in)", "OAUTHPENDING#<sha256(sealed request)>", "PENDING"),
    row("authorization code", "OAUTHCODE#<sha256(code)>", "CODE"),
    row("refresh-token family", "OAUTHFAMILY#<family_id>", "FAMILY"),
    row("refresh token", "OAUTHREFRESH#<sha256(token)>", "REFRESH"),
];

/// Every item kind the service writes.
pub fn all() -> Vec<ItemLayout> {
    [RUN_ITEMS, ACCOUNT_ITEMS, ROOM_ITEMS, SOURCE_ITEMS, EMBODIMENT_ITEMS, LIMIT_ITEMS, OAUTH_ITEMS].concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows of the table under the "Items" heading of docs/round-trips.md.
    fn documented() -> Vec<ItemLayout> {
        let doc = include_str!("../../../../docs/round-trips.md");
        let table = doc.split("\n## Items\n").nth(1).expect("docs/round-trips.md has an \"## Items\" section");
        let cell = |s: &str| -> &'static str { Box::leak(s.trim().trim_matches('`').to_owned().into_boxed_str()) };
        table
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .skip(2)
            .map(|l| {
                let cells: Vec<&str> = l.trim().trim_matches('|').split('|').collect();
                assert!(cells.len() >= 3, "an Items row has item | pk | sk: {l}");
                row(cell(cells[0]), cell(cells[1]), cell(cells[2]))
            })
            .collect()
    }

    #[test]
    fn the_documented_item_table_is_the_kernel_layout() {
        let mut code = all();
        let mut doc = documented();
        code.sort();
        doc.sort();
        assert_eq!(doc, code, "docs/round-trips.md \"Items\" and records::layout differ");
    }

    #[test]
    fn no_two_item_kinds_share_a_key_shape() {
        let mut keys: Vec<(&str, &str)> = all().iter().map(|r| (r.pk, r.sk)).collect();
        keys.sort();
        let n = keys.len();
        keys.dedup();
        assert_eq!(keys.len(), n);
    }
}

#[cfg(test)]
mod keys {
    use super::*;
    use crate::service::records::{accounts, approvals, receipts, runs, sessions};
    use crate::store::Key;

    /// True when `s` has the shape `pattern`: literal parts in order, each `<...>` one
    /// or more characters.
    fn shaped(pattern: &str, s: &str) -> bool {
        let mut rest = s;
        let mut parts = pattern.split('<');
        let first = parts.next().unwrap_or_default();
        let Some(after) = rest.strip_prefix(first) else { return false };
        rest = after;
        for part in parts {
            let literal = part.split_once('>').map(|(_, l)| l).unwrap_or_default();
            if literal.is_empty() {
                return !rest.is_empty();
            }
            match rest[1.min(rest.len())..].find(literal) {
                Some(at) => rest = &rest[1 + at + literal.len()..],
                None => return false,
            }
        }
        rest.is_empty()
    }

    fn row_of(item: &str) -> ItemLayout {
        *all().iter().find(|r| r.item == item).unwrap_or_else(|| panic!("no layout row {item}"))
    }

    #[test]
    fn every_run_and_account_key_has_the_shape_of_its_layout_row() {
        let cases: Vec<(&str, Key)> = vec![
            ("run", runs::run_key("run_1")),
            ("run event", runs::event_key("run_1", 7)),
            ("idempotency receipt", receipts::receipt_key("id", "run.start", "k")),
            ("consumed approval receipt", approvals::approval_key("lid")),
            ("account link", accounts::link_key("p", "s")),
            ("agent account binding", accounts::binding_key("bh")),
            ("account", accounts::account_key("acct_1")),
            ("account's binding entry", accounts::binding_entry_key("acct_1", "bh")),
            ("account's run entry", runs::account_run_key("acct_1", 1_700_000_000_000, "run_1")),
            ("browser session", sessions::session_key("th")),
            ("sign-in intent", sessions::intent_key("sh")),
        ];
        for (item, key) in cases {
            let row = row_of(item);
            assert!(shaped(row.pk, &key.pk), "{item}: pk {} is not {}", key.pk, row.pk);
            assert!(shaped(row.sk, &key.sk), "{item}: sk {} is not {}", key.sk, row.sk);
        }
        assert!(shaped("EVT#<seq>", "EVT#1") && !shaped("EVT#<seq>", "EVT#") && !shaped("RUN", "RUNX"));
    }
}
