//! Runs: start, read, list and search, and the control methods (resume, approve, request
//! changes, cancel, pause) and credential rotation.

use ar_wire::{
    AgentRun, ResumeRunRequest, RunMCPCredentialUpdate, RunModelCredentialUpdate, RunPage,
    StartRunRequest, UpdateRunMCPCredentialRequest, UpdateRunModelCredentialRequest,
};
use reqwest::Method;

use super::{Client, Error};

/// What [`Client::search_runs`] looks for (the SDK's `RunSearchRequest`); empty and zero
/// fields are left out of the query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSearch {
    /// Free text (`q`).
    pub query: String,
    /// A run status (`queued`, `running`, `paused`, …).
    pub status: String,
    /// Page size (the service's default when 0).
    pub limit: u32,
    /// Offset into the matches.
    pub offset: u32,
}

impl Client {
    /// `POST /v1/runs` (202); the client's app when the request names none.
    pub async fn start_run(&self, mut request: StartRunRequest) -> Result<AgentRun, Error> {
        if request.app_id.trim().is_empty() {
            request.app_id = self.app_id().to_string();
        }
        self.call(Method::POST, &["v1", "runs"], Vec::new(), Some(&request))
            .await
    }

    /// `GET /v1/runs/{id}`.
    pub async fn get_run(&self, run_id: &str) -> Result<AgentRun, Error> {
        self.call(
            Method::GET,
            &["v1", "runs", run_id],
            self.app_query(),
            None::<&()>,
        )
        .await
    }

    /// `GET /v1/runs`: the app's runs.
    pub async fn list_runs(&self) -> Result<Vec<AgentRun>, Error> {
        self.call(Method::GET, &["v1", "runs"], self.app_query(), None::<&()>)
            .await
    }

    /// `GET /v1/runs/search`: a page of the app's runs matching `search`.
    pub async fn search_runs(&self, search: &RunSearch) -> Result<RunPage, Error> {
        let mut query = self.app_query();
        for (name, value) in [("q", &search.query), ("status", &search.status)] {
            if !value.trim().is_empty() {
                query.push((name, value.trim().to_string()));
            }
        }
        for (name, value) in [("limit", search.limit), ("offset", search.offset)] {
            if value > 0 {
                query.push((name, value.to_string()));
            }
        }
        self.call(Method::GET, &["v1", "runs", "search"], query, None::<&()>)
            .await
    }

    /// `POST /v1/runs/{id}/resume`: answers a pause (reply, approve, request changes,
    /// continue, auth completed).
    pub async fn resume_run(
        &self,
        run_id: &str,
        request: &ResumeRunRequest,
    ) -> Result<AgentRun, Error> {
        self.call(
            Method::POST,
            &["v1", "runs", run_id, "resume"],
            self.app_query(),
            Some(request),
        )
        .await
    }

    /// Approves the pending approval (a resume with intent `approve`).
    pub async fn approve_run(
        &self,
        run_id: &str,
        external_actor_id: Option<&str>,
    ) -> Result<AgentRun, Error> {
        let request = ResumeRunRequest {
            intent: ar_wire::runs::resume_intent::APPROVE.into(),
            external_actor_id: external_actor_id.unwrap_or_default().trim().into(),
            ..Default::default()
        };
        self.resume_run(run_id, &request).await
    }

    /// Sends the pending approval back with `content` (a resume with intent `request_changes`).
    pub async fn request_changes(
        &self,
        run_id: &str,
        content: &str,
        external_actor_id: Option<&str>,
    ) -> Result<AgentRun, Error> {
        let request = ResumeRunRequest {
            intent: ar_wire::runs::resume_intent::REQUEST_CHANGES.into(),
            content: content.into(),
            external_actor_id: external_actor_id.unwrap_or_default().trim().into(),
            ..Default::default()
        };
        self.resume_run(run_id, &request).await
    }

    /// `POST /v1/runs/{id}/cancel`.
    pub async fn cancel_run(&self, run_id: &str) -> Result<AgentRun, Error> {
        self.control(run_id, "cancel").await
    }

    /// `POST /v1/runs/{id}/pause`: the run stops at its next checkpoint; the run returned may
    /// still be `running` until it does.
    pub async fn pause_run(&self, run_id: &str) -> Result<AgentRun, Error> {
        self.control(run_id, "pause").await
    }

    async fn control(&self, run_id: &str, action: &str) -> Result<AgentRun, Error> {
        self.call(
            Method::POST,
            &["v1", "runs", run_id, action],
            self.app_query(),
            None::<&()>,
        )
        .await
    }

    /// `PUT /v1/runs/{id}/mcp-servers/{server}/credential`: rotates the credential of an MCP
    /// server attached when the run started (before resuming a run paused for authentication).
    pub async fn update_run_mcp_credential(
        &self,
        run_id: &str,
        server_id: &str,
        request: &UpdateRunMCPCredentialRequest,
    ) -> Result<RunMCPCredentialUpdate, Error> {
        self.call(
            Method::PUT,
            &["v1", "runs", run_id, "mcp-servers", server_id, "credential"],
            self.app_query(),
            Some(request),
        )
        .await
    }

    /// `PUT /v1/runs/{id}/model-credential`: replaces the run's model credential.
    pub async fn update_run_model_credential(
        &self,
        run_id: &str,
        request: &UpdateRunModelCredentialRequest,
    ) -> Result<RunModelCredentialUpdate, Error> {
        self.call(
            Method::PUT,
            &["v1", "runs", run_id, "model-credential"],
            self.app_query(),
            Some(request),
        )
        .await
    }

    /// `DELETE /v1/runs/{id}/model-credential`: no further model requests on this run.
    pub async fn revoke_run_model_credential(&self, run_id: &str) -> Result<(), Error> {
        self.call_empty(
            Method::DELETE,
            &["v1", "runs", run_id, "model-credential"],
            self.app_query(),
        )
        .await
    }
}
