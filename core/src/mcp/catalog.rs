//! The MCP tool catalogs: static tables whose rows carry everything about a tool (name,
//! description, scopes, hints, input and output schemas, what its first read prefetches,
//! and its handler). A front serves one catalog, listed in full and in this order to every
//! caller whatever its scopes (visibility is not permission: handlers enforce scopes).
//! Adding a tool is one row in `tables` and one handler in `tools`. Depends on the schema
//! generator, the handlers and the wire DTOs; never on the transport.

use std::sync::{Arc, OnceLock};

use rmcp::model::{
    Implementation, JsonObject, MetaObject, ProtocolVersion, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use serde_json::{Value, json};

use super::apps::{self, AppView, RUN_VIEW};
use std::future::Future;

use super::tools::{Cx, Handler, Reply};
use crate::error::ApiError;
use crate::http::Group;
use crate::service::runs::RunMutation;

#[derive(Debug, Clone, Copy)]
pub struct Hints {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
}

/// The data keys a call's first read joins to the principal's BatchGetItem, so a tool on
/// one run costs the round trips docs/round-trips.md counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefetch {
    Nothing,
    /// The run named by the `run_id` argument.
    Run,
    /// The run, and this mutation's receipt under the `idempotency_key` argument.
    RunMutation(RunMutation),
}

/// One tool: what `tools/list` publishes and what `tools/call` runs.
pub struct ToolSpec {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    /// The complete scope set the handler requires (all of them).
    pub scopes: &'static [&'static str],
    pub hints: Hints,
    pub input: fn() -> JsonObject,
    /// The handler and the `outputSchema` it publishes, made from one handler ([`tool_io`]).
    pub io: Io,
    pub prefetch: Prefetch,
    /// The MCP App view (`_meta.ui.resourceUri`) hosts render this tool's results in, for
    /// clients that declare the `io.modelcontextprotocol/ui` extension ([`super::apps`]).
    pub view: Option<&'static AppView>,
}

/// A row's handler and its published `outputSchema` ([`or_error`] of the view the handler
/// answers with, or [`error_only`]); built by [`tool_io`] from the handler alone, so the
/// schema a tool publishes is the type its handler returns.
pub struct Io {
    pub output: fn() -> JsonObject,
    pub call: Handler,
}

/// The `outputSchema` of a tool whose handler is `handler`: its result's [`Reply::output`].
/// A handler whose result is no [`Reply`] does not compile (see [`Reply`]); one whose
/// result is, publishes that result's schema:
///
/// ```
/// use helix_core::error::ApiError;
/// use helix_core::mcp::catalog::{error_only, output_of};
/// use helix_core::mcp::tools::Cx;
/// async fn refused(_: Cx<'_>, _: serde_json::Value) -> Result<serde_json::Value, ApiError> {
///     Err(ApiError::CommandExecutionNotEnabled)
/// }
/// assert_eq!(output_of(refused), error_only());
/// ```
pub fn output_of<'a, A, F, Fut, R>(_handler: F) -> JsonObject
where
    F: FnOnce(Cx<'a>, A) -> Fut,
    Fut: Future<Output = Result<R, ApiError>>,
    R: Reply,
{
    R::output()
}

/// `tool_io!(runs::start)`: the [`Io`] of a row, its output schema and its call both from
/// the one handler named.
#[macro_export]
macro_rules! tool_io {
    ($handler:path) => {
        $crate::mcp::catalog::Io { output: || $crate::mcp::catalog::output_of($handler), call: |c| c.run($handler) }
    };
}
pub use tool_io;

/// How a server describes itself (`initialize`, `server/discover`).
pub struct Server {
    pub name: &'static str,
    pub title: &'static str,
    pub instructions: &'static str,
}

/// One MCP server: where it is served, its route group (limits, metadata path) and the
/// catalog it publishes.
pub struct Front {
    pub path: &'static str,
    pub group: Group,
    pub catalog: &'static Catalog,
}

/// The tools one front serves, and its server description.
pub struct Catalog {
    pub rows: &'static [ToolSpec],
    pub server: Server,
    built: OnceLock<Built>,
}

struct Built {
    inputs: Vec<Value>,
    tools: Vec<Tool>,
    /// The same tools as published to a client that declared the MCP Apps extension.
    app_tools: Vec<Tool>,
    info: ServerConfig,
}

impl Catalog {
    pub const fn new(rows: &'static [ToolSpec], server: Server) -> Self {
        Catalog { rows, server, built: OnceLock::new() }
    }

    /// Schemas and the server description are built once per process, in row order (the
    /// SDK asks for the description on every request it serves).
    fn built(&'static self) -> &'static Built {
        self.built.get_or_init(|| {
            let (inputs, tools): (Vec<Value>, Vec<Tool>) = self.rows.iter().map(build).unzip();
            let app_tools = self.rows.iter().zip(&tools).map(|(spec, tool)| apps::with_view(spec.view, tool)).collect();
            // The Tasks extension is declared where its one tool is served.
            let capabilities = match self.rows.iter().any(|r| r.name == super::task_request::TASK_TOOL) {
                true => ServerCapabilities::builder().enable_tools().enable_tasks().build(),
                false => ServerCapabilities::builder().enable_tools().build(),
            };
            let info = ServerConfig::new(capabilities)
                .with_server_info(
                    Implementation::new(self.server.name, env!("CARGO_PKG_VERSION")).with_title(self.server.title),
                )
                .with_protocol_version(ProtocolVersion::V_2025_11_25)
                .with_instructions(self.server.instructions);
            Built { inputs, tools, app_tools, info }
        })
    }

    pub fn find(&'static self, name: &str) -> Option<&'static ToolSpec> {
        self.rows.iter().find(|t| t.name == name)
    }

    /// The whole catalog as SDK tool objects, in row order.
    pub fn tools(&'static self) -> Vec<Tool> {
        self.built().tools.clone()
    }

    /// The catalog as published to one request: with the rows' `_meta.ui` when the client
    /// declared the MCP Apps extension (and the catalog has a view), else exactly [`Self::tools`].
    pub fn tools_for(&'static self, apps: bool) -> Vec<Tool> {
        if apps && self.has_views() { self.built().app_tools.clone() } else { self.tools() }
    }

    /// The distinct MCP App views of the rows, in row order (what `resources/list` lists).
    pub fn views(&'static self) -> Vec<&'static AppView> {
        let mut views: Vec<&'static AppView> = Vec::new();
        for view in self.rows.iter().filter_map(|r| r.view) {
            if !views.iter().any(|v| v.uri == view.uri) {
                views.push(view);
            }
        }
        views
    }

    pub fn has_views(&'static self) -> bool {
        self.rows.iter().any(|r| r.view.is_some())
    }

    pub fn tool(&'static self, name: &str) -> Option<Tool> {
        self.rows.iter().position(|t| t.name == name).map(|i| self.built().tools[i].clone())
    }

    /// A tool's input schema as a `Value` (what the preflight validates arguments against).
    pub fn input_schema(&'static self, name: &str) -> Option<&'static Value> {
        self.rows.iter().position(|t| t.name == name).map(|i| &self.built().inputs[i])
    }

    pub fn info(&'static self) -> ServerConfig {
        self.built().info.clone()
    }
}

fn build(spec: &ToolSpec) -> (Value, Tool) {
    let input = (spec.input)();
    let annotations = ToolAnnotations::with_title(spec.title)
        .read_only(spec.hints.read_only)
        .destructive(spec.hints.destructive)
        .idempotent(spec.hints.idempotent)
        .open_world(spec.hints.open_world);
    let mut meta = MetaObject::new();
    meta.insert("securitySchemes".into(), security_schemes(spec));
    let tool = Tool::new(spec.name, spec.description, Arc::new(input.clone()))
        .with_title(spec.title)
        .with_raw_output_schema(Arc::new((spec.io.output)()))
        .with_annotations(annotations)
        .with_meta(meta);
    (Value::Object(input), tool)
}

/// The standard `securitySchemes` value of a tool (also copied into its `_meta`).
pub fn security_schemes(spec: &ToolSpec) -> Value {
    json!([{ "type": "oauth2", "scopes": spec.scopes }])
}

pub use super::output::{error_only, or_error};

mod tables;
pub use tables::{CATALOG, DEVICE_CHECK, MCP};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::schema::unportable_forms;
    use crate::mcp::validate::unsupported_keywords;

    fn every_row() -> impl Iterator<Item = &'static ToolSpec> {
        MCP.rows.iter().chain(DEVICE_CHECK.rows)
    }

    fn catalog_of(spec: &ToolSpec) -> &'static Catalog {
        if MCP.rows.iter().any(|r| std::ptr::eq(r, spec)) { &MCP } else { &DEVICE_CHECK }
    }

    /// The one pinned list: the published catalogs change only on purpose (every other test
    /// derives its tool names from the rows).
    #[test]
    fn catalog_names_are_unique_and_in_a_stable_order() {
        let names: Vec<&str> = CATALOG.iter().map(|t| t.name).collect();
        assert_eq!(
            names,
            [
                "helix_run_start",
                "helix_run_continue",
                "helix_run_cancel",
                "helix_run_inspect",
                "helix_run_fetch_evidence",
                "helix_run_list_events",
                "helix_room_list",
                "helix_room_inspect",
                "helix_room_create",
                "helix_room_bind_run",
                "helix_room_claim_chat_binding",
                "helix_room_unbind_run",
                "helix_room_unbind_chat",
                "helix_room_command_request",
                "helix_room_source_list",
                "helix_room_source_create",
                "helix_environment_subject_list",
                "helix_environment_subject_select",
                "helix_minecraft_player_action",
                "helix_minecraft_workflow_status",
                "helix_minecraft_workflow_control",
                "helix_environment_device_check"
            ]
        );
        assert_eq!(MCP.tools().iter().map(|t| t.name.to_string()).collect::<Vec<_>>(), names);
        let device_check: Vec<&str> = DEVICE_CHECK.rows.iter().map(|t| t.name).collect();
        assert_eq!(device_check, ["helix_environment_device_check"]);
        assert_eq!(names.last(), Some(&"helix_environment_device_check"), "/mcp publishes Device Check too");
        let (on_mcp, alone) = (MCP.tool("helix_environment_device_check").unwrap(), DEVICE_CHECK.tools().remove(0));
        assert_eq!(serde_json::to_value(on_mcp).unwrap(), serde_json::to_value(alone).unwrap(), "one row, one tool");
    }

    #[test]
    fn input_schemas_are_strict_objects_with_the_documented_arguments() {
        for spec in every_row() {
            let s = catalog_of(spec).input_schema(spec.name).unwrap();
            assert_eq!(s["type"], "object", "{}", spec.name);
            assert_eq!(s["additionalProperties"], false, "{}", spec.name);
            assert!(s.get("$schema").is_none() && s.get("$defs").is_none(), "{}: {s}", spec.name);
            assert!(!s.to_string().contains("$ref"), "{}: subschemas are inlined", spec.name);
        }
        let start = MCP.input_schema("helix_run_start").unwrap();
        assert_eq!(start["required"], json!(["idempotency_key", "request"]));
        assert_eq!(start["properties"]["request"]["additionalProperties"], false);
        let events = MCP.input_schema("helix_run_list_events").unwrap();
        assert_eq!(events["required"], json!(["run_id"]));
        assert!(events["properties"].get("after_seq").is_some() && events["properties"].get("limit").is_some());
    }

    /// Gemini's function declarations reject `type` arrays, `$ref`/`$defs` and boolean
    /// schemas; Copilot's hosts are as strict. Every published input schema avoids them.
    #[test]
    fn every_published_input_schema_avoids_forms_strict_clients_reject() {
        let found: Vec<String> = every_row()
            .flat_map(|spec| unportable_forms(catalog_of(spec).input_schema(spec.name).unwrap(), spec.name))
            .collect();
        assert!(found.is_empty(), "{} unportable forms:\n{}", found.len(), found.join("\n"));
    }

    #[test]
    fn every_published_schema_uses_only_keywords_the_validator_knows() {
        for spec in every_row() {
            let input = catalog_of(spec).input_schema(spec.name).unwrap();
            assert_eq!(unsupported_keywords(input), Vec::<String>::new(), "{} input", spec.name);
            let output = Value::Object((spec.io.output)());
            assert_eq!(unsupported_keywords(&output), Vec::<String>::new(), "{} output", spec.name);
        }
    }

    #[test]
    fn every_tool_declares_its_scopes_in_meta() {
        for (spec, tool) in every_row().zip(MCP.tools().into_iter().chain(DEVICE_CHECK.tools())) {
            let meta = tool.meta.expect("_meta");
            assert_eq!(meta.get("securitySchemes"), Some(&security_schemes(spec)));
            assert!(tool.output_schema.is_some() && tool.annotations.is_some());
        }
    }

    /// docs/wire.md ("MCP tools") lists every tool of both catalogs, in order, with its
    /// scopes: a tool added to a catalog is documented, and a documented scope is the one
    /// the tool publishes.
    #[test]
    fn docs_wire_md_lists_every_tool_of_both_catalogs_with_its_scopes() {
        let doc = include_str!("../../../docs/wire.md");
        let section = doc.split("\n## MCP tools\n").nth(1).expect("docs/wire.md has an \"## MCP tools\" section");
        let section = section.split("\n## ").next().unwrap();
        let ticked = |cell: &str| -> Vec<String> {
            cell.split(',').map(|s| s.trim().trim_matches('`').to_owned()).filter(|s| !s.is_empty()).collect()
        };
        let documented: Vec<(String, Vec<String>)> = section
            .lines()
            .filter(|l| l.starts_with("| `"))
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                (cells[1].trim_matches('`').to_owned(), ticked(cells[2]))
            })
            .collect();
        let published: Vec<(String, Vec<String>)> =
            MCP.rows.iter().map(|t| (t.name.to_owned(), t.scopes.iter().map(|s| s.to_string()).collect())).collect();
        assert_eq!(documented, published, "docs/wire.md \"MCP tools\" and the catalogs differ");
    }

    /// Every Codex profile on /agent-access enables only tools `/mcp` serves, and asks for
    /// every scope those tools declare: a profile cannot enable a tool it cannot call.
    #[test]
    fn each_codex_profile_asks_for_every_scope_its_enabled_tools_need() {
        for c in crate::domain::clients::client_setups("https://h.example/mcp", &[])
            .iter()
            .filter(|c| c.id.starts_with("codex"))
        {
            let config = &c.steps[0].text;
            let list = |key: &str| -> Vec<String> {
                let body = config.split(&format!("{key} = [\n")).nth(1).and_then(|b| b.split(']').next()).unwrap();
                body.lines().map(|l| l.trim().trim_end_matches(',').trim_matches('"').to_owned()).collect()
            };
            let (scopes, tools) = (list("scopes"), list("enabled_tools"));
            assert!(!tools.is_empty(), "{}", c.id);
            for tool in &tools {
                let spec = MCP.find(tool).unwrap_or_else(|| panic!("{}: {tool} is not served", c.id));
                for scope in spec.scopes {
                    assert!(scopes.iter().any(|s| s == scope), "{}: {tool} needs {scope}, not requested", c.id);
                }
            }
        }
    }
}
