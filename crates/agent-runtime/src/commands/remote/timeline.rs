//! `runs watch` and `runs events`: a run's events as a terminal timeline (streamed text, tool
//! calls with their durations, plan updates, pauses with what they ask, usage), under a
//! progress line redrawn in place when stdout is a terminal; or one JSON document per event.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use ar_client::{Client, StreamItem, StreamOptions};
use ar_wire::EventEnvelope;
use chrono::{DateTime, Utc};

use super::{output, Exit, Failure, Outcome};

/// How `watch` behaves.
#[derive(Debug, Clone, Copy)]
pub struct WatchOptions {
    pub json: bool,
    /// Stop at a pause (exit code 9) instead of waiting for an answer.
    pub exit_on_pause: bool,
}

/// The widest tool output summary shown on a line.
const SUMMARY_WIDTH: usize = 72;

/// Follows the run to its end; the exit code says how it ended.
pub async fn watch(client: &Client, run_id: &str, options: WatchOptions) -> Outcome {
    let run = client.get_run(run_id).await?;
    let tty = !options.json && std::io::stdout().is_terminal();
    let mut view = Timeline::new(&run.id, tty);
    if !options.json {
        view.header(&run);
    }
    let stream_options = StreamOptions {
        max_reconnects: Some(20),
        ..StreamOptions::default()
    };
    let mut stream = client.events(&run.id, stream_options);
    let (sender, mut items) = tokio::sync::mpsc::channel(256);
    // The stream reads on its own task: the progress line's ticks never cut a read short.
    let reader = tokio::spawn(async move {
        while let Some(item) = stream.next().await {
            if sender.send(item).await.is_err() {
                break;
            }
        }
    });
    let mut ticker = tokio::time::interval(Duration::from_millis(200));
    let outcome = loop {
        tokio::select! {
            item = items.recv() => match item {
                None => break Ok(view.ended(client).await),
                Some(Err(error)) => break Err(view.failed(error)),
                Some(Ok(item)) => {
                    if let Some(exit) = view.item(client, item, options).await? {
                        break Ok(exit);
                    }
                }
            },
            _ = ticker.tick(), if tty => view.progress(),
        }
    };
    reader.abort();
    view.end_text();
    view.clear_progress();
    outcome
}

/// Prints persisted events (no progress line, no lookups).
pub fn print_history(json: bool, events: impl Iterator<Item = EventEnvelope>) -> Outcome {
    let mut view = Timeline::new("", false);
    for event in events {
        if json {
            output::json(&event)?;
        } else {
            view.persisted(&event);
        }
    }
    Ok(Exit::Ok)
}

/// What the timeline has seen of the run.
struct Timeline {
    run_id: String,
    tty: bool,
    started: Instant,
    /// The first event's time: offsets are counted from it.
    origin: Option<DateTime<Utc>>,
    /// The offset of the last persisted event (deltas have no time of their own).
    last_offset: f64,
    status: String,
    /// A streamed text line is open (no newline yet).
    text_open: bool,
    /// Messages whose deltas were shown (their completion only ends the line).
    streamed: HashMap<String, ()>,
    tool_calls: u64,
    tokens: i64,
    spinner: usize,
}

impl Timeline {
    fn new(run_id: &str, tty: bool) -> Self {
        Self {
            run_id: run_id.to_string(),
            tty,
            started: Instant::now(),
            origin: None,
            last_offset: 0.0,
            status: String::new(),
            text_open: false,
            streamed: HashMap::new(),
            tool_calls: 0,
            tokens: 0,
            spinner: 0,
        }
    }

    fn header(&mut self, run: &ar_wire::AgentRun) {
        self.status = run.status.clone();
        self.line(&format!(
            "run {} · agent {} · {}:{} · {}",
            run.id, run.agent_id, run.target.target_type, run.target.id, run.status
        ));
    }

    /// Handles one stream item; `Some(exit)` ends the watch.
    async fn item(
        &mut self,
        client: &Client,
        item: StreamItem,
        options: WatchOptions,
    ) -> Result<Option<Exit>, Failure> {
        let pause = match &item {
            StreamItem::Event(event) if event.event_type == "run.paused" => Some(event.sequence_no),
            _ => None,
        };
        match item {
            StreamItem::Event(event) if options.json => {
                output::json(&event)?;
                self.note_status(&event);
            }
            StreamItem::Delta(event) if options.json => output::json(&event)?,
            StreamItem::Event(event) => self.persisted(&event),
            StreamItem::Delta(event) => self.delta(&event),
            StreamItem::Reconnecting { delay, reason, .. } => {
                self.end_text();
                self.clear_progress();
                eprintln!("(connection lost: {reason}; reconnecting in {delay:.1?})");
            }
        }
        match pause {
            Some(sequence) => self.paused(client, sequence, options).await,
            None => Ok(None),
        }
    }

    /// A pause that is still current: show what it asks; stop when told to.
    async fn paused(
        &mut self,
        client: &Client,
        sequence: i64,
        options: WatchOptions,
    ) -> Result<Option<Exit>, Failure> {
        let run = client.get_run(&self.run_id).await?;
        let history = client.list_run_events(&self.run_id).await?;
        let latest = history
            .iter()
            .rev()
            .find(|event| ar_wire::events::is_lifecycle(&event.event_type))
            .map(|event| event.sequence_no);
        if run.status != "paused" || latest != Some(sequence) {
            return Ok(None); // An old pause replayed; the run went on.
        }
        if !options.json {
            self.show_ask(client, &run).await?;
        }
        Ok(options.exit_on_pause.then_some(Exit::RunPaused))
    }

    async fn show_ask(&mut self, client: &Client, run: &ar_wire::AgentRun) -> Result<(), Failure> {
        let interactions = client.list_interactions(&run.id).await?;
        for ask in interactions.iter().filter(|i| i.status == "pending") {
            let text = ask_text(ask);
            self.line(&format!(
                "          asks ({}): {}",
                ask.interaction_kind,
                text.trim()
            ));
        }
        let id = &run.id;
        let hint = match run.pause_reason.as_str() {
            "human_approval" => format!(
                "approve: agent-runtime runs approve {id}   or ask for changes: agent-runtime runs reply {id} \"...\""
            ),
            "human_input" | "awaiting_user_message" => {
                format!("answer: agent-runtime runs reply {id} \"...\"")
            }
            _ => format!("cancel: agent-runtime runs cancel {id}"),
        };
        self.line(&format!("          {hint}"));
        Ok(())
    }

    /// The stream ended after the terminal event (or the run had ended before).
    async fn ended(&mut self, client: &Client) -> Exit {
        self.end_text();
        self.clear_progress();
        let status = match self.status.as_str() {
            "completed" | "failed" | "cancelled" => self.status.clone(),
            _ => client
                .get_run(&self.run_id)
                .await
                .map(|run| run.status)
                .unwrap_or_default(),
        };
        match status.as_str() {
            "completed" => Exit::Ok,
            "failed" => Exit::RunFailed,
            "cancelled" => Exit::RunCancelled,
            _ => Exit::Unavailable,
        }
    }

    fn failed(&mut self, error: ar_client::Error) -> Failure {
        self.end_text();
        self.clear_progress();
        error.into()
    }

    /// One persisted event as a timeline line.
    fn persisted(&mut self, event: &EventEnvelope) {
        let origin = *self.origin.get_or_insert(event.sent_at);
        self.last_offset = (event.sent_at - origin).num_milliseconds().max(0) as f64 / 1000.0;
        let text = match event.event_type.as_str() {
            "run.queued" => Some("queued".to_string()),
            "run.started" => Some("started".to_string()),
            "run.resumed" => Some("resumed".to_string()),
            "run.paused" => Some(format!("PAUSED: {}", str_of(event, "pause_reason"))),
            "run.completed" | "run.failed" | "run.cancelled" => Some(self.finished(event)),
            "assistant_message_completed" => self.message_completed(event),
            "tool_call_started" => {
                self.tool_calls += 1;
                Some(tool_started(event))
            }
            "tool_call_finished" => Some(self.tool_finished(event)),
            "plan_updated" => Some(plan(event)),
            "usage.checkpoint" => self.usage(event),
            "tool_call_result"
            | "assistant_message_started"
            | "reasoning_message_started"
            | "reasoning_message_completed" => None,
            other => Some(format!("event {other}")),
        };
        self.note_status(event);
        if let Some(text) = text {
            self.end_text();
            self.stamped(&text);
        }
    }

    /// A `run.*` event's status.
    fn note_status(&mut self, event: &EventEnvelope) {
        if let Some(status) = event.event_type.strip_prefix("run.") {
            self.status = status.to_string();
        }
    }

    fn finished(&mut self, event: &EventEnvelope) -> String {
        let word = event.event_type.trim_start_matches("run.").to_uppercase();
        let error = str_of(event, "error_message");
        let error = if error.is_empty() {
            str_of(event, "error")
        } else {
            error
        };
        let mut text = format!(
            "{word} after {:.2}s · {} tool calls · {} tokens",
            self.last_offset, self.tool_calls, self.tokens
        );
        if !error.is_empty() {
            text = format!("{text}: {error}");
        }
        text
    }

    fn message_completed(&mut self, event: &EventEnvelope) -> Option<String> {
        let id = str_of(event, "message_id");
        if self.streamed.remove(&id).is_some() {
            self.end_text();
            return None;
        }
        let text = [str_of(event, "content"), str_of(event, "text")]
            .into_iter()
            .find(|text| !text.is_empty())?;
        Some(format!("assistant: {text}"))
    }

    fn tool_finished(&mut self, event: &EventEnvelope) -> String {
        let name = str_of(event, "tool_name");
        let ms = event
            .data
            .get("duration_ms")
            .and_then(|v| v.as_i64())
            .unwrap_or(0);
        let error = str_of(event, "error");
        if !error.is_empty() {
            return format!("tool {name} FAILED after {ms} ms: {}", clip(&error));
        }
        let summary = str_of(event, "output_summary");
        format!("tool {name} done in {ms} ms {}", clip(&summary))
            .trim_end()
            .to_string()
    }

    fn usage(&mut self, event: &EventEnvelope) -> Option<String> {
        let data: ar_wire::UsageCheckpointEventData = event.decode_data().ok()?;
        let usage = data.usage;
        let total = if usage.total_tokens > 0 {
            usage.total_tokens
        } else {
            usage.input_tokens + usage.output_tokens
        };
        if data.usage_semantic == "cumulative" {
            self.tokens = total;
        } else {
            self.tokens += total;
        }
        Some(format!(
            "usage: {} in · {} out · {} tokens so far",
            usage.input_tokens, usage.output_tokens, self.tokens
        ))
    }

    /// A transient event: streamed text is printed as it comes.
    fn delta(&mut self, event: &EventEnvelope) {
        if event.event_type != "assistant_message_delta" {
            return;
        }
        let text = [str_of(event, "text"), str_of(event, "content")]
            .into_iter()
            .find(|text| !text.is_empty())
            .unwrap_or_default();
        if !self.text_open {
            self.clear_progress();
            let prefix = format!("[{:>7.2}s] assistant: ", self.last_offset);
            self.write(&prefix);
            self.text_open = true;
        }
        self.streamed.insert(str_of(event, "message_id"), ());
        self.write(&text);
    }

    /// Ends an open streamed-text line.
    fn end_text(&mut self) {
        if self.text_open {
            self.text_open = false;
            self.write("\n");
        }
    }

    fn stamped(&mut self, text: &str) {
        let line = format!("[{:>7.2}s] {text}", self.last_offset);
        self.line(&line);
    }

    /// A whole line, under which the progress line is drawn again.
    fn line(&mut self, text: &str) {
        self.clear_progress();
        self.write(&format!("{text}\n"));
        self.progress();
    }

    /// Redraws the progress line (a terminal only, never inside a streamed text line).
    fn progress(&mut self) {
        if !self.tty || self.text_open {
            return;
        }
        const SPINNER: [char; 4] = ['|', '/', '-', '\\'];
        self.spinner = (self.spinner + 1) % SPINNER.len();
        let status = &self.status;
        let text = format!(
            "\r\x1b[2K{} {status} · {:.1}s · {} tool calls · {} tokens",
            SPINNER[self.spinner],
            self.started.elapsed().as_secs_f64(),
            self.tool_calls,
            self.tokens
        );
        self.write(&text);
    }

    fn clear_progress(&mut self) {
        if self.tty && !self.text_open {
            self.write("\r\x1b[2K");
        }
    }

    fn write(&self, text: &str) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }
}

fn str_of(event: &EventEnvelope, key: &str) -> String {
    event
        .data
        .get(key)
        .and_then(|value| value.as_str())
        .unwrap_or_default()
        .to_string()
}

/// What an interaction asks: its title, then the summary, question or message its request
/// carries, or the gated tool call and its input.
fn ask_text(ask: &ar_wire::AgentRunInteraction) -> String {
    let payload = ask.request_payload.clone().unwrap_or_default();
    let input = &payload["input"];
    let mut text = ask.title.clone();
    let mut parts = vec![ask.summary.clone()];
    for key in ["summary", "question", "message", "prompt"] {
        parts.push(input[key].as_str().unwrap_or_default().to_string());
    }
    if let Some(tool) = payload["tool_name"].as_str() {
        parts.push(format!("{tool} {}", clip(&input.to_string())));
    }
    for part in parts {
        if !part.is_empty() && !text.contains(&part) {
            text = format!("{text} - {part}");
        }
    }
    text.trim_start_matches(" - ").trim().to_string()
}

fn tool_started(event: &EventEnvelope) -> String {
    let input = [str_of(event, "tool_input"), str_of(event, "args_text")]
        .into_iter()
        .find(|text| !text.is_empty())
        .unwrap_or_default();
    format!("tool {} {}", str_of(event, "tool_name"), clip(&input))
        .trim_end()
        .to_string()
}

fn plan(event: &EventEnvelope) -> String {
    let Ok(data) = event.decode_data::<ar_wire::PlanUpdatedEventData>() else {
        return "plan updated".into();
    };
    let steps: Vec<String> = data
        .plan
        .iter()
        .map(|step| {
            let mark = match step.status.as_str() {
                "completed" => "x",
                "in_progress" => ">",
                _ => " ",
            };
            format!("[{mark}] {}", step.step)
        })
        .collect();
    format!("plan: {}", steps.join("  "))
}

/// One line of at most [`SUMMARY_WIDTH`] characters.
fn clip(text: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= SUMMARY_WIDTH {
        return flat;
    }
    let cut: String = flat.chars().take(SUMMARY_WIDTH - 3).collect();
    format!("{cut}...")
}
