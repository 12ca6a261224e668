//! Who is calling: bearer verification (`jwt`) and the linked principal (`principal`).
//! Must not depend on `service`, `http` or `mcp`.

pub mod jwt;
pub mod oidc;
pub mod principal;
