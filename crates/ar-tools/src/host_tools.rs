//! `HostToolHost`: the built-in `get_context` tool plus each app's host commands, executed through the app's command provider; per-app catalogs.
//!
//! An app's commands are those its `command_provider.commands` declares (our extension), or,
//! when that key is absent, the original's catalogue ([`crate::command_catalog`]), whose tools
//! are named by alias and executed under their command name (`create_task` → `pm.create_task`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ar_config::app::{CommandProvider, HostCommand};
use ar_config::AppConfig;
use ar_core::secret::Secret;
use ar_core::tool::{canonical_tool_name, ToolContext, ToolDefinition, ToolHost, ToolOutput};
use ar_core::JsonMap;
use async_trait::async_trait;
use serde_json::{json, Value};

use crate::command_catalog::{self, CatalogCommand};
use crate::control::{self, names};
use crate::fetch::{self, FetchPolicy, FetchUrl};
use crate::http::{self, ToolsError};
use crate::mcp_providers::McpProviders;

/// Default timeout of one host command.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

pub use ar_core::tool::WORKSPACE_LEASE_KEY;

/// An app's command provider with its commands, by tool name.
struct CommandClient {
    execute_url: String,
    token: Option<Secret>,
    commands: HashMap<String, CatalogCommand>,
}

#[derive(Default)]
struct AppTools {
    /// Host tools of the app, in declaration order.
    catalog: Vec<ToolDefinition>,
    commands: Option<Arc<CommandClient>>,
}

/// Tools executed outside the engine: `get_context` and `fetch_url` (every app) and host
/// commands (per app).
pub struct HostToolHost {
    client: reqwest::Client,
    fetch: FetchUrl,
    timeout: Duration,
    apps: HashMap<String, AppTools>,
    providers: Option<Arc<McpProviders>>,
}

impl std::fmt::Debug for HostToolHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut apps: Vec<_> = self
            .apps
            .iter()
            .map(|(id, tools)| (id.as_str(), tools.catalog.len()))
            .collect();
        apps.sort_unstable();
        f.debug_struct("HostToolHost")
            .field("host_tools_per_app", &apps)
            .finish()
    }
}

impl HostToolHost {
    /// A host with only the built-in tools.
    pub fn new() -> Result<Self, ToolsError> {
        Ok(HostToolHost {
            client: http::client()?,
            fetch: FetchUrl::new(FetchPolicy::default())?,
            timeout: DEFAULT_COMMAND_TIMEOUT,
            apps: HashMap::new(),
            providers: None,
        })
    }

    /// A host with every app's declared commands.
    pub fn from_app_config(config: &AppConfig) -> Result<Self, ToolsError> {
        let mut host = HostToolHost::new()?;
        for (app_id, app) in &config.apps {
            if let Some(provider) = &app.command_provider {
                host.add_command_provider(app_id, provider)?;
            }
        }
        Ok(host)
    }

    /// Registers (or replaces) an app's command provider and its commands. Commands named like
    /// a runtime tool are refused.
    pub fn add_command_provider(
        &mut self,
        app_id: &str,
        provider: &CommandProvider,
    ) -> Result<(), ToolsError> {
        let declared = provider_commands(provider)?;
        let mut catalog = Vec::with_capacity(declared.len());
        let mut commands = HashMap::with_capacity(declared.len());
        for command in declared {
            let name = &command.definition.name;
            if is_builtin(name) {
                return Err(ToolsError::NameCollision {
                    app_id: app_id.to_string(),
                    name: name.clone(),
                });
            }
            catalog.push(command.definition.clone());
            commands.insert(name.clone(), command);
        }
        let client = CommandClient {
            execute_url: provider.execute_url(),
            token: provider.token.clone(),
            commands,
        };
        self.apps.insert(
            app_id.to_string(),
            AppTools {
                catalog,
                commands: Some(Arc::new(client)),
            },
        );
        Ok(())
    }

    /// Offers the tools of the apps' MCP providers too.
    pub fn with_mcp_providers(mut self, providers: Arc<McpProviders>) -> Self {
        self.providers = Some(providers);
        self
    }

    /// Where `fetch_url` may go (strict by default: public `https` destinations only).
    pub fn with_fetch_policy(mut self, policy: FetchPolicy) -> Result<Self, ToolsError> {
        self.fetch = FetchUrl::new(policy)?;
        Ok(self)
    }

    /// Timeout of one host command call.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    fn command(&self, app_id: &str, name: &str) -> Option<(Arc<CommandClient>, CatalogCommand)> {
        let client = self.apps.get(app_id)?.commands.as_ref()?;
        let command = client.commands.get(name)?.clone();
        Some((client.clone(), command))
    }

    async fn execute(
        &self,
        client: &CommandClient,
        command: &CatalogCommand,
        ctx: &ToolContext,
        input: Value,
    ) -> ToolOutput {
        let definition = &command.definition;
        let name = &definition.name;
        if !definition.supports_target(&ctx.target.target_type) {
            return ToolOutput::error(format!(
                "tool {name} is not available for targets of type {:?}",
                ctx.target.target_type
            ));
        }
        let input = match input {
            Value::Null => Value::Object(JsonMap::new()),
            object @ Value::Object(_) => object,
            _ => return ToolOutput::error(format!("tool {name} expects a JSON object as input")),
        };
        let body = ar_wire::host::CommandExecutionRequest {
            meta: execution_meta(ctx),
            command_name: command.command_name.clone(),
            input: Some(input),
        };
        let mut request = crate::http::traced(self.client.post(&client.execute_url))
            .timeout(self.timeout)
            .json(&body);
        if let Some(token) = &client.token {
            request = request.bearer_auth(token.expose());
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(err) => {
                let reason = http::describe(&err);
                tracing::warn!(app_id = %ctx.app_id, run_id = %ctx.run_id, command = %name, error = %reason, "host command call failed");
                return ToolOutput::error(format!("host command {name} failed: {reason}"));
            }
        };
        let status = response.status();
        let bytes = match http::read_limited(response).await {
            Ok(bytes) => bytes,
            Err(err) => return ToolOutput::error(format!("host command {name} failed: {err}")),
        };
        let decoded = serde_json::from_slice::<ar_wire::host::CommandExecutionResponse>(&bytes);
        if !status.is_success() {
            tracing::warn!(app_id = %ctx.app_id, run_id = %ctx.run_id, command = %name, status = status.as_u16(), "host command rejected");
            let detail = match &decoded {
                Ok(answer) if !answer.error.is_empty() => answer.error.clone(),
                _ => http::snippet(&bytes),
            };
            return ToolOutput::error(if detail.is_empty() {
                format!("host command {name} failed: HTTP {}", status.as_u16())
            } else {
                format!(
                    "host command {name} failed: HTTP {}: {detail}",
                    status.as_u16()
                )
            });
        }
        let answer = match decoded {
            Ok(answer) => answer,
            Err(err) => {
                return ToolOutput::error(format!(
                    "host command {name} returned invalid JSON: {err}"
                ))
            }
        };
        if !answer.error.is_empty() {
            return ToolOutput::error(answer.error);
        }
        match answer.output {
            None | Some(Value::Null) => {
                ToolOutput::text(format!("{name} completed with no output"))
            }
            Some(Value::String(text)) => ToolOutput {
                content: text.clone(),
                structured: Some(Value::String(text)),
                is_error: false,
            },
            Some(output) => ToolOutput {
                content: output.to_string(),
                structured: Some(output),
                is_error: false,
            },
        }
    }
}

/// The commands a provider offers: those it declares (executed under their own name), else the
/// original's catalogue.
pub fn provider_commands(provider: &CommandProvider) -> Result<Vec<CatalogCommand>, ToolsError> {
    match &provider.commands {
        Some(declared) => Ok(declared.iter().map(declared_command).collect()),
        None => Ok(command_catalog::builtin()?.to_vec()),
    }
}

fn declared_command(command: &HostCommand) -> CatalogCommand {
    CatalogCommand {
        command_name: command.name.clone(),
        definition: command.to_tool_definition(),
    }
}

/// Whether `name` is a tool of the runtime's own, which no host command may shadow.
pub(crate) fn is_builtin(name: &str) -> bool {
    name == names::GET_CONTEXT || name == fetch::NAME || names::is_runtime_control(name)
}

/// The `meta` block of a host command or provider tool call.
pub(crate) fn execution_meta(ctx: &ToolContext) -> ar_wire::host::CommandExecutionContext {
    let mut run_input_metadata = ctx.run_metadata.clone();
    let lease = run_input_metadata.remove(WORKSPACE_LEASE_KEY);
    let workspace_metadata = lease
        .as_ref()
        .and_then(|l| l.get("metadata"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let target_metadata = ctx.target.metadata.clone().unwrap_or_default();
    // The original's order: the run's metadata, the lease's metadata, the target's metadata.
    let workspace_id = [&run_input_metadata, &workspace_metadata, &target_metadata]
        .into_iter()
        .filter_map(|map| map.get("workspace_id").and_then(Value::as_str))
        .map(str::trim)
        .find(|id| !id.is_empty())
        .unwrap_or_default()
        .to_string();
    ar_wire::host::CommandExecutionContext {
        app_id: ctx.app_id.clone(),
        run_id: ctx.run_id.clone(),
        agent_id: ctx.agent_id.clone(),
        external_actor_id: ctx.external_actor_id.clone(),
        workspace_id,
        target_type: ctx.target.target_type.clone(),
        target_id: ctx.target.id.clone(),
        target: http::wire_target(&ctx.target),
        run_input_metadata,
        target_metadata,
        workspace_metadata,
    }
}

fn get_context_output(ctx: &ToolContext) -> ToolOutput {
    let value = json!({
        "target": http::wire_target(&ctx.target),
        "context_summary": ctx.context_summary,
    });
    ToolOutput {
        content: value.to_string(),
        structured: Some(value),
        is_error: false,
    }
}

#[async_trait]
impl ToolHost for HostToolHost {
    fn catalog(&self, app_id: &str) -> Vec<ToolDefinition> {
        let mut tools = vec![control::get_context_tool(), FetchUrl::definition()];
        if let Some(app) = self.apps.get(app_id) {
            tools.extend(app.catalog.iter().cloned());
        }
        if let Some(providers) = &self.providers {
            tools.extend(providers.catalog(app_id));
        }
        tools
    }

    async fn call(&self, ctx: &ToolContext, tool_name: &str, input: Value) -> ToolOutput {
        let name = canonical_tool_name(tool_name);
        if name == names::GET_CONTEXT {
            return get_context_output(ctx);
        }
        if name == fetch::NAME {
            return self.fetch.call(ctx, input).await;
        }
        if names::is_runtime_control(&name) {
            return ToolOutput::error(format!(
                "tool {name} is executed by the runtime, not by a tool host"
            ));
        }
        if let Some((client, command)) = self.command(&ctx.app_id, &name) {
            return self.execute(&client, &command, ctx, input).await;
        }
        if let Some(providers) = &self.providers {
            if let Some(output) = providers.call(ctx, &name, input).await {
                return output;
            }
        }
        ToolOutput::error(format!("unknown tool {name:?}"))
    }

    fn unready(&self, app_id: &str) -> Option<String> {
        self.providers.as_ref()?.unready(app_id)
    }

    async fn refresh_for_unknown(&self, app_id: &str, _names: &[String]) -> bool {
        match &self.providers {
            Some(providers) => providers.refresh_for_unknown(app_id).await,
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use ar_core::TargetRef;
    use axum::extract::State;
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::post;
    use axum::{Json, Router};

    use super::*;

    type Seen = Arc<Mutex<Vec<(Option<String>, Value)>>>;

    async fn execute(
        State(seen): State<Seen>,
        headers: HeaderMap,
        Json(body): Json<Value>,
    ) -> (StatusCode, Json<Value>) {
        let auth = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        seen.lock().unwrap().push((auth, body.clone()));
        match body["command_name"].as_str().unwrap_or_default() {
            "create_task" => (
                StatusCode::OK,
                Json(json!({"output": {"task_id": "T-9", "title": body["input"]["title"]}})),
            ),
            "say" => (StatusCode::OK, Json(json!({"output": "plain text"}))),
            "refuse" => (
                StatusCode::OK,
                Json(json!({"error": "not allowed for this user"})),
            ),
            "explode" => (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({"error": "database down"})),
            ),
            _ => (StatusCode::NOT_FOUND, Json(json!({}))),
        }
    }

    async fn server() -> (String, Seen) {
        let seen: Seen = Arc::default();
        let app = Router::new()
            .route("/cmd/execute", post(execute))
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (format!("http://{addr}/cmd"), seen)
    }

    fn config(base_url: &str) -> AppConfig {
        let text = format!(
            r#"
apps:
  - app_id: crm
    command_provider:
      base_url: "{base_url}"
      token: cmd-token
      commands:
        - name: create_task
          description: Create a task
          input_schema: {{type: object, properties: {{title: {{type: string}}}}}}
          mutating: true
          risk_level: routine_mutation
        - name: say
        - name: refuse
        - name: explode
        - name: tickets_only
          supported_target_types: [ticket]
  - app_id: docs
"#
        );
        AppConfig::parse(&text, &|_| None).unwrap()
    }

    fn ctx(app_id: &str) -> ToolContext {
        let mut run_metadata = JsonMap::new();
        run_metadata.insert("preset".into(), "triage".into());
        run_metadata.insert(
            WORKSPACE_LEASE_KEY.into(),
            json!({"id": "lease-1", "metadata": {"branch": "main", "workspace_id": "ws-1"}}),
        );
        let mut target_metadata = JsonMap::new();
        target_metadata.insert("board".into(), "B1".into());
        ToolContext {
            app_id: app_id.into(),
            run_id: "run_1".into(),
            agent_id: "agt_1".into(),
            external_actor_id: "user-7".into(),
            target: TargetRef {
                target_type: "deal".into(),
                id: "D-1".into(),
                display: None,
                metadata: Some(target_metadata),
            },
            context_summary: "A big deal".into(),
            run_metadata,
        }
    }

    #[tokio::test]
    async fn catalogs_are_per_app() {
        let (url, _) = server().await;
        let host = HostToolHost::from_app_config(&config(&url)).unwrap();
        let crm: Vec<_> = host.catalog("crm").into_iter().map(|t| t.name).collect();
        assert_eq!(
            crm,
            vec![
                "get_context",
                "fetch_url",
                "create_task",
                "say",
                "refuse",
                "explode",
                "tickets_only"
            ]
        );
        let docs: Vec<_> = host.catalog("docs").into_iter().map(|t| t.name).collect();
        assert_eq!(docs, vec!["get_context", "fetch_url"]);
        assert_eq!(host.catalog("unknown").len(), 2);
        let create = host
            .catalog("crm")
            .into_iter()
            .find(|t| t.name == "create_task")
            .unwrap();
        assert!(create.mutating);
        assert_eq!(create.input_schema["properties"]["title"]["type"], "string");
    }

    #[tokio::test]
    async fn get_context_returns_target_and_summary() {
        let host = HostToolHost::new().unwrap();
        let output = host
            .call(&ctx("docs"), "mcp__agent_runtime__get_context", Value::Null)
            .await;
        assert!(!output.is_error);
        let structured = output.structured.unwrap();
        assert_eq!(structured["context_summary"], "A big deal");
        assert_eq!(
            structured["target"],
            json!({"type": "deal", "id": "D-1", "metadata": {"board": "B1"}})
        );
    }

    #[tokio::test]
    async fn executes_commands_with_bearer_and_meta() {
        let (url, seen) = server().await;
        let host = HostToolHost::from_app_config(&config(&url)).unwrap();
        let output = host
            .call(&ctx("crm"), "create_task", json!({"title": "Call back"}))
            .await;
        assert!(!output.is_error, "{output:?}");
        assert_eq!(
            output.structured,
            Some(json!({"task_id": "T-9", "title": "Call back"}))
        );
        let (auth, body) = seen.lock().unwrap()[0].clone();
        assert_eq!(auth.as_deref(), Some("Bearer cmd-token"));
        assert_eq!(
            body,
            json!({
                "meta": {
                    "app_id": "crm", "run_id": "run_1", "agent_id": "agt_1", "external_actor_id": "user-7",
                    "workspace_id": "ws-1", "target_type": "deal", "target_id": "D-1",
                    "target": {"type": "deal", "id": "D-1", "metadata": {"board": "B1"}},
                    "run_input_metadata": {"preset": "triage"},
                    "target_metadata": {"board": "B1"},
                    "workspace_metadata": {"branch": "main", "workspace_id": "ws-1"}
                },
                "command_name": "create_task",
                "input": {"title": "Call back"}
            })
        );

        let said = host.call(&ctx("crm"), "say", Value::Null).await;
        assert_eq!(said.content, "plain text");
        assert!(!said.is_error);
    }

    #[test]
    fn workspace_id_comes_from_run_then_lease_then_target_metadata() {
        let mut ctx = ctx("crm");
        assert_eq!(execution_meta(&ctx).workspace_id, "ws-1", "from the lease");
        ctx.run_metadata
            .insert("workspace_id".into(), json!(" ws-run "));
        assert_eq!(
            execution_meta(&ctx).workspace_id,
            "ws-run",
            "the run's wins"
        );
        ctx.run_metadata.clear();
        ctx.target
            .metadata
            .as_mut()
            .unwrap()
            .insert("workspace_id".into(), json!("ws-target"));
        assert_eq!(execution_meta(&ctx).workspace_id, "ws-target");
        ctx.target.metadata = None;
        assert_eq!(
            execution_meta(&ctx).workspace_id,
            "",
            "the lease id is not a workspace id"
        );
    }

    #[tokio::test]
    async fn host_errors_become_error_outputs() {
        let (url, _) = server().await;
        let host = HostToolHost::from_app_config(&config(&url)).unwrap();
        let refused = host.call(&ctx("crm"), "refuse", json!({})).await;
        assert!(refused.is_error);
        assert_eq!(refused.content, "not allowed for this user");
        let exploded = host.call(&ctx("crm"), "explode", json!({})).await;
        assert!(exploded.is_error);
        assert!(
            exploded.content.contains("HTTP 500") && exploded.content.contains("database down"),
            "{}",
            exploded.content
        );
        let bad_input = host.call(&ctx("crm"), "say", json!([1, 2])).await;
        assert!(bad_input.is_error);
        let wrong_target = host.call(&ctx("crm"), "tickets_only", json!({})).await;
        assert!(
            wrong_target.is_error && wrong_target.content.contains("not available"),
            "{}",
            wrong_target.content
        );
    }

    #[tokio::test]
    async fn other_apps_cannot_call_an_apps_commands() {
        let (url, seen) = server().await;
        let host = HostToolHost::from_app_config(&config(&url)).unwrap();
        let output = host.call(&ctx("docs"), "create_task", json!({})).await;
        assert!(output.is_error && output.content.contains("unknown tool"));
        let control = host.call(&ctx("crm"), "finish_turn", json!({})).await;
        assert!(control.is_error && control.content.contains("executed by the runtime"));
        assert!(seen.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn unreachable_provider_and_timeouts_are_error_outputs() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dead = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let host = HostToolHost::from_app_config(&config(&dead))
            .unwrap()
            .with_timeout(Duration::from_millis(500));
        let output = host.call(&ctx("crm"), "say", json!({})).await;
        assert!(
            output.is_error && output.content.contains("connection failed"),
            "{}",
            output.content
        );
    }

    fn original_config(base_url: &str) -> AppConfig {
        let text = format!("apps: [{{app_id: pm, command_provider: {{base_url: '{base_url}', token: cmd-token}}}}]");
        AppConfig::parse(&text, &|_| None).unwrap()
    }

    #[tokio::test]
    async fn a_provider_without_commands_offers_the_original_catalogue() {
        let host = HostToolHost::from_app_config(&original_config("https://h.example")).unwrap();
        let tools: Vec<_> = host.catalog("pm").into_iter().skip(2).collect();
        assert_eq!(tools.len(), 53);
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names[..4],
            [
                "search_workspace",
                "list_workspace_teams",
                "list_documents",
                "read_document"
            ]
        );
        for name in [
            "create_task",
            "update_task_state",
            "write_document_content",
            "list_repositories",
            "send_support_reply",
        ] {
            assert!(names.contains(&name), "{name} offered");
        }
        let create = tools.iter().find(|t| t.name == "create_task").unwrap();
        assert_eq!(create.category, "PM / Tasks");
        assert!(create.mutating);
        assert_eq!(create.effective_risk(), ar_core::RiskLevel::RoutineMutation);
        assert_eq!(create.input_schema["required"], json!(["name", "team_id"]));
        assert_eq!(create.input_schema["additionalProperties"], json!(false));
        assert_eq!(
            create.input_schema["properties"]["owner_member_ids"]["items"],
            json!({"type": "string"})
        );
        let repos = tools
            .iter()
            .find(|t| t.name == "list_repositories")
            .unwrap();
        assert_eq!((repos.category.as_str(), repos.mutating), ("Git", false));
        assert_eq!(
            repos.input_schema,
            json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false})
        );
        let reply = tools
            .iter()
            .find(|t| t.name == "send_support_reply")
            .unwrap();
        assert_eq!(
            reply.effective_risk(),
            ar_core::RiskLevel::SensitiveMutation
        );
        assert_eq!(
            reply.input_schema["properties"]["reply_kind"]["enum"],
            json!(["answer", "clarify", "conversational", "confirmation"])
        );
    }

    #[tokio::test]
    async fn original_tools_execute_under_their_command_name() {
        let (url, seen) = server().await;
        let host = HostToolHost::from_app_config(&original_config(&url)).unwrap();
        let output = host
            .call(
                &ctx("pm"),
                "create_task",
                json!({"name": "Call back", "team_id": "T"}),
            )
            .await;
        // The stand-in answers only the names it knows; what matters is what it was sent.
        assert!(output.is_error);
        let (auth, body) = seen.lock().unwrap()[0].clone();
        assert_eq!(auth.as_deref(), Some("Bearer cmd-token"));
        assert_eq!(body["command_name"], "pm.create_task");
        assert_eq!(body["input"], json!({"name": "Call back", "team_id": "T"}));
        assert_eq!(body["meta"]["app_id"], "pm");
        let unknown = host.call(&ctx("pm"), "pm.create_task", json!({})).await;
        assert!(unknown.is_error && unknown.content.contains("unknown tool"));
    }

    #[test]
    fn an_empty_commands_list_offers_no_command() {
        let config = AppConfig::parse(
            "apps: [{app_id: a, command_provider: {base_url: 'https://h.example', commands: []}}]",
            &|_| None,
        )
        .unwrap();
        let host = HostToolHost::from_app_config(&config).unwrap();
        assert_eq!(host.catalog("a").len(), 2, "get_context and fetch_url only");
    }

    #[test]
    fn commands_cannot_shadow_runtime_tools() {
        let config = AppConfig::parse(
            "apps: [{app_id: a, command_provider: {base_url: 'https://h.example', commands: [{name: finish_turn}]}}]",
            &|_| None,
        )
        .unwrap();
        let err = HostToolHost::from_app_config(&config).unwrap_err();
        assert!(matches!(err, ToolsError::NameCollision { ref name, .. } if name == "finish_turn"));
        let config = AppConfig::parse(
            "apps: [{app_id: a, command_provider: {base_url: 'https://h.example', commands: [{name: fetch_url}]}}]",
            &|_| None,
        )
        .unwrap();
        let err = HostToolHost::from_app_config(&config).unwrap_err();
        assert!(matches!(err, ToolsError::NameCollision { ref name, .. } if name == "fetch_url"));
    }
}
