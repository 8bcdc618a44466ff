//! The walk of a value through a compiled schema: boolean schemas, `$ref`, the in-place
//! applicators (`allOf`, `anyOf`, `oneOf`, `not`, `if`/`then`/`else`) and what each subschema
//! evaluated (the annotations `unevaluated*` need).

use super::{Invalid, JsonSchema, address, arrays, objects, uri, values};
use regex::Regex;
use serde_json::{Map, Value};

/// What the keywords of a schema evaluated in one value: the annotations that
/// `unevaluatedProperties` and `unevaluatedItems` read.
#[derive(Debug, Default)]
pub(super) struct Evaluated<'i> {
    /// Every property was evaluated (`additionalProperties`, `unevaluatedProperties`).
    pub all_properties: bool,
    /// Properties evaluated by name or pattern.
    pub properties: Vec<&'i str>,
    /// Every item was evaluated (`items`, `unevaluatedItems`).
    pub all_items: bool,
    /// Items `0..prefix` were evaluated (`prefixItems`).
    pub prefix: usize,
    /// Items `contains` matched.
    pub items: Vec<usize>,
}

impl<'i> Evaluated<'i> {
    /// Adds what a valid subschema evaluated in the same value.
    pub fn merge(&mut self, other: Evaluated<'i>) {
        self.all_properties |= other.all_properties;
        self.properties.extend(other.properties);
        self.all_items |= other.all_items;
        self.prefix = self.prefix.max(other.prefix);
        self.items.extend(other.items);
    }
}

/// One validation: the schema, where in the value it is, and the `$ref`s being followed.
pub(super) struct Walk<'s> {
    schema: &'s JsonSchema,
    /// JSON pointer of the current value.
    path: String,
    /// `($ref's schema object, value)` pairs being checked: meeting one again is a loop that
    /// checks nothing (`{"$ref": "#"}`), reported instead of followed.
    following: Vec<(usize, usize)>,
}

impl<'s> Walk<'s> {
    /// A walk of values through `schema`.
    pub fn new(schema: &'s JsonSchema) -> Self {
        Walk { schema, path: String::new(), following: Vec::new() }
    }

    /// Checks `instance` against `schema`, adding to `errors`; returns what it evaluated.
    pub fn check<'i>(&mut self, schema: &Value, instance: &'i Value, errors: &mut Vec<Invalid>) -> Evaluated<'i> {
        let mut evaluated = Evaluated::default();
        match schema {
            Value::Bool(false) => self.fail(errors, format!("False schema does not allow {}", shown(instance))),
            Value::Object(map) => {
                values::check(self, map, instance, errors);
                self.references(map, instance, errors, &mut evaluated);
                self.applicators(map, instance, errors, &mut evaluated);
                self.conditional(map, instance, errors, &mut evaluated);
                match instance {
                    Value::Array(items) => arrays::check(self, map, items, errors, &mut evaluated),
                    Value::Object(properties) => objects::check(self, map, instance, properties, errors, &mut evaluated),
                    _ => {}
                }
            }
            _ => {}
        }
        evaluated
    }

    /// Checks `instance` (at `segment` under the current value) against `schema`; whether it
    /// is valid.
    pub fn child(&mut self, segment: &str, schema: &Value, instance: &Value, errors: &mut Vec<Invalid>) -> bool {
        let (length, before) = (self.path.len(), errors.len());
        self.path.push('/');
        self.path.push_str(&uri::escape(segment));
        self.check(schema, instance, errors);
        self.path.truncate(length);
        errors.len() == before
    }

    /// Checks `instance` against `schema` on the side: what it evaluated when it is valid.
    pub fn try_check<'i>(&mut self, schema: &Value, instance: &'i Value) -> Option<Evaluated<'i>> {
        let mut scratch = Vec::new();
        let evaluated = self.check(schema, instance, &mut scratch);
        scratch.is_empty().then_some(evaluated)
    }

    /// Records a failure of the current value.
    pub fn fail(&self, errors: &mut Vec<Invalid>, message: String) {
        errors.push(Invalid { instance_path: self.path.clone(), message });
    }

    /// The compiled regex of a `pattern` or `patternProperties` key.
    pub fn regex(&self, source: &str) -> Option<&'s Regex> {
        self.schema.regexes.get(source)
    }

    fn references<'i>(&mut self, map: &Map<String, Value>, instance: &'i Value, errors: &mut Vec<Invalid>, evaluated: &mut Evaluated<'i>) {
        for (keyword, table) in [("$ref", &self.schema.refs), ("$dynamicRef", &self.schema.dynamic_refs)] {
            let Some(target) = table.get(&address(map)).and_then(|pointer| self.schema.root.pointer(pointer)) else { continue };
            let key = (address(map) + usize::from(keyword == "$dynamicRef"), std::ptr::from_ref(instance) as usize);
            if self.following.contains(&key) {
                let reference = map.get(keyword).map(Value::to_string).unwrap_or_default();
                self.fail(errors, format!("the schema's {keyword} {reference} loops back to itself without checking anything"));
                continue;
            }
            self.following.push(key);
            let before = errors.len();
            let inner = self.check(target, instance, errors);
            self.following.pop();
            if errors.len() == before {
                evaluated.merge(inner);
            }
        }
    }

    fn applicators<'i>(&mut self, map: &Map<String, Value>, instance: &'i Value, errors: &mut Vec<Invalid>, evaluated: &mut Evaluated<'i>) {
        for schema in map.get("allOf").and_then(Value::as_array).into_iter().flatten() {
            let before = errors.len();
            let inner = self.check(schema, instance, errors);
            if errors.len() == before {
                evaluated.merge(inner);
            }
        }
        for keyword in ["anyOf", "oneOf"] {
            let Some(branches) = map.get(keyword).and_then(Value::as_array) else { continue };
            let mut valid = 0;
            for branch in branches {
                if let Some(inner) = self.try_check(branch, instance) {
                    valid += 1;
                    evaluated.merge(inner);
                }
            }
            if valid == 0 {
                let message = format!("{} is not valid under any of the schemas listed in the '{keyword}' keyword", shown(instance));
                self.fail(errors, message);
            } else if valid > 1 && keyword == "oneOf" {
                let message = format!("{} is valid under more than one of the schemas listed in the 'oneOf' keyword", shown(instance));
                self.fail(errors, message);
            }
        }
        if let Some(not) = map.get("not")
            && self.try_check(not, instance).is_some()
        {
            self.fail(errors, format!("{} is not allowed for {}", shown(not), shown(instance)));
        }
    }

    fn conditional<'i>(&mut self, map: &Map<String, Value>, instance: &'i Value, errors: &mut Vec<Invalid>, evaluated: &mut Evaluated<'i>) {
        let Some(condition) = map.get("if") else { return };
        let branch = match self.try_check(condition, instance) {
            Some(inner) => {
                evaluated.merge(inner);
                map.get("then")
            }
            None => map.get("else"),
        };
        if let Some(branch) = branch {
            let before = errors.len();
            let inner = self.check(branch, instance, errors);
            if errors.len() == before {
                evaluated.merge(inner);
            }
        }
    }
}

/// A value as messages show it: compact JSON, cut after 120 characters.
pub(super) fn shown(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(120) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}
