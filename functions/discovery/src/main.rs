//! Lambda entry point: tracing, typed config, state (no table: discovery reads none), run.

#[tokio::main]
async fn main() -> Result<(), helix_core::lambda::Error> {
    helix_core::wiring::init_tracing(true);
    let state = helix_core::wiring::lambda_state_without_store()?;
    helix_core::lambda::run(helix_discovery::router(state)).await
}
