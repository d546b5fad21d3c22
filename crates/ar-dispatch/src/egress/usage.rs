//! Token usage read from model responses as they stream through the egress proxy: OpenAI
//! Responses (`response.completed`'s `response.usage`), Chat Completions (a chunk's `usage`)
//! and Anthropic Messages (`message_start`'s and `message_delta`'s `usage`), in SSE or plain JSON.
//!
//! Only lines that mention `"usage"` are parsed, so the scan costs little on the stream's path.
//! Within one response each count keeps its largest value (Anthropic reports input tokens at the
//! start and the running output count in deltas); the proxy adds responses up.

use serde_json::Value;

use crate::event::ProviderUsage;

/// Longest line or JSON body the scanner keeps to parse; longer ones are skipped (usage
/// objects are small and arrive on short lines).
const MAX_SCANNED: usize = 1024 * 1024;

/// Reads one response's usage from its bytes, chunk by chunk.
#[derive(Debug, Default)]
pub(crate) struct UsageScanner {
    /// The current unfinished line.
    line: Vec<u8>,
    /// The current line grew past [`MAX_SCANNED`]: skipped up to its end.
    skipping: bool,
    usage: ProviderUsage,
    seen: bool,
    /// A plain JSON body (not an event stream): kept whole and parsed at its end.
    whole_body: bool,
}

impl UsageScanner {
    /// A scanner for a body of this content type: an event stream is read line by line, a
    /// JSON document whole.
    pub(crate) fn for_content_type(content_type: &str) -> Self {
        let whole_body = content_type.trim_start().starts_with("application/json");
        UsageScanner {
            whole_body,
            ..UsageScanner::default()
        }
    }

    /// Feeds the next chunk of the body.
    pub(crate) fn feed(&mut self, mut chunk: &[u8]) {
        if self.whole_body {
            self.push(chunk);
            return;
        }
        while let Some(end) = memchr_newline(chunk) {
            self.push(&chunk[..end]);
            self.end_line();
            chunk = &chunk[end + 1..];
        }
        self.push(chunk);
    }

    /// The usage the response reported, once its body ended (`None` when it reported none).
    pub(crate) fn finish(mut self) -> Option<ProviderUsage> {
        self.end_line();
        self.seen.then_some(self.usage)
    }

    fn push(&mut self, bytes: &[u8]) {
        if self.skipping {
            return;
        }
        if self.line.len() + bytes.len() > MAX_SCANNED {
            self.line.clear();
            self.skipping = true;
            return;
        }
        self.line.extend_from_slice(bytes);
    }

    fn end_line(&mut self) {
        let line = std::mem::take(&mut self.line);
        self.skipping = false;
        let text = trim_ascii(&line);
        let text = text.strip_prefix(b"data:").unwrap_or(text);
        if !contains(text, b"\"usage\"") {
            return;
        }
        let Ok(value) = serde_json::from_slice::<Value>(trim_ascii(text)) else {
            return;
        };
        for usage in usage_objects(&value) {
            self.take(usage);
        }
    }

    fn take(&mut self, usage: &Value) {
        let count = |paths: &[&[&str]]| -> i64 {
            paths
                .iter()
                .filter_map(|path| {
                    path.iter()
                        .try_fold(usage, |value, key| value.get(key))
                        .and_then(Value::as_i64)
                })
                .max()
                .unwrap_or(0)
        };
        let input = count(&[&["input_tokens"], &["prompt_tokens"]]);
        let cached = count(&[
            &["input_tokens_details", "cached_tokens"],
            &["prompt_tokens_details", "cached_tokens"],
            &["cache_read_input_tokens"],
        ]);
        let output = count(&[&["output_tokens"], &["completion_tokens"]]);
        let reasoning = count(&[
            &["output_tokens_details", "reasoning_tokens"],
            &["completion_tokens_details", "reasoning_tokens"],
        ]);
        self.seen = true;
        let u = &mut self.usage;
        u.input_tokens = u.input_tokens.max(input);
        u.cached_input_tokens = u.cached_input_tokens.max(cached);
        u.output_tokens = u.output_tokens.max(output);
        u.reasoning_tokens = u.reasoning_tokens.max(reasoning);
    }
}

/// The usage objects of one JSON document in the shapes the three wire formats use.
fn usage_objects(value: &Value) -> Vec<&Value> {
    [
        value.get("usage"),
        value.get("response").and_then(|r| r.get("usage")),
        value.get("message").and_then(|m| m.get("usage")),
    ]
    .into_iter()
    .flatten()
    .filter(|usage| usage.is_object())
    .collect()
}

/// Adds one response's usage to a run's total.
pub(crate) fn add(total: &mut ProviderUsage, one: &ProviderUsage) {
    total.input_tokens += one.input_tokens;
    total.cached_input_tokens += one.cached_input_tokens;
    total.output_tokens += one.output_tokens;
    total.reasoning_tokens += one.reasoning_tokens;
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|b| *b == b'\n')
}

fn trim_ascii(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |i| i + 1);
    &bytes[start..end]
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(chunks: &[&str]) -> Option<ProviderUsage> {
        let mut scanner = UsageScanner::default();
        for chunk in chunks {
            scanner.feed(chunk.as_bytes());
        }
        scanner.finish()
    }

    #[test]
    fn responses_usage_is_read_across_chunks() {
        let usage = scan(&[
            "event: response.created\ndata: {\"type\":\"response.created\"}\n\n",
            "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"us",
            "age\":{\"input_tokens\":120,\"input_tokens_details\":{\"cached_tokens\":100},",
            "\"output_tokens\":8,\"output_tokens_details\":{\"reasoning_tokens\":3}}}}\n\n",
        ])
        .unwrap();
        assert_eq!(
            (
                usage.input_tokens,
                usage.cached_input_tokens,
                usage.output_tokens,
                usage.reasoning_tokens
            ),
            (120, 100, 8, 3)
        );
    }

    #[test]
    fn chat_and_anthropic_usage() {
        let chat = scan(&["data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":1}}}\n\ndata: [DONE]\n\n"]).unwrap();
        assert_eq!(
            (
                chat.input_tokens,
                chat.output_tokens,
                chat.cached_input_tokens
            ),
            (7, 2, 1)
        );
        let anthropic = scan(&[
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":50,\"cache_read_input_tokens\":10,\"output_tokens\":1}}}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":42}}\n\n",
        ])
        .unwrap();
        assert_eq!(
            (
                anthropic.input_tokens,
                anthropic.cached_input_tokens,
                anthropic.output_tokens
            ),
            (50, 10, 42)
        );
        let mut json = UsageScanner::for_content_type("application/json; charset=utf-8");
        json.feed(b"{\n  \"id\": \"x\",\n  \"usage\": {\"input_tokens\": 3,");
        json.feed(b" \"output_tokens\": 4}\n}");
        let json = json.finish().unwrap();
        assert_eq!((json.input_tokens, json.output_tokens), (3, 4));
        let one_line =
            scan(&["{\"id\":\"x\",\"usage\":{\"input_tokens\":3,\"output_tokens\":4}}"]).unwrap();
        assert_eq!((one_line.input_tokens, one_line.output_tokens), (3, 4));
        assert!(scan(&["data: {\"choices\":[]}\n\n"]).is_none());
    }

    #[test]
    fn long_lines_are_skipped_not_kept() {
        let mut scanner = UsageScanner::default();
        let big = "x".repeat(MAX_SCANNED);
        scanner.feed(big.as_bytes());
        scanner.feed(b"\"usage\":{}");
        assert!(scanner.line.is_empty());
        scanner.feed(b"\ndata: {\"usage\":{\"output_tokens\":5}}\n");
        assert_eq!(scanner.finish().unwrap().output_tokens, 5);
    }
}
