//! The machines that act or report with their own credential, and their owners' pages:
//! the action connector (its southbound routes, the pairing page, credential rotation and
//! region) and room sources (the room route, the credential claim page, producer ingress).
//! Built on the `pages` kit for the owners' pages; never imports `browser` or `agent`.

pub mod connector_credentials;
pub mod connector_region;
pub mod embodiment;
pub mod sources;
