//! The API Gateway payloads of `events/` as the Lambda runtime hands them over: read with
//! their placeholders replaced, decoded by lambda_http and served through the Lambda
//! adapter into a router, as `cargo lambda invoke` sends them. Knows no route.

use axum::body::{Body, Bytes};
use http_body_util::BodyExt;
use tower::ServiceExt;

/// The text of `events/{file}` with each `(from, to)` of `replace` applied in order.
pub fn event_text(file: &str, replace: &[(&str, &str)]) -> String {
    let path = format!("{}/../events/{file}", env!("CARGO_MANIFEST_DIR"));
    let mut raw = std::fs::read_to_string(&path).unwrap();
    for (from, to) in replace {
        raw = raw.replace(from, to);
    }
    raw
}

/// Decodes the payload `raw` (of `file`) with lambda_http, adds the bearer when given and
/// serves it through the Lambda adapter into `router`; every answer must say `no-store`.
pub async fn through_adapter(
    router: axum::Router,
    file: &str,
    raw: &str,
    bearer: Option<&str>,
) -> (u16, http::HeaderMap, Bytes) {
    let req = lambda_http::request::from_str(raw).unwrap_or_else(|e| panic!("{file}: {e}"));
    let (mut parts, body) = req.into_parts();
    if let Some(t) = bearer {
        parts.headers.insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    let req = http::Request::from_parts(parts, Body::from(body.to_vec()));
    let res = helix_core::lambda::adapt(router).oneshot(req).await.unwrap();
    let (status, headers) = (res.status().as_u16(), res.headers().clone());
    assert_eq!(headers["cache-control"], "no-store", "{file}");
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    (status, headers, bytes)
}
