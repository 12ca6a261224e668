//! Accounts: the trusted link path (operators' adapters, `helix dev-token`, the OIDC
//! callback), principal resolution (one BatchGetItem: link + agent binding + account
//! policy), the operator's policy path, and agent-binding management for a session.
//! Every mutation is one transaction; none is reachable with caller-supplied identity.

use chrono::SecondsFormat;
use serde::Serialize;

use crate::auth::jwt::VerifiedToken;
use crate::auth::principal::{Principal, binding_hash};
use crate::domain::account::{
    AccountPolicy, PolicyChange, account_id_for, account_ref, binding_ref, is_binding_ref, new_generation, tenant_ref,
};
use crate::error::ApiError;
use crate::store::{Attr, CancelReason, Cond, Item, Key, StoreError, WriteOp};

use super::records::{BINDING_ENTRY_PREFIX, account_key, binding_entry_key, binding_key, link_key, session_key};
use super::sessions::Session;
use super::{Caller, Services};

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BindingStatus {
    Active,
    Revoked,
}

impl BindingStatus {
    fn of(item: &Item) -> Self {
        if item.s("status") == Some("active") { BindingStatus::Active } else { BindingStatus::Revoked }
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

pub(crate) fn policy_of(item: &Item) -> AccountPolicy {
    let flag = |name: &str| item.n(name) == Some(1);
    AccountPolicy {
        rooms_locked: flag("rooms_locked"),
        developer: flag("developer"),
        guest: flag("guest"),
        denied_capabilities: item
            .s("denied_capabilities")
            .map(|s| s.split(',').filter(|c| !c.is_empty()).map(str::to_owned).collect())
            .unwrap_or_default(),
    }
}

fn with_policy(mut item: Item, policy: &AccountPolicy) -> Item {
    for (name, on) in [("rooms_locked", policy.rooms_locked), ("developer", policy.developer), ("guest", policy.guest)]
    {
        item.attrs.insert(name.into(), Attr::N(on as i64));
    }
    item.attrs.insert("denied_capabilities".into(), Attr::S(policy.denied_capabilities.join(",")));
    item
}

fn set(item: &mut Item, name: &str, value: impl Into<String>) {
    item.attrs.insert(name.into(), Attr::S(value.into()));
}

fn cancelled(e: &StoreError) -> bool {
    matches!(e, StoreError::TransactionCanceled { .. })
}

/// True when the transaction failed on the action at `index` (its condition).
fn failed_at(e: &StoreError, index: usize) -> bool {
    matches!(e, StoreError::TransactionCanceled { reasons } if matches!(reasons.get(index), Some(CancelReason::ConditionFailed { .. })))
}

impl Services {
    fn now_rfc3339(&self) -> String {
        self.clock.now().to_rfc3339_opts(SecondsFormat::Millis, true)
    }

    /// The writes that make sure the link and its account exist (`link`, `account`: as read).
    /// Returns the account id and the actions (empty when both exist).
    pub(crate) fn ensure_account_ops(
        &self,
        provider: &str,
        subject: &str,
        link: Option<&Item>,
        account: Option<&Item>,
    ) -> Result<(String, Vec<WriteOp>), ApiError> {
        let now = self.now_rfc3339();
        let mut ops = Vec::new();
        let account_id = match link {
            Some(l) if l.s("status") != Some("active") => return Err(ApiError::AccountNotLinked),
            Some(l) => l.s("account_id").ok_or(ApiError::AccountNotLinked)?.to_owned(),
            None => {
                let account_id = account_id_for(provider, subject);
                let key = link_key(provider, subject);
                let item = Item::new(key.pk, key.sk)
                    .with_s("account_id", &account_id)
                    .with_s("status", "active")
                    .with_s("created_at", &now);
                ops.push(WriteOp::Put { item, cond: Some(Cond::NotExists) });
                account_id
            }
        };
        match account {
            Some(a) if a.s("status") != Some("active") => return Err(ApiError::AccountNotLinked),
            Some(_) => {}
            None => {
                let key = account_key(&account_id);
                let item = with_policy(
                    Item::new(key.pk, key.sk)
                        .with_s("status", "active")
                        .with_s("created_at", &now)
                        .with_s("updated_at", &now),
                    &AccountPolicy::default(),
                );
                ops.push(WriteOp::Put { item, cond: Some(Cond::NotExists) });
            }
        }
        Ok((account_id, ops))
    }

    /// The binding item and its listing entry for a fresh grant (or a re-grant after revocation).
    fn grant_ops(&self, id: &LinkIdentity<'_>, account_id: &str, existing: Option<&Item>) -> (String, Vec<WriteOp>) {
        let now = self.now_rfc3339();
        let identity = id.hash();
        let generation = new_generation();
        let reference = binding_ref(&identity, &generation);
        let created_at = existing.and_then(|b| b.s("created_at")).unwrap_or(&now).to_owned();
        let key = binding_key(&identity);
        let binding = Item::new(key.pk, key.sk)
            .with_s("account_id", account_id)
            .with_s("status", "active")
            .with_s("generation", &generation)
            .with_s("created_at", &created_at)
            .with_s("updated_at", &now);
        let ekey = binding_entry_key(account_id, &identity);
        let entry = Item::new(ekey.pk, ekey.sk)
            .with_s("binding_ref", &reference)
            .with_s("generation", &generation)
            .with_s("issuer", id.issuer)
            .with_s("provider", id.provider)
            .with_s("tenant_ref", tenant_ref(id.issuer, id.tenant))
            .with_s("status", "active")
            .with_s("created_at", &created_at)
            .with_s("updated_at", &now);
        // A grant never takes over an active binding, nor one of another account.
        let cond = match existing {
            None => Cond::NotExists,
            Some(b) => Cond::And(vec![
                Cond::eq_s("status", "revoked"),
                Cond::eq_s("account_id", account_id),
                Cond::eq_s("generation", b.s("generation").unwrap_or_default()),
            ]),
        };
        let entry_cond = match existing {
            None => Cond::NotExists,
            Some(_) => Cond::Or(vec![Cond::NotExists, Cond::eq_s("status", "revoked")]),
        };
        (
            reference,
            vec![
                WriteOp::Put { item: binding, cond: Some(cond) },
                WriteOp::Put { item: entry, cond: Some(entry_cond) },
            ],
        )
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
            let account_id = link
                .as_ref()
                .and_then(|l| l.s("account_id"))
                .map(str::to_owned)
                .unwrap_or_else(|| account_id_for(id.provider, id.subject));
            let account = self.store.get(&account_key(&account_id)).await?;
            let (account_id, mut ops) =
                self.ensure_account_ops(id.provider, id.subject, link.as_ref(), account.as_ref())?;
            let status = match &binding {
                Some(b) if b.s("account_id") != Some(account_id.as_str()) => return Err(ApiError::AccountNotLinked),
                // Written before bindings had generations and listing entries: give it both,
                // keeping its status, so the account can see and revoke it.
                Some(b) if b.s("generation").is_none() => {
                    let status = BindingStatus::of(b);
                    let (_, mut repair) = self.grant_ops(id, &account_id, None);
                    for op in &mut repair {
                        if let WriteOp::Put { item, .. } = op {
                            set(item, "status", if status == BindingStatus::Active { "active" } else { "revoked" });
                            if let Some(at) = b.s("created_at") {
                                set(item, "created_at", at);
                            }
                            if let Some(at) = b.s("revoked_at") {
                                set(item, "revoked_at", at);
                            }
                        }
                    }
                    if let Some(WriteOp::Put { cond, .. }) = repair.first_mut() {
                        *cond = Some(Cond::And(vec![Cond::Exists, Cond::Missing("generation".into())]));
                    }
                    ops.extend(repair);
                    status
                }
                Some(b) => BindingStatus::of(b),
                None => {
                    ops.extend(self.grant_ops(id, &account_id, None).1);
                    BindingStatus::Active
                }
            };
            if ops.is_empty() {
                return Ok((account_id, status));
            }
            match self.store.transact(ops).await {
                Ok(()) => return Ok((account_id, status)),
                Err(e) if cancelled(&e) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::Unavailable(Box::new(std::io::Error::other("link_account lost every race"))))
    }

    /// Revokes the agent binding of an identity (trusted path; idempotent).
    pub async fn revoke_binding(&self, id: &LinkIdentity<'_>) -> Result<(), ApiError> {
        let bkey = binding_key(&id.hash());
        let Some(binding) = self.store.get(&bkey).await? else { return Err(ApiError::NotFound) };
        let account_id = binding.s("account_id").unwrap_or_default().to_owned();
        let entry = self.store.get(&binding_entry_key(&account_id, &id.hash())).await?.ok_or(ApiError::NotFound)?;
        match self.revoke_ops(None, &binding, &entry).await? {
            Some(ops) => Ok(self.store.transact(ops).await?),
            None => Ok(()),
        }
    }

    /// The writes of one revocation (None when already revoked), guarded by the session check.
    async fn revoke_ops(
        &self,
        session: Option<WriteOp>,
        binding: &Item,
        entry: &Item,
    ) -> Result<Option<Vec<WriteOp>>, ApiError> {
        if BindingStatus::of(binding) == BindingStatus::Revoked {
            return Ok(None);
        }
        let now = self.now_rfc3339();
        let generation = binding.s("generation").unwrap_or_default().to_owned();
        let mut b = binding.clone();
        let mut e = entry.clone();
        for item in [&mut b, &mut e] {
            set(item, "status", "revoked");
            set(item, "updated_at", &now);
            set(item, "revoked_at", &now);
        }
        let mut ops: Vec<WriteOp> = session.into_iter().collect();
        ops.push(WriteOp::Put {
            item: b,
            cond: Some(Cond::And(vec![Cond::eq_s("status", "active"), Cond::eq_s("generation", &generation)])),
        });
        ops.push(WriteOp::Put { item: e, cond: Some(Cond::eq_s("generation", &generation)) });
        Ok(Some(ops))
    }

    /// Resolves a verified token to its principal (or `account_not_linked`) and, in the
    /// same BatchGetItem, reads the account policy and the data keys the request will
    /// need (`data` may use the token identity, e.g. for receipt keys).
    pub async fn resolve_with(
        &self,
        token: VerifiedToken,
        data: impl FnOnce(&str) -> Vec<Key>,
    ) -> Result<Caller, ApiError> {
        let provider = self.config.oauth.provider.clone();
        let identity = binding_hash(&token.issuer, &token.tenant, &provider, &token.subject);
        let data_keys = data(&identity);
        let derived = account_id_for(&provider, &token.subject);
        let mut keys = vec![link_key(&provider, &token.subject), binding_key(&identity), account_key(&derived)];
        keys.extend(data_keys.iter().cloned());
        let mut found = self.store.batch_get(&keys).await?.into_iter();
        let (link, binding, account) = (found.next().flatten(), found.next().flatten(), found.next().flatten());
        let prefetched: Vec<(Key, Option<Item>)> = data_keys.into_iter().zip(found).collect();
        let link = link.filter(|l| l.s("status") == Some("active")).ok_or(ApiError::AccountNotLinked)?;
        let account_id = link.s("account_id").ok_or(ApiError::AccountNotLinked)?.to_owned();
        let binding = binding.filter(|b| b.s("status") == Some("active")).ok_or(ApiError::AccountNotLinked)?;
        if binding.s("account_id") != Some(account_id.as_str()) {
            return Err(ApiError::AccountNotLinked);
        }
        // A link made before account ids were derived names its account: one more read.
        let account = if account_id == derived { account } else { self.store.get(&account_key(&account_id)).await? };
        let account = account.filter(|a| a.s("status") == Some("active")).ok_or(ApiError::AccountNotLinked)?;
        let principal = Principal {
            issuer: token.issuer,
            tenant: token.tenant,
            provider,
            subject: token.subject,
            account_id,
            scopes: token.scopes,
            policy: policy_of(&account),
        };
        Ok(Caller::with_prefetched(principal, prefetched))
    }

    /// The account of a provider subject (operator path), or `not_found`.
    async fn account_of(&self, provider: &str, subject: &str) -> Result<(String, Item), ApiError> {
        let link = self.store.get(&link_key(provider, subject)).await?.ok_or(ApiError::NotFound)?;
        let account_id = link.s("account_id").ok_or(ApiError::NotFound)?.to_owned();
        let account = self.store.get(&account_key(&account_id)).await?.ok_or(ApiError::NotFound)?;
        Ok((account_id, account))
    }

    /// Operator path: the account of a provider subject with its policy and bindings.
    pub async fn show_account(&self, provider: &str, subject: &str) -> Result<AccountView, ApiError> {
        let (account_id, account) = self.account_of(provider, subject).await?;
        Ok(AccountView {
            account_ref: account_ref(&account_id),
            status: account.s("status").unwrap_or_default().to_owned(),
            created_at: account.s("created_at").unwrap_or_default().to_owned(),
            policy: policy_of(&account),
            bindings: self.list_bindings_of(&account_id).await?,
        })
    }

    /// Operator path: changes the account policy (takes effect on the next request).
    pub async fn set_policy(
        &self,
        provider: &str,
        subject: &str,
        change: &PolicyChange,
    ) -> Result<AccountPolicy, ApiError> {
        for _ in 0..RACE_RETRIES {
            let (_, account) = self.account_of(provider, subject).await?;
            let mut policy = policy_of(&account);
            policy.apply(change);
            let mut item = with_policy(account.clone(), &policy);
            set(&mut item, "updated_at", self.now_rfc3339());
            // Guarded by the previous update time, so two operators cannot lose each other's change.
            let cond = Cond::eq_s("updated_at", account.s("updated_at").unwrap_or_default());
            match self.store.put(item, Some(cond)).await {
                Ok(()) => return Ok(policy),
                Err(StoreError::ConditionFailed { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::Unavailable(Box::new(std::io::Error::other("policy update lost every race"))))
    }

    /// Sets only the denied capabilities (kept for callers of the earlier operator path).
    pub async fn set_denied_capabilities(&self, provider: &str, subject: &str, caps: &[&str]) -> Result<(), ApiError> {
        let change = PolicyChange {
            denied_capabilities: Some(caps.iter().map(|c| c.to_string()).collect()),
            ..Default::default()
        };
        self.set_policy(provider, subject, &change).await.map(|_| ())
    }

    async fn binding_entries(&self, account_id: &str) -> Result<Vec<Item>, ApiError> {
        let pk = account_key(account_id).pk;
        Ok(self.store.query(&pk, BINDING_ENTRY_PREFIX, None, MAX_BINDINGS).await?.items)
    }

    async fn list_bindings_of(&self, account_id: &str) -> Result<BindingList, ApiError> {
        let bindings: Vec<BindingView> = self
            .binding_entries(account_id)
            .await?
            .iter()
            .map(|e| BindingView {
                binding_ref: e.s("binding_ref").unwrap_or_default().to_owned(),
                issuer: e.s("issuer").unwrap_or_default().to_owned(),
                tenant_ref: e.s("tenant_ref").unwrap_or_default().to_owned(),
                provider: e.s("provider").unwrap_or_default().to_owned(),
                status: if e.s("status") == Some("active") { "active" } else { "revoked" }.to_owned(),
                created_at: e.s("created_at").unwrap_or_default().to_owned(),
                updated_at: e.s("updated_at").unwrap_or_default().to_owned(),
                revoked_at: e.s("revoked_at").map(str::to_owned),
                subject_included: false,
                bearer_included: false,
            })
            .collect();
        Ok(BindingList {
            schema: BINDING_LIST_SCHEMA,
            oauth_ready: bindings.iter().any(|b| b.status == "active"),
            bindings,
        })
    }

    /// The signed-in session's bindings.
    pub async fn list_bindings(&self, session: &Session) -> Result<BindingList, ApiError> {
        session.require_member()?;
        self.list_bindings_of(&session.account_id).await
    }

    /// Revokes one of the session's bindings by its opaque reference, idempotently. The
    /// transaction re-checks the session (same account) beside the binding writes; a
    /// reference of another account is not found.
    pub async fn revoke_binding_ref(&self, session: &Session, reference: &str) -> Result<Revocation, ApiError> {
        session.require_member()?;
        if !is_binding_ref(reference) {
            return Err(ApiError::NotFound);
        }
        for _ in 0..RACE_RETRIES {
            let entries = self.binding_entries(&session.account_id).await?;
            let entry =
                entries.into_iter().find(|e| e.s("binding_ref") == Some(reference)).ok_or(ApiError::NotFound)?;
            let identity = entry.sk.strip_prefix(BINDING_ENTRY_PREFIX).unwrap_or_default().to_owned();
            let binding = self.store.get(&binding_key(&identity)).await?.ok_or(ApiError::NotFound)?;
            if binding.s("account_id") != Some(session.account_id.as_str()) {
                return Err(ApiError::NotFound);
            }
            let check = session.check_op();
            let (ops, status) = match self.revoke_ops(Some(check.clone()), &binding, &entry).await? {
                Some(ops) if entry.s("status") == Some("active") => (ops, "revoked"),
                // Already revoked: the session is still re-checked in a transaction of its own.
                _ => (
                    vec![check, WriteOp::Check { key: entry.key(), cond: Cond::eq_s("status", "revoked") }],
                    "already_revoked",
                ),
            };
            match self.store.transact(ops).await {
                Ok(()) => {
                    return Ok(Revocation {
                        schema: REVOCATION_SCHEMA,
                        binding_ref: reference.to_owned(),
                        binding_status: "revoked",
                        revocation_status: status,
                        subject_included: false,
                        bearer_included: false,
                    });
                }
                Err(e) if failed_at(&e, 0) => return Err(ApiError::SessionRequired),
                Err(e) if cancelled(&e) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::Unavailable(Box::new(std::io::Error::other("revocation lost every race"))))
    }

    /// Step-up result: allow agents of the verified identity to act for the session's
    /// account. The identity must be the session's own account; the binding is created
    /// (or re-granted after a revocation) in one transaction with the session check.
    pub async fn allow_agents(&self, session: &Session, id: &LinkIdentity<'_>) -> Result<String, ApiError> {
        session.require_member()?;
        for _ in 0..RACE_RETRIES {
            let lkey = link_key(id.provider, id.subject);
            let bkey = binding_key(&id.hash());
            let found = self.store.batch_get(&[lkey.clone(), bkey]).await?;
            let link = found[0].as_ref().filter(|l| l.s("status") == Some("active"));
            if link.and_then(|l| l.s("account_id")) != Some(session.account_id.as_str()) {
                return Err(ApiError::IdentityMismatch);
            }
            let binding = found[1].as_ref();
            if let Some(b) = binding {
                if b.s("account_id") != Some(session.account_id.as_str()) {
                    return Err(ApiError::IdentityMismatch);
                }
                if BindingStatus::of(b) == BindingStatus::Active {
                    let entry = self.store.get(&binding_entry_key(&session.account_id, &id.hash())).await?;
                    return Ok(entry.and_then(|e| e.s("binding_ref").map(str::to_owned)).unwrap_or_default());
                }
            }
            let (reference, grant) = self.grant_ops(id, &session.account_id, binding);
            let mut ops = vec![session.check_op(), WriteOp::Check { key: lkey, cond: Cond::eq_s("status", "active") }];
            ops.extend(grant);
            match self.store.transact(ops).await {
                Ok(()) => return Ok(reference),
                Err(e) if failed_at(&e, 0) => return Err(ApiError::SessionRequired),
                Err(e) if cancelled(&e) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::Unavailable(Box::new(std::io::Error::other("allow agents lost every race"))))
    }
}

impl Session {
    /// The transaction action that re-checks this session: still live, same account.
    pub(crate) fn check_op(&self) -> WriteOp {
        WriteOp::Check {
            key: session_key(&self.token_hash),
            cond: Cond::And(vec![Cond::Exists, Cond::eq_s("account_id", &self.account_id)]),
        }
    }
}
