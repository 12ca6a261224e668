//! The operator's path (CLI adapters, never a caller's request): an account of a
//! provider subject with its policy and bindings, and changes to that policy. Must not
//! depend on sources, rooms or runs, nor on `http` or `mcp`.

use super::{AccountService, AccountView, RACE_RETRIES};
use crate::domain::account::{AccountPolicy, PolicyChange, account_ref};
use crate::domain::time::rfc3339;
use crate::error::ApiError;
use crate::service::records::accounts::{AccountRecord, LinkRecord};
use crate::service::records::{account_key, link_key};
use crate::store::StoreError;

impl AccountService {
    /// The account of a provider subject (operator path), or `not_found`.
    async fn account_of(&self, provider: &str, subject: &str) -> Result<(String, AccountRecord), ApiError> {
        let link = self.store.get(&link_key(provider, subject)).await?.ok_or(ApiError::NotFound)?;
        let account_id = LinkRecord::from_item(&link).account_id.ok_or(ApiError::NotFound)?;
        let account = self.store.get(&account_key(&account_id)).await?.ok_or(ApiError::NotFound)?;
        Ok((account_id, AccountRecord::from_item(&account)))
    }

    /// Operator path: the account of a provider subject with its policy and bindings.
    pub async fn show_account(&self, provider: &str, subject: &str) -> Result<AccountView, ApiError> {
        let (account_id, account) = self.account_of(provider, subject).await?;
        Ok(AccountView {
            account_ref: account_ref(&account_id),
            status: account.status.into(),
            created_at: account.created_at,
            policy: account.policy,
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
            let (account_id, account) = self.account_of(provider, subject).await?;
            let mut policy = account.policy.clone();
            policy.apply(change);
            let updated =
                AccountRecord { policy: policy.clone(), updated_at: rfc3339(self.clock.now()), ..account.clone() };
            match self.store.put(updated.to_item(&account_id), Some(account.unchanged())).await {
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
}
