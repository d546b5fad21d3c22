//! A minimal agent loop over `ModelClient` against the mock's auto mode, in every wire format:
//! proves requests carry tool history the way each vendor expects (the mock counts results).

use ar_core::model::{ChatMessage, ModelClient, ModelRequest, StreamDelta};
use ar_test_support::mock_provider::AutoScript;

use crate::{bash_tool, client, mock, route};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_step_agent_in_every_wire_format_concurrently() {
    let mock = mock().await;
    mock.auto(AutoScript::five_step("bash"));
    let client = std::sync::Arc::new(client(0));
    let mut tasks = Vec::new();
    for (i, provider) in ["openai_compatible", "openai", "anthropic"]
        .iter()
        .cycle()
        .take(9)
        .enumerate()
    {
        let client = client.clone();
        let r = route(provider, mock.base_url());
        tasks.push(tokio::spawn(async move {
            let mut messages = vec![ChatMessage::user(format!("task {i}"))];
            let mut steps = 0;
            loop {
                let request = ModelRequest {
                    messages: messages.clone(),
                    tools: vec![bash_tool()],
                    max_output_tokens: None,
                };
                let mut sink = |_d: StreamDelta| {};
                let res = client.complete(&r, &request, &mut sink).await.unwrap();
                if res.tool_calls.is_empty() {
                    return (r.provider, steps, res.text, res.usage.total_tokens);
                }
                assert_eq!(res.finish_reason, "tool_calls");
                messages.push(ChatMessage::assistant(res.text, res.tool_calls.clone()));
                for c in res.tool_calls {
                    assert_eq!(c.name, "bash");
                    assert_eq!(
                        c.arguments,
                        format!("{{\"command\":\"echo step {}\"}}", steps + 1)
                    );
                    steps += 1;
                    messages.push(ChatMessage::tool_result(c.id, format!("step {steps}")));
                }
            }
        }));
    }
    for t in tasks {
        let (provider, steps, text, total) = t.await.unwrap();
        assert_eq!(steps, 4, "{provider}");
        assert_eq!(text, "All steps done.", "{provider}");
        assert_eq!(total, 120, "{provider}");
    }
    assert_eq!(mock.request_count(), 45);
}
