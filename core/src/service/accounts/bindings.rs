//! Agent bindings of an account: the grant (fresh, or again after a revocation), the
//! revocation (trusted path, and by opaque reference from a signed-in session) and the
//! account's listing. Each change writes the binding and its listing entry together,
//! with the session re-checked in the same transaction. Must not depend on sources, rooms
//! or runs, nor on `http`.

use super::{AccountService, BINDING_LIST_SCHEMA, BindingStatus};
use super::{BindingList, BindingView, LinkIdentity, MAX_BINDINGS, RACE_RETRIES, REVOCATION_SCHEMA, Revocation};
use crate::domain::account::{binding_ref, is_binding_ref, new_generation, tenant_ref};
use crate::domain::time::rfc3339;
use crate::error::ApiError;
use crate::service::records::accounts::{
    BindingEntry, BindingRecord, LinkRecord, bindings_of_account, entry_free_or_revoked, entry_is_revoked,
    link_is_active,
};
use crate::service::records::{Role, Tx, binding_entry_key, binding_key, link_key};
use crate::service::sessions::Session;
use crate::store::Cond;

impl AccountService {
    /// The binding and its listing entry of a fresh grant (or a re-grant after a
    /// revocation, keeping the first grant's `created_at`).
    pub(super) fn grant(
        &self,
        id: &LinkIdentity<'_>,
        account_id: &str,
        created_at: Option<&str>,
    ) -> (BindingRecord, BindingEntry) {
        let now = rfc3339(self.clock.now());
        let identity = id.hash();
        let generation = new_generation();
        let created_at = created_at.unwrap_or(&now).to_owned();
        let binding = BindingRecord {
            account_id: account_id.to_owned(),
            status: BindingStatus::Active,
            generation: Some(generation.clone()),
            created_at: Some(created_at.clone()),
            updated_at: Some(now.clone()),
            revoked_at: None,
        };
        let entry = BindingEntry {
            binding_ref: binding_ref(&identity, &generation),
            identity_hash: identity,
            generation,
            issuer: id.issuer.to_owned(),
            provider: id.provider.to_owned(),
            tenant_ref: tenant_ref(id.issuer, id.tenant),
            status: BindingStatus::Active,
            created_at,
            updated_at: now,
            revoked_at: None,
        };
        (binding, entry)
    }

    /// Revokes the agent binding of an identity (trusted path; idempotent).
    pub async fn revoke_binding(&self, id: &LinkIdentity<'_>) -> Result<(), ApiError> {
        let bkey = binding_key(&id.hash());
        let Some(binding) = self.store.get(&bkey).await? else { return Err(ApiError::NotFound) };
        let binding = BindingRecord::from_item(&binding);
        let ekey = binding_entry_key(&binding.account_id, &id.hash());
        let entry = BindingEntry::from_item(&self.store.get(&ekey).await?.ok_or(ApiError::NotFound)?);
        match self.revocation(None, &binding.account_id, &binding, &entry) {
            Some(tx) => Ok(tx.commit(&*self.store).await?),
            None => Ok(()),
        }
    }

    /// The writes of one revocation (None when already revoked), guarded by the session check.
    fn revocation(
        &self,
        session: Option<&Session>,
        account_id: &str,
        binding: &BindingRecord,
        entry: &BindingEntry,
    ) -> Option<Tx> {
        if !binding.is_active() {
            return None;
        }
        let now = rfc3339(self.clock.now());
        let mut tx = Tx::new();
        if let Some(s) = session {
            s.recheck(&mut tx);
        }
        tx.put(Role::AgentBinding, binding.revoked(&now).to_item(&entry.identity_hash), binding.revoke_cond());
        tx.put(Role::AccountEntry, entry.revoked(&now).to_item(account_id), binding.entry_of_this_grant());
        Some(tx)
    }

    pub(super) async fn list_bindings_of(&self, account_id: &str) -> Result<BindingList, ApiError> {
        let bindings: Vec<BindingView> = bindings_of_account(&*self.store, account_id, MAX_BINDINGS)
            .await?
            .into_iter()
            .map(|e| BindingView {
                binding_ref: e.binding_ref,
                issuer: e.issuer,
                tenant_ref: e.tenant_ref,
                provider: e.provider,
                status: e.status.as_str().to_owned(),
                created_at: e.created_at,
                updated_at: e.updated_at,
                revoked_at: e.revoked_at,
                subject_included: false,
                bearer_included: false,
            })
            .collect();
        Ok(BindingList {
            schema: BINDING_LIST_SCHEMA,
            oauth_ready: bindings.iter().any(|b| b.status == BindingStatus::Active.as_str()),
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
            let entries = bindings_of_account(&*self.store, &session.account_id, MAX_BINDINGS).await?;
            let entry = entries.into_iter().find(|e| e.binding_ref == reference).ok_or(ApiError::NotFound)?;
            let binding = self.store.get(&binding_key(&entry.identity_hash)).await?.ok_or(ApiError::NotFound)?;
            let binding = BindingRecord::from_item(&binding);
            if binding.account_id != session.account_id {
                return Err(ApiError::NotFound);
            }
            let (tx, status) = match self.revocation(Some(session), &session.account_id, &binding, &entry) {
                Some(tx) if entry.status == BindingStatus::Active => (tx, "revoked"),
                // Already revoked: the session is still re-checked in a transaction of its own.
                _ => {
                    let mut tx = Tx::new();
                    session.recheck(&mut tx);
                    let ekey = binding_entry_key(&session.account_id, &entry.identity_hash);
                    tx.check(Role::AccountEntry, ekey, entry_is_revoked());
                    (tx, "already_revoked")
                }
            };
            match tx.commit(&*self.store).await {
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
                Err(f) if f.failed(Role::Session) => return Err(ApiError::SessionRequired),
                Err(f) if f.is_cancelled() => continue,
                Err(f) => return Err(f.into()),
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
            let link = found[0].as_ref().map(LinkRecord::from_item);
            if link.as_ref().and_then(LinkRecord::linked_account) != Some(session.account_id.as_str()) {
                return Err(ApiError::IdentityMismatch);
            }
            let binding = found[1].as_ref().map(BindingRecord::from_item);
            if let Some(b) = &binding {
                if b.account_id != session.account_id {
                    return Err(ApiError::IdentityMismatch);
                }
                if b.is_active() {
                    let entry = self.store.get(&binding_entry_key(&session.account_id, &id.hash())).await?;
                    return Ok(entry.map(|e| BindingEntry::from_item(&e).binding_ref).unwrap_or_default());
                }
            }
            let created_at = binding.as_ref().and_then(|b| b.created_at.as_deref());
            let (granted, entry) = self.grant(id, &session.account_id, created_at);
            let reference = entry.binding_ref.clone();
            // A grant never takes over an active binding, nor one of another account.
            let (binding_cond, entry_cond) = match &binding {
                None => (Cond::NotExists, Cond::NotExists),
                Some(b) => (b.regrant_cond(&session.account_id), entry_free_or_revoked()),
            };
            let mut tx = Tx::new();
            session.recheck(&mut tx);
            tx.check(Role::Link, lkey, link_is_active())
                .put(Role::AgentBinding, granted.to_item(&id.hash()), binding_cond)
                .put(Role::AccountEntry, entry.to_item(&session.account_id), entry_cond);
            match tx.commit(&*self.store).await {
                Ok(()) => return Ok(reference),
                Err(f) if f.failed(Role::Session) => return Err(ApiError::SessionRequired),
                Err(f) if f.is_cancelled() => continue,
                Err(f) => return Err(f.into()),
            }
        }
        Err(ApiError::Unavailable(Box::new(std::io::Error::other("allow agents lost every race"))))
    }
}
