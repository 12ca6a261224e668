//! Helpers shared by the core integration tests.

pub mod dynamo;
pub mod jwt;
pub mod mcp;
