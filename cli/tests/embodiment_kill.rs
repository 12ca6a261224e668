//! Crashes with real processes: `helix serve` on the DynamoDB emulator `scripts/test`
//! starts and `helix connector-sim` with a ledger file. kill -9 of the server between a
//! command's dispatch and its acknowledgement; kill -9 of the connector mid-action and its
//! own `--crash-mid-action`; an old-epoch connector refused; the dead-man halt of a
//! partitioned connector. Every assertion on "never executed twice" reads the simulator's
//! ledger file (its world and its per-command execution count).

mod support;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{BIN, Server, free_port, spawn_ready};

const SCOPES: &str =
    "helix.rooms.read helix.rooms.manage helix.environment_actions.read helix.environment_actions.write";
const BREAK: &str = r#"{"type": "break_block", "x": 5, "y": 64, "z": 5, "expected_block": "minecraft:oak_log"}"#;

/// One table on the emulator, one data dir, one port: a server that can be killed and
/// started again on the same state.
struct Stack {
    endpoint: String,
    table: String,
    dir: tempfile::TempDir,
    port: u16,
    base: String,
    http: reqwest::Client,
}

impl Stack {
    fn new(tag: &str) -> Stack {
        let endpoint = std::env::var("HELIX_TEST_DYNAMODB_ENDPOINT")
            .expect("HELIX_TEST_DYNAMODB_ENDPOINT: run the tests through scripts/test, which starts the emulator");
        let port = free_port();
        let s = Stack {
            endpoint,
            table: format!("helix-kill-{tag}-{}", std::process::id()),
            dir: tempfile::tempdir().unwrap(),
            port,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        };
        let out = s.helix(&["create-table", "--table", &s.table.clone()]).output().unwrap();
        assert!(out.status.success(), "create-table: {}", String::from_utf8_lossy(&out.stderr));
        s
    }

    fn helix(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .env("AWS_ENDPOINT_URL_DYNAMODB", &self.endpoint)
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env("CASIMIR_PUBLIC_BASE_URL", &self.base)
            .env_remove("HELIX_ENV");
        cmd
    }

    /// A store command (`dev-token`, `dev-session`, `account policy`) on this table.
    fn on_store(&self, args: &[&str]) -> String {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--store", "dynamodb", "--table", self.table.as_str(), "--data-dir"]);
        let out = self.helix(&all).arg(self.dir.path()).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    async fn serve(&self) -> Server {
        let addr = format!("127.0.0.1:{}", self.port);
        let mut cmd = self.helix(&["serve", "--addr", &addr, "--store", "dynamodb", "--table", &self.table]);
        cmd.arg("--data-dir").arg(self.dir.path()).stdout(Stdio::null()).stderr(Stdio::null());
        spawn_ready(cmd, self.port, 300).await
    }

    async fn get(&self, token: &str, path: &str) -> Value {
        let res = self.http.get(format!("{}{path}", self.base)).bearer_auth(token).send().await.unwrap();
        res.json().await.unwrap()
    }

    async fn post(&self, token: &str, path: &str, key: Option<&str>, body: Value) -> (u16, Value) {
        let mut req = self.http.post(format!("{}{path}", self.base)).bearer_auth(token).json(&body);
        if let Some(k) = key {
            req = req.header("Idempotency-Key", k);
        }
        let res = req.send().await.unwrap();
        (res.status().as_u16(), res.json().await.unwrap_or(Value::Null))
    }
}

/// alice (a developer) owns a room and paired a connector: what the tests drive.
struct Paired {
    token: String,
    room: String,
    binding: String,
    credential: String,
    config: PathBuf,
}

async fn paired(s: &Stack) -> Paired {
    let who = ["--subject", "alice", "--tenant", "tenant-a"];
    let token = s.on_store(&[&["dev-token", "--scope", SCOPES][..], &who].concat());
    s.on_store(&[&["account", "policy"][..], &who, &["--developer", "true"]].concat());
    let cookie = s.on_store(&[&["dev-session"][..], &who].concat());
    let (status, room) = s.post(&token, "/api/v1/rooms", Some("kill-room-0001"), json!({ "name": "Lab" })).await;
    assert_eq!(status, 201, "{room}");
    let room = room["room_id"].as_str().unwrap().to_owned();
    let res = s
        .http
        .post(format!("{}/api/account/room-connectors/pairings", s.base))
        .header("cookie", format!("helix_session={cookie}"))
        .header("origin", &s.base)
        .header("sec-fetch-site", "same-origin")
        .json(&json!({ "room_id": room, "world_id": "overworld" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let p: Value = res.json().await.unwrap();
    let config = s.dir.path().join("connector.json");
    std::fs::write(&config, p["connector_config"].to_string()).unwrap();
    Paired {
        token,
        room,
        binding: p["environment_binding_id"].as_str().unwrap().to_owned(),
        credential: p["connector_credential"].as_str().unwrap().to_owned(),
        config,
    }
}

/// A running `helix connector-sim` whose stdout lines are collected.
struct Sim {
    child: Option<Child>,
    lines: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Drop for Sim {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn collect(r: impl std::io::Read + Send + 'static) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(r).lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    lines
}

fn sim(p: &Paired, ledger: &Path, extra: &[&str]) -> Sim {
    let mut child = Command::new(BIN)
        .args(["connector-sim", "--config"])
        .arg(&p.config)
        .arg("--ledger")
        .arg(ledger)
        .args(extra)
        .env("HELIX_CONNECTOR_CREDENTIAL", &p.credential)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = collect(child.stdout.take().unwrap());
    let stderr = collect(child.stderr.take().unwrap());
    Sim { child: Some(child), lines, stderr }
}

impl Sim {
    /// Lines of its stdout and stderr containing `needle`.
    fn count(&self, needle: &str) -> usize {
        let hits = |lines: &Mutex<Vec<String>>| lines.lock().unwrap().iter().filter(|l| l.contains(needle)).count();
        hits(&self.lines) + hits(&self.stderr)
    }

    async fn wait_for(&self, needle: &str, secs: u64) {
        let until = Instant::now() + Duration::from_secs(secs);
        while self.count(needle) == 0 {
            assert!(Instant::now() < until, "no line with {needle:?}: {:?} {:?}", self.lines, self.stderr);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// kill -9 (std's `Child::kill` is SIGKILL on Unix), reaped.
    fn kill9(&mut self) {
        let mut c = self.child.take().unwrap();
        c.kill().unwrap();
        c.wait().unwrap();
    }

    /// Waits for the process to end by itself; its exit code.
    async fn exit_code(&mut self, secs: u64) -> Option<i32> {
        let until = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                return st.code();
            }
            assert!(Instant::now() < until, "the simulator did not exit: {:?}", self.lines);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn ledger_of(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The ledger entries of one workflow.
fn entries(ledger: &Value, workflow_ref: &str) -> Vec<Value> {
    let all = ledger["entries"].as_object().unwrap();
    all.values().filter(|e| e["workflow_ref"] == workflow_ref).cloned().collect()
}

fn logs_of_steve(ledger: &Value) -> i64 {
    ledger["world"]["players"][0]["inventory"]["minecraft:oak_log"].as_i64().unwrap()
}

/// Selects the connector's first subject and queues `action`; the workflow ref.
async fn act(s: &Stack, p: &Paired, key: &str, action: Value) -> String {
    let room = format!("/api/v1/rooms/{}", p.room);
    let until = Instant::now() + Duration::from_secs(10);
    let subject = loop {
        let list = s.get(&p.token, &format!("{room}/environment-subjects")).await;
        if let Some(r) = list["environments"][0]["subjects"][0]["subject_ref"].as_str() {
            break r.to_owned();
        }
        assert!(Instant::now() < until, "the simulator never registered: {list}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let body = json!({ "environment_binding_id": p.binding, "subject_ref": subject });
    let (status, v) = s.post(&p.token, &format!("{room}/environment-subjects/select"), None, body).await;
    assert_eq!(status, 200, "{v}");
    let (status, wf) =
        s.post(&p.token, &format!("{room}/player-actions"), Some(key), json!({ "action": action })).await;
    assert_eq!(status, 202, "{wf}");
    wf["workflow_ref"].as_str().unwrap().to_owned()
}

async fn status(s: &Stack, p: &Paired, wf: &str) -> Value {
    s.get(&p.token, &format!("/api/v1/rooms/{}/player-workflows/{wf}", p.room)).await
}

/// Polls the workflow until its status is `want` (or fails after `secs`).
async fn wait_status(s: &Stack, p: &Paired, wf: &str, want: &str, secs: u64) -> Value {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        let v = status(s, p, wf).await;
        if v["status"] == want {
            return v;
        }
        assert!(Instant::now() < until, "never {want}: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_server_killed_between_dispatch_and_acknowledgement_applies_the_ack_once_after_restart() {
    let s = Stack::new("server");
    let mut server = s.serve().await;
    let p = paired(&s).await;
    let ledger = s.dir.path().join("ledger.json");
    // A long interval: the step runs right after the dispatch, its acknowledgements wait.
    let sim = sim(&p, &ledger, &["--interval-ms", "1500"]);
    sim.wait_for("registered environment", 20).await;
    let wf = act(&s, &p, "kill-server-001", serde_json::from_str(BREAK).unwrap()).await;
    sim.wait_for(&format!("command {wf} step 0: break_block"), 20).await;
    server.0.kill().unwrap(); // SIGKILL: no acknowledgement reached it
    server.0.wait().unwrap();
    sim.wait_for("cannot reach Helix", 20).await;
    let _server = s.serve().await;
    let done = wait_status(&s, &p, &wf, "succeeded", 30).await;
    assert_eq!(done["budget"]["steps_done"], 1, "{done}");
    // The simulator prints the acknowledgement's outcome once Helix answered its poll, which
    // can be after a status read already shows `succeeded`.
    let applied = format!("ack {wf} seq 2: applied");
    sim.wait_for(&applied, 10).await;
    // Delivered again or not, the step ran once: one ledger entry, one execution, one log.
    tokio::time::sleep(Duration::from_millis(3200)).await; // two more polls
    assert_eq!(sim.count(&applied), 1, "the completion applied once: {:?} {:?}", sim.lines, sim.stderr);
    assert_eq!(sim.count(&format!("command {wf} step 0")), 1, "{:?}", sim.lines);
    let l = ledger_of(&ledger);
    let e = entries(&l, &wf);
    assert_eq!((e.len(), e[0]["executions"].as_u64(), e[0]["state"].as_str()), (1, Some(1), Some("finished")));
    assert_eq!(l["world"]["blocks"]["5,64,5"], "minecraft:air");
    assert_eq!(logs_of_steve(&l), 5, "4 logs and the one broken");
}

#[tokio::test]
async fn a_connector_killed_mid_action_restarts_to_outcome_unknown_and_never_repeats_the_step() {
    let s = Stack::new("connector");
    let _server = s.serve().await;
    let p = paired(&s).await;
    let ledger = s.dir.path().join("ledger.json");
    // Digging takes four polls: the block changes only at the end.
    let mut first = sim(&p, &ledger, &["--interval-ms", "800", "--dig-ticks", "4"]);
    first.wait_for("registered environment", 20).await;
    let wf = act(&s, &p, "kill-conn-0001", serde_json::from_str(BREAK).unwrap()).await;
    first.wait_for(&format!("command {wf} step 0: break_block"), 20).await;
    first.kill9();
    assert_eq!(entries(&ledger_of(&ledger), &wf)[0]["state"], "started", "the ledger recorded the start");

    let again = sim(&p, &ledger, &["--interval-ms", "200"]);
    again.wait_for("1 interrupted command(s)", 20).await;
    let v = wait_status(&s, &p, &wf, "outcome_unknown", 20).await;
    assert_eq!((v["reason"].as_str(), v["late_effects_possible"].as_bool()), (Some("interrupted"), Some(true)));
    let resume = json!({ "control": "resume" });
    let path = format!("/api/v1/rooms/{}/player-workflows/{wf}/control", p.room);
    let (status, e) = s.post(&p.token, &path, None, resume).await;
    assert_eq!((status, e["error"]["code"].as_str()), (409, Some("workflow_not_resumable")), "{e}");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(again.count(&format!("command {wf}")), 0, "never taken again: {:?}", again.lines);
    let l = ledger_of(&ledger);
    let e = entries(&l, &wf);
    assert_eq!((e.len(), e[0]["executions"].as_u64(), e[0]["state"].as_str()), (1, Some(0), Some("interrupted")));
    assert_eq!(l["world"]["blocks"]["5,64,5"], "minecraft:oak_log", "the dig never finished");
    assert_eq!(logs_of_steve(&l), 4);
}

#[tokio::test]
async fn crash_mid_action_exits_abruptly_and_the_restart_reports_interrupted() {
    let s = Stack::new("crash");
    let _server = s.serve().await;
    let p = paired(&s).await;
    let ledger = s.dir.path().join("ledger.json");
    let mut first = sim(&p, &ledger, &["--interval-ms", "200", "--crash-mid-action"]);
    first.wait_for("registered environment", 20).await;
    let wf = act(&s, &p, "kill-crash-0001", serde_json::from_str(BREAK).unwrap()).await;
    assert_eq!(first.exit_code(20).await, Some(137), "{:?}", first.stderr);
    let l = ledger_of(&ledger);
    assert_eq!(l["world"]["blocks"]["5,64,5"], "minecraft:air", "the step's effect happened before the crash");
    assert_ne!(status(&s, &p, &wf).await["status"], "succeeded", "nothing was acknowledged");

    let again = sim(&p, &ledger, &["--interval-ms", "200"]);
    let v = wait_status(&s, &p, &wf, "outcome_unknown", 20).await;
    assert_eq!(v["reason"], "interrupted", "{v}");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(again.count(&format!("command {wf}")), 0, "{:?}", again.lines);
    let l = ledger_of(&ledger);
    let e = entries(&l, &wf);
    assert_eq!((e.len(), e[0]["executions"].as_u64()), (1, Some(1)), "executed once, never again");
    assert_eq!(logs_of_steve(&l), 5);
}

#[tokio::test]
async fn an_old_epoch_connectors_acknowledgement_is_refused_with_connector_epoch_stale() {
    let s = Stack::new("epoch");
    let _server = s.serve().await;
    let p = paired(&s).await;
    let mut old = sim(&p, &s.dir.path().join("old.json"), &["--interval-ms", "2000"]);
    old.wait_for("at epoch 1", 20).await;
    let far = json!({"type": "move_to", "x": 300, "y": 64, "z": 0});
    let wf = act(&s, &p, "kill-epoch-0001", far).await;
    old.wait_for(&format!("command {wf} step 0: move_to"), 20).await;
    let new = sim(&p, &s.dir.path().join("new.json"), &["--interval-ms", "200"]);
    new.wait_for("at epoch 2", 20).await;
    assert_eq!(old.exit_code(20).await, Some(3), "{:?}", old.lines);
    let said = old.stderr.lock().unwrap().join("\n");
    assert!(said.contains("connector_epoch_stale (current epoch 2)"), "{said}");
    let v = status(&s, &p, &wf).await;
    assert_eq!(
        (v["status"].as_str(), v["reason"].as_str()),
        (Some("paused"), Some("connector_epoch_changed")),
        "the old connector's progress was not applied: {v}"
    );
    assert_eq!(new.count(&format!("command {wf}")), 0, "a paused workflow is not handed to the new one");
}

#[tokio::test]
async fn a_partitioned_connector_halts_on_its_own_and_helix_records_the_dead_man_halt() {
    let s = Stack::new("deadman");
    let _server = s.serve().await;
    let p = paired(&s).await;
    let ledger = s.dir.path().join("ledger.json");
    let args = ["--interval-ms", "200", "--dead-man-ms", "800", "--partition-after-poll", "30"];
    let sim = sim(&p, &ledger, &args);
    sim.wait_for("registered environment", 20).await;
    let far = json!({"type": "move_to", "x": 400, "y": 64, "z": 0});
    let wf = act(&s, &p, "kill-dead-0001", far).await;
    sim.wait_for(&format!("command {wf} step 0: move_to"), 20).await;
    sim.wait_for("network partition", 60).await;
    sim.wait_for("dead-man: Helix not reached for 800 ms, every player halted", 20).await;
    let v = wait_status(&s, &p, &wf, "paused", 20).await;
    assert_eq!(v["reason"], "dead_man_halted", "{v}");
    let l = ledger_of(&ledger);
    assert_eq!(entries(&l, &wf)[0]["state"], "halted");
    let x = l["world"]["players"][0]["pos"][0].as_i64().unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(ledger_of(&ledger)["world"]["players"][0]["pos"][0].as_i64(), Some(x), "the player stays halted");
    assert!(x < 400, "halted before arriving: {x}");
}

#[tokio::test]
async fn a_workflow_cancelled_at_the_connector_stops_there_and_ends_cancelled() {
    let s = Stack::new("cancel");
    let _server = s.serve().await;
    let p = paired(&s).await;
    let ledger = s.dir.path().join("ledger.json");
    let sim = sim(&p, &ledger, &["--interval-ms", "200"]);
    sim.wait_for("registered environment", 20).await;
    let far = json!({"type": "move_to", "x": 400, "y": 64, "z": 0});
    let wf = act(&s, &p, "kill-cancel-001", far).await;
    sim.wait_for(&format!("command {wf} step 0: move_to"), 20).await;
    let path = format!("/api/v1/rooms/{}/player-workflows/{wf}/control", p.room);
    let (status, v) = s.post(&p.token, &path, None, json!({ "control": "cancel" })).await;
    assert_eq!((status, v["status"].as_str()), (200, Some("cancel_requested")), "{v}");
    let v = wait_status(&s, &p, &wf, "cancelled", 20).await;
    assert_eq!(v["late_effects_possible"], false, "{v}");
    sim.wait_for(&format!("cancelled by Helix: {wf} step 0"), 5).await;
    let x = ledger_of(&ledger)["world"]["players"][0]["pos"][0].as_i64().unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(ledger_of(&ledger)["world"]["players"][0]["pos"][0].as_i64(), Some(x), "the player stopped");
    assert!(x < 400, "stopped before arriving: {x}");
}
