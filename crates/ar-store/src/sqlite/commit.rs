//! One commit on SQLite: the run-row statement and every record of a `RunChange`, in one
//! `BEGIN IMMEDIATE … COMMIT` transaction of prepared, cached statements.
//!
//! The run-row statement comes first and bumps the run's per-record-kind counters (its
//! `RETURNING` hands back the new values), so sequence numbers are assigned in the transaction
//! that writes the records and stay contiguous per run. When it matches nothing (stale
//! version, unknown run, id or host run id taken) nothing else is written.

use std::sync::LazyLock;

use ar_core::store::StoreResult;
use ar_core::Run;
use rusqlite::{params, Connection, Statement};

use super::conn::{write_transaction, DbResult};
use super::read_run_by_host_run_id;
use crate::change::{
    ArtifactRow, Counters, InteractionRow, MessageRow, Prepared, RunRow, SecretPlan, ToolCallRow,
};
use crate::codec::ts_text;

/// Which run-row statement a commit starts with.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    /// Insert the run (`create_run`).
    Create,
    /// Update the run row under its version guard.
    Update,
    /// Bump the counters only (a change without a run record).
    Touch,
}

/// What a commit did.
pub(super) enum Applied {
    /// Written: the run row after the change and the events' positions in sequence order.
    Done { head: Head, positions: Vec<i64> },
    /// Update or touch matched nothing; whether the run exists (in the change's app).
    Missing { exists: bool },
    /// Create found the run id or host run id taken; the run holding the host run id.
    Taken(Option<Box<Run>>),
}

/// The run row after the run-row statement.
pub(super) struct Head {
    pub version: i64,
    pub counters: Counters,
    pub host_run_id: String,
}

/// Mutable run columns in binding order (`bind_run_mutable`), as `?1..?19`.
const RUN_MUTABLE: [&str; 20] = [
    "agent_id",
    "target_type",
    "target_id",
    "target",
    "runtime_kind",
    "execution_mode",
    "invocation_mode",
    "external_actor_id",
    "status",
    "pause_reason",
    "approval_state",
    "input",
    "output_summary",
    "workspace_lease",
    "error_message",
    "started_at",
    "completed_at",
    "updated_at",
    "pause_requested",
    "engine_state",
];

const RETURNING: &str = "RETURNING version, event_seq, message_seq, artifact_seq, host_run_id";

/// `?21..?23` add to the counters; `?24` run id, `?25` app id, `?26` expected version.
static RUN_UPDATE: LazyLock<String> = LazyLock::new(|| run_update(""));

/// `RUN_UPDATE` that also changes the lease: `?27`/`?28` the lease taker and its expiry, `?29`
/// the owner releasing it (each NULL when the change does not do that). SET expressions see
/// the row as it was, so a release only clears a lease its owner still holds. A separate
/// statement because naming the lease columns makes SQLite rewrite their index entry on
/// every update, changed or not.
static RUN_UPDATE_WITH_LEASE: LazyLock<String> = LazyLock::new(|| {
    run_update(
        ", lease_owner = CASE WHEN ?27 IS NOT NULL THEN ?27 \
         WHEN lease_owner = ?29 THEN NULL ELSE lease_owner END, \
         lease_expires_at = CASE WHEN ?27 IS NOT NULL THEN ?28 \
         WHEN lease_owner = ?29 THEN NULL ELSE lease_expires_at END",
    )
});

fn run_update(extra_assignments: &str) -> String {
    let assignments: Vec<String> = RUN_MUTABLE
        .iter()
        .enumerate()
        .map(|(index, column)| format!("{column} = ?{}", index + 1))
        .collect();
    format!(
        "UPDATE runs SET {}, version = version + 1, event_seq = event_seq + ?21, \
         message_seq = message_seq + ?22, artifact_seq = artifact_seq + ?23{extra_assignments} \
         WHERE id = ?24 AND app_id = ?25 AND version = ?26 {RETURNING}",
        assignments.join(", ")
    )
}

/// `?21..?23` initial counters; `?24` id, `?25` app id, `?26` host run id, `?27` created at;
/// `?28`/`?29` the lease taker and its expiry (NULL: no lease).
static RUN_INSERT: LazyLock<String> = LazyLock::new(|| {
    let values: Vec<String> = (1..=RUN_MUTABLE.len())
        .map(|index| format!("?{index}"))
        .collect();
    format!(
        "INSERT INTO runs (id, app_id, host_run_id, created_at, version, event_seq, message_seq, \
         artifact_seq, lease_owner, lease_expires_at, {}) \
         VALUES (?24, ?25, ?26, ?27, 1, ?21, ?22, ?23, ?28, ?29, {}) \
         ON CONFLICT DO NOTHING {RETURNING}",
        RUN_MUTABLE.join(", "),
        values.join(", ")
    )
});

static RUN_TOUCH: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE runs SET event_seq = event_seq + ?1, message_seq = message_seq + ?2, \
         artifact_seq = artifact_seq + ?3 WHERE id = ?4 AND app_id = ?5 {RETURNING}"
    )
});

const INSERT_EVENT: &str = "INSERT INTO events (run_id, app_id, host_run_id, sequence_no, \
     event_id, event_type, data, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";

const INSERT_MESSAGE: &str = "INSERT INTO messages (run_id, sequence_no, id, app_id, \
     runtime_message_id, role, content, message_type, content_blocks, tool_invocations, \
     created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";

const INSERT_ARTIFACT: &str = "INSERT INTO artifacts (run_id, sequence_no, id, app_id, \
     artifact_type, format, storage_mode, inline_content, metadata, created_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";

const UPSERT_INTERACTION: &str = "INSERT INTO interactions (run_id, id, app_id, runtime_kind, \
     interaction_kind, status, title, summary, request_payload, response_payload, \
     resolved_by_external_id, resolved_at, created_at, updated_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) \
     ON CONFLICT (run_id, id) DO UPDATE SET app_id = excluded.app_id, \
     runtime_kind = excluded.runtime_kind, interaction_kind = excluded.interaction_kind, \
     status = excluded.status, title = excluded.title, summary = excluded.summary, \
     request_payload = excluded.request_payload, response_payload = excluded.response_payload, \
     resolved_by_external_id = excluded.resolved_by_external_id, \
     resolved_at = excluded.resolved_at, created_at = excluded.created_at, \
     updated_at = excluded.updated_at";

const UPSERT_TOOL_CALL: &str = "INSERT INTO tool_calls (run_id, id, app_id, tool_name, input, \
     output, error, mutating, approval_required, created_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) \
     ON CONFLICT (run_id, id) DO UPDATE SET app_id = excluded.app_id, \
     tool_name = excluded.tool_name, input = excluded.input, output = excluded.output, \
     error = excluded.error, mutating = excluded.mutating, \
     approval_required = excluded.approval_required, created_at = excluded.created_at";

const UPSERT_CHECKPOINT: &str = "INSERT INTO checkpoints (run_id, step, state, created_at) \
     VALUES (?1, ?2, ?3, ?4) ON CONFLICT (run_id, step) DO UPDATE SET state = excluded.state, \
     created_at = excluded.created_at";

const DELETE_MESSAGE: &str = "DELETE FROM messages WHERE run_id = ?1 AND app_id = ?2 AND id = ?3";

const DELETE_ALL_SECRETS: &str = "DELETE FROM run_secrets WHERE run_id = ?1";

const DELETE_SECRET: &str = "DELETE FROM run_secrets WHERE run_id = ?1 AND kind = ?2";

const PUT_SECRET: &str = "INSERT INTO run_secrets (run_id, kind, ciphertext) VALUES (?1, ?2, ?3) \
     ON CONFLICT (run_id, kind) DO UPDATE SET ciphertext = excluded.ciphertext";

const RUN_EXISTS: &str = "SELECT 1 FROM runs WHERE id = ?1 AND app_id = ?2";

/// Binds the mutable columns of a run as `?1..?20`.
fn bind_run_mutable(statement: &mut Statement<'_>, run: &RunRow) -> rusqlite::Result<()> {
    statement.raw_bind_parameter(1, &run.agent_id)?;
    statement.raw_bind_parameter(2, &run.target_type)?;
    statement.raw_bind_parameter(3, &run.target_id)?;
    statement.raw_bind_parameter(4, &run.target)?;
    statement.raw_bind_parameter(5, run.runtime_kind)?;
    statement.raw_bind_parameter(6, run.execution_mode)?;
    statement.raw_bind_parameter(7, run.invocation_mode)?;
    statement.raw_bind_parameter(8, &run.external_actor_id)?;
    statement.raw_bind_parameter(9, run.status)?;
    statement.raw_bind_parameter(10, run.pause_reason)?;
    statement.raw_bind_parameter(11, run.approval_state)?;
    statement.raw_bind_parameter(12, &run.input)?;
    statement.raw_bind_parameter(13, &run.output_summary)?;
    statement.raw_bind_parameter(14, run.workspace_lease.as_deref())?;
    statement.raw_bind_parameter(15, &run.error_message)?;
    statement.raw_bind_parameter(16, run.started_at.map(ts_text))?;
    statement.raw_bind_parameter(17, run.completed_at.map(ts_text))?;
    statement.raw_bind_parameter(18, ts_text(run.updated_at))?;
    statement.raw_bind_parameter(19, run.pause_requested)?;
    statement.raw_bind_parameter(20, &run.engine_state)?;
    Ok(())
}

/// Binds the counter increments as `?21..?23`.
fn bind_counts(
    statement: &mut Statement<'_>,
    change: &Prepared,
    first: usize,
) -> rusqlite::Result<()> {
    statement.raw_bind_parameter(first, change.events.len() as i64)?;
    statement.raw_bind_parameter(first + 1, change.messages.len() as i64)?;
    statement.raw_bind_parameter(first + 2, change.artifacts.len() as i64)?;
    Ok(())
}

/// Steps a bound run-row statement and reads its `RETURNING` row, if it matched.
fn head(statement: &mut Statement<'_>) -> DbResult<Option<Head>> {
    let mut rows = statement.raw_query();
    let Some(row) = rows.next()? else {
        return Ok(None);
    };
    Ok(Some(Head {
        version: row.get(0)?,
        counters: Counters {
            events: row.get(1)?,
            messages: row.get(2)?,
            artifacts: row.get(3)?,
        },
        host_run_id: row.get(4)?,
    }))
}

/// Applies a group of commits in one write transaction, each in its own savepoint: one that
/// fails is undone and reported alone, the others stand. A lock conflict fails the whole
/// group (it is retried whole).
pub(super) fn apply_group(
    conn: &Connection,
    jobs: &[(Kind, Prepared)],
    context: &'static str,
) -> DbResult<Vec<StoreResult<Applied>>> {
    if let [(kind, change)] = jobs {
        return match apply(conn, *kind, change) {
            Err(fail) if fail.is_busy() => Err(fail),
            outcome => Ok(vec![outcome.map_err(|fail| fail.into_store(context))]),
        };
    }
    write_transaction(conn, |conn| {
        let mut outcomes = Vec::with_capacity(jobs.len());
        for (kind, change) in jobs {
            conn.prepare_cached("SAVEPOINT grouped_commit")?
                .execute([])?;
            match apply_in(conn, *kind, change) {
                Ok(applied) => {
                    conn.prepare_cached("RELEASE grouped_commit")?.execute([])?;
                    outcomes.push(Ok(applied));
                }
                Err(fail) if fail.is_busy() => return Err(fail),
                Err(fail) => {
                    conn.execute_batch("ROLLBACK TO grouped_commit; RELEASE grouped_commit")?;
                    outcomes.push(Err(fail.into_store(context)));
                }
            }
        }
        Ok(outcomes)
    })
}

/// Applies a commit in one write transaction.
pub(super) fn apply(conn: &Connection, kind: Kind, change: &Prepared) -> DbResult<Applied> {
    write_transaction(conn, |conn| apply_in(conn, kind, change))
}

/// Applies a commit inside the caller's transaction.
fn apply_in(conn: &Connection, kind: Kind, change: &Prepared) -> DbResult<Applied> {
    let head = match (kind, change.run.as_ref()) {
        (Kind::Touch, _) => {
            let mut statement = conn.prepare_cached(&RUN_TOUCH)?;
            bind_counts(&mut statement, change, 1)?;
            statement.raw_bind_parameter(4, &change.run_id)?;
            statement.raw_bind_parameter(5, &change.app_id)?;
            head(&mut statement)?
        }
        (Kind::Update, Some(run)) => {
            let lease = &change.lease;
            let mut statement = if lease.changes() {
                conn.prepare_cached(&RUN_UPDATE_WITH_LEASE)?
            } else {
                conn.prepare_cached(&RUN_UPDATE)?
            };
            bind_run_mutable(&mut statement, run)?;
            bind_counts(&mut statement, change, 21)?;
            statement.raw_bind_parameter(24, &change.run_id)?;
            statement.raw_bind_parameter(25, &change.app_id)?;
            statement.raw_bind_parameter(26, change.expected_version)?;
            if lease.changes() {
                let (owner, until) = lease.take();
                statement.raw_bind_parameter(27, owner)?;
                statement.raw_bind_parameter(28, until.map(ts_text))?;
                statement.raw_bind_parameter(29, lease.release())?;
            }
            head(&mut statement)?
        }
        (Kind::Create, Some(run)) => {
            let mut statement = conn.prepare_cached(&RUN_INSERT)?;
            bind_run_mutable(&mut statement, run)?;
            bind_counts(&mut statement, change, 21)?;
            statement.raw_bind_parameter(24, &run.id)?;
            statement.raw_bind_parameter(25, &run.app_id)?;
            statement.raw_bind_parameter(26, &run.host_run_id)?;
            statement.raw_bind_parameter(27, ts_text(run.created_at))?;
            let (owner, until) = change.lease.take();
            statement.raw_bind_parameter(28, owner)?;
            statement.raw_bind_parameter(29, until.map(ts_text))?;
            head(&mut statement)?
        }
        (Kind::Update | Kind::Create, None) => {
            return Err(ar_core::store::StoreError::backend_msg(
                "sqlite: run row missing from change".to_string(),
            )
            .into())
        }
    };
    let Some(head) = head else {
        return missing(conn, kind, change);
    };
    let positions = write_records(conn, change, &head)?;
    Ok(Applied::Done { head, positions })
}

/// Why the run-row statement matched nothing, read in the same transaction.
fn missing(conn: &Connection, kind: Kind, change: &Prepared) -> DbResult<Applied> {
    match (kind, change.run.as_ref()) {
        (Kind::Create, Some(run)) => {
            if run.host_run_id.is_empty() {
                return Ok(Applied::Taken(None));
            }
            let existing = read_run_by_host_run_id(conn, &run.app_id, &run.host_run_id)?;
            Ok(Applied::Taken(existing.map(Box::new)))
        }
        _ => {
            let exists = conn
                .prepare_cached(RUN_EXISTS)?
                .exists(params![change.run_id, change.app_id])?;
            Ok(Applied::Missing { exists })
        }
    }
}

/// Writes the records of a change whose run row was written; returns the events' positions.
fn write_records(conn: &Connection, change: &Prepared, head: &Head) -> DbResult<Vec<i64>> {
    let run_id = change.run_id.as_str();
    let app_id = change.app_id.as_str();
    let positions = insert_events(conn, change, head)?;
    delete_messages(conn, run_id, app_id, &change.removed_messages)?;
    insert_messages(
        conn,
        run_id,
        app_id,
        &change.messages,
        head.counters.messages,
    )?;
    insert_artifacts(
        conn,
        run_id,
        app_id,
        &change.artifacts,
        head.counters.artifacts,
    )?;
    upsert_interactions(conn, run_id, app_id, &change.interactions)?;
    upsert_tool_calls(conn, run_id, app_id, &change.tool_calls)?;
    if let Some(checkpoint) = &change.checkpoint {
        conn.prepare_cached(UPSERT_CHECKPOINT)?.execute(params![
            run_id,
            checkpoint.step,
            checkpoint.state,
            ts_text(checkpoint.created_at),
        ])?;
    }
    write_secrets(conn, run_id, &change.secrets)?;
    Ok(positions)
}

/// The sequence number before a batch of `count` rows, given the run's counter that already
/// includes them.
fn sequence_base(last: i64, count: usize) -> i64 {
    last - count as i64
}

/// Inserts the events; returns their positions in sequence order.
fn insert_events(conn: &Connection, change: &Prepared, head: &Head) -> DbResult<Vec<i64>> {
    let mut positions = Vec::with_capacity(change.events.len());
    if change.events.is_empty() {
        return Ok(positions);
    }
    let base = sequence_base(head.counters.events, change.events.len());
    let created_at = ts_text(change.event_time);
    let mut statement = conn.prepare_cached(INSERT_EVENT)?;
    for (index, event) in change.events.iter().enumerate() {
        positions.push(statement.insert(params![
            change.run_id,
            change.app_id,
            head.host_run_id,
            base + index as i64 + 1,
            event.event_id,
            event.kind.as_str(),
            event.data_json.get(),
            created_at,
        ])?);
    }
    Ok(positions)
}

/// Deletes the run's messages with these ids (none on the hot path: only a rollback does).
fn delete_messages(conn: &Connection, run_id: &str, app_id: &str, ids: &[String]) -> DbResult<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let mut statement = conn.prepare_cached(DELETE_MESSAGE)?;
    for id in ids {
        statement.execute(params![run_id, app_id, id])?;
    }
    Ok(())
}

/// Inserts the messages; `last` is the run's message counter after them.
fn insert_messages(
    conn: &Connection,
    run_id: &str,
    app_id: &str,
    rows: &[MessageRow],
    last: i64,
) -> DbResult<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let base = sequence_base(last, rows.len());
    let mut statement = conn.prepare_cached(INSERT_MESSAGE)?;
    for (index, row) in rows.iter().enumerate() {
        let m = &row.record;
        statement.execute(params![
            run_id,
            base + index as i64 + 1,
            m.id,
            app_id,
            m.runtime_message_id,
            m.role.as_str(),
            m.content,
            m.message_type,
            row.content_blocks,
            row.tool_invocations,
            ts_text(m.created_at),
        ])?;
    }
    Ok(())
}

/// Inserts the artifacts; `last` is the run's artifact counter after them.
fn insert_artifacts(
    conn: &Connection,
    run_id: &str,
    app_id: &str,
    rows: &[ArtifactRow],
    last: i64,
) -> DbResult<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let base = sequence_base(last, rows.len());
    let mut statement = conn.prepare_cached(INSERT_ARTIFACT)?;
    for (index, row) in rows.iter().enumerate() {
        let a = &row.record;
        statement.execute(params![
            run_id,
            base + index as i64 + 1,
            a.id,
            app_id,
            a.artifact_type,
            a.format,
            a.storage_mode,
            a.inline_content,
            row.metadata,
            ts_text(a.created_at),
        ])?;
    }
    Ok(())
}

fn upsert_interactions(
    conn: &Connection,
    run_id: &str,
    app_id: &str,
    rows: &[InteractionRow],
) -> DbResult<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut statement = conn.prepare_cached(UPSERT_INTERACTION)?;
    for row in rows {
        let i = &row.record;
        statement.execute(params![
            run_id,
            i.id,
            app_id,
            i.runtime_kind.as_str(),
            i.interaction_kind,
            i.status.as_str(),
            i.title,
            i.summary,
            row.request_payload,
            row.response_payload,
            i.resolved_by_external_id,
            i.resolved_at.map(ts_text),
            ts_text(i.created_at),
            ts_text(i.updated_at),
        ])?;
    }
    Ok(())
}

fn upsert_tool_calls(
    conn: &Connection,
    run_id: &str,
    app_id: &str,
    rows: &[ToolCallRow],
) -> DbResult<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut statement = conn.prepare_cached(UPSERT_TOOL_CALL)?;
    for row in rows {
        let c = &row.record;
        statement.execute(params![
            run_id,
            c.id,
            app_id,
            c.tool_name,
            row.input,
            row.output,
            c.error,
            c.mutating,
            c.approval_required,
            ts_text(c.created_at),
        ])?;
    }
    Ok(())
}

/// Applies the secret plan: deletes first, then puts.
fn write_secrets(conn: &Connection, run_id: &str, secrets: &SecretPlan) -> DbResult<()> {
    if secrets.delete_all {
        // Deleting everything before the puts has the net effect of "all but the puts".
        conn.prepare_cached(DELETE_ALL_SECRETS)?
            .execute(params![run_id])?;
    } else if !secrets.deletes.is_empty() {
        let mut statement = conn.prepare_cached(DELETE_SECRET)?;
        for kind in &secrets.deletes {
            statement.execute(params![run_id, kind])?;
        }
    }
    if !secrets.puts.is_empty() {
        let mut statement = conn.prepare_cached(PUT_SECRET)?;
        for (kind, ciphertext) in &secrets.puts {
            statement.execute(params![run_id, kind, ciphertext])?;
        }
    }
    Ok(())
}
