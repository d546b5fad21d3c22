//! Demo mode (`agent-runtime serve --demo`): a first run without a vendor key. It adds the
//! app `demo` with the agent `demo` on the built-in demo model (`ar_llm::demo`), lists that
//! model in the capabilities as provider `demo`, and starts one demo run on a fresh store.
//!
//! The demo model is never used outside demo mode, and demo mode refuses to start when a real
//! provider is configured: a made-up answer must never stand in for a provider someone set up.

use std::sync::Arc;

use anyhow::Context as _;
use ar_config::app::AppConfig;
use ar_config::ServiceSettings;
use ar_core::model::{
    DeltaSink, ModelClient, ModelError, ModelRequest, ModelResponse, ModelRoute, DEMO_PROVIDER,
};
use ar_core::run::TargetRef;
use ar_core::store::{RunSearch, Store};
use ar_engine::{AgentInput, Engine, ProviderDefaults, StartRun};
use ar_llm::demo::{DemoModel, DEMO_MODEL};
use async_trait::async_trait;
use serde_json::json;

/// The app demo mode adds.
pub const DEMO_APP: &str = "demo";
/// The demo agent's id.
pub const DEMO_AGENT: &str = "demo";

/// Refuses demo mode beside a configured provider (named, so the operator knows which).
pub fn refuse_real_providers(settings: &ServiceSettings) -> anyhow::Result<()> {
    let models = &settings.models;
    let configured: Vec<&str> = [
        ("openai", models.openai.configured()),
        ("anthropic", models.anthropic.configured()),
        ("openrouter", models.openrouter.configured()),
    ]
    .into_iter()
    .filter_map(|(name, configured)| configured.then_some(name))
    .collect();
    if configured.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "--demo runs the built-in demo model, which never stands in for a real provider, and \
         a key is configured for {}: drop --demo to use it, or unset its key to try the demo",
        configured.join(", ")
    )
}

/// The settings of demo mode (unchanged when `demo` is off): refused beside a real provider,
/// the app `demo` added.
pub fn prepare(mut settings: ServiceSettings, demo: bool) -> anyhow::Result<ServiceSettings> {
    if demo {
        refuse_real_providers(&settings)?;
        settings.app_config = with_demo_app(&settings.app_config)?;
        tracing::warn!(
            "DEMO MODE: runs that name no model use the built-in deterministic demo model \
             (provider \"demo\", model \"{DEMO_MODEL}\"), which is not a real model"
        );
    }
    Ok(settings)
}

/// The app configuration with the app `demo` added (an app of that id already configured is
/// kept as it is).
pub fn with_demo_app(apps: &AppConfig) -> anyhow::Result<AppConfig> {
    let mut apps = apps.clone();
    if !apps.apps.contains_key(DEMO_APP) {
        let demo = AppConfig::from_value(&json!({"apps": [{"app_id": DEMO_APP}]}), &|_| None)
            .map_err(|problems| anyhow::anyhow!("the demo app's configuration: {problems:?}"))?;
        apps.apps.extend(demo.apps);
    }
    Ok(apps)
}

/// The demo model's defaults: no key, no URL.
pub fn provider_defaults() -> ProviderDefaults {
    ProviderDefaults {
        base_url: String::new(),
        api_key: None,
        default_model: DEMO_MODEL.to_string(),
        keyless: true,
    }
}

/// How the capabilities list the demo model: its protocol names it a stand-in.
pub fn capability() -> ar_wire::ProviderCapability {
    ar_wire::ProviderCapability {
        protocols: vec!["built_in_deterministic_demo".to_string()],
        controls: Vec::new(),
        transcript_continuation: true,
        lossless_response_replay: false,
        auth_modes: vec!["none".to_string()],
        run_credentials_configured: false,
        name: DEMO_PROVIDER.to_string(),
        configured: true,
        default_model: DEMO_MODEL.to_string(),
        base_url_overridden: false,
    }
}

/// The model client of demo mode: the demo model for provider `demo`, the vendors' client for
/// every other provider.
pub struct WithDemo {
    demo: DemoModel,
    vendors: Arc<dyn ModelClient>,
}

impl WithDemo {
    pub fn new(vendors: Arc<dyn ModelClient>) -> Self {
        WithDemo {
            demo: DemoModel::default(),
            vendors,
        }
    }
}

#[async_trait]
impl ModelClient for WithDemo {
    async fn complete(
        &self,
        route: &ModelRoute,
        request: &ModelRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        if route.provider == DEMO_PROVIDER {
            self.demo.complete(route, request, on_delta).await
        } else {
            self.vendors.complete(route, request, on_delta).await
        }
    }
}

/// The demo agent: a plan, a tool and an approval, on the demo model.
fn demo_agent() -> AgentInput {
    AgentInput {
        id: DEMO_AGENT.to_string(),
        app_id: DEMO_APP.to_string(),
        name: "Demo agent (built-in demo model)".to_string(),
        provider: DEMO_PROVIDER.to_string(),
        model: DEMO_MODEL.to_string(),
        system_prompt: "You are the demo agent of Agent Runtime's demo mode.".to_string(),
        allowed_tools: ["update_plan", "get_context", "request_approval"]
            .map(str::to_string)
            .to_vec(),
        ..AgentInput::default()
    }
}

/// The run `serve --demo` starts, and the console's "start a demo run" sends the same.
pub fn demo_run() -> StartRun {
    StartRun {
        app_id: DEMO_APP.to_string(),
        agent_id: DEMO_AGENT.to_string(),
        target: TargetRef {
            target_type: "ticket".to_string(),
            id: "DEMO-1".to_string(),
            display: None,
            metadata: None,
        },
        instructions: "Show what the runtime does.".to_string(),
        ..StartRun::default()
    }
}

/// Saves the demo agent when the store has none (an edited one is kept), and starts a demo
/// run when the demo app has no run yet. Returns the run started, if any.
pub async fn seed(engine: &Engine, store: &dyn Store) -> anyhow::Result<Option<String>> {
    if store.get_agent(DEMO_APP, DEMO_AGENT).await?.is_none() {
        engine
            .upsert_agent(demo_agent())
            .await
            .context("saving the demo agent")?;
    }
    let any = RunSearch {
        app_id: DEMO_APP.to_string(),
        limit: 1,
        ..RunSearch::default()
    };
    if store.search_runs(&any).await?.1 > 0 {
        return Ok(None);
    }
    let run = engine
        .start_run(demo_run())
        .await
        .context("starting the demo run")?;
    Ok(Some(run.id))
}
