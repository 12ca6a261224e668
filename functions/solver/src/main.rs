//! Lambda entry point: tracing, secrets and typed config once, the corpus index, run.

#[tokio::main]
async fn main() -> Result<(), helix_core::lambda::Error> {
    helix_core::wiring::init_tracing(true);
    // The message, not the Debug form: it names the variable to fix (`..._SECRET_ARN`).
    let service = helix_core::wiring::solver_service().await.map_err(|e| e.to_string())?;
    helix_core::lambda::run(helix_solver::router(service)).await
}
