//! Lambda entry point: tracing, typed config, SDK clients once, state, run (with the
//! worker of asynchronous turns).

#[tokio::main]
async fn main() -> Result<(), helix_core::lambda::Error> {
    helix_core::wiring::init_tracing(true);
    let state = helix_core::wiring::lambda_state().await?;
    let services = state.services.clone();
    helix_core::lambda::run_with_worker(helix_agent_runs::router(state), services).await
}
