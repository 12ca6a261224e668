//! Condition and key-condition expressions: every name and value a placeholder, item
//! expiry checked inside every condition. Knows no item kind.

use super::*;

/// A DynamoDB expression with its placeholder maps. Names and values are always placeholders.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Expr {
    pub text: String,
    pub names: HashMap<String, String>,
    pub values: HashMap<String, AttributeValue>,
}

impl Expr {
    pub(super) fn names(&self) -> Option<HashMap<String, String>> {
        // DynamoDB rejects an empty ExpressionAttributeNames/Values map.
        (!self.names.is_empty()).then(|| self.names.clone())
    }
    pub(super) fn values(&self) -> Option<AvMap> {
        (!self.values.is_empty()).then(|| self.values.clone())
    }
}

#[derive(Default)]
pub(super) struct ExprBuilder {
    expr: Expr,
    by_name: HashMap<String, String>,
    next_value: usize,
}

impl ExprBuilder {
    /// `#nK` for an attribute name, one placeholder per distinct name.
    pub(super) fn name(&mut self, name: &str) -> String {
        if let Some(ph) = self.by_name.get(name) {
            return ph.clone();
        }
        let ph = format!("#n{}", self.by_name.len());
        self.by_name.insert(name.to_owned(), ph.clone());
        self.expr.names.insert(ph.clone(), name.to_owned());
        ph
    }
    /// `:vK` for a value.
    pub(super) fn value(&mut self, value: AttributeValue) -> String {
        let ph = format!(":v{}", self.next_value);
        self.next_value += 1;
        self.expr.values.insert(ph.clone(), value);
        ph
    }
    /// A fixed placeholder, e.g. `:now`, shared by every use in the expression.
    pub(super) fn fixed(&mut self, ph: &str, value: AttributeValue) -> String {
        self.expr.values.entry(ph.to_owned()).or_insert(value);
        ph.to_owned()
    }
    pub(super) fn finish(mut self, text: String) -> Expr {
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

pub(super) fn cond_text(cond: &Cond, now: i64, b: &mut ExprBuilder) -> String {
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

pub(super) fn is_key_attr(name: &str) -> bool {
    name == PK || name == SK
}

pub(super) fn join(conds: &[Cond], op: &str, now: i64, b: &mut ExprBuilder) -> String {
    let parts: Vec<String> = conds.iter().map(|c| cond_text(c, now, b)).collect();
    format!("({})", parts.join(op))
}

pub(super) fn now_ph(now: i64, b: &mut ExprBuilder) -> String {
    b.fixed(":now", AttributeValue::N(now.to_string()))
}

/// A live item is stored: present and not expired.
pub(super) fn live(now: i64, b: &mut ExprBuilder) -> String {
    let (pk, exp, now) = (b.name(PK), b.name(EXPIRES_AT), now_ph(now, b));
    format!("(attribute_exists({pk}) AND (attribute_not_exists({exp}) OR {exp} > {now}))")
}

/// No live item: never written, deleted, or expired (TTL deletion is lazy).
pub(super) fn not_live(now: i64, b: &mut ExprBuilder) -> String {
    let (pk, exp, now) = (b.name(PK), b.name(EXPIRES_AT), now_ph(now, b));
    format!("(attribute_not_exists({pk}) OR {exp} <= {now})")
}

/// DynamoDB has no literal true/false: a tautology or contradiction on the key attribute.
pub(super) fn constant(value: bool, b: &mut ExprBuilder) -> String {
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
    pub(super) fn values(pairs: &[(&str, AttributeValue)]) -> AvMap {
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
}
