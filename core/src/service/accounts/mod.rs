//! Accounts: the trusted link path (operators' adapters, `helix dev-token`, the OIDC
//! callback), principal resolution (one BatchGetItem: link + agent binding + account
//! policy), the operator's policy path (`operator`), and agent-binding management for a
//! session (`bindings`). Every mutation is one transaction; none is reachable with
//! caller-supplied identity. Items are read and written as `records::accounts` records
//! only. The first feature service: must not depend on sources, rooms or runs, nor on
//! `http` or `mcp`.

mod bindings;
mod identity;
mod operator;

use std::sync::Arc;

use serde::Serialize;

use crate::auth::jwt::VerifiedToken;
use crate::auth::principal::{Principal, PrincipalIdentity, binding_hash};
use crate::domain::account::{AccountPolicy, account_id_for};
use crate::domain::time::rfc3339;
use crate::error::ApiError;
use crate::store::{Cond, Item, Key};

pub use super::records::accounts::BindingStatus;
use super::records::accounts::{AccountRecord, BindingRecord, LinkRecord, binding_without_generation};
use super::records::{Role, Tx, account_key, binding_key, link_key};
use super::{Caller, Ctx};

/// How many binding entries one account lists (and searches on revoke).
pub const MAX_BINDINGS: usize = 100;
/// Bounded retries of a transaction that lost a race with a concurrent writer.
const RACE_RETRIES: usize = 4;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkIdentity<'a> {
    pub issuer: &'a str,
    pub tenant: &'a str,
    pub provider: &'a str,
    pub subject: &'a str,
}

impl LinkIdentity<'_> {
    pub fn hash(&self) -> String {
        binding_hash(self.issuer, self.tenant, self.provider, self.subject)
    }
}

/// One binding as the account sees it: no subject, tenant id or token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct BindingView {
    pub binding_ref: String,
    pub issuer: String,
    pub tenant_ref: String,
    pub provider: String,
    /// `active` or `revoked`.
    pub status: String,
    pub created_at: String,
    pub updated_at: String,
    pub revoked_at: Option<String>,
    pub subject_included: bool,
    pub bearer_included: bool,
}

/// `helix.agent_account_bindings.v1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct BindingList {
    pub schema: &'static str,
    /// At least one active binding exists (binding readiness only).
    pub oauth_ready: bool,
    pub bindings: Vec<BindingView>,
}

pub const BINDING_LIST_SCHEMA: &str = "helix.agent_account_bindings.v1";
pub const REVOCATION_SCHEMA: &str = "helix.agent_account_binding_revocation.v1";

/// The receipt of a revocation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Revocation {
    pub schema: &'static str,
    pub binding_ref: String,
    pub binding_status: &'static str,
    /// `revoked` or `already_revoked`.
    pub revocation_status: &'static str,
    pub subject_included: bool,
    pub bearer_included: bool,
}

/// What the operator sees of an account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AccountView {
    pub account_ref: String,
    pub status: String,
    pub created_at: String,
    pub policy: AccountPolicy,
    pub bindings: BindingList,
}

/// The account a link names, else the one a first link of this subject would create.
fn account_id_of(link: Option<&Item>, provider: &str, subject: &str) -> String {
    link.and_then(|l| LinkRecord::from_item(l).account_id).unwrap_or_else(|| account_id_for(provider, subject))
}

/// Accounts, agent bindings, browser sessions and sign-in intents, and the operator's
/// policy path.
#[derive(Clone)]
pub struct AccountService {
    ctx: Ctx,
    identities: Arc<identity::IdentityMemo>,
}

impl std::ops::Deref for AccountService {
    type Target = Ctx;
    fn deref(&self) -> &Ctx {
        &self.ctx
    }
}

impl AccountService {
    pub(crate) fn new(ctx: Ctx) -> Self {
        let identities = Arc::new(identity::IdentityMemo::new(&ctx.config.oauth.provider));
        Self { ctx, identities }
    }

    /// The binding hash of a verified token's identity under the configured provider
    /// (what the principal's rate-limit window and receipts are keyed by).
    pub fn token_identity(&self, token: &VerifiedToken) -> String {
        self.identities.keys(&token.issuer, &token.tenant, &token.subject).identity.clone()
    }

    /// The writes that make sure the link and its account exist (`link`, `account`: as read).
    /// Returns the account id and the actions (empty when both exist).
    pub(crate) fn ensure_account_ops(
        &self,
        provider: &str,
        subject: &str,
        link: Option<&Item>,
        account: Option<&Item>,
    ) -> Result<(String, Tx), ApiError> {
        let now = rfc3339(self.clock.now());
        let mut tx = Tx::new();
        let account_id = match link.map(LinkRecord::from_item) {
            Some(l) => l.linked_account().ok_or(ApiError::AccountNotLinked)?.to_owned(),
            None => {
                let account_id = account_id_for(provider, subject);
                tx.put(Role::Link, LinkRecord::new(&account_id, &now).to_item(provider, subject), Cond::NotExists);
                account_id
            }
        };
        match account.map(AccountRecord::from_item) {
            Some(a) if !a.is_active() => return Err(ApiError::AccountNotLinked),
            Some(_) => {}
            None => {
                tx.put(Role::Account, AccountRecord::new(&now).to_item(&account_id), Cond::NotExists);
            }
        }
        Ok((account_id, tx))
    }

    /// Trusted link path (`helix dev-token`, `helix link-account`): the link, its account and
    /// the agent binding for this exact identity, created in one transaction. An existing
    /// binding is left as it is: a revoked one is not reactivated here.
    pub async fn link_account(&self, id: &LinkIdentity<'_>) -> Result<(String, BindingStatus), ApiError> {
        for _ in 0..RACE_RETRIES {
            let lkey = link_key(id.provider, id.subject);
            let bkey = binding_key(&id.hash());
            let found = self.store.batch_get(&[lkey.clone(), bkey.clone()]).await?;
            let (link, binding) = (found[0].clone(), found[1].clone());
            let account_id = account_id_of(link.as_ref(), id.provider, id.subject);
            let account = self.store.get(&account_key(&account_id)).await?;
            let (account_id, mut tx) =
                self.ensure_account_ops(id.provider, id.subject, link.as_ref(), account.as_ref())?;
            let status = match binding.as_ref().map(BindingRecord::from_item) {
                Some(b) if b.account_id != account_id => return Err(ApiError::AccountNotLinked),
                // Written before bindings had generations and listing entries: give it both,
                // keeping its status, so the account can see and revoke it.
                Some(old) if old.generation.is_none() => {
                    let (mut binding, mut entry) = self.grant(id, &account_id, None);
                    (binding.status, entry.status) = (old.status, old.status);
                    if let Some(at) = &old.created_at {
                        (binding.created_at, entry.created_at) = (Some(at.clone()), at.clone());
                    }
                    if let Some(at) = &old.revoked_at {
                        (binding.revoked_at, entry.revoked_at) = (Some(at.clone()), Some(at.clone()));
                    }
                    tx.put(Role::AgentBinding, binding.to_item(&id.hash()), binding_without_generation());
                    tx.put(Role::AccountEntry, entry.to_item(&account_id), Cond::NotExists);
                    old.status
                }
                Some(b) => b.status,
                None => {
                    let (binding, entry) = self.grant(id, &account_id, None);
                    tx.put(Role::AgentBinding, binding.to_item(&id.hash()), Cond::NotExists);
                    tx.put(Role::AccountEntry, entry.to_item(&account_id), Cond::NotExists);
                    BindingStatus::Active
                }
            };
            if tx.is_empty() {
                return Ok((account_id, status));
            }
            match tx.commit(&*self.store).await {
                Ok(()) => return Ok((account_id, status)),
                Err(f) if f.is_cancelled() => continue,
                Err(f) => return Err(f.into()),
            }
        }
        Err(ApiError::Unavailable(Box::new(std::io::Error::other("link_account lost every race"))))
    }

    /// Resolves a verified token to its principal (or `account_not_linked`) and, in the
    /// same BatchGetItem, reads the account policy and the data keys the request will
    /// need (`data` may use the token identity, e.g. for receipt keys).
    pub async fn resolve_with(
        &self,
        token: VerifiedToken,
        data: impl FnOnce(&str) -> Vec<Key>,
    ) -> Result<Caller, ApiError> {
        let ids = self.identities.keys(&token.issuer, &token.tenant, &token.subject);
        let data_keys = data(&ids.identity);
        let mut keys = vec![ids.link.clone(), ids.binding.clone(), ids.account.clone()];
        keys.extend(data_keys.iter().cloned());
        let mut found = self.store.batch_get(&keys).await?.into_iter();
        let (link, binding, account) = (found.next().flatten(), found.next().flatten(), found.next().flatten());
        let prefetched: Vec<(Key, Option<Item>)> = data_keys.into_iter().zip(found).collect();
        let link = link.map(|l| LinkRecord::from_item(&l));
        let account_id = link.as_ref().and_then(LinkRecord::linked_account).ok_or(ApiError::AccountNotLinked)?;
        let account_id = account_id.to_owned();
        let binding = binding.map(|b| BindingRecord::from_item(&b));
        let binding = binding.filter(BindingRecord::is_active).ok_or(ApiError::AccountNotLinked)?;
        if binding.account_id != account_id {
            return Err(ApiError::AccountNotLinked);
        }
        // A link made before account ids were derived names its account: one more read.
        let derived = account_id == ids.derived_account;
        let account = if derived { account } else { self.store.get(&account_key(&account_id)).await? };
        let account = account.map(|a| AccountRecord::from_item(&a));
        let account = account.filter(AccountRecord::is_active).ok_or(ApiError::AccountNotLinked)?;
        let who = PrincipalIdentity {
            issuer: token.issuer,
            tenant: token.tenant,
            provider: self.config.oauth.provider.clone(),
            subject: token.subject,
        };
        let principal = if derived {
            let (owner, identity) = (ids.derived_owner.clone(), ids.identity.clone());
            Principal::with_hashes(who, account_id, token.scopes, account.policy, owner, identity)
        } else {
            Principal::new(who, account_id, token.scopes, account.policy)
        };
        Ok(Caller::with_prefetched(principal, prefetched))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::{Config, DefaultMode};
    use crate::executor::scripted::ScriptedExecutor;
    use crate::service::records::accounts::AccountStatus;

    fn services() -> AccountService {
        let config = Config::from_lookup(DefaultMode::Development, &|name| match name {
            "HELIX_AGENT_OAUTH_JWKS_URL" => Some("http://127.0.0.1:9/jwks.json".into()),
            _ => None,
        })
        .expect("development defaults");
        let store = Arc::new(crate::store::NoStore);
        crate::service::Services::new(config, store, Arc::new(ScriptedExecutor::new(vec![], None))).accounts.clone()
    }

    fn link(account_id: Option<&str>, active: bool) -> Item {
        let mut record = LinkRecord::new(account_id.unwrap_or("acct_x"), "t");
        record.account_id = account_id.map(str::to_owned);
        if !active {
            record.status = crate::service::records::accounts::LinkStatus::Inactive;
        }
        record.to_item("p", "s")
    }

    fn account(status: AccountStatus) -> Item {
        AccountRecord { status, ..AccountRecord::new("t") }.to_item("acct_l")
    }

    /// The account id and the roles written, or a refusal.
    type Expected<'a> = Result<(&'a str, &'a [Role]), ()>;

    #[test]
    fn ensuring_an_account_writes_only_what_is_missing_and_refuses_what_is_not_active() {
        let derived = account_id_for("p", "s");
        let active = account(AccountStatus::Active);
        let closed = account(AccountStatus::Other("closed".into()));
        let linked = link(Some("acct_l"), true);
        let cases: Vec<(&str, Option<Item>, Option<&Item>, Expected)> = vec![
            ("first sign-in", None, None, Ok((&derived, &[Role::Link, Role::Account]))),
            ("link only", Some(linked.clone()), None, Ok(("acct_l", &[Role::Account]))),
            ("both exist", Some(linked.clone()), Some(&active), Ok(("acct_l", &[]))),
            ("account without its link", None, Some(&active), Ok((&derived, &[Role::Link]))),
            ("inactive link", Some(link(Some("acct_l"), false)), None, Err(())),
            ("link without account", Some(link(None, true)), None, Err(())),
            ("account not active", Some(linked), Some(&closed), Err(())),
        ];
        let s = services();
        for (case, link, account, expected) in cases {
            let got = s.ensure_account_ops("p", "s", link.as_ref(), account);
            match (got, expected) {
                (Ok((id, tx)), Ok((want_id, roles))) => {
                    assert_eq!(id, want_id, "{case}");
                    assert_eq!(tx.len(), roles.len(), "{case}");
                    assert!(roles.iter().all(|r| tx.has(*r)), "{case}");
                }
                (Err(e), Err(())) => assert!(matches!(e, ApiError::AccountNotLinked), "{case}: {e:?}"),
                (got, _) => panic!("{case}: unexpected {:?}", got.map(|(id, tx)| (id, tx.len()))),
            }
        }
    }

    #[test]
    fn the_account_of_a_subject_is_the_linked_one_else_the_derived_one() {
        let derived = account_id_for("p", "s");
        for (link, want) in [
            (None, derived.clone()),
            (Some(link(Some("acct_l"), true)), "acct_l".to_owned()),
            (Some(link(Some("acct_l"), false)), "acct_l".to_owned()),
            (Some(link(None, true)), derived.clone()),
        ] {
            assert_eq!(account_id_of(link.as_ref(), "p", "s"), want);
        }
    }
}
