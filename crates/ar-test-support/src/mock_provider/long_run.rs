//! A long run's model ([`LongRun`]): a fixed number of tool calls counted across the mock's
//! requests (not read back from the conversation, which compaction shortens), then the final
//! answer; a request that declares no tools (a summary turn) gets a summary. Every reply
//! reports the request's input tokens as the mock counts them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::json;

use super::auto::Conversation;
use super::reply::{Reply, Usage};
use super::window::request_tokens;

/// The script; install it with [`super::MockProvider::long_run`].
#[derive(Clone, Debug)]
pub struct LongRun {
    /// Tool calls before the final answer.
    pub steps: usize,
    /// The tool called at every step, with `{"text", "times"}`.
    pub tool: String,
    /// The `times` argument (with `text` of about 40 bytes: the size of each output, for a
    /// tool that repeats its text that many times).
    pub times: u64,
    calls: Arc<AtomicUsize>,
    summaries: Arc<AtomicUsize>,
}

impl LongRun {
    pub fn new(steps: usize, tool: impl Into<String>, times: u64) -> LongRun {
        LongRun {
            steps,
            tool: tool.into(),
            times,
            calls: Arc::new(AtomicUsize::new(0)),
            summaries: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Tool calls answered so far.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst).min(self.steps)
    }

    /// Summary turns answered so far.
    pub fn summaries(&self) -> usize {
        self.summaries.load(Ordering::SeqCst)
    }

    pub(crate) fn reply_for(&self, conv: &Conversation<'_>) -> Reply {
        let usage = Usage::new(request_tokens(conv.body), 40);
        if !conv.declares_tools() {
            let n = self.summaries.fetch_add(1, Ordering::SeqCst) + 1;
            let done = self.calls();
            return Reply::text(format!(
                "Summary {n}: the agent has read chunks 0 to {} of the corpus with {}; each chunk \
                 repeats its marker line. Nothing failed. Next: read the following chunk.",
                done.saturating_sub(1),
                self.tool
            ))
            .usage(usage);
        }
        let step = self.calls.fetch_add(1, Ordering::SeqCst);
        if step >= self.steps {
            return Reply::text(format!("Read all {} chunks.", self.steps)).usage(usage);
        }
        let text = format!("chunk {step:04}: the quick brown fox jumps. ");
        let args = json!({"text": text, "times": self.times});
        Reply::tool_call(self.tool.clone(), args.to_string()).usage(usage)
    }
}
