//! The strategies of the record fields whose arbitrary values the wire cannot carry by design
//! (named in their `#[cfg_attr(test, proptest(strategy = ...))]`): used by the property tests
//! (`roundtrip_tests`), and apart from them so that the records do not depend on the tests.

use proptest::prelude::*;
use serde_json::Value;

/// A finite `f64`, of either sign, whole or not, subnormals included: JSON has no NaN or
/// infinity (serde_json writes them `null`).
pub(crate) fn finite() -> impl Strategy<Value = f64> {
    use proptest::num::f64::{NEGATIVE, NORMAL, POSITIVE, SUBNORMAL, ZERO};
    POSITIVE | NEGATIVE | NORMAL | SUBNORMAL | ZERO
}

/// [`finite`] or `None` (`null`).
pub(crate) fn finite_or_none() -> impl Strategy<Value = Option<f64>> {
    proptest::option::of(finite())
}

/// A `task.finished` cost as `records::exact_cost` keeps it, since the line is written so (a cost
/// in memory that `exact_cost` would change reads back changed, by design): at most ten
/// significant digits, which its ten-digit rounding leaves as they are.
pub(crate) fn cost() -> impl Strategy<Value = Option<f64>> {
    let kept = (-9_999_999_999i64..=9_999_999_999, 0u32..=24)
        .prop_map(|(digits, places)| format!("{digits}e-{places}").parse::<f64>().expect("a decimal number"));
    proptest::option::of(kept)
}

/// Small JSON values (serde_json's `Value` has no `Arbitrary`): null, booleans, integers
/// (both signs, past `i64::MAX` too), finite floats, strings, and arrays and objects of them, a
/// few levels deep.
pub(crate) fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        finite().prop_map(Value::from),
        any::<String>().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec((any::<String>(), inner), 0..4).prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

/// [`json`] or `None` (`null`), but never `Some(null)`: the wire writes both `Some(null)` and
/// `None` as `null`, which reads back `None` (see `a_null_answer_reads_back_as_no_answer`).
pub(crate) fn json_or_none() -> impl Strategy<Value = Option<Value>> {
    proptest::option::of(json().prop_filter("not null", |v| !v.is_null()))
}
