//! helix-core: every rule of the Helix Agent API. Function crates and the CLI only wire it.

pub mod auth;
pub mod config;
pub mod domain;
pub mod error;
pub mod executor;
pub mod http;
#[cfg(feature = "lambda")]
pub mod lambda;
pub mod mcp;
pub mod service;
pub mod store;
pub mod wiring;
