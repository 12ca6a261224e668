//! helix-core: every rule of the Helix Agent API. Function crates and the CLI only wire it.

pub mod store;
