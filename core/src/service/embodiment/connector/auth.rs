//! The connector credential's authentication: every boundary rechecked on every request
//! in one read. The credential's lookup (hash to room, binding and owner) never changes
//! once written (a rotation writes a new hash, a revocation marks the binding), so it is
//! kept per process after its first read; the binding, room, owner membership, owner
//! account and the binding's work marker are read together on every request, and the
//! binding's own hash and status decide. Must not depend on `http` or `mcp`.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::domain::source::{ConnectorCredential, hashes_equal};
use crate::error::ApiError;
use crate::service::embodiment::EmbodimentService;
use crate::service::records::accounts::policy_of;
use crate::service::records::embodiment::{CredentialLookup, EnvBinding, WorkMarker, connector_view, credential_key};
use crate::service::sources::{DeveloperLane, developer};

/// Most credential lookups one process keeps (all are dropped when it is full).
const MAX_LOOKUPS: usize = 4096;

/// A connector admitted for this request (every check of its credential held).
#[derive(Debug, Clone)]
pub struct AuthedConnector {
    pub binding: EnvBinding,
    /// The binding's work marker, read with it.
    pub work: WorkMarker,
}

/// The credential lookups this process has read (hash to lookup).
#[derive(Debug, Default)]
pub struct LookupCache(Mutex<HashMap<String, CredentialLookup>>);

impl LookupCache {
    fn get(&self, hash: &str) -> Option<CredentialLookup> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).get(hash).cloned()
    }
    fn keep(&self, hash: &str, lookup: &CredentialLookup) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_LOOKUPS {
            map.clear();
        }
        map.insert(hash.to_owned(), lookup.clone());
    }
    fn forget(&self, hash: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(hash);
    }
}

impl EmbodimentService {
    /// Authenticates a connector credential: its lookup (kept after the first read), then
    /// every boundary again in one BatchGetItem (the binding active under this exact hash;
    /// the room active and still owned by the pairing's owner, its owner member; the owner
    /// still a developer, unlocked). Any failure is the same `connector_credential_invalid`.
    /// A source bearer never parses.
    pub async fn authenticate_connector(&self, raw: &str) -> Result<AuthedConnector, ApiError> {
        let credential = ConnectorCredential::parse(raw).ok_or(ApiError::ConnectorCredentialInvalid)?;
        let hash = credential.hash();
        let lookup = match self.lookups.get(&hash) {
            Some(l) => l,
            None => {
                let item = self.store.get(&credential_key(&hash)).await?.ok_or(ApiError::ConnectorCredentialInvalid)?;
                let lookup = CredentialLookup::from_item(&item)?;
                self.lookups.keep(&hash, &lookup);
                lookup
            }
        };
        let refused = self.admit(&lookup, &hash).await;
        if refused.is_err() {
            self.lookups.forget(&hash);
        }
        refused
    }

    async fn admit(&self, lookup: &CredentialLookup, hash: &str) -> Result<AuthedConnector, ApiError> {
        let owner = &lookup.owner_account;
        let got = connector_view(self.store.as_ref(), lookup).await?;
        let binding = got.binding.ok_or(ApiError::ConnectorCredentialInvalid)?;
        let policy_ok = got
            .account
            .as_ref()
            .map(policy_of)
            .is_some_and(|p| developer(&self.config, owner, &p, DeveloperLane::Producer).is_ok());
        if !binding.is_active() || &binding.owner_account != owner || !hashes_equal(&binding.credential_hash, hash) {
            return Err(ApiError::ConnectorCredentialInvalid);
        }
        if !got.owner_holds {
            // lifecycle: the room closed (or changed owner) under the pairing; its open
            // workflows are ended at the first refused use (lazily: no room-close hook).
            self.end_open_workflows(&binding, crate::service::embodiment::pairing::ROOM_CLOSED).await?;
            return Err(ApiError::ConnectorCredentialInvalid);
        }
        if !policy_ok {
            return Err(ApiError::ConnectorCredentialInvalid);
        }
        Ok(AuthedConnector { binding, work: got.work })
    }
}
