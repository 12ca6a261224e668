//! Accounts, sessions and agent bindings as values: derived identifiers, opaque
//! references, the account policy, the session token. No I/O.

use serde::{Deserialize, Serialize};

use super::{hash_parts, random_hex, sha256_hex};

/// The account of a provider subject. Derived, so two first sign-ins of the same
/// identity converge on one account and the account item can be read in the same
/// BatchGetItem as the link (its key is known before the link is read).
pub fn account_id_for(provider: &str, subject: &str) -> String {
    format!("acct_{}", &hash_parts(&["account.v1", provider, subject])[..24])
}

/// The opaque reference of an account (never the account id itself).
pub fn account_ref(account_id: &str) -> String {
    format!("account:sha256:{}", hash_parts(&["account.v1", account_id]))
}

/// The opaque reference of a signed tenant under an issuer.
pub fn tenant_ref(issuer: &str, tenant: &str) -> String {
    format!("tenant:sha256:{}", hash_parts(&["tenant.v1", issuer, tenant]))
}

/// The exact owner tuple, hashed: (signed tenant, issuer, provider, subject, linked account
/// id). What a run records as its owner, and what a browser session records of the
/// identity it signed in with, so the run console scopes runs exactly as the bearer routes.
pub fn owner_hash(tenant: &str, issuer: &str, provider: &str, subject: &str, account_id: &str) -> String {
    hash_parts(&["owner.v1", tenant, issuer, provider, subject, account_id])
}

/// The opaque reference of one grant of an agent binding. A new grant after a
/// revocation gets a new generation and therefore a new reference.
pub fn binding_ref(identity_hash: &str, generation: &str) -> String {
    format!("agent-binding:sha256:{}", hash_parts(&["agent-binding-ref.v1", identity_hash, generation]))
}

/// A fresh binding generation.
pub fn new_generation() -> String {
    random_hex(16)
}

/// True when `s` is shaped like a binding reference (anything else is not found).
pub fn is_binding_ref(s: &str) -> bool {
    s.strip_prefix("agent-binding:sha256:").is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The operator-held policy of an account, read with the principal on every request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AccountPolicy {
    /// The Shared Live Room feature lock.
    pub rooms_locked: bool,
    pub developer: bool,
    /// A guest is refused on every lane that needs a signed-in browser.
    pub guest: bool,
    /// Capabilities withheld from runs of this account.
    pub denied_capabilities: Vec<String>,
}

/// A change to the policy; `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyChange {
    pub rooms_locked: Option<bool>,
    pub developer: Option<bool>,
    pub guest: Option<bool>,
    /// Replaces the denied capabilities when given.
    pub denied_capabilities: Option<Vec<String>>,
}

impl AccountPolicy {
    pub fn apply(&mut self, change: &PolicyChange) {
        if let Some(v) = change.rooms_locked {
            self.rooms_locked = v;
        }
        if let Some(v) = change.developer {
            self.developer = v;
        }
        if let Some(v) = change.guest {
            self.guest = v;
        }
        if let Some(caps) = &change.denied_capabilities {
            let mut caps: Vec<String> = caps.iter().map(|c| c.trim().to_owned()).filter(|c| !c.is_empty()).collect();
            caps.sort();
            caps.dedup();
            self.denied_capabilities = caps;
        }
    }
}

/// Where a browser goes back to after signing in: a path on this origin only. A relative
/// reference that starts with exactly one `/` (no `//` nor `/\`, which browsers read as
/// another host), printable ASCII without a backslash, at most 512 bytes. Anything else
/// is no return path at all (an open redirect is refused, never repaired).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReturnPath(String);

impl ReturnPath {
    pub const MAX_LEN: usize = 512;

    pub fn parse(s: &str) -> Option<Self> {
        let b = s.as_bytes();
        let one_slash = b.first() == Some(&b'/') && !matches!(b.get(1), Some(b'/' | b'\\'));
        let printable = b.iter().all(|c| c.is_ascii_graphic() && *c != b'\\');
        (one_slash && printable && b.len() <= Self::MAX_LEN).then(|| ReturnPath(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A session or sign-in secret: 256 bits of randomness, hex. Its `Debug` is redacted;
/// only its hash is ever stored.
#[derive(Clone, PartialEq, Eq)]
pub struct BrowserSecret(String);

impl BrowserSecret {
    pub fn generate() -> Self {
        Self(random_hex(32))
    }

    /// A value read from a cookie, when it has the shape of one we issued.
    pub fn parse(s: &str) -> Option<Self> {
        (s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))).then(|| Self(s.into()))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The stored form.
    pub fn hash(&self) -> String {
        sha256_hex(format!("helix-browser-secret.v1:{}", self.0))
    }
}

impl std::fmt::Debug for BrowserSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BrowserSecret(<redacted>)")
    }
}

/// What a sign-in intent is for (stored by its snake_case name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntentPurpose {
    /// Sign in (creates the account and link on first use, and a session).
    SignIn,
    /// Step-up from a signed-in session: allow agents to act for this account.
    AllowAgents,
}

impl IntentPurpose {
    pub fn as_str(self) -> &'static str {
        match self {
            IntentPurpose::SignIn => "sign_in",
            IntentPurpose::AllowAgents => "allow_agents",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "sign_in" => Some(IntentPurpose::SignIn),
            "allow_agents" => Some(IntentPurpose::AllowAgents),
            _ => None,
        }
    }
}

/// The PKCE verifier and nonce of an intent, derived from the browser-held secret and
/// the state, so the store never holds them (it holds only hashes).
pub fn intent_verifier(browser: &BrowserSecret, state: &str) -> String {
    hash_parts(&["pkce.v1", browser.expose(), state])
}

pub fn intent_nonce(browser: &BrowserSecret, state: &str) -> String {
    hash_parts(&["nonce.v1", browser.expose(), state])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_ids_are_derived_and_distinct_per_identity() {
        assert_eq!(account_id_for("p", "alice"), account_id_for("p", "alice"));
        assert_ne!(account_id_for("p", "alice"), account_id_for("p", "bob"));
        assert_ne!(account_id_for("p", "alice"), account_id_for("q", "alice"));
        assert!(account_id_for("p", "a").starts_with("acct_"));
    }

    #[test]
    fn binding_refs_change_with_the_generation_and_parse() {
        let a = binding_ref("id", "g1");
        assert_ne!(a, binding_ref("id", "g2"));
        assert!(is_binding_ref(&a));
        assert!(!is_binding_ref("agent-binding:sha256:xyz"));
        assert!(!is_binding_ref(&a.replace("agent-binding", "tenant")));
    }

    #[test]
    fn policy_changes_apply_only_what_is_given() {
        let mut p = AccountPolicy { developer: true, ..Default::default() };
        p.apply(&PolicyChange { rooms_locked: Some(true), ..Default::default() });
        assert!(p.rooms_locked && p.developer && !p.guest);
        p.apply(&PolicyChange {
            denied_capabilities: Some(vec!["b".into(), "a".into(), "a".into()]),
            ..Default::default()
        });
        assert_eq!(p.denied_capabilities, vec!["a", "b"]);
    }

    #[test]
    fn browser_secrets_are_256_bits_hashed_and_redacted() {
        let s = BrowserSecret::generate();
        assert_eq!(s.expose().len(), 64);
        assert_ne!(s.hash(), s.expose());
        assert!(!format!("{s:?}").contains(s.expose()));
        assert!(BrowserSecret::parse(s.expose()).is_some());
        assert!(BrowserSecret::parse("short").is_none());
        assert!(BrowserSecret::parse(&s.expose().to_uppercase()).is_none());
    }

    #[test]
    fn intent_secrets_depend_on_the_browser_and_the_state() {
        let (a, b) = (BrowserSecret::generate(), BrowserSecret::generate());
        assert_ne!(intent_verifier(&a, "s"), intent_verifier(&b, "s"));
        assert_ne!(intent_verifier(&a, "s"), intent_nonce(&a, "s"));
        assert_eq!(intent_verifier(&a, "s").len(), 64);
    }

    #[test]
    fn a_return_path_is_a_path_on_this_origin_only() {
        for ok in ["/", "/rooms", "/runs/run_1?status=running", "/account/room-sources/claim", "/a/b//c"] {
            assert_eq!(ReturnPath::parse(ok).map(|r| r.as_str().to_owned()).as_deref(), Some(ok), "{ok}");
        }
        let long = format!("/{}", "a".repeat(ReturnPath::MAX_LEN));
        for bad in [
            "",
            "rooms",
            "//evil.example",
            "//evil.example/rooms",
            "/\\evil.example",
            "/rooms\\..\\x",
            "https://evil.example/",
            "javascript:alert(1)",
            " /rooms",
            "/rooms\tx",
            "/rooms x",
            "/r\u{e9}",
            "/\r\nSet-Cookie:x=1",
            long.as_str(),
        ] {
            assert_eq!(ReturnPath::parse(bad), None, "{bad:?}");
        }
    }
}
