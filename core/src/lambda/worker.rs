//! The worker invocation of an asynchronous turn: an asynchronous (`Event`) invocation of
//! this same function, named by `AWS_LAMBDA_FUNCTION_NAME`, carrying the worker event.
//! Lambda queues it and answers 202; it retries a failed invocation up to twice, which the
//! worker's take-over makes harmless. The client is built on the first turn handed over,
//! not at cold start; `AWS_ENDPOINT_URL_LAMBDA` points it at another endpoint.

use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::InvocationType;
use tokio::sync::OnceCell;

use crate::service::runs::{TurnDispatch, WorkerEvent};

/// The most the hand-over may take (Lambda answers an `Event` invocation once queued);
/// past it the turn runs in its request, within the request's limits.
const INVOKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Invokes this function itself, asynchronously, with a worker event.
pub struct SelfInvoke {
    function: String,
    client: OnceCell<aws_sdk_lambda::Client>,
}

impl SelfInvoke {
    /// The function this process runs as (`AWS_LAMBDA_FUNCTION_NAME`, which the Lambda
    /// runtime sets); `None` outside one.
    pub fn from_env() -> Option<Self> {
        let function = crate::aws_sdk::lambda_function_name()?;
        Some(Self { function, client: OnceCell::new() })
    }

    async fn client(&self) -> &aws_sdk_lambda::Client {
        self.client
            .get_or_init(|| async {
                aws_sdk_lambda::Client::new(&crate::aws_sdk::sdk_config(Some(INVOKE_TIMEOUT)).await)
            })
            .await
    }
}

#[async_trait::async_trait]
impl TurnDispatch for SelfInvoke {
    async fn dispatch(&self, event: &WorkerEvent) -> Result<(), String> {
        let payload = serde_json::to_vec(&event.to_document()).map_err(|e| e.to_string())?;
        let out = self
            .client()
            .await
            .invoke()
            .function_name(&self.function)
            .invocation_type(InvocationType::Event)
            .payload(Blob::new(payload))
            .send()
            .await
            .map_err(|e| aws_sdk_lambda::error::DisplayErrorContext(e).to_string())?;
        // Lambda answers 202 (queued); an emulator that runs the event before answering, 200.
        match out.status_code() {
            200..=299 => Ok(()),
            other => Err(format!("Invoke answered {other}")),
        }
    }
}
