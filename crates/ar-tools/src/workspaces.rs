//! `HttpWorkspaces`: the apps' `host_prepared` workspace providers, `POST {base_url}/prepare`,
//! `/finalize` and `/cleanup` with the contract's bodies and the app's bearer token.
//!
//! Answers are checked before the engine sees them: a lease needs an id and an absolute root;
//! finalize's `output_summary` must be an object. The URLs and the token never reach an error.

use std::collections::HashMap;
use std::time::Duration;

use ar_config::app::{WorkspaceProvider as ProviderConfig, WorkspaceTransport};
use ar_config::AppConfig;
use ar_core::secret::Secret;
use ar_core::workspace::{
    CleanupPolicy, CleanupRequest, FinalizeRequest, FinalizeResult, PrepareRequest, WorkspaceError,
    WorkspaceLease, WorkspaceMode, WorkspaceProvider, WorkspaceRun,
};
use ar_core::JsonMap;
use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::http::{self, ToolsError};

/// Default bound of `/prepare` (a host may copy or check out files).
pub const DEFAULT_PREPARE_TIMEOUT: Duration = Duration::from_secs(120);
/// Default bound of `/finalize` and `/cleanup`.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// A host's workspace endpoint: its base URL and bearer token.
#[derive(Clone)]
pub(crate) struct Endpoint {
    base_url: String,
    token: Option<Secret>,
}

/// Every app's `http` workspace provider, sharing one client.
pub struct HttpWorkspaces {
    client: reqwest::Client,
    apps: HashMap<String, Endpoint>,
    prepare_timeout: Duration,
    call_timeout: Duration,
}

impl std::fmt::Debug for HttpWorkspaces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut apps: Vec<_> = self.apps.keys().collect();
        apps.sort();
        f.debug_struct("HttpWorkspaces")
            .field("apps", &apps)
            .finish_non_exhaustive()
    }
}

impl HttpWorkspaces {
    /// The providers of every app that configures one with the `http` transport.
    pub fn from_app_config(config: &AppConfig) -> Result<Self, ToolsError> {
        let mut workspaces = HttpWorkspaces {
            client: http::client()?,
            apps: HashMap::new(),
            prepare_timeout: DEFAULT_PREPARE_TIMEOUT,
            call_timeout: DEFAULT_CALL_TIMEOUT,
        };
        for (app_id, app) in &config.apps {
            if let Some(provider) = &app.workspace_provider {
                workspaces.add(app_id, provider);
            }
        }
        Ok(workspaces)
    }

    /// Registers (or replaces) an app's provider; other transports are not served here.
    pub fn add(&mut self, app_id: &str, provider: &ProviderConfig) {
        if provider.transport != WorkspaceTransport::Http {
            return;
        }
        self.apps
            .insert(app_id.to_string(), Endpoint::new(provider));
    }

    /// Bounds of `/prepare` and of the other calls.
    pub fn with_timeouts(mut self, prepare: Duration, call: Duration) -> Self {
        self.prepare_timeout = prepare;
        self.call_timeout = call;
        self
    }

    pub fn is_empty(&self) -> bool {
        self.apps.is_empty()
    }

    async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        app_id: &str,
        step: &'static str,
        body: &B,
    ) -> Result<T, WorkspaceError> {
        let endpoint = self.apps.get(app_id).ok_or(WorkspaceError::NoProvider {
            app_id: app_id.to_string(),
            mode: WorkspaceMode::HostPrepared.as_str(),
        })?;
        let timeout = if step == "prepare" {
            self.prepare_timeout
        } else {
            self.call_timeout
        };
        endpoint.post(&self.client, step, timeout, body).await
    }
}

impl Endpoint {
    pub(crate) fn new(provider: &ProviderConfig) -> Self {
        Endpoint {
            base_url: provider.base_url.as_str().to_string(),
            token: provider.token.clone(),
        }
    }

    /// `POST {base_url}/{step}` with the bearer token; the answer decoded as `T`.
    pub(crate) async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        client: &reqwest::Client,
        step: &'static str,
        timeout: Duration,
        body: &B,
    ) -> Result<T, WorkspaceError> {
        let url = format!("{}/{step}", self.base_url.trim_end_matches('/'));
        let mut request = crate::http::traced(client.post(url))
            .timeout(timeout)
            .json(body);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token.expose());
        }
        let response = request.send().await.map_err(|err| {
            let detail = http::describe(&err);
            WorkspaceError::Unreachable {
                step,
                detail,
                cause: Box::new(err.without_url()),
            }
        })?;
        let status = response.status();
        let bytes =
            http::read_limited(response)
                .await
                .map_err(|err| WorkspaceError::BadAnswer {
                    step,
                    reason: err.to_string(),
                })?;
        if !status.is_success() {
            let snippet = http::snippet(&bytes);
            let detail = if snippet.is_empty() {
                String::new()
            } else {
                format!(": {snippet}")
            };
            return Err(WorkspaceError::Status {
                step,
                status: status.as_u16(),
                detail,
            });
        }
        // An empty body (204) reads as `null`: cleanup's answer carries nothing.
        let bytes: &[u8] = if bytes.is_empty() { b"null" } else { &bytes };
        ar_core::json::from_slice::<T>(bytes).map_err(|err| WorkspaceError::BadAnswer {
            step,
            reason: err.to_string(),
        })
    }
}

pub(crate) fn wire_lease(lease: &WorkspaceLease) -> ar_wire::WorkspaceLease {
    ar_wire::WorkspaceLease {
        id: lease.id.clone(),
        provider: lease.provider.clone(),
        root_path: lease.root_path.clone(),
        cleanup_policy: lease.cleanup_policy.clone(),
        metadata: lease.metadata.clone(),
    }
}

/// The lease a provider answered, checked: an id, an absolute root, a known cleanup policy.
fn checked_lease(lease: ar_wire::WorkspaceLease) -> Result<WorkspaceLease, WorkspaceError> {
    let bad = |reason: String| WorkspaceError::BadAnswer {
        step: "prepare",
        reason,
    };
    if lease.id.trim().is_empty() {
        return Err(bad("the lease has no id".into()));
    }
    if !std::path::Path::new(&lease.root_path).is_absolute() {
        return Err(bad(format!(
            "the lease's root_path {:?} is not an absolute path",
            lease.root_path
        )));
    }
    if CleanupPolicy::parse(&lease.cleanup_policy).is_none() {
        return Err(bad(format!(
            "unknown cleanup_policy {:?} (expected always, on_terminal or manual)",
            lease.cleanup_policy
        )));
    }
    Ok(WorkspaceLease {
        id: lease.id,
        provider: lease.provider,
        root_path: lease.root_path,
        cleanup_policy: lease.cleanup_policy,
        metadata: lease.metadata,
    })
}

/// The common fields of the contract's bodies.
pub(crate) struct Common {
    pub(crate) app_id: String,
    pub(crate) run_id: String,
    pub(crate) agent_id: String,
    pub(crate) runtime_kind: String,
    pub(crate) target: ar_wire::target::TargetRef,
}

/// The contract's finalize body, shared by both transports (`repository`: the redacted spec).
pub(crate) fn finalize_body(
    request: &FinalizeRequest,
    repository: Option<ar_wire::host::RepositoryWorkspaceSpec>,
    output_summary: JsonMap,
) -> ar_wire::host::FinalizeWorkspaceRequest {
    let c = common(&request.run);
    ar_wire::host::FinalizeWorkspaceRequest {
        app_id: c.app_id,
        run_id: c.run_id,
        agent_id: c.agent_id,
        runtime_kind: c.runtime_kind,
        target: c.target,
        lease: wire_lease(&request.lease),
        repository,
        outcome: request.outcome.as_str().to_string(),
        error_message: request.error_message.clone(),
        output_summary: Some(Value::Object(output_summary)),
    }
}

/// The contract's cleanup body, shared by both transports.
pub(crate) fn cleanup_body(
    request: &CleanupRequest,
    repository: Option<ar_wire::host::RepositoryWorkspaceSpec>,
) -> ar_wire::host::CleanupWorkspaceRequest {
    let c = common(&request.run);
    ar_wire::host::CleanupWorkspaceRequest {
        app_id: c.app_id,
        run_id: c.run_id,
        agent_id: c.agent_id,
        runtime_kind: c.runtime_kind,
        target: c.target,
        lease: wire_lease(&request.lease),
        repository,
        reason: request.reason.as_str().to_string(),
    }
}

pub(crate) fn common(run: &WorkspaceRun) -> Common {
    Common {
        app_id: run.app_id.clone(),
        run_id: run.run_id.clone(),
        agent_id: run.agent_id.clone(),
        runtime_kind: run.runtime_kind.clone(),
        target: http::wire_target(&run.target),
    }
}

pub(crate) fn prepare_body(request: &PrepareRequest) -> ar_wire::host::PrepareWorkspaceRequest {
    let c = common(&request.run);
    ar_wire::host::PrepareWorkspaceRequest {
        app_id: c.app_id,
        run_id: c.run_id,
        agent_id: c.agent_id,
        runtime_kind: c.runtime_kind,
        target: c.target,
        target_context: request.target_context.as_ref().map(|context| {
            ar_wire::host::TargetContext {
                target: http::wire_target(&context.target),
                summary: context.summary.clone(),
                data: context.data.clone(),
            }
        }),
        instructions: request.instructions.clone(),
        trigger: request.trigger.clone(),
        metadata: request.metadata.clone(),
        workspace_mode: request.mode.as_str().to_string(),
        execution_config: request.execution_config.clone(),
    }
}

#[async_trait]
impl WorkspaceProvider for HttpWorkspaces {
    fn supports(&self, app_id: &str, mode: WorkspaceMode) -> bool {
        mode == WorkspaceMode::HostPrepared && self.apps.contains_key(app_id)
    }

    async fn prepare(&self, request: &PrepareRequest) -> Result<WorkspaceLease, WorkspaceError> {
        let body = prepare_body(request);
        let lease: ar_wire::WorkspaceLease =
            self.post(&request.run.app_id, "prepare", &body).await?;
        checked_lease(lease)
    }

    async fn finalize(&self, request: &FinalizeRequest) -> Result<FinalizeResult, WorkspaceError> {
        let body = finalize_body(request, None, request.output_summary.clone());
        let answer: ar_wire::host::FinalizeWorkspaceResult =
            self.post(&request.run.app_id, "finalize", &body).await?;
        let output_summary = match answer.output_summary {
            None | Some(Value::Null) => JsonMap::new(),
            Some(Value::Object(map)) => map,
            Some(_) => {
                return Err(WorkspaceError::BadAnswer {
                    step: "finalize",
                    reason: "output_summary is not a JSON object".into(),
                })
            }
        };
        Ok(FinalizeResult {
            output_summary,
            metadata: answer.metadata,
        })
    }

    async fn cleanup(&self, request: &CleanupRequest) -> Result<(), WorkspaceError> {
        let body = cleanup_body(request, None);
        // The contract's answer is `{}`; whatever JSON the host sends is accepted.
        let _: Value = self.post(&request.run.app_id, "cleanup", &body).await?;
        Ok(())
    }
}

/// The providers of every mode, each call handed to the one that supports its app and mode.
#[derive(Default)]
pub struct WorkspaceRouter {
    providers: Vec<std::sync::Arc<dyn WorkspaceProvider>>,
}

impl WorkspaceRouter {
    pub fn with(mut self, provider: std::sync::Arc<dyn WorkspaceProvider>) -> Self {
        self.providers.push(provider);
        self
    }

    fn route(
        &self,
        app_id: &str,
        mode: WorkspaceMode,
    ) -> Result<&std::sync::Arc<dyn WorkspaceProvider>, WorkspaceError> {
        self.providers
            .iter()
            .find(|provider| provider.supports(app_id, mode))
            .ok_or(WorkspaceError::NoProvider {
                app_id: app_id.to_string(),
                mode: mode.as_str(),
            })
    }
}

#[async_trait]
impl WorkspaceProvider for WorkspaceRouter {
    fn supports(&self, app_id: &str, mode: WorkspaceMode) -> bool {
        self.route(app_id, mode).is_ok()
    }

    async fn prepare(&self, request: &PrepareRequest) -> Result<WorkspaceLease, WorkspaceError> {
        self.route(&request.run.app_id, request.mode)?
            .prepare(request)
            .await
    }

    async fn finalize(&self, request: &FinalizeRequest) -> Result<FinalizeResult, WorkspaceError> {
        self.route(&request.run.app_id, request.mode)?
            .finalize(request)
            .await
    }

    async fn cleanup(&self, request: &CleanupRequest) -> Result<(), WorkspaceError> {
        self.route(&request.run.app_id, request.mode)?
            .cleanup(request)
            .await
    }

    async fn observe(&self, run: &WorkspaceRun, lease: &WorkspaceLease) -> Option<JsonMap> {
        // Only repository checkouts have a state of their own to report.
        self.route(&run.app_id, WorkspaceMode::Repository)
            .ok()?
            .observe(run, lease)
            .await
    }

    async fn validate(
        &self,
        run: &WorkspaceRun,
        mode: WorkspaceMode,
        lease: &WorkspaceLease,
    ) -> Result<(), WorkspaceError> {
        self.route(&run.app_id, mode)?
            .validate(run, mode, lease)
            .await
    }

    fn tools(
        &self,
        run: &WorkspaceRun,
        lease: &WorkspaceLease,
        access: ar_core::workspace::WorkspaceAccess,
    ) -> Option<std::sync::Arc<dyn ar_core::workspace::RunToolHost>> {
        // Only repository leases carry tools of their provider.
        self.route(&run.app_id, WorkspaceMode::Repository)
            .ok()?
            .tools(run, lease, access)
    }
}

#[cfg(test)]
mod tests;
