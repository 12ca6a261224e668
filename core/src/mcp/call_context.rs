//! What the HTTP transport put into a request's extensions for the MCP handlers: the
//! authenticated agent, the request id and the invocation's limits.

use rmcp::RoleServer;
use rmcp::service::RequestContext;

use crate::http::{Invocation, RequestId};
use crate::service::{Actor, Caller};

/// The per-request values the HTTP handler put into the request extensions.
pub(crate) struct CallContext {
    /// The agent the front authenticated (the MCP lane has no other kind of actor).
    pub(crate) principal: Option<Actor>,
    pub(crate) request_id: String,
    pub(crate) invocation: Invocation,
}

impl CallContext {
    /// Takes the values out of the request's extensions (the direct path owns them).
    pub(crate) fn take(ext: &mut http::Extensions) -> Self {
        let caller = ext.remove::<Caller>();
        Self::of(caller, ext)
    }

    /// `caller` and the request id and limits of `ext`.
    fn of(caller: Option<Caller>, ext: &http::Extensions) -> Self {
        CallContext {
            principal: caller.map(Actor::Agent),
            request_id: ext.get::<RequestId>().map(|r| r.0.clone()).unwrap_or_default(),
            invocation: ext.get::<Invocation>().copied().unwrap_or_default(),
        }
    }

    /// The authenticated agent, if any.
    pub(crate) fn caller(&self) -> Option<Caller> {
        self.principal.as_ref().and_then(Actor::caller).cloned()
    }
}

/// The same values read from an SDK request's context (the SDK keeps the HTTP request's
/// parts): the tool call, the task methods and the task request rule all read them here.
pub(crate) fn call_context(ctx: &RequestContext<RoleServer>) -> CallContext {
    let none = http::Extensions::new();
    let ext = ctx.extensions.get::<http::request::Parts>().map_or(&none, |p| &p.extensions);
    CallContext::of(ext.get::<Caller>().cloned(), ext)
}
