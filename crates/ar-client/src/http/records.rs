//! A run's records: messages, artifacts, interactions, tool calls, the run tool gateway, the
//! event history (v1) and the v2 event pages and stream state.

use ar_wire::{
    AgentRunArtifact, AgentRunInteraction, AgentRunMessage, AppendArtifactRequest,
    AppendMessageRequest, EventEnvelope, EventListResponse, RunExecutionInfo, RunToolCallRequest,
    StreamStateSnapshot, Tool, ToolCall, ToolCallResult, ToolListResponse,
};
use reqwest::Method;
use serde::de::DeserializeOwned;

use super::{Client, Error};

impl Client {
    /// `GET /v1/runs/{id}/{what}` with the app query.
    async fn run_get<T: DeserializeOwned>(&self, run_id: &str, what: &[&str]) -> Result<T, Error> {
        let mut segments = vec!["v1", "runs", run_id];
        segments.extend_from_slice(what);
        self.call(Method::GET, &segments, self.app_query(), None::<&()>)
            .await
    }

    /// `POST /v1/runs/{id}/messages`: adds a message to the run's transcript.
    pub async fn append_message(
        &self,
        run_id: &str,
        request: &AppendMessageRequest,
    ) -> Result<AgentRunMessage, Error> {
        self.call(
            Method::POST,
            &["v1", "runs", run_id, "messages"],
            self.app_query(),
            Some(request),
        )
        .await
    }

    /// `GET /v1/runs/{id}/messages`.
    pub async fn list_messages(&self, run_id: &str) -> Result<Vec<AgentRunMessage>, Error> {
        self.run_get(run_id, &["messages"]).await
    }

    /// `POST /v1/runs/{id}/artifacts`.
    pub async fn append_artifact(
        &self,
        run_id: &str,
        request: &AppendArtifactRequest,
    ) -> Result<AgentRunArtifact, Error> {
        self.call(
            Method::POST,
            &["v1", "runs", run_id, "artifacts"],
            self.app_query(),
            Some(request),
        )
        .await
    }

    /// `GET /v1/runs/{id}/artifacts`.
    pub async fn list_artifacts(&self, run_id: &str) -> Result<Vec<AgentRunArtifact>, Error> {
        self.run_get(run_id, &["artifacts"]).await
    }

    /// `GET /v1/runs/{id}/interactions`: approvals, questions and authentication requests.
    pub async fn list_interactions(&self, run_id: &str) -> Result<Vec<AgentRunInteraction>, Error> {
        self.run_get(run_id, &["interactions"]).await
    }

    /// `GET /v1/runs/{id}/tool-calls`.
    pub async fn list_tool_calls(&self, run_id: &str) -> Result<Vec<ToolCall>, Error> {
        self.run_get(run_id, &["tool-calls"]).await
    }

    /// `GET /v1/runs/{id}/events/history`: every persisted event, in sequence order.
    pub async fn list_run_events(&self, run_id: &str) -> Result<Vec<EventEnvelope>, Error> {
        self.run_get(run_id, &["events", "history"]).await
    }

    /// `GET /v1/runs/{id}/execution`.
    pub async fn get_run_execution(&self, run_id: &str) -> Result<RunExecutionInfo, Error> {
        self.run_get(run_id, &["execution"]).await
    }

    /// `GET /v1/runs/{id}/tools`: the run's effective tools.
    pub async fn list_run_tools(&self, run_id: &str) -> Result<Vec<Tool>, Error> {
        let list: ToolListResponse = self.run_get(run_id, &["tools"]).await?;
        Ok(list.tools)
    }

    /// `POST /v1/runs/{id}/tools`: calls one of the run's tools through its approval gate.
    pub async fn call_run_tool(
        &self,
        run_id: &str,
        request: &RunToolCallRequest,
    ) -> Result<ToolCallResult, Error> {
        self.call(
            Method::POST,
            &["v1", "runs", run_id, "tools"],
            self.app_query(),
            Some(request),
        )
        .await
    }

    /// `GET /v2/runs/{id}/events?after_sequence=N`: the persisted v2 events after the cursor
    /// (and, from 0, the stream-state snapshot). A v2 app's method.
    pub async fn list_v2_events(
        &self,
        run_id: &str,
        after_sequence: i64,
    ) -> Result<EventListResponse, Error> {
        let mut query = self.app_query();
        if after_sequence > 0 {
            query.push(("after_sequence", after_sequence.to_string()));
        }
        self.call(
            Method::GET,
            &["v2", "runs", run_id, "events"],
            query,
            None::<&()>,
        )
        .await
    }

    /// `GET /v2/runs/{id}/stream-state`: the authoritative materialised stream state.
    pub async fn get_v2_stream_state(&self, run_id: &str) -> Result<StreamStateSnapshot, Error> {
        self.call(
            Method::GET,
            &["v2", "runs", run_id, "stream-state"],
            self.app_query(),
            None::<&()>,
        )
        .await
    }
}
