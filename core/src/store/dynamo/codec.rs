//! Items to and from DynamoDB attribute values, and a transaction's cancellation reasons
//! to the store's. Knows no item kind.

use super::*;

pub(super) fn key_is_storable(pk: &str, sk: &str) -> bool {
    // DynamoDB rejects empty key attributes, so such an item can never exist.
    !pk.is_empty() && !sk.is_empty()
}

pub(super) fn key_av(pk: &str, sk: &str) -> AvMap {
    HashMap::from([
        (PK.to_owned(), AttributeValue::S(pk.to_owned())),
        (SK.to_owned(), AttributeValue::S(sk.to_owned())),
    ])
}

pub(super) fn attr_av(attr: &Attr) -> AttributeValue {
    match attr {
        Attr::S(s) => AttributeValue::S(s.clone()),
        Attr::N(n) => AttributeValue::N(n.to_string()),
    }
}

/// The item as a DynamoDB map; rejects what DynamoDB could not store faithfully.
pub(super) fn item_av(item: &Item) -> Result<AvMap, StoreError> {
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

pub(super) fn av_item(mut map: AvMap) -> Result<Item, StoreError> {
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
pub(super) fn live_av(map: Option<&AvMap>, now: i64) -> Result<Option<Item>, StoreError> {
    match map {
        Some(map) if !map.is_empty() => Ok(Some(av_item(map.clone())?).filter(|i| !i.is_expired(now))),
        _ => Ok(None),
    }
}

pub(super) fn cancel_reason(reason: &CancellationReason, now: i64) -> Result<CancelReason, StoreError> {
    Ok(match reason.code() {
        Some("None") => CancelReason::None,
        Some("ConditionalCheckFailed") => CancelReason::ConditionFailed { current: live_av(reason.item(), now)? },
        Some(other) => CancelReason::Other(other.to_owned()),
        None => CancelReason::Other(String::new()),
    })
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
