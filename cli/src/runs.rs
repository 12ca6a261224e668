//! `helix runs list` and `helix runs tail RUN_ID`: the caller's runs and one run's events
//! over the REST API, for operators and scripts. The bearer is read from `HELIX_TOKEN`
//! (never a flag, never printed); the server from `--base-url` or `HELIX_BASE_URL`.
//! Event kinds read with the same human labels as the console.

use std::time::Duration;

use anyhow::{Context, bail};
use helix_core::domain::event::EventKind;
use serde_json::Value;

pub const TOKEN_ENV: &str = "HELIX_TOKEN";

#[derive(clap::Subcommand)]
pub enum RunsCommand {
    /// List the runs of HELIX_TOKEN's agent binding, newest first (one page).
    List {
        #[command(flatten)]
        server: Server,
        /// Only runs with this lifecycle or completion status (running, waiting, needs_input, cancelled, ...).
        #[arg(long)]
        status: Option<String>,
        /// The next page: the cursor a previous page printed.
        #[arg(long)]
        cursor: Option<String>,
        /// Print the page as JSON (`helix.agent_run_list.v1`).
        #[arg(long)]
        json: bool,
    },
    /// Follow a run's events as they happen; exits when the run has ended.
    Tail {
        run_id: String,
        #[command(flatten)]
        server: Server,
        /// How often to poll for new events.
        #[arg(long, default_value_t = 1000)]
        interval_ms: u64,
    },
}

#[derive(clap::Args)]
pub struct Server {
    /// The Helix server.
    #[arg(long, env = "HELIX_BASE_URL", default_value = "http://127.0.0.1:9000")]
    base_url: String,
}

struct Api {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl Api {
    fn new(server: &Server) -> anyhow::Result<Self> {
        let token = std::env::var(TOKEN_ENV).ok().filter(|t| !t.trim().is_empty());
        let token = token.with_context(|| format!("{TOKEN_ENV} is not set (helix serve prints one)"))?;
        let base = server.base_url.trim_end_matches('/').to_owned();
        Ok(Api { base, token: token.trim().to_owned(), http: reqwest::Client::new() })
    }

    /// GETs `path` with its query; an error answer is reported by its typed code.
    async fn get(&self, path: &str, query: &[(&str, &str)]) -> anyhow::Result<Value> {
        let mut url = reqwest::Url::parse(&format!("{}{path}", self.base)).context("--base-url: not a URL")?;
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        let res = self.http.get(url.clone()).bearer_auth(&self.token).send().await;
        let res = res.with_context(|| format!("cannot reach {}", self.base))?;
        let status = res.status();
        let body: Value = res.json().await.with_context(|| format!("{url}: not a JSON answer"))?;
        if !status.is_success() {
            let code = body["error"]["code"].as_str().unwrap_or("unknown");
            let message = body["error"]["message"].as_str().unwrap_or("");
            bail!("{path}: {status} {code}: {message}");
        }
        Ok(body)
    }
}

pub async fn run(command: RunsCommand) -> anyhow::Result<()> {
    match command {
        RunsCommand::List { server, status, cursor, json } => {
            let api = Api::new(&server)?;
            let mut query = vec![];
            if let Some(s) = &status {
                query.push(("status", s.as_str()));
            }
            if let Some(c) = &cursor {
                query.push(("cursor", c.as_str()));
            }
            let page = api.get("/api/v1/agent-runs", &query).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&page)?);
            } else {
                print_list(&page);
            }
            Ok(())
        }
        RunsCommand::Tail { run_id, server, interval_ms } => {
            tail(&Api::new(&server)?, &run_id, Duration::from_millis(interval_ms.max(100))).await
        }
    }
}

fn text<'a>(v: &'a Value, field: &str) -> &'a str {
    v[field].as_str().unwrap_or("")
}

fn print_list(page: &Value) {
    let runs = page["runs"].as_array().cloned().unwrap_or_default();
    if runs.is_empty() {
        println!("no runs on this page");
    }
    for r in &runs {
        let steps = format!("{}/{}", r["budget"]["steps_used"], r["budget"]["max_steps"]);
        let statuses = format!("{}/{}", text(r, "lifecycle_status"), text(r, "completion_status"));
        println!(
            "{}  {statuses:<28} steps {steps:<6} {}  {}",
            text(r, "run_id"),
            text(r, "created_at"),
            text(r, "objective")
        );
    }
    if let Some(next) = page["next_cursor"].as_str() {
        println!("more: helix runs list --cursor {next}");
    }
}

/// The human label of a wire event kind (the kind itself when this build does not know it).
fn label(kind: &str) -> String {
    serde_json::from_value::<EventKind>(Value::String(kind.to_owned()))
        .map(|k| k.label().to_owned())
        .unwrap_or_else(|_| kind.to_owned())
}

fn status_line(run: &Value) -> String {
    format!(
        "{}: {} / {} (authority {}), step {} of {}, version {}",
        text(run, "run_id"),
        text(run, "lifecycle_status"),
        text(run, "completion_status"),
        text(run, "terminal_authority_status"),
        run["budget"]["steps_used"],
        run["budget"]["max_steps"],
        run["version"]
    )
}

/// Prints every event after `after`, page by page, and moves `after` past them.
async fn drain(api: &Api, path: &str, after: &mut u64) -> anyhow::Result<()> {
    loop {
        let query = [("after_seq", after.to_string()), ("limit", "200".to_owned())];
        let query: Vec<(&str, &str)> = query.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let page = api.get(&format!("{path}/events"), &query).await?;
        for e in page["events"].as_array().into_iter().flatten() {
            println!("#{:<4} {:<40} {}", e["seq"].as_u64().unwrap_or(0), label(text(e, "kind")), text(e, "created_at"));
        }
        *after = page["next_after_seq"].as_u64().unwrap_or(*after);
        if page["has_more"] != true {
            return Ok(());
        }
    }
}

async fn tail(api: &Api, run_id: &str, every: Duration) -> anyhow::Result<()> {
    let path = format!("/api/v1/agent-runs/{run_id}");
    let run = api.get(&path, &[]).await?;
    println!("{}", text(&run, "objective"));
    println!("{}", status_line(&run));
    let mut after = 0u64;
    loop {
        drain(api, &path, &mut after).await?;
        let run = api.get(&path, &[]).await?;
        if run["recommended_next_action"] == "stop" {
            // The run's last events were written with its end: read them before leaving.
            drain(api, &path, &mut after).await?;
            println!("ended: {}", status_line(&run));
            return Ok(());
        }
        tokio::time::sleep(every).await;
    }
}
