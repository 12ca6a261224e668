//! kill -9 of `helix serve` during an asynchronous turn (`Prefer: respond-async`): the
//! process dies after its `202`, with its in-process worker waiting on a Helix Ask endpoint
//! that never answers. The server started again on the same data dir finds the run claimed
//! and nothing else: no half-written turn (version, events and budget as before the turn),
//! the key still in progress and naming the run, and no second turn (`run_busy`) while the
//! claim's lease holds. What happens once the lease passes (`outcome_unknown`, then the
//! recovering continuation) is the synchronous protocol's, tested in `tests/api`.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use support::{free_port, post_keyed};

/// A Helix Ask endpoint that accepts every turn and never answers: the turn is in flight
/// for as long as the test wants. Counts the turns it received.
async fn silent_solver() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1/turns", listener.local_addr().unwrap());
    let turns = Arc::new(AtomicUsize::new(0));
    let seen = turns.clone();
    tokio::spawn(async move {
        let mut held = vec![];
        while let Ok((sock, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
            held.push(sock);
        }
    });
    (url, turns)
}

async fn get(client: &reqwest::Client, url: &str, token: &str) -> Value {
    client.get(url).bearer_auth(token).send().await.unwrap().json().await.unwrap()
}

#[tokio::test]
async fn kill_9_during_an_asynchronous_turn_leaves_the_run_claimed_never_half_written() {
    let dir = tempfile::tempdir().unwrap();
    let token = support::dev_token(dir.path(), "kill-user", "kill-tenant");
    let (solver, turns) = silent_solver().await;
    let env = [("HELIX_ASK_ENDPOINT", solver.as_str()), ("HELIX_GATEWAY_TIMEOUT_MS", "1000")];
    let port = free_port();
    let mut server = support::serve(dir.path(), port, &env).await;
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let start = json!({"objective": "What did Lamoreaux measure?", "database_scope": ["research_library"]});
    let (status, run) =
        post_keyed(&client, &format!("{base}/api/v1/agent-runs"), &token, "kill-start-0001", &start).await;
    assert_eq!(status, 201, "{run}");
    let id = run["run_id"].as_str().unwrap().to_owned();
    let continue_url = format!("{base}/api/v1/agent-runs/{id}/continue");
    let turn = json!({"expected_version": 1, "instruction": "Find the torsion pendulum result."});
    let res = client
        .post(&continue_url)
        .bearer_auth(&token)
        .header("Idempotency-Key", "kill-turn-00001")
        .header("Prefer", "respond-async")
        .json(&turn)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    for _ in 0..100 {
        if turns.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(turns.load(Ordering::SeqCst), 1, "the worker's turn reached the solver");

    server.0.kill().unwrap(); // SIGKILL
    server.0.wait().unwrap();
    let port = free_port();
    let _server = support::serve(dir.path(), port, &env).await;
    let base = format!("http://127.0.0.1:{port}");
    let continue_url = format!("{base}/api/v1/agent-runs/{id}/continue");

    let run = get(&client, &format!("{base}/api/v1/agent-runs/{id}"), &token).await;
    assert_eq!(run["version"], 1, "{run}");
    assert_eq!(run["lifecycle_status"], "running", "the claim survives its process until its lease passes");
    assert_eq!(run["budget"]["steps_used"], 0);
    let events = get(&client, &format!("{base}/api/v1/agent-runs/{id}/events"), &token).await;
    let kinds: Vec<&str> = events["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["run_started"], "nothing of the killed turn was written");
    let (status, again) = post_keyed(&client, &continue_url, &token, "kill-turn-00001", &turn).await;
    assert_eq!((status, again["error"]["code"].as_str()), (409, Some("idempotency_in_progress")), "{again}");
    assert_eq!(again["error"]["details"]["run_id"], id.as_str());
    let (status, second) = post_keyed(&client, &continue_url, &token, "kill-turn-00002", &turn).await;
    assert_eq!((status, second["error"]["code"].as_str()), (409, Some("run_busy")), "no second turn: {second}");
    assert_eq!(turns.load(Ordering::SeqCst), 1, "the restarted server started no turn");
}
