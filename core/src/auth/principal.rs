//! The verified principal: a token's (issuer, tenant, provider, subject) resolved to a
//! linked Helix account through an active agent account binding. Nothing here is
//! created from token claims; links and bindings come only from the trusted link path.

use crate::domain::account::AccountPolicy;
use crate::domain::hash_parts;
use crate::domain::run::Ownership;
use crate::error::ApiError;

#[derive(Clone, PartialEq, Eq)]
pub struct Principal {
    pub issuer: String,
    pub tenant: String,
    pub provider: String,
    pub subject: String,
    pub account_id: String,
    pub scopes: Vec<String>,
    /// The linked account's current policy (read with the link on every request).
    pub policy: AccountPolicy,
    /// [`owner_hash`](crate::domain::account::owner_hash) and [`binding_hash`] of the
    /// fields above, computed when the principal is made (the fields never change after).
    owner: String,
    identity: String,
}

impl std::fmt::Debug for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Raw identifiers stay out of logs: only the opaque owner hash is shown.
        write!(f, "Principal({})", self.owner_hash())
    }
}

/// The identity of a [`Principal`]: a verified token's (issuer, tenant, subject) under the
/// configured provider.
pub struct PrincipalIdentity {
    pub issuer: String,
    pub tenant: String,
    pub provider: String,
    pub subject: String,
}

impl Principal {
    /// The principal of `who` linked to `account_id`.
    pub fn new(who: PrincipalIdentity, account_id: String, scopes: Vec<String>, policy: AccountPolicy) -> Self {
        let owner =
            crate::domain::account::owner_hash(&who.tenant, &who.issuer, &who.provider, &who.subject, &account_id);
        let identity = binding_hash(&who.issuer, &who.tenant, &who.provider, &who.subject);
        Self::with_hashes(who, account_id, scopes, policy, owner, identity)
    }

    /// [`Self::new`] with the owner and binding hashes already known (remembered per
    /// identity by the account service): they are the very functions of these fields.
    pub(crate) fn with_hashes(
        who: PrincipalIdentity,
        account_id: String,
        scopes: Vec<String>,
        policy: AccountPolicy,
        owner: String,
        identity: String,
    ) -> Self {
        let PrincipalIdentity { issuer, tenant, provider, subject } = who;
        debug_assert_eq!(owner, crate::domain::account::owner_hash(&tenant, &issuer, &provider, &subject, &account_id));
        debug_assert_eq!(identity, binding_hash(&issuer, &tenant, &provider, &subject));
        Self { issuer, tenant, provider, subject, account_id, scopes, policy, owner, identity }
    }

    /// The exact owner tuple, hashed: (tenant, issuer, provider subject, account profile).
    pub fn owner_hash(&self) -> String {
        self.owner.clone()
    }

    /// The token identity (issuer, tenant, provider, subject): known before the link is
    /// read, so keys scoped by it (idempotency receipts) can be fetched with the link.
    pub fn identity_hash(&self) -> String {
        self.identity.clone()
    }

    pub fn ownership(&self) -> Ownership {
        Ownership {
            owner_ref: format!("owner:sha256:{}", self.owner),
            tenant_ref: crate::domain::account::tenant_ref(&self.issuer, &self.tenant),
            account_ref: crate::domain::account::account_ref(&self.account_id),
        }
    }

    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }

    /// Every listed scope, or `insufficient_scope` naming the complete required set.
    pub fn require(&self, scopes: &[&str]) -> Result<(), ApiError> {
        self.require_all(scopes, &[])
    }

    /// Every scope of `base`, or `insufficient_scope` naming every scope the operation
    /// needs: `base` and `also` (the scopes that depend on the request, such as a run's data
    /// scopes, which their own admission checks later), so one re-authorization is enough.
    pub fn require_all(&self, base: &[&str], also: &[&str]) -> Result<(), ApiError> {
        if base.iter().all(|s| self.has_scope(s)) {
            return Ok(());
        }
        let mut required: Vec<String> = Vec::new();
        for s in base.iter().chain(also) {
            if !required.iter().any(|r| r == s) {
                required.push(s.to_string());
            }
        }
        Err(ApiError::InsufficientScope { required })
    }

    pub fn capability_available(&self, capability: &str) -> bool {
        !self.policy.denied_capabilities.iter().any(|c| c == capability)
    }
}

/// Key of the agent account binding for the exact (issuer, tenant, provider, subject).
pub fn binding_hash(issuer: &str, tenant: &str, provider: &str, subject: &str) -> String {
    hash_parts(&["agentbind.v1", issuer, tenant, provider, subject])
}
