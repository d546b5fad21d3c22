//! `RunSpec` and `TextOnlyPolicy`: the dispatch request, its exact JSON form and `validate_authority`.
//!
//! Wire rules (Fort `core/runtime` compatible):
//! - the legacy fields use their Go names: `RunID`, `Agent`, `Model`, `Prompt`, `Workdir`,
//!   `Env` (list of `KEY=VALUE`, `null` when empty) and `Machine`, always emitted;
//! - `run_id` is accepted as an alias of `RunID` on input; both present and different is an error;
//! - `profile` is emitted only when `authority` is set, and rejected on input without one;
//! - `authority`, `runtime_contract`, `text_only_policy` are omitted when empty;
//! - `ExpectedPolicyRevision` never appears on the wire;
//! - decoding rejects unknown fields, duplicate fields and trailing JSON.

use serde::{Deserialize, Serialize};

use crate::consts::*;

/// Errors decoding or validating a spec. `code()` gives the dispatch error code where one applies.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The JSON did not decode (syntax, unknown field, trailing data, wrong type).
    #[error("invalid run spec: {0}")]
    Decode(String),
    /// `RunID` and `run_id` were both given and differ.
    #[error("invalid run spec: RunID {run_id:?} conflicts with run_id {alias:?}")]
    RunIdConflict {
        /// `RunID`.
        run_id: String,
        /// `run_id`.
        alias: String,
    },
    /// `profile` was given without `authority`.
    #[error("invalid run spec: profile requires authority")]
    ProfileWithoutAuthority,
    /// The authority fields break a rule of `validate_authority`.
    #[error("chat_policy_unavailable: {0}")]
    Authority(String),
}

impl SpecError {
    /// The run error code for this failure (`chat_policy_unavailable` for authority failures).
    pub fn code(&self) -> &'static str {
        match self {
            SpecError::Authority(_) => ERROR_CHAT_POLICY_UNAVAILABLE,
            _ => "invalid_spec",
        }
    }
}

/// The authority a run executes under. Empty means the legacy lane.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AuthorityMode(pub String);

impl AuthorityMode {
    /// The isolated ChatGPT-subscription chat lane.
    pub fn chat_subscription_isolated_v1() -> Self {
        Self(AUTHORITY_CHAT_SUBSCRIPTION_ISOLATED_V1.to_string())
    }
    /// True for the legacy (empty) authority.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// The raw value.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The pinned policy of a text-only subscription run (JSON snake_case, all fields emitted).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TextOnlyPolicy {
    /// `codex-subscription-chat-v1`.
    pub policy_id: String,
    /// Lowercase SHA-256 hex.
    pub policy_revision: String,
    /// The model; equals the spec's `Model`.
    pub model: String,
    /// `medium`.
    pub reasoning_effort: String,
    /// `current_turn`.
    pub reasoning_context: String,
    /// 120000.
    pub request_timeout_millis: i64,
    /// Lowercase SHA-256 hex of the pinned developer instruction.
    pub developer_instruction_revision: String,
    /// `chatgpt`.
    pub account_type: String,
    /// One of [`KNOWN_ACCOUNT_PLANS`].
    pub account_plan: String,
    /// `model.chat.text-only.codex-subscription`.
    pub selected_adapter_id: String,
    /// Lowercase SHA-256 hex.
    pub selected_adapter_revision: String,
    /// The pinned codex version string.
    pub selected_codex_version: String,
    /// Lowercase SHA-256 hex of the codex executable.
    pub selected_codex_executable_revision: String,
    /// Lowercase SHA-256 hex of the codex schema.
    pub selected_codex_schema_revision: String,
    /// `ephemeral`.
    pub thread_mode: String,
    /// `readOnly`.
    pub sandbox_mode: String,
    /// `never`.
    pub approval_policy: String,
    /// `empty_per_target`.
    pub workdir_mode: String,
    /// `none`.
    pub dynamic_tools_mode: String,
    /// `none`.
    pub mcp_mode: String,
    /// `deny_and_fail`.
    pub command_policy: String,
    /// `deny_and_fail`.
    pub file_read_policy: String,
    /// Lowercase SHA-256 hex.
    pub isolation_revision: String,
}

/// What to run. See the module docs for the JSON form.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSpec {
    /// Caller-chosen run id; runtimes mint one when empty.
    pub run_id: String,
    /// Which agent: `codex`, `claude`, `opencode`, `command`, `command:NAME`, `codex-subscription`, …
    pub agent: String,
    /// Model name handed to the agent (empty = the agent's default).
    pub model: String,
    /// The prompt (for `command`, the argv: a JSON array of strings or a shell-like word list).
    pub prompt: String,
    /// Absolute working directory (empty = the runtime's own per-run directory).
    pub workdir: String,
    /// Extra environment, `KEY=VALUE` each.
    pub env: Vec<String>,
    /// Target machine for the cluster router (empty = local).
    pub machine: String,
    /// Profile (`codex-subscription:<model>`); only with an authority.
    pub profile: String,
    /// Authority; empty = legacy lane.
    pub authority: AuthorityMode,
    /// Runtime contract (`codex_subscription_exec_v1`).
    pub runtime_contract: String,
    /// Text-only policy for the subscription lane.
    pub text_only_policy: Option<TextOnlyPolicy>,
    /// In-process only: the policy revision the caller expects. Never serialized.
    pub expected_policy_revision: String,
    /// Our extension: how the runtime sets up a coding-agent CLI turn (model route through
    /// the egress proxy, permissions, MCP bridge). Emitted only when set; legacy lane only.
    pub turn: Option<crate::turn::TurnSetup>,
}

#[derive(Serialize)]
struct RunSpecOut<'a> {
    #[serde(rename = "RunID")]
    run_id: &'a str,
    #[serde(rename = "Agent")]
    agent: &'a str,
    #[serde(rename = "Model")]
    model: &'a str,
    #[serde(rename = "Prompt")]
    prompt: &'a str,
    #[serde(rename = "Workdir")]
    workdir: &'a str,
    #[serde(rename = "Env")]
    env: Option<&'a [String]>,
    #[serde(rename = "Machine")]
    machine: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    profile: Option<&'a str>,
    #[serde(skip_serializing_if = "str::is_empty")]
    authority: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    runtime_contract: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    text_only_policy: Option<&'a TextOnlyPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    turn: Option<&'a crate::turn::TurnSetup>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunSpecIn {
    #[serde(rename = "RunID", default)]
    run_id: Option<String>,
    #[serde(rename = "run_id", default)]
    run_id_alias: Option<String>,
    #[serde(rename = "Agent", default)]
    agent: Option<String>,
    #[serde(rename = "Model", default)]
    model: Option<String>,
    #[serde(rename = "Prompt", default)]
    prompt: Option<String>,
    #[serde(rename = "Workdir", default)]
    workdir: Option<String>,
    #[serde(rename = "Env", default)]
    env: Option<Vec<String>>,
    #[serde(rename = "Machine", default)]
    machine: Option<String>,
    #[serde(default)]
    profile: Option<String>,
    #[serde(default)]
    authority: Option<String>,
    #[serde(default)]
    runtime_contract: Option<String>,
    #[serde(default)]
    text_only_policy: Option<TextOnlyPolicy>,
    #[serde(default)]
    turn: Option<crate::turn::TurnSetup>,
}

impl TryFrom<RunSpecIn> for RunSpec {
    type Error = SpecError;
    fn try_from(w: RunSpecIn) -> Result<Self, SpecError> {
        let run_id = w.run_id.unwrap_or_default();
        let alias = w.run_id_alias.unwrap_or_default();
        let run_id = match (run_id.is_empty(), alias.is_empty()) {
            (_, true) => run_id,
            (true, false) => alias,
            (false, false) if run_id == alias => run_id,
            (false, false) => return Err(SpecError::RunIdConflict { run_id, alias }),
        };
        let authority = AuthorityMode(w.authority.unwrap_or_default());
        let profile = w.profile.unwrap_or_default();
        if !profile.is_empty() && authority.is_empty() {
            return Err(SpecError::ProfileWithoutAuthority);
        }
        Ok(RunSpec {
            run_id,
            agent: w.agent.unwrap_or_default(),
            model: w.model.unwrap_or_default(),
            prompt: w.prompt.unwrap_or_default(),
            workdir: w.workdir.unwrap_or_default(),
            env: w.env.unwrap_or_default(),
            machine: w.machine.unwrap_or_default(),
            profile,
            authority,
            runtime_contract: w.runtime_contract.unwrap_or_default(),
            text_only_policy: w.text_only_policy,
            expected_policy_revision: String::new(),
            turn: w.turn,
        })
    }
}

impl Serialize for RunSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        RunSpecOut {
            run_id: &self.run_id,
            agent: &self.agent,
            model: &self.model,
            prompt: &self.prompt,
            workdir: &self.workdir,
            env: if self.env.is_empty() {
                None
            } else {
                Some(&self.env)
            },
            machine: &self.machine,
            profile: if self.authority.is_empty() {
                None
            } else {
                Some(&self.profile)
            },
            authority: self.authority.as_str(),
            runtime_contract: &self.runtime_contract,
            text_only_policy: self.text_only_policy.as_ref(),
            turn: self.turn.as_ref(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for RunSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = RunSpecIn::deserialize(d)?;
        RunSpec::try_from(w).map_err(serde::de::Error::custom)
    }
}

impl RunSpec {
    /// Strict decode: unknown fields, duplicates, trailing JSON, alias conflicts and a
    /// profile without authority are all errors.
    pub fn from_json(bytes: &[u8]) -> Result<Self, SpecError> {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let w = RunSpecIn::deserialize(&mut de).map_err(|e| SpecError::Decode(e.to_string()))?;
        de.end().map_err(|e| SpecError::Decode(e.to_string()))?;
        RunSpec::try_from(w)
    }

    /// The wire JSON.
    pub fn to_json(&self) -> String {
        // Serializing plain strings and vectors into a String cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Checks that the authority fields are coherent. The legacy lane (empty authority)
    /// may carry none of the subscription fields; the subscription lane must carry all of
    /// them, pinned to the constants, with `Workdir` and `Env` empty.
    pub fn validate_authority(&self) -> Result<(), SpecError> {
        let fail = |m: String| Err(SpecError::Authority(m));
        if self.authority.is_empty() {
            if !self.profile.is_empty() {
                return fail("profile requires authority".into());
            }
            if !self.runtime_contract.is_empty() {
                return fail("runtime_contract requires authority".into());
            }
            if self.text_only_policy.is_some() {
                return fail("text_only_policy requires authority".into());
            }
            if !self.expected_policy_revision.is_empty() {
                return fail("ExpectedPolicyRevision requires authority".into());
            }
            return Ok(());
        }
        if self.authority.as_str() != AUTHORITY_CHAT_SUBSCRIPTION_ISOLATED_V1 {
            return fail(format!("unknown authority {:?}", self.authority.as_str()));
        }
        if self.turn.is_some() {
            return fail("the subscription lane owns its setup; turn must be absent".into());
        }
        if self.agent != AGENT_CODEX_SUBSCRIPTION {
            return fail(format!(
                "authority {} requires agent {AGENT_CODEX_SUBSCRIPTION}, got {:?}",
                self.authority.as_str(),
                self.agent
            ));
        }
        if self.runtime_contract != RUNTIME_CONTRACT_CODEX_SUBSCRIPTION_EXEC_V1 {
            return fail(format!(
                "runtime_contract must be {RUNTIME_CONTRACT_CODEX_SUBSCRIPTION_EXEC_V1}, got {:?}",
                self.runtime_contract
            ));
        }
        if self.model.trim().is_empty() || self.model.trim() != self.model {
            return fail("model must be set and trimmed".into());
        }
        let want_profile = format!("{AGENT_CODEX_SUBSCRIPTION}:{}", self.model);
        if self.profile != want_profile {
            return fail(format!(
                "profile must be {want_profile:?}, got {:?}",
                self.profile
            ));
        }
        if !self.workdir.is_empty() {
            return fail("the subscription lane owns the workdir; Workdir must be empty".into());
        }
        if !self.env.is_empty() {
            return fail("the subscription lane owns the environment; Env must be empty".into());
        }
        let Some(p) = &self.text_only_policy else {
            return fail("text_only_policy is required".into());
        };
        if p.model != self.model {
            return fail(format!(
                "policy model {:?} differs from spec model {:?}",
                p.model, self.model
            ));
        }
        validate_policy(p).map_err(SpecError::Authority)?;
        if !self.expected_policy_revision.is_empty()
            && self.expected_policy_revision != p.policy_revision
        {
            return fail(format!(
                "policy revision {:?} is not the expected {:?}",
                p.policy_revision, self.expected_policy_revision
            ));
        }
        Ok(())
    }

    /// True when the agent or profile names the codex-subscription lane.
    pub fn looks_like_subscription(&self) -> bool {
        self.agent == AGENT_CODEX_SUBSCRIPTION
            || self.profile == AGENT_CODEX_SUBSCRIPTION
            || self
                .profile
                .starts_with(&format!("{AGENT_CODEX_SUBSCRIPTION}:"))
    }

    /// `Env` split into pairs; entries without `=` or with an empty key are errors.
    pub fn env_pairs(&self) -> Result<Vec<(String, String)>, SpecError> {
        self.env
            .iter()
            .map(|kv| match kv.split_once('=') {
                Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
                _ => Err(SpecError::Decode(format!(
                    "Env entry {kv:?} is not KEY=VALUE"
                ))),
            })
            .collect()
    }
}

/// True for a lowercase SHA-256 hex string (64 chars of `0-9a-f`).
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn validate_policy(p: &TextOnlyPolicy) -> Result<(), String> {
    validate_pinned_fields(p)?;
    if p.request_timeout_millis != REQUEST_TIMEOUT_MILLIS {
        return Err(format!(
            "request_timeout_millis must be {REQUEST_TIMEOUT_MILLIS}, got {}",
            p.request_timeout_millis
        ));
    }
    validate_revisions(p)?;
    if p.selected_codex_version.trim().is_empty()
        || p.selected_codex_version.trim() != p.selected_codex_version
    {
        return Err("selected_codex_version must be set and trimmed".into());
    }
    if !KNOWN_ACCOUNT_PLANS.contains(&p.account_plan.as_str()) {
        return Err(format!(
            "account_plan {:?} is not a known plan",
            p.account_plan
        ));
    }
    Ok(())
}

/// The policy's fixed enums hold their one allowed value, and the model is set.
fn validate_pinned_fields(p: &TextOnlyPolicy) -> Result<(), String> {
    let fixed: [(&str, &str, &str); 14] = [
        ("policy_id", &p.policy_id, POLICY_CODEX_SUBSCRIPTION_CHAT_V1),
        (
            "reasoning_effort",
            &p.reasoning_effort,
            REASONING_EFFORT_MEDIUM,
        ),
        (
            "reasoning_context",
            &p.reasoning_context,
            REASONING_CONTEXT_CURRENT_TURN,
        ),
        ("account_type", &p.account_type, ACCOUNT_TYPE_CHATGPT),
        (
            "selected_adapter_id",
            &p.selected_adapter_id,
            ADAPTER_CODEX_SUBSCRIPTION,
        ),
        ("thread_mode", &p.thread_mode, THREAD_MODE_EPHEMERAL),
        ("sandbox_mode", &p.sandbox_mode, SANDBOX_MODE_READ_ONLY),
        ("approval_policy", &p.approval_policy, APPROVAL_POLICY_NEVER),
        (
            "workdir_mode",
            &p.workdir_mode,
            WORKDIR_MODE_EMPTY_PER_TARGET,
        ),
        ("dynamic_tools_mode", &p.dynamic_tools_mode, TOOLS_MODE_NONE),
        ("mcp_mode", &p.mcp_mode, TOOLS_MODE_NONE),
        (
            "command_policy",
            &p.command_policy,
            RESOURCE_POLICY_DENY_AND_FAIL,
        ),
        (
            "file_read_policy",
            &p.file_read_policy,
            RESOURCE_POLICY_DENY_AND_FAIL,
        ),
        (
            "model",
            if p.model.trim().is_empty() { "" } else { "ok" },
            "ok",
        ),
    ];
    for (name, got, want) in fixed {
        if got != want {
            return Err(format!("{name} must be {want:?}, got {got:?}"));
        }
    }
    Ok(())
}

/// Every revision of the policy is a lowercase SHA-256.
fn validate_revisions(p: &TextOnlyPolicy) -> Result<(), String> {
    let revisions = [
        ("policy_revision", &p.policy_revision),
        (
            "developer_instruction_revision",
            &p.developer_instruction_revision,
        ),
        ("selected_adapter_revision", &p.selected_adapter_revision),
        (
            "selected_codex_executable_revision",
            &p.selected_codex_executable_revision,
        ),
        (
            "selected_codex_schema_revision",
            &p.selected_codex_schema_revision,
        ),
        ("isolation_revision", &p.isolation_revision),
    ];
    for (name, v) in revisions {
        if !is_sha256_hex(v) {
            return Err(format!("{name} must be a lowercase SHA-256 hex string"));
        }
    }
    Ok(())
}
