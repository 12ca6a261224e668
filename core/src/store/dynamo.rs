//! DynamoDB backend of the `Store` trait: one table, string keys `pk`/`sk`, TTL on `expires_at`.
//! It must not depend on domain knowledge: no item kinds, key formats or service rules (runs,
//! receipts, rooms…); it only maps `Item`/`Cond`/`WriteOp` onto DynamoDB requests, one to one.
//!
//! Round trips: get = 1 GetItem; batch_get = 1 BatchGetItem per 100 distinct keys (plus bounded
//! retries of UnprocessedKeys); put = 1 PutItem; transact = 1 TransactWriteItems; query = 1 Query
//! (more only when expired items or the 1 MB page cap leave it short of `limit + 1` live items);
//! count = 1 UpdateItem (plus a PutItem when it replaces an expired counter).
//! Expiry is checked on every read and inside every condition, because TTL deletion is lazy.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use async_trait::async_trait;
use aws_config::BehaviorVersion;
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

// ---------------------------------------------------------------------------------------------
// Item mapping

fn key_is_storable(pk: &str, sk: &str) -> bool {
    // DynamoDB rejects empty key attributes, so such an item can never exist.
    !pk.is_empty() && !sk.is_empty()
}

fn key_av(pk: &str, sk: &str) -> AvMap {
    HashMap::from([
        (PK.to_owned(), AttributeValue::S(pk.to_owned())),
        (SK.to_owned(), AttributeValue::S(sk.to_owned())),
    ])
}

fn attr_av(attr: &Attr) -> AttributeValue {
    match attr {
        Attr::S(s) => AttributeValue::S(s.clone()),
        Attr::N(n) => AttributeValue::N(n.to_string()),
    }
}

/// The item as a DynamoDB map; rejects what DynamoDB could not store faithfully.
fn item_av(item: &Item) -> Result<AvMap, StoreError> {
    if !key_is_storable(&item.pk, &item.sk) {
        return Err(StoreError::Invalid("pk and sk must not be empty".into()));
    }
    if item.attrs.contains_key(PK) || item.attrs.contains_key(SK) {
        return Err(StoreError::Invalid("an item attribute may not be named pk or sk".into()));
    }
    if item.attrs.get(EXPIRES_AT).is_some_and(|a| a.as_i64().is_none()) {
        // A string here would be ignored by DynamoDB's TTL and makes the liveness test in
        // conditions ambiguous; the expressions below assume a number.
        return Err(StoreError::Invalid(format!("{EXPIRES_AT} must be a number (epoch seconds)")));
    }
    let mut map = key_av(&item.pk, &item.sk);
    map.extend(item.attrs.iter().map(|(k, v)| (k.clone(), attr_av(v))));
    Ok(map)
}

fn av_item(mut map: AvMap) -> Result<Item, StoreError> {
    let mut take_key = |name: &str| match map.remove(name) {
        Some(AttributeValue::S(s)) => Ok(s),
        other => Err(mapping(format!("key attribute {name} is {other:?}"))),
    };
    let pk = take_key(PK)?;
    let sk = take_key(SK)?;
    let mut attrs = BTreeMap::new();
    for (name, value) in map {
        let attr = match value {
            AttributeValue::S(s) => Attr::S(s),
            AttributeValue::N(n) => {
                Attr::N(n.parse().map_err(|_| mapping(format!("{name} = {n} is not a 64-bit integer")))?)
            }
            other => {
                return Err(mapping(format!("{name} has an unsupported type: {other:?}")));
            }
        };
        attrs.insert(name, attr);
    }
    Ok(Item { pk, sk, attrs })
}

/// The live item in a map DynamoDB returned (ALL_OLD on a failed condition), if any.
fn live_av(map: Option<&AvMap>, now: i64) -> Result<Option<Item>, StoreError> {
    match map {
        Some(map) if !map.is_empty() => Ok(Some(av_item(map.clone())?).filter(|i| !i.is_expired(now))),
        _ => Ok(None),
    }
}

// ---------------------------------------------------------------------------------------------
// Expressions

/// A DynamoDB expression with its placeholder maps. Names and values are always placeholders.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Expr {
    pub text: String,
    pub names: HashMap<String, String>,
    pub values: HashMap<String, AttributeValue>,
}

impl Expr {
    fn names(&self) -> Option<HashMap<String, String>> {
        // DynamoDB rejects an empty ExpressionAttributeNames/Values map.
        (!self.names.is_empty()).then(|| self.names.clone())
    }
    fn values(&self) -> Option<AvMap> {
        (!self.values.is_empty()).then(|| self.values.clone())
    }
}

#[derive(Default)]
struct ExprBuilder {
    expr: Expr,
    by_name: HashMap<String, String>,
    next_value: usize,
}

impl ExprBuilder {
    /// `#nK` for an attribute name, one placeholder per distinct name.
    fn name(&mut self, name: &str) -> String {
        if let Some(ph) = self.by_name.get(name) {
            return ph.clone();
        }
        let ph = format!("#n{}", self.by_name.len());
        self.by_name.insert(name.to_owned(), ph.clone());
        self.expr.names.insert(ph.clone(), name.to_owned());
        ph
    }
    /// `:vK` for a value.
    fn value(&mut self, value: AttributeValue) -> String {
        let ph = format!(":v{}", self.next_value);
        self.next_value += 1;
        self.expr.values.insert(ph.clone(), value);
        ph
    }
    /// A fixed placeholder, e.g. `:now`, shared by every use in the expression.
    fn fixed(&mut self, ph: &str, value: AttributeValue) -> String {
        self.expr.values.entry(ph.to_owned()).or_insert(value);
        ph.to_owned()
    }
    fn finish(mut self, text: String) -> Expr {
        self.expr.text = text;
        self.expr
    }
}

/// Translates `cond` into a ConditionExpression that holds exactly when `cond.holds(stored, now)`
/// does, for every item this backend can store (expires_at, when present, is a number).
pub(crate) fn condition_expr(cond: &Cond, now: i64) -> Expr {
    let mut b = ExprBuilder::default();
    let text = cond_text(cond, now, &mut b);
    b.finish(text)
}

fn cond_text(cond: &Cond, now: i64, b: &mut ExprBuilder) -> String {
    match cond {
        Cond::NotExists => not_live(now, b),
        Cond::Exists => live(now, b),
        // holds() looks only at `attrs`, which never contain the key attributes.
        Cond::Eq(name, _) | Cond::Lt(name, _) if is_key_attr(name) => constant(false, b),
        Cond::Missing(name) if is_key_attr(name) => constant(true, b),
        Cond::Eq(name, value) => {
            let live = live(now, b);
            let (n, v) = (b.name(name), b.value(attr_av(value)));
            format!("({live} AND {n} = {v})")
        }
        Cond::Missing(name) => {
            let not_live = not_live(now, b);
            let n = b.name(name);
            format!("({not_live} OR attribute_not_exists({n}))")
        }
        Cond::Lt(name, bound) => {
            let live = live(now, b);
            let n = b.name(name);
            let ty = b.fixed(":tN", AttributeValue::S("N".into()));
            let v = b.value(AttributeValue::N(bound.to_string()));
            // The type test keeps a string attribute a plain `false` (moto raises on `S < N`,
            // DynamoDB answers false); AND short-circuits on both.
            format!("({live} AND attribute_type({n}, {ty}) AND {n} < {v})")
        }
        Cond::And(all) if all.is_empty() => constant(true, b),
        Cond::Or(any) if any.is_empty() => constant(false, b),
        Cond::And(all) => join(all, " AND ", now, b),
        Cond::Or(any) => join(any, " OR ", now, b),
    }
}

fn is_key_attr(name: &str) -> bool {
    name == PK || name == SK
}

fn join(conds: &[Cond], op: &str, now: i64, b: &mut ExprBuilder) -> String {
    let parts: Vec<String> = conds.iter().map(|c| cond_text(c, now, b)).collect();
    format!("({})", parts.join(op))
}

fn now_ph(now: i64, b: &mut ExprBuilder) -> String {
    b.fixed(":now", AttributeValue::N(now.to_string()))
}

/// A live item is stored: present and not expired.
fn live(now: i64, b: &mut ExprBuilder) -> String {
    let (pk, exp, now) = (b.name(PK), b.name(EXPIRES_AT), now_ph(now, b));
    format!("(attribute_exists({pk}) AND (attribute_not_exists({exp}) OR {exp} > {now}))")
}

/// No live item: never written, deleted, or expired (TTL deletion is lazy).
fn not_live(now: i64, b: &mut ExprBuilder) -> String {
    let (pk, exp, now) = (b.name(PK), b.name(EXPIRES_AT), now_ph(now, b));
    format!("(attribute_not_exists({pk}) OR {exp} <= {now})")
}

/// DynamoDB has no literal true/false: a tautology or contradiction on the key attribute.
fn constant(value: bool, b: &mut ExprBuilder) -> String {
    let pk = b.name(PK);
    let op = if value { "OR" } else { "AND" };
    format!("(attribute_exists({pk}) {op} attribute_not_exists({pk}))")
}

/// KeyConditionExpression for the items of `pk` whose sort key starts with `prefix`.
pub(crate) fn key_condition_expr(pk: &str, prefix: &str) -> Expr {
    let mut b = ExprBuilder::default();
    let (n, v) = (b.name(PK), b.value(AttributeValue::S(pk.to_owned())));
    let mut text = format!("{n} = {v}");
    if !prefix.is_empty() {
        let (n, v) = (b.name(SK), b.value(AttributeValue::S(prefix.to_owned())));
        text.push_str(&format!(" AND begins_with({n}, {v})"));
    }
    b.finish(text)
}

// ---------------------------------------------------------------------------------------------
// The store

impl DynamoStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self { client, table: table.into() }
    }

    /// Client from the default AWS configuration chain (honours `AWS_ENDPOINT_URL_DYNAMODB`).
    pub async fn from_env(table: impl Into<String>) -> Self {
        let config = aws_config::load_defaults(BehaviorVersion::latest()).await;
        Self::new(Client::new(&config), table)
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

fn cancel_reason(reason: &CancellationReason, now: i64) -> Result<CancelReason, StoreError> {
    Ok(match reason.code() {
        Some("None") => CancelReason::None,
        Some("ConditionalCheckFailed") => CancelReason::ConditionFailed { current: live_av(reason.item(), now)? },
        Some(other) => CancelReason::Other(other.to_owned()),
        None => CancelReason::Other(String::new()),
    })
}

#[async_trait]
impl Store for DynamoStore {
    async fn get(&self, key: &Key) -> Result<Option<Item>, StoreError> {
        if !key_is_storable(&key.pk, &key.sk) {
            return Ok(None);
        }
        let now = now_epoch();
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key_av(&key.pk, &key.sk)))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_error)?;
        live_av(out.item(), now)
    }

    async fn batch_get(&self, keys: &[Key]) -> Result<Vec<Option<Item>>, StoreError> {
        // BatchGetItem rejects duplicate keys and empty key attributes: ask for each
        // storable key once and map the answers back onto `keys`.
        let mut distinct: Vec<&Key> = keys.iter().filter(|k| key_is_storable(&k.pk, &k.sk)).collect();
        distinct.sort();
        distinct.dedup();
        let mut found = HashMap::new();
        for chunk in distinct.chunks(BATCH_GET_MAX) {
            self.batch_get_chunk(chunk, &mut found).await?;
        }
        let now = now_epoch();
        Ok(keys.iter().map(|k| found.get(k).filter(|i| !i.is_expired(now)).cloned()).collect())
    }

    async fn put(&self, item: Item, cond: Option<Cond>) -> Result<(), StoreError> {
        let now = now_epoch();
        let av = item_av(&item)?;
        let expr = cond.as_ref().map(|c| condition_expr(c, now));
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(av))
            .set_condition_expression(expr.as_ref().map(|e| e.text.clone()))
            .set_expression_attribute_names(expr.as_ref().and_then(Expr::names))
            .set_expression_attribute_values(expr.as_ref().and_then(Expr::values))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(err) => match err.as_service_error() {
                Some(PutItemError::ConditionalCheckFailedException(e)) => {
                    Err(StoreError::ConditionFailed { current: live_av(e.item(), now)? })
                }
                _ => Err(sdk_error(err)),
            },
        }
    }

    async fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        check_transaction(&ops)?;
        let now = now_epoch();
        let items = ops.iter().map(|op| self.transact_item(op, now)).collect::<Result<Vec<_>, _>>()?;
        // The SDK fills ClientRequestToken, so its own retries cannot apply the writes twice.
        let result = self.client.transact_write_items().set_transact_items(Some(items)).send().await;
        let err = match result {
            Ok(_) => return Ok(()),
            Err(err) => err,
        };
        if let Some(TransactWriteItemsError::TransactionCanceledException(e)) = err.as_service_error() {
            let got = e.cancellation_reasons();
            // One reason per action, in order; anything else stays the SDK error (Internal).
            if got.len() == ops.len() {
                let reasons = got.iter().map(|r| cancel_reason(r, now)).collect::<Result<Vec<_>, _>>()?;
                return Err(StoreError::TransactionCanceled { reasons });
            }
        }
        Err(sdk_error(err))
    }

    /// One UpdateItem (`ADD count 1`, `ReturnValues = UPDATED_NEW`) in the common case. An
    /// expired counter that TTL has not deleted yet fails the update's liveness condition and
    /// is replaced by a conditional PutItem starting at 1 (then the update is tried again if
    /// another process replaced it first).
    async fn count(&self, key: &Key, expires_at: i64) -> Result<i64, StoreError> {
        let key_map = self.storable_key(key)?;
        for _ in 0..COUNT_ATTEMPTS {
            let now = now_epoch();
            let mut b = ExprBuilder::default();
            let (exp, count) = (b.name(EXPIRES_AT), b.name(COUNT));
            let (at, one, now_v) = (
                b.value(AttributeValue::N(expires_at.to_string())),
                b.value(AttributeValue::N("1".into())),
                now_ph(now, &mut b),
            );
            let not_expired = format!("attribute_not_exists({exp}) OR {exp} > {now_v}");
            let update = b.finish(format!("SET {exp} = if_not_exists({exp}, {at}) ADD {count} {one}"));
            let result = self
                .client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key_map.clone()))
                .update_expression(&update.text)
                .condition_expression(not_expired)
                .set_expression_attribute_names(update.names())
                .set_expression_attribute_values(update.values())
                .return_values(ReturnValue::UpdatedNew)
                .send()
                .await;
            match result {
                Ok(out) => {
                    return match out.attributes().and_then(|a| a.get(COUNT)) {
                        Some(AttributeValue::N(n)) => n.parse().map_err(|_| mapping(format!("{COUNT} = {n}"))),
                        other => Err(mapping(format!("{COUNT} came back as {other:?}"))),
                    };
                }
                Err(e) if matches!(e.as_service_error(), Some(UpdateItemError::ConditionalCheckFailedException(_))) => {
                    let fresh = Item::new(&key.pk, &key.sk).with_n(COUNT, 1).with_n(EXPIRES_AT, expires_at);
                    match self.put(fresh, Some(Cond::NotExists)).await {
                        Ok(()) => return Ok(1),
                        Err(StoreError::ConditionFailed { .. }) => continue,
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(sdk_error(e)),
            }
        }
        Err(StoreError::Unavailable(Box::new(DynamoError::Contended)))
    }

    fn is_shared(&self) -> bool {
        true
    }

    async fn query(&self, pk: &str, sk_prefix: &str, after_sk: Option<&str>, limit: usize) -> Result<Page, StoreError> {
        let empty = Page { items: Vec::new(), has_more: false };
        if pk.is_empty() {
            return Ok(empty);
        }
        // DynamoDB refuses an ExclusiveStartKey outside the key condition's range, so only a
        // cursor inside the prefix range is sent; the others are decided here. (Sort keys are
        // never empty, so an empty cursor is the same as none.)
        let start = match after_sk.filter(|a| !a.is_empty()) {
            Some(after) if after.starts_with(sk_prefix) => Some(key_av(pk, after)),
            // Every key with the prefix sorts before this cursor (byte order, as DynamoDB's).
            Some(after) if after > sk_prefix => return Ok(empty),
            _ => None,
        };
        let now = now_epoch();
        let key_cond = key_condition_expr(pk, sk_prefix);
        // limit + 1 live items tell whether there is more; expired ones are skipped here.
        let want = limit.saturating_add(1);
        let mut items = Vec::new();
        let mut exclusive_start = start;
        loop {
            let ask = i32::try_from(want - items.len()).unwrap_or(i32::MAX);
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression(&key_cond.text)
                .set_expression_attribute_names(key_cond.names())
                .set_expression_attribute_values(key_cond.values())
                .consistent_read(true)
                .scan_index_forward(true)
                .limit(ask)
                .set_exclusive_start_key(exclusive_start.take())
                .send()
                .await
                .map_err(sdk_error)?;
            for raw in out.items.unwrap_or_default() {
                let item = av_item(raw)?;
                if !item.is_expired(now) {
                    items.push(item);
                }
            }
            match out.last_evaluated_key {
                Some(last) if !last.is_empty() && items.len() < want => exclusive_start = Some(last),
                _ => break,
            }
        }
        let has_more = items.len() > limit;
        items.truncate(limit);
        Ok(Page { items, has_more })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(v: i64) -> AttributeValue {
        AttributeValue::N(v.to_string())
    }
    fn s(v: &str) -> AttributeValue {
        AttributeValue::S(v.to_owned())
    }
    fn names(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }
    fn values(pairs: &[(&str, AttributeValue)]) -> AvMap {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    const LIVE: &str = "(attribute_exists(#n0) AND (attribute_not_exists(#n1) OR #n1 > :now))";
    const NOT_LIVE: &str = "(attribute_not_exists(#n0) OR #n1 <= :now)";

    #[test]
    fn not_exists_means_no_live_item() {
        let e = condition_expr(&Cond::NotExists, 1000);
        assert_eq!(e.text, NOT_LIVE);
        assert_eq!(e.names, names(&[("#n0", "pk"), ("#n1", "expires_at")]));
        assert_eq!(e.values, values(&[(":now", n(1000))]));
    }

    #[test]
    fn exists_means_a_live_item() {
        let e = condition_expr(&Cond::Exists, 7);
        assert_eq!(e.text, LIVE);
        assert_eq!(e.values, values(&[(":now", n(7))]));
    }

    #[test]
    fn eq_requires_a_live_item_and_uses_placeholders() {
        let e = condition_expr(&Cond::eq_s("status", "open"), 5);
        assert_eq!(e.text, format!("({LIVE} AND #n2 = :v0)"));
        assert_eq!(e.names, names(&[("#n0", "pk"), ("#n1", "expires_at"), ("#n2", "status")]));
        assert_eq!(e.values, values(&[(":now", n(5)), (":v0", s("open"))]));
        let e = condition_expr(&Cond::eq_n("rev", 3), 5);
        assert_eq!(e.values[":v0"], n(3));
    }

    #[test]
    fn missing_holds_on_an_absent_or_expired_item() {
        let e = condition_expr(&Cond::Missing("claim".into()), 5);
        assert_eq!(e.text, format!("({NOT_LIVE} OR attribute_not_exists(#n2))"));
        assert_eq!(e.names["#n2"], "claim");
    }

    #[test]
    fn lt_requires_a_live_number() {
        let e = condition_expr(&Cond::Lt("lease".into(), 200), 5);
        assert_eq!(e.text, format!("({LIVE} AND attribute_type(#n2, :tN) AND #n2 < :v0)"));
        assert_eq!(e.values, values(&[(":now", n(5)), (":tN", s("N")), (":v0", n(200))]));
    }

    #[test]
    fn and_or_nest_and_share_name_placeholders() {
        let cond = Cond::And(vec![
            Cond::Exists,
            Cond::Or(vec![Cond::Missing("claim".into()), Cond::Lt("lease".into(), 9)]),
            Cond::eq_s("claim", "x"),
        ]);
        let e = condition_expr(&cond, 1);
        assert_eq!(
            e.text,
            format!(
                "({LIVE} AND (({NOT_LIVE} OR attribute_not_exists(#n2)) OR ({LIVE} AND \
                 attribute_type(#n3, :tN) AND #n3 < :v0)) AND ({LIVE} AND #n2 = :v1))"
            )
        );
        assert_eq!(e.names, names(&[("#n0", "pk"), ("#n1", "expires_at"), ("#n2", "claim"), ("#n3", "lease")]));
        assert_eq!(e.values, values(&[(":now", n(1)), (":tN", s("N")), (":v0", n(9)), (":v1", s("x"))]));
    }

    #[test]
    fn empty_lists_and_key_attributes_become_constants() {
        const TRUE: &str = "(attribute_exists(#n0) OR attribute_not_exists(#n0))";
        const FALSE: &str = "(attribute_exists(#n0) AND attribute_not_exists(#n0))";
        assert_eq!(condition_expr(&Cond::And(vec![]), 1).text, TRUE);
        assert_eq!(condition_expr(&Cond::Or(vec![]), 1).text, FALSE);
        assert_eq!(condition_expr(&Cond::eq_s("pk", "x"), 1).text, FALSE);
        assert_eq!(condition_expr(&Cond::Lt("sk".into(), 1), 1).text, FALSE);
        let missing = condition_expr(&Cond::Missing("sk".into()), 1);
        assert_eq!(missing.text, TRUE);
        assert!(missing.values().is_none(), "no empty value map is sent");
    }

    #[test]
    fn expressions_never_inline_names_or_values() {
        let cond = Cond::Or(vec![Cond::eq_s("status", "open"), Cond::Missing("expires_at".into())]);
        let e = condition_expr(&cond, 42);
        for word in ["status", "open", "expires_at", "pk", "42"] {
            assert!(!e.text.contains(word), "{word} inlined in {}", e.text);
        }
    }

    #[test]
    fn key_condition_with_and_without_prefix() {
        let e = key_condition_expr("RUN#a", "EVT#");
        assert_eq!(e.text, "#n0 = :v0 AND begins_with(#n1, :v1)");
        assert_eq!(e.names, names(&[("#n0", "pk"), ("#n1", "sk")]));
        assert_eq!(e.values, values(&[(":v0", s("RUN#a")), (":v1", s("EVT#"))]));
        let e = key_condition_expr("RUN#a", "");
        assert_eq!(e.text, "#n0 = :v0");
        assert_eq!(e.names, names(&[("#n0", "pk")]));
    }

    #[test]
    fn items_map_both_ways_and_reject_key_named_attributes() {
        let item = Item::new("P", "S").with_s("a", "x").with_n("b", -4).with_n(EXPIRES_AT, 9);
        let av = item_av(&item).unwrap();
        assert_eq!(av["pk"], s("P"));
        assert_eq!(av["b"], n(-4));
        assert_eq!(av_item(av).unwrap(), item);
        assert!(matches!(item_av(&Item::new("P", "S").with_s("pk", "x")), Err(StoreError::Invalid(_))));
        assert!(matches!(item_av(&Item::new("P", "S").with_n("sk", 1)), Err(StoreError::Invalid(_))));
        assert!(matches!(item_av(&Item::new("", "S")), Err(StoreError::Invalid(_))));
        assert!(matches!(item_av(&Item::new("P", "S").with_s(EXPIRES_AT, "soon")), Err(StoreError::Invalid(_))));
        let mut foreign = key_av("P", "S");
        foreign.insert("f".into(), AttributeValue::N("1.5".into()));
        assert!(matches!(av_item(foreign), Err(StoreError::Internal(_))));
    }

    #[test]
    fn cancellation_reasons_map_per_action() {
        let stored = key_av("P", "S").into_iter().chain([("rev".to_owned(), n(2))]).collect::<AvMap>();
        let expired = stored.clone().into_iter().chain([(EXPIRES_AT.to_owned(), n(5))]).collect::<AvMap>();
        let reason =
            |code: &str, item: Option<&AvMap>| CancellationReason::builder().code(code).set_item(item.cloned()).build();
        assert_eq!(cancel_reason(&reason("None", None), 10).unwrap(), CancelReason::None);
        match cancel_reason(&reason("ConditionalCheckFailed", Some(&stored)), 10).unwrap() {
            CancelReason::ConditionFailed { current: Some(i) } => assert_eq!(i.n("rev"), Some(2)),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            cancel_reason(&reason("ConditionalCheckFailed", Some(&expired)), 10).unwrap(),
            CancelReason::ConditionFailed { current: None }
        );
        assert_eq!(
            cancel_reason(&reason("TransactionConflict", None), 10).unwrap(),
            CancelReason::Other("TransactionConflict".into())
        );
    }
}
