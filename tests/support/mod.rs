//! Feature-shaped helpers on `TestApp`, one module per feature the tests drive. Each builds
//! on the core in the crate root (and on `accounts`/`browser` for who is signed in); none
//! depends on a test module.

pub mod accounts;
pub mod browser;
pub mod events;
pub mod faults;
pub mod mcp;
pub mod oauth;
pub mod rooms;
pub mod runs;
pub mod sources;
