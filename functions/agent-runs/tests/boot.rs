//! A Lambda function defaults to production and refuses to start without complete OAuth.

include!("../../boot_tests.rs");

boot_tests!("CARGO_BIN_EXE_helix-agent-runs");
