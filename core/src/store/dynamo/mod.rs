//! DynamoDB backend of the `Store` trait: one table, string keys `pk`/`sk`, TTL on `expires_at`.
//! It must not depend on domain knowledge: no item kinds, key formats or service rules (runs,
//! receipts, rooms…); it only maps `Item`/`Cond`/`WriteOp` onto DynamoDB requests, one to one.
//!
//! Round trips: get = 1 GetItem; batch_get = 1 BatchGetItem per 100 distinct keys (plus bounded
//! retries of UnprocessedKeys); put = 1 PutItem; transact = 1 TransactWriteItems; query = 1 Query
//! (more only when expired items or the 1 MB page cap leave it short of `limit + 1` live items);
//! count = 1 UpdateItem (plus a PutItem when it replaces an expired counter).
//! Expiry is checked on every read and inside every condition, because TTL deletion is lazy.
//! Here: the client and its error mapping, table setup; `codec` maps items and
//! cancellation reasons, `expr` builds condition and key expressions, `store` is the
//! `Store` implementation.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::create_table::CreateTableError;
use aws_sdk_dynamodb::operation::describe_table::DescribeTableError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, CancellationReason, ConditionCheck, Delete, KeySchemaElement,
    KeyType, KeysAndAttributes, Put, ReturnValue, ReturnValuesOnConditionCheckFailure, ScalarAttributeType,
    TableStatus, TimeToLiveSpecification, TimeToLiveStatus, TransactWriteItem,
};

use super::{
    Attr, COUNT, CancelReason, Cond, EXPIRES_AT, Item, Key, Page, Store, StoreError, WriteOp, check_transaction,
    now_epoch,
};

const PK: &str = "pk";
const SK: &str = "sk";
/// BatchGetItem takes at most 100 keys per request.
const BATCH_GET_MAX: usize = 100;
/// Retries of UnprocessedKeys per chunk before giving up as `Unavailable`.
const BATCH_GET_RETRIES: u32 = 8;
/// Attempts of `count` when an expired counter is being replaced concurrently.
const COUNT_ATTEMPTS: u32 = 3;

type AvMap = HashMap<String, AttributeValue>;

#[derive(Clone, Debug)]
pub struct DynamoStore {
    client: Client,
    table: String,
}

/// Failures that are not SDK errors but still need a source for `StoreError`.
#[derive(Debug, thiserror::Error)]
enum DynamoError {
    #[error("stored item is not representable: {0}")]
    Mapping(String),
    #[error("{0} keys still unprocessed by BatchGetItem after {BATCH_GET_RETRIES} retries")]
    Unprocessed(usize),
    #[error("table {0} did not become ACTIVE in time")]
    NotActive(String),
    #[error("counter still contended after {COUNT_ATTEMPTS} attempts")]
    Contended,
}

fn internal(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::Internal(Box::new(e))
}

fn mapping(msg: impl Into<String>) -> StoreError {
    internal(DynamoError::Mapping(msg.into()))
}

/// Service error codes that mean "try again later" rather than "this request is wrong".
const TRANSIENT_CODES: &[&str] = &[
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "Throttling",
    "RequestLimitExceeded",
    "LimitExceededException",
    "TransactionInProgressException",
    "InternalServerError",
    "ServiceUnavailable",
    "RequestTimeout",
    "RequestTimeoutException",
];

/// Maps an SDK error without flattening it: throttling, timeouts, dispatch/response failures and
/// 5xx answers are `Unavailable`; everything else is `Internal`. The SDK error stays the source.
fn sdk_error<E>(err: SdkError<E, HttpResponse>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let transient = match &err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => true,
        SdkError::ServiceError(ctx) => {
            ctx.err().code().is_some_and(|c| TRANSIENT_CODES.contains(&c)) || ctx.raw().status().is_server_error()
        }
        _ => false,
    };
    if transient { StoreError::Unavailable(Box::new(err)) } else { StoreError::Internal(Box::new(err)) }
}

mod codec;
mod expr;
mod store;

use codec::*;
use expr::*;
pub(crate) use expr::{Expr, condition_expr, key_condition_expr};

// ---------------------------------------------------------------------------------------------
// The store

impl DynamoStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self { client, table: table.into() }
    }

    /// Client from the default AWS configuration chain (honours `AWS_ENDPOINT_URL_DYNAMODB`).
    pub async fn from_env(table: impl Into<String>) -> Self {
        Self::new(Client::new(&crate::aws_sdk::sdk_config(None).await), table)
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// Creates the table (pk/sk strings, on-demand) and enables TTL on `expires_at`.
    /// Idempotent: an existing table with the same key schema is fine.
    pub async fn create_table(&self) -> Result<(), StoreError> {
        let attr = |name: &str| {
            AttributeDefinition::builder()
                .attribute_name(name)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .map_err(internal)
        };
        let key = |name: &str, ty: KeyType| {
            KeySchemaElement::builder().attribute_name(name).key_type(ty).build().map_err(internal)
        };
        let created = self
            .client
            .create_table()
            .table_name(&self.table)
            .attribute_definitions(attr(PK)?)
            .attribute_definitions(attr(SK)?)
            .key_schema(key(PK, KeyType::Hash)?)
            .key_schema(key(SK, KeyType::Range)?)
            .billing_mode(BillingMode::PayPerRequest)
            .send()
            .await;
        match created {
            Ok(_) => {}
            Err(e) if matches!(e.as_service_error(), Some(CreateTableError::ResourceInUseException(_))) => {}
            Err(e) => return Err(sdk_error(e)),
        }
        self.wait_active().await?;
        if self.ttl_enabled().await? {
            return Ok(());
        }
        let spec =
            TimeToLiveSpecification::builder().enabled(true).attribute_name(EXPIRES_AT).build().map_err(internal)?;
        match self.client.update_time_to_live().table_name(&self.table).time_to_live_specification(spec).send().await {
            Ok(_) => Ok(()),
            // A concurrent create_table may have enabled it in between ("already enabled").
            Err(e) => match self.ttl_enabled().await {
                Ok(true) => Ok(()),
                _ => Err(sdk_error(e)),
            },
        }
    }

    /// Polls DescribeTable until ACTIVE; checks the key schema of an existing table.
    async fn wait_active(&self) -> Result<(), StoreError> {
        for _ in 0..300 {
            let described = self.client.describe_table().table_name(&self.table).send().await;
            let out = match described {
                Ok(out) => out,
                // Table metadata is eventually consistent right after CreateTable.
                Err(e) if matches!(e.as_service_error(), Some(DescribeTableError::ResourceNotFoundException(_))) => {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
                Err(e) => return Err(sdk_error(e)),
            };
            let table = out.table().ok_or_else(|| mapping("DescribeTable without a table"))?;
            let schema: Vec<(&str, &KeyType)> =
                table.key_schema().iter().map(|k| (k.attribute_name(), k.key_type())).collect();
            let string_keys = table
                .attribute_definitions()
                .iter()
                .filter(|d| is_key_attr(d.attribute_name()))
                .all(|d| *d.attribute_type() == ScalarAttributeType::S);
            if schema != [(PK, &KeyType::Hash), (SK, &KeyType::Range)] || !string_keys {
                return Err(StoreError::Invalid(format!(
                    "table {} exists with another key schema (want pk HASH, sk RANGE, both strings)",
                    self.table
                )));
            }
            if table.table_status() == Some(&TableStatus::Active) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        Err(StoreError::Unavailable(Box::new(DynamoError::NotActive(self.table.clone()))))
    }

    /// True when TTL is enabled (or being enabled) on `expires_at`; Invalid for another attribute.
    async fn ttl_enabled(&self) -> Result<bool, StoreError> {
        let out = self.client.describe_time_to_live().table_name(&self.table).send().await.map_err(sdk_error)?;
        let Some(desc) = out.time_to_live_description() else {
            return Ok(false);
        };
        let on = matches!(desc.time_to_live_status(), Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling));
        match desc.attribute_name() {
            Some(name) if on && name != EXPIRES_AT => {
                Err(StoreError::Invalid(format!("table {} has TTL on {name}, not {EXPIRES_AT}", self.table)))
            }
            _ => Ok(on),
        }
    }

    fn transact_item(&self, op: &WriteOp, now: i64) -> Result<TransactWriteItem, StoreError> {
        let all_old = ReturnValuesOnConditionCheckFailure::AllOld;
        let cond = op.cond().map(|c| condition_expr(c, now));
        let (text, names, values) = match &cond {
            Some(e) => (Some(e.text.clone()), e.names(), e.values()),
            None => (None, None, None),
        };
        let item = match op {
            WriteOp::Put { item, .. } => TransactWriteItem::builder().put(
                Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(item_av(item)?))
                    .set_condition_expression(text)
                    .set_expression_attribute_names(names)
                    .set_expression_attribute_values(values)
                    .return_values_on_condition_check_failure(all_old)
                    .build()
                    .map_err(internal)?,
            ),
            WriteOp::Check { key, .. } => TransactWriteItem::builder().condition_check(
                ConditionCheck::builder()
                    .table_name(&self.table)
                    .set_key(Some(self.storable_key(key)?))
                    .set_condition_expression(text)
                    .set_expression_attribute_names(names)
                    .set_expression_attribute_values(values)
                    .return_values_on_condition_check_failure(all_old)
                    .build()
                    .map_err(internal)?,
            ),
            WriteOp::Delete { key, .. } => TransactWriteItem::builder().delete(
                Delete::builder()
                    .table_name(&self.table)
                    .set_key(Some(self.storable_key(key)?))
                    .set_condition_expression(text)
                    .set_expression_attribute_names(names)
                    .set_expression_attribute_values(values)
                    .return_values_on_condition_check_failure(all_old)
                    .build()
                    .map_err(internal)?,
            ),
        };
        Ok(item.build())
    }

    fn storable_key(&self, key: &Key) -> Result<AvMap, StoreError> {
        if !key_is_storable(&key.pk, &key.sk) {
            return Err(StoreError::Invalid("pk and sk must not be empty".into()));
        }
        Ok(key_av(&key.pk, &key.sk))
    }

    /// One BatchGetItem chunk (at most 100 distinct keys), retrying UnprocessedKeys.
    async fn batch_get_chunk(&self, chunk: &[&Key], found: &mut HashMap<Key, Item>) -> Result<(), StoreError> {
        let mut pending: Vec<AvMap> = chunk.iter().map(|k| key_av(&k.pk, &k.sk)).collect();
        let mut retries = 0;
        loop {
            let request =
                KeysAndAttributes::builder().set_keys(Some(pending)).consistent_read(true).build().map_err(internal)?;
            let out =
                self.client.batch_get_item().request_items(&self.table, request).send().await.map_err(sdk_error)?;
            let items = out.responses.and_then(|mut r| r.remove(&self.table)).unwrap_or_default();
            for raw in items {
                let item = av_item(raw)?;
                found.insert(item.key(), item);
            }
            pending =
                out.unprocessed_keys.and_then(|mut u| u.remove(&self.table)).map(|ka| ka.keys).unwrap_or_default();
            if pending.is_empty() {
                return Ok(());
            }
            if retries == BATCH_GET_RETRIES {
                return Err(StoreError::Unavailable(Box::new(DynamoError::Unprocessed(pending.len()))));
            }
            // 20, 40, 80 … ms, capped at 500 ms: about 2 s in all before giving up.
            tokio::time::sleep(Duration::from_millis((20u64 << retries).min(500))).await;
            retries += 1;
        }
    }
}
