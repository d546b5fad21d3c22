//! The service and its agents: health, capabilities, app health, and the agent methods.

use ar_wire::{Agent, AppSummary, Capabilities, HealthResponse};
use reqwest::Method;

use super::{Client, Error};

impl Client {
    /// `GET /healthz` (unauthenticated liveness): `{"status":"ok"}`.
    pub async fn health(&self) -> Result<HealthResponse, Error> {
        self.call(Method::GET, &["healthz"], Vec::new(), None::<&()>)
            .await
    }

    /// `GET /v1/capabilities`: runtime kinds, providers, store, tools, run MCP, nodes.
    pub async fn get_capabilities(&self) -> Result<Capabilities, Error> {
        self.call(
            Method::GET,
            &["v1", "capabilities"],
            self.app_query(),
            None::<&()>,
        )
        .await
    }

    /// `GET /v1/app-health`: the app's endpoints and the health of its components.
    pub async fn get_app_health(&self) -> Result<AppSummary, Error> {
        self.call(
            Method::GET,
            &["v1", "app-health"],
            self.app_query(),
            None::<&()>,
        )
        .await
    }

    /// `POST /v1/agents` (201); the client's app when the agent names none.
    pub async fn create_agent(&self, mut agent: Agent) -> Result<Agent, Error> {
        if agent.app_id.trim().is_empty() {
            agent.app_id = self.app_id().to_string();
        }
        self.call(Method::POST, &["v1", "agents"], Vec::new(), Some(&agent))
            .await
    }

    /// `GET /v1/agents/{id}`.
    pub async fn get_agent(&self, agent_id: &str) -> Result<Agent, Error> {
        self.call(
            Method::GET,
            &["v1", "agents", agent_id],
            self.app_query(),
            None::<&()>,
        )
        .await
    }

    /// `GET /v1/agents`: the app's agents.
    pub async fn list_agents(&self) -> Result<Vec<Agent>, Error> {
        self.call(
            Method::GET,
            &["v1", "agents"],
            self.app_query(),
            None::<&()>,
        )
        .await
    }

    /// `PUT /v1/agents/{id}`: creates (201) or replaces (200) the agent `agent_id`.
    pub async fn update_agent(&self, agent_id: &str, mut agent: Agent) -> Result<Agent, Error> {
        if agent.app_id.trim().is_empty() {
            agent.app_id = self.app_id().to_string();
        }
        agent.id = agent_id.trim().to_string();
        self.call(
            Method::PUT,
            &["v1", "agents", &agent.id],
            self.app_query(),
            Some(&agent),
        )
        .await
    }

    /// [`Client::update_agent`] under the agent's own id.
    pub async fn upsert_agent(&self, agent: Agent) -> Result<Agent, Error> {
        let id = agent.id.clone();
        self.update_agent(&id, agent).await
    }
}
