//! The DynamoDB side of the store tests: a client for the DynamoDB-compatible server on
//! `HELIX_TEST_DYNAMODB_ENDPOINT` and a fresh table per test. Without the endpoint these
//! tests fail, unless `HELIX_TEST_SKIP_DYNAMODB=1` says to skip them on purpose: CI can
//! never skip them silently.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{BehaviorVersion, ConfigBag, Credentials, Intercept, Region, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use helix_core::store::dynamo::DynamoStore;

const ENDPOINT_VAR: &str = "HELIX_TEST_DYNAMODB_ENDPOINT";
const SKIP_VAR: &str = "HELIX_TEST_SKIP_DYNAMODB";

/// Records the operation of every HTTP request the SDK sends (retries included).
#[derive(Debug, Clone, Default)]
pub struct RoundTrips(Arc<Mutex<Vec<String>>>);

impl RoundTrips {
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

impl Intercept for RoundTrips {
    fn name(&self) -> &'static str {
        "RoundTrips"
    }
    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let target = context.request().headers().get("x-amz-target").unwrap_or("?");
        let op = target.rsplit('.').next().unwrap_or(target).to_owned();
        self.0.lock().unwrap().push(op);
        Ok(())
    }
}

pub fn client() -> Option<Client> {
    client_counting(None)
}

pub fn client_counting(round_trips: Option<RoundTrips>) -> Option<Client> {
    let endpoint = match std::env::var(ENDPOINT_VAR) {
        Ok(e) if !e.is_empty() => e,
        _ if std::env::var(SKIP_VAR).as_deref() == Ok("1") => {
            eprintln!("skipping DynamoDB store tests: {SKIP_VAR}=1 and {ENDPOINT_VAR} is not set");
            return None;
        }
        _ => panic!(
            "{ENDPOINT_VAR} is not set: start a DynamoDB-compatible server (e.g. `moto_server -H \
             127.0.0.1 -p 5055`) and set {ENDPOINT_VAR}=http://127.0.0.1:5055, or set {SKIP_VAR}=1 \
             to skip these tests deliberately"
        ),
    };
    let config = aws_sdk_dynamodb::config::Builder::new()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "helix-tests"))
        .endpoint_url(endpoint);
    let config = match round_trips {
        Some(counter) => config.interceptor(counter),
        None => config,
    };
    Some(Client::from_conf(config.build()))
}

/// A store on a fresh, uniquely named table; None when skipping deliberately.
pub async fn fresh_store() -> Option<(Client, DynamoStore)> {
    let client = client()?;
    let store = DynamoStore::new(client.clone(), format!("helix-test-{}", uuid::Uuid::new_v4()));
    store.create_table().await.expect("create table");
    Some((client, store))
}

pub async fn drop_table(client: &Client, store: &DynamoStore) {
    client.delete_table().table_name(store.table()).send().await.expect("delete test table");
}
