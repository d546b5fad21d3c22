//! `RunEvent`, `EventType`, `Status`, `State` and `ResponseMetadata` with their exact JSON forms and validation.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::consts::*;

/// The kind of a run event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventType {
    /// The run started (data: the agent).
    Started,
    /// A raw stdout line the provider did not classify.
    Stdout,
    /// A stderr line.
    Stderr,
    /// An assistant message.
    Message,
    /// A tool call; data is `{"name","summary"}`.
    Tool,
    /// A subagent; data is `{"description","agent"}`.
    Subagent,
    /// An error; terminal on the remote protocol.
    Error,
    /// The process exited; `code` carries the exit code. Always the last event of a run.
    Exited,
}

/// Token usage reported by the provider.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProviderUsage {
    /// Input tokens.
    pub input_tokens: i64,
    /// Cached input tokens (≤ input).
    pub cached_input_tokens: i64,
    /// Output tokens (> 0 for a valid response).
    pub output_tokens: i64,
    /// Reasoning tokens (≤ output).
    pub reasoning_tokens: i64,
}

/// Evidence about what answered a subscription turn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ResponseMetadata {
    /// Provider thread id (codex `thread_id`).
    pub provider_thread_id: String,
    /// The model asked for.
    pub requested_model: String,
    /// Always `unknown`: codex exec does not expose it.
    pub resolved_model: String,
    /// Adapter id from the policy.
    pub selected_adapter_id: String,
    /// Adapter revision from the policy.
    pub selected_adapter_revision: String,
    /// Codex version from the policy.
    pub selected_codex_version: String,
    /// Codex executable revision from the policy.
    pub selected_codex_executable_revision: String,
    /// Codex schema revision from the policy.
    pub selected_codex_schema_revision: String,
    /// Adapter id that ran.
    pub observed_adapter_id: String,
    /// Adapter revision that ran.
    pub observed_adapter_revision: String,
    /// Codex version that ran.
    pub observed_codex_version: String,
    /// Codex executable revision that ran.
    pub observed_codex_executable_revision: String,
    /// Codex schema revision that ran.
    pub observed_codex_schema_revision: String,
    /// `completed`.
    pub terminal_status: String,
    /// `codex_exec_jsonl`.
    pub usage_source: String,
    /// Token counts.
    pub usage: ProviderUsage,
}

/// Why a `ResponseMetadata` is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid response metadata: {0}")]
pub struct ResponseMetadataError(pub String);

impl ResponseMetadata {
    /// Observed identities must equal the selected ones, the resolved model must be
    /// `unknown`, the status `completed`, the usage source `codex_exec_jsonl`, output
    /// tokens above 0, cached ≤ input, reasoning ≤ output.
    pub fn validate(&self) -> Result<(), ResponseMetadataError> {
        let err = |m: String| Err(ResponseMetadataError(m));
        if self.provider_thread_id.trim().is_empty() {
            return err("provider_thread_id is empty".into());
        }
        if self.requested_model.trim().is_empty() {
            return err("requested_model is empty".into());
        }
        if self.resolved_model != UNKNOWN_PROVIDER_IDENTITY {
            return err(format!(
                "resolved_model must be {UNKNOWN_PROVIDER_IDENTITY:?}, got {:?}",
                self.resolved_model
            ));
        }
        self.validate_selected()?;
        self.validate_observed()?;
        if self.terminal_status != TERMINAL_STATUS_COMPLETED {
            return err(format!(
                "terminal_status must be {TERMINAL_STATUS_COMPLETED:?}, got {:?}",
                self.terminal_status
            ));
        }
        if self.usage_source != USAGE_SOURCE_CODEX_EXEC_JSONL {
            return err(format!(
                "usage_source must be {USAGE_SOURCE_CODEX_EXEC_JSONL:?}, got {:?}",
                self.usage_source
            ));
        }
        self.usage.validate()
    }

    /// The selected adapter is the subscription adapter, pinned by SHA-256 revisions and a
    /// codex version.
    fn validate_selected(&self) -> Result<(), ResponseMetadataError> {
        let err = |m: String| Err(ResponseMetadataError(m));
        if self.selected_adapter_id != ADAPTER_CODEX_SUBSCRIPTION {
            return err(format!(
                "selected_adapter_id must be {ADAPTER_CODEX_SUBSCRIPTION:?}"
            ));
        }
        for (name, v) in [
            ("selected_adapter_revision", &self.selected_adapter_revision),
            (
                "selected_codex_executable_revision",
                &self.selected_codex_executable_revision,
            ),
            (
                "selected_codex_schema_revision",
                &self.selected_codex_schema_revision,
            ),
        ] {
            if !crate::spec::is_sha256_hex(v) {
                return err(format!("{name} must be a lowercase SHA-256 hex string"));
            }
        }
        if self.selected_codex_version.trim().is_empty() {
            return err("selected_codex_version is empty".into());
        }
        Ok(())
    }

    /// Every observed identity equals the selected one.
    fn validate_observed(&self) -> Result<(), ResponseMetadataError> {
        let pairs = [
            (
                "adapter_id",
                &self.selected_adapter_id,
                &self.observed_adapter_id,
            ),
            (
                "adapter_revision",
                &self.selected_adapter_revision,
                &self.observed_adapter_revision,
            ),
            (
                "codex_version",
                &self.selected_codex_version,
                &self.observed_codex_version,
            ),
            (
                "codex_executable_revision",
                &self.selected_codex_executable_revision,
                &self.observed_codex_executable_revision,
            ),
            (
                "codex_schema_revision",
                &self.selected_codex_schema_revision,
                &self.observed_codex_schema_revision,
            ),
        ];
        for (name, sel, obs) in pairs {
            if sel != obs {
                return Err(ResponseMetadataError(format!(
                    "observed_{name} {obs:?} differs from selected_{name} {sel:?}"
                )));
            }
        }
        Ok(())
    }
}

impl ProviderUsage {
    /// No negative counts, output above 0, cached ≤ input, reasoning ≤ output.
    fn validate(&self) -> Result<(), ResponseMetadataError> {
        let err = |m: &str| Err(ResponseMetadataError(m.to_string()));
        if self.input_tokens < 0 || self.cached_input_tokens < 0 || self.reasoning_tokens < 0 {
            return err("token counts must not be negative");
        }
        if self.output_tokens <= 0 {
            return err("output_tokens must be above 0");
        }
        if self.cached_input_tokens > self.input_tokens {
            return err("cached_input_tokens exceeds input_tokens");
        }
        if self.reasoning_tokens > self.output_tokens {
            return err("reasoning_tokens exceeds output_tokens");
        }
        Ok(())
    }
}

fn is_zero(c: &i32) -> bool {
    *c == 0
}

/// One event of a run: `{run_id, type, time, data?, code?, error_code?, response?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEvent {
    /// The run.
    pub run_id: String,
    /// The kind.
    #[serde(rename = "type")]
    pub kind: EventType,
    /// When it happened.
    pub time: DateTime<Utc>,
    /// Payload (text, or JSON for `tool`/`subagent`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub data: String,
    /// Exit code for `exited` (omitted when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub code: i32,
    /// Machine-readable error code (`chat_authority_violation`, …).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error_code: String,
    /// Response evidence of a subscription turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<ResponseMetadata>,
    /// Our extension, on `exited`: what the turn's model egress proxy saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<crate::egress::EgressReport>,
}

impl RunEvent {
    /// A new event stamped now.
    pub fn new(run_id: impl Into<String>, kind: EventType, data: impl Into<String>) -> Self {
        Self {
            run_id: run_id.into(),
            kind,
            time: Utc::now(),
            data: data.into(),
            code: 0,
            error_code: String::new(),
            response: None,
            egress: None,
        }
    }

    /// An `exited` event with a code.
    pub fn exited(run_id: impl Into<String>, code: i32) -> Self {
        let mut e = Self::new(run_id, EventType::Exited, "");
        e.code = code;
        e
    }

    /// The `exited` event of a cancelled run (`error_code` = `canceled`).
    pub fn exited_canceled(run_id: impl Into<String>, code: i32) -> Self {
        let mut e = Self::exited(run_id, code);
        e.error_code = EXIT_CODE_CANCELED.to_string();
        e
    }

    /// An `error` event with an optional code.
    pub fn error(run_id: impl Into<String>, message: impl Into<String>, code: &str) -> Self {
        let mut e = Self::new(run_id, EventType::Error, message);
        e.error_code = code.to_string();
        e
    }

    /// A `tool` event with `{"name","summary"}`.
    pub fn tool(run_id: impl Into<String>, name: &str, summary: &str) -> Self {
        Self::new(
            run_id,
            EventType::Tool,
            serde_json::json!({"name": name, "summary": summary}).to_string(),
        )
    }

    /// A `subagent` event with `{"description","agent"}`.
    pub fn subagent(run_id: impl Into<String>, description: &str, agent: &str) -> Self {
        Self::new(
            run_id,
            EventType::Subagent,
            serde_json::json!({"description": description, "agent": agent}).to_string(),
        )
    }
}

/// The state of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Still going.
    Running,
    /// Ended with exit code 0 (or the lane's success rule).
    Succeeded,
    /// Ended badly.
    Failed,
    /// Ended by `cancel`.
    Canceled,
}

/// `{state, exit_code, err?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// The state.
    pub state: State,
    /// The exit code (-1 when killed by a signal).
    pub exit_code: i32,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub err: String,
}

impl Status {
    /// A running status.
    pub fn running() -> Self {
        Self {
            state: State::Running,
            exit_code: 0,
            err: String::new(),
        }
    }
    /// A finished status.
    pub fn ended(state: State, exit_code: i32, err: impl Into<String>) -> Self {
        Self {
            state,
            exit_code,
            err: err.into(),
        }
    }
    /// True for succeeded, failed and canceled.
    pub fn terminal(&self) -> bool {
        self.state != State::Running
    }
}
