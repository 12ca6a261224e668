//! Runtime approval of confirmation-governed room mutations: a turn may ask for one, and
//! the service applies it only with an Ed25519 receipt by a trusted approval host, bound
//! to exactly that turn and that mutation. The service verifies receipts; it never holds
//! a signing key, never mints a receipt and never infers approval from text.
//!
//! The registry (`HELIX_RUNTIME_APPROVAL_TRUSTED_PUBLIC_KEYS_JSON`) holds public keys
//! only: `[{"issuer", "key_id", "public_key": base64url (no padding) of 32 bytes}]`.
//! Anything else (private key material, extra fields, duplicates, too many or too long
//! entries) is an error that refuses start; no error names more than an entry's ids.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};

use super::hash_parts;

/// The configuration variable of the registry.
pub const APPROVAL_KEYS_VAR: &str = "HELIX_RUNTIME_APPROVAL_TRUSTED_PUBLIC_KEYS_JSON";
pub const MAX_APPROVAL_KEYS: usize = 16;
pub const MAX_ISSUER_CHARS: usize = 200;
pub const MAX_KEY_ID_CHARS: usize = 100;
pub const MAX_RECEIPT_ID_CHARS: usize = 100;
/// The configuration text itself: 16 entries of ids and a key fit well within it.
pub const MAX_REGISTRY_BYTES: usize = 16 * 1024;

/// Field names that carry private key material in common key formats (JWK `d`, seeds,
/// secret keys): an entry naming one is refused as such, whatever its value.
const PRIVATE_FIELDS: &[&str] =
    &["d", "private_key", "privateKey", "secret_key", "secretKey", "signing_key", "seed", "secret", "private"];
const FIELDS: &[&str] = &["issuer", "key_id", "public_key"];

/// The kinds of room mutation a turn artifact may request. Every one of them is
/// confirmation-governed: a turn runs in read mode, so a room change it asks for happens
/// only with an explicit-user approval receipt (docs/turn-contract.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RoomMutationKind {
    /// Withdraw the run's own active run-room binding (`binding_ref`).
    WithdrawRunRoomBinding,
}

impl RoomMutationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::WithdrawRunRoomBinding => "withdraw_run_room_binding",
        }
    }

    /// Whether the mutation needs a runtime approval receipt: every kind does.
    pub fn confirmation_governed(self) -> bool {
        match self {
            Self::WithdrawRunRoomBinding => true,
        }
    }
}

/// A room mutation a turn asks for, with the approval host's receipt when it has one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoomMutationRequest {
    pub kind: RoomMutationKind,
    /// The binding the mutation acts on (the run's own active run-room binding).
    pub binding_ref: String,
    #[serde(default)]
    pub approval_receipt: Option<ApprovalReceipt>,
}

impl RoomMutationRequest {
    /// The digest a receipt binds: the mutation's kind and target, never the receipt.
    pub fn digest(&self) -> String {
        hash_parts(&["helix.room_mutation.v1", self.kind.as_str(), &self.binding_ref])
    }
}

/// An approval host's receipt for one mutation of one turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalReceipt {
    pub issuer: String,
    pub key_id: String,
    /// One-time: the replay ledger refuses a second use of (issuer, key_id, receipt_id).
    pub receipt_id: String,
    /// Base64url (no padding) Ed25519 signature over [`approval_payload`].
    pub signature: String,
}

impl ApprovalReceipt {
    /// The ledger identity of the receipt.
    pub fn ledger_id(&self) -> String {
        hash_parts(&["helix.runtime_approval_ledger.v1", &self.issuer, &self.key_id, &self.receipt_id])
    }
}

/// The turn a receipt must be bound to.
#[derive(Debug, Clone, Copy)]
pub struct TurnBinding<'a> {
    pub run_id: &'a str,
    pub step: u32,
    pub claim_token: &'a str,
}

/// The exact bytes an approval signature covers.
pub fn approval_payload(turn: TurnBinding<'_>, mutation_sha256: &str, receipt_id: &str) -> String {
    format!(
        "helix.runtime_approval.v1\nrun:{}\nstep:{}\nclaim:{}\nmutation_sha256:{mutation_sha256}\nreceipt:{receipt_id}",
        turn.run_id, turn.step, turn.claim_token
    )
}

/// Why a receipt was refused (all one public code, `runtime_approval_receipt_invalid`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalRejection {
    #[error("unknown issuer or key id")]
    UntrustedKey,
    #[error("malformed receipt")]
    Malformed,
    #[error("signature does not verify for this turn and mutation")]
    Signature,
}

/// The trusted approval hosts' public keys: (issuer, key_id) -> key. Empty means no
/// approval host: every confirmation-governed mutation is refused.
#[derive(Debug, Clone, Default)]
pub struct ApprovalKeys {
    keys: BTreeMap<(String, String), VerifyingKey>,
}

impl ApprovalKeys {
    /// Parses and bounds the registry (see the module comment).
    pub fn from_json(json: &str) -> Result<Self, String> {
        if json.len() > MAX_REGISTRY_BYTES {
            return Err(format!("longer than {MAX_REGISTRY_BYTES} bytes"));
        }
        // Parsed as plain values first: serde's own messages could quote a key.
        let entries: Vec<serde_json::Map<String, serde_json::Value>> =
            serde_json::from_str(json).map_err(|e| match e.classify() {
                serde_json::error::Category::Data => "not a list of key objects".to_owned(),
                _ => format!("not JSON (line {}, column {})", e.line(), e.column()),
            })?;
        if entries.len() > MAX_APPROVAL_KEYS {
            return Err(format!("at most {MAX_APPROVAL_KEYS} keys"));
        }
        let mut keys = BTreeMap::new();
        for (n, entry) in entries.iter().enumerate() {
            let (issuer, key_id, key) = parse_entry(n, entry)?;
            if keys.values().any(|k| *k == key) {
                return Err(format!("entry {n} ({issuer}/{key_id}): the same public key under two ids is ambiguous"));
            }
            if keys.insert((issuer.clone(), key_id.clone()), key).is_some() {
                return Err(format!("entry {n}: duplicate issuer/key id {issuer}/{key_id} is ambiguous"));
            }
        }
        Ok(Self { keys })
    }

    pub fn insert(&mut self, issuer: &str, key_id: &str, key: VerifyingKey) {
        self.keys.insert((issuer.to_owned(), key_id.to_owned()), key);
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Checks trust, shape and the signature over this turn and this mutation.
    pub fn verify(
        &self,
        r: &ApprovalReceipt,
        turn: TurnBinding<'_>,
        mutation: &RoomMutationRequest,
    ) -> Result<(), ApprovalRejection> {
        let key = self.keys.get(&(r.issuer.clone(), r.key_id.clone())).ok_or(ApprovalRejection::UntrustedKey)?;
        if r.receipt_id.is_empty() || r.receipt_id.chars().count() > MAX_RECEIPT_ID_CHARS {
            return Err(ApprovalRejection::Malformed);
        }
        let sig = B64
            .decode(&r.signature)
            .ok()
            .and_then(|b| Signature::from_slice(&b).ok())
            .ok_or(ApprovalRejection::Malformed)?;
        let payload = approval_payload(turn, &mutation.digest(), &r.receipt_id);
        key.verify(payload.as_bytes(), &sig).map_err(|_| ApprovalRejection::Signature)
    }
}

/// One registry entry: exactly the three fields, bounded ids, a 32-byte Ed25519 key.
fn parse_entry(
    n: usize,
    entry: &serde_json::Map<String, serde_json::Value>,
) -> Result<(String, String, VerifyingKey), String> {
    if entry.keys().any(|k| PRIVATE_FIELDS.contains(&k.as_str())) {
        return Err(format!("entry {n} carries private key material: the registry holds public keys only"));
    }
    if let Some(extra) = entry.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        let shown: String = extra.chars().take(40).collect();
        return Err(format!("entry {n} has an unknown field {shown:?}"));
    }
    let field = |name: &str, max: usize| -> Result<String, String> {
        let v = entry.get(name).and_then(|v| v.as_str()).ok_or(format!("entry {n}: {name} (a string) is required"))?;
        if v.is_empty() || v.chars().count() > max || v.chars().any(char::is_control) {
            return Err(format!("entry {n}: {name} must be 1-{max} characters without control characters"));
        }
        Ok(v.to_owned())
    };
    let issuer = field("issuer", MAX_ISSUER_CHARS)?;
    let key_id = field("key_id", MAX_KEY_ID_CHARS)?;
    let who = format!("entry {n} ({issuer}/{key_id})");
    let encoded = field("public_key", 100).map_err(|_| format!("{who}: public_key must be base64url of 32 bytes"))?;
    let raw = B64.decode(&encoded).map_err(|_| format!("{who}: public_key is not base64url without padding"))?;
    let bytes: [u8; 32] = match raw.len() {
        32 => raw.try_into().expect("32 bytes"),
        64 => return Err(format!("{who}: public_key is 64 bytes, a private key pair: public keys only")),
        _ => return Err(format!("{who}: public_key is not 32 bytes")),
    };
    let key = VerifyingKey::from_bytes(&bytes).map_err(|_| format!("{who}: public_key is not an Ed25519 key"))?;
    if key.is_weak() {
        return Err(format!("{who}: public_key is a weak Ed25519 key"));
    }
    Ok((issuer, key_id, key))
}

/// An approval host's signer: what a host (and the tests) hold. The service never
/// constructs one.
pub struct ApprovalSigner {
    pub issuer: String,
    pub key_id: String,
    key: SigningKey,
}

impl ApprovalSigner {
    pub fn from_seed(issuer: &str, key_id: &str, seed: [u8; 32]) -> Self {
        Self { issuer: issuer.into(), key_id: key_id.into(), key: SigningKey::from_bytes(&seed) }
    }

    pub fn verifying_key(&self) -> VerifyingKey {
        self.key.verifying_key()
    }

    /// The registry entry of this signer's public key.
    pub fn registry_entry(&self) -> serde_json::Value {
        serde_json::json!({
            "issuer": self.issuer,
            "key_id": self.key_id,
            "public_key": B64.encode(self.verifying_key().to_bytes()),
        })
    }

    pub fn sign(&self, turn: TurnBinding<'_>, mutation: &RoomMutationRequest, receipt_id: &str) -> ApprovalReceipt {
        let payload = approval_payload(turn, &mutation.digest(), receipt_id);
        ApprovalReceipt {
            issuer: self.issuer.clone(),
            key_id: self.key_id.clone(),
            receipt_id: receipt_id.into(),
            signature: B64.encode(self.key.sign(payload.as_bytes()).to_bytes()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn withdraw(binding_ref: &str) -> RoomMutationRequest {
        RoomMutationRequest {
            kind: RoomMutationKind::WithdrawRunRoomBinding,
            binding_ref: binding_ref.into(),
            approval_receipt: None,
        }
    }

    const TURN: TurnBinding<'static> = TurnBinding { run_id: "run_abcdefgh", step: 2, claim_token: "claim-1" };

    #[test]
    fn a_receipt_verifies_only_for_its_turn_and_mutation() {
        let signer = ApprovalSigner::from_seed("host", "k1", [3; 32]);
        let keys = ApprovalKeys::from_json(&serde_json::json!([signer.registry_entry()]).to_string()).unwrap();
        let m = withdraw("rrb_1");
        let r = signer.sign(TURN, &m, "r-1");
        assert_eq!(keys.verify(&r, TURN, &m), Ok(()));
        let other_step = TurnBinding { step: 3, ..TURN };
        assert_eq!(keys.verify(&r, other_step, &m), Err(ApprovalRejection::Signature));
        let other_claim = TurnBinding { claim_token: "claim-2", ..TURN };
        assert_eq!(keys.verify(&r, other_claim, &m), Err(ApprovalRejection::Signature));
        assert_eq!(keys.verify(&r, TURN, &withdraw("rrb_2")), Err(ApprovalRejection::Signature));
        let stranger = ApprovalSigner::from_seed("host", "k2", [3; 32]).sign(TURN, &m, "r-1");
        assert_eq!(keys.verify(&stranger, TURN, &m), Err(ApprovalRejection::UntrustedKey));
        let mut tampered = r.clone();
        tampered.receipt_id = "r-2".into();
        assert_eq!(keys.verify(&tampered, TURN, &m), Err(ApprovalRejection::Signature));
        assert!(ApprovalKeys::default().verify(&r, TURN, &m).is_err(), "no host: nothing verifies");
    }

    #[test]
    fn the_ledger_identity_is_issuer_key_and_receipt_id() {
        let signer = ApprovalSigner::from_seed("host", "k1", [3; 32]);
        let a = signer.sign(TURN, &withdraw("rrb_1"), "r-1");
        let b = signer.sign(TurnBinding { step: 9, ..TURN }, &withdraw("rrb_9"), "r-1");
        assert_eq!(a.ledger_id(), b.ledger_id());
        assert_ne!(a.ledger_id(), signer.sign(TURN, &withdraw("rrb_1"), "r-2").ledger_id());
    }
}
