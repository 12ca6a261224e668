//! The `Store` implementation on DynamoDB: each operation one request (see the round
//! trips in the module above), with bounded retries where the service leaves work.

use super::*;

#[async_trait]
impl Store for DynamoStore {
    #[tracing::instrument(target = "helix_core::store::spans", name = "DynamoDB.GetItem", skip_all, fields(otel.kind = "client", db.system.name = "aws.dynamodb", db.operation.name = "GetItem", db.collection.name = %self.table))]
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

    #[tracing::instrument(target = "helix_core::store::spans", name = "DynamoDB.BatchGetItem", skip_all, fields(otel.kind = "client", db.system.name = "aws.dynamodb", db.operation.name = "BatchGetItem", db.collection.name = %self.table))]
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

    #[tracing::instrument(target = "helix_core::store::spans", name = "DynamoDB.PutItem", skip_all, fields(otel.kind = "client", db.system.name = "aws.dynamodb", db.operation.name = "PutItem", db.collection.name = %self.table))]
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

    #[tracing::instrument(target = "helix_core::store::spans", name = "DynamoDB.TransactWriteItems", skip_all, fields(otel.kind = "client", db.system.name = "aws.dynamodb", db.operation.name = "TransactWriteItems", db.collection.name = %self.table))]
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
    #[tracing::instrument(target = "helix_core::store::spans", name = "DynamoDB.UpdateItem", skip_all, fields(otel.kind = "client", db.system.name = "aws.dynamodb", db.operation.name = "UpdateItem", db.collection.name = %self.table))]
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

    #[tracing::instrument(target = "helix_core::store::spans", name = "DynamoDB.Query", skip_all, fields(otel.kind = "client", db.system.name = "aws.dynamodb", db.operation.name = "Query", db.collection.name = %self.table))]
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
