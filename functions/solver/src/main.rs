//! Lambda entry point: tracing, secrets and typed config once, the corpus index, run.

#[tokio::main]
async fn main() -> Result<(), helix_core::lambda::Error> {
    helix_core::wiring::init_tracing(true);
    let service = helix_core::wiring::solver_service().await?;
    helix_core::lambda::run(helix_solver::router(service)).await
}
