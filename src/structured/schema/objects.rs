//! Keywords on objects: `minProperties`, `maxProperties`, `required`, `dependentRequired`,
//! `dependentSchemas` (and draft-07's `dependencies`), `propertyNames`, `properties`,
//! `patternProperties`, `additionalProperties` and `unevaluatedProperties`.

use super::check::count;
use super::validate::{Evaluated, Walk, shown};
use super::{Invalid, Map};
use serde_json::Value;

/// Checks the object keywords of `map` on `instance` (whose properties are `object`),
/// recording what they evaluated.
pub(super) fn check<'i>(
    walk: &mut Walk<'_>,
    map: &Map<String, Value>,
    instance: &'i Value,
    object: &'i Map<String, Value>,
    errors: &mut Vec<Invalid>,
    evaluated: &mut Evaluated<'i>,
) {
    let plural = |n: u64| if n == 1 { "y" } else { "ies" };
    let length = object.len() as u64;
    if let Some(max) = map.get("maxProperties").and_then(count)
        && length > max
    {
        walk.fail(errors, format!("{} has more than {max} propert{}", shown(instance), plural(max)));
    }
    if let Some(min) = map.get("minProperties").and_then(count)
        && length < min
    {
        walk.fail(errors, format!("{} has less than {min} propert{}", shown(instance), plural(min)));
    }
    require(walk, object, map.get("required"), errors);
    dependencies(walk, map, instance, object, errors, evaluated);
    if let Some(schema) = map.get("propertyNames") {
        for name in object.keys() {
            walk.check(schema, &Value::from(name.as_str()), errors);
        }
    }
    named(walk, map, object, errors, evaluated);
    if let Some(schema) = map.get("unevaluatedProperties")
        && !evaluated.all_properties
    {
        let rest: Vec<(&String, &Value)> = object.iter().filter(|(k, _)| !evaluated.properties.contains(&k.as_str())).collect();
        rest_properties(walk, "Unevaluated", schema, &rest, errors);
        evaluated.all_properties = true;
    }
}

/// `required` (and each list of `dependentRequired`): a message per missing name.
fn require(walk: &Walk<'_>, object: &Map<String, Value>, names: Option<&Value>, errors: &mut Vec<Invalid>) {
    for name in names.and_then(Value::as_array).into_iter().flatten() {
        if name.as_str().is_some_and(|n| !object.contains_key(n)) {
            walk.fail(errors, format!("{name} is a required property"));
        }
    }
}

/// `dependentRequired`, `dependentSchemas` and `dependencies`, for the properties present.
fn dependencies<'i>(
    walk: &mut Walk<'_>,
    map: &Map<String, Value>,
    instance: &'i Value,
    object: &'i Map<String, Value>,
    errors: &mut Vec<Invalid>,
    evaluated: &mut Evaluated<'i>,
) {
    for keyword in ["dependentRequired", "dependentSchemas", "dependencies"] {
        let Some(dependents) = map.get(keyword).and_then(Value::as_object) else { continue };
        for (_, dependent) in dependents.iter().filter(|(name, _)| object.contains_key(*name)) {
            if dependent.is_array() {
                require(walk, object, Some(dependent), errors);
                continue;
            }
            let before = errors.len();
            let inner = walk.check(dependent, instance, errors);
            if errors.len() == before {
                evaluated.merge(inner);
            }
        }
    }
}

/// `properties`, `patternProperties` and `additionalProperties`.
fn named<'i>(
    walk: &mut Walk<'_>,
    map: &Map<String, Value>,
    object: &'i Map<String, Value>,
    errors: &mut Vec<Invalid>,
    evaluated: &mut Evaluated<'i>,
) {
    let properties = map.get("properties").and_then(Value::as_object);
    let patterns: Vec<(&regex::Regex, &Value)> = map
        .get("patternProperties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(source, schema)| walk.regex(source).map(|regex| (regex, schema)))
        .collect();
    let mut additional = Vec::new();
    for (name, value) in object {
        let mut matched = false;
        if let Some(schema) = properties.and_then(|p| p.get(name)) {
            walk.child(name, schema, value, errors);
            matched = true;
        }
        for (_, schema) in patterns.iter().filter(|(regex, _)| regex.is_match(name)) {
            walk.child(name, schema, value, errors);
            matched = true;
        }
        if matched {
            evaluated.properties.push(name);
        } else {
            additional.push((name, value));
        }
    }
    if let Some(schema) = map.get("additionalProperties") {
        rest_properties(walk, "Additional", schema, &additional, errors);
        evaluated.all_properties = true;
    }
}

/// Checks `rest` against `schema`; a `false` schema is one message naming them all.
fn rest_properties(walk: &mut Walk<'_>, kind: &str, schema: &Value, rest: &[(&String, &Value)], errors: &mut Vec<Invalid>) {
    if schema == &Value::Bool(false) {
        if !rest.is_empty() {
            let unexpected = rest.iter().map(|(name, _)| format!("'{name}'")).collect::<Vec<_>>().join(", ");
            let verb = if rest.len() == 1 { "was" } else { "were" };
            walk.fail(errors, format!("{kind} properties are not allowed ({unexpected} {verb} unexpected)"));
        }
        return;
    }
    for (name, value) in rest {
        walk.child(name, schema, value, errors);
    }
}
