//! Browser sessions and sign-in intents. A session is `SESSION#<sha256(token)>` with an
//! idle expiry (the TTL, slid forward on use) capped by an absolute one; the raw token
//! exists only in the `helix_session` cookie. A sign-in intent is
//! `INTENT#<sha256(state)>`, bound to a browser secret by its hash, expiring, and
//! consumed by a conditional delete. Part of the accounts feature: must not depend on
//! sources, rooms or runs, nor on `http`.

use crate::domain::account::{
    AccountPolicy, BrowserSecret, IntentPurpose, ReturnPath, account_id_for, account_ref, owner_hash, tenant_ref,
};
use crate::domain::time::rfc3339;
use crate::error::ApiError;
use crate::store::{Cond, StoreError};

use super::AccountService;
use super::accounts::LinkIdentity;
use super::records::accounts::{
    AccountRecord, LinkRecord, clean_display_name, display_names, link_is_active, profile_item,
};
use super::records::sessions::{IntentRecord, SessionRecord, intent_of_browser, session_of};
use super::records::{Role, Tx, account_key, intent_key, link_key, session_key};

/// How long a sign-in intent stays usable.
pub const INTENT_TTL_SECS: i64 = 600;
/// A used session's idle expiry is written again at most this often (and at least every
/// half idle timeout, so a session in constant use never expires; see `refresh_interval`).
const IDLE_REFRESH_SECS: i64 = 300;

/// A resolved browser session: its account, the account's current policy, the tenant
/// reference of the identity it signed in with (none for a session signed in before
/// tenants were recorded) and that identity's owner tuple hash (none for a session signed
/// in before it was recorded: such a session reaches no run).
#[derive(Clone)]
pub struct Session {
    pub token_hash: String,
    pub account_id: String,
    pub policy: AccountPolicy,
    pub tenant_ref: Option<String>,
    pub owner_hash: Option<String>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Session({})", self.account_ref())
    }
}

impl Session {
    pub fn account_ref(&self) -> String {
        account_ref(&self.account_id)
    }

    /// A guest is refused on every lane that needs a signed-in browser.
    pub fn require_member(&self) -> Result<(), ApiError> {
        if self.policy.guest { Err(ApiError::GuestNotAllowed) } else { Ok(()) }
    }

    /// Adds the action that re-checks this session (still live, same account) to a
    /// transaction that acts for it; its refusal is read as [`Role::Session`].
    pub(crate) fn recheck(&self, tx: &mut Tx) {
        tx.check(Role::Session, session_key(&self.token_hash), session_of(&self.account_id));
    }
}

/// A stored intent, consumed.
#[derive(Debug, Clone)]
pub struct Intent {
    pub purpose: IntentPurpose,
    /// For a step-up: the session that asked for it.
    pub session_hash: Option<String>,
    /// The page to land on after a sign-in (a [`crate::domain::account::ReturnPath`]).
    pub return_to: Option<String>,
    pub created_at: i64,
}

impl AccountService {
    /// Stores a sign-in intent for `state`, bound to the browser secret.
    pub async fn create_intent(
        &self,
        state: &str,
        browser: &BrowserSecret,
        purpose: IntentPurpose,
        session: Option<&Session>,
        return_to: Option<&ReturnPath>,
    ) -> Result<(), ApiError> {
        let now = self.clock.epoch();
        let intent = IntentRecord {
            browser_hash: browser.hash(),
            purpose,
            session_hash: session.map(|s| s.token_hash.clone()),
            return_to: return_to.map(|r| r.as_str().to_owned()),
            created_at: now,
            expires_at: now + INTENT_TTL_SECS,
        };
        self.store.put(intent.to_item(&crate::domain::sha256_hex(state)), Some(Cond::NotExists)).await?;
        Ok(())
    }

    /// Consumes the intent of `state` once: a conditional delete that holds only for a live
    /// intent bound to this browser. Unknown, expired, replayed or foreign: `sign_in_failed`.
    pub async fn consume_intent(&self, state: &str, browser: &BrowserSecret) -> Result<Intent, ApiError> {
        let key = intent_key(&crate::domain::sha256_hex(state));
        let failed = || ApiError::SignInFailed { reason: "state" };
        let item = self.store.get(&key).await?.ok_or_else(failed)?;
        let mut tx = Tx::new();
        tx.delete(Role::Intent, key, intent_of_browser(&browser.hash()));
        match tx.commit(&*self.store).await {
            Ok(()) => {}
            Err(f) if f.is_cancelled() => return Err(failed()),
            Err(f) => return Err(f.into()),
        }
        if item.is_expired(self.clock.epoch()) {
            return Err(failed());
        }
        let intent = IntentRecord::from_item(&item).ok_or_else(failed)?;
        Ok(Intent {
            purpose: intent.purpose,
            session_hash: intent.session_hash,
            // Checked again on the way out: a stored value is not trusted as a redirect.
            return_to: intent.return_to.filter(|r| ReturnPath::parse(r).is_some()),
            created_at: intent.created_at,
        })
    }

    /// The trusted adapter's sign-in: makes sure the identity's account and link exist and
    /// opens a fresh session, all in one transaction; the previous session (rotation) is
    /// deleted in the same transaction. Returns the new session token.
    pub async fn sign_in(
        &self,
        id: &LinkIdentity<'_>,
        previous: Option<&BrowserSecret>,
    ) -> Result<BrowserSecret, ApiError> {
        self.sign_in_named(id, None, previous).await
    }

    /// [`Self::sign_in`], keeping the name the provider gave the person (cleaned; None or
    /// an empty name keeps the one stored before) on the account's profile, in the same
    /// transaction as the session.
    pub async fn sign_in_named(
        &self,
        id: &LinkIdentity<'_>,
        display_name: Option<&str>,
        previous: Option<&BrowserSecret>,
    ) -> Result<BrowserSecret, ApiError> {
        let display_name = display_name.and_then(clean_display_name);
        for _ in 0..4 {
            let lkey = link_key(id.provider, id.subject);
            let link = self.store.get(&lkey).await?;
            let account_id = link
                .as_ref()
                .and_then(|l| LinkRecord::from_item(l).account_id)
                .unwrap_or_else(|| account_id_for(id.provider, id.subject));
            let account = self.store.get(&account_key(&account_id)).await?;
            let (account_id, mut tx) =
                self.ensure_account_ops(id.provider, id.subject, link.as_ref(), account.as_ref())?;
            if link.is_some() {
                tx.check(Role::Link, lkey, link_is_active());
            }
            let token = BrowserSecret::generate();
            tx.put(Role::Session, self.new_session(&account_id, id).to_item(&token.hash()), Cond::NotExists);
            if let Some(name) = &display_name {
                tx.put(Role::Account, profile_item(&account_id, name, &rfc3339(self.clock.now())), None);
            }
            if let Some(old) = previous.filter(|p| p.hash() != token.hash()) {
                tx.delete(Role::Session, session_key(&old.hash()), None);
            }
            match tx.commit(&*self.store).await {
                Ok(()) => return Ok(token),
                Err(f) if f.is_cancelled() => continue,
                Err(f) => return Err(f.into()),
            }
        }
        Err(ApiError::Unavailable(Box::new(std::io::Error::other("sign-in lost every race"))))
    }

    fn new_session(&self, account_id: &str, id: &LinkIdentity<'_>) -> SessionRecord {
        let now = self.clock.epoch();
        let b = &self.config.browser;
        let absolute = now + b.session_absolute.as_secs() as i64;
        SessionRecord {
            account_id: account_id.to_owned(),
            created_at: now,
            refreshed_at: now,
            absolute_until: absolute,
            expires_at: (now + b.session_idle.as_secs() as i64).min(absolute),
            tenant_ref: Some(tenant_ref(id.issuer, id.tenant)),
            owner_hash: Some(owner_hash(id.tenant, id.issuer, id.provider, id.subject, account_id)),
        }
    }

    /// The live session record under `token_hash` with its active account, if any.
    async fn live_session(
        &self,
        token_hash: &str,
        now: i64,
    ) -> Result<Option<(SessionRecord, AccountRecord)>, ApiError> {
        let Some(item) = self.store.get(&session_key(token_hash)).await?.filter(|i| !i.is_expired(now)) else {
            return Ok(None);
        };
        let Some(session) = SessionRecord::from_item(&item).filter(|s| s.absolute_until > now) else {
            return Ok(None);
        };
        let account = self.store.get(&account_key(&session.account_id)).await?;
        Ok(account.map(|a| AccountRecord::from_item(&a)).filter(AccountRecord::is_active).map(|a| (session, a)))
    }

    /// The names the sign-in provider gave these accounts' people (those that have one).
    pub async fn display_names(
        &self,
        account_ids: &[String],
    ) -> Result<std::collections::HashMap<String, String>, ApiError> {
        Ok(display_names(&*self.store, account_ids).await?)
    }

    /// The name of the session's person, if their provider gave one.
    pub async fn display_name(&self, s: &Session) -> Result<Option<String>, ApiError> {
        Ok(self.display_names(std::slice::from_ref(&s.account_id)).await?.remove(&s.account_id))
    }

    /// The live session of a cookie value, with its account's current policy; None when
    /// unknown, expired (idle or absolute) or its account is gone. Slides the idle expiry.
    pub async fn resolve_session(&self, token: &BrowserSecret) -> Result<Option<Session>, ApiError> {
        let now = self.clock.epoch();
        let token_hash = token.hash();
        let Some((session, account)) = self.live_session(&token_hash, now).await? else { return Ok(None) };
        if needs_refresh(&session, now, self.config.browser.session_idle.as_secs() as i64) {
            let idle = now + self.config.browser.session_idle.as_secs() as i64;
            let fresh =
                SessionRecord { refreshed_at: now, expires_at: idle.min(session.absolute_until), ..session.clone() };
            match self.store.put(fresh.to_item(&token_hash), Some(session_of(&session.account_id))).await {
                Ok(()) => {}
                // Signed out in between: no session.
                Err(StoreError::ConditionFailed { .. }) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Some(Session {
            token_hash,
            account_id: session.account_id,
            policy: account.policy,
            tenant_ref: session.tenant_ref,
            owner_hash: session.owner_hash,
        }))
    }

    /// The session of a stored hash (the step-up's originating session), if still live.
    pub async fn session_by_hash(&self, token_hash: &str) -> Result<Option<Session>, ApiError> {
        let now = self.clock.epoch();
        let live = self.live_session(token_hash, now).await?;
        Ok(live.map(|(s, a)| Session {
            token_hash: token_hash.to_owned(),
            account_id: s.account_id,
            policy: a.policy,
            tenant_ref: s.tenant_ref,
            owner_hash: s.owner_hash,
        }))
    }

    /// Sign-out: the session item is deleted (idempotent).
    pub async fn sign_out(&self, token: &BrowserSecret) -> Result<(), ApiError> {
        let mut tx = Tx::new();
        tx.delete(Role::Session, session_key(&token.hash()), None);
        Ok(tx.commit(&*self.store).await?)
    }

    /// Development path (`helix dev-session`): the account of this identity (created with its
    /// link if needed, the same account `helix dev-token` links) and a fresh session.
    pub async fn dev_session(&self, id: &LinkIdentity<'_>) -> Result<BrowserSecret, ApiError> {
        if self.config.mode == crate::config::Mode::Production {
            return Err(ApiError::NotFound);
        }
        self.sign_in(id, None).await
    }
}

/// How old a session's last slide may get before a use writes it again: five minutes,
/// or half the idle timeout when that is shorter, so a session used more often than its
/// idle timeout always has its expiry slid before it passes.
fn refresh_interval(idle_secs: i64) -> i64 {
    IDLE_REFRESH_SECS.min(idle_secs / 2)
}

/// A used session's idle expiry is written again only once it is `refresh_interval` old,
/// so most requests of a busy browser cost no write.
fn needs_refresh(session: &SessionRecord, now: i64, idle_secs: i64) -> bool {
    now - session.refreshed_at >= refresh_interval(idle_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(guest: bool) -> Session {
        Session {
            token_hash: "th".into(),
            account_id: "acct_a".into(),
            policy: AccountPolicy { guest, ..Default::default() },
            tenant_ref: None,
            owner_hash: None,
        }
    }

    #[test]
    fn a_guest_is_refused_where_a_member_is_required() {
        for (guest, allowed) in [(false, true), (true, false)] {
            let got = session(guest).require_member();
            assert_eq!(got.is_ok(), allowed);
            if !allowed {
                assert!(matches!(got, Err(ApiError::GuestNotAllowed)));
            }
        }
    }

    #[test]
    fn the_idle_expiry_is_written_again_only_after_the_refresh_interval() {
        let record = |refreshed_at| SessionRecord {
            account_id: "acct_a".into(),
            created_at: 0,
            refreshed_at,
            absolute_until: i64::MAX,
            expires_at: i64::MAX,
            tenant_ref: None,
            owner_hash: None,
        };
        let hours = 7200;
        for (refreshed_at, now, refresh) in [
            (1000, 1000, false),
            (1000, 1000 + IDLE_REFRESH_SECS - 1, false),
            (1000, 1000 + IDLE_REFRESH_SECS, true),
            (0, 1000, true),
        ] {
            assert_eq!(needs_refresh(&record(refreshed_at), now, hours), refresh, "{refreshed_at} at {now}");
        }
        // A short idle timeout slides at half of it, never at the five minutes.
        assert_eq!(refresh_interval(120), 60);
        assert_eq!(refresh_interval(600), IDLE_REFRESH_SECS);
        assert!(needs_refresh(&record(1000), 1060, 120));
        assert!(!needs_refresh(&record(1000), 1059, 120));
    }

    #[test]
    fn a_session_recheck_is_one_action_read_as_the_session_role() {
        let mut tx = Tx::new();
        session(false).recheck(&mut tx);
        assert_eq!(tx.len(), 1);
        assert!(tx.has(Role::Session));
    }

    #[test]
    fn a_session_shows_only_its_account_reference() {
        let s = session(false);
        assert_eq!(format!("{s:?}"), format!("Session({})", account_ref("acct_a")));
        assert!(!format!("{s:?}").contains("th"));
    }
}
