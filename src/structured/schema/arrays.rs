//! Keywords on arrays: `minItems`, `maxItems`, `uniqueItems`, `prefixItems` and `items` (or
//! draft-07's array-form `items` with `additionalItems`), `contains` with `minContains`/
//! `maxContains`, and `unevaluatedItems`.

use super::check::count;
use super::validate::{Evaluated, Walk, shown};
use super::values::equal;
use super::{Invalid, Map};
use serde_json::Value;

/// Checks the array keywords of `map` on `items`, recording what they evaluated.
pub(super) fn check<'i>(
    walk: &mut Walk<'_>,
    map: &Map<String, Value>,
    items: &'i [Value],
    errors: &mut Vec<Invalid>,
    evaluated: &mut Evaluated<'i>,
) {
    let instance = || shown(&Value::Array(items.to_vec()));
    let plural = |n: u64| if n == 1 { "" } else { "s" };
    let length = items.len() as u64;
    if let Some(max) = map.get("maxItems").and_then(count)
        && length > max
    {
        walk.fail(errors, format!("{} has more than {max} item{}", instance(), plural(max)));
    }
    if let Some(min) = map.get("minItems").and_then(count)
        && length < min
    {
        walk.fail(errors, format!("{} has less than {min} item{}", instance(), plural(min)));
    }
    if map.get("uniqueItems") == Some(&Value::Bool(true))
        && items.iter().enumerate().any(|(i, a)| items[i + 1..].iter().any(|b| equal(a, b)))
    {
        walk.fail(errors, format!("{} has non-unique elements", instance()));
    }
    positional(walk, map, items, errors, evaluated);
    contains(walk, map, items, errors, evaluated);
    if let Some(schema) = map.get("unevaluatedItems")
        && !evaluated.all_items
    {
        let rest = (evaluated.prefix..items.len()).filter(|i| !evaluated.items.contains(i)).collect::<Vec<_>>();
        rest_items(walk, "Unevaluated", schema, items, &rest, errors);
        evaluated.all_items = true;
    }
}

/// `prefixItems` and `items` (in either draft's spelling).
fn positional<'i>(
    walk: &mut Walk<'_>,
    map: &Map<String, Value>,
    items: &'i [Value],
    errors: &mut Vec<Invalid>,
    evaluated: &mut Evaluated<'i>,
) {
    let draft7_tuple = map.get("items").and_then(Value::as_array);
    let prefix = map.get("prefixItems").and_then(Value::as_array).or(draft7_tuple);
    let rest = if draft7_tuple.is_some() { map.get("additionalItems") } else { map.get("items") };
    let prefix = prefix.map_or(&[][..], Vec::as_slice);
    for (i, (schema, item)) in prefix.iter().zip(items).enumerate() {
        walk.child(&i.to_string(), schema, item, errors);
    }
    evaluated.prefix = evaluated.prefix.max(prefix.len().min(items.len()));
    if let Some(schema) = rest {
        rest_items(walk, "Additional", schema, items, &(prefix.len()..items.len()).collect::<Vec<_>>(), errors);
        evaluated.all_items = true;
    }
}

/// Checks the items at `indexes` against `schema`; a `false` schema is one message for all.
fn rest_items(walk: &mut Walk<'_>, kind: &str, schema: &Value, items: &[Value], indexes: &[usize], errors: &mut Vec<Invalid>) {
    if schema == &Value::Bool(false) {
        if !indexes.is_empty() {
            let unexpected = indexes.iter().map(|&i| shown(&items[i])).collect::<Vec<_>>().join(", ");
            let verb = if indexes.len() == 1 { "was" } else { "were" };
            walk.fail(errors, format!("{kind} items are not allowed ({unexpected} {verb} unexpected)"));
        }
        return;
    }
    for &i in indexes {
        walk.child(&i.to_string(), schema, &items[i], errors);
    }
}

/// `contains`, `minContains` and `maxContains`.
fn contains<'i>(
    walk: &mut Walk<'_>,
    map: &Map<String, Value>,
    items: &'i [Value],
    errors: &mut Vec<Invalid>,
    evaluated: &mut Evaluated<'i>,
) {
    let Some(schema) = map.get("contains") else { return };
    let matching: Vec<usize> = (0..items.len()).filter(|&i| walk.try_check(schema, &items[i]).is_some()).collect();
    let found = matching.len() as u64;
    evaluated.items.extend(&matching);
    let min = map.get("minContains").and_then(count).unwrap_or(1);
    let instance = || shown(&Value::Array(items.to_vec()));
    if found < min {
        let message = if found == 0 {
            format!("None of {} are valid under the given schema", instance())
        } else {
            format!("{} has {found} item(s) valid under the 'contains' schema, fewer than the minContains of {min}", instance())
        };
        walk.fail(errors, message);
    }
    if let Some(max) = map.get("maxContains").and_then(count)
        && found > max
    {
        walk.fail(
            errors,
            format!("{} has {found} item(s) valid under the 'contains' schema, more than the maxContains of {max}", instance()),
        );
    }
}
