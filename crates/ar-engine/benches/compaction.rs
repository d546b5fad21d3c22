//! `cargo bench -p ar-engine --bench compaction`: the runtime's own work in one compaction
//! (no model call: the old outputs cut, the summary turn's prompt built, the old turns
//! replaced) of a transcript at the trigger of an 8192-token window, and the estimate a run
//! with a context policy pays at every step; medians of 1000 (release build).

use std::time::Instant;

use ar_core::model::{ChatMessage, ModelToolCall};
use ar_engine::window::{
    estimate, recent_start, replace_with_summary, summary_request, trim_old_outputs, ContextPolicy,
};
use serde_json::json;

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// The transcript of a run reading chunks of ~1.7 KB, grown to `tokens`.
fn transcript(tokens: u64) -> Vec<ChatMessage> {
    let mut transcript = vec![
        ChatMessage::system("You read a corpus for the host."),
        ChatMessage::user("Read every chunk."),
    ];
    let output = "chunk 0000: the quick brown fox jumps. ".repeat(40);
    let mut step = 0;
    while estimate(&transcript) < tokens {
        let id = format!("call_{step}");
        let call = ModelToolCall {
            id: id.clone(),
            name: "docs__bulk_read".into(),
            arguments: json!({"text": "chunk", "times": 40}).to_string(),
        };
        transcript.push(ChatMessage::assistant("", vec![call]));
        transcript.push(ChatMessage::tool_result(id, output.clone()));
        step += 1;
    }
    transcript
}

fn main() {
    let config = json!({"native_context": {"enabled": true, "context_window": 8192}});
    let policy = ContextPolicy::from_execution_config(Some(&config))
        .expect("a valid policy")
        .expect("enabled");
    let at_trigger = transcript(policy.trigger_tokens);
    let mut compaction = Vec::new();
    let mut estimates = Vec::new();
    for _ in 0..1000 {
        let timer = Instant::now();
        let mut working = at_trigger.clone();
        let recent = recent_start(&working, policy.keep_recent_tokens);
        trim_old_outputs(&mut working, recent, &policy);
        let request = summary_request(&working, recent, &policy);
        let replaced = replace_with_summary(&working, recent, "A summary of the work so far.");
        std::hint::black_box((request, replaced));
        compaction.push(timer.elapsed().as_secs_f64() * 1e6);
        let timer = Instant::now();
        std::hint::black_box(estimate(&at_trigger));
        estimates.push(timer.elapsed().as_secs_f64() * 1e6);
    }
    println!(
        "one compaction of a {}-message transcript at the trigger ({} tokens): {:.1} µs (median of 1000; the model's summary call not included)",
        at_trigger.len(),
        estimate(&at_trigger),
        median(compaction)
    );
    println!(
        "the estimate a run with a context policy pays each step, on that transcript: {:.2} µs",
        median(estimates)
    );
}
