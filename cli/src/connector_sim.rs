//! `helix connector-sim`: a reference action connector. It plays a deterministic
//! simulated world (players with positions, blocks, inventories, crafting) through the
//! real southbound connector routes: it registers (a new epoch), reports its subjects,
//! polls, executes leased commands with realistic timing (a player walks at most four
//! blocks per poll) and acknowledges each with what its world now shows. Its credential
//! comes from `HELIX_CONNECTOR_CREDENTIAL`, never an argument, and is never printed; its
//! configuration is the JSON the pairing page showed once.
//!
//! Its command ledger (by workflow, step and lease token) makes at-least-once delivery
//! effectively once: a redelivered command it already took is not executed again.
//! `--override-at-poll N` simulates a person taking the controls at poll N, and the
//! signal `SIGUSR1` at the next poll (the running command is acknowledged `overridden`);
//! `--hazard` makes every block break fail.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use helix_core::domain::embodiment::action::Step;
use helix_core::domain::embodiment::protocol::{CONNECTOR_BASE, Command, PROTOCOL_V1, PollResponse};
use helix_core::domain::embodiment::{ConnectorConfig, action_schema_hash};
use helix_core::domain::source::ConnectorCredential;
use serde_json::{Value, json};

pub const CREDENTIAL_ENV: &str = "HELIX_CONNECTOR_CREDENTIAL";

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
}

struct Player {
    native_id: String,
    name: String,
    pos: [i32; 3],
    inventory: BTreeMap<String, i32>,
    equipped: Option<String>,
}

/// The deterministic world: blocks below y=64 are stone, a few logs stand at y=64.
struct World {
    players: Vec<Player>,
    blocks: BTreeMap<[i32; 3], String>,
}

impl World {
    fn new(names: &str) -> Self {
        let players = names
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .enumerate()
            .map(|(i, n)| Player {
                native_id: format!("sim-{:08x}-{i}", helix_core::domain::sha256_hex(n).len() as u32 * 7919 + i as u32),
                name: n.to_owned(),
                pos: [0, 64, i as i32 * 2],
                inventory: BTreeMap::from([("minecraft:oak_log".into(), 4), ("minecraft:dirt".into(), 16)]),
                equipped: None,
            })
            .collect();
        let blocks = (0..4).map(|x| ([x + 5, 64, 5], "minecraft:oak_log".to_owned())).collect();
        World { players, blocks }
    }

    fn block(&self, at: [i32; 3]) -> String {
        self.blocks
            .get(&at)
            .cloned()
            .unwrap_or_else(|| if at[1] < 64 { "minecraft:stone" } else { "minecraft:air" }.into())
    }
}

/// A command under way: the ledger entry and how many polls it still needs.
struct Active {
    cmd: Command,
    seq: u32,
    polls_left: u32,
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
    let base = format!("{}{CONNECTOR_BASE}", config.base_url.trim_end_matches('/'));
    let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build()?;
    let mut world = World::new(&args.players);
    let subjects: Vec<Value> = world
        .players
        .iter()
        .map(|p| json!({ "native_id": p.native_id, "display_name": p.name, "online": true }))
        .collect();
    let registration = json!({
        "protocol": PROTOCOL_V1,
        "manifest": { "connector_name": "helix-connector-sim", "connector_version": env!("CARGO_PKG_VERSION"), "world_id": config.world_id },
        "schema_hash": action_schema_hash(),
        "capabilities": ["move_to", "look_at", "stop", "break_block", "place_block", "equip", "craft", "chat", "wait"],
        "subjects": subjects,
    });
    let reg = post(&client, &format!("{base}/register"), &credential, &registration).await?;
    let epoch = reg["epoch"].as_u64().context("registration without epoch")?;
    let mut interval = args.interval_ms.unwrap_or(reg["poll_interval_ms"].as_u64().unwrap_or(500));
    println!("polling every {interval} ms");
    println!("registered environment {} at epoch {epoch}", config.environment_binding_id);
    let mut ledger: HashSet<(String, u32, String)> = HashSet::new();
    let mut active: Vec<Active> = Vec::new();
    let mut acks: Vec<Value> = Vec::new();
    let by_hand = take_controls_on_signal()?;
    let mut n = 0u64;
    loop {
        n += 1;
        if args.override_at_poll == Some(n) || by_hand.swap(false, Ordering::SeqCst) {
            if active.is_empty() {
                println!("a person took the controls: nothing was running");
            }
            for a in active.drain(..) {
                println!("a person took the controls: {} overridden", a.cmd.workflow_ref);
                acks.push(ack(&a.cmd, a.seq + 1, "overridden", Value::Null, None));
            }
        }
        let body = json!({ "epoch": epoch, "acks": std::mem::take(&mut acks) });
        let v = post(&client, &format!("{base}/poll"), &credential, &body).await?;
        let poll: PollResponse = serde_json::from_value(v).context("poll response")?;
        interval = args.interval_ms.unwrap_or(poll.next_poll_ms);
        if poll.emergency_stop_active {
            if !active.is_empty() {
                println!("Emergency Stop (generation {}): every player halted", poll.emergency_stop_generation);
            }
            active.clear();
        }
        active.retain(|a| !poll.cancel.contains(&a.cmd.workflow_ref));
        for cmd in poll.commands {
            let entry = (cmd.workflow_ref.clone(), cmd.step_index, cmd.lease_token.clone());
            if !ledger.insert(entry) {
                continue; // a redelivery of a command already taken: never executed twice
            }
            println!("command {} step {}: {}", cmd.workflow_ref, cmd.step_index, cmd.step.kind());
            acks.push(ack(&cmd, 1, "accepted", Value::Null, None));
            let polls_left = match &cmd.step {
                Step::Wait(w) => u32::from(w.ticks).div_ceil(10),
                _ => 1,
            };
            active.push(Active { cmd, seq: 1, polls_left });
        }
        let mut still = Vec::new();
        for mut a in active.drain(..) {
            match execute(&mut world, &a.cmd, &args, &mut a.polls_left) {
                Progress::Running => {
                    a.seq += 1;
                    acks.push(ack(&a.cmd, a.seq, "progress", Value::Null, None));
                    still.push(a);
                }
                Progress::Done(observation) => {
                    acks.push(ack(&a.cmd, a.seq + 1, "completed", observation, None));
                }
                Progress::Failed(reason) => acks.push(ack(&a.cmd, a.seq + 1, "failed", Value::Null, Some(reason))),
            }
        }
        active = still;
        if args.polls != 0 && n >= args.polls {
            if !acks.is_empty() {
                let body = json!({ "epoch": epoch, "acks": std::mem::take(&mut acks) });
                post(&client, &format!("{base}/poll"), &credential, &body).await?;
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

enum Progress {
    Running,
    Done(Value),
    Failed(&'static str),
}

fn execute(world: &mut World, cmd: &Command, args: &ConnectorSimArgs, polls_left: &mut u32) -> Progress {
    let Some(i) = world.players.iter().position(|p| p.native_id == cmd.native_id) else {
        return Progress::Failed("unknown_player");
    };
    let at = |x, y, z| [x, y, z];
    match &cmd.step {
        Step::MoveTo(m) => {
            let p = &mut world.players[i];
            let target = [m.x, m.y, m.z];
            let mut left = 4;
            for (pos, goal) in p.pos.iter_mut().zip(target) {
                while *pos != goal && left > 0 {
                    *pos += (goal - *pos).signum();
                    left -= 1;
                }
            }
            let close = (0..3).all(|a| (p.pos[a] - target[a]).abs() <= i32::from(m.range));
            if close { Progress::Done(json!({ "position": p.pos })) } else { Progress::Running }
        }
        Step::BreakBlock(b) => {
            let pos = at(b.x, b.y, b.z);
            if args.hazard {
                return Progress::Failed("hazard");
            }
            if world.block(pos) != b.expected_block {
                return Progress::Failed("unexpected_block");
            }
            world.blocks.insert(pos, "minecraft:air".into());
            *world.players[i].inventory.entry(b.expected_block.clone()).or_default() += 1;
            Progress::Done(json!({ "block_at_target": world.block(pos) }))
        }
        Step::PlaceBlock(p) => {
            let pos = at(p.x, p.y, p.z);
            let inv = &mut world.players[i].inventory;
            match inv.get_mut(&p.item) {
                Some(n) if *n > 0 && world.blocks.get(&pos).is_none_or(|b| b == "minecraft:air") => {
                    *n -= 1;
                    world.blocks.insert(pos, p.item.clone());
                    Progress::Done(json!({ "block_at_target": p.item }))
                }
                _ => Progress::Failed("cannot_place"),
            }
        }
        Step::Equip(e) => {
            let p = &mut world.players[i];
            if p.inventory.get(&e.item).copied().unwrap_or(0) == 0 {
                return Progress::Failed("not_in_inventory");
            }
            p.equipped = Some(e.item.clone());
            Progress::Done(json!({ "equipped": e.item }))
        }
        Step::Craft(c) => {
            // One log makes four planks; any other item needs one log per craft.
            let p = &mut world.players[i];
            let logs = p.inventory.entry("minecraft:oak_log".into()).or_default();
            let need = i32::from(c.times);
            if *logs < need {
                return Progress::Failed("missing_ingredients");
            }
            *logs -= need;
            let made = if c.item == "minecraft:oak_planks" { 4 * need } else { need };
            *p.inventory.entry(c.item.clone()).or_default() += made;
            Progress::Done(json!({ "inventory_delta": [[c.item, made]] }))
        }
        Step::Chat(c) => Progress::Done(json!({ "chat_echo": c.text })),
        Step::Wait(_) => {
            *polls_left = polls_left.saturating_sub(1);
            if *polls_left == 0 {
                Progress::Done(json!({ "position": world.players[i].pos }))
            } else {
                Progress::Running
            }
        }
        Step::LookAt(_) | Step::Stop(_) => Progress::Done(json!({ "position": world.players[i].pos })),
    }
}

fn ack(cmd: &Command, seq: u32, status: &str, observation: Value, reason: Option<&str>) -> Value {
    json!({
        "workflow_ref": cmd.workflow_ref, "lease_token": cmd.lease_token, "step_index": cmd.step_index,
        "seq": seq, "status": status, "observation": observation, "reason": reason,
    })
}

async fn post(
    client: &reqwest::Client,
    url: &str,
    credential: &ConnectorCredential,
    body: &Value,
) -> anyhow::Result<Value> {
    let res = client.post(url).bearer_auth(credential.expose()).json(body).send().await?;
    let status = res.status();
    let v: Value = res.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        bail!("{url}: {status} {}", v["error"]["code"].as_str().unwrap_or("error"));
    }
    Ok(v)
}
