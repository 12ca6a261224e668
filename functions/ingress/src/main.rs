//! Lambda entry point: tracing, typed config, SDK clients once, state, run.

#[tokio::main]
async fn main() -> Result<(), helix_core::lambda::Error> {
    helix_core::wiring::init_tracing(true);
    let state = helix_core::wiring::lambda_state().await?;
    helix_core::lambda::run(helix_ingress::router(state)).await
}
