//! HTTP integration tests against the composed routers (real sockets, real stores).

mod account;
mod auth;
mod lambda_events;
mod lifecycle;
mod limits;
mod pipeline;
mod round_trips;
mod runs;
