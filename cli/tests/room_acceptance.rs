//! `helix room-acceptance` as a release job runs it: the dry run connects nowhere,
//! every refused setting sends nothing, and the live run against a real `helix serve`
//! (through a fault proxy where a response must be lost) creates, replays, binds,
//! withdraws and cancels, and never prints the token.

use std::io::ErrorKind;
use std::net::TcpListener as StdListener;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

mod support;

use support::{BIN, Server, free_port};

const V: &str = "HELIX_SHARED_ROOM_ACCEPTANCE_";
/// A token shape no server would issue, so finding it in output can only be a leak.
const FAKE_TOKEN: &str = "fake-acceptance-token-7Qm2xK9pL4vR8sT1";

/// A listener nothing should reach; `assert_untouched` checks that nothing did.
fn bait() -> (StdListener, String) {
    let l = StdListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    (l, url)
}

fn assert_untouched(l: &StdListener) {
    match l.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("the harness connected: {other:?}"),
    }
}

struct Out {
    code: i32,
    report: Value,
    raw: String,
}

/// The harness with exactly `vars` (names without the common prefix, except `RUST_LOG`)
/// and nothing else.
async fn harness(vars: &[(&str, &str)]) -> Out {
    let mut cmd = Command::new(BIN);
    cmd.arg("room-acceptance").env_clear();
    for (k, v) in vars {
        cmd.env(if *k == "RUST_LOG" { k.to_string() } else { format!("{V}{k}") }, v);
    }
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap()).await.unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let raw = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let report = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("stdout is one JSON report ({e}): {raw}"));
    Out { code: out.status.code().unwrap(), report, raw }
}

/// `helix serve` on an embedded store, with the room scope enabled; returns it, its
/// port and a dev token of its account.
async fn serve() -> (Server, tempfile::TempDir, u16, String) {
    let dir = tempfile::tempdir().unwrap();
    let token = support::dev_token(dir.path(), "acceptance-user", "acceptance-tenant");
    let port = free_port();
    let env = [("HELIX_AGENT_DATABASE_SCOPES", "research_library,bound_room_evidence")];
    let server = support::serve(dir.path(), port, &env).await;
    (server, dir, port, token)
}

fn live_vars<'a>(base: &'a str, token: &'a str) -> Vec<(&'static str, &'a str)> {
    vec![
        ("BASE_URL", base),
        ("NETWORK", "1"),
        ("ALLOW_LOOPBACK_HTTP", "1"),
        ("ACCESS_TOKEN", token),
        ("ALLOW_MUTATION", "1"),
        ("TIMEOUT_MS", "10000"),
        ("TOTAL_TIMEOUT_MS", "60000"),
    ]
}

fn step<'r>(report: &'r Value, id: &str) -> &'r Value {
    report["steps"].as_array().unwrap().iter().find(|s| s["id"] == id).unwrap_or_else(|| panic!("no step {id}"))
}

fn assert_no_token(out: &Out, token: &str) {
    assert!(!out.raw.contains(token), "the token is printed: {}", out.raw);
    assert!(!out.raw.contains(&token[..token.len() / 2]), "part of the token is printed");
}

/// Every step passed or was skipped (no failure of any kind).
fn assert_all_passed(report: &Value) {
    for s in report["steps"].as_array().unwrap() {
        assert!(s["status"] == "passed" || s["status"] == "skipped", "{s}\n{report:#}");
    }
}

async fn get(port: u16, token: &str, path: &str) -> Value {
    let res = reqwest::Client::new().get(format!("http://127.0.0.1:{port}{path}")).bearer_auth(token).send().await;
    res.unwrap().json().await.unwrap()
}

async fn withdraw(port: u16, token: &str, bref: &str) -> Value {
    let url = format!("http://127.0.0.1:{port}/api/v1/rooms/run-bindings/{bref}");
    reqwest::Client::new().delete(url).bearer_auth(token).send().await.unwrap().json().await.unwrap()
}

#[tokio::test]
async fn the_dry_run_prints_the_plan_and_connects_nowhere() {
    let (listener, url) = bait();
    let vars = [
        ("BASE_URL", url.as_str()),
        ("ALLOW_LOOPBACK_HTTP", "1"),
        ("ACCESS_TOKEN", FAKE_TOKEN),
        ("ALLOW_MUTATION", "1"),
    ];
    let out = harness(&vars).await;
    assert_eq!(out.code, 0, "{}", out.raw);
    let r = &out.report;
    assert_eq!(r["schema"], "helix.shared_room.live_acceptance.v1");
    assert_eq!(
        (r["mode"].as_str(), r["outcome"].as_str(), &r["complete"]),
        (Some("dry_run"), Some("planned"), &Value::Bool(false))
    );
    assert_eq!(r["opt_ins"]["access_token"], "[redacted]");
    let steps = r["steps"].as_array().unwrap();
    assert!(steps.len() >= 15 && steps.iter().all(|s| s["status"] == "planned"), "{r:#}");
    for id in ["run_start_replay", "run_unbind", "cleanup_cancel"] {
        assert!(steps.iter().any(|s| s["id"] == id), "{id} is planned");
    }
    let checkpoints: Vec<&str> =
        r["manual_checkpoints"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    for id in
        ["browser_sign_in", "room_consent", "chat_select_and_claim", "source_credential_claim", "terminal_append_once"]
    {
        assert!(checkpoints.contains(&id), "{id} is a manual checkpoint: {checkpoints:?}");
    }
    assert!(r["manual_checkpoints"].as_array().unwrap().iter().all(|c| c["status"] == "pending_manual"));
    assert_no_token(&out, FAKE_TOKEN);

    // A release job that requires completeness cannot pass on a plan.
    let strict = harness(&[vars.as_slice(), &[("REQUIRE_COMPLETE", "1"), ("NETWORK", "0")]].concat()).await;
    assert_eq!((strict.code, strict.report["outcome"].as_str()), (3, Some("planned")), "{}", strict.raw);
    assert_untouched(&listener);

    let default = harness(&[]).await;
    assert_eq!(default.code, 0);
    assert_eq!(default.report["target"]["base_url"], "https://casimirbot.com");
}

/// Each refused setting, with every other opt-in given and the base URL at a listener:
/// exit 2, the variable named, its value never echoed, and no connection.
#[tokio::test]
async fn every_out_of_range_or_malformed_setting_is_refused_without_a_connection() {
    let (listener, url) = bait();
    let cases: &[(&str, &str, &str)] = &[
        ("TIMEOUT_MS", "999", "out_of_range"),
        ("TIMEOUT_MS", "600001", "out_of_range"),
        ("TIMEOUT_MS", "5s-oops", "malformed_value"),
        ("TOTAL_TIMEOUT_MS", "29999", "out_of_range"),
        ("TOTAL_TIMEOUT_MS", "3600001", "out_of_range"),
        ("TOTAL_TIMEOUT_MS", "", "malformed_value"),
        ("NETWORK", "yes-please", "malformed_value"),
        ("ALLOW_MUTATION", "true-ish", "malformed_value"),
        ("REQUIRE_COMPLETE", "always-x", "malformed_value"),
        ("ROOM_IDEMPOTENCY_KEY", "short-k", "malformed_value"),
        ("ROOM_IDEMPOTENCY_KEY", "has a space in it", "malformed_value"),
        ("ACCESS_TOKEN", "leaky token value", "malformed_value"),
        ("BASE_URL", "ftp://127.0.0.1:1", "invalid_base_url"),
        ("BASE_URL", "https://leakuser:leakpw@casimirbot.com", "invalid_base_url"),
        ("BASE_URL", "http://192.0.2.7:9000", "invalid_base_url"),
        ("COOKIE", "helix_session=leaky-cookie", "unknown_variable"),
        ("CHAT_CLAIM", "hcc_leaky-claim", "unknown_variable"),
    ];
    for (name, value, code) in cases {
        let mut vars = live_vars(&url, FAKE_TOKEN);
        vars.retain(|(k, _)| k != name);
        vars.push((name, value));
        let out = harness(&vars).await;
        assert_eq!(out.code, 2, "{name}={value:?}: {}", out.raw);
        assert_eq!(out.report["outcome"], "config_error");
        let e = &out.report["errors"][0];
        assert_eq!(
            (e["variable"].as_str(), e["code"].as_str()),
            (Some(format!("{V}{name}").as_str()), Some(*code)),
            "{}",
            out.raw
        );
        if value.len() > 4 {
            assert!(!out.raw.contains(value), "{name}: the value is echoed: {}", out.raw);
        }
        assert!(out.report.get("steps").is_none(), "no step is planned or taken");
        assert_no_token(&out, FAKE_TOKEN);
    }
    let mut no_token = live_vars(&url, FAKE_TOKEN);
    no_token.retain(|(k, _)| *k != "ACCESS_TOKEN");
    let out = harness(&no_token).await;
    assert_eq!((out.code, out.report["errors"][0]["code"].as_str()), (2, Some("missing_value")));
    assert_untouched(&listener);
}

#[tokio::test]
async fn plain_http_to_loopback_is_refused_without_its_opt_in() {
    let (listener, url) = bait();
    let mut vars = live_vars(&url, FAKE_TOKEN);
    vars.retain(|(k, _)| *k != "ALLOW_LOOPBACK_HTTP");
    let out = harness(&vars).await;
    assert_eq!(out.code, 2, "{}", out.raw);
    assert_eq!(out.report["errors"][0]["code"], "invalid_base_url");
    let out = harness(&[vars.as_slice(), &[("ALLOW_LOOPBACK_HTTP", "0")]].concat()).await;
    assert_eq!(out.code, 2, "{}", out.raw);
    assert_untouched(&listener);
}

#[tokio::test]
async fn a_loopback_live_run_passes_cleans_up_and_keeps_one_room() {
    let (_server, _dir, port, token) = serve().await;
    let base = format!("http://127.0.0.1:{port}");
    let first = harness(&live_vars(&base, &token)).await;
    assert_eq!(first.code, 0, "{}", first.raw);
    let r = &first.report;
    assert_eq!(
        (r["mode"].as_str(), r["outcome"].as_str(), &r["release_failure"]),
        (Some("live"), Some("partial"), &Value::Bool(false))
    );
    assert_all_passed(r);
    assert_eq!(step(r, "room_create")["status"], "passed");
    assert_eq!(step(r, "cleanup_cancel")["status"], "passed");
    assert_no_token(&first, &token);

    // What the harness left: the run cancelled, both of its bindings withdrawn.
    let run_id = r["run"]["run_id"].as_str().unwrap();
    assert_eq!(get(port, &token, &format!("/api/v1/agent-runs/{run_id}")).await["lifecycle_status"], "cancelled");
    let refs = r["run"]["binding_refs"].as_array().unwrap();
    assert_eq!(refs.len(), 2, "the bind and the rebind: {r:#}");
    for b in refs {
        assert_eq!(withdraw(port, &token, b.as_str().unwrap()).await["revocation_status"], "already_revoked");
    }

    // Again: the same room, a fresh run; at the most verbose log level stdout is still
    // the report alone and nothing carries the token.
    let second = harness(&[live_vars(&base, &token).as_slice(), &[("RUST_LOG", "trace")]].concat()).await;
    assert_eq!(second.code, 0, "{}", second.raw);
    assert_all_passed(&second.report);
    assert_eq!(second.report["room"]["room_id"], r["room"]["room_id"]);
    assert_eq!(second.report["room"]["reused"], true);
    assert_ne!(second.report["run"]["run_id"], r["run"]["run_id"]);
    assert_ne!(second.report["run"]["idempotency_key"], r["run"]["idempotency_key"]);

    // Network without the mutation opt-in reads only; a strict release job is incomplete.
    let mut read_only = live_vars(&base, &token);
    read_only.retain(|(k, _)| *k != "ALLOW_MUTATION");
    let ro = harness(&[read_only.as_slice(), &[("REQUIRE_COMPLETE", "1")]].concat()).await;
    assert_eq!((ro.code, ro.report["outcome"].as_str()), (3, Some("partial")), "{}", ro.raw);
    assert_eq!(step(&ro.report, "room_inspect")["status"], "passed");
    assert_eq!(step(&ro.report, "run_start")["status"], "skipped");
    assert!(ro.report["run"]["run_id"].is_null());
    assert_no_token(&ro, &token);

    let rooms = get(port, &token, "/api/v1/rooms").await;
    assert_eq!(rooms["rooms"].as_array().unwrap().len(), 1, "one retained room: {rooms}");
}

/// What the proxy does to the harness's requests.
#[derive(Default)]
struct Faults {
    /// Forward the first run start, then drop its response.
    drop_first_start_response: AtomicBool,
    /// Answer this many withdrawals 503 without forwarding them.
    fail_deletes: AtomicU32,
    /// Never answer an evidence read (hold the connection open).
    hang_evidence: AtomicBool,
    /// Answer every cancel `409 outcome_unknown` without forwarding it.
    cancel_outcome_unknown: AtomicBool,
}

fn canned(status: &str, code: &str) -> String {
    let body = format!(
        r#"{{"schema":"helix.agent_api.error.v1","error":{{"code":"{code}","message":"injected","retryable":false}}}}"#
    );
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Reads one request (or response) with its Content-Length body.
async fn read_message(s: &mut TcpStream) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse::<usize>().unwrap());
            if buf.len() >= end + 4 + len {
                return buf;
            }
        }
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return buf,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// A loopback proxy to `upstream` that injects `faults`; returns its port.
async fn proxy(upstream: u16, faults: Arc<Faults>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let (mut client, _) = listener.accept().await.unwrap();
            let faults = faults.clone();
            tokio::spawn(async move {
                let request = read_message(&mut client).await;
                let line = String::from_utf8_lossy(&request).lines().next().unwrap_or("").to_owned();
                if line.starts_with("DELETE ")
                    && faults
                        .fail_deletes
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                        .is_ok()
                {
                    let _ = client.write_all(canned("503 Service Unavailable", "unavailable").as_bytes()).await;
                    return;
                }
                if line.contains("/cancel ") && faults.cancel_outcome_unknown.load(Ordering::SeqCst) {
                    let _ = client.write_all(canned("409 Conflict", "outcome_unknown").as_bytes()).await;
                    return;
                }
                if line.contains("/evidence ") && faults.hang_evidence.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_secs(120)).await;
                    return;
                }
                let mut server = TcpStream::connect(("127.0.0.1", upstream)).await.unwrap();
                server.write_all(&request).await.unwrap();
                if line.starts_with("POST /api/v1/agent-runs HTTP/")
                    && faults.drop_first_start_response.swap(false, Ordering::SeqCst)
                {
                    let response = read_message(&mut server).await;
                    assert!(response.starts_with(b"HTTP/1.1 201"), "the start took effect upstream");
                    return; // both sockets close: the response is lost
                }
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            });
        }
    });
    port
}

#[tokio::test]
async fn a_lost_start_response_is_recovered_by_replaying_the_exact_key_and_a_withdrawal_is_retried_once() {
    let (_server, _dir, port, token) = serve().await;
    let faults = Arc::new(Faults::default());
    faults.drop_first_start_response.store(true, Ordering::SeqCst);
    faults.fail_deletes.store(1, Ordering::SeqCst);
    let via = proxy(port, faults.clone()).await;
    let out = harness(&live_vars(&format!("http://127.0.0.1:{via}"), &token)).await;
    assert_eq!(out.code, 0, "{}", out.raw);
    assert_all_passed(&out.report);
    let start = step(&out.report, "run_start");
    assert_eq!((start["attempts"].as_u64(), &start["recovered_by_replay"]), (Some(2), &Value::Bool(true)), "{start}");
    assert_eq!(step(&out.report, "run_unbind")["attempts"], 2, "the 503 withdrawal was retried once");
    assert!(!faults.drop_first_start_response.load(Ordering::SeqCst), "the fault was injected");
    let run_id = out.report["run"]["run_id"].as_str().unwrap();
    assert_eq!(get(port, &token, &format!("/api/v1/agent-runs/{run_id}")).await["lifecycle_status"], "cancelled");
    assert_no_token(&out, &token);
}

#[tokio::test]
async fn a_withdrawal_that_keeps_failing_is_a_release_failure() {
    let (_server, _dir, port, token) = serve().await;
    let faults = Arc::new(Faults::default());
    faults.fail_deletes.store(u32::MAX, Ordering::SeqCst);
    let via = proxy(port, faults).await;
    let out = harness(&live_vars(&format!("http://127.0.0.1:{via}"), &token)).await;
    assert_eq!(out.code, 4, "{}", out.raw);
    let r = &out.report;
    assert_eq!((r["outcome"].as_str(), &r["release_failure"]), (Some("release_failure"), &Value::Bool(true)));
    let unbind = step(r, "cleanup_unbind");
    assert_eq!((unbind["status"].as_str(), unbind["attempts"].as_u64()), (Some("failed"), Some(2)), "{unbind}");
    // The cancel does not depend on the withdrawal: the run is still cancelled.
    assert_eq!(step(r, "cleanup_cancel")["status"], "passed");
    let run_id = r["run"]["run_id"].as_str().unwrap();
    assert_eq!(get(port, &token, &format!("/api/v1/agent-runs/{run_id}")).await["lifecycle_status"], "cancelled");
    assert_no_token(&out, &token);
}

/// A request that never answers uses up the automated phase, not the cleanup window: with
/// a 30 s total and a 600 s request timeout, the read gives up at the phase deadline
/// (total minus the 15 s reserve) and cleanup still withdraws and cancels in time.
#[tokio::test]
async fn a_hanging_request_leaves_the_reserved_cleanup_window_to_cleanup() {
    let (_server, _dir, port, token) = serve().await;
    let faults = Arc::new(Faults::default());
    faults.hang_evidence.store(true, Ordering::SeqCst);
    let via = proxy(port, faults).await;
    let base = format!("http://127.0.0.1:{via}");
    let mut vars = live_vars(&base, &token);
    vars.retain(|(k, _)| !k.contains("TIMEOUT"));
    vars.extend([("TIMEOUT_MS", "600000"), ("TOTAL_TIMEOUT_MS", "30000")]);
    let out = harness(&vars).await;
    assert_eq!(out.code, 1, "a failed check, not a release failure: {}", out.raw);
    let r = &out.report;
    assert_eq!(r["budget"]["cleanup_reserve_ms"], 15_000);
    assert_eq!(step(r, "run_evidence")["status"], "timed_out");
    assert_eq!(step(r, "run_events")["detail"], "not_reached", "every step is in the report");
    for id in ["cleanup_unbind", "cleanup_cancel", "cleanup_verify"] {
        assert_eq!(step(r, id)["status"], "passed", "{id}: {r:#}");
    }
    let elapsed = r["budget"]["elapsed_ms"].as_u64().unwrap();
    assert!((14_000..30_000).contains(&elapsed), "{elapsed} ms");
    let run_id = r["run"]["run_id"].as_str().unwrap();
    assert_eq!(get(port, &token, &format!("/api/v1/agent-runs/{run_id}")).await["lifecycle_status"], "cancelled");
}

#[tokio::test]
async fn an_unknown_cancel_outcome_is_a_release_failure() {
    let (_server, _dir, port, token) = serve().await;
    let faults = Arc::new(Faults::default());
    faults.cancel_outcome_unknown.store(true, Ordering::SeqCst);
    let via = proxy(port, faults).await;
    let base = format!("http://127.0.0.1:{via}");
    let out = harness(&live_vars(&base, &token)).await;
    assert_eq!(out.code, 4, "{}", out.raw);
    assert_eq!(out.report["outcome"], "release_failure");
    let cancel = step(&out.report, "cleanup_cancel");
    assert_eq!(
        (cancel["status"].as_str(), cancel["error_code"].as_str()),
        (Some("outcome_unknown"), Some("outcome_unknown"))
    );
    assert_eq!(step(&out.report, "cleanup_unbind")["status"], "passed", "the withdrawal still ran");
    assert_no_token(&out, &token);
}
