//! Pure types and rules of the service: identifiers, runs, events, scopes, completion.
//! No I/O here: nothing in `domain` may depend on `store`, `service`, `http` or `mcp`.

pub mod account;
pub mod approval;
pub mod authority;
pub mod clients;
pub mod credential;
pub mod embodiment;
pub mod event;
pub mod ids;
pub mod page;
pub mod room;
pub mod run;
pub mod schema;
pub mod scopes;
pub mod source;
pub mod time;
pub mod turn;
pub mod wire;

use sha2::{Digest, Sha256};

/// Lower-case hex SHA-256 of the bytes.
pub fn sha256_hex(bytes: impl AsRef<[u8]>) -> String {
    hex::encode(Sha256::digest(bytes.as_ref()))
}

/// SHA-256 over length-prefixed parts, so ("ab","c") and ("a","bc") differ.
pub fn hash_parts(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p.as_bytes());
    }
    hex::encode(h.finalize())
}

/// Random URL-safe token of `bytes` random bytes, hex-encoded.
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).expect("operating system randomness");
    hex::encode(buf)
}
