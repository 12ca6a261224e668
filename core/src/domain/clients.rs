//! What each MCP client needs to connect, in one table: the Agent Access page, its JSON
//! manifest and the client table of docs/clients.md are all rendered from [`client_setups`],
//! so they cannot disagree. The snippets name fields and environment variables only; no
//! token is ever part of them.

use super::scopes::{self, ENV_ACTIONS_READ, ENV_ACTIONS_WRITE, ROOMS_MANAGE, ROOMS_READ, RUNS_READ, RUNS_WRITE};

/// The MCP server name every snippet uses (hyphen-free, as Gemini Interactions requires).
pub const SERVER_NAME: &str = "helix";
/// The server name of the second Codex profile (runs + rooms + player): its own entry, so
/// it can sit beside the first and signs in (with its wider scopes) on its own.
pub const ROOMS_SERVER_NAME: &str = "helix_rooms";
/// The environment variable a host that acquires tokens itself puts the access token in.
pub const TOKEN_ENV: &str = "CASIMIRBOT_MCP_ACCESS_TOKEN";
/// The MCP URL docs/clients.md shows in place of a real deployment's.
pub const README_MCP_URL: &str = "https://helix.example.com/mcp";
/// Seconds a client waits for one tool call: a turn may run for up to six minutes.
pub const TOOL_TIMEOUT_SECS: u32 = 360;
/// The run-loop tools a client is configured for.
pub const RUN_TOOLS: &[&str] = &[
    "helix_run_start",
    "helix_run_continue",
    "helix_run_inspect",
    "helix_run_fetch_evidence",
    "helix_run_list_events",
    "helix_run_cancel",
];
/// The scopes those tools need.
pub const RUN_SCOPES: &[&str] = &[RUNS_READ, RUNS_WRITE];
/// The tools Codex enables besides the run tools, as the contract's Codex configuration
/// lists them: Device Check and the player-action workflow tools.
pub const CODEX_ENVIRONMENT_TOOLS: &[&str] = &[
    "helix_environment_device_check",
    "helix_minecraft_player_action",
    "helix_minecraft_workflow_status",
    "helix_minecraft_workflow_control",
];
/// The scopes Codex asks for besides the run scopes (the contract's Codex configuration).
pub const CODEX_ENVIRONMENT_SCOPES: &[&str] = &[ROOMS_READ, ENV_ACTIONS_READ, ENV_ACTIONS_WRITE];
/// The tools the second Codex profile enables besides the run and environment tools: the
/// rooms, their run and chat bindings, and choosing one's player. Not the room-source tools
/// (a developer's, with their own scope) nor the always-refused command request.
pub const CODEX_ROOM_TOOLS: &[&str] = &[
    "helix_room_list",
    "helix_room_inspect",
    "helix_room_create",
    "helix_room_bind_run",
    "helix_room_claim_chat_binding",
    "helix_room_unbind_run",
    "helix_room_unbind_chat",
    "helix_environment_subject_list",
    "helix_environment_subject_select",
];
/// The scopes the second Codex profile asks for besides the first profile's.
pub const CODEX_ROOM_SCOPES: &[&str] = &[ROOMS_MANAGE];
/// The mcp-remote release the snippet pins (conformance/clients pins the same one).
pub const MCP_REMOTE_VERSION: &str = "0.15.1";
/// The MCP Inspector release the snippet pins (conformance/clients pins the same one).
pub const INSPECTOR_VERSION: &str = "2.12.0";
/// The logical data scope the snippets of docs/clients.md assume enabled: the one `helix serve`
/// enables (its sample research library).
pub const README_DATA_SCOPE: &str = "research_library";

/// The OAuth scope of each enabled logical data scope, in the deployment's order: a run
/// names at least one data scope, and starting it needs that scope's OAuth scope too.
pub fn data_oauth_scopes(enabled: &[String]) -> Vec<&'static str> {
    enabled.iter().filter_map(|id| scopes::lookup(id)).map(|s| s.oauth_scope).collect()
}

/// One copy-paste block of a client's setup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// What the block is and where it goes.
    pub label: &'static str,
    /// Fence language of the block (`toml`, `json`, `js`, `sh`, `text`).
    pub language: &'static str,
    pub text: String,
}

/// One client: what works with it, what it needs, and its blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSetup {
    pub id: &'static str,
    pub name: &'static str,
    /// The MCP server name its snippets give the entry.
    pub server_name: &'static str,
    /// One sentence on how this client connects and signs in.
    pub works: &'static str,
    /// The provider's servers call the endpoint: only a deployed https URL can work.
    pub needs_public_https: bool,
    pub steps: Vec<Step>,
}

impl ClientSetup {
    /// Whether this client can reach a server whose MCP URL is `mcp_url`.
    pub fn available_at(&self, mcp_url: &str) -> bool {
        !self.needs_public_https || mcp_url.starts_with("https://")
    }
}

fn quoted_list(items: &[&str], indent: &str) -> String {
    items.iter().map(|i| format!("{indent}\"{i}\",\n")).collect()
}

/// The table, with `mcp_url` in every snippet. A client that names the scopes it asks for
/// (Codex) asks for the run tools', the environment tools' and `data_scopes` (see [`data_oauth_scopes`]).
pub fn client_setups(mcp_url: &str, data_scopes: &[&str]) -> Vec<ClientSetup> {
    let name = SERVER_NAME;
    let env = TOKEN_ENV;
    let timeout = TOOL_TIMEOUT_SECS;
    let tools_js = quoted_list(RUN_TOOLS, "      ");
    vec![
        codex(CodexProfile {
            id: "codex",
            name: "Codex: runs",
            server: name,
            works: "Codex discovers the authorization server from the protected-resource metadata and signs in with OAuth; no token is stored in the config file. This profile is the contract's: the run tools, Device Check and the player-action workflow tools (the player is chosen on /rooms).",
            scopes: &[RUN_SCOPES, CODEX_ENVIRONMENT_SCOPES, data_scopes],
            tools: &[RUN_TOOLS, CODEX_ENVIRONMENT_TOOLS],
            mcp_url,
        }),
        codex(CodexProfile {
            id: "codex-rooms",
            name: "Codex: runs + rooms + player",
            server: ROOMS_SERVER_NAME,
            works: "The same OAuth sign-in, asking also for helix.rooms.manage: the run tools, the room tools (create, list, bind a run, claim and withdraw a chat) and the player tools (list and select your player, act, poll, stop). Use it instead of the entry above, or beside it: each entry signs in on its own.",
            scopes: &[RUN_SCOPES, CODEX_ENVIRONMENT_SCOPES, CODEX_ROOM_SCOPES, data_scopes],
            tools: &[RUN_TOOLS, CODEX_ROOM_TOOLS, CODEX_ENVIRONMENT_TOOLS],
            mcp_url,
        }),
        ClientSetup {
            id: "claude-code",
            server_name: name,
            name: "Claude Code",
            works: "Claude Code signs in with OAuth from its /mcp menu.",
            needs_public_https: false,
            steps: vec![
                Step {
                    label: "Add the server, then run /mcp in Claude Code and choose Authenticate",
                    language: "sh",
                    text: format!("claude mcp add --transport http {name} {mcp_url}\n"),
                },
                Step {
                    label: "A host that acquires the token itself: project .mcp.json (the variable is expanded when it connects)",
                    language: "json",
                    text: format!(
                        "{{ \"mcpServers\": {{ \"{name}\": {{ \"type\": \"http\", \"url\": \"{mcp_url}\",\n  \
                         \"headers\": {{ \"Authorization\": \"Bearer ${{{env}}}\" }} }} }} }}\n"
                    ),
                },
            ],
        },
        ClientSetup {
            id: "chatgpt",
            server_name: name,
            name: "ChatGPT developer mode",
            works: "ChatGPT's servers connect to the endpoint and run the OAuth sign-in; review the discovered tools before use. Availability depends on the account and workspace policy.",
            needs_public_https: true,
            steps: vec![Step {
                label: "In ChatGPT",
                language: "text",
                text: format!(
                    "Settings → Security and login: enable Developer mode\nSettings → Plugins → + → add {mcp_url}\n\
                     Complete the sign-in when ChatGPT asks.\n"
                ),
            }],
        },
        ClientSetup {
            id: "openai-responses",
            server_name: name,
            name: "OpenAI Responses API",
            works: "The application acquires the OAuth access token and passes it on each request; OpenAI's servers call the endpoint. Every tool call waits for the application's approval.",
            needs_public_https: true,
            steps: vec![Step {
                label: "One Responses request (the token comes from the application's secret store)",
                language: "js",
                text: format!(
                    "const response = await openai.responses.create({{\n  model: process.env.OPENAI_MODEL,\n  \
                     input: \"Start a Helix run about ...\",\n  tools: [{{\n    type: \"mcp\",\n    \
                     server_label: \"{name}\",\n    server_url: \"{mcp_url}\",\n    \
                     authorization: process.env.{env},\n    allowed_tools: [\n{tools_js}    ],\n    \
                     require_approval: \"always\",\n  }}],\n}});\n"
                ),
            }],
        },
        ClientSetup {
            id: "gemini-interactions",
            server_name: name,
            name: "Gemini Interactions API",
            works: "Remote MCP over Streamable HTTP only; the application acquires the OAuth access token and Google's servers call the endpoint. The server name must be hyphen-free.",
            needs_public_https: true,
            steps: vec![Step {
                label: "One interaction (the token comes from the application's secret store)",
                language: "js",
                text: format!(
                    "const interaction = await gemini.interactions.create({{\n  model: process.env.GEMINI_MODEL,\n  \
                     input: \"Start a Helix run about ...\",\n  tools: [{{\n    type: \"mcp_server\",\n    \
                     name: \"{name}\",\n    url: \"{mcp_url}\",\n    \
                     headers: {{ Authorization: `Bearer ${{process.env.{env}}}` }},\n    \
                     allowed_tools: [\n{tools_js}    ],\n  }}],\n}});\n"
                ),
            }],
        },
        ClientSetup {
            id: "gemini-cli",
            server_name: name,
            name: "Gemini Code Assist and Gemini CLI",
            works: "Both read remote servers from the Gemini settings (httpUrl); Gemini CLI signs in with OAuth through /mcp auth.",
            needs_public_https: false,
            steps: vec![
                Step {
                    label: "~/.gemini/settings.json, then run /mcp auth helix",
                    language: "json",
                    text: format!(
                        "{{ \"mcpServers\": {{ \"{name}\": {{ \"httpUrl\": \"{mcp_url}\", \"timeout\": {timeout}000 }} }} }}\n"
                    ),
                },
                Step {
                    label: "A host that acquires the token itself (the variable is resolved from the environment; never commit the resolved file)",
                    language: "json",
                    text: format!(
                        "{{ \"mcpServers\": {{ \"{name}\": {{ \"httpUrl\": \"{mcp_url}\",\n  \
                         \"headers\": {{ \"Authorization\": \"Bearer ${env}\" }}, \"timeout\": {timeout}000 }} }} }}\n"
                    ),
                },
            ],
        },
        ClientSetup {
            id: "mcp-remote",
            name: "Desktop hosts over stdio (mcp-remote)",
            server_name: name,
            works: "A host that starts only local stdio servers (Claude Desktop, for one) runs the mcp-remote bridge: it registers itself, opens the browser for the OAuth sign-in, asks for every advertised scope (untick what you do not want to give) and keeps its tokens in ~/.mcp-auth.",
            needs_public_https: false,
            steps: vec![Step {
                label: "The host's MCP servers file (claude_desktop_config.json, for one)",
                language: "json",
                text: format!(
                    "{{ \"mcpServers\": {{ \"{name}\": {{ \"command\": \"npx\",\n  \
                     \"args\": [\"-y\", \"mcp-remote@{MCP_REMOTE_VERSION}\", \"{mcp_url}\"] }} }} }}\n"
                ),
            }],
        },
        ClientSetup {
            id: "mcp-inspector",
            name: "MCP Inspector (CLI)",
            server_name: name,
            works: "Inspector 2.x needs Node 22.19 or later (an older Node silently installs 0.15, which sends no headers). Its CLI takes a token the shell already holds; add --advertise-apps to see the run view (ui://helix/run-view.html).",
            needs_public_https: false,
            steps: vec![Step {
                label: "List the tools (then --method tools/call --tool-name NAME --tool-arg key=value, or --method resources/read --uri URI)",
                language: "sh",
                text: format!(
                    "npx -y @modelcontextprotocol/inspector@{INSPECTOR_VERSION} --cli {mcp_url} --transport http \\\n  \
                     --header \"Authorization: Bearer ${env}\" --method tools/list\n"
                ),
            }],
        },
    ]
}

/// One Codex entry: which tools it enables and which scopes it asks for.
struct CodexProfile<'a> {
    id: &'static str,
    name: &'static str,
    server: &'static str,
    works: &'static str,
    scopes: &'a [&'a [&'a str]],
    tools: &'a [&'a [&'a str]],
    mcp_url: &'a str,
}

fn codex(p: CodexProfile<'_>) -> ClientSetup {
    let (server, mcp_url, timeout) = (p.server, p.mcp_url, TOOL_TIMEOUT_SECS);
    let scopes = quoted_list(&p.scopes.concat(), "  ");
    let tools = quoted_list(&p.tools.concat(), "  ");
    ClientSetup {
        id: p.id,
        name: p.name,
        server_name: server,
        works: p.works,
        needs_public_https: false,
        steps: vec![
            Step {
                label: "~/.codex/config.toml (or a trusted project's .codex/config.toml)",
                language: "toml",
                text: format!(
                    "[mcp_servers.{server}]\nurl = \"{mcp_url}\"\noauth_resource = \"{mcp_url}\"\nscopes = [\n{scopes}]\n\
                     enabled_tools = [\n{tools}]\nenabled = true\nrequired = false\nstartup_timeout_sec = 20\n\
                     tool_timeout_sec = {timeout}\n"
                ),
            },
            Step { label: "Then sign in", language: "sh", text: format!("codex mcp login {server}\n") },
            Step {
                label: "A non-interactive host that acquires the token itself: instead of the OAuth sign-in, add to the entry",
                language: "toml",
                text: format!("bearer_token_env_var = \"{TOKEN_ENV}\"\n"),
            },
        ],
    }
}

pub const README_BEGIN: &str = "<!-- clients:begin (generated from core/src/domain/clients.rs; do not edit) -->\n";
pub const README_END: &str = "<!-- clients:end -->";

/// The block of docs/clients.md (between [`README_BEGIN`] and [`README_END`]), with the placeholder URL.
pub fn readme_section() -> String {
    let mut out = String::from(README_BEGIN);
    let data = data_oauth_scopes(&[README_DATA_SCOPE.to_owned()]);
    for c in client_setups(README_MCP_URL, &data) {
        out.push_str(&format!("\n#### {}\n\n{}", c.name, c.works));
        if c.needs_public_https {
            out.push_str(" Needs a deployed https URL: a loopback server cannot be reached.");
        }
        out.push('\n');
        for s in &c.steps {
            out.push_str(&format!("\n{}:\n\n```{}\n{}```\n", s.label, s.language, s.text));
        }
    }
    out.push('\n');
    out.push_str(README_END);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client<'a>(all: &'a [ClientSetup], id: &str) -> &'a ClientSetup {
        all.iter().find(|c| c.id == id).unwrap_or_else(|| panic!("{id} missing"))
    }

    fn all_text(c: &ClientSetup) -> String {
        c.steps.iter().map(|s| s.text.as_str()).collect()
    }

    #[test]
    fn every_client_the_contract_names_is_in_the_table() {
        let all = client_setups("https://h.example/mcp", &[]);
        let ids = [
            "codex",
            "codex-rooms",
            "claude-code",
            "chatgpt",
            "openai-responses",
            "gemini-interactions",
            "gemini-cli",
            "mcp-remote",
            "mcp-inspector",
        ];
        for id in ids {
            client(&all, id);
        }
        assert_eq!(all.len(), ids.len());
        for c in &all {
            assert!(all_text(c).contains("https://h.example/mcp"), "{} names the URL", c.id);
            assert!(!all_text(c).contains("eyJ"), "{} carries no token", c.id);
        }
    }

    #[test]
    fn codex_configures_oauth_resource_scopes_tools_and_timeout_then_logs_in() {
        let all = client_setups("https://h.example/mcp", &[]);
        let text = all_text(client(&all, "codex"));
        for needle in [
            "[mcp_servers.helix]",
            "url = \"https://h.example/mcp\"",
            "oauth_resource = \"https://h.example/mcp\"",
            "scopes = [",
            "\"helix.agent_runs.write\"",
            "enabled_tools = [",
            "\"helix_run_start\"",
            "tool_timeout_sec = 360",
            "codex mcp login helix",
            "bearer_token_env_var = \"CASIMIRBOT_MCP_ACCESS_TOKEN\"",
        ] {
            assert!(text.contains(needle), "{needle} in {text}");
        }
        for tool in RUN_TOOLS.iter().chain(CODEX_ENVIRONMENT_TOOLS) {
            assert!(text.contains(&format!("  \"{tool}\",\n")), "{tool} enabled");
        }
        for scope in CODEX_ENVIRONMENT_SCOPES {
            assert!(text.contains(&format!("  \"{scope}\",\n")), "{scope} requested");
        }
    }

    #[test]
    fn the_second_codex_profile_enables_rooms_chat_and_the_player_and_asks_for_their_scopes() {
        let all = client_setups("https://h.example/mcp", &["helix.data.research_library.read"]);
        let rooms = client(&all, "codex-rooms");
        assert_eq!(rooms.server_name, "helix_rooms");
        let text = all_text(rooms);
        assert!(text.contains("[mcp_servers.helix_rooms]") && text.contains("codex mcp login helix_rooms\n"), "{text}");
        for tool in RUN_TOOLS.iter().chain(CODEX_ROOM_TOOLS).chain(CODEX_ENVIRONMENT_TOOLS) {
            assert!(text.contains(&format!("  \"{tool}\",\n")), "{tool} enabled in {text}");
        }
        for tool in ["helix_room_create", "helix_room_claim_chat_binding", "helix_environment_subject_select"] {
            assert!(CODEX_ROOM_TOOLS.contains(&tool), "{tool}");
        }
        let scopes = "scopes = [\n  \"helix.agent_runs.read\",\n  \"helix.agent_runs.write\",\n  \
                      \"helix.rooms.read\",\n  \"helix.environment_actions.read\",\n  \
                      \"helix.environment_actions.write\",\n  \"helix.rooms.manage\",\n  \"helix.data.research_library.read\",\n]\n";
        assert!(text.contains(scopes), "{text}");
        // The first profile stays the contract's: no room-management scope or tool.
        let first = all_text(client(&all, "codex"));
        assert!(!first.contains("helix.rooms.manage") && !first.contains("helix_room_create"), "{first}");
        assert_ne!(client(&all, "codex").name, rooms.name, "the two profiles are labelled apart");
    }

    #[test]
    fn codex_asks_for_the_enabled_data_scopes_a_run_needs_besides_the_run_scopes() {
        let enabled = ["research_library".to_owned(), "not_in_catalog".to_owned(), "public_web".to_owned()];
        let data = data_oauth_scopes(&enabled);
        assert_eq!(data, ["helix.data.research_library.read", "helix.data.public_web.read"]);
        let all = client_setups("https://h.example/mcp", &data);
        let text = all_text(client(&all, "codex"));
        let scopes = "scopes = [\n  \"helix.agent_runs.read\",\n  \"helix.agent_runs.write\",\n  \
                      \"helix.rooms.read\",\n  \"helix.environment_actions.read\",\n  \
                      \"helix.environment_actions.write\",\n  \"helix.data.research_library.read\",\n  \"helix.data.public_web.read\",\n]\n";
        assert!(text.contains(scopes), "{text}");
    }

    #[test]
    fn responses_requires_approval_always_and_gemini_names_are_hyphen_free() {
        let all = client_setups("https://h.example/mcp", &[]);
        let responses = all_text(client(&all, "openai-responses"));
        assert!(responses.contains("require_approval: \"always\""), "{responses}");
        assert!(!responses.contains("never"));
        let gemini = all_text(client(&all, "gemini-interactions"));
        assert!(gemini.contains("type: \"mcp_server\"") && gemini.contains("name: \"helix\""), "{gemini}");
        assert!(!SERVER_NAME.contains('-'));
        assert!(
            client(&all, "chatgpt").needs_public_https
                && !client(&all, "chatgpt").available_at("http://127.0.0.1:9000/mcp")
        );
        assert!(client(&all, "codex").available_at("http://127.0.0.1:9000/mcp"));
    }

    #[test]
    fn the_bridge_and_inspector_snippets_pin_what_ci_tests() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../conformance/clients/package.json");
        let pinned: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(pinned["dependencies"]["mcp-remote"], MCP_REMOTE_VERSION);
        assert_eq!(pinned["dependencies"]["@modelcontextprotocol/inspector"], INSPECTOR_VERSION);
        let all = client_setups("http://127.0.0.1:9000/mcp", &[]);
        let bridge = all_text(client(&all, "mcp-remote"));
        assert!(bridge.contains("\"mcp-remote@0.15.1\", \"http://127.0.0.1:9000/mcp\"]"), "{bridge}");
        let inspector = all_text(client(&all, "mcp-inspector"));
        assert!(
            inspector.contains("@modelcontextprotocol/inspector@2.12.0 --cli http://127.0.0.1:9000/mcp"),
            "{inspector}"
        );
        assert!(inspector.contains("Bearer $CASIMIRBOT_MCP_ACCESS_TOKEN"), "a variable, never a token: {inspector}");
    }

    #[test]
    fn the_json_snippets_parse() {
        let all = client_setups("https://h.example/mcp", &[]);
        for c in &all {
            for s in c.steps.iter().filter(|s| s.language == "json") {
                serde_json::from_str::<serde_json::Value>(&s.text)
                    .unwrap_or_else(|e| panic!("{}: {e}\n{}", c.id, s.text));
            }
        }
    }

    #[test]
    fn the_clients_doc_block_is_what_the_table_renders() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/clients.md");
        let readme = std::fs::read_to_string(path).expect("docs/clients.md");
        let expected = readme_section();
        let begin = readme.find(README_BEGIN).expect("docs/clients.md has the clients:begin marker");
        let end = readme[begin..].find(README_END).expect("docs/clients.md has the clients:end marker")
            + begin
            + README_END.len();
        if std::env::var_os("HELIX_UPDATE_README").is_some() {
            std::fs::write(path, format!("{}{expected}{}", &readme[..begin], &readme[end..])).unwrap();
            return;
        }
        assert!(
            readme[begin..end] == expected,
            "the MCP clients block of docs/clients.md differs from core/src/domain/clients.rs \
             (rerun with HELIX_UPDATE_README=1 to regenerate); expected:\n{expected}"
        );
    }
}
