//! HTTP integration tests against the composed routers (real sockets, real stores).

mod account;
mod auth;
mod lambda_events;
mod lifecycle;
mod limits;
mod pipeline;
mod probes;
mod room_evidence;
mod rooms;
mod rooms_mcp;
mod rooms_members;
mod round_trips;
mod runs;
mod sources;
