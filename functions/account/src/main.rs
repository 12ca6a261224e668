//! Lambda entry point: tracing, typed config, SDK clients once, state, run. This function
//! is the browser lane, so it refuses to start without a browser OpenID provider.

#[tokio::main]
async fn main() -> Result<(), helix_core::lambda::Error> {
    helix_core::wiring::init_tracing(true);
    let state = helix_core::wiring::lambda_state().await?;
    if state.services.config.browser.oidc.is_none() {
        return Err("refusing to start: the account function needs HELIX_BROWSER_OIDC_ISSUER, \
                    HELIX_BROWSER_OIDC_CLIENT_ID and HELIX_BROWSER_OIDC_CLIENT_SECRET"
            .into());
    }
    helix_core::lambda::run(helix_account::router(state)).await
}
