//! A walker over decoded JSON that reads typed fields, reports wrong types, missing, unknown and not yet supported keys with their paths, and never stops at the first problem.

use std::collections::BTreeMap;
use std::time::Duration;

use ar_core::secret::Secret;
use serde_json::{Map, Value};

use super::keys::{Section, SECTIONS};
use crate::support::Support;
use crate::Diagnostic;

/// Shared state of one validation pass.
pub(crate) struct Ctx<'a> {
    pub lookup: &'a dyn Fn(&str) -> Option<String>,
    pub diagnostics: Vec<Diagnostic>,
}

impl Ctx<'_> {
    pub fn report(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.diagnostics.push(Diagnostic::new(path, message));
    }
}

/// Joins a parent path and a key (`apps[0]` + `url` → `apps[0].url`).
pub(crate) fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Whether a value configures something: null, an empty list and an empty mapping do not.
fn configures_something(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
        _ => true,
    }
}

/// One mapping of the configuration with the keys its [`Section`] declares.
pub(crate) struct Obj<'v> {
    pub path: String,
    map: &'v Map<String, Value>,
    section: &'static Section,
}

impl<'v> Obj<'v> {
    /// Wraps `value` when it is a mapping (else reports), reports every key the section does
    /// not declare, and refuses every key of a capability not supported yet that configures
    /// something.
    pub fn new(
        ctx: &mut Ctx<'_>,
        path: String,
        value: &'v Value,
        section: &'static Section,
    ) -> Option<Obj<'v>> {
        debug_assert!(
            SECTIONS.contains(&section),
            "section {:?} is not listed in SECTIONS",
            section.path
        );
        let Value::Object(map) = value else {
            ctx.report(
                path,
                format!("expected a mapping, got {}", type_name(value)),
            );
            return None;
        };
        for (name, item) in map {
            match section.key(name).map(|key| key.support) {
                None => {
                    let known = section.names();
                    let message = match suggest(name, &known) {
                        Some(close) => format!("unknown key (did you mean `{close}`?)"),
                        None => format!("unknown key (expected one of: {})", known.join(", ")),
                    };
                    ctx.report(child(&path, name), message);
                }
                Some(Support::NotYet(capability)) if configures_something(item) => {
                    ctx.diagnostics.push(capability.refusal(child(&path, name)));
                }
                Some(_) => {}
            }
        }
        Some(Obj { path, map, section })
    }

    pub fn path_of(&self, key: &str) -> String {
        child(&self.path, key)
    }

    /// The value of `key`, `None` when absent or null.
    pub fn value(&self, key: &str) -> Option<&'v Value> {
        debug_assert!(
            self.section.key(key).is_some(),
            "key {key} read but not declared in {:?}",
            self.section.path
        );
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub fn has(&self, key: &str) -> bool {
        self.value(key).is_some()
    }

    /// A trimmed string; blank counts as absent.
    pub fn string(&self, ctx: &mut Ctx<'_>, key: &str) -> Option<String> {
        match self.value(key)? {
            Value::String(s) => Some(s.trim().to_string()).filter(|s| !s.is_empty()),
            other => {
                ctx.report(
                    self.path_of(key),
                    format!("expected a string, got {}", type_name(other)),
                );
                None
            }
        }
    }

    /// Like [`Obj::string`], reporting when missing.
    pub fn required_string(&self, ctx: &mut Ctx<'_>, key: &str) -> Option<String> {
        let present = self.has(key);
        let value = self.string(ctx, key);
        if value.is_none() && !matches!(self.value(key), Some(v) if !v.is_string()) {
            let message = if present {
                "must not be empty"
            } else {
                "is required"
            };
            ctx.report(self.path_of(key), message);
        }
        value
    }

    pub fn bool(&self, ctx: &mut Ctx<'_>, key: &str) -> Option<bool> {
        match self.value(key)? {
            Value::Bool(b) => Some(*b),
            other => {
                ctx.report(
                    self.path_of(key),
                    format!("expected true or false, got {}", type_name(other)),
                );
                None
            }
        }
    }

    /// A list of strings; each item trimmed, blank items reported.
    pub fn string_list(&self, ctx: &mut Ctx<'_>, key: &str) -> Vec<String> {
        let mut out = Vec::new();
        for (path, item) in self.list(ctx, key) {
            match item {
                Value::String(s) if !s.trim().is_empty() => out.push(s.trim().to_string()),
                Value::String(_) => ctx.report(path, "must not be empty"),
                other => ctx.report(path, format!("expected a string, got {}", type_name(other))),
            }
        }
        out
    }

    /// The items of a list with their paths (`key[i]`).
    pub fn list(&self, ctx: &mut Ctx<'_>, key: &str) -> Vec<(String, &'v Value)> {
        match self.value(key) {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| (format!("{}[{i}]", self.path_of(key)), item))
                .collect(),
            Some(other) => {
                ctx.report(
                    self.path_of(key),
                    format!("expected a list, got {}", type_name(other)),
                );
                Vec::new()
            }
        }
    }

    /// A nested mapping.
    pub fn object(
        &self,
        ctx: &mut Ctx<'_>,
        key: &str,
        section: &'static Section,
    ) -> Option<Obj<'v>> {
        let value = self.value(key)?;
        Obj::new(ctx, self.path_of(key), value, section)
    }

    /// A mapping of string to string (stdio `env`).
    pub fn string_map(&self, ctx: &mut Ctx<'_>, key: &str) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        match self.value(key) {
            None => {}
            Some(Value::Object(map)) => {
                for (name, value) in map {
                    match value {
                        Value::String(s) => {
                            out.insert(name.clone(), s.clone());
                        }
                        Value::Number(n) => {
                            out.insert(name.clone(), n.to_string());
                        }
                        Value::Bool(b) => {
                            out.insert(name.clone(), b.to_string());
                        }
                        other => ctx.report(
                            child(&self.path_of(key), name),
                            format!("expected a string, got {}", type_name(other)),
                        ),
                    }
                }
            }
            Some(other) => ctx.report(
                self.path_of(key),
                format!("expected a mapping, got {}", type_name(other)),
            ),
        }
        out
    }

    /// A duration: Go-style text (`30s`, `5m`, `1h30m`, `250ms`) or a number of seconds.
    pub fn duration(&self, ctx: &mut Ctx<'_>, key: &str) -> Option<Duration> {
        let parsed = match self.value(key)? {
            Value::Number(n) => n
                .as_f64()
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map(Duration::from_secs_f64)
                .ok_or_else(|| "must be a non-negative number of seconds".to_string()),
            Value::String(s) => parse_duration(s),
            other => Err(format!(
                "expected a duration such as \"30s\", got {}",
                type_name(other)
            )),
        };
        match parsed {
            Ok(duration) => Some(duration),
            Err(message) => {
                ctx.report(self.path_of(key), message);
                None
            }
        }
    }

    /// A secret given inline (`key`) or through an environment variable (`env_key`).
    /// Both at once, or a named variable that is unset, are reported.
    pub fn secret(&self, ctx: &mut Ctx<'_>, key: &str, env_key: &str) -> Option<Secret> {
        let inline = self.string(ctx, key);
        let env_name = self.string(ctx, env_key);
        match (inline, env_name) {
            (Some(_), Some(_)) => {
                ctx.report(
                    self.path_of(env_key),
                    format!("set either {key} or {env_key}, not both"),
                );
                None
            }
            (Some(value), None) => Some(Secret::new(value)),
            (None, Some(name)) => match (ctx.lookup)(&name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
            {
                Some(value) => Some(Secret::new(value)),
                None => {
                    ctx.report(
                        self.path_of(env_key),
                        format!("environment variable {name} is not set"),
                    );
                    None
                }
            },
            (None, None) => None,
        }
    }
}

/// Parses `1h30m`, `45s`, `250ms`, `1.5s` (units ns, us, µs, ms, s, m, h) or bare seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let bad = || format!("{text:?} is not a duration (examples: 30s, 5m, 1h30m, 250ms)");
    if text.is_empty() {
        return Err(bad());
    }
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    let mut total = 0f64;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return Err(bad());
        }
        let number: f64 = rest[..number_len].parse().map_err(|_| bad())?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total += number * scale;
    }
    Ok(Duration::from_secs_f64(total))
}

/// The closest known key within edit distance 2, for "did you mean".
fn suggest(key: &str, known: &[&'static str]) -> Option<&'static str> {
    known
        .iter()
        .map(|candidate| (edit_distance(key, candidate), *candidate))
        .filter(|(distance, _)| *distance <= 2)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            current[j + 1] = (previous[j] + cost)
                .min(previous[j + 1] + 1)
                .min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("45").unwrap(), Duration::from_secs(45));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5 minutes").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn suggestions() {
        assert_eq!(
            suggest("evnet_callbacks", &["event_callbacks", "app_id"]),
            Some("event_callbacks")
        );
        assert_eq!(suggest("zzz", &["event_callbacks", "app_id"]), None);
    }
}
