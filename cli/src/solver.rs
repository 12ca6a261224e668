//! `helix solver`: the reference Helix Ask turn service on a local port (`serve`), and the
//! terminal-authority key tools (`keygen`, `public-key`). Every rule is in helix-core.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use helix_core::config::{DefaultMode, Mode, SolverConfig};
use helix_core::domain::authority::TerminalSigner;
use helix_core::solver::{KEYS_PATH, TURNS_PATH, TurnService};

/// The key `helix solver serve` generates into the data dir when none is configured.
const LOCAL_KEY_FILE: &str = "solver-signing.key";
pub const DEFAULT_ISSUER: &str = "helix-ask";

#[derive(clap::Subcommand)]
pub enum SolverCommand {
    /// Serve the reference turn service (POST /v1/turns) for HELIX_ASK_ENDPOINT. Its bearer is
    /// HELIX_ASK_BEARER_TOKEN (none: loopback only, any caller); its signing key
    /// HELIX_SOLVER_SIGNING_KEY, else --key-file, else one generated in the data dir.
    Serve {
        #[arg(long, default_value = "127.0.0.1:9100")]
        addr: SocketAddr,
        /// Where a generated signing key is kept (solver-signing.key, owner-only).
        #[arg(long, default_value = ".helix")]
        data_dir: PathBuf,
        /// A private key file written by `helix solver keygen`.
        #[arg(long)]
        key_file: Option<PathBuf>,
        /// A directory of Markdown/text documents (default: HELIX_SOLVER_CORPUS_DIR, else the bundled corpus).
        #[arg(long)]
        corpus: Option<PathBuf>,
    },
    /// Generate a terminal-authority key pair: the private key file is written to --out
    /// (owner-only, never overwritten) and the public JSON for
    /// HELIX_TERMINAL_AUTHORITY_PUBLIC_KEYS_JSON is printed.
    Keygen {
        /// The key id, e.g. ask-2026-12 (a new one for every rotation).
        #[arg(long)]
        key_id: String,
        #[arg(long, default_value = DEFAULT_ISSUER)]
        issuer: String,
        /// Where the private key file goes ("-" prints it to stdout instead).
        #[arg(long)]
        out: PathBuf,
    },
    /// Print the public JSON (HELIX_TERMINAL_AUTHORITY_PUBLIC_KEYS_JSON) of a private key
    /// file, or of HELIX_SOLVER_SIGNING_KEY.
    PublicKey {
        #[arg(long)]
        key_file: Option<PathBuf>,
    },
}

pub async fn run(command: SolverCommand) -> anyhow::Result<()> {
    match command {
        SolverCommand::Serve { addr, data_dir, key_file, corpus } => serve(addr, &data_dir, key_file, corpus).await,
        SolverCommand::Keygen { key_id, issuer, out } => keygen(&issuer, &key_id, &out),
        SolverCommand::PublicKey { key_file } => {
            let signer = match key_file {
                Some(path) => read_key(&path)?,
                None => config()?.signer.context("give --key-file or set HELIX_SOLVER_SIGNING_KEY")?,
            };
            println!("{}", public_json(&signer));
            Ok(())
        }
    }
}

fn config() -> anyhow::Result<SolverConfig> {
    Ok(SolverConfig::from_lookup(DefaultMode::Development, &|n| std::env::var(n).ok())?)
}

fn public_json(signer: &TerminalSigner) -> String {
    serde_json::Value::Array(vec![signer.public_entry()]).to_string()
}

fn read_key(path: &Path) -> anyhow::Result<TerminalSigner> {
    let json = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    TerminalSigner::from_private_json(&json).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

fn keygen(issuer: &str, key_id: &str, out: &Path) -> anyhow::Result<()> {
    if issuer.is_empty() || key_id.is_empty() {
        bail!("--issuer and --key-id must not be empty");
    }
    let signer = TerminalSigner::generate(issuer, key_id);
    if out == Path::new("-") {
        println!("{}", signer.private_json());
        eprintln!("{}", public_json(&signer));
        return Ok(());
    }
    write_new_private(out, &signer.private_json())?;
    eprintln!("private key written to {} (a secret: put it in the secret store, then delete it)", out.display());
    println!("{}", public_json(&signer));
    Ok(())
}

/// Creates `path` owner-only with `text`; an existing file is never replaced.
fn write_new_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut f =
        opts.open(path).with_context(|| format!("creating {} (an existing key is never replaced)", path.display()))?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    Ok(())
}

async fn serve(
    addr: SocketAddr,
    data_dir: &Path,
    key_file: Option<PathBuf>,
    corpus: Option<PathBuf>,
) -> anyhow::Result<()> {
    let mut config = config()?;
    if config.mode == Mode::Production {
        bail!("refused: HELIX_ENV=production; deploy the solver function instead");
    }
    if config.bearer.is_none() && !addr.ip().is_loopback() {
        bail!(
            "refused: without HELIX_ASK_BEARER_TOKEN the solver admits any caller, so it binds only a loopback address"
        );
    }
    if corpus.is_some() {
        config.corpus_dir = corpus;
    }
    let signer = match (config.signer.take(), key_file) {
        (Some(signer), _) => signer,
        (None, Some(path)) => read_key(&path)?,
        (None, None) => {
            let path = data_dir.join(LOCAL_KEY_FILE);
            if !path.exists() {
                std::fs::create_dir_all(data_dir).with_context(|| format!("creating {}", data_dir.display()))?;
                let fresh = TerminalSigner::generate(DEFAULT_ISSUER, "local-solver-1").private_json();
                if let Err(e) = write_new_private(&path, &fresh) {
                    // Another process created it first: use theirs.
                    if !path.exists() {
                        return Err(e);
                    }
                }
            }
            read_key(&path)?
        }
    };
    let service = TurnService::from_config(&config, signer).with_context(|| {
        format!("reading the corpus {}", config.corpus_dir.as_deref().unwrap_or(Path::new("")).display())
    })?;
    let keys = service.public_keys().to_string();
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("binding {addr}"))?;
    let addr = listener.local_addr()?;
    println!("Helix Ask reference solver ({} documents) listening on http://{addr}", service.document_count());
    println!("Point helix serve at it (same HELIX_ASK_BEARER_TOKEN in both), and trust its key:");
    println!("  export HELIX_ASK_ENDPOINT=http://{addr}{TURNS_PATH}");
    println!("  export HELIX_TERMINAL_AUTHORITY_PUBLIC_KEYS_JSON='{keys}'");
    println!("Public keys: http://{addr}{KEYS_PATH}");
    let app = helix_core::solver::router(Arc::new(service));
    helix_core::http::server::serve(listener, app, config.server, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    Ok(())
}
