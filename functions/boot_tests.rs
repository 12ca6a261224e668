// The boot checks every table-backed Lambda function shares: a function defaults to
// production and refuses to start without complete OAuth or on the local HS256 path.
// Each function's tests/boot.rs includes this file and names its own binary
// (`CARGO_BIN_EXE_*` exists only inside the binary's own package).
macro_rules! boot_tests {
    ($bin:literal) => {
        use std::process::Command;

        #[test]
        fn the_function_refuses_to_start_on_incomplete_oauth_configuration() {
            let out = Command::new(env!($bin))
                .env_clear()
                .env("CASIMIR_PUBLIC_BASE_URL", "https://api.example.com")
                .env("HELIX_AGENT_OAUTH_ISSUER", "https://issuer.example.com/")
                .env("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9") // never reached: config fails first
                .output()
                .unwrap();
            assert!(!out.status.success());
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(stderr.contains("HELIX_AGENT_OAUTH_AUDIENCE"), "names the missing variable: {stderr}");
        }

        #[test]
        fn the_function_refuses_the_local_hs256_path_in_production() {
            let out = Command::new(env!($bin))
                .env_clear()
                .env("HELIX_AGENT_ALLOW_LOCAL_HS256", "1")
                .env("HELIX_AGENT_LOCAL_JWT_SECRET", "0123456789abcdef0123456789abcdef")
                .output()
                .unwrap();
            assert!(!out.status.success());
            assert!(String::from_utf8_lossy(&out.stderr).contains("production"));
        }

        #[test]
        fn the_function_reads_its_secrets_from_the_secret_store_before_it_starts() {
            // An unreachable Secrets Manager: the cold start must try it (and fail naming
            // the variable), not fall back to a plain environment configuration.
            let out = Command::new(env!($bin))
                .env_clear()
                .env("HELIX_ASK_BEARER_TOKEN_SECRET_ARN", "helix/ask-bearer")
                .env("AWS_ENDPOINT_URL_SECRETS_MANAGER", "http://127.0.0.1:9")
                .env("AWS_REGION", "us-east-1")
                .env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
                .env("AWS_SECRET_ACCESS_KEY", "not-a-real-secret-key")
                .env("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9")
                .output()
                .unwrap();
            assert!(!out.status.success());
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(stderr.contains("HELIX_ASK_BEARER_TOKEN") && stderr.contains("helix/ask-bearer"), "names the secret: {stderr}");
        }
    };
}
