//! Recursive unknown-field rejection for the start-run body (Go `DisallowUnknownFields` parity).
//!
//! Types such as `TargetRef`, `RunModel` or `TurnPolicy` are shared with responses, stored run
//! input and host callbacks, where they must stay lenient. So instead of `deny_unknown_fields` on
//! them, `StartRunRequest` routes those fields through [`value`]/[`option`], which first walk the
//! JSON against the known key lists below and then decode with the ordinary lenient derive
//! (through [`crate::decode`], so a struct is still read only from a JSON object).

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::agents::SkillRef;
use crate::mcp::{RunMCPCredential, RunMCPServer, RunMCPTool};
use crate::model::{
    ModelControls, ModelCredential, ModelEndpoint, OpenRouterModelControls,
    OpenRouterProviderPreferences, RunModel,
};
use crate::runs::TurnPolicy;
use crate::target::{TargetDisplay, TargetRef};

/// A request type whose JSON keys can be checked before decoding.
pub(crate) trait Strict: DeserializeOwned + Default {
    /// Returns `Err(message)` naming the first unknown key found in `v` or below.
    fn check(v: &Value) -> Result<(), String>;
}

/// Checks the keys of `v` when it is an object; non-objects are left to serde's type errors.
fn keys<'a>(v: &'a Value, known: &[&str]) -> Result<Option<&'a Map<String, Value>>, String> {
    let Some(obj) = v.as_object() else {
        return Ok(None);
    };
    match obj.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(format!("unknown field {k:?}")),
        None => Ok(Some(obj)),
    }
}

/// Checks `obj[key]` as `T` when present.
fn nested<T: Strict>(obj: &Map<String, Value>, key: &str) -> Result<(), String> {
    match obj.get(key) {
        Some(v) => T::check(v).map_err(|e| format!("{e} in {key:?}")),
        None => Ok(()),
    }
}

/// Decodes a struct-valued field strictly; `null` gives the default, as in Go.
pub(crate) fn value<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Strict,
{
    let v = Value::deserialize(d)?;
    if v.is_null() {
        return Ok(T::default());
    }
    T::check(&v).map_err(D::Error::custom)?;
    crate::decode::from_value(v).map_err(D::Error::custom)
}

/// Decodes a pointer-valued (`Option`) field strictly.
pub(crate) fn option<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Strict,
{
    let v = Value::deserialize(d)?;
    if v.is_null() {
        return Ok(None);
    }
    T::check(&v).map_err(D::Error::custom)?;
    crate::decode::from_value(v)
        .map(Some)
        .map_err(D::Error::custom)
}

impl<T: Strict> Strict for Vec<T> {
    fn check(v: &Value) -> Result<(), String> {
        match v.as_array() {
            Some(items) => items
                .iter()
                .enumerate()
                .try_for_each(|(i, item)| T::check(item).map_err(|e| format!("{e} in item {i}"))),
            None => Ok(()),
        }
    }
}

impl Strict for TargetRef {
    fn check(v: &Value) -> Result<(), String> {
        match keys(v, &["type", "id", "display", "metadata"])? {
            Some(obj) => nested::<TargetDisplay>(obj, "display"),
            None => Ok(()),
        }
    }
}

impl Strict for TargetDisplay {
    fn check(v: &Value) -> Result<(), String> {
        keys(v, &["title", "url"]).map(drop)
    }
}

impl Strict for RunModel {
    fn check(v: &Value) -> Result<(), String> {
        match keys(v, &["provider", "model", "endpoint", "controls"])? {
            Some(obj) => {
                nested::<ModelEndpoint>(obj, "endpoint")?;
                nested::<ModelControls>(obj, "controls")
            }
            None => Ok(()),
        }
    }
}

impl Strict for ModelEndpoint {
    fn check(v: &Value) -> Result<(), String> {
        keys(v, &["id", "base_url", "auth_mode"]).map(drop)
    }
}

impl Strict for ModelControls {
    fn check(v: &Value) -> Result<(), String> {
        match keys(v, &["reasoning_effort", "service_tier", "openrouter"])? {
            Some(obj) => nested::<OpenRouterModelControls>(obj, "openrouter"),
            None => Ok(()),
        }
    }
}

impl Strict for OpenRouterModelControls {
    fn check(v: &Value) -> Result<(), String> {
        match keys(v, &["provider"])? {
            Some(obj) => nested::<OpenRouterProviderPreferences>(obj, "provider"),
            None => Ok(()),
        }
    }
}

impl Strict for OpenRouterProviderPreferences {
    fn check(v: &Value) -> Result<(), String> {
        keys(v, &["quantizations"]).map(drop)
    }
}

impl Strict for ModelCredential {
    fn check(v: &Value) -> Result<(), String> {
        let known = [
            "type",
            "api_key",
            "access_token",
            "expires_at",
            "connection_id",
            "account_id",
        ];
        keys(v, &known).map(drop)
    }
}

impl Strict for TurnPolicy {
    fn check(v: &Value) -> Result<(), String> {
        let known = [
            "mode",
            "idle_timeout_seconds",
            "expired_resume_strategy",
            "completion_mode",
            "max_completion_corrections",
        ];
        keys(v, &known).map(drop)
    }
}

impl Strict for RunMCPServer {
    fn check(v: &Value) -> Result<(), String> {
        let known = [
            "server_id",
            "server_name",
            "transport",
            "url",
            "tools",
            "skills",
            "credential",
        ];
        match keys(v, &known)? {
            Some(obj) => {
                nested::<Vec<RunMCPTool>>(obj, "tools")?;
                nested::<Vec<SkillRef>>(obj, "skills")?;
                nested::<RunMCPCredential>(obj, "credential")
            }
            None => Ok(()),
        }
    }
}

impl Strict for RunMCPTool {
    fn check(v: &Value) -> Result<(), String> {
        keys(v, &["name", "access"]).map(drop)
    }
}

impl Strict for SkillRef {
    fn check(v: &Value) -> Result<(), String> {
        keys(v, &["skill_id", "key", "version", "version_key", "config"]).map(drop)
    }
}

impl Strict for RunMCPCredential {
    fn check(v: &Value) -> Result<(), String> {
        keys(v, &["type", "access_token", "headers", "expires_at"]).map(drop)
    }
}

#[cfg(test)]
mod tests {
    //! Drift guard: a fully populated value of every strict type passes its own key check, so a
    //! field added to a struct but not to its key list fails here instead of rejecting clients.

    use std::collections::BTreeMap;

    use serde::Serialize;
    use serde_json::{json, Map, Value};

    use super::*;

    fn passes<T: Strict + Serialize>(value: &T) {
        let v = serde_json::to_value(value).expect("encode");
        assert!(
            v.as_object().is_some_and(|o| !o.is_empty()),
            "populate every field: {v}"
        );
        T::check(&v).unwrap_or_else(|e| panic!("{}: {e}", std::any::type_name::<T>()));
    }

    fn map() -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("k".into(), json!("v"));
        m
    }

    #[test]
    fn populated_values_pass_their_own_check() {
        let t = chrono::DateTime::UNIX_EPOCH;
        let target = TargetRef {
            target_type: "t".into(),
            id: "1".into(),
            display: Some(TargetDisplay {
                title: "x".into(),
                url: "u".into(),
            }),
            metadata: map(),
        };
        passes(&target);
        let controls = ModelControls {
            reasoning_effort: Some("low".into()),
            service_tier: Some("fast".into()),
            openrouter: Some(OpenRouterModelControls {
                provider: Some(OpenRouterProviderPreferences {
                    quantizations: vec!["fp8".into()],
                }),
            }),
        };
        passes(&controls);
        passes(&RunModel {
            provider: "p".into(),
            model: "m".into(),
            endpoint: Some(ModelEndpoint {
                id: "i".into(),
                base_url: "b".into(),
                auth_mode: "none".into(),
            }),
            controls: Some(controls),
        });
        passes(&ModelCredential {
            credential_type: "oauth".into(),
            api_key: "k".into(),
            access_token: "a".into(),
            expires_at: Some(t),
            connection_id: "c".into(),
            account_id: "acct".into(),
        });
        passes(&TurnPolicy {
            mode: "m".into(),
            idle_timeout_seconds: 1,
            expired_resume_strategy: "s".into(),
            completion_mode: "c".into(),
            max_completion_corrections: 1,
        });
        passes(&RunMCPServer {
            server_id: "s".into(),
            server_name: "n".into(),
            transport: "streamable_http".into(),
            url: "https://x".into(),
            tools: vec![RunMCPTool {
                name: "t".into(),
                access: "read".into(),
            }],
            skills: vec![SkillRef {
                skill_id: "i".into(),
                key: "k".into(),
                version: "1".into(),
                version_key: "vk".into(),
                config: Some(json!({})),
            }],
            credential: Some(RunMCPCredential {
                credential_type: "headers".into(),
                access_token: "a".into(),
                headers: BTreeMap::from([("h".to_owned(), "v".to_owned())]),
                expires_at: Some(t),
            }),
        });
    }
}
