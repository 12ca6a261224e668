//! The tool handlers behind the catalog rows: one async function per tool over the same
//! `Services` call as its REST route, taking its strict argument struct and returning the
//! service's typed result, which is serialized here, at the edge ([`Reply`]). Must not
//! depend on the MCP transport (`front`, `server`) or on the SDK.

pub mod device_check;
pub mod embodiment;
pub mod rooms;
pub mod runs;
pub mod sources;

use std::future::Future;
use std::pin::Pin;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::domain::embodiment::{SubjectList, SubjectSelection, WorkflowView};
use crate::domain::ids::IdempotencyKey;
use crate::domain::room::Redacted;
use crate::domain::source::{DeviceCheckReport, SourceList};
use crate::domain::wire::{self, EventPageView, EvidenceBundleView, RunJson};
use crate::error::ApiError;
// Strict argument parsing with the REST body's error mapping (never echoes values).
use crate::http::parse_strict_value;
use crate::service::runs::Invocation;
use crate::service::{Actor, Caller, Mutation, Services};

/// One tool call as a catalog row's handler receives it: the verified agent and the
/// arguments the preflight already parsed and checked against the input schema.
pub struct Call<'a> {
    pub services: &'a Services,
    pub actor: &'a Actor,
    pub arguments: &'a Value,
    pub invocation: Invocation,
}

/// What a handler works with once its arguments are parsed.
#[derive(Clone, Copy)]
pub struct Cx<'a> {
    pub services: &'a Services,
    /// The agent, for the use cases written once for agents and people.
    pub actor: &'a Actor,
    /// The same agent's caller, for the agent-only use cases.
    pub caller: &'a Caller,
    /// The remaining time of a Lambda invocation (a continue runs one solver turn in it).
    pub invocation: Invocation,
}

/// A handler's pending answer.
pub type Pending<'a> = Pin<Box<dyn Future<Output = Result<Outcome, ApiError>> + Send + 'a>>;

/// A catalog row's handler (`|call| call.run(runs::inspect)`).
pub type Handler = for<'a> fn(Call<'a>) -> Pending<'a>;

impl<'a> Call<'a> {
    /// Parses the arguments as `A` (strictly, with the REST body's error mapping) and runs
    /// `handler` on them; its typed result becomes the tool's [`Outcome`].
    pub fn run<A, R, F>(self, handler: impl FnOnce(Cx<'a>, A) -> F) -> Pending<'a>
    where
        A: DeserializeOwned,
        R: Reply,
        F: Future<Output = Result<R, ApiError>> + Send + 'a,
    {
        // Only an agent reaches a tool (the front authenticates bearers, never a cookie).
        let Some(caller) = self.actor.caller() else {
            return Box::pin(std::future::ready(Err(ApiError::AuthenticationRequired)));
        };
        let cx = Cx { services: self.services, actor: self.actor, caller, invocation: self.invocation };
        match parse_strict_value::<A>(self.arguments) {
            Ok(args) => {
                let answer = handler(cx, args);
                Box::pin(async move { answer.await.map(Reply::into_outcome) })
            }
            Err(e) => Box::pin(std::future::ready(Err(e))),
        }
    }
}

/// What a successful tool call produced, before framing.
pub enum Outcome {
    Value(Value),
    /// A view the service already serialized (the text of a JSON object, [`RunJson`]).
    Object(String),
    /// A mutation: its response (fresh or replayed) and the replay flag.
    Mutation(Mutation),
}

/// A service result a tool may return: how it becomes the tool's structured content.
pub trait Reply {
    fn into_outcome(self) -> Outcome;
}

impl Reply for Value {
    fn into_outcome(self) -> Outcome {
        Outcome::Value(self)
    }
}

impl Reply for Mutation {
    fn into_outcome(self) -> Outcome {
        Outcome::Mutation(self)
    }
}

impl Reply for RunJson {
    fn into_outcome(self) -> Outcome {
        Outcome::Object(self.json)
    }
}

/// Typed views, serialized at the edge.
macro_rules! serialized_views {
    ($($view:ty),* $(,)?) => {$(
        impl Reply for $view {
            fn into_outcome(self) -> Outcome {
                Outcome::Value(wire::to_value(&self))
            }
        }
    )*};
}

serialized_views!(DeviceCheckReport, EvidenceBundleView, EventPageView, SubjectList, SubjectSelection, WorkflowView);

/// Room outputs redact as they serialize.
impl<T: serde::Serialize> Reply for Redacted<T> {
    fn into_outcome(self) -> Outcome {
        Outcome::Value(wire::to_value(&self))
    }
}

/// A source listing leaves the service redacted, as on REST.
impl Reply for SourceList {
    fn into_outcome(self) -> Outcome {
        Outcome::Value(self.projected().expect("wire DTOs serialize to JSON"))
    }
}

/// A mutation's `idempotency_key` argument, parsed as the REST header is.
fn key(raw: &str) -> Result<IdempotencyKey, ApiError> {
    IdempotencyKey::parse(raw).ok_or(ApiError::InvalidIdempotencyKey)
}
