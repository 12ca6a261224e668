//! Per-minute limits on a shared store. Two app states on one DynamoDB table stand for two
//! processes: each counts in its own memory, the table's counter holds for both.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::Body;
use helix_core::http::{AppState, Group, pipeline};
use helix_integration_tests::*;
use tower::ServiceExt;

/// A POST route with an effect (it counts its runs) behind the pipeline of `group`.
fn acting_router(state: AppState, group: Group, ran: Arc<AtomicUsize>) -> axum::Router {
    let act = move || {
        let ran = ran.clone();
        async move {
            ran.fetch_add(1, Ordering::SeqCst);
            "done"
        }
    };
    axum::Router::new()
        .route("/act", axum::routing::post(act))
        .layer(axum::middleware::from_fn_with_state((state, group), pipeline))
}

async fn post(router: &axum::Router) -> u16 {
    let req = http::Request::post("/act").header("host", "127.0.0.1:9000").body(Body::empty()).unwrap();
    router.clone().oneshot(req).await.unwrap().status().as_u16()
}

#[tokio::test]
async fn a_cookie_lane_request_the_shared_ip_window_refuses_has_no_effect() {
    let limit = [("HELIX_AGENT_IP_RATE_LIMIT", "1")];
    let app = TestApp::spawn_with(Backend::Dynamo, &limit).await;
    assert!(app.state.limits.is_shared());
    let other_process = helix_core::wiring::app_state(
        test_config(&limit),
        app.state.services.store.clone(),
        Arc::new(helix_core::executor::Unconfigured),
    );
    let ran = Arc::new(AtomicUsize::new(0));
    let a = acting_router(app.state.clone(), Group::Account, ran.clone());
    let b = acting_router(other_process, Group::Account, ran.clone());
    assert_eq!(post(&a).await, 200);
    assert_eq!(post(&b).await, 429, "the window is full across both processes");
    assert_eq!(ran.load(Ordering::SeqCst), 1, "the refused request did nothing");
}
