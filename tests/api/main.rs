//! HTTP integration tests against the composed routers (real sockets, real stores).

/// Runs each named `async fn(Backend)` test on both store backends (`embedded::name`,
/// `dynamodb::name`). Defined before the modules so that each of them can use it.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod embedded {
            use super::*;
            $(#[tokio::test] async fn $name() { super::$name(Backend::Embedded).await })*
        }
        mod dynamodb {
            use super::*;
            $(#[tokio::test] async fn $name() { super::$name(Backend::Dynamo).await })*
        }
    };
}

mod account;
mod account_pages;
mod account_provider;
mod approval;
mod async_continue;
mod async_mcp_tasks;
mod auth;
mod chat_context;
mod connection_cap;
mod dev_issuer;
mod embodiment;
mod embodiment_authority;
mod embodiment_bounds;
mod embodiment_late_effects;
mod embodiment_lifecycle;
mod embodiment_rules;
mod embodiment_subject_stop;
mod embodiment_tenant;
mod embodiment_verifying;
mod lambda_events;
mod lambda_worker;
mod lanes;
mod lifecycle;
mod lifecycle_races;
mod limits;
mod oauth_cimd;
mod oauth_flow;
mod page_flows;
mod page_names;
mod pipeline;
mod pipeline_hardening;
mod player_rest;
mod probes;
mod redaction;
mod room_evidence;
mod rooms;
mod rooms_events;
mod rooms_mcp;
mod rooms_members;
mod rooms_observer;
mod rooms_paging;
mod rooms_tenant;
mod round_trips;
mod run_console;
mod runs;
mod sources;
mod sources_ingress;
