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
use crate::domain::wire::{self, EventPageView, EvidenceBundleView, RunJson, RunView};
use crate::error::ApiError;
// Strict argument parsing with the REST body's error mapping (never echoes values).
use super::output::{error_only, or_error};
use crate::http::parse_strict_value;
use crate::service::runs::Invocation;
use crate::service::{Actor, Caller, Mutation, MutationView, Services};

/// A JSON Schema object (the SDK's `JsonObject`, named here without the SDK).
type JsonObject = serde_json::Map<String, Value>;

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
    /// A mutation: its response (fresh or replayed, its status) and the replay flag.
    Mutation {
        status: u16,
        body: Value,
        replayed: bool,
    },
}

/// A service result a tool may return: how it becomes the tool's structured content, and
/// the `outputSchema` a tool returning it publishes. The catalog takes a row's schema from
/// its handler's return type ([`crate::mcp::catalog::tool_io`]), so a tool cannot publish
/// one shape and answer another; a handler whose result is not a `Reply` does not compile:
///
/// ```compile_fail,E0277
/// use helix_core::mcp::catalog::output_of;
/// use helix_core::mcp::tools::Cx;
/// async fn text(_: Cx<'_>, _: serde_json::Value) -> Result<String, helix_core::error::ApiError> {
///     Ok("not a view".into())
/// }
/// let _ = output_of(text);
/// ```
pub trait Reply {
    fn into_outcome(self) -> Outcome;
    /// The published `outputSchema`: this result's view, or an error result.
    fn output() -> JsonObject;
}

/// An untyped answer promises no success shape: a tool returning one publishes the error
/// schema alone (the disabled command request, which never succeeds).
impl Reply for Value {
    fn into_outcome(self) -> Outcome {
        Outcome::Value(self)
    }
    fn output() -> JsonObject {
        error_only()
    }
}

impl<V: MutationView> Reply for Mutation<V> {
    fn into_outcome(self) -> Outcome {
        Outcome::Mutation { status: self.status, body: self.body, replayed: self.replayed }
    }
    fn output() -> JsonObject {
        or_error::<V>()
    }
}

impl Reply for RunJson {
    fn into_outcome(self) -> Outcome {
        Outcome::Object(self.json)
    }
    fn output() -> JsonObject {
        or_error::<RunView>()
    }
}

/// Typed views, serialized at the edge.
macro_rules! serialized_views {
    ($($view:ty),* $(,)?) => {$(
        impl Reply for $view {
            fn into_outcome(self) -> Outcome {
                Outcome::Value(wire::to_value(&self))
            }
            fn output() -> JsonObject {
                or_error::<$view>()
            }
        }
    )*};
}

serialized_views!(DeviceCheckReport, EvidenceBundleView, EventPageView, SubjectList, SubjectSelection, WorkflowView);

/// Room outputs redact as they serialize; their shape is the view's.
impl<T: serde::Serialize + schemars::JsonSchema> Reply for Redacted<T> {
    fn into_outcome(self) -> Outcome {
        Outcome::Value(wire::to_value(&self))
    }
    fn output() -> JsonObject {
        or_error::<T>()
    }
}

/// A source listing leaves the service redacted, as on REST.
impl Reply for SourceList {
    fn into_outcome(self) -> Outcome {
        Outcome::Value(self.projected().expect("wire DTOs serialize to JSON"))
    }
    fn output() -> JsonObject {
        or_error::<SourceList>()
    }
}

/// A mutation's `idempotency_key` argument, parsed as the REST header is.
fn key(raw: &str) -> Result<IdempotencyKey, ApiError> {
    IdempotencyKey::parse(raw).ok_or(ApiError::InvalidIdempotencyKey)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::domain::account::AccountPolicy;
    use crate::service::sessions::Session;

    #[tokio::test]
    async fn a_person_never_reaches_a_tool_handler() {
        let config = crate::config::tests::dev_config();
        let executor = Arc::new(crate::executor::scripted::ScriptedExecutor::new(vec![], None));
        let services = Services::new(config, Arc::new(crate::store::NoStore), executor);
        let person = Actor::Person(Session {
            token_hash: "t".into(),
            account_id: "acct_1".into(),
            policy: AccountPolicy::default(),
            tenant_ref: None,
            owner_hash: Some("o1".into()),
        });
        let arguments = serde_json::json!({"run_id": "run_0123456789abcdef0123456789abcdef"});
        let call =
            Call { services: &services, actor: &person, arguments: &arguments, invocation: Invocation::default() };
        let refused = call.run(runs::inspect).await;
        assert!(matches!(refused, Err(ApiError::AuthenticationRequired)));
    }
}
