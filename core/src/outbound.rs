//! Outbound HTTP clients built on their first request, not at cold start.
//!
//! Building a reqwest client loads the platform's root certificates: it reads and parses
//! every file of the system store, about a millisecond and a half per client in a release
//! build, which was most of a function's init beyond the Lambda runtime's own. Most first
//! requests need none of these clients (discovery never does; a bearer request needs the
//! JWKS client only when the key set is not cached yet), so each is built by the first
//! request that sends something and reused after that. A client that cannot be built
//! fails that one request, with the caller's typed error, and is tried again by the next.

use std::sync::OnceLock;

/// A reqwest client, built by its first [`LazyClient::get`].
pub struct LazyClient {
    client: OnceLock<reqwest::Client>,
    build: fn() -> reqwest::ClientBuilder,
}

impl LazyClient {
    /// A client that `build` configures, built when first needed.
    pub const fn new(build: fn() -> reqwest::ClientBuilder) -> Self {
        Self { client: OnceLock::new(), build }
    }

    /// The client, built now if no request has needed it yet.
    pub fn get(&self) -> Result<&reqwest::Client, reqwest::Error> {
        if let Some(client) = self.client.get() {
            return Ok(client);
        }
        let built = (self.build)().build()?;
        // Two first requests at once may both build one: the first stored is kept.
        Ok(self.client.get_or_init(|| built))
    }

    /// Whether a request has needed the client yet (tests of what a cold start does).
    pub fn is_built(&self) -> bool {
        self.client.get().is_some()
    }
}

/// A client built by the caller (tests, or a client configured elsewhere).
impl From<reqwest::Client> for LazyClient {
    fn from(client: reqwest::Client) -> Self {
        let cell = OnceLock::new();
        let _ = cell.set(client);
        Self { client: cell, build: reqwest::Client::builder }
    }
}

impl std::fmt::Debug for LazyClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyClient").field("built", &self.is_built()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lazy_client_is_built_by_its_first_use_and_kept() {
        let lazy = LazyClient::new(reqwest::Client::builder);
        assert!(!lazy.is_built());
        let first: *const reqwest::Client = lazy.get().expect("built");
        assert!(lazy.is_built());
        assert!(std::ptr::eq(first, lazy.get().unwrap()), "built once, then reused");
    }

    #[test]
    fn a_client_given_is_used_as_it_is() {
        assert!(LazyClient::from(reqwest::Client::new()).is_built());
    }
}
