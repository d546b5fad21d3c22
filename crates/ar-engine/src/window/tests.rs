//! The context window's pure steps: the policy, the estimate, cutting and summarizing.

use ar_core::model::{ChatMessage, ModelToolCall};
use serde_json::json;

use super::*;

fn policy(config: Value) -> Result<Option<ContextPolicy>, String> {
    ContextPolicy::from_execution_config(Some(&json!({ "native_context": config })))
}

fn call(id: &str, name: &str) -> ModelToolCall {
    ModelToolCall {
        id: id.into(),
        name: name.into(),
        arguments: "{}".into(),
    }
}

/// system, request, then `turns` assistant turns of one call each with an output of `size`
/// bytes.
fn transcript(turns: usize, size: usize) -> Vec<ChatMessage> {
    let mut messages = vec![
        ChatMessage::system("You help."),
        ChatMessage::user("Do the work."),
    ];
    for n in 0..turns {
        let id = format!("c{n}");
        messages.push(ChatMessage::assistant("", vec![call(&id, "read")]));
        messages.push(ChatMessage::tool_result(id, "x".repeat(size)));
    }
    messages
}

#[test]
fn the_policy_fills_in_the_originals_defaults_and_refuses_what_cannot_fit() {
    assert_eq!(ContextPolicy::from_execution_config(None).unwrap(), None);
    assert_eq!(
        policy(json!({"context_window": 8192})).unwrap(),
        None,
        "off unless enabled"
    );
    let small = policy(json!({"enabled": true, "context_window": 8192}))
        .unwrap()
        .unwrap();
    assert_eq!(
        small,
        ContextPolicy {
            context_window: 8192,
            input_limit: 5632,
            max_output_tokens: 2048,
            trigger_tokens: 5632,
            keep_recent_tokens: 1408,
            summary_tokens: 704,
            safety_tokens: 512,
        }
    );
    let large = policy(json!({"enabled": true, "context_window": 400000}))
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            large.max_output_tokens,
            large.trigger_tokens,
            large.keep_recent_tokens
        ),
        (16384, 64000, 16000)
    );
    for (bad, says) in [
        (
            json!({"enabled": true, "context_window": 1000}),
            "between 4096 and 4000000",
        ),
        (json!({"enabled": true}), "between 4096 and 4000000"),
        (
            json!({"enabled": "yes", "context_window": 8192}),
            "true or false",
        ),
        (
            json!({"enabled": true, "context_window": 8192, "window": 1}),
            "unknown field \"window\"",
        ),
        (
            json!({"enabled": true, "context_window": 8192, "max_output_tokens": 9000}),
            "exceed context_window",
        ),
        (
            json!({"enabled": true, "context_window": 8192, "trigger_tokens": 6000}),
            "trigger_tokens",
        ),
        (
            json!({"enabled": true, "context_window": 8192, "keep_recent_tokens": -1}),
            "nonnegative integer",
        ),
    ] {
        let error = policy(bad.clone()).unwrap_err();
        assert!(error.contains(says), "{bad}: {error}");
    }
}

#[test]
fn the_estimate_stays_above_the_mocks_count_of_the_same_text() {
    let messages = transcript(3, 900);
    let estimate = estimate(&messages);
    let bytes: usize = messages.iter().map(|m| m.content.len()).sum();
    assert!(estimate >= (bytes as u64) / 3, "{estimate}");
    assert_eq!(estimate_tools(&[]), 0);
}

#[test]
fn long_outputs_keep_their_head_and_tail_on_char_boundaries() {
    let text = format!("{}{}", "é".repeat(2000), "end");
    let cut = head_and_tail(&text, 301, 100).unwrap();
    assert!(cut.starts_with("éé"));
    assert!(cut.ends_with("end"));
    assert!(
        cut.contains("characters of this tool output were cut"),
        "{cut}"
    );
    assert!(cut.len() < 600);
    assert_eq!(head_and_tail("short", 100, 100), None);
}

#[test]
fn the_recent_turns_are_whole_turns_and_only_older_outputs_are_cut() {
    let mut messages = transcript(6, 3000);
    let recent = recent_start(&messages, 1500);
    // Each turn is about 1040 tokens: only the newest is kept, and it starts at its call.
    assert_eq!(recent, messages.len() - 2);
    assert_eq!(messages[recent].role, ChatRole::Assistant);
    let policy = policy(json!({"enabled": true, "context_window": 8192}))
        .unwrap()
        .unwrap();
    let trimmed = trim_old_outputs(&mut messages, recent, &policy);
    assert_eq!(trimmed, 5);
    assert!(
        messages[3].content.len() < 1200,
        "{}",
        messages[3].content.len()
    );
    assert_eq!(
        messages[recent + 1].content.len(),
        3000,
        "the newest output is whole"
    );
    assert_eq!(
        trim_old_outputs(&mut messages, recent, &policy),
        0,
        "done once"
    );
    assert_eq!(
        recent_start(&transcript(0, 0), 10),
        1,
        "never the system prompt"
    );
}

#[test]
fn a_summary_replaces_the_old_turns_keeps_the_request_and_carries_unknown_outcomes() {
    let mut messages = transcript(4, 100);
    messages[5] = ChatMessage::tool_result(
        "c1",
        "outcome unknown: the runtime stopped while write_file was running; check its effect",
    );
    messages[4].tool_calls = vec![call("c1", "write_file")];
    let cut = 6; // summarize the request and the first two turns
    let compacted = replace_with_summary(&messages, cut, "Read two files.");
    assert_eq!(compacted[0].content, "You help.");
    assert!(compacted[1].content.starts_with(SUMMARY_PREFIX));
    assert!(compacted[1].content.contains("Read two files."));
    assert!(compacted[1]
        .content
        .contains("write_file (call c1): its outcome is unknown"));
    assert_eq!(
        compacted[2].content, "Do the work.",
        "the request, word for word"
    );
    assert_eq!(&compacted[3..], &messages[cut..]);
    // A result whose call was summarized away is dropped.
    let mut orphaned = messages.clone();
    orphaned.remove(2);
    drop_orphaned_results(&mut orphaned);
    assert!(orphaned
        .iter()
        .all(|m| m.tool_call_id.as_deref() != Some("c0")));
    // A later summary folds the earlier one and keeps no second copy of the request.
    let again = replace_with_summary(&compacted, 5, "All four files read.");
    assert_eq!(again.iter().filter(|m| is_summary(m)).count(), 1);
    assert_eq!(again[2].content, "Do the work.");
}

#[test]
fn the_summary_turn_fits_the_window_and_declares_no_tools() {
    let policy = policy(json!({"enabled": true, "context_window": 8192}))
        .unwrap()
        .unwrap();
    let messages = transcript(40, 4000);
    let request = summary_request(&messages, messages.len() - 2, &policy);
    assert!(request.tools.is_empty());
    assert_eq!(request.max_output_tokens, Some(policy.summary_tokens));
    let input = estimate(&request.messages);
    assert!(
        input + policy.summary_tokens + policy.safety_tokens <= policy.context_window,
        "{input}"
    );
    assert!(request.messages[1]
        .content
        .contains("earlier messages left out"));
}
