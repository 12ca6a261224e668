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

/// A request's id, `req_` and 24 hex digits: from the thread's CSPRNG (seeded and
/// reseeded from the operating system), not a system call per request as
/// [`random_hex`] makes for credentials and ids that must come from the OS.
pub fn request_id() -> String {
    use rand::RngCore;
    let mut buf = [0u8; 12];
    rand::rng().fill_bytes(&mut buf);
    format!("req_{}", hex::encode(buf))
}

/// Random URL-safe token of `bytes` random bytes, hex-encoded.
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).expect("operating system randomness");
    hex::encode(buf)
}

#[cfg(test)]
mod tests {
    #[test]
    fn request_ids_are_req_and_24_hex_digits_and_do_not_repeat() {
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| super::request_id()).collect();
        assert_eq!(ids.len(), 1000);
        for id in &ids {
            let hex = id.strip_prefix("req_").expect("req_ prefix");
            assert!(hex.len() == 24 && hex.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()), "{id}");
        }
    }
}
