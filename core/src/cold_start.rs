//! A cold start's phases, for the cold-start benchmark (`scripts/bench-cold-start`): the
//! wiring marks the end of each step of a function's start, and the Lambda transport
//! reports them once, at `debug`, just before it polls for the first event. With the
//! default `RUST_LOG` nothing is written; a mark costs one clock read and one lock.

use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

struct Marks {
    /// The first mark: `main` has started (its runtime is built), as wall-clock
    /// microseconds (the bench measures from `exec` on the same clock) and as an instant.
    main: Option<(u128, Instant)>,
    /// Each later step and when it ended, in microseconds since `main`.
    phases: Vec<(&'static str, u128)>,
}

static MARKS: Mutex<Marks> = Mutex::new(Marks { main: None, phases: Vec::new() });

/// Marks the end of a start's step; the first call marks the start of `main`.
pub fn mark(phase: &'static str) {
    let mut m = MARKS.lock().unwrap_or_else(|e| e.into_inner());
    match m.main {
        None => {
            let wall = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros()).unwrap_or(0);
            m.main = Some((wall, Instant::now()));
        }
        Some((_, at)) => {
            let us = at.elapsed().as_micros();
            m.phases.push((phase, us));
        }
    }
}

/// One `debug` line with every phase marked so far (`main_unix_us`, then `<phase>_us`
/// since `main`, in order), or nothing when no start was marked.
pub fn report() {
    let m = MARKS.lock().unwrap_or_else(|e| e.into_inner());
    let Some((wall, _)) = m.main.filter(|_| tracing::enabled!(tracing::Level::DEBUG)) else { return };
    let phases = m.phases.iter().map(|(name, us)| format!("{name}={us}")).collect::<Vec<_>>().join(" ");
    tracing::debug!(main_unix_us = wall as u64, phases = %phases, "cold start");
}
