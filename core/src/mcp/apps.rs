//! MCP Apps (SEP-1865, extension `io.modelcontextprotocol/ui`): the one `ui://` view a host
//! renders beside a run tool's result. A catalog row names its view ([`super::catalog::ToolSpec::view`]);
//! this module publishes it: the tool's `_meta.ui.resourceUri`, the `resources/list` entry
//! and the `resources/read` contents (self-contained HTML, `text/html;profile=mcp-app`, with
//! its strict CSP both declared in `_meta.ui.csp` and enforced by the document itself).
//!
//! Only a client that declares the extension (with the MCP App MIME type) sees any of it;
//! every other client sees exactly the catalog without views. The transport is stateless,
//! so the declaration is read per request: from the 2026-07-28 per-request
//! `_meta["io.modelcontextprotocol/clientCapabilities"]`, or, for a client that declared it
//! in the `initialize` handshake, from the `Mcp-Session-Id` the front then assigned
//! ([`SESSION_PREFIX`]; it holds no server state and authorizes nothing).

use std::sync::OnceLock;

use base64::Engine;
use rmcp::RoleServer;
use rmcp::model::{
    ClientCapabilities, ListResourcesResult, ReadResourceResult, ResourcesCapability, ServerCapabilities, Tool,
};
use rmcp::service::RequestContext;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The extension identifier (SEP-1724 `extensions` capability key).
pub const EXTENSION: &str = "io.modelcontextprotocol/ui";
/// The MIME type of an MCP App HTML view.
pub const MIME_TYPE: &str = "text/html;profile=mcp-app";
/// The front answers a handshake that declared the extension with an `Mcp-Session-Id`
/// starting with this; a later request carrying it is read as declaring the extension.
pub const SESSION_PREFIX: &str = "helix-apps-";
const SESSION_HEADER: &str = "mcp-session-id";

/// One `ui://` view: its resource description and its page, assembled once.
pub struct AppView {
    pub uri: &'static str,
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    page: &'static str,
    style: &'static str,
    script: &'static str,
    html: OnceLock<String>,
}

/// The run view of the five run tools.
pub static RUN_VIEW: AppView = AppView {
    uri: "ui://helix/run-view.html",
    name: "helix_run_view",
    title: "Helix run",
    description: "The run a Helix run tool returned: statuses, step budget, timeline, pending questions, \
        evidence with provenance and the verified terminal product (never answer authority).",
    page: include_str!("../../templates/mcp_app_run.html"),
    style: include_str!("../../templates/mcp_app_run.css"),
    script: include_str!("../../templates/mcp_app_run.js"),
    html: OnceLock::new(),
};

impl AppView {
    /// The self-contained HTML document: the style and script inline, admitted by their
    /// hashes in the document's own CSP (no nonce, no external origin).
    pub fn html(&self) -> &str {
        self.html.get_or_init(|| {
            self.page
                .replace("{{csp}}", &document_csp(self.style, self.script))
                .replace("{{style}}", self.style)
                .replace("{{script}}", self.script)
        })
    }

    /// `_meta` of the resource (its listing and its contents): `ui.csp` with no external
    /// domain of any kind, and a border preference.
    pub fn meta(&self) -> Value {
        json!({
            "ui": {
                "csp": { "connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": [] },
                "prefersBorder": true,
            }
        })
    }
}

fn sha256_source(text: &str) -> String {
    format!("'sha256-{}'", base64::engine::general_purpose::STANDARD.encode(Sha256::digest(text.as_bytes())))
}

/// The policy the document enforces on itself, whatever its host adds: nothing loads or
/// connects anywhere; only the page's own style and script run.
pub fn document_csp(style: &str, script: &str) -> String {
    format!(
        "default-src 'none'; script-src {}; style-src {}; img-src data:; connect-src 'none'; \
         frame-src 'none'; object-src 'none'; base-uri 'none'; form-action 'none'",
        sha256_source(script),
        sha256_source(style)
    )
}

/// Whether capabilities declare the extension for the MCP App HTML MIME type.
pub fn declared(caps: &ClientCapabilities) -> bool {
    let settings = caps.extensions.as_ref().and_then(|e| e.get(EXTENSION));
    settings
        .and_then(|s| s.get("mimeTypes"))
        .and_then(Value::as_array)
        .is_some_and(|types| types.iter().any(|t| t.as_str() == Some(MIME_TYPE)))
}

/// Whether the client of this request declared the extension (per-request capabilities,
/// or the session id the handshake was given).
pub fn requested(ctx: &RequestContext<RoleServer>) -> bool {
    if ctx.meta.client_capabilities().is_some_and(|c| declared(&c)) {
        return true;
    }
    ctx.extensions.get::<http::request::Parts>().is_some_and(|p| session_declares(&p.headers))
}

/// Whether the request carries the session id of a handshake that declared the extension.
pub fn session_declares(headers: &http::HeaderMap) -> bool {
    headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()).is_some_and(|s| s.starts_with(SESSION_PREFIX))
}

/// A fresh session id for a handshake that declared the extension.
pub fn session_id() -> String {
    format!("{SESSION_PREFIX}{}", crate::domain::random_hex(16))
}

/// A listed tool with its view's `_meta.ui.resourceUri` (unchanged without a view).
pub fn with_view(view: Option<&AppView>, tool: &Tool) -> Tool {
    let mut tool = tool.clone();
    if let Some(view) = view {
        let mut meta = tool.meta.take().unwrap_or_default();
        meta.insert("ui".into(), json!({ "resourceUri": view.uri }));
        tool.meta = Some(meta);
    }
    tool
}

/// The server capabilities as advertised to a client that declared the extension: the
/// extension itself, and resources (the views are resources).
pub fn advertise(caps: &mut ServerCapabilities) {
    caps.resources.get_or_insert_with(ResourcesCapability::default);
    let mime = json!({ "mimeTypes": [MIME_TYPE] });
    let Value::Object(settings) = mime else { unreachable!() };
    caps.extensions.get_or_insert_with(Default::default).insert(EXTENSION.into(), settings);
}

/// `resources/list`: every view of the catalog.
pub fn list(views: &[&AppView]) -> ListResourcesResult {
    let resources: Vec<Value> = views
        .iter()
        .map(|v| {
            json!({
                "uri": v.uri, "name": v.name, "title": v.title, "description": v.description,
                "mimeType": MIME_TYPE, "_meta": v.meta(),
            })
        })
        .collect();
    serde_json::from_value(json!({ "resultType": "complete", "resources": resources }))
        .expect("a resources/list result")
}

/// `resources/read` of one view.
pub fn read(view: &AppView) -> ReadResourceResult {
    serde_json::from_value(json!({
        "resultType": "complete",
        "contents": [{ "uri": view.uri, "mimeType": MIME_TYPE, "text": view.html(), "_meta": view.meta() }]
    }))
    .expect("a resources/read result")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_view_is_self_contained_and_its_own_csp_admits_exactly_its_style_and_script() {
        let html = RUN_VIEW.html();
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(!html.contains("{{"), "every placeholder filled");
        for external in ["http:", "https:", "//", "src=", "href=", "@import", "url("] {
            let outside_script = html.replace(RUN_VIEW.script, "");
            assert!(!outside_script.contains(external), "the page references {external}");
        }
        for forbidden in ["innerHTML", "eval(", "new Function", "fetch(", "XMLHttpRequest", "WebSocket"] {
            assert!(!RUN_VIEW.script.contains(forbidden), "the script uses {forbidden}");
        }
        let csp = document_csp(RUN_VIEW.style, RUN_VIEW.script);
        assert!(html.contains(&format!("content=\"{csp}\"")), "the document declares its CSP");
        assert!(csp.starts_with("default-src 'none'; script-src 'sha256-"));
        assert!(!csp.contains("unsafe"));
        assert_eq!(html.matches("<script>").count(), 1);
        assert_eq!(html.matches("<style>").count(), 1);
        assert!(html.contains(&format!("<script>{}</script>", RUN_VIEW.script)), "the hashed text is the script");
        assert!(html.contains(&format!("<style>{}</style>", RUN_VIEW.style)), "the hashed text is the style");
    }

    #[test]
    fn only_a_declaration_with_the_app_mime_type_counts() {
        let caps = |v: Value| -> ClientCapabilities { serde_json::from_value(v).unwrap() };
        assert!(declared(&caps(json!({"extensions": {EXTENSION: {"mimeTypes": [MIME_TYPE]}}}))));
        assert!(!declared(&caps(json!({}))));
        assert!(!declared(&caps(json!({"extensions": {EXTENSION: {}}}))));
        assert!(!declared(&caps(json!({"extensions": {EXTENSION: {"mimeTypes": ["text/html"]}}}))));
        assert!(!declared(&caps(json!({"extensions": {"io.modelcontextprotocol/other": {"mimeTypes": [MIME_TYPE]}}}))));
        let mut headers = http::HeaderMap::new();
        assert!(!session_declares(&headers));
        headers.insert(SESSION_HEADER, session_id().parse().unwrap());
        assert!(session_declares(&headers));
        headers.insert(SESSION_HEADER, "some-other-session".parse().unwrap());
        assert!(!session_declares(&headers));
    }

    #[test]
    fn the_resource_is_listed_and_read_with_the_mime_type_and_the_csp() {
        let listed = serde_json::to_value(list(&[&RUN_VIEW])).unwrap();
        assert_eq!(listed["resources"][0]["uri"], RUN_VIEW.uri);
        assert!(RUN_VIEW.uri.starts_with("ui://"));
        assert_eq!(listed["resources"][0]["mimeType"], MIME_TYPE);
        assert_eq!(listed["resources"][0]["_meta"]["ui"]["csp"]["connectDomains"], json!([]));
        let read = serde_json::to_value(read(&RUN_VIEW)).unwrap();
        let content = &read["contents"][0];
        assert_eq!((content["uri"].as_str(), content["mimeType"].as_str()), (Some(RUN_VIEW.uri), Some(MIME_TYPE)));
        assert_eq!(content["text"], RUN_VIEW.html());
        assert_eq!(content["_meta"], RUN_VIEW.meta());
    }
}
