//! NATS JetStream conventions shared with host consumers: default stream/subjects and subject rendering.

use std::time::Duration;

use crate::events::EventEnvelope;

/// Default stream name.
pub const DEFAULT_STREAM_NAME: &str = "AGENT_RUNTIME_EVENTS";
/// Default stream subject filter.
pub const DEFAULT_STREAM_SUBJECT: &str = "agent-runtime.events.>";
/// Default v1 subject template (`{type}` is accepted as an alias of `{event_type}`).
pub const DEFAULT_SUBJECT_TEMPLATE: &str = "agent-runtime.events.{app_id}.{run_id}.{event_type}";
/// v2 subject template.
pub const DEFAULT_V2_SUBJECT_TEMPLATE: &str =
    "agent-runtime.events.v2.{app_id}.{run_id}.{event_type}";
/// Default NATS client name of the runtime publisher.
pub const DEFAULT_CLIENT_NAME: &str = "agent-runtime";

/// The events stream's limits, the same whether the runtime or a consumer creates it: file
/// storage, limits retention, discard old, and these three. The duplicate window is how long
/// JetStream drops a republish (after a crash, or a retry after a lost acknowledgement) by its
/// message id.
pub const STREAM_DUPLICATE_WINDOW: Duration = Duration::from_secs(2 * 60);
/// How long the events stream keeps an event.
pub const STREAM_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// How much the events stream keeps before it discards its oldest events.
pub const STREAM_MAX_BYTES: i64 = 512 * 1024 * 1024;

/// Sanitizes one subject token: trims; whitespace, `/`, `\`, `*`, `>` become `_`; empty becomes `_`.
pub fn token(value: &str) -> String {
    let value = value.trim();
    if value.is_empty() {
        return "_".to_owned();
    }
    value
        .chars()
        .map(|c| match c {
            ' ' | '\t' | '\n' | '\r' | '/' | '\\' | '*' | '>' => '_',
            c => c,
        })
        .collect()
}

/// Like [`token`], and dots also become `_` (app ids must be a single token).
pub fn app_token(value: &str) -> String {
    token(value).replace('.', "_")
}

/// Subject filter for every v1 event of one app.
pub fn app_event_subject(app_id: &str) -> String {
    format!("agent-runtime.events.{}.>", app_token(app_id))
}

/// Subject filter for every v2 event of one app.
pub fn v2_app_event_subject(app_id: &str) -> String {
    format!("agent-runtime.events.v2.{}.>", app_token(app_id))
}

/// Renders a subject template for an event in one left-to-right pass (placeholders inside
/// substituted values are not expanded again). An empty template means the v1 default.
pub fn render_subject(template: &str, event: &EventEnvelope) -> String {
    render_subject_of(template, &event.app_id, &event.run_id, &event.event_type)
}

/// [`render_subject`] from the three values a subject names (what a publisher has before it
/// builds an envelope).
pub fn render_subject_of(template: &str, app_id: &str, run_id: &str, event_type: &str) -> String {
    let template = match template.trim() {
        "" => DEFAULT_SUBJECT_TEMPLATE,
        t => t,
    };
    let app = app_token(app_id);
    let run = token(run_id);
    let kind = token(event_type);
    let placeholders: [(&str, &str); 4] = [
        ("{app_id}", &app),
        ("{run_id}", &run),
        ("{event_type}", &kind),
        ("{type}", &kind),
    ];
    let mut out = String::with_capacity(template.len() + 32);
    let mut rest = template;
    'outer: while !rest.is_empty() {
        for (name, value) in placeholders {
            if let Some(tail) = rest.strip_prefix(name) {
                out.push_str(value);
                rest = tail;
                continue 'outer;
            }
        }
        let mut chars = rest.chars();
        if let Some(c) = chars.next() {
            out.push(c);
        }
        rest = chars.as_str();
    }
    out
}

/// Renders the v2 subject of an event.
pub fn render_v2_subject(event: &EventEnvelope) -> String {
    render_subject(DEFAULT_V2_SUBJECT_TEMPLATE, event)
}
