//! `helix connector-sim`: a reference action connector. It plays a deterministic
//! simulated world (players with positions, blocks, inventories, crafting) through the
//! real southbound connector routes: it registers (a new epoch), reports its subjects,
//! polls, executes leased commands with realistic timing (a player walks at most four
//! blocks per poll, digging takes `--dig-ticks` polls) and acknowledges each with what its
//! world now shows. Its credential comes from `HELIX_CONNECTOR_CREDENTIAL`, never an
//! argument, and is never printed; its configuration is the JSON the pairing page showed.
//!
//! A chat line is acknowledged `completed` when sent and its echo on the next poll (Helix
//! holds the step `verifying` in between), as a game's chat echo arrives after the send.
//!
//! Its command ledger (by workflow, step and lease token, `ledger.rs`) makes at-least-once
//! delivery effectively once: a redelivered command it already took is not executed again.
//! With `--ledger PATH` the ledger (and the world) survive a crash: a restart acknowledges
//! the commands it finds started `interrupted` and never executes them again.
//!
//! Switches: `--override-at-poll N` (a person takes the controls at poll N, and the signal
//! `SIGUSR1` at the next poll: the running command is acknowledged `overridden`); `--hazard` (every block break fails);
//! `--crash-mid-action` (exits abruptly after starting a mutating step, before any
//! acknowledgement); `--partition-after-poll N` (Helix unreachable for `--partition-ms`:
//! the dead-man rule halts every player, and the next poll says `dead_man_halted`).

mod ledger;
mod world;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use helix_core::domain::embodiment::protocol::{CONNECTOR_BASE, Command, PROTOCOL_V1, PollResponse};
use helix_core::domain::embodiment::{ConnectorConfig, action_schema_hash};
use helix_core::domain::source::ConnectorCredential;
use serde_json::{Value, json};

use helix_core::domain::embodiment::action::Step;
use ledger::{Entry, EntryState, Ledger, key};
use world::{Progress, World};

pub const CREDENTIAL_ENV: &str = "HELIX_CONNECTOR_CREDENTIAL";
/// The exit status of `--crash-mid-action` (as a process killed by SIGKILL reports).
const CRASH_STATUS: i32 = 137;
/// The exit status when Helix refuses this connector's epoch (another registration).
const STALE_STATUS: i32 = 3;

#[derive(clap::Args, Clone, Debug)]
pub struct ConnectorSimArgs {
    /// The connector configuration JSON the pairing page showed (base URL, world, binding).
    #[arg(long, required_unless_present = "print_schema_hash")]
    pub config: Option<std::path::PathBuf>,
    /// Print the admitted action schema's hash (the `schema_hash` a registration must carry)
    /// and exit.
    #[arg(long)]
    pub print_schema_hash: bool,
    /// How many polls to make (0: until interrupted).
    #[arg(long, default_value_t = 0)]
    pub polls: u64,
    /// Pause between polls (default: the interval Helix suggests).
    #[arg(long)]
    pub interval_ms: Option<u64>,
    /// The players the connector can drive (display names; native ids are derived).
    #[arg(long, default_value = "Steve")]
    pub players: String,
    /// Simulate a person taking the controls at this poll (1-based); SIGUSR1 (`kill -USR1`)
    /// does it at the next poll.
    #[arg(long)]
    pub override_at_poll: Option<u64>,
    /// Every block break fails (`hazard`) without changing the world.
    #[arg(long)]
    pub hazard: bool,
    /// Keep the command ledger, the epoch, the unanswered acknowledgements and the world
    /// in this file (JSON). A restart with the same file resumes at the ledger's epoch when
    /// it is still current, acknowledges every command it finds started `interrupted`,
    /// and never executes one again.
    #[arg(long)]
    pub ledger: Option<std::path::PathBuf>,
    /// Exit abruptly (status 137) right after starting the first mutating step: the
    /// ledger records it and the world changed, nothing is acknowledged.
    #[arg(long)]
    pub crash_mid_action: bool,
    /// Simulate a network partition after this poll (1-based): nothing reaches Helix for
    /// `--partition-ms`.
    #[arg(long)]
    pub partition_after_poll: Option<u64>,
    /// How long the partition lasts (default: the dead-man time and two poll intervals).
    #[arg(long)]
    pub partition_ms: Option<u64>,
    /// Halt every player after this long without reaching Helix (at most the `dead_man_ms`
    /// Helix gave at registration, which is the default).
    #[arg(long)]
    pub dead_man_ms: Option<u64>,
    /// How many polls breaking a block takes (the block changes at the end).
    #[arg(long, default_value_t = 1)]
    pub dig_ticks: u32,
}

/// A command under way: its ledger key and how many ticks it still needs.
struct Active {
    cmd: Command,
    key: String,
    ticks_left: u32,
    /// A chat line was sent: its echo, reported on the next poll (the step was
    /// acknowledged `completed` without an observation, so Helix is `verifying` it).
    echo: Option<Value>,
}

/// Why a request to Helix did not succeed.
enum PostError {
    /// Helix was not reached (or answered 5xx): the dead-man clock keeps running.
    Unreachable(String),
    /// A poll under an epoch that is no longer the pairing's.
    StaleEpoch(u64),
    /// Any other refusal (e.g. `connector_credential_invalid` after a revocation).
    Refused(String),
}

pub async fn run(args: ConnectorSimArgs) -> anyhow::Result<()> {
    if args.print_schema_hash {
        println!("{}", action_schema_hash());
        return Ok(());
    }
    let config_path = args.config.clone().context("--config is required")?;
    let raw = std::env::var(CREDENTIAL_ENV).with_context(|| format!("{CREDENTIAL_ENV} is not set"))?;
    let Some(credential) = ConnectorCredential::parse(raw.trim()) else {
        bail!("{CREDENTIAL_ENV} is not a connector credential (hac_...)");
    };
    let text = std::fs::read_to_string(&config_path).with_context(|| format!("reading {}", config_path.display()))?;
    let config: ConnectorConfig = serde_json::from_str(&text).context("the connector configuration JSON")?;
    let sim = Sim {
        base: format!("{}{CONNECTOR_BASE}", config.base_url.trim_end_matches('/')),
        client: reqwest::Client::builder().timeout(Duration::from_secs(10)).build()?,
        credential,
    };
    let mut ledger = Ledger::open(args.ledger.as_deref(), &args.players)?;
    let recovering = ledger.epoch > 0;
    if recovering {
        let n = ledger.interrupt_started();
        ledger.save()?;
        println!(
            "restarted with ledger at epoch {}: {n} interrupted command(s) acknowledged interrupted",
            ledger.epoch
        );
    }
    let mut epoch = recovering.then_some(ledger.epoch);
    let mut interval = args.interval_ms.unwrap_or(config.poll_interval_ms);
    let mut active: Vec<Active> = Vec::new();
    let by_hand = take_controls_on_signal()?;
    let mut last_contact = Instant::now();
    let (mut dead_man_fired, mut dead_man_report, mut send_subjects) = (false, false, recovering);
    let mut partition_until: Option<Instant> = None;
    let mut n = 0u64;
    loop {
        if epoch.is_none() {
            match sim.register(&config, &ledger.world).await {
                Ok(reg) => {
                    let e = reg["epoch"].as_u64().context("registration without epoch")?;
                    let given = reg["dead_man_ms"].as_u64().unwrap_or(10_000);
                    (ledger.epoch, ledger.dead_man_ms) = (e, args.dead_man_ms.unwrap_or(given).min(given));
                    ledger.outbox.clear(); // acknowledgements of an older epoch are refused anyway
                    ledger.save()?;
                    interval = args.interval_ms.unwrap_or(reg["poll_interval_ms"].as_u64().unwrap_or(500));
                    println!("polling every {interval} ms");
                    println!("registered environment {} at epoch {e}", config.environment_binding_id);
                    (epoch, last_contact) = (Some(e), Instant::now());
                }
                Err(PostError::Unreachable(e)) if n > 0 || recovering => eprintln!("cannot reach Helix: {e}"),
                Err(PostError::Unreachable(e) | PostError::Refused(e)) => bail!("registration: {e}"),
                Err(PostError::StaleEpoch(_)) => bail!("registration: connector_epoch_stale"),
            }
        }
        n += 1;
        if args.override_at_poll == Some(n) || by_hand.swap(false, Ordering::SeqCst) {
            if active.is_empty() {
                println!("a person took the controls: nothing was running");
            }
            for mut a in active.drain(..) {
                if let Some(echo) = a.echo.take() {
                    ledger.finish(&a, "completed", echo, None); // it was sent before
                    continue;
                }
                println!("a person took the controls: {} overridden", a.cmd.workflow_ref);
                ledger.finish(&a, "overridden", Value::Null, None);
            }
        }
        let partitioned = partition_until.is_some_and(|t| Instant::now() < t);
        if let (Some(e), false) = (epoch, partitioned) {
            let mut body = json!({ "epoch": e, "acks": ledger.outbox, "dead_man_halted": dead_man_report });
            if send_subjects {
                body["subjects"] = subjects(&ledger.world);
            }
            let sent = ledger.outbox.len();
            match sim.post("poll", &body).await.and_then(parse_poll) {
                Ok(poll) => {
                    last_contact = Instant::now();
                    (dead_man_fired, dead_man_report, send_subjects) = (false, false, false);
                    ledger.outbox.drain(..sent);
                    for r in &poll.acks {
                        println!("ack {} seq {}: {}", r.workflow_ref, r.seq, r.outcome);
                    }
                    interval = args.interval_ms.unwrap_or(poll.next_poll_ms);
                    take(&mut ledger, &mut active, poll, &args)?;
                }
                Err(PostError::StaleEpoch(current)) if n == 1 && recovering => {
                    println!("the ledger's epoch is no longer current ({current}): registering again");
                    epoch = None;
                }
                Err(PostError::StaleEpoch(current)) => {
                    eprintln!(
                        "refused: connector_epoch_stale (current epoch {current}): another connector registered \
                         for this pairing"
                    );
                    std::process::exit(STALE_STATUS);
                }
                Err(PostError::Unreachable(e)) => eprintln!("cannot reach Helix: {e}"),
                Err(PostError::Refused(e)) => bail!("poll: {e}"),
            }
        }
        if args.partition_after_poll == Some(n) {
            let ms = args.partition_ms.unwrap_or(ledger.dead_man_ms + 2 * interval);
            println!("network partition: Helix unreachable for {ms} ms");
            partition_until = Some(Instant::now() + Duration::from_millis(ms));
        }
        // The dead-man rule: out of touch too long, every player stops on its own.
        if !dead_man_fired && last_contact.elapsed() >= Duration::from_millis(ledger.dead_man_ms.max(1)) {
            dead_man_fired = true;
            dead_man_report = true;
            for a in active.drain(..) {
                ledger.set(&a.key, EntryState::Halted);
            }
            println!("dead-man: Helix not reached for {} ms, every player halted", ledger.dead_man_ms);
        }
        for mut a in std::mem::take(&mut active) {
            if let Some(echo) = a.echo.take() {
                ledger.finish(&a, "completed", echo, None);
                continue;
            }
            match ledger.world.step(&a.cmd, args.hazard, &mut a.ticks_left) {
                Progress::Running => {
                    ledger.ack(&a.key, &a.cmd, "progress", Value::Null, None);
                    active.push(a);
                }
                Progress::Done(echo) if matches!(a.cmd.step, Step::Chat(_)) => {
                    // Sent now; the world echoes it by the next poll.
                    ledger.executed(&a.key);
                    ledger.ack(&a.key, &a.cmd, "completed", Value::Null, None);
                    a.echo = Some(echo);
                    active.push(a);
                }
                Progress::Done(observation) => {
                    // A player that moved reports its new position (reach is counted from it).
                    send_subjects |= matches!(a.cmd.step, Step::MoveTo(_));
                    ledger.executed(&a.key);
                    ledger.finish(&a, "completed", observation, None);
                }
                Progress::Failed(reason) => ledger.finish(&a, "failed", Value::Null, Some(reason)),
            }
        }
        ledger.save()?;
        if args.polls != 0 && n >= args.polls {
            if let (Some(e), false) = (epoch, ledger.outbox.is_empty()) {
                let body = json!({ "epoch": e, "acks": ledger.outbox });
                if sim.post("poll", &body).await.is_ok() {
                    ledger.outbox.clear();
                    ledger.save()?;
                }
            }
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(interval)).await;
    }
}

/// `kill -USR1 <pid>`: a person takes the controls at the next poll (the flag it sets).
fn take_controls_on_signal() -> anyhow::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut usr1 = signal(SignalKind::user_defined1()).context("listening for SIGUSR1")?;
        let set = flag.clone();
        tokio::spawn(async move {
            while usr1.recv().await.is_some() {
                set.store(true, Ordering::SeqCst);
            }
        });
    }
    Ok(flag)
}

/// The answer of one poll, acted on: an Emergency Stop (of every player, or of the
/// `stopped_subjects`) or the cancel list halts commands,
/// new commands are taken into the ledger (a redelivery of one it holds is not).
fn take(
    ledger: &mut Ledger,
    active: &mut Vec<Active>,
    poll: PollResponse,
    args: &ConnectorSimArgs,
) -> anyhow::Result<()> {
    if poll.emergency_stop_active {
        if !active.is_empty() {
            println!("Emergency Stop (generation {}): every player halted", poll.emergency_stop_generation);
        }
        for a in active.drain(..) {
            ledger.set(&a.key, EntryState::Halted);
        }
    }
    // A member's Emergency Stop of one player: exactly those players halt, their
    // commands are dropped (the others play on).
    let stopped = |a: &Active| poll.stopped_subjects.contains(&a.cmd.native_id);
    for a in active.iter().filter(|a| stopped(a)) {
        println!(
            "Emergency Stop of player {}: halted {} step {}",
            a.cmd.native_id, a.cmd.workflow_ref, a.cmd.step_index
        );
        ledger.set(&a.key, EntryState::Halted);
    }
    active.retain(|a| !stopped(a));
    // A cancelled command stops before its effect: it is acknowledged `failed` (no world
    // change), which ends a `cancel_requested` workflow `cancelled`.
    // A chat line already sent reports its echo instead.
    for a in active.iter_mut().filter(|a| poll.cancel.contains(&a.cmd.workflow_ref)) {
        println!("cancelled by Helix: {} step {}", a.cmd.workflow_ref, a.cmd.step_index);
        match a.echo.take() {
            Some(echo) => ledger.finish(a, "completed", echo, None),
            None => ledger.finish(a, "failed", Value::Null, Some("cancelled")),
        }
    }
    active.retain(|a| !poll.cancel.contains(&a.cmd.workflow_ref));
    for cmd in poll.commands {
        if poll.stopped_subjects.contains(&cmd.native_id) {
            println!("dropped {} step {}: player {} is stopped", cmd.workflow_ref, cmd.step_index, cmd.native_id);
            continue;
        }
        let k = key(&cmd.workflow_ref, cmd.step_index, &cmd.lease_token);
        if ledger.entries.contains_key(&k) {
            continue; // a redelivery of a command already taken: never executed twice
        }
        let entry = Entry {
            workflow_ref: cmd.workflow_ref.clone(),
            step_index: cmd.step_index,
            lease_token: cmd.lease_token.clone(),
            state: EntryState::Started,
            seq: 0,
            executions: 0,
        };
        ledger.entries.insert(k.clone(), entry);
        if let Some(reason) = ledger.world.refuses(&cmd) {
            // Refused instead of accepted: nothing touched the world.
            println!("command {} step {}: {}", cmd.workflow_ref, cmd.step_index, cmd.step.kind());
            println!("rejected {} step {}: {reason}", cmd.workflow_ref, cmd.step_index);
            ledger.ack(&k, &cmd, "rejected", Value::Null, Some(reason));
            ledger.set(&k, EntryState::Finished);
            ledger.save()?;
            continue;
        }
        ledger.ack(&k, &cmd, "accepted", Value::Null, None);
        // Recorded before anything happens in the world.
        ledger.save()?;
        // Printed once the ledger holds it: a kill after this line finds the entry.
        println!("command {} step {}: {}", cmd.workflow_ref, cmd.step_index, cmd.step.kind());
        let ticks_left = World::ticks_for(&cmd.step, args.dig_ticks);
        if args.crash_mid_action && cmd.step.mutates() {
            let mut one = 1;
            if let Progress::Done(_) = ledger.world.step(&cmd, args.hazard, &mut one) {
                ledger.executed(&k);
            }
            ledger.save()?;
            eprintln!("crash-mid-action: exiting abruptly during {} step {}", cmd.workflow_ref, cmd.step_index);
            std::process::exit(CRASH_STATUS);
        }
        active.push(Active { cmd, key: k, ticks_left, echo: None });
    }
    Ok(())
}

impl Ledger {
    fn set(&mut self, k: &str, state: EntryState) {
        if let Some(e) = self.entries.get_mut(k) {
            e.state = state;
        }
    }

    fn executed(&mut self, k: &str) {
        if let Some(e) = self.entries.get_mut(k) {
            e.executions += 1;
        }
    }

    /// Queues the next acknowledgement of a command (its sequence from the ledger).
    fn ack(&mut self, k: &str, cmd: &Command, status: &str, observation: Value, reason: Option<&str>) {
        let Some(e) = self.entries.get_mut(k) else { return };
        e.seq += 1;
        self.outbox.push(json!({
            "workflow_ref": cmd.workflow_ref, "lease_token": cmd.lease_token, "step_index": cmd.step_index,
            "seq": e.seq, "status": status, "observation": observation, "reason": reason,
        }));
    }

    fn finish(&mut self, a: &Active, status: &str, observation: Value, reason: Option<&str>) {
        self.ack(&a.key, &a.cmd, status, observation, reason);
        self.set(&a.key, EntryState::Finished);
    }
}

fn subjects(world: &World) -> Value {
    let player = |p: &world::Player| json!({ "native_id": p.native_id, "display_name": p.name, "online": true, "position": p.pos });
    world.players.iter().map(player).collect()
}

fn parse_poll(v: Value) -> Result<PollResponse, PostError> {
    serde_json::from_value(v).map_err(|e| PostError::Refused(format!("poll response: {e}")))
}

struct Sim {
    base: String,
    client: reqwest::Client,
    credential: ConnectorCredential,
}

impl Sim {
    async fn register(&self, config: &ConnectorConfig, world: &World) -> Result<Value, PostError> {
        let registration = json!({
            "protocol": PROTOCOL_V1,
            "manifest": { "connector_name": "helix-connector-sim", "connector_version": env!("CARGO_PKG_VERSION"), "world_id": config.world_id },
            "schema_hash": action_schema_hash(),
            "capabilities": ["move_to", "look_at", "stop", "break_block", "place_block", "equip", "craft", "chat", "wait"],
            "subjects": subjects(world),
        });
        self.post("register", &registration).await
    }

    async fn post(&self, path: &str, body: &Value) -> Result<Value, PostError> {
        let url = format!("{}/{path}", self.base);
        let res = self
            .client
            .post(&url)
            .bearer_auth(self.credential.expose())
            .json(body)
            .send()
            .await
            .map_err(|e| PostError::Unreachable(format!("{path}: {e}")))?;
        let status = res.status();
        let v: Value = res.json().await.unwrap_or(Value::Null);
        if status.is_server_error() {
            return Err(PostError::Unreachable(format!("{path}: {status}")));
        }
        if !status.is_success() {
            let code = v["error"]["code"].as_str().unwrap_or("error");
            if code == "connector_epoch_stale" {
                return Err(PostError::StaleEpoch(v["error"]["details"]["current_epoch"].as_u64().unwrap_or(0)));
            }
            return Err(PostError::Refused(format!("{path}: {status} {code}")));
        }
        Ok(v)
    }
}
