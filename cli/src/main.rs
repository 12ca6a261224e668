//! `helix`: the operator's and newcomer's entry point. Every rule lives in helix-core;
//! this binary parses flags, builds state and wires the routers onto one port.

mod conformance;
mod connector_sim;
mod dev_control;
mod local;
mod room_acceptance;
mod runs;
mod solver;
mod source_sim;

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(name = "helix", version, about = "Helix Agent API: local server and operator tools")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum StoreKind {
    Embedded,
    Dynamodb,
}

#[derive(clap::Args, Clone)]
struct StoreArgs {
    /// Directory for the embedded store, the local signing secrets and keys.
    #[arg(long, default_value = ".helix")]
    data_dir: PathBuf,
    /// Where runs live: the embedded store (default) or DynamoDB.
    #[arg(long, value_enum, default_value = "embedded")]
    store: StoreKind,
    /// DynamoDB table (with --store dynamodb); endpoint from the AWS SDK environment.
    #[arg(long)]
    table: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve every route of every function on one port (development mode by default).
    Serve {
        #[arg(long, default_value = "127.0.0.1:9000")]
        addr: SocketAddr,
        #[command(flatten)]
        store: StoreArgs,
        /// A directory of Markdown/text documents for the local research_library executor.
        #[arg(long)]
        corpus: Option<PathBuf>,
    },
    /// Print a signed development JWT (and link its principal). Refused in production.
    DevToken {
        #[command(flatten)]
        store: StoreArgs,
        #[arg(long)]
        subject: String,
        #[arg(long)]
        tenant: String,
        /// Space-separated OAuth scopes.
        #[arg(
            long,
            default_value = "helix.agent_runs.read helix.agent_runs.write helix.data.research_library.read helix.rooms.read helix.rooms.manage"
        )]
        scope: String,
        #[arg(long, default_value_t = 3600)]
        ttl_seconds: i64,
    },
    /// Print only a `helix_session` cookie value for this identity's account (the same
    /// account `helix dev-token` links). Refused in production.
    DevSession {
        #[command(flatten)]
        store: StoreArgs,
        #[arg(long)]
        subject: String,
        #[arg(long)]
        tenant: String,
    },
    /// Your agents' runs over the REST API (bearer from HELIX_TOKEN): list them, or follow
    /// one run's events until it ends.
    Runs {
        #[command(subcommand)]
        command: runs::RunsCommand,
    },
    /// Operator path: show an account or set its policy.
    Account {
        #[command(subcommand)]
        command: AccountCommand,
    },
    /// Trusted link path: link a verified (issuer, tenant, provider, subject) to an account.
    LinkAccount {
        #[command(flatten)]
        store: StoreArgs,
        #[arg(long)]
        issuer: String,
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        provider: String,
        #[arg(long)]
        subject: String,
    },
    /// Reference producer: play a deterministic simulated world through the room-source
    /// ingress, and answer pending environment probes (inventory checks) on every tick.
    /// The claimed source bearer is read from HELIX_SOURCE_BEARER, never a flag.
    SourceSim {
        #[command(flatten)]
        args: source_sim::SimArgs,
    },
    /// Reference action connector: a deterministic simulated world driven through the
    /// southbound connector routes (register, poll, execute, acknowledge). The connector
    /// credential is read from HELIX_CONNECTOR_CREDENTIAL, never a flag.
    ConnectorSim {
        #[command(flatten)]
        args: connector_sim::ConnectorSimArgs,
    },
    /// Shared Live Room live acceptance: a zero-network dry run that prints the plan by
    /// default; live only with the HELIX_SHARED_ROOM_ACCEPTANCE_* opt-ins (no flags, no
    /// cookie, chat claim or source bearer). Exit 0 pass/plan, 1 check failed, 2 config
    /// refused, 3 incomplete under REQUIRE_COMPLETE, 4 release failure.
    RoomAcceptance,
    /// Provider conformance probe: check a deployment as MCP clients and providers see it and
    /// print a typed, credential-redacted JSON report; non-zero exit on any failed check.
    /// Configured only by environment (CASIMIRBOT_MCP_PUBLIC_BASE_URL, CASIMIRBOT_MCP_ACCESS_TOKEN,
    /// OPENAI_API_KEY, GEMINI_API_KEY, ...; see docs/tour/connect-agents.md).
    Conformance,
    /// The reference Helix Ask turn service and its terminal-authority keys.
    Solver {
        #[command(subcommand)]
        command: solver::SolverCommand,
    },
    /// Create the DynamoDB table (pk/sk, TTL on expires_at); idempotent.
    CreateTable {
        #[arg(long)]
        table: String,
    },
}

#[derive(clap::Args, Clone)]
struct AccountArgs {
    #[command(flatten)]
    store: StoreArgs,
    #[arg(long)]
    subject: String,
    #[arg(long)]
    tenant: String,
    /// Token issuer of the identity (default: the configured HELIX_AGENT_OAUTH_ISSUER).
    #[arg(long)]
    issuer: Option<String>,
    /// Provider alias of the identity (default: the configured HELIX_AGENT_OAUTH_PROVIDER).
    #[arg(long)]
    provider: Option<String>,
}

#[derive(Subcommand)]
enum AccountCommand {
    /// Show the account, its policy and its agent bindings (JSON; no subject or tenant id).
    Show {
        #[command(flatten)]
        account: AccountArgs,
    },
    /// Set the account policy; takes effect on the account's next request.
    Policy {
        #[command(flatten)]
        account: AccountArgs,
        /// The Shared Live Room feature lock.
        #[arg(long)]
        rooms_locked: Option<bool>,
        #[arg(long)]
        developer: Option<bool>,
        #[arg(long)]
        guest: Option<bool>,
        /// A capability to withhold (repeatable; replaces the list when given).
        #[arg(long = "deny-capability")]
        deny_capability: Vec<String>,
        /// Clear the denied capabilities.
        #[arg(long, conflicts_with = "deny_capability")]
        allow_all_capabilities: bool,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // The harness's and the probe's stdout is their report alone, and they log nothing (no
    // request, no header).
    if !matches!(cli.command, Command::RoomAcceptance | Command::Conformance | Command::Runs { .. }) {
        helix_core::wiring::init_tracing(false);
    }
    match cli.command {
        Command::Serve { addr, store, corpus } => local::serve(addr, &store, corpus).await,
        Command::DevToken { store, subject, tenant, scope, ttl_seconds } => {
            let scopes: Vec<String> = scope.split_whitespace().map(str::to_owned).collect();
            let token = local::dev_token(&store, &subject, &tenant, &scopes, ttl_seconds).await?;
            println!("{token}");
            Ok(())
        }
        Command::DevSession { store, subject, tenant } => {
            println!("{}", local::dev_session(&store, &subject, &tenant).await?);
            Ok(())
        }
        Command::Account { command: AccountCommand::Show { account } } => local::account_show(&account).await,
        Command::Account {
            command:
                AccountCommand::Policy { account, rooms_locked, developer, guest, deny_capability, allow_all_capabilities },
        } => {
            let denied_capabilities = if allow_all_capabilities {
                Some(vec![])
            } else {
                (!deny_capability.is_empty()).then_some(deny_capability)
            };
            let change =
                helix_core::domain::account::PolicyChange { rooms_locked, developer, guest, denied_capabilities };
            local::account_policy(&account, &change).await
        }
        Command::LinkAccount { store, issuer, tenant, provider, subject } => {
            local::link_account(&store, &issuer, &tenant, &provider, &subject).await
        }
        Command::SourceSim { args } => source_sim::run(args).await,
        Command::Solver { command } => solver::run(command).await,
        Command::Runs { command } => runs::run(command).await,
        Command::ConnectorSim { args } => connector_sim::run(args).await,
        Command::RoomAcceptance => std::process::exit(room_acceptance::run().await.into()),
        Command::Conformance => {
            if conformance::run().await {
                Ok(())
            } else {
                std::process::exit(1)
            }
        }
        Command::CreateTable { table } => {
            let store = helix_core::store::dynamo::DynamoStore::from_env(table.clone()).await;
            store.create_table().await.with_context(|| format!("creating table {table}"))?;
            println!("table {table} is ready (TTL on expires_at)");
            Ok(())
        }
    }
}

fn require_table(store: &StoreArgs) -> anyhow::Result<String> {
    match (&store.store, &store.table) {
        (StoreKind::Dynamodb, Some(t)) => Ok(t.clone()),
        (StoreKind::Dynamodb, None) => bail!("--store dynamodb needs --table NAME"),
        (StoreKind::Embedded, _) => bail!("not a DynamoDB store"),
    }
}

#[cfg(test)]
mod command_table {
    use std::collections::BTreeSet;

    use clap::CommandFactory;

    /// docs/cli.md lists every `helix` command, and nothing that is not one.
    #[test]
    fn the_command_table_names_every_subcommand_and_no_other() {
        let commands: BTreeSet<String> =
            super::Cli::command().get_subcommands().map(|c| c.get_name().to_owned()).collect();
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/cli.md")).unwrap();
        let mut listed = BTreeSet::new();
        for row in doc.lines().filter(|l| l.starts_with("| `")) {
            let first = row.split(" | ").next().unwrap();
            for (i, _) in first.match_indices("helix ") {
                let name: String = first[i + 6..].chars().take_while(|c| c.is_ascii_lowercase() || *c == '-').collect();
                if !name.is_empty() {
                    listed.insert(name);
                }
            }
        }
        assert_eq!(listed, commands, "docs/cli.md's command table and the `helix` subcommands differ");
    }
}
