//! The development authorization server hosted by `helix serve` (development mode, on
//! loopback only): its key and metadata, registration, client metadata documents,
//! `/authorize`, `/token` and the browser's sign-in.

pub mod dev_auth;
pub mod dev_authorize;
pub mod dev_client_metadata;
pub mod dev_oidc;
pub mod dev_register;
pub mod dev_routes;
pub mod dev_token;
