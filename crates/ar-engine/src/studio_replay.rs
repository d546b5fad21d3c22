//! Replay for studio-started runs: recorded model turns and tool results of a source run, the
//! scripted model (zero tokens, keyed by a hash of the request), and the side-effect gate
//! (breakpoints, substitute / park / allow).
//!
//! A run's recorded turns are read from its checkpointed transcript: every assistant message
//! there is a model response, and the messages before it are exactly the request that produced
//! it (the transcript only grows). The key of a request is FNV-64a over canonical JSON of its
//! non-system messages and its sorted tool names; the system prompt is deliberately left out.

use ar_core::model::{
    ChatMessage, ChatRole, ModelError, ModelRequest, ModelResponse, ModelRoute, ModelToolCall,
};
use ar_core::tool::{canonical_tool_name, ToolDefinition};
use ar_core::{Run, Usage};
use serde_json::{json, Value};

use crate::engine::Engine;
use crate::error::EngineResult;
use crate::studio::{studio_policy, SideEffects, StudioPolicy};
use crate::transcript::LoopState;

/// The provider name of the route a scripted run reports (it never reaches a vendor).
pub const SCRIPTED_PROVIDER: &str = "scripted";
/// The start of the error text of a scripted miss (the studio reads step and components back).
pub const SCRIPTED_MISS_PREFIX: &str = "scripted: no recorded turn at step ";

/// The error text of a scripted miss at `step` (0-based), naming what changed.
pub fn scripted_miss_text(step: i64, components: &[String]) -> String {
    if components.is_empty() {
        format!("{SCRIPTED_MISS_PREFIX}{step}")
    } else {
        format!(
            "{SCRIPTED_MISS_PREFIX}{step} (changed: {})",
            components.join(", ")
        )
    }
}

/// JSON with object keys sorted at every level.
fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = serde_json::Map::new();
            for key in keys {
                out.insert(key.clone(), canonical(&map[key]));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// FNV-64a of `bytes`.
fn fnv64a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The canonical JSON text of a tool call's arguments (unparseable text stays as it is).
pub(crate) fn canonical_args(arguments: &str) -> String {
    match serde_json::from_str::<Value>(arguments) {
        Ok(value) => canonical(&value).to_string(),
        Err(_) => arguments.trim().to_string(),
    }
}

fn non_system(messages: &[ChatMessage]) -> Vec<ChatMessage> {
    messages
        .iter()
        .filter(|m| m.role != ChatRole::System)
        .cloned()
        .collect()
}

/// The replay key of a request: its non-system messages and sorted tool names.
pub fn request_key(messages: &[ChatMessage], tool_names: &[String]) -> u64 {
    let mut tools: Vec<String> = tool_names.to_vec();
    tools.sort();
    let doc = json!({"messages": non_system(messages), "tools": tools});
    fnv64a(canonical(&doc).to_string().as_bytes())
}

/// One recorded model turn of a source run.
#[derive(Debug, Clone)]
pub(crate) struct RecordedTurn {
    pub(crate) key: u64,
    pub(crate) messages: Vec<ChatMessage>,
    pub(crate) tools: Vec<String>,
    pub(crate) reply: ChatMessage,
}

/// One recorded tool call and its result.
#[derive(Debug, Clone)]
pub(crate) struct RecordedCall {
    pub(crate) tool: String,
    pub(crate) args: String,
    pub(crate) content: String,
}

/// The recorded turns of a transcript, offered `tools`.
pub(crate) fn recorded_turns(state: &LoopState, tools: &[String]) -> Vec<RecordedTurn> {
    let mut sorted = tools.to_vec();
    sorted.sort();
    state
        .transcript
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == ChatRole::Assistant)
        .map(|(at, reply)| {
            let messages = non_system(&state.transcript[..at]);
            RecordedTurn {
                key: request_key(&messages, &sorted),
                messages,
                tools: sorted.clone(),
                reply: reply.clone(),
            }
        })
        .collect()
}

/// The answered tool calls of a transcript, in call order.
pub(crate) fn recorded_calls(transcript: &[ChatMessage]) -> Vec<RecordedCall> {
    let mut out = Vec::new();
    for message in transcript.iter().filter(|m| m.role == ChatRole::Assistant) {
        for call in &message.tool_calls {
            let result = transcript
                .iter()
                .find(|m| m.role == ChatRole::Tool && m.tool_call_id.as_deref() == Some(&call.id));
            if let Some(result) = result {
                out.push(RecordedCall {
                    tool: canonical_tool_name(&call.name),
                    args: canonical_args(&call.arguments),
                    content: result.content.clone(),
                });
            }
        }
    }
    out
}

/// What the studio gate does with one tool call of a studio-started run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Intercept {
    /// Park for a person: `why` is `breakpoint` or `side_effect`.
    Park { why: &'static str },
    /// Answer with the recorded result; the handler does not run.
    Substitute(String),
}

/// The side-effect gate of one studio-started run.
#[derive(Debug, Clone)]
pub(crate) struct StudioGate {
    policy: StudioPolicy,
    recorded: Vec<RecordedCall>,
}

impl StudioGate {
    /// What to do with `call` of `tool`; `None` lets the run's own rules decide.
    pub(crate) fn intercept(
        &self,
        tool: &ToolDefinition,
        call: &ModelToolCall,
        transcript: &[ChatMessage],
    ) -> Option<Intercept> {
        if self.policy.park_on.iter().any(|t| t == &tool.name) {
            // Breakpointed calls are never answered from the recording.
            return Some(Intercept::Park { why: "breakpoint" });
        }
        if !tool.mutating {
            return None;
        }
        match self.policy.side_effects {
            SideEffects::Allow if self.policy.allow.iter().any(|t| t == &tool.name) => None,
            SideEffects::Park | SideEffects::Allow => Some(Intercept::Park { why: "side_effect" }),
            _ => {
                let args = canonical_args(&call.arguments);
                // Repeats are consumed in recorded order: count the same call made earlier.
                let mut earlier = 0usize;
                'scan: for message in transcript.iter().filter(|m| m.role == ChatRole::Assistant) {
                    for seen in &message.tool_calls {
                        if seen.id == call.id {
                            break 'scan;
                        }
                        if canonical_tool_name(&seen.name) == tool.name
                            && canonical_args(&seen.arguments) == args
                        {
                            earlier += 1;
                        }
                    }
                }
                self.recorded
                    .iter()
                    .filter(|r| r.tool == tool.name && r.args == args)
                    .nth(earlier)
                    .map(|r| Intercept::Substitute(r.content.clone()))
                    .or(Some(Intercept::Park { why: "side_effect" }))
            }
        }
    }
}

/// Whether the run replays recorded turns instead of calling a model.
pub(crate) fn is_scripted(run: &Run) -> bool {
    studio_policy(run).is_some_and(StudioPolicy::scripted)
}

/// The route a scripted run reports.
pub(crate) fn scripted_route(run: &Run) -> ModelRoute {
    ModelRoute {
        provider: SCRIPTED_PROVIDER.to_string(),
        model: run
            .input
            .model
            .as_ref()
            .map(|m| m.model.clone())
            .unwrap_or_default(),
        base_url: String::new(),
        api_key: None,
        controls: None,
        account_id: None,
    }
}

impl Engine {
    /// The latest checkpointed loop state of a run (empty when it has none).
    pub(crate) async fn recorded_state(&self, run_id: &str) -> EngineResult<LoopState> {
        Ok(match self.deps().store.latest_checkpoint(run_id).await? {
            Some(checkpoint) => LoopState::from_json(&checkpoint.state).unwrap_or_default(),
            None => LoopState::default(),
        })
    }

    /// The tool names a run is offered.
    pub(crate) async fn offered_tool_names(&self, run: &Run) -> EngineResult<Vec<String>> {
        let agent = self
            .deps()
            .store
            .get_agent(&run.app_id, &run.agent_id)
            .await?;
        Ok(agent
            .map(|agent| {
                self.effective_tools(run, &agent)
                    .into_iter()
                    .map(|t| t.name)
                    .collect()
            })
            .unwrap_or_default())
    }

    /// The side-effect gate of a studio-started run; `None` for every other run.
    pub(crate) async fn studio_gate(&self, run: &Run) -> EngineResult<Option<StudioGate>> {
        let Some(policy) = studio_policy(run).cloned() else {
            return Ok(None);
        };
        let recorded = if policy.source_run_id.is_empty() {
            Vec::new()
        } else {
            recorded_calls(&self.recorded_state(&policy.source_run_id).await?.transcript)
        };
        Ok(Some(StudioGate { policy, recorded }))
    }

    /// For a scripted run, the recorded answer to `request` (or the loud miss); `None` for a
    /// live run.
    pub(crate) async fn scripted_answer(
        &self,
        run: &Run,
        request: &ModelRequest,
    ) -> EngineResult<Option<Result<ModelResponse, ModelError>>> {
        let Some(policy) = studio_policy(run).filter(|p| p.scripted()) else {
            return Ok(None);
        };
        let Some(source) = self
            .deps()
            .store
            .get_run(&run.app_id, &policy.source_run_id)
            .await?
        else {
            return Ok(Some(Err(ModelError::Rejected {
                status: 0,
                message: format!(
                    "{} (the source run {} is gone)",
                    scripted_miss_text(0, &["source".to_string()]),
                    policy.source_run_id
                ),
            })));
        };
        let state = self.recorded_state(&source.id).await?;
        let turns = recorded_turns(&state, &self.offered_tool_names(&source).await?);
        let tools: Vec<String> = request.tools.iter().map(|t| t.name.clone()).collect();
        let key = request_key(&request.messages, &tools);
        if let Some(turn) = turns.iter().find(|t| t.key == key) {
            return Ok(Some(Ok(ModelResponse {
                text: turn.reply.content.clone(),
                reasoning: String::new(),
                tool_calls: turn.reply.tool_calls.clone(),
                usage: Usage::default(),
                finish_reason: if turn.reply.tool_calls.is_empty() {
                    "stop".to_string()
                } else {
                    "tool_calls".to_string()
                },
            })));
        }
        let step = request
            .messages
            .iter()
            .filter(|m| m.role == ChatRole::Assistant)
            .count();
        let mut components = Vec::new();
        match turns.get(step) {
            None => components.push("steps".to_string()),
            Some(turn) => {
                let mut sorted = tools.clone();
                sorted.sort();
                if turn.tools != sorted {
                    components.push("tools".to_string());
                }
                if turn.messages != non_system(&request.messages) {
                    components.push("input".to_string());
                }
            }
        }
        Ok(Some(Err(ModelError::Rejected {
            status: 0,
            message: scripted_miss_text(step as i64, &components),
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_ignore_the_system_prompt_and_tool_order() {
        let a = vec![ChatMessage::system("one"), ChatMessage::user("hi")];
        let b = vec![ChatMessage::system("two"), ChatMessage::user("hi")];
        let tools = vec!["b".to_string(), "a".to_string()];
        let reversed = vec!["a".to_string(), "b".to_string()];
        assert_eq!(request_key(&a, &tools), request_key(&b, &reversed));
        let c = vec![ChatMessage::user("hello")];
        assert_ne!(request_key(&a, &tools), request_key(&c, &tools));
    }

    fn gate(side_effects: &str, park_on: &[&str]) -> StudioGate {
        StudioGate {
            policy: StudioPolicy {
                side_effects: SideEffects::parse(side_effects).unwrap(),
                park_on: park_on.iter().map(|t| t.to_string()).collect(),
                allow: vec!["pay".to_string()],
                ..StudioPolicy::default()
            },
            recorded: vec![
                RecordedCall {
                    tool: "pay".into(),
                    args: canonical_args(r#"{"x":1}"#),
                    content: "paid-1".into(),
                },
                RecordedCall {
                    tool: "pay".into(),
                    args: canonical_args(r#"{"x":1}"#),
                    content: "paid-2".into(),
                },
            ],
        }
    }

    #[test]
    fn the_gate_substitutes_in_recorded_order_and_parks_the_rest() {
        let pay = ToolDefinition {
            name: "pay".into(),
            description: String::new(),
            category: String::new(),
            input_schema: json!({}),
            mutating: true,
            risk_level: None,
            supported_target_types: vec![],
        };
        let read = ToolDefinition {
            name: "read".into(),
            mutating: false,
            ..pay.clone()
        };
        let call = |id: &str, args: &str| ModelToolCall {
            id: id.into(),
            name: "pay".into(),
            arguments: args.into(),
        };
        let calls = vec![
            call("c1", r#"{"x": 1}"#),
            call("c2", r#"{"x":1}"#),
            call("c3", r#"{"x":1}"#),
        ];
        let transcript = vec![ChatMessage::assistant(String::new(), calls.clone())];
        let g = gate("substitute", &[]);
        assert_eq!(
            g.intercept(&pay, &calls[0], &transcript),
            Some(Intercept::Substitute("paid-1".into()))
        );
        assert_eq!(
            g.intercept(&pay, &calls[1], &transcript),
            Some(Intercept::Substitute("paid-2".into()))
        );
        assert_eq!(
            g.intercept(&pay, &calls[2], &transcript),
            Some(Intercept::Park { why: "side_effect" })
        );
        assert_eq!(g.intercept(&read, &calls[0], &transcript), None);
        assert_eq!(
            gate("substitute", &["pay"]).intercept(&pay, &calls[0], &transcript),
            Some(Intercept::Park { why: "breakpoint" })
        );
        assert_eq!(
            gate("park", &[]).intercept(&pay, &calls[0], &transcript),
            Some(Intercept::Park { why: "side_effect" })
        );
        assert_eq!(
            gate("allow", &[]).intercept(&pay, &calls[0], &transcript),
            None
        );
    }

    #[test]
    fn miss_text_names_step_and_components() {
        assert_eq!(
            scripted_miss_text(2, &["input".into(), "tools".into()]),
            "scripted: no recorded turn at step 2 (changed: input, tools)"
        );
        assert_eq!(canonical_args(r#"{"b":1,"a":2}"#), r#"{"a":2,"b":1}"#);
    }
}
