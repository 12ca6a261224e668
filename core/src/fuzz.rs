//! Bounded fuzzing (proptest, part of `cargo test`) of every parser a request reaches
//! before authentication completes: request ids, bearer headers and the token verifier,
//! idempotency keys, run paths, strict JSON bodies and their validation, the MCP
//! envelope preflight. The property is the same everywhere: no input panics. It sits at
//! the crate's top because it reaches into both front doors (`http` and `mcp`).

use proptest::prelude::*;

use crate::auth::jwt::{TenantHeaders, TokenVerifier, bearer_from_header};
use crate::domain::ids::{IdempotencyKey, RunId};
use crate::domain::run::{CancelRequest, ContinueRequest, StartRequest};
use crate::http::{parse_strict, redact, run_route};

fn config() -> ProptestConfig {
    ProptestConfig { cases: 1_500, failure_persistence: None, ..ProptestConfig::default() }
}

/// Bytes that look like JSON often enough to reach deep into the parsers.
fn jsonish() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..200),
        "[{}\\[\\]\":,0-9a-z_ .eE+-]{0,200}".prop_map(String::into_bytes),
        (
            prop::sample::select(vec![
                "objective",
                "database_scope",
                "expected_version",
                "instruction",
                "answers",
                "max_steps",
                "reason",
                "budget",
                "required_evidence_families",
                "jsonrpc",
                "id",
                "method",
                "params",
                "name",
                "arguments",
                "_meta",
                "idempotency_key",
                "run_id"
            ]),
            "[\\[\\]{}\":,0-9a-z_ -]{0,60}",
        )
            .prop_map(|(k, v)| format!("{{\"{k}\":{v}}}").into_bytes()),
    ]
}

/// One verifier (local HS256, no network) and runtime for every case.
fn verifier() -> &'static (tokio::runtime::Runtime, TokenVerifier) {
    static ONCE: std::sync::OnceLock<(tokio::runtime::Runtime, TokenVerifier)> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        let config = crate::config::tests::dev_config();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        (runtime, TokenVerifier::new(&config.oauth, reqwest::Client::new()))
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn header_parsers_never_panic(value in "\\PC{0,300}", bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let lossy = String::from_utf8_lossy(&bytes);
        for v in [value.as_str(), &lossy] {
            let _ = redact::safe_request_id(v);
            let _ = bearer_from_header(v);
            let _ = IdempotencyKey::parse(v);
            let _ = RunId::parse(v);
            let _ = run_route(v);
            let _ = run_route(&format!("/api/v1/agent-runs/{v}"));
        }
    }

    #[test]
    fn body_parsers_never_panic(body in jsonish()) {
        if let Ok(start) = parse_strict::<StartRequest>(&body) {
            let _ = start.validate();
        }
        if let Ok(cont) = parse_strict::<ContinueRequest>(&body) {
            let _ = cont.validate();
        }
        if let Ok(cancel) = parse_strict::<CancelRequest>(&body) {
            let _ = cancel.validate();
        }
        let _ = crate::mcp::preflight::check(&body);
    }

    /// The verifier parses a caller's token before any signature is known good.
    #[test]
    fn the_token_verifier_never_panics(
        token in prop_oneof![
            "\\PC{0,200}",
            "[A-Za-z0-9_=-]{0,80}\\.[A-Za-z0-9_=-]{0,80}\\.[A-Za-z0-9_=-]{0,40}",
            ("[A-Za-z0-9_-]{0,60}", "[A-Za-z0-9_-]{0,60}").prop_map(|(a, b)| {
                use base64::Engine;
                let e = base64::engine::general_purpose::URL_SAFE_NO_PAD;
                format!("{}.{}.{a}", e.encode(format!("{{\"alg\":\"HS256\",\"kid\":\"{b}\"}}")), e.encode(&a))
            }),
        ],
        tenant in proptest::option::of("\\PC{0,20}"),
    ) {
        let (runtime, verifier) = verifier();
        let headers = TenantHeaders { tenant_id: tenant.as_deref(), customer_id: None, org_id: None };
        let _ = runtime.block_on(verifier.verify(&token, headers));
    }
}
