//! `Idempotency-Replayed` for every route that takes an `Idempotency-Key`: the one rule
//! the agent-run, room and source creates share. Must not depend on any feature's routes.

use axum::Router;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http::{HeaderValue, Method, StatusCode};

use crate::service::{Mutation, MutationView};

pub const IDEMPOTENCY_REPLAYED: &str = "idempotency-replayed";

/// Marks the POST responses of `routes` (add it after the pipeline layer, so it sits
/// outside it): a response that is not a receipt's replay says `false`, including the
/// errors the pipeline renders (admission, authentication, parsing) and the handler's
/// refusals.
pub fn replayed_on_every_post<S: Clone + Send + Sync + 'static>(routes: Router<S>) -> Router<S> {
    routes.route_layer(axum::middleware::from_fn(replayed_false_by_default))
}

async fn replayed_false_by_default(req: Request, next: Next) -> Response {
    let mutation = req.method() == Method::POST;
    let mut res = next.run(req).await;
    if mutation {
        res.headers_mut().entry(IDEMPOTENCY_REPLAYED).or_insert(HeaderValue::from_static("false"));
    }
    res
}

/// A mutation's answer, fresh or replayed: its stored status and body rendered by
/// `render`, with `Idempotency-Replayed` and, for a `201` of a view with an address, its
/// `Location` ([`MutationView`]).
pub fn mutation_response<V: MutationView>(
    m: Mutation<V>,
    render: impl FnOnce(StatusCode, serde_json::Value) -> Response,
) -> Response {
    let status = StatusCode::from_u16(m.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let location = m.location();
    let mut res = render(status, m.body);
    let h = res.headers_mut();
    h.insert(IDEMPOTENCY_REPLAYED, HeaderValue::from_static(if m.replayed { "true" } else { "false" }));
    if let Some(loc) = location {
        h.insert(http::header::LOCATION, HeaderValue::from_str(&loc).expect("resource ids are ascii"));
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::room::RoomView;
    use axum::response::IntoResponse;
    use serde_json::json;

    fn json(status: StatusCode, body: serde_json::Value) -> Response {
        (status, axum::Json(body)).into_response()
    }

    #[test]
    fn a_fresh_create_says_not_replayed_and_where_it_lives() {
        let m = Mutation::<RoomView>::answered(201, json!({"room_id": "room_1"}), false);
        let res = mutation_response(m, json);
        assert_eq!(res.headers()[IDEMPOTENCY_REPLAYED], "false");
        assert_eq!(res.headers()[http::header::LOCATION], "/api/v1/rooms/room_1");
    }

    #[test]
    fn a_replayed_refusal_says_replayed_without_a_location() {
        let m = Mutation::<RoomView>::answered(409, json!({"room_id": "room_1"}), true);
        let res = mutation_response(m, json);
        assert_eq!(res.status(), 409);
        assert_eq!(res.headers()[IDEMPOTENCY_REPLAYED], "true");
        assert!(!res.headers().contains_key(http::header::LOCATION));
    }
}
