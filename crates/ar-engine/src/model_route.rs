//! Model routes: validation of the model a run asks for, and resolution to a concrete endpoint.

use ar_core::model::{normalize_service_tier, ModelRoute, DEMO_PROVIDER};
use ar_core::run::ModelEndpoint;
use ar_core::secret::Secret;
use ar_core::RunModel;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::{AppPolicy, EngineConfig};
use crate::error::{EngineError, EngineResult};

/// The ChatGPT subscription provider: run credentials only (an OAuth access token renewed
/// through the app's callback), served when the deployment enables it.
pub const CHATGPT: &str = "openai_chatgpt";

/// Providers the contract knows.
pub const KNOWN_PROVIDERS: &[&str] = &[
    "openai",
    "openai_compatible",
    "anthropic",
    "openrouter",
    "openrouter_responses",
    "openai_chatgpt",
];

const REASONING_EFFORTS: &[&str] = &["none", "minimal", "low", "medium", "high", "xhigh"];
/// Canonical service tiers (the SDK's `ServiceTiers`; `default` and `priority` are aliases).
const SERVICE_TIERS: &[&str] = &["standard", "fast", "flex", "auto"];

/// A run credential as received (request-only; sealed before it is stored).
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct RunCredential {
    #[serde(rename = "type")]
    pub credential_type: String,
    #[serde(default)]
    pub api_key: String,
    #[serde(default)]
    pub access_token: String,
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub connection_id: String,
    #[serde(default)]
    pub account_id: String,
}

impl std::fmt::Debug for RunCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunCredential")
            .field("type", &self.credential_type)
            .field("api_key", &"[redacted]")
            .field("access_token", &"[redacted]")
            .field("expires_at", &self.expires_at)
            .field("connection_id", &self.connection_id)
            .finish()
    }
}

impl RunCredential {
    /// The secret a request carries, if any.
    pub fn bearer(&self) -> Option<Secret> {
        match self.credential_type.as_str() {
            "api_key" => Some(Secret::new(self.api_key.clone())),
            "oauth" => Some(Secret::new(self.access_token.clone())),
            _ => None,
        }
    }

    pub fn validate(&self, now: DateTime<Utc>) -> EngineResult<()> {
        match self.credential_type.as_str() {
            "api_key" if self.api_key.trim().is_empty() => Err(EngineError::invalid(
                "model_credential.api_key is required for type api_key",
            )),
            "oauth" if self.access_token.trim().is_empty() => Err(EngineError::invalid(
                "model_credential.access_token is required for type oauth",
            )),
            "api_key" | "oauth" | "none" => {
                if self.credential_type == "none"
                    && (!self.api_key.is_empty() || !self.access_token.is_empty())
                {
                    return Err(EngineError::invalid(
                        "model_credential of type none must not carry a secret",
                    ));
                }
                if has_expired(self.expires_at, now) {
                    return Err(EngineError::invalid("model_credential is expired"));
                }
                Ok(())
            }
            "" => Err(EngineError::invalid("model_credential.type is required")),
            other => Err(EngineError::invalid(format!(
                "invalid model_credential.type {other:?}: expected one of api_key, none, oauth"
            ))),
        }
    }
}

impl RunCredential {
    /// The original's per-provider rules (`modelauth.Validate`): sizes, no line breaks or NULs,
    /// an API key alone for the fixed providers, an expiring OAuth token bound to a connection
    /// and an account for `openai_chatgpt`. `openai_compatible` follows its endpoint's auth mode
    /// (checked with the endpoint).
    pub fn validate_for(&self, provider: &str) -> EngineResult<()> {
        if self.api_key.len() + self.access_token.len() > 65_536
            || self.connection_id.len() > 512
            || self.account_id.len() > 512
        {
            return Err(EngineError::invalid("model_credential exceeds size limit"));
        }
        let fields = [
            &self.api_key,
            &self.access_token,
            &self.connection_id,
            &self.account_id,
        ];
        if fields.iter().any(|f| f.contains(['\r', '\n', '\0'])) {
            return Err(EngineError::invalid(
                "model_credential fields must not contain line breaks or NUL",
            ));
        }
        match provider {
            "openai" | "anthropic" | "openrouter" | "openrouter_responses"
                if self.credential_type != "api_key"
                    || !self.access_token.is_empty()
                    || !self.account_id.is_empty() =>
            {
                Err(EngineError::invalid(format!(
                    "provider {provider} requires an api_key credential (no access_token or account_id)"
                )))
            }
            "openai_chatgpt"
                if self.credential_type != "oauth"
                    || !self.api_key.is_empty()
                    || self.connection_id.is_empty()
                    || self.account_id.is_empty()
                    || self.expires_at.is_none() =>
            {
                Err(EngineError::invalid(
                    "provider openai_chatgpt requires an oauth credential with access_token, expires_at, account_id and connection_id",
                ))
            }
            _ => Ok(()),
        }
    }
}

/// Whether a credential expiring at `expires_at` (`None`: never) has expired at `now`.
pub(crate) fn has_expired(expires_at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> bool {
    matches!(expires_at, Some(expiry) if expiry <= now)
}

/// A control's text value, trimmed and lower-cased (the SDK's `modelControlValue`); `where_`
/// names the field in the error.
fn control_text(value: &Value, where_: &str) -> EngineResult<String> {
    value
        .as_str()
        .map(|text| text.trim().to_ascii_lowercase())
        .ok_or_else(|| EngineError::invalid(format!("{where_} must be a string")))
}

/// Checks `controls` for `provider` with the SDK's `ValidateModelControls` rules and returns
/// them normalised: values trimmed and lower-cased, the service tier canonical, OpenRouter
/// quantizations trimmed, lower-cased and deduplicated. Empty values count as unset. `source`
/// names where the controls came from (`model.controls` or `execution_config`).
pub fn normalized_controls(provider: &str, controls: &Value, source: &str) -> EngineResult<Value> {
    let Some(object) = controls.as_object() else {
        return Err(EngineError::invalid(format!("{source} must be an object")));
    };
    let mut normalized = serde_json::Map::new();
    for (key, value) in object {
        let field = format!("{source}.{key}");
        match key.as_str() {
            "reasoning_effort" => {
                let effort = control_text(value, &field)?;
                if effort.is_empty() {
                    continue;
                }
                if !REASONING_EFFORTS.contains(&effort.as_str()) {
                    return Err(EngineError::invalid(format!(
                        "invalid {field} {value}: expected one of {}",
                        REASONING_EFFORTS.join(", ")
                    )));
                }
                if !matches!(
                    provider,
                    "openai" | "openai_chatgpt" | "openrouter" | "openrouter_responses"
                ) {
                    return Err(EngineError::invalid(format!(
                        "{field} is not supported by provider {provider} (it needs an OpenAI Responses provider)"
                    )));
                }
                normalized.insert(key.clone(), Value::from(effort));
            }
            "service_tier" => {
                let tier = normalize_service_tier(&control_text(value, &field)?);
                if tier.is_empty() {
                    continue;
                }
                if !SERVICE_TIERS.contains(&tier.as_str()) {
                    return Err(EngineError::invalid(format!(
                        "invalid {field} {value}: expected one of {} (aliases: default, priority)",
                        SERVICE_TIERS.join(", ")
                    )));
                }
                if !matches!(provider, "openai" | "openai_chatgpt") {
                    return Err(EngineError::invalid(format!(
                        "{field} is not supported by provider {provider} (only openai and openai_chatgpt)"
                    )));
                }
                normalized.insert(key.clone(), Value::from(tier));
            }
            "openrouter" => {
                if value.is_null() {
                    continue;
                }
                if !matches!(provider, "openrouter" | "openrouter_responses") {
                    return Err(EngineError::invalid(format!(
                        "{field} is not supported by provider {provider}"
                    )));
                }
                normalized.insert(key.clone(), openrouter_controls(value, &field)?);
            }
            other => {
                return Err(EngineError::invalid(format!(
                    "unknown {source} field {other:?}"
                )));
            }
        }
    }
    Ok(Value::Object(normalized))
}

/// `openrouter: {provider: {quantizations: [..]}}`, its quantizations normalised.
fn openrouter_controls(value: &Value, field: &str) -> EngineResult<Value> {
    let bad = || {
        EngineError::invalid(format!(
            "{field} must be {{\"provider\": {{\"quantizations\": [strings]}}}}"
        ))
    };
    let object = value.as_object().ok_or_else(bad)?;
    if object.keys().any(|key| key != "provider") {
        return Err(bad());
    }
    let Some(provider) = object.get("provider").filter(|p| !p.is_null()) else {
        return Ok(serde_json::json!({}));
    };
    let provider = provider.as_object().ok_or_else(bad)?;
    if provider.keys().any(|key| key != "quantizations") {
        return Err(bad());
    }
    let mut quantizations: Vec<String> = Vec::new();
    for item in provider
        .get("quantizations")
        .and_then(|q| (!q.is_null()).then_some(q))
        .map(|q| q.as_array().ok_or_else(bad))
        .transpose()?
        .into_iter()
        .flatten()
    {
        let text = item.as_str().ok_or_else(bad)?.trim().to_ascii_lowercase();
        if !text.is_empty() && !quantizations.contains(&text) {
            quantizations.push(text);
        }
    }
    Ok(serde_json::json!({"provider": {"quantizations": quantizations}}))
}

/// The controls an agent sets at the top of its `execution_config` (the original's legacy
/// `reasoning_effort`, `service_tier` and `openrouter`), normalised for `provider`; `None`
/// when it sets none.
pub fn agent_controls(
    execution_config: Option<&Value>,
    provider: &str,
) -> EngineResult<Option<Value>> {
    let Some(config) = execution_config.and_then(Value::as_object) else {
        return Ok(None);
    };
    let legacy: serde_json::Map<String, Value> = ["reasoning_effort", "service_tier", "openrouter"]
        .into_iter()
        .filter_map(|key| {
            config
                .get(key)
                .map(|value| (key.to_string(), value.clone()))
        })
        .collect();
    if legacy.is_empty() {
        return Ok(None);
    }
    normalized_controls(provider, &Value::Object(legacy), "execution_config").map(Some)
}

/// Checks a run's model route and credential against the app's policy (admission step 3).
pub fn validate_run_model(
    config: &EngineConfig,
    policy: &AppPolicy,
    model: Option<&RunModel>,
    credential: Option<&RunCredential>,
    now: DateTime<Utc>,
) -> EngineResult<()> {
    validate_run_credential(config, policy, model.is_some(), credential, now)?;
    let Some(model) = model else {
        return Ok(());
    };
    let provider = validated_provider(model)?;
    if let Some(controls) = &model.controls {
        normalized_controls(provider, controls, "model.controls")?;
    }
    validate_endpoint(policy, provider, model.endpoint.as_ref(), credential)?;
    ensure_served(config, provider)?;
    if let Some(credential) = credential {
        credential.validate_for(provider)?;
    }
    if provider == CHATGPT && !policy.credential_callback {
        return Err(EngineError::invalid(
            "provider openai_chatgpt requires the app's model_credential_callback: ChatGPT access tokens are renewed only through it (the runtime never holds a refresh token)",
        ));
    }
    Ok(())
}

/// The app's rule for run credentials, and the credential itself when one is sent.
fn validate_run_credential(
    config: &EngineConfig,
    policy: &AppPolicy,
    has_model: bool,
    credential: Option<&RunCredential>,
    now: DateTime<Utc>,
) -> EngineResult<()> {
    if policy.require_run_model_credentials && (!has_model || credential.is_none()) {
        return Err(EngineError::invalid(
            "this app requires run model credentials: model and model_credential are required",
        ));
    }
    if let Some(credential) = credential {
        // A `none` credential has no secret to seal, so it needs no key.
        if !config.credentials_enabled && credential.credential_type != "none" {
            return Err(EngineError::invalid(
                "run model credentials are not configured (AGENT_RUNTIME_MODEL_CREDENTIAL_ENCRYPTION_KEY is not set)",
            ));
        }
        credential.validate(now)?;
    }
    Ok(())
}

/// The model's provider, trimmed, once it and the model name are known to be well formed.
fn validated_provider(model: &RunModel) -> EngineResult<&str> {
    let provider = model.provider.trim();
    if provider.is_empty() {
        return Err(EngineError::invalid("model.provider is required"));
    }
    // The demo model is ours, not the contract's: known here, served only in demo mode.
    if !KNOWN_PROVIDERS.contains(&provider) && provider != DEMO_PROVIDER {
        return Err(EngineError::invalid(format!(
            "invalid model.provider {provider:?}: expected one of {}",
            KNOWN_PROVIDERS.join(", ")
        )));
    }
    let name_len = model.model.trim().chars().count();
    if name_len == 0 || name_len > 256 {
        return Err(EngineError::invalid(
            "model.model must be 1 to 256 characters",
        ));
    }
    Ok(provider)
}

/// Which providers take an endpoint, and which credential types each route accepts.
fn validate_endpoint(
    policy: &AppPolicy,
    provider: &str,
    endpoint: Option<&ModelEndpoint>,
    credential: Option<&RunCredential>,
) -> EngineResult<()> {
    match (provider, endpoint) {
        ("openai_compatible", None) => Err(EngineError::invalid(
            "model.endpoint is required for provider openai_compatible",
        )),
        ("openai_compatible", Some(endpoint)) => {
            validate_approved_endpoint(policy, endpoint, credential)
        }
        (_, Some(_)) => Err(EngineError::invalid(format!(
            "model.endpoint is only supported for provider openai_compatible, not {provider}"
        ))),
        (DEMO_PROVIDER, None) if credential.is_some() => Err(EngineError::invalid(
            "provider demo (the built-in demo model) takes no model_credential",
        )),
        ("openai_chatgpt", None) => {
            if credential.map(|c| c.credential_type.as_str()) != Some("oauth") {
                return Err(EngineError::invalid(
                    "provider openai_chatgpt requires a model_credential of type oauth",
                ));
            }
            Ok(())
        }
        (_, None) => match credential.map(|c| c.credential_type.as_str()) {
            Some("none") => Err(EngineError::invalid(format!(
                "model_credential type none is only valid for an approved no-auth endpoint, not provider {provider}"
            ))),
            Some("oauth") => Err(EngineError::invalid(format!(
                "model_credential type oauth is only valid for provider openai_chatgpt; provider {provider} takes an api_key"
            ))),
            _ => Ok(()),
        },
    }
}

/// An `openai_compatible` endpoint must be one the app approved, with a credential of the
/// endpoint's auth mode.
fn validate_approved_endpoint(
    policy: &AppPolicy,
    endpoint: &ModelEndpoint,
    credential: Option<&RunCredential>,
) -> EngineResult<()> {
    let approved = policy.model_endpoints.iter().find(|approved| {
        approved.id == endpoint.id
            && approved.base_url == endpoint.base_url
            && approved.auth_mode == endpoint.auth_mode
    });
    if approved.is_none() {
        return Err(EngineError::invalid(format!(
            "model.endpoint {:?} does not match an approved model endpoint of this app",
            endpoint.id
        )));
    }
    let Some(credential) = credential else {
        return Err(EngineError::invalid(
            "model_credential is required for provider openai_compatible (use type none for a no-auth endpoint)",
        ));
    };
    if credential.credential_type != endpoint.auth_mode {
        return Err(EngineError::invalid(format!(
            "model_credential.type {:?} does not match the endpoint auth_mode {:?}",
            credential.credential_type, endpoint.auth_mode
        )));
    }
    Ok(())
}

/// Refuses a provider this runtime does not serve.
fn ensure_served(config: &EngineConfig, provider: &str) -> EngineResult<()> {
    let served = config
        .served_providers
        .iter()
        .any(|served| served == provider);
    if !served && provider == DEMO_PROVIDER {
        return Err(EngineError::invalid(
            "model provider demo (the built-in deterministic demo model) is served only by `agent-runtime serve --demo`",
        ));
    }
    if !served && provider == CHATGPT {
        return Err(EngineError::invalid(
            "ChatGPT subscription access is not enabled on this runtime (AGENT_RUNTIME_CHATGPT_ENABLED)",
        ));
    }
    if !served {
        return Err(EngineError::invalid(format!(
            "model provider {provider} is not available on this runtime"
        )));
    }
    Ok(())
}

/// The provider/model a run will use when it names none itself.
pub fn default_model(
    config: &EngineConfig,
    agent_provider: &str,
    agent_model: &str,
) -> EngineResult<RunModel> {
    let provider = if agent_provider.trim().is_empty() {
        config.default_provider.clone()
    } else {
        agent_provider.trim().to_string()
    };
    if provider == DEMO_PROVIDER {
        // Say that demo mode is off, not that a key is missing: the demo model has none.
        ensure_served(config, &provider)?;
    }
    let Some(defaults) = config
        .providers
        .get(&provider)
        .filter(|defaults| defaults.has_global_key())
    else {
        return Err(EngineError::invalid(format!(
            "no model is configured for this run: provider {provider} has no global credentials; \
             send model and model_credential, or configure the provider on the runtime"
        )));
    };
    ensure_served(config, &provider)?;
    let model = if agent_model.trim().is_empty() {
        defaults.default_model.clone()
    } else {
        agent_model.trim().to_string()
    };
    Ok(RunModel {
        provider,
        model,
        endpoint: None,
        controls: None,
    })
}

/// Resolves the endpoint and credential of a call. A run credential never falls back to a
/// global key.
pub fn resolve_route(
    config: &EngineConfig,
    model: &RunModel,
    credential: Option<&RunCredential>,
) -> Result<ModelRoute, String> {
    let (base_url, api_key) = match (&model.endpoint, credential) {
        (Some(endpoint), Some(credential)) => (endpoint.base_url.clone(), credential.bearer()),
        (Some(_), None) => {
            return Err("the run's model credential is no longer available".to_string())
        }
        (None, credential) => {
            let defaults = config
                .providers
                .get(&model.provider)
                .ok_or_else(|| format!("model provider {} is not configured", model.provider))?;
            let key = match credential {
                Some(credential) => credential.bearer(),
                None if defaults.has_global_key() => defaults.api_key.clone(),
                None => {
                    return Err(format!(
                        "model provider {} has no global key and the run brought no credential",
                        model.provider
                    ))
                }
            };
            (defaults.base_url.clone(), key)
        }
    };
    // A ChatGPT subscription token acts for one account, named on every request.
    let account_id = (model.provider == CHATGPT)
        .then(|| credential.map(|c| c.account_id.clone()))
        .flatten();
    Ok(ModelRoute {
        provider: model.provider.clone(),
        model: model.model.clone(),
        base_url,
        api_key,
        controls: model.controls.clone(),
        account_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ApprovedEndpoint;

    fn credential(credential_type: &str) -> RunCredential {
        RunCredential {
            credential_type: credential_type.into(),
            ..RunCredential::default()
        }
    }

    fn demo_model() -> RunModel {
        RunModel {
            provider: DEMO_PROVIDER.into(),
            model: "demo-deterministic".into(),
            endpoint: None,
            controls: None,
        }
    }

    fn demo_config() -> EngineConfig {
        let mut config = EngineConfig::default();
        config.served_providers.push(DEMO_PROVIDER.into());
        config.default_provider = DEMO_PROVIDER.into();
        config.providers.insert(
            DEMO_PROVIDER.into(),
            crate::config::ProviderDefaults {
                base_url: String::new(),
                api_key: None,
                default_model: "demo-deterministic".into(),
                keyless: true,
            },
        );
        config
    }

    #[test]
    fn the_demo_provider_is_served_only_in_demo_mode() {
        let now = Utc::now();
        let policy = AppPolicy::default();
        let off = EngineConfig::default();
        let error = validate_run_model(&off, &policy, Some(&demo_model()), None, now).unwrap_err();
        assert!(error.to_string().contains("serve --demo"), "{error}");
        let error = default_model(&off, DEMO_PROVIDER, "").unwrap_err();
        assert!(error.to_string().contains("serve --demo"), "{error}");

        let on = demo_config();
        assert!(validate_run_model(&on, &policy, Some(&demo_model()), None, now).is_ok());
        let key = RunCredential {
            api_key: "sk-test".into(),
            ..credential("api_key")
        };
        let keyed = EngineConfig {
            credentials_enabled: true,
            ..demo_config()
        };
        let error =
            validate_run_model(&keyed, &policy, Some(&demo_model()), Some(&key), now).unwrap_err();
        assert!(
            error.to_string().contains("takes no model_credential"),
            "{error}"
        );
        let model = default_model(&on, "", "").expect("the default in demo mode");
        assert_eq!(model.provider, DEMO_PROVIDER);
        let route = resolve_route(&on, &model, None).expect("a keyless route");
        assert!(route.api_key.is_none() && route.model == "demo-deterministic");
    }

    #[test]
    fn endpoints_are_only_for_approved_openai_compatible_routes() {
        let endpoint = ModelEndpoint {
            id: "local".into(),
            base_url: "http://127.0.0.1:9000/v1".into(),
            auth_mode: "none".into(),
        };
        let approving = AppPolicy {
            model_endpoints: vec![ApprovedEndpoint {
                id: endpoint.id.clone(),
                base_url: endpoint.base_url.clone(),
                auth_mode: endpoint.auth_mode.clone(),
            }],
            ..AppPolicy::default()
        };
        let none = credential("none");
        let route = |policy: &AppPolicy, provider: &str, endpoint, credential| {
            validate_endpoint(policy, provider, endpoint, credential).is_ok()
        };
        assert!(route(
            &approving,
            "openai_compatible",
            Some(&endpoint),
            Some(&none)
        ));
        assert!(!route(&approving, "openai_compatible", None, Some(&none)));
        assert!(!route(
            &AppPolicy::default(),
            "openai_compatible",
            Some(&endpoint),
            Some(&none)
        ));
        assert!(!route(
            &approving,
            "openai_compatible",
            Some(&endpoint),
            None
        ));
        let key = credential("api_key");
        assert!(!route(
            &approving,
            "openai_compatible",
            Some(&endpoint),
            Some(&key)
        ));
        assert!(!route(&approving, "openai", Some(&endpoint), Some(&none)));
        assert!(!route(&approving, "openai", None, Some(&none)));
        assert!(route(&approving, "openai", None, Some(&key)));
        let oauth = credential("oauth");
        assert!(!route(&approving, "anthropic", None, Some(&oauth)));
        assert!(!route(&approving, "openai_chatgpt", None, Some(&key)));
        assert!(route(
            &approving,
            "openai_chatgpt",
            None,
            Some(&credential("oauth"))
        ));
    }

    #[test]
    fn credentials_follow_the_providers_rules() {
        let key = |api_key: &str| RunCredential {
            credential_type: "api_key".into(),
            api_key: api_key.into(),
            ..RunCredential::default()
        };
        assert!(key("sk").validate_for("openai").is_ok());
        assert!(key("sk\nX-Evil: 1").validate_for("openai").is_err());
        assert!(key(&"k".repeat(70_000)).validate_for("anthropic").is_err());
        let mut with_account = key("sk");
        with_account.account_id = "acct".into();
        assert!(with_account
            .validate_for("openrouter")
            .unwrap_err()
            .to_string()
            .contains("api_key credential"));
        let oauth = RunCredential {
            credential_type: "oauth".into(),
            access_token: "at".into(),
            connection_id: "conn".into(),
            account_id: "acct".into(),
            expires_at: Some(Utc::now()),
            ..RunCredential::default()
        };
        assert!(oauth.validate_for("openai_chatgpt").is_ok());
        let unbound = RunCredential {
            account_id: String::new(),
            ..oauth.clone()
        };
        assert!(unbound.validate_for("openai_chatgpt").is_err());
        assert!(oauth.validate_for("openai").is_err());
    }

    #[test]
    fn controls_follow_the_sdks_validator_and_come_out_canonical() {
        let ok = |provider: &str, controls: serde_json::Value| {
            normalized_controls(provider, &controls, "model.controls").unwrap()
        };
        let refused = |provider: &str, controls: serde_json::Value| {
            normalized_controls(provider, &controls, "model.controls")
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            ok(
                "openai",
                serde_json::json!({"reasoning_effort": " XHigh ", "service_tier": "PRIORITY"})
            ),
            serde_json::json!({"reasoning_effort": "xhigh", "service_tier": "fast"})
        );
        assert_eq!(
            ok("openai", serde_json::json!({"service_tier": "default"}))["service_tier"],
            "standard"
        );
        assert_eq!(
            ok("openai", serde_json::json!({"reasoning_effort": "  "})),
            serde_json::json!({})
        );
        assert!(
            refused("openai", serde_json::json!({"service_tier": "turbo"}))
                .contains("standard, fast, flex, auto")
        );
        assert!(
            refused("anthropic", serde_json::json!({"reasoning_effort": "low"}))
                .contains("not supported by provider anthropic")
        );
        assert!(
            refused("openrouter", serde_json::json!({"service_tier": "flex"}))
                .contains("only openai and openai_chatgpt")
        );
        assert!(refused("openai", serde_json::json!({"max_tokens": 5}))
            .contains("unknown model.controls field"));
        assert!(refused(
            "openrouter",
            serde_json::json!({"openrouter": {"provider": {"sort": "price"}}})
        )
        .contains("quantizations"));
        assert_eq!(
            ok(
                "openrouter_responses",
                serde_json::json!({"openrouter": {"provider": {"quantizations": ["FP8 ", "fp8", ""]}}})
            ),
            serde_json::json!({"openrouter": {"provider": {"quantizations": ["fp8"]}}})
        );
        // Agent-level controls: only the legacy keys, named as execution_config's.
        let config =
            serde_json::json!({"reasoning_effort": "Low", "workspace": {"mode": "host_prepared"}});
        assert_eq!(
            agent_controls(Some(&config), "openai").unwrap(),
            Some(serde_json::json!({"reasoning_effort": "low"}))
        );
        assert_eq!(
            agent_controls(Some(&serde_json::json!({"workspace": {}})), "openai").unwrap(),
            None
        );
        assert!(agent_controls(Some(&config), "anthropic")
            .unwrap_err()
            .to_string()
            .contains("execution_config.reasoning_effort"));
    }
}
