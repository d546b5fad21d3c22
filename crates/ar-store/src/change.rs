//! A `RunChange` normalized for writing: NULs stripped, timestamps truncated to microseconds,
//! JSON encoded once, duplicates collapsed, secret operations reduced to their net effect.
//!
//! Both backends write from this form, and the records handed back in `Committed` are the
//! normalized ones, so they equal what a later read returns.

use ar_core::agent::Agent;
use ar_core::event::EventData;
use ar_core::ids::{new_id, prefix};
use ar_core::records::{Artifact, Interaction, Message, ToolCallRecord};
use ar_core::redact::Redactor;
use ar_core::store::{
    Checkpoint, Committed, LeaseChange, RunChange, SecretChange, StoreError, StoreResult,
};
use ar_core::{JsonMap, Run, RunEvent, StoredEvent};
use chrono::{DateTime, Utc};

use crate::codec::{
    clean, clean_in_place, json_map_raw_mut, json_opt_text_mut, json_text, json_text_mut, micros,
};

/// A run row ready to bind.
pub(crate) struct RunRow {
    pub id: String,
    pub app_id: String,
    pub host_run_id: String,
    pub agent_id: String,
    pub target_type: String,
    pub target_id: String,
    pub target: String,
    pub runtime_kind: &'static str,
    pub execution_mode: &'static str,
    pub invocation_mode: &'static str,
    pub external_actor_id: String,
    pub status: &'static str,
    pub pause_reason: &'static str,
    pub approval_state: &'static str,
    pub input: String,
    pub output_summary: String,
    pub workspace_lease: Option<String>,
    pub error_message: String,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub pause_requested: bool,
    pub engine_state: String,
}

impl RunRow {
    pub fn encode(run: &Run) -> StoreResult<RunRow> {
        Ok(RunRow {
            id: clean(&run.id).into_owned(),
            app_id: clean(&run.app_id).into_owned(),
            host_run_id: clean(&run.host_run_id).into_owned(),
            agent_id: clean(&run.agent_id).into_owned(),
            target_type: clean(&run.target.target_type).into_owned(),
            target_id: clean(&run.target.id).into_owned(),
            target: json_text(&run.target)?,
            runtime_kind: run.runtime_kind.as_str(),
            execution_mode: run.execution_mode.as_str(),
            invocation_mode: run.invocation_mode.as_str(),
            external_actor_id: clean(&run.external_actor_id).into_owned(),
            status: run.status().as_str(),
            pause_reason: run.pause_reason().as_str(),
            approval_state: run.approval_state().as_str(),
            input: json_text(&run.input)?,
            output_summary: json_text(&run.output_summary)?,
            workspace_lease: run.workspace_lease.as_ref().map(json_text).transpose()?,
            error_message: clean(&run.error_message).into_owned(),
            started_at: run.started_at.map(micros),
            completed_at: run.completed_at.map(micros),
            created_at: micros(run.created_at),
            updated_at: micros(run.updated_at),
            pause_requested: run.state.pause_requested(),
            engine_state: json_text(&run.engine)?,
        })
    }
}

/// An agent row ready to bind.
pub(crate) struct AgentRow {
    pub id: String,
    pub app_id: String,
    pub name: String,
    pub runtime_kind: &'static str,
    pub provider: String,
    pub model: String,
    pub system_prompt: String,
    pub skills: String,
    pub allowed_tools: String,
    pub allowed_targets: String,
    pub approval_mode: &'static str,
    pub default_invocation_mode: &'static str,
    pub execution_config: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl AgentRow {
    pub fn encode(agent: &Agent) -> StoreResult<AgentRow> {
        Ok(AgentRow {
            id: clean(&agent.id).into_owned(),
            app_id: clean(&agent.app_id).into_owned(),
            name: clean(&agent.name).into_owned(),
            runtime_kind: agent.runtime_kind.as_str(),
            provider: clean(&agent.provider).into_owned(),
            model: clean(&agent.model).into_owned(),
            system_prompt: clean(&agent.system_prompt).into_owned(),
            skills: json_text(&agent.skills)?,
            allowed_tools: json_text(&agent.allowed_tools)?,
            allowed_targets: json_text(&agent.allowed_targets)?,
            approval_mode: agent.approval_mode.as_str(),
            default_invocation_mode: agent.default_invocation_mode.as_str(),
            execution_config: agent.execution_config.as_ref().map(json_text).transpose()?,
            created_at: micros(agent.created_at),
            updated_at: micros(agent.updated_at),
        })
    }
}

/// A message with its JSON columns encoded; `sequence_no` is set once the store assigns it.
pub(crate) struct MessageRow {
    pub record: Message,
    pub content_blocks: Option<String>,
    pub tool_invocations: Option<String>,
}

pub(crate) struct ArtifactRow {
    pub record: Artifact,
    pub metadata: Option<String>,
}

pub(crate) struct InteractionRow {
    pub record: Interaction,
    pub request_payload: Option<String>,
    pub response_payload: Option<String>,
}

pub(crate) struct ToolCallRow {
    pub record: ToolCallRecord,
    pub input: String,
    pub output: Option<String>,
}

/// An event before its position is known; `sequence_no` is its 1-based index in the commit
/// until the store offsets it.
pub(crate) struct EventRow {
    pub event_id: String,
    pub kind: ar_core::EventKind,
    pub data: JsonMap,
    /// `data` as written to the log (and kept by the committed event).
    pub data_json: Box<serde_json::value::RawValue>,
}

pub(crate) struct CheckpointRow {
    pub step: i64,
    pub state: String,
    pub created_at: DateTime<Utc>,
}

/// Net effect of a list of secret operations, applied as deletes then upserts.
#[derive(Default)]
pub(crate) struct SecretPlan {
    /// Delete every secret of the run not in `puts`.
    pub delete_all: bool,
    /// Kinds to delete (disjoint from `puts`).
    pub deletes: Vec<String>,
    /// Kinds to insert or replace, each once.
    pub puts: Vec<(String, Vec<u8>)>,
}

impl SecretPlan {
    fn reduce(changes: Vec<SecretChange>) -> SecretPlan {
        let mut plan = SecretPlan::default();
        for change in changes {
            match change {
                SecretChange::Put { kind, ciphertext } => {
                    let kind = clean(&kind).into_owned();
                    plan.deletes.retain(|existing| *existing != kind);
                    plan.puts.retain(|(existing, _)| *existing != kind);
                    plan.puts.push((kind, ciphertext));
                }
                SecretChange::Delete { kind } => {
                    let kind = clean(&kind).into_owned();
                    plan.puts.retain(|(existing, _)| *existing != kind);
                    if !plan.deletes.contains(&kind) {
                        plan.deletes.push(kind);
                    }
                }
                SecretChange::DeleteAll => {
                    plan = SecretPlan {
                        delete_all: true,
                        ..SecretPlan::default()
                    };
                }
            }
        }
        plan
    }
}

/// A whole change, normalized.
pub(crate) struct Prepared {
    pub app_id: String,
    pub run_id: String,
    pub run: Option<RunRow>,
    /// The version the update is guarded by (the change's, else the run record's own).
    pub expected_version: i64,
    pub messages: Vec<MessageRow>,
    /// Ids of the run's messages to delete (before `messages` are inserted).
    pub removed_messages: Vec<String>,
    pub artifacts: Vec<ArtifactRow>,
    pub interactions: Vec<InteractionRow>,
    pub tool_calls: Vec<ToolCallRow>,
    pub events: Vec<EventRow>,
    /// `created_at` of every event in this change.
    pub event_time: DateTime<Utc>,
    pub checkpoint: Option<CheckpointRow>,
    pub secrets: SecretPlan,
    pub lease: LeasePlan,
}

/// A lease change ready to bind (owner cleaned, expiry at microseconds).
pub(crate) struct LeasePlan(Option<LeaseChange>);

impl LeasePlan {
    fn of(change: Option<LeaseChange>) -> LeasePlan {
        LeasePlan(change.map(|change| match change {
            LeaseChange::Take { owner, until } => LeaseChange::Take {
                owner: clean(&owner).into_owned(),
                until: micros(until),
            },
            LeaseChange::Release { owner } => LeaseChange::Release {
                owner: clean(&owner).into_owned(),
            },
        }))
    }

    /// Whether the change touches the lease at all.
    pub fn changes(&self) -> bool {
        self.0.is_some()
    }

    /// Who takes the lease, and until when.
    pub fn take(&self) -> (Option<&str>, Option<DateTime<Utc>>) {
        match &self.0 {
            Some(LeaseChange::Take { owner, until }) => (Some(owner), Some(*until)),
            _ => (None, None),
        }
    }

    /// Who gives the lease up.
    pub fn release(&self) -> Option<&str> {
        match &self.0 {
            Some(LeaseChange::Release { owner }) => Some(owner),
            _ => None,
        }
    }
}

/// Keeps the last record for each id, at the position of its first occurrence (one statement
/// may not upsert the same row twice).
fn dedup_by_id<T>(rows: Vec<T>, id: impl Fn(&T) -> &str) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(rows.len());
    for row in rows {
        match out.iter().position(|existing| id(existing) == id(&row)) {
            Some(index) => out[index] = row,
            None => out.push(row),
        }
    }
    out
}

/// Scrubs the run's secrets from every record of a change (events are scrubbed as their data is
/// made), so no secret value is ever written, whatever record an agent put it in.
fn scrub_records(change: &mut RunChange, redactor: &Redactor) {
    let json = |value: &mut Option<serde_json::Value>| {
        if let Some(value) = value {
            redactor.scrub_json(value);
        }
    };
    if let Some(run) = change.run.as_mut() {
        redactor.scrub(&mut run.error_message);
        redactor.scrub_map(&mut run.output_summary);
    }
    for message in &mut change.messages {
        redactor.scrub(&mut message.content);
        json(&mut message.content_blocks);
        json(&mut message.tool_invocations);
    }
    for artifact in &mut change.artifacts {
        redactor.scrub(&mut artifact.inline_content);
        json(&mut artifact.metadata);
    }
    for interaction in &mut change.interactions {
        redactor.scrub(&mut interaction.title);
        redactor.scrub(&mut interaction.summary);
        json(&mut interaction.request_payload);
        json(&mut interaction.response_payload);
    }
    for call in &mut change.tool_calls {
        redactor.scrub_json(&mut call.input);
        json(&mut call.output);
        redactor.scrub(&mut call.error);
    }
    if let Some(checkpoint) = change.checkpoint.as_mut() {
        redactor.scrub_json(&mut checkpoint.state);
    }
}

/// The ids every record of a change is stamped with (the change's, cleaned).
struct Owner<'a> {
    app_id: &'a str,
    run_id: &'a str,
}

impl Owner<'_> {
    /// Sets a record's ids, reusing the strings it already holds.
    fn stamp(&self, app_id: &mut String, run_id: &mut String) {
        self.app_id.clone_into(app_id);
        self.run_id.clone_into(run_id);
    }
}

/// Encodes each record in order, failing on the first that cannot be.
fn encode_each<T, R>(
    records: Vec<T>,
    mut encode: impl FnMut(T) -> StoreResult<R>,
) -> StoreResult<Vec<R>> {
    let mut rows = Vec::with_capacity(records.len());
    for record in records {
        rows.push(encode(record)?);
    }
    Ok(rows)
}

impl MessageRow {
    fn encode(mut message: Message, owner: &Owner<'_>) -> StoreResult<MessageRow> {
        owner.stamp(&mut message.app_id, &mut message.run_id);
        clean_in_place(&mut message.id);
        clean_in_place(&mut message.runtime_message_id);
        clean_in_place(&mut message.content);
        clean_in_place(&mut message.message_type);
        message.created_at = micros(message.created_at);
        let content_blocks = json_opt_text_mut(&mut message.content_blocks)?;
        let tool_invocations = json_opt_text_mut(&mut message.tool_invocations)?;
        Ok(MessageRow {
            record: message,
            content_blocks,
            tool_invocations,
        })
    }
}

impl ArtifactRow {
    fn encode(mut artifact: Artifact, owner: &Owner<'_>) -> StoreResult<ArtifactRow> {
        owner.stamp(&mut artifact.app_id, &mut artifact.run_id);
        clean_in_place(&mut artifact.id);
        clean_in_place(&mut artifact.artifact_type);
        clean_in_place(&mut artifact.format);
        clean_in_place(&mut artifact.storage_mode);
        clean_in_place(&mut artifact.inline_content);
        artifact.created_at = micros(artifact.created_at);
        let metadata = json_opt_text_mut(&mut artifact.metadata)?;
        Ok(ArtifactRow {
            record: artifact,
            metadata,
        })
    }
}

impl InteractionRow {
    fn encode(mut interaction: Interaction, owner: &Owner<'_>) -> StoreResult<InteractionRow> {
        owner.stamp(&mut interaction.app_id, &mut interaction.run_id);
        clean_in_place(&mut interaction.id);
        clean_in_place(&mut interaction.interaction_kind);
        clean_in_place(&mut interaction.title);
        clean_in_place(&mut interaction.summary);
        clean_in_place(&mut interaction.resolved_by_external_id);
        interaction.resolved_at = interaction.resolved_at.map(micros);
        interaction.created_at = micros(interaction.created_at);
        interaction.updated_at = micros(interaction.updated_at);
        let request_payload = json_opt_text_mut(&mut interaction.request_payload)?;
        let response_payload = json_opt_text_mut(&mut interaction.response_payload)?;
        Ok(InteractionRow {
            record: interaction,
            request_payload,
            response_payload,
        })
    }
}

impl ToolCallRow {
    fn encode(mut call: ToolCallRecord, owner: &Owner<'_>) -> StoreResult<ToolCallRow> {
        owner.stamp(&mut call.app_id, &mut call.run_id);
        clean_in_place(&mut call.id);
        clean_in_place(&mut call.tool_name);
        clean_in_place(&mut call.error);
        call.created_at = micros(call.created_at);
        let input = json_text_mut(&mut call.input)?;
        let output = json_opt_text_mut(&mut call.output)?;
        Ok(ToolCallRow {
            record: call,
            input,
            output,
        })
    }
}

impl EventRow {
    /// Renders the event's payload once (scrubbed of the run's secrets) and gives it its id.
    fn encode(
        event: RunEvent,
        host_run_id: &str,
        redactor: Option<&Redactor>,
    ) -> StoreResult<EventRow> {
        let mut data = event.data(host_run_id);
        if let Some(redactor) = redactor {
            redactor.scrub_map(&mut data);
        }
        let data_json = json_map_raw_mut(&mut data)?;
        Ok(EventRow {
            event_id: new_id(prefix::EVENT),
            kind: event.kind(),
            data,
            data_json,
        })
    }
}

impl CheckpointRow {
    fn encode(mut checkpoint: Checkpoint) -> StoreResult<CheckpointRow> {
        Ok(CheckpointRow {
            step: checkpoint.step,
            state: json_text_mut(&mut checkpoint.state)?,
            created_at: micros(checkpoint.created_at),
        })
    }
}

impl Prepared {
    pub fn new(mut change: RunChange) -> StoreResult<Prepared> {
        let redactor = change
            .redactor
            .take()
            .filter(|redactor| !redactor.is_empty());
        if let Some(redactor) = &redactor {
            scrub_records(&mut change, redactor);
        }
        let app_id = clean(&change.app_id).into_owned();
        let run_id = clean(&change.run_id).into_owned();
        let run = change.run.as_ref().map(RunRow::encode).transpose()?;
        let expected_version = change
            .expected_version
            .or(change.run.as_ref().map(|run| run.version))
            .unwrap_or(0);
        let owner = Owner {
            app_id: &app_id,
            run_id: &run_id,
        };
        let messages = encode_each(change.messages, |m| MessageRow::encode(m, &owner))?;
        let removed_messages = change
            .removed_messages
            .iter()
            .map(|id| clean(id).into_owned())
            .collect();
        let artifacts = encode_each(change.artifacts, |a| ArtifactRow::encode(a, &owner))?;
        let interactions = encode_each(change.interactions, |i| InteractionRow::encode(i, &owner))?;
        let tool_calls = encode_each(change.tool_calls, |c| ToolCallRow::encode(c, &owner))?;
        let host_run_id = change.host_run_id.as_str();
        let events = encode_each(change.events, |event| {
            EventRow::encode(event, host_run_id, redactor.as_deref())
        })?;
        let checkpoint = change.checkpoint.map(CheckpointRow::encode).transpose()?;
        Ok(Prepared {
            app_id,
            run_id,
            run,
            expected_version,
            messages,
            removed_messages,
            artifacts,
            interactions: dedup_by_id(interactions, |row| &row.record.id),
            tool_calls: dedup_by_id(tool_calls, |row| &row.record.id),
            events,
            event_time: crate::codec::now(),
            checkpoint,
            secrets: SecretPlan::reduce(change.secrets),
            lease: LeasePlan::of(change.lease),
        })
    }

    /// For `create_run`: the change must carry the run, whose ids win over the change's.
    pub fn for_create(change: RunChange) -> StoreResult<Prepared> {
        let Some(run) = change.run.as_ref() else {
            return Err(StoreError::backend_msg(
                "create_run needs the run record in RunChange::run",
            ));
        };
        let change = RunChange {
            app_id: run.app_id.clone(),
            run_id: run.id.clone(),
            host_run_id: run.host_run_id.clone(),
            ..change
        };
        Prepared::new(change)
    }

    /// The error for a commit whose run-row statement matched nothing: the run is missing
    /// (or belongs to another app), or its version moved on.
    pub fn missing_or_stale(&self, exists: bool) -> StoreError {
        if exists {
            StoreError::Conflict(format!(
                "run {} changed since version {}",
                self.run_id, self.expected_version
            ))
        } else {
            StoreError::NotFound(format!("run {}", self.run_id))
        }
    }

    /// The records this change assigned, given the per-run counters after the update
    /// (each counter already includes this change's rows) and the events' positions in
    /// sequence order.
    pub fn committed(
        self,
        version: i64,
        host_run_id: &str,
        seqs: Counters,
        positions: &[i64],
    ) -> StoreResult<Committed> {
        if positions.len() != self.events.len() {
            return Err(StoreError::backend_msg(format!(
                "inserted {} events but got {} positions back",
                self.events.len(),
                positions.len()
            )));
        }
        let event_base = seqs.events - self.events.len() as i64;
        let message_base = seqs.messages - self.messages.len() as i64;
        let artifact_base = seqs.artifacts - self.artifacts.len() as i64;
        let events = self
            .events
            .into_iter()
            .zip(positions)
            .enumerate()
            .map(|(index, (event, position))| StoredEvent {
                position: *position,
                event_id: event.event_id,
                app_id: self.app_id.clone(),
                run_id: self.run_id.clone(),
                host_run_id: host_run_id.to_string(),
                sequence_no: event_base + index as i64 + 1,
                kind: event.kind,
                data: EventData::with_json(event.data, event.data_json),
                created_at: self.event_time,
            })
            .collect();
        let messages = self
            .messages
            .into_iter()
            .enumerate()
            .map(|(index, row)| Message {
                sequence_no: message_base + index as i64 + 1,
                ..row.record
            })
            .collect();
        let artifacts = self
            .artifacts
            .into_iter()
            .enumerate()
            .map(|(index, row)| Artifact {
                sequence_no: artifact_base + index as i64 + 1,
                ..row.record
            })
            .collect();
        Ok(Committed {
            version,
            events,
            messages,
            artifacts,
        })
    }
}

/// Per-run sequence counters: the last number handed out for each kind of record.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Counters {
    pub events: i64,
    pub messages: i64,
    pub artifacts: i64,
}
