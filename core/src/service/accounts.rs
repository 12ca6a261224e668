//! Accounts: the trusted link path (used by operators' adapters and `helix dev-token`)
//! and principal resolution (one BatchGetItem: link + agent binding).

use crate::auth::jwt::VerifiedToken;
use crate::auth::principal::{Principal, binding_hash};
use crate::domain::random_hex;
use crate::error::ApiError;
use crate::store::{Cond, StoreError};

use super::records::{binding_key, link_key};
use super::{Caller, Services};
use crate::store::{Item, Key};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkIdentity<'a> {
    pub issuer: &'a str,
    pub tenant: &'a str,
    pub provider: &'a str,
    pub subject: &'a str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindingStatus {
    Active,
    Revoked,
}

impl Services {
    /// Trusted link path: makes sure the provider link (-> account) and the agent
    /// account binding for this exact identity exist. Never called from a request.
    /// An existing binding is left as it is: a revoked one is not reactivated.
    pub async fn link_account(&self, id: &LinkIdentity<'_>) -> Result<(String, BindingStatus), ApiError> {
        let link = link_key(id.provider, id.subject);
        let fresh = crate::store::Item::new(link.pk.clone(), link.sk.clone())
            .with_s("account_id", format!("acct_{}", random_hex(12)))
            .with_s("status", "active")
            .with_s("created_at", self.clock.now().to_rfc3339());
        let account_id = match self.store.put(fresh.clone(), Some(Cond::NotExists)).await {
            Ok(()) => fresh.s("account_id").unwrap_or_default().to_owned(),
            Err(StoreError::ConditionFailed { current: Some(cur) }) => {
                cur.s("account_id").unwrap_or_default().to_owned()
            }
            Err(e) => return Err(e.into()),
        };
        let bkey = binding_key(&binding_hash(id.issuer, id.tenant, id.provider, id.subject));
        let binding = crate::store::Item::new(bkey.pk.clone(), bkey.sk.clone())
            .with_s("account_id", &account_id)
            .with_s("status", "active")
            .with_s("created_at", self.clock.now().to_rfc3339());
        let status = match self.store.put(binding, Some(Cond::NotExists)).await {
            Ok(()) => BindingStatus::Active,
            Err(StoreError::ConditionFailed { current: Some(cur) }) if cur.s("status") == Some("active") => {
                BindingStatus::Active
            }
            Err(StoreError::ConditionFailed { .. }) => BindingStatus::Revoked,
            Err(e) => return Err(e.into()),
        };
        Ok((account_id, status))
    }

    /// Revokes the agent account binding (idempotent).
    pub async fn revoke_binding(&self, id: &LinkIdentity<'_>) -> Result<(), ApiError> {
        let bkey = binding_key(&binding_hash(id.issuer, id.tenant, id.provider, id.subject));
        let Some(mut item) = self.store.get(&bkey).await? else { return Err(ApiError::NotFound) };
        item.attrs.insert("status".into(), crate::store::Attr::S("revoked".into()));
        item.attrs.insert("revoked_at".into(), crate::store::Attr::S(self.clock.now().to_rfc3339()));
        self.store.put(item, Some(Cond::Exists)).await?;
        Ok(())
    }

    /// Sets the capabilities the linked account's policy withholds (operator path).
    pub async fn set_denied_capabilities(&self, provider: &str, subject: &str, caps: &[&str]) -> Result<(), ApiError> {
        let key = link_key(provider, subject);
        let Some(mut item) = self.store.get(&key).await? else { return Err(ApiError::NotFound) };
        item.attrs.insert("denied_capabilities".into(), crate::store::Attr::S(caps.join(",")));
        self.store.put(item, Some(Cond::Exists)).await?;
        Ok(())
    }

    /// Resolves a verified token to its principal (or `account_not_linked`) and, in the
    /// same BatchGetItem, reads the data keys the request will need (`data` may use the
    /// token identity, e.g. for receipt keys).
    pub async fn resolve_with(
        &self,
        token: VerifiedToken,
        data: impl FnOnce(&str) -> Vec<Key>,
    ) -> Result<Caller, ApiError> {
        let provider = self.config.oauth.provider.clone();
        let identity = binding_hash(&token.issuer, &token.tenant, &provider, &token.subject);
        let data_keys = data(&identity);
        let mut keys = vec![link_key(&provider, &token.subject), binding_key(&identity)];
        keys.extend(data_keys.iter().cloned());
        let mut found = self.store.batch_get(&keys).await?.into_iter();
        let (link, binding) = (found.next().flatten(), found.next().flatten());
        let prefetched: Vec<(Key, Option<Item>)> = data_keys.into_iter().zip(found).collect();
        let link = link.filter(|l| l.s("status") == Some("active")).ok_or(ApiError::AccountNotLinked)?;
        let account_id = link.s("account_id").ok_or(ApiError::AccountNotLinked)?.to_owned();
        let binding = binding.filter(|b| b.s("status") == Some("active")).ok_or(ApiError::AccountNotLinked)?;
        if binding.s("account_id") != Some(account_id.as_str()) {
            return Err(ApiError::AccountNotLinked);
        }
        let denied_capabilities = link
            .s("denied_capabilities")
            .map(|s| s.split(',').filter(|c| !c.is_empty()).map(str::to_owned).collect())
            .unwrap_or_default();
        let principal = Principal {
            issuer: token.issuer,
            tenant: token.tenant,
            provider,
            subject: token.subject,
            account_id,
            scopes: token.scopes,
            denied_capabilities,
        };
        Ok(Caller::with_prefetched(principal, prefetched))
    }
}
