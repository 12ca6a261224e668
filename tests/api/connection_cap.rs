//! The connection cap under a burst of real clients: every request whose head arrives
//! within the header timeout is answered (served, or `503` + `Retry-After` in the error
//! schema), never closed unanswered, while silent sockets still delay no one.

use std::time::Duration;

use helix_integration_tests::support::rooms::ALL;
use helix_integration_tests::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What one raw request got back.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Served,
    /// `503`, with `Retry-After` and a `server_busy` body in the error schema.
    Busy,
    /// The connection closed (or was reset) before any answer.
    Unanswered,
    Other(String),
}

/// Connects, waits `think` (a client between connect and its first byte: a TLS
/// handshake upstream, a busy thread), then sends `request` and reads to the end.
async fn exchange(addr: &str, think: Duration, request: &[u8]) -> Answer {
    let Ok(mut sock) = tokio::net::TcpStream::connect(addr).await else { return Answer::Unanswered };
    tokio::time::sleep(think).await;
    if sock.write_all(request).await.is_err() {
        return Answer::Unanswered;
    }
    let mut out = vec![];
    match tokio::time::timeout(Duration::from_secs(30), sock.read_to_end(&mut out)).await {
        Ok(Ok(_)) => {}
        Ok(Err(_)) if out.is_empty() => return Answer::Unanswered,
        Ok(Err(e)) => return Answer::Other(format!("reset after {} bytes: {e}", out.len())),
        Err(_) => return Answer::Other("no answer within 30 s".into()),
    }
    let text = String::from_utf8_lossy(&out).into_owned();
    let lower = text.to_ascii_lowercase();
    if text.is_empty() {
        Answer::Unanswered
    } else if text.starts_with("HTTP/1.1 200") {
        Answer::Served
    } else if text.starts_with("HTTP/1.1 503")
        && lower.contains("\r\nretry-after: ")
        && raw_json(&text)["schema"] == "helix.agent_api.error.v1"
        && code(&raw_json(&text)) == "server_busy"
    {
        Answer::Busy
    } else {
        Answer::Other(text)
    }
}

/// 120 clients at once send `GET /api/v1/rooms` over a 32-connection cap.
async fn a_burst_over_the_connection_cap_is_answered_in_full(backend: Backend) {
    let app = TestApp::spawn_with(
        backend,
        &[
            ("HELIX_SERVE_MAX_CONNECTIONS", "32"),
            ("HELIX_ROOM_AGENT_IP_RATE_LIMIT", "100000"),
            ("HELIX_ROOM_AGENT_PRINCIPAL_RATE_LIMIT", "100000"),
        ],
    )
    .await;
    let token = app.token_for("alice", "tenant-a", ALL).await;
    let addr = app.base.trim_start_matches("http://").to_owned();
    let request = format!(
        "GET /api/v1/rooms HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(120));
    let clients: Vec<_> = (0..120)
        .map(|i| {
            let (addr, request, start) = (addr.clone(), request.clone(), start.clone());
            tokio::spawn(async move {
                start.wait().await;
                // 0-90 ms: well within the header timeout (10 s).
                exchange(&addr, Duration::from_millis(i % 10 * 10), request.as_bytes()).await
            })
        })
        .collect();
    let mut answers = vec![];
    for client in clients {
        answers.push(client.await.unwrap());
    }
    let count = |a: &Answer| answers.iter().filter(|x| *x == a).count();
    let (served, busy, unanswered) = (count(&Answer::Served), count(&Answer::Busy), count(&Answer::Unanswered));
    eprintln!("connection cap 32, 120 clients: {served} served, {busy} busy (503), {unanswered} unanswered");
    let other: Vec<_> = answers.iter().filter(|a| matches!(a, Answer::Other(_))).collect();
    assert!(other.is_empty(), "unexpected answers: {other:?}");
    assert_eq!(unanswered, 0, "{served} served, {busy} busy: none may be closed unanswered");
    assert_eq!(served + busy, 120);
    assert!(served >= 32, "at least a cap's worth is served: {served}");
}

// A multi-threaded runtime, as `helix serve` runs: connections are read on other workers
// while the accept loop goes on.
mod embedded {
    use super::*;
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_burst_over_the_connection_cap_is_answered_in_full() {
        super::a_burst_over_the_connection_cap_is_answered_in_full(Backend::Embedded).await
    }
}
mod dynamodb {
    use super::*;
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_burst_over_the_connection_cap_is_answered_in_full() {
        super::a_burst_over_the_connection_cap_is_answered_in_full(Backend::Dynamo).await
    }
}

/// A client that connected, lost its slot while it had sent nothing, then sent its head
/// while every slot stays busy: `503` + `Retry-After` once the header timeout passes.
#[tokio::test]
async fn an_evicted_client_whose_head_arrives_is_told_to_come_back() {
    let app = TestApp::spawn_with(
        Backend::Embedded,
        &[
            ("HELIX_SERVE_MAX_CONNECTIONS", "1"),
            ("HELIX_SERVE_HEADER_TIMEOUT_MS", "400"),
            ("HELIX_SERVE_BODY_TIMEOUT_MS", "20000"),
        ],
    )
    .await;
    let token = app.token().await;
    let addr = app.base.trim_start_matches("http://").to_owned();
    let mut late = tokio::net::TcpStream::connect(&addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // A second connection takes the slot and keeps it busy: its body never ends.
    let mut busy = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let stalled = format!(
        "POST /api/v1/agent-runs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
         Idempotency-Key: stalled-body-02\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"objec"
    );
    busy.write_all(stalled.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Well within its header timeout, the first client sends its request.
    let started = std::time::Instant::now();
    late.write_all(b"GET /.well-known/oauth-protected-resource HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await.unwrap();
    let mut out = vec![];
    tokio::time::timeout(Duration::from_secs(10), late.read_to_end(&mut out)).await.expect("closed").unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    assert!(text.starts_with("HTTP/1.1 503"), "answered, not dropped: {text:?}");
    let lower = text.to_ascii_lowercase();
    assert!(lower.contains("\r\nretry-after: 1\r\n"), "{text}");
    assert!(lower.contains("\r\nconnection: close\r\n"), "{text}");
    assert!(lower.contains("\r\ncache-control: no-store\r\n"), "{text}");
    let body = raw_json(&text);
    assert_eq!(body["schema"], "helix.agent_api.error.v1", "{text}");
    assert_eq!(code(&body), "server_busy");
    assert_eq!(body["error"]["retryable"], true);
    assert_eq!(body["error"]["details"]["retry_after_seconds"], 1);
    assert!(started.elapsed() < Duration::from_secs(5), "told after the header timeout, not held");
    drop(busy);
}

/// Sockets that never send a byte, ten times the cap: a real request is still served at
/// once (the oldest evicted silent socket makes room), not after the header timeout.
#[tokio::test]
async fn ten_times_the_cap_in_silent_sockets_does_not_delay_a_real_request() {
    let app = TestApp::spawn_with(Backend::Embedded, &[("HELIX_SERVE_MAX_CONNECTIONS", "2")]).await;
    let addr = app.base.trim_start_matches("http://").to_owned();
    let mut silent = vec![];
    for _ in 0..20 {
        silent.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = std::time::Instant::now();
    let request = "GET /.well-known/oauth-protected-resource HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    assert_eq!(exchange(&addr, Duration::ZERO, request.as_bytes()).await, Answer::Served);
    assert!(started.elapsed() < Duration::from_secs(2), "served in {:?}", started.elapsed());
    drop(silent);
}
