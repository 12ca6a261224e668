//! helix-core: every rule of the Helix Agent API. Function crates and the CLI only wire it.

pub mod auth;
#[cfg(any(feature = "dynamodb", feature = "secret-store"))]
pub mod aws_sdk;
pub mod cold_start;
pub mod config;
pub mod domain;
pub mod error;
pub mod executor;
#[cfg(test)]
mod fuzz;
pub mod http;
#[cfg(feature = "lambda")]
pub mod lambda;
pub mod mcp;
pub mod outbound;
pub mod service;
#[cfg(feature = "local-executor")]
pub mod solver;
pub mod store;
pub mod telemetry;
pub mod wiring;

/// The allocator of every binary that links the core (the Lambda functions, the CLI, the
/// tests). glibc's malloc spends a measurable share of each request consolidating its
/// fast bins once responses of a few KB are built (most of all on `/mcp`, whose result
/// carries the content twice); mimalloc does not (docs/performance.md, "MCP call path").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
