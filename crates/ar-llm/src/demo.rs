//! The built-in demo model (`agent-runtime serve --demo`): a deterministic stand-in that lets
//! a newcomer see a run without a vendor key. It is not a language model: each answer follows
//! from what the transcript already holds, and every text it writes starts with
//! [`DEMO_LABEL`] so that nobody takes it for an agent's work.
//!
//! A run on it goes through the runtime's whole loop once: streamed text with a plan update
//! (`update_plan`), a tool call (`get_context`), an approval pause (`request_approval`), and a
//! closing answer that quotes the person's decision. A step whose tool the agent does not
//! offer is left out, so it works with any agent.

use std::time::Duration;

use ar_core::model::{
    ChatMessage, ChatRole, DeltaSink, ModelClient, ModelError, ModelRequest, ModelResponse,
    ModelRoute, ModelToolCall, StreamDelta,
};
use ar_core::usage::Usage;
use async_trait::async_trait;
use serde_json::{json, Value};

pub use ar_core::model::DEMO_PROVIDER;

/// The demo model's name, as runs record it.
pub const DEMO_MODEL: &str = "demo-deterministic";

/// How every text of the demo model begins.
pub const DEMO_LABEL: &str = "[demo model]";

/// The demo model. `pace` is the pause between streamed words, so that a person watching
/// the console sees the text arrive as it would from a real model.
#[derive(Debug, Clone)]
pub struct DemoModel {
    pace: Duration,
}

impl Default for DemoModel {
    fn default() -> Self {
        DemoModel {
            pace: Duration::from_millis(40),
        }
    }
}

/// What the demo model does next, in the order it does it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Plan,
    Context,
    Approval,
    Finish,
}

impl Step {
    /// The tool a step calls (`Finish` calls none).
    fn tool(self) -> Option<&'static str> {
        match self {
            Step::Plan => Some("update_plan"),
            Step::Context => Some("get_context"),
            Step::Approval => Some("request_approval"),
            Step::Finish => None,
        }
    }
}

/// The first step whose tool is offered and not called yet; `Finish` when none is left.
fn next_step(request: &ModelRequest) -> Step {
    let offered = |name: &str| request.tools.iter().any(|tool| tool.name == name);
    let called = |name: &str| called_tool(&request.messages, name).is_some();
    [Step::Plan, Step::Context, Step::Approval]
        .into_iter()
        .find(|step| {
            step.tool()
                .is_some_and(|tool| offered(tool) && !called(tool))
        })
        .unwrap_or(Step::Finish)
}

/// The last call of `name` in the transcript.
fn called_tool<'a>(messages: &'a [ChatMessage], name: &str) -> Option<&'a ModelToolCall> {
    messages
        .iter()
        .rev()
        .flat_map(|message| message.tool_calls.iter())
        .find(|call| call.name == name)
}

/// The result the transcript holds for the last call of `name`.
fn result_of<'a>(messages: &'a [ChatMessage], name: &str) -> Option<&'a str> {
    let call = called_tool(messages, name)?;
    messages
        .iter()
        .rev()
        .find(|m| m.role == ChatRole::Tool && m.tool_call_id.as_deref() == Some(&call.id))
        .map(|m| m.content.as_str())
}

/// `type/id` of the run's target, from `get_context`'s result.
fn target_of(messages: &[ChatMessage]) -> String {
    let context: Value = result_of(messages, "get_context")
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or(Value::Null);
    let target = &context["target"];
    match (target["type"].as_str(), target["id"].as_str()) {
        (Some(kind), Some(id)) => format!("{kind} {id}"),
        _ => "the run's target".to_string(),
    }
}

/// What a person last said after the approval pause: the approval's result, or a message
/// they added (a request for changes arrives as one).
fn decision(messages: &[ChatMessage]) -> String {
    let after_call = messages
        .iter()
        .rposition(|m| m.tool_calls.iter().any(|c| c.name == "request_approval"))
        .unwrap_or(0);
    let said = messages[after_call..]
        .iter()
        .filter(|m| matches!(m.role, ChatRole::Tool | ChatRole::User))
        .map(|m| m.content.trim())
        .rfind(|text| !text.is_empty())
        .unwrap_or("nothing");
    said.chars().take(200).collect()
}

/// The text and tool call of one step.
fn answer(step: Step, messages: &[ChatMessage]) -> (String, Option<Value>) {
    match step {
        Step::Plan => (
            format!("{DEMO_LABEL} Hello! I am the runtime's built-in demo model: deterministic, no vendor key, not a real AI. I will publish a plan, read the run's target with a tool, and ask a person before finishing."),
            Some(json!({
                "explanation": "The demo run's plan.",
                "plan": [
                    {"step": "Read the run's target with get_context", "status": "in_progress"},
                    {"step": "Ask a person to approve the summary", "status": "pending"},
                    {"step": "Finish the run", "status": "pending"}
                ]
            })),
        ),
        Step::Context => (
            format!("{DEMO_LABEL} Plan published. Now a tool call: get_context reads the run's target."),
            Some(json!({})),
        ),
        Step::Approval => {
            let target = target_of(messages);
            (
                format!("{DEMO_LABEL} The target is {target}. Before I finish, a person must approve: the run pauses here until someone approves or asks for changes."),
                Some(json!({
                    "title": format!("Approve the demo summary of {target}"),
                    "phase": "execution",
                    "summary": format!("The demo model read {target} and will finish the run once approved."),
                })),
            )
        }
        Step::Finish => (
            format!("{DEMO_LABEL} The person answered: {}. The demo run is complete: you saw streamed text, a plan update, a tool call and an approval pause. Next, give an agent a real provider (see the README).", decision(messages)),
            None,
        ),
    }
}

/// A deterministic token count for the usage report: about four characters a token.
fn tokens(text: &str) -> i64 {
    i64::try_from(text.chars().count().div_ceil(4)).unwrap_or(i64::MAX)
}

impl DemoModel {
    /// A demo model streaming with `pace` between words.
    pub fn with_pace(pace: Duration) -> Self {
        DemoModel { pace }
    }

    async fn stream_text(&self, text: &str, on_delta: DeltaSink<'_>) {
        for (i, word) in text.split(' ').enumerate() {
            if i > 0 && !self.pace.is_zero() {
                tokio::time::sleep(self.pace).await;
            }
            let piece = if i == 0 {
                word.to_string()
            } else {
                format!(" {word}")
            };
            on_delta(StreamDelta::Text(piece));
        }
    }
}

#[async_trait]
impl ModelClient for DemoModel {
    async fn complete(
        &self,
        route: &ModelRoute,
        request: &ModelRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        if route.provider != DEMO_PROVIDER {
            return Err(ModelError::Rejected {
                status: 400,
                message: format!(
                    "the demo model serves provider demo, not {}",
                    route.provider
                ),
            });
        }
        let step = next_step(request);
        let (text, arguments) = answer(step, &request.messages);
        self.stream_text(&text, on_delta).await;
        let mut tool_calls = Vec::new();
        if let (Some(name), Some(arguments)) = (step.tool(), arguments) {
            let call = ModelToolCall {
                // Deterministic too: the step's position in the transcript names the call.
                id: format!("demo_call_{}", request.messages.len()),
                name: name.to_string(),
                arguments: arguments.to_string(),
            };
            on_delta(StreamDelta::ToolCallStarted {
                index: 0,
                id: call.id.clone(),
                name: call.name.clone(),
            });
            on_delta(StreamDelta::ToolCallArguments {
                index: 0,
                delta: call.arguments.clone(),
            });
            tool_calls.push(call);
        }
        let input: i64 = request.messages.iter().map(|m| tokens(&m.content)).sum();
        let output = tokens(&text) + tool_calls.iter().map(|c| tokens(&c.arguments)).sum::<i64>();
        tracing::info!(step = ?step, "demo model answered (built-in deterministic stand-in, not a real model)");
        Ok(ModelResponse {
            finish_reason: if tool_calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            }
            .to_string(),
            text,
            reasoning: String::new(),
            tool_calls,
            usage: Usage {
                input_tokens: input,
                output_tokens: output,
                total_tokens: input + output,
                ..Usage::default()
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use ar_core::model::ToolSpec;

    use super::*;

    fn offered(names: &[&str]) -> Vec<ToolSpec> {
        names
            .iter()
            .map(|name| ToolSpec {
                name: name.to_string(),
                description: String::new(),
                parameters: json!({"type": "object"}),
            })
            .collect()
    }

    fn route() -> ModelRoute {
        ModelRoute {
            provider: DEMO_PROVIDER.into(),
            model: DEMO_MODEL.into(),
            ..ModelRoute::default()
        }
    }

    async fn call(request: &ModelRequest) -> (ModelResponse, Vec<StreamDelta>) {
        let mut deltas = Vec::new();
        let response = DemoModel::with_pace(Duration::ZERO)
            .complete(&route(), request, &mut |d| deltas.push(d))
            .await
            .expect("the demo model answers");
        (response, deltas)
    }

    /// Appends the answer and the given result of its call, as the engine would.
    fn settle(request: &mut ModelRequest, response: &ModelResponse, result: &str) {
        request.messages.push(ChatMessage::assistant(
            response.text.clone(),
            response.tool_calls.clone(),
        ));
        for call in &response.tool_calls {
            request
                .messages
                .push(ChatMessage::tool_result(call.id.clone(), result));
        }
    }

    #[tokio::test]
    async fn a_run_goes_plan_context_approval_then_finishes_quoting_the_decision() {
        let mut request = ModelRequest {
            messages: vec![ChatMessage::system("demo"), ChatMessage::user("go")],
            tools: offered(&["get_context", "update_plan", "request_approval"]),
            ..ModelRequest::default()
        };
        let mut names = Vec::new();
        for result in [
            "plan updated",
            r#"{"target":{"type":"ticket","id":"T-1"}}"#,
            "approved: looks good",
        ] {
            let (response, deltas) = call(&request).await;
            assert!(response.text.starts_with(DEMO_LABEL), "{}", response.text);
            let streamed: String = deltas
                .iter()
                .filter_map(|d| match d {
                    StreamDelta::Text(t) => Some(t.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(streamed, response.text, "the text is streamed whole");
            assert!(deltas.len() > 3, "in pieces");
            assert!(response.usage.total_tokens > 0);
            names.push(response.tool_calls[0].name.clone());
            settle(&mut request, &response, result);
        }
        assert_eq!(names, ["update_plan", "get_context", "request_approval"]);
        let approval = &request.messages[request.messages.len() - 2].tool_calls[0];
        assert!(approval.arguments.contains("ticket T-1"), "{approval:?}");
        let (last, _) = call(&request).await;
        assert!(last.tool_calls.is_empty());
        assert_eq!(last.finish_reason, "stop");
        assert!(last.text.contains("approved: looks good"), "{}", last.text);
    }

    #[tokio::test]
    async fn steps_whose_tool_is_not_offered_are_left_out() {
        let request = ModelRequest {
            messages: vec![ChatMessage::user("go")],
            tools: offered(&["get_context"]),
            ..ModelRequest::default()
        };
        let (response, _) = call(&request).await;
        assert_eq!(response.tool_calls[0].name, "get_context");
        let bare = ModelRequest {
            messages: vec![ChatMessage::user("go")],
            ..ModelRequest::default()
        };
        let (response, _) = call(&bare).await;
        assert!(response.tool_calls.is_empty() && response.text.starts_with(DEMO_LABEL));
    }

    #[tokio::test]
    async fn the_same_transcript_gets_the_same_answer() {
        let request = ModelRequest {
            messages: vec![ChatMessage::user("go")],
            tools: offered(&["update_plan"]),
            ..ModelRequest::default()
        };
        assert_eq!(call(&request).await.0, call(&request).await.0);
    }

    #[tokio::test]
    async fn another_provider_is_refused() {
        let mut other = route();
        other.provider = "openai".into();
        let error = DemoModel::default()
            .complete(&other, &ModelRequest::default(), &mut |_| {})
            .await
            .unwrap_err();
        assert!(error.to_string().contains("not openai"), "{error}");
    }
}
