//! Keywords on any value: `type`, `enum`, `const`, the number keywords and the string keywords;
//! and JSON equality (`1 == 1.0`), which `enum`, `const` and `uniqueItems` use.

use super::check::count;
use super::validate::{Walk, shown};
use super::{Invalid, Map};
use serde_json::{Number, Value};
use std::cmp::Ordering;

/// Checks the keywords of `map` that look at `instance` itself.
pub(super) fn check(walk: &Walk<'_>, map: &Map<String, Value>, instance: &Value, errors: &mut Vec<Invalid>) {
    if let Some(types) = map.get("type") {
        check_type(walk, types, instance, errors);
    }
    if let Some(options) = map.get("enum").and_then(Value::as_array)
        && !options.iter().any(|option| equal(option, instance))
    {
        walk.fail(errors, enum_message(instance, options));
    }
    if let Some(expected) = map.get("const")
        && !equal(expected, instance)
    {
        walk.fail(errors, format!("{} was expected", shown(expected)));
    }
    match instance {
        Value::Number(number) => check_number(walk, map, number, errors),
        Value::String(text) => check_string(walk, map, text, errors),
        _ => {}
    }
}

fn check_type(walk: &Walk<'_>, types: &Value, instance: &Value, errors: &mut Vec<Invalid>) {
    match types {
        Value::String(name) if !has_type(name, instance) => walk.fail(errors, format!("{} is not of type \"{name}\"", shown(instance))),
        Value::Array(names) if !names.iter().filter_map(Value::as_str).any(|name| has_type(name, instance)) => {
            let listed = names.iter().map(Value::to_string).collect::<Vec<_>>().join(", ");
            walk.fail(errors, format!("{} is not of types {listed}", shown(instance)));
        }
        _ => {}
    }
}

/// Whether `instance` is of the JSON Schema type `name` (`1.0` is an integer).
fn has_type(name: &str, instance: &Value) -> bool {
    match (name, instance) {
        ("integer", Value::Number(n)) => exact(n).is_some() || n.as_f64().is_some_and(|f| f.fract() == 0.0),
        ("number", Value::Number(_)) | ("null", Value::Null) | ("boolean", Value::Bool(_)) => true,
        ("string", Value::String(_)) | ("array", Value::Array(_)) | ("object", Value::Object(_)) => true,
        _ => false,
    }
}

/// `"x" is not one of "a", "b" or "c"` (the first two and a count when there are more).
fn enum_message(instance: &Value, options: &[Value]) -> String {
    let mut shown_options: Vec<String> = options.iter().take(if options.len() > 3 { 2 } else { 3 }).map(shown).collect();
    let tail = match options.len() {
        0 => "nothing".to_string(),
        n if n > 3 => format!("{} other candidates", n - 2),
        _ => shown_options.pop().unwrap_or_default(),
    };
    if shown_options.is_empty() {
        format!("{} is not one of {tail}", shown(instance))
    } else {
        format!("{} is not one of {} or {tail}", shown(instance), shown_options.join(", "))
    }
}

fn check_number(walk: &Walk<'_>, map: &Map<String, Value>, number: &Number, errors: &mut Vec<Invalid>) {
    let limit = |key: &str| map.get(key).and_then(|v| v.as_number().map(|n| (v, n)));
    let draft4_exclusive = |key: &str| map.get(key) == Some(&Value::Bool(true));
    if let Some((shown_limit, min)) = limit("minimum") {
        match compare(number, min) {
            Ordering::Less => walk.fail(errors, format!("{number} is less than the minimum of {shown_limit}")),
            Ordering::Equal if draft4_exclusive("exclusiveMinimum") => {
                walk.fail(errors, format!("{number} is less than or equal to the minimum of {shown_limit}"));
            }
            _ => {}
        }
    }
    if let Some((shown_limit, max)) = limit("maximum") {
        match compare(number, max) {
            Ordering::Greater => walk.fail(errors, format!("{number} is greater than the maximum of {shown_limit}")),
            Ordering::Equal if draft4_exclusive("exclusiveMaximum") => {
                walk.fail(errors, format!("{number} is greater than or equal to the maximum of {shown_limit}"));
            }
            _ => {}
        }
    }
    if let Some((shown_limit, min)) = limit("exclusiveMinimum")
        && compare(number, min) != Ordering::Greater
    {
        walk.fail(errors, format!("{number} is less than or equal to the minimum of {shown_limit}"));
    }
    if let Some((shown_limit, max)) = limit("exclusiveMaximum")
        && compare(number, max) != Ordering::Less
    {
        walk.fail(errors, format!("{number} is greater than or equal to the maximum of {shown_limit}"));
    }
    if let Some((shown_factor, factor)) = limit("multipleOf")
        && !is_multiple(number, factor)
    {
        walk.fail(errors, format!("{number} is not a multiple of {shown_factor}"));
    }
}

fn check_string(walk: &Walk<'_>, map: &Map<String, Value>, text: &str, errors: &mut Vec<Invalid>) {
    let length = text.chars().count() as u64;
    let plural = |n: u64| if n == 1 { "" } else { "s" };
    if let Some(max) = map.get("maxLength").and_then(count)
        && length > max
    {
        walk.fail(errors, format!("{} is longer than {max} character{}", shown(&Value::from(text)), plural(max)));
    }
    if let Some(min) = map.get("minLength").and_then(count)
        && length < min
    {
        walk.fail(errors, format!("{} is shorter than {min} character{}", shown(&Value::from(text)), plural(min)));
    }
    if let Some(source) = map.get("pattern").and_then(Value::as_str)
        && walk.regex(source).is_some_and(|regex| !regex.is_match(text))
    {
        walk.fail(errors, format!("{} does not match {}", shown(&Value::from(text)), Value::from(source)));
    }
}

/// The number as an integer when it is one (`3`, `3.0`), exactly.
fn exact(number: &Number) -> Option<i128> {
    let integer = number.as_i64().map(i128::from).or_else(|| number.as_u64().map(i128::from));
    integer.or_else(|| number.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 1e38).map(|f| f as i128))
}

/// Numbers compared exactly when both are integers, as `f64` otherwise.
fn compare(a: &Number, b: &Number) -> Ordering {
    match (exact(a), exact(b)) {
        (Some(a), Some(b)) => a.cmp(&b),
        _ => a.as_f64().unwrap_or(f64::NAN).partial_cmp(&b.as_f64().unwrap_or(f64::NAN)).unwrap_or(Ordering::Equal),
    }
}

/// Whether `number` is a multiple of `factor`: exactly for integers; for other numbers the
/// quotient must be an integer to within a few units in the last place (`0.0075` is a
/// multiple of `0.0001`).
fn is_multiple(number: &Number, factor: &Number) -> bool {
    if let (Some(n), Some(f)) = (exact(number), exact(factor))
        && f != 0
    {
        return n % f == 0;
    }
    let quotient = number.as_f64().unwrap_or(f64::NAN) / factor.as_f64().unwrap_or(f64::NAN);
    quotient.is_finite() && (quotient - quotient.round()).abs() <= quotient.abs().max(1.0) * f64::EPSILON * 8.0
}

/// JSON equality: numbers by value (`1 == 1.0`), arrays item by item, objects key by key.
pub(super) fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => compare(a, b) == Ordering::Equal,
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(a, b)| equal(a, b)),
        (Value::Object(a), Value::Object(b)) => a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| equal(v, w))),
        _ => a == b,
    }
}
