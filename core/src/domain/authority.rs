//! Terminal authority is verified, never minted: an Ed25519 signature by a trusted
//! issuer key over the run, step, claim token, text hash and supporting refs.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};

use super::sha256_hex;

/// What a solver offers as its terminal product, signed by its issuer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TerminalCandidate {
    pub text: String,
    pub text_sha256: String,
    pub supporting_refs: Vec<String>,
    pub issuer: String,
    pub key_id: String,
    /// Base64 Ed25519 signature over `signing_payload`.
    pub signature: String,
}

/// The exact bytes a terminal signature covers.
pub fn signing_payload(run_id: &str, step: u32, claim_token: &str, text_sha256: &str, refs: &[String]) -> String {
    let mut sorted = refs.to_vec();
    sorted.sort();
    format!(
        "helix.terminal_authority.v1\nrun:{run_id}\nstep:{step}\nclaim:{claim_token}\ntext_sha256:{text_sha256}\nrefs:{}",
        sorted.join(",")
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    #[error("unknown issuer or key id")]
    UntrustedKey,
    #[error("text hash does not match the text")]
    TextHash,
    #[error("signature does not verify for this run, step and claim")]
    Signature,
    #[error("supporting refs are not all current-turn refs")]
    StaleRefs,
    #[error("no supporting refs")]
    NoSupport,
}

/// The registry of trusted public keys: (issuer, key_id) -> key.
#[derive(Debug, Clone, Default)]
pub struct TrustedKeys {
    keys: BTreeMap<(String, String), VerifyingKey>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyEntry {
    issuer: String,
    key_id: String,
    public_key: String,
}

impl TrustedKeys {
    /// Parses `[{"issuer","key_id","public_key": base64 32 bytes}]`. Duplicates,
    /// bad keys or more than 32 entries are errors: a malformed registry refuses start.
    pub fn from_json(json: &str) -> Result<Self, String> {
        let entries: Vec<KeyEntry> = serde_json::from_str(json).map_err(|e| format!("not a key list: {e}"))?;
        if entries.len() > 32 {
            return Err("at most 32 keys".into());
        }
        let mut keys = BTreeMap::new();
        for e in entries {
            let raw = B64.decode(&e.public_key).map_err(|_| format!("key {}: not base64", e.key_id))?;
            let bytes: [u8; 32] = raw.try_into().map_err(|_| format!("key {}: not 32 bytes", e.key_id))?;
            let key = VerifyingKey::from_bytes(&bytes).map_err(|_| format!("key {}: not an Ed25519 key", e.key_id))?;
            if e.issuer.is_empty() || e.key_id.is_empty() {
                return Err("issuer and key_id are required".into());
            }
            if keys.insert((e.issuer.clone(), e.key_id.clone()), key).is_some() {
                return Err(format!("duplicate key {}/{}", e.issuer, e.key_id));
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

    /// Checks trust, text hash, signature (which binds run, step and claim token:
    /// the single-writer identity) and that every supporting ref is a current-turn ref.
    pub fn verify(
        &self,
        c: &TerminalCandidate,
        run_id: &str,
        step: u32,
        claim_token: &str,
        current_refs: &[String],
    ) -> Result<(), Rejection> {
        let key = self.keys.get(&(c.issuer.clone(), c.key_id.clone())).ok_or(Rejection::UntrustedKey)?;
        if sha256_hex(&c.text) != c.text_sha256 {
            return Err(Rejection::TextHash);
        }
        let sig =
            B64.decode(&c.signature).ok().and_then(|b| Signature::from_slice(&b).ok()).ok_or(Rejection::Signature)?;
        let payload = signing_payload(run_id, step, claim_token, &c.text_sha256, &c.supporting_refs);
        key.verify(payload.as_bytes(), &sig).map_err(|_| Rejection::Signature)?;
        if c.supporting_refs.is_empty() {
            return Err(Rejection::NoSupport);
        }
        if !c.supporting_refs.iter().all(|r| current_refs.contains(r)) {
            return Err(Rejection::StaleRefs);
        }
        Ok(())
    }
}

/// A signer held by a solver (the local executor, tests). Never held by the service.
pub struct TerminalSigner {
    pub issuer: String,
    pub key_id: String,
    key: SigningKey,
}

impl TerminalSigner {
    pub fn from_seed(issuer: &str, key_id: &str, seed: [u8; 32]) -> Self {
        Self { issuer: issuer.into(), key_id: key_id.into(), key: SigningKey::from_bytes(&seed) }
    }

    pub fn generate(issuer: &str, key_id: &str) -> Self {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).expect("operating system randomness");
        Self::from_seed(issuer, key_id, seed)
    }

    pub fn seed(&self) -> [u8; 32] {
        self.key.to_bytes()
    }

    pub fn verifying_key(&self) -> VerifyingKey {
        self.key.verifying_key()
    }

    pub fn sign(&self, run_id: &str, step: u32, claim_token: &str, text: &str, refs: Vec<String>) -> TerminalCandidate {
        let text_sha256 = sha256_hex(text);
        let payload = signing_payload(run_id, step, claim_token, &text_sha256, &refs);
        TerminalCandidate {
            text: text.into(),
            text_sha256,
            supporting_refs: refs,
            issuer: self.issuer.clone(),
            key_id: self.key_id.clone(),
            signature: B64.encode(self.key.sign(payload.as_bytes()).to_bytes()),
        }
    }
}

/// A signer's private key file (and secret value): `{"issuer","key_id","private_key"}`,
/// the private key the standard base64 of the 32-byte Ed25519 seed. Only the solver
/// holds it; the service is given the public entry ([`TerminalSigner::public_entry`]).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PrivateKeyFile {
    issuer: String,
    key_id: String,
    private_key: String,
}

impl TerminalSigner {
    /// Parses a private key file. The error never quotes the input (it holds the key).
    pub fn from_private_json(json: &str) -> Result<Self, &'static str> {
        let file: PrivateKeyFile =
            serde_json::from_str(json).map_err(|_| "not a JSON object with exactly issuer, key_id and private_key")?;
        if file.issuer.is_empty() || file.key_id.is_empty() {
            return Err("issuer and key_id must not be empty");
        }
        let seed = B64.decode(file.private_key.trim()).map_err(|_| "private_key is not standard base64")?;
        let seed: [u8; 32] = seed.try_into().map_err(|_| "private_key is not 32 bytes")?;
        Ok(Self::from_seed(&file.issuer, &file.key_id, seed))
    }

    /// The private key file of this signer (a secret: write it only where secrets go).
    pub fn private_json(&self) -> String {
        let file = PrivateKeyFile {
            issuer: self.issuer.clone(),
            key_id: self.key_id.clone(),
            private_key: B64.encode(self.seed()),
        };
        serde_json::to_string(&file).expect("a key file serializes")
    }

    /// This signer's entry of `HELIX_TERMINAL_AUTHORITY_PUBLIC_KEYS_JSON` (public).
    pub fn public_entry(&self) -> serde_json::Value {
        serde_json::json!({
            "issuer": self.issuer,
            "key_id": self.key_id,
            "public_key": B64.encode(self.verifying_key().to_bytes()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_key_file_round_trips_and_its_public_entry_is_trusted() {
        let signer = TerminalSigner::from_seed("helix-ask", "ask-2026-12", [5; 32]);
        let again = TerminalSigner::from_private_json(&signer.private_json()).unwrap();
        assert_eq!(again.seed(), [5; 32]);
        assert_eq!((again.issuer.as_str(), again.key_id.as_str()), ("helix-ask", "ask-2026-12"));
        let keys = TrustedKeys::from_json(&serde_json::json!([signer.public_entry()]).to_string()).unwrap();
        let refs = vec!["evidence:a".to_string()];
        let c = again.sign("run_abcdefgh", 1, "t", "answer", refs.clone());
        assert_eq!(keys.verify(&c, "run_abcdefgh", 1, "t", &refs), Ok(()));
        assert!(!signer.public_entry().to_string().contains(&B64.encode([5u8; 32])));
        for bad in [
            "",
            r#"{"issuer":"i","key_id":"k"}"#,
            r#"{"issuer":"i","key_id":"k","private_key":"BQUF","x":1}"#,
            r#"{"issuer":"i","key_id":"k","private_key":"BQUF"}"#,
            r#"{"issuer":"","key_id":"k","private_key":"BQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQU="}"#,
        ] {
            let err = TerminalSigner::from_private_json(bad).err().unwrap();
            assert!(!err.contains("BQUF"), "{err}");
        }
    }

    fn setup() -> (TerminalSigner, TrustedKeys) {
        let signer = TerminalSigner::from_seed("helix-ask", "k1", [7; 32]);
        let mut keys = TrustedKeys::default();
        keys.insert("helix-ask", "k1", signer.verifying_key());
        (signer, keys)
    }

    #[test]
    fn a_signed_candidate_verifies_only_for_its_run_step_and_claim() {
        let (signer, keys) = setup();
        let refs = vec!["evidence:a".to_string()];
        let c = signer.sign("run_abcdefgh", 2, "claim-1", "answer", refs.clone());
        assert_eq!(keys.verify(&c, "run_abcdefgh", 2, "claim-1", &refs), Ok(()));
        assert_eq!(keys.verify(&c, "run_abcdefgh", 3, "claim-1", &refs), Err(Rejection::Signature));
        assert_eq!(keys.verify(&c, "run_abcdefgh", 2, "claim-2", &refs), Err(Rejection::Signature));
        assert_eq!(keys.verify(&c, "run_other000", 2, "claim-1", &refs), Err(Rejection::Signature));
        assert_eq!(keys.verify(&c, "run_abcdefgh", 2, "claim-1", &[]), Err(Rejection::StaleRefs));
    }

    #[test]
    fn tampered_text_or_untrusted_key_is_rejected() {
        let (signer, keys) = setup();
        let refs = vec!["evidence:a".to_string()];
        let mut c = signer.sign("run_abcdefgh", 1, "t", "answer", refs.clone());
        c.text = "another answer".into();
        assert_eq!(keys.verify(&c, "run_abcdefgh", 1, "t", &refs), Err(Rejection::TextHash));
        let stranger = TerminalSigner::from_seed("helix-ask", "k1", [9; 32]);
        let forged = stranger.sign("run_abcdefgh", 1, "t", "answer", refs.clone());
        assert_eq!(keys.verify(&forged, "run_abcdefgh", 1, "t", &refs), Err(Rejection::Signature));
        let other_id =
            TerminalSigner::from_seed("helix-ask", "k2", [7; 32]).sign("run_abcdefgh", 1, "t", "a", refs.clone());
        assert_eq!(keys.verify(&other_id, "run_abcdefgh", 1, "t", &refs), Err(Rejection::UntrustedKey));
    }

    #[test]
    fn registry_parsing_fails_closed() {
        assert!(TrustedKeys::from_json("not json").is_err());
        assert!(TrustedKeys::from_json(r#"[{"issuer":"a","key_id":"b","public_key":"AAAA"}]"#).is_err());
        let key = B64.encode(TerminalSigner::from_seed("a", "b", [1; 32]).verifying_key().to_bytes());
        let one = format!(r#"[{{"issuer":"a","key_id":"b","public_key":"{key}"}}]"#);
        assert!(TrustedKeys::from_json(&one).is_ok());
        let dup = format!(
            r#"[{{"issuer":"a","key_id":"b","public_key":"{key}"}},{{"issuer":"a","key_id":"b","public_key":"{key}"}}]"#
        );
        assert!(TrustedKeys::from_json(&dup).is_err());
    }
}
