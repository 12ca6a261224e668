//! `helix room-acceptance`: the Shared Live Room live acceptance harness. By default a
//! zero-network dry run that prints the typed plan; live only with the network opt-in
//! (and mutation only with the mutation opt-in), configured only through
//! `HELIX_SHARED_ROOM_ACCEPTANCE_*` variables. It reads no cookie, chat claim or source
//! bearer and prints none: every output passes [`plan::redact`].

mod config;
mod http;
mod live;
mod plan;

use std::time::Instant;

use serde_json::Value;

/// Runs the harness against the process environment; returns the exit code.
pub async fn run() -> u8 {
    let names: Vec<String> = std::env::vars_os().filter_map(|(k, _)| k.into_string().ok()).collect();
    let lookup = |name: &str| std::env::var_os(name).map(|v| v.into_string().map_err(|_| ()));
    let (report, token, code) = match config::from_lookup(&lookup, &names) {
        Err(errors) => (plan::config_error_report(&errors), None, 2),
        Ok(c) => {
            let (report, code) = invoke(&c).await;
            (report, c.access_token.clone(), code)
        }
    };
    let report = plan::redact(report, token.as_deref());
    println!("{}", serde_json::to_string_pretty(&report).expect("a JSON value"));
    code
}

/// The dry run, or the live run when the network opt-in is given.
async fn invoke(c: &config::Config) -> (Value, u8) {
    let token = match (&c.access_token, c.live()) {
        (Some(t), true) => t.clone(),
        _ => {
            let steps = plan::planned_steps(c);
            let outcome = plan::Outcome::Planned;
            return (
                plan::report(c, "dry_run", &steps, &plan::Learnt::default(), outcome),
                outcome.exit_code(c.require_complete),
            );
        }
    };
    let started = Instant::now();
    let http = match http::Http::new(c, &token) {
        Ok(h) => h,
        Err(_) => {
            let errors = [config::ConfigError {
                code: "client_unavailable",
                variable: config::BASE_URL.into(),
                reason: "the HTTP client could not be built".into(),
            }];
            return (plan::config_error_report(&errors), 2);
        }
    };
    let mut runner = live::Runner::new(c, http);
    runner.run().await;
    let outcome = plan::outcome_of(&runner.steps);
    let mut learnt = runner.learnt.clone();
    learnt.elapsed_ms = Some(started.elapsed().as_millis());
    (plan::report(c, "live", &runner.steps, &learnt, outcome), outcome.exit_code(c.require_complete))
}
