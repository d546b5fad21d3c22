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
    SubjectTemplate::parse(template).render(app_id, run_id, event_type)
}

/// A subject template parsed once (a publisher renders one subject per message): literal text
/// and the placeholders `{app_id}`, `{run_id}`, `{event_type}` and its alias `{type}`, read in
/// one left-to-right pass, as [`render_subject`] does. An empty template means the v1 default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectTemplate {
    parts: Vec<SubjectPart>,
    /// Length of the literal text, to size the rendered subject.
    literal_len: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum SubjectPart {
    Literal(String),
    App,
    Run,
    Kind,
}

impl SubjectTemplate {
    pub fn parse(template: &str) -> SubjectTemplate {
        let template = match template.trim() {
            "" => DEFAULT_SUBJECT_TEMPLATE,
            t => t,
        };
        const PLACEHOLDERS: [(&str, SubjectPart); 4] = [
            ("{app_id}", SubjectPart::App),
            ("{run_id}", SubjectPart::Run),
            ("{event_type}", SubjectPart::Kind),
            ("{type}", SubjectPart::Kind),
        ];
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut rest = template;
        'outer: while !rest.is_empty() {
            for (name, part) in &PLACEHOLDERS {
                if let Some(tail) = rest.strip_prefix(name) {
                    if !literal.is_empty() {
                        parts.push(SubjectPart::Literal(std::mem::take(&mut literal)));
                    }
                    parts.push(part.clone());
                    rest = tail;
                    continue 'outer;
                }
            }
            let mut chars = rest.chars();
            if let Some(c) = chars.next() {
                literal.push(c);
            }
            rest = chars.as_str();
        }
        if !literal.is_empty() {
            parts.push(SubjectPart::Literal(literal));
        }
        let literal_len = parts
            .iter()
            .map(|part| match part {
                SubjectPart::Literal(text) => text.len(),
                _ => 0,
            })
            .sum();
        SubjectTemplate { parts, literal_len }
    }

    /// The subject of an event of `app_id`'s run `run_id` of type `event_type`, each value
    /// sanitised as [`token`] (and [`app_token`] for the app) does.
    pub fn render(&self, app_id: &str, run_id: &str, event_type: &str) -> String {
        let mut out = String::with_capacity(
            self.literal_len + app_id.len() + run_id.len() + 2 * event_type.len(),
        );
        for part in &self.parts {
            match part {
                SubjectPart::Literal(text) => out.push_str(text),
                SubjectPart::App => push_token(&mut out, app_id, true),
                SubjectPart::Run => push_token(&mut out, run_id, false),
                SubjectPart::Kind => push_token(&mut out, event_type, false),
            }
        }
        out
    }
}

/// Appends [`token`] of `value` (or [`app_token`] when `app`) without building it apart.
fn push_token(out: &mut String, value: &str, app: bool) {
    let value = value.trim();
    if value.is_empty() {
        out.push('_');
        return;
    }
    out.extend(value.chars().map(|c| match c {
        ' ' | '\t' | '\n' | '\r' | '/' | '\\' | '*' | '>' => '_',
        '.' if app => '_',
        c => c,
    }));
}

/// Renders the v2 subject of an event.
pub fn render_v2_subject(event: &EventEnvelope) -> String {
    render_subject(DEFAULT_V2_SUBJECT_TEMPLATE, event)
}
