//! `helix source-sim`: a reference producer. It plays a deterministic simulated world
//! through the real ingress with a claimed source bearer, taken from the environment
//! (`HELIX_SOURCE_BEARER`), never from an argument, and never printed. On every tick it
//! also polls ingress for pending environment probes and answers each one it can
//! (`com.casimirbot.minecraft.inventory.check` for the `minecraft` profile) with a
//! deterministic inventory of its simulated world.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use helix_core::domain::source::{
    AdapterProfile, INGRESS_BASE, PROBE_CAPABILITY, PluginConfig, ProbeList, SourceBearer, adapter,
};
use serde_json::{Value, json};

pub const BEARER_ENV: &str = "HELIX_SOURCE_BEARER";

#[derive(clap::Args, Clone, Debug)]
pub struct SimArgs {
    /// The plugin configuration JSON shown once by the claim page (ingress URL, world,
    /// adapter profile and hashes). Without it, give --ingress-url and --world.
    #[arg(long)]
    pub plugin_config: Option<std::path::PathBuf>,
    /// The server's base URL (e.g. http://127.0.0.1:9000), when no plugin config is given.
    #[arg(long)]
    pub base_url: Option<String>,
    /// The world the source is bound to, when no plugin config is given.
    #[arg(long)]
    pub world: Option<String>,
    /// The adapter profile, when no plugin config is given.
    #[arg(long, default_value = "minecraft")]
    pub profile: String,
    /// The producer epoch to register (raise it after a restart that must supersede).
    #[arg(long, default_value_t = 1)]
    pub epoch: u64,
    /// How many ticks to play (0: until interrupted).
    #[arg(long, default_value_t = 10)]
    pub ticks: u64,
    /// Observations per tick (one batch per tick, 1-25).
    #[arg(long, default_value_t = 2)]
    pub batch: usize,
    /// Pause between ticks.
    #[arg(long, default_value_t = 1000)]
    pub interval_ms: u64,
    /// Seed of the simulated world (same seed, same world).
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
}

/// Where and as what to report.
struct Target {
    ingress: String,
    world: String,
    profile: &'static AdapterProfile,
    manifest: Value,
}

fn target(args: &SimArgs) -> anyhow::Result<Target> {
    let (ingress, world, profile_id) = match &args.plugin_config {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            let c: PluginConfig = serde_json::from_str(&text).context("the plugin configuration is not valid JSON")?;
            (c.ingress_base_url, c.world_id, c.adapter_profile)
        }
        None => {
            let base = args.base_url.as_deref().context("--base-url (or --plugin-config) is required")?;
            let world = args.world.clone().context("--world (or --plugin-config) is required")?;
            (format!("{}{INGRESS_BASE}", base.trim_end_matches('/')), world, args.profile.clone())
        }
    };
    let profile = adapter(&profile_id).with_context(|| format!("{profile_id} is not an adapter profile"))?;
    let manifest = json!({
        "adapter_profile": profile.id,
        "adapter_version": profile.version,
        "adapter_hash": profile.adapter_hash(),
        "world_id": world,
        "manifest_hash": profile.manifest_hash(&world),
        "producer_epoch": args.epoch,
    });
    Ok(Target { ingress, world, profile, manifest })
}

/// The deterministic world: tick `t`, observation `i` of seed `seed`.
/// `session` makes request identities unique across runs of the simulator (the world
/// itself depends only on the seed).
fn observation(profile: &AdapterProfile, world: &str, seed: u64, session: &str, t: u64, i: usize) -> Value {
    const PLAYERS: &[&str] = &["Alex", "Steve", "Noor", "Kai", "Mina"];
    let n = seed.wrapping_mul(6364136223846793005).wrapping_add(t * 31 + i as u64);
    let player = PLAYERS[(n % PLAYERS.len() as u64) as usize];
    let at = helix_core::domain::time::rfc3339(chrono::Utc::now());
    let request_id = format!("sim-{session}-t{t:06}-{i:02}");
    if i == 0 && t.is_multiple_of(5) {
        return json!({
            "request_id": request_id,
            "kind": "snapshot",
            "observed_at": at,
            "summary": format!("{world}: {} players online at tick {t}", 1 + n % 4),
            "data": { "tick": t, "players_online": 1 + n % 4, "time_of_day": (t * 600) % 24000 },
        });
    }
    let event = profile.event_names[(n % profile.event_names.len() as u64) as usize];
    json!({
        "request_id": request_id,
        "kind": "event",
        "event": event,
        "observed_at": at,
        "summary": format!("{player}: {} in {world} at tick {t}", event.replace('_', " ")),
        "data": { "tick": t, "player": player },
    })
}

/// The deterministic inventory check of tick `t`: who is online and what they carry.
fn inventory_answer(
    world: &str,
    seed: u64,
    session: &str,
    t: u64,
    probe_id: &str,
    epoch: u64,
    manifest_hash: &Value,
) -> Value {
    const PLAYERS: &[&str] = &["Alex", "Steve", "Noor", "Kai", "Mina"];
    const ITEMS: &[&str] = &[
        "minecraft:oak_log",
        "minecraft:cobblestone",
        "minecraft:iron_ingot",
        "minecraft:bread",
        "minecraft:torch",
        "minecraft:diamond",
    ];
    let n = seed.wrapping_mul(6364136223846793005).wrapping_add(t * 31);
    let online = 1 + (n % 3) as usize;
    let players: Vec<Value> = (0..online)
        .map(|k| {
            let m = n.wrapping_add(k as u64 * 17);
            let items: Vec<Value> = (0..2 + (m % 3) as usize)
                .map(|j| {
                    let item = ITEMS[((m + j as u64 * 7) % ITEMS.len() as u64) as usize];
                    json!({ "item": item, "count": 1 + (m.wrapping_add(j as u64 * 13) % 64) })
                })
                .collect();
            json!({ "player": PLAYERS[(m % PLAYERS.len() as u64) as usize], "items": items })
        })
        .collect();
    let tail = probe_id.get(4..16).unwrap_or(probe_id);
    json!({
        "manifest_hash": manifest_hash,
        "producer_epoch": epoch,
        "request_id": format!("sim-{session}-probe-{tail}"),
        "observed_at": helix_core::domain::time::rfc3339(chrono::Utc::now()),
        "summary": format!("{world}: inventory check at tick {t}, {online} player(s) online"),
        "inventory": { "players": players },
    })
}

/// Polls the pending probes once and answers each one this adapter can answer.
async fn answer_probes(
    client: &reqwest::Client,
    t: &Target,
    bearer: &SourceBearer,
    args: &SimArgs,
    session: &str,
    tick: u64,
) -> anyhow::Result<u32> {
    if !t.profile.probe_capabilities.contains(&PROBE_CAPABILITY) {
        return Ok(0);
    }
    let url = format!("{}/probes", t.ingress);
    let res = client.get(&url).bearer_auth(bearer.expose()).send().await.context("ingress unreachable")?;
    let status = res.status();
    if !status.is_success() {
        bail!("ingress answered {status} to the probe poll");
    }
    let list: ProbeList = res.json().await.context("the probe list is not valid")?;
    let mut answered = 0;
    for p in list.probes.iter().filter(|p| p.capability == PROBE_CAPABILITY) {
        let body =
            inventory_answer(&t.world, args.seed, session, tick, &p.probe_id, args.epoch, &t.manifest["manifest_hash"]);
        let url = format!("{}/probes/{}/answer", t.ingress, p.probe_id);
        match post(client, &url, bearer, &body).await {
            Ok(receipt) => {
                answered += 1;
                println!(
                    "{}",
                    json!({ "tick": tick, "probe_id": p.probe_id, "observation_ref": receipt["observation_ref"] })
                );
            }
            // A probe can close between the poll and the answer: report it and go on.
            Err(e) => eprintln!("source-sim: probe {} not answered: {e}", p.probe_id),
        }
    }
    Ok(answered)
}

async fn post(client: &reqwest::Client, url: &str, bearer: &SourceBearer, body: &Value) -> anyhow::Result<Value> {
    let res = client.post(url).bearer_auth(bearer.expose()).json(body).send().await.context("ingress unreachable")?;
    let status = res.status();
    let value: Value = res.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        bail!("ingress answered {status}: {}", value["error"]["code"].as_str().unwrap_or("unknown error"));
    }
    Ok(value)
}

pub async fn run(args: SimArgs) -> anyhow::Result<()> {
    let raw = std::env::var(BEARER_ENV).with_context(|| format!("{BEARER_ENV} must hold the claimed source bearer"))?;
    let bearer = SourceBearer::parse(raw.trim()).with_context(|| format!("{BEARER_ENV} is not a source bearer"))?;
    if !(1..=25).contains(&args.batch) {
        bail!("--batch must be 1-25");
    }
    let t = target(&args)?;
    let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build()?;
    let receipt = post(&client, &format!("{}/manifest", t.ingress), &bearer, &t.manifest).await?;
    println!("{}", json!({ "manifest": receipt }));
    let started = Instant::now();
    let session = format!("e{}-{}", args.epoch, chrono::Utc::now().timestamp_millis());
    let mut sent = 0u64;
    let mut probes = 0u32;
    let mut tick = 0u64;
    while args.ticks == 0 || tick < args.ticks {
        let observations: Vec<Value> =
            (0..args.batch).map(|i| observation(t.profile, &t.world, args.seed, &session, tick, i)).collect();
        let body = json!({
            "manifest_hash": t.manifest["manifest_hash"],
            "producer_epoch": args.epoch,
            "observations": observations,
        });
        let receipt = post(&client, &format!("{}/observations", t.ingress), &bearer, &body).await?;
        sent += receipt["accepted"].as_u64().unwrap_or(0);
        println!("{}", json!({ "tick": tick, "accepted": receipt["accepted"] }));
        probes += answer_probes(&client, &t, &bearer, &args, &session, tick).await?;
        tick += 1;
        if args.interval_ms > 0 && (args.ticks == 0 || tick < args.ticks) {
            tokio::time::sleep(Duration::from_millis(args.interval_ms)).await;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "source-sim: {sent} observations in {secs:.2} s ({:.0} observations/s), {probes} probe(s) answered",
        sent as f64 / secs.max(1e-9)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simulated_world_is_deterministic_and_valid_for_its_adapter() {
        let p = adapter("minecraft").unwrap();
        let a = observation(p, "w", 7, "e1-1", 3, 1);
        let b = observation(p, "w", 7, "e1-2", 3, 1);
        assert_eq!(a["summary"], b["summary"], "the world depends on the seed only");
        assert_eq!(a["request_id"], "sim-e1-1-t000003-01");
        assert_ne!(a["request_id"], b["request_id"]);
        assert!(p.event_names.contains(&a["event"].as_str().unwrap()));
        assert_eq!(observation(p, "w", 7, "e1-1", 5, 0)["kind"], "snapshot");
    }

    #[test]
    fn probe_answers_are_deterministic_and_follow_the_inventory_schema() {
        let hash = json!(adapter("minecraft").unwrap().manifest_hash("w"));
        let probe = "prb_0123456789abcdef01234567";
        let a = inventory_answer("w", 7, "e1-1", 4, probe, 1, &hash);
        let b = inventory_answer("w", 7, "e1-2", 4, probe, 1, &hash);
        assert_eq!(a["inventory"], b["inventory"], "the inventory depends on the seed and tick only");
        assert_ne!(a["request_id"], b["request_id"]);
        let parsed: helix_core::domain::source::ProbeAnswer = serde_json::from_value(a).unwrap();
        let now = chrono::Utc::now().timestamp_millis();
        assert_eq!(parsed.validate(PROBE_CAPABILITY, now, now), Ok(()));
        assert!(!parsed.inventory.players.is_empty());
    }
}
