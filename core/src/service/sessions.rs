//! Browser sessions and sign-in intents. A session is `SESSION#<sha256(token)>` with an
//! idle expiry (the TTL, slid forward on use) capped by an absolute one; the raw token
//! exists only in the `helix_session` cookie. A sign-in intent is
//! `INTENT#<sha256(state)>`, bound to a browser secret by its hash, expiring, and
//! consumed by a conditional delete. Must not depend on `http`.

use crate::domain::account::{AccountPolicy, BrowserSecret, IntentPurpose, account_ref};
use crate::error::ApiError;
use crate::store::{Cond, EXPIRES_AT, Item, StoreError, WriteOp};

use super::Services;
use super::accounts::{LinkIdentity, policy_of};
use super::records::{account_key, intent_key, link_key, session_key};

/// How long a sign-in intent stays usable.
pub const INTENT_TTL_SECS: i64 = 600;
/// A used session's idle expiry is written again at most this often.
const IDLE_REFRESH_SECS: i64 = 300;

/// A resolved browser session: its account and the account's current policy.
#[derive(Clone)]
pub struct Session {
    pub token_hash: String,
    pub account_id: String,
    pub policy: AccountPolicy,
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
}

/// A stored intent, consumed.
#[derive(Debug, Clone)]
pub struct Intent {
    pub purpose: IntentPurpose,
    /// For a step-up: the session that asked for it.
    pub session_hash: Option<String>,
    pub created_at: i64,
}

impl Services {
    /// Stores a sign-in intent for `state`, bound to the browser secret.
    pub async fn create_intent(
        &self,
        state: &str,
        browser: &BrowserSecret,
        purpose: IntentPurpose,
        session: Option<&Session>,
    ) -> Result<(), ApiError> {
        let now = self.clock.epoch();
        let key = intent_key(&crate::domain::sha256_hex(state));
        let mut item = Item::new(key.pk, key.sk)
            .with_s("browser_hash", browser.hash())
            .with_s("purpose", purpose.as_str())
            .with_n("created_at", now)
            .with_n(EXPIRES_AT, now + INTENT_TTL_SECS);
        if let Some(s) = session {
            item = item.with_s("session_hash", &s.token_hash);
        }
        self.store.put(item, Some(Cond::NotExists)).await?;
        Ok(())
    }

    /// Consumes the intent of `state` once: a conditional delete that holds only for a live
    /// intent bound to this browser. Unknown, expired, replayed or foreign: `sign_in_failed`.
    pub async fn consume_intent(&self, state: &str, browser: &BrowserSecret) -> Result<Intent, ApiError> {
        let key = intent_key(&crate::domain::sha256_hex(state));
        let failed = || ApiError::SignInFailed { reason: "state" };
        let item = self.store.get(&key).await?.ok_or_else(failed)?;
        let cond = Cond::And(vec![Cond::Exists, Cond::eq_s("browser_hash", browser.hash())]);
        match self.store.transact(vec![WriteOp::Delete { key, cond: Some(cond) }]).await {
            Ok(()) => {}
            Err(StoreError::TransactionCanceled { .. }) => return Err(failed()),
            Err(e) => return Err(e.into()),
        }
        if item.is_expired(self.clock.epoch()) {
            return Err(failed());
        }
        Ok(Intent {
            purpose: item.s("purpose").and_then(IntentPurpose::parse).ok_or_else(failed)?,
            session_hash: item.s("session_hash").map(str::to_owned),
            created_at: item.n("created_at").unwrap_or(0),
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
        for _ in 0..4 {
            let lkey = link_key(id.provider, id.subject);
            let link = self.store.get(&lkey).await?;
            let account_id = link
                .as_ref()
                .and_then(|l| l.s("account_id"))
                .map(str::to_owned)
                .unwrap_or_else(|| crate::domain::account::account_id_for(id.provider, id.subject));
            let account = self.store.get(&account_key(&account_id)).await?;
            let (account_id, mut ops) =
                self.ensure_account_ops(id.provider, id.subject, link.as_ref(), account.as_ref())?;
            if link.is_some() {
                ops.push(WriteOp::Check { key: lkey, cond: Cond::eq_s("status", "active") });
            }
            let token = BrowserSecret::generate();
            ops.push(WriteOp::Put { item: self.session_item(&token.hash(), &account_id), cond: Some(Cond::NotExists) });
            if let Some(old) = previous.filter(|p| p.hash() != token.hash()) {
                ops.push(WriteOp::Delete { key: session_key(&old.hash()), cond: None });
            }
            match self.store.transact(ops).await {
                Ok(()) => return Ok(token),
                Err(StoreError::TransactionCanceled { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::Unavailable(Box::new(std::io::Error::other("sign-in lost every race"))))
    }

    fn session_item(&self, token_hash: &str, account_id: &str) -> Item {
        let now = self.clock.epoch();
        let b = &self.config.browser;
        let absolute = now + b.session_absolute.as_secs() as i64;
        let key = session_key(token_hash);
        Item::new(key.pk, key.sk)
            .with_s("account_id", account_id)
            .with_n("created_at", now)
            .with_n("refreshed_at", now)
            .with_n("absolute_until", absolute)
            .with_n(EXPIRES_AT, (now + b.session_idle.as_secs() as i64).min(absolute))
    }

    /// The live session of a cookie value, with its account's current policy; None when
    /// unknown, expired (idle or absolute) or its account is gone. Slides the idle expiry.
    pub async fn resolve_session(&self, token: &BrowserSecret) -> Result<Option<Session>, ApiError> {
        let now = self.clock.epoch();
        let key = session_key(&token.hash());
        let Some(item) = self.store.get(&key).await?.filter(|i| !i.is_expired(now)) else { return Ok(None) };
        let absolute = item.n("absolute_until").unwrap_or(0);
        if absolute <= now {
            return Ok(None);
        }
        let Some(account_id) = item.s("account_id").map(str::to_owned) else { return Ok(None) };
        let Some(account) =
            self.store.get(&account_key(&account_id)).await?.filter(|a| a.s("status") == Some("active"))
        else {
            return Ok(None);
        };
        if now - item.n("refreshed_at").unwrap_or(0) >= IDLE_REFRESH_SECS {
            let idle = now + self.config.browser.session_idle.as_secs() as i64;
            let fresh = item.clone().with_n("refreshed_at", now).with_n(EXPIRES_AT, idle.min(absolute));
            let cond = Cond::And(vec![Cond::Exists, Cond::eq_s("account_id", &account_id)]);
            match self.store.put(fresh, Some(cond)).await {
                Ok(()) => {}
                // Signed out in between: no session.
                Err(StoreError::ConditionFailed { .. }) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Some(Session { token_hash: token.hash(), account_id, policy: policy_of(&account) }))
    }

    /// The session of a stored hash (the step-up's originating session), if still live.
    pub async fn session_by_hash(&self, token_hash: &str) -> Result<Option<Session>, ApiError> {
        let now = self.clock.epoch();
        let Some(item) = self.store.get(&session_key(token_hash)).await?.filter(|i| !i.is_expired(now)) else {
            return Ok(None);
        };
        if item.n("absolute_until").unwrap_or(0) <= now {
            return Ok(None);
        }
        let Some(account_id) = item.s("account_id").map(str::to_owned) else { return Ok(None) };
        let account = self.store.get(&account_key(&account_id)).await?.filter(|a| a.s("status") == Some("active"));
        Ok(account.map(|a| Session { token_hash: token_hash.to_owned(), account_id, policy: policy_of(&a) }))
    }

    /// Sign-out: the session item is deleted (idempotent).
    pub async fn sign_out(&self, token: &BrowserSecret) -> Result<(), ApiError> {
        self.store.transact(vec![WriteOp::Delete { key: session_key(&token.hash()), cond: None }]).await?;
        Ok(())
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
