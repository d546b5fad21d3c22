//! The PostgreSQL store: a connection pool, optionally confined to one schema, and commits
//! written as a single statement.
//!
//! A commit (or run creation) is one `WITH` statement: the first CTE updates or inserts the
//! run row (taking its row lock, checking the version and bumping the sequence counters), and
//! the following data-modifying CTEs insert events, messages and artifacts and upsert
//! interactions, tool calls, the checkpoint and secrets from arrays, all joined to the run
//! CTE so nothing is written when it matched no row. One statement is one transaction and one
//! round trip, and its text never varies, so it stays prepared on each connection.

use std::sync::{Arc, LazyLock, OnceLock};
use std::time::Duration;

use ar_core::agent::Agent;
use ar_core::records::{Artifact, Interaction, Message, ToolCallRecord};
use ar_core::store::{
    Checkpoint, Committed, CreateRun, RunChange, RunSearch, Store, StoreError, StoreResult,
};
use ar_core::{Run, RunStatus, StoredEvent};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgArguments, PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::{Connection, Executor, PgConnection, Postgres, Row};

use crate::change::{
    AgentRow, ArtifactRow, CheckpointRow, Counters, InteractionRow, MessageRow, Prepared, RunRow,
    SecretPlan, ToolCallRow,
};
use crate::codec::{self, clean, micros, Cols};
use crate::error::{corrupt, is_unique_violation, ConnectError};
use crate::lanes::Lanes;
use crate::position_gaps::PositionGaps;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// Connections a store keeps open (and so at most this many statements in flight).
const LANES: usize = 10;
/// A pooled connection idle longer than this is pinged before it is handed out.
const IDLE_PING_AFTER: Duration = Duration::from_secs(30);

/// Run columns with JSONB read back as text.
macro_rules! pg_run_columns {
    () => {
        "id, app_id, host_run_id, agent_id, target::text AS target, runtime_kind, \
         execution_mode, invocation_mode, external_actor_id, status, pause_reason, \
         approval_state, input::text AS input, output_summary::text AS output_summary, \
         workspace_lease::text AS workspace_lease, error_message, started_at, completed_at, \
         created_at, updated_at, version, pause_requested, engine_state::text AS engine_state"
    };
}

macro_rules! pg_agent_columns {
    () => {
        "app_id, id, name, runtime_kind, provider, model, system_prompt, skills::text AS skills, \
         allowed_tools::text AS allowed_tools, allowed_targets::text AS allowed_targets, \
         approval_mode, default_invocation_mode, execution_config::text AS execution_config, \
         created_at, updated_at"
    };
}

macro_rules! pg_event_columns {
    () => {
        "position, event_id, app_id, run_id, host_run_id, sequence_no, event_type, \
         data::text AS data, created_at"
    };
}

/// A [`Store`] on PostgreSQL.
#[derive(Clone)]
pub struct PostgresStore {
    pool: Arc<Lanes<Postgres>>,
    /// Gaps of the position feed seen by this process (see `position_gaps`).
    gaps: Arc<PositionGaps>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").finish_non_exhaustive()
    }
}

/// A transaction id assigned now, above every one assigned before (the position feed's gap
/// mark). Its empty transaction is committed without waiting for the disk.
async fn fresh_transaction_id(conn: &mut PgConnection) -> Result<i64, sqlx::Error> {
    let mut tx = conn.begin().await?;
    sqlx::query("SET LOCAL synchronous_commit = off")
        .execute(&mut *tx)
        .await?;
    let id: i64 = sqlx::query_scalar("SELECT pg_current_xact_id()::text::bigint")
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(id)
}

/// Whether a schema name is safe to quote into statements.
fn valid_schema(schema: &str) -> bool {
    !schema.is_empty()
        && schema.len() <= 63
        && schema
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl PostgresStore {
    /// Connects with the URL's default `search_path` and applies the migrations.
    pub async fn connect(url: &str) -> Result<Self, ConnectError> {
        Self::open(url, None).await
    }

    /// Connects with every pooled connection's `search_path` set to `schema` (created when
    /// missing), and applies the migrations there. Schema names are letters, digits and `_`.
    pub async fn connect_with_schema(url: &str, schema: &str) -> Result<Self, ConnectError> {
        if !valid_schema(schema) {
            return Err(ConnectError::InvalidSchema(schema.to_string()));
        }
        Self::open(url, Some(schema.to_string())).await
    }

    async fn open(url: &str, schema: Option<String>) -> Result<Self, ConnectError> {
        let options: PgConnectOptions =
            url.parse().map_err(|source| ConnectError::InvalidAddress {
                backend: "postgres",
                address: url.to_string(),
                source,
            })?;
        let connect = |source| ConnectError::Connect {
            backend: "postgres",
            source,
        };

        // The commit statements are prepared once per connection and their plans kept:
        // custom plans would re-plan the large statement on every execution.
        let options = options.options([("plan_cache_mode", "force_generic_plan")]);
        // One connection more than the store's lanes: the spare serves migrations and
        // `pool` users without waiting for a lane.
        let mut pool_options = PgPoolOptions::new()
            .max_connections(LANES as u32 + 1)
            .acquire_timeout(Duration::from_secs(30))
            .test_before_acquire(false);
        if let Some(schema) = &schema {
            let mut conn = PgConnection::connect_with(&options)
                .await
                .map_err(connect)?;
            let create = format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\"");
            match conn.execute(create.as_str()).await {
                // A concurrent creator of the same schema wins the race; that is fine.
                Err(error) if !is_unique_violation(&error) => return Err(connect(error)),
                _ => {}
            }
            // Best effort: the connection is done either way.
            let _ = conn.close().await;
            let set_path = format!("SET search_path TO \"{schema}\"");
            pool_options = pool_options.after_connect(move |conn, _meta| {
                let set_path = set_path.clone();
                Box::pin(async move {
                    conn.execute(set_path.as_str()).await?;
                    Ok(())
                })
            });
        }
        let pool = pool_options.connect_with(options).await.map_err(connect)?;
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|source| ConnectError::Migrate {
                backend: "postgres",
                source,
            })?;
        Ok(PostgresStore {
            pool: Arc::new(Lanes::new(pool, LANES, Some(IDLE_PING_AFTER))),
            gaps: Arc::default(),
        })
    }

    /// The connection pool behind the store (one spare connection beside the store's own),
    /// for diagnostics and tests.
    pub fn pool(&self) -> &PgPool {
        self.pool.pool()
    }

    /// Closes every connection.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    async fn run_by_host_run_id(
        &self,
        app_id: &str,
        host_run_id: &str,
    ) -> StoreResult<Option<Run>> {
        let mut lane = self.pool.get("postgres: get run by host run id").await?;
        let row = sqlx::query(concat!(
            "SELECT ",
            pg_run_columns!(),
            " FROM runs WHERE app_id = $1 AND host_run_id = $2"
        ))
        .bind(clean(app_id))
        .bind(clean(host_run_id))
        .fetch_optional(lane.conn())
        .await
        .map_err(|error| lane.fail("postgres: get run by host run id", error))?;
        row.as_ref().map(codec::run_from).transpose()
    }

    async fn run_exists(&self, app_id: &str, run_id: &str) -> StoreResult<bool> {
        let mut lane = self.pool.get("postgres: check run").await?;
        let found = sqlx::query("SELECT 1 FROM runs WHERE id = $1 AND app_id = $2")
            .bind(run_id)
            .bind(app_id)
            .fetch_optional(lane.conn())
            .await
            .map_err(|error| lane.fail("postgres: check run", error))?;
        Ok(found.is_some())
    }
}

impl Cols for PgRow {
    fn text(&self, column: &str) -> StoreResult<String> {
        self.try_get(column).map_err(|error| corrupt(column, error))
    }

    fn text_opt(&self, column: &str) -> StoreResult<Option<String>> {
        self.try_get(column).map_err(|error| corrupt(column, error))
    }

    fn int(&self, column: &str) -> StoreResult<i64> {
        self.try_get(column).map_err(|error| corrupt(column, error))
    }

    fn flag(&self, column: &str) -> StoreResult<bool> {
        self.try_get(column).map_err(|error| corrupt(column, error))
    }

    fn bytes(&self, column: &str) -> StoreResult<Vec<u8>> {
        self.try_get(column).map_err(|error| corrupt(column, error))
    }

    fn ts(&self, column: &str) -> StoreResult<DateTime<Utc>> {
        self.try_get(column).map_err(|error| corrupt(column, error))
    }

    fn ts_opt(&self, column: &str) -> StoreResult<Option<DateTime<Utc>>> {
        self.try_get(column).map_err(|error| corrupt(column, error))
    }
}

// ---- The commit statement --------------------------------------------------------------
//
// Parameters $1..$49 carry the records (as parallel arrays) and are the same in every
// variant; $50 and $51 are the run id and app id; the run CTE's own values follow from $52.

/// Mutable run columns, their SQL cast, in binding order (see `bind_run_mutable`).
const RUN_MUTABLE: [(&str, &str); 20] = [
    ("agent_id", ""),
    ("target_type", ""),
    ("target_id", ""),
    ("target", "::jsonb"),
    ("runtime_kind", ""),
    ("execution_mode", ""),
    ("invocation_mode", ""),
    ("external_actor_id", ""),
    ("status", ""),
    ("pause_reason", ""),
    ("approval_state", ""),
    ("input", "::jsonb"),
    ("output_summary", "::jsonb"),
    ("workspace_lease", "::jsonb"),
    ("error_message", ""),
    ("started_at", ""),
    ("completed_at", ""),
    ("updated_at", ""),
    ("pause_requested", ""),
    ("engine_state", "::jsonb"),
];

const RUN_RETURNING: &str =
    "RETURNING id, app_id, host_run_id, version, event_seq, message_seq, artifact_seq";

/// The record CTEs, each written only when the change has such records (a statement that
/// names fewer tables opens and locks fewer relations). Bit `n` of a part mask selects
/// `RECORD_PARTS[n]`. Every part reads `r`, the run row written (inserted or updated) first:
/// a statement has its transaction id before it draws event positions, which the position
/// feed's gap rule relies on (`position_gaps`).
const RECORD_PARTS: [&str; 8] = [
    r#"e AS (
  INSERT INTO events (run_id, app_id, host_run_id, sequence_no, event_id, event_type, data,
                      created_at)
  SELECT r.id, r.app_id, r.host_run_id, r.event_seq - $47 + t.ord, t.event_id, t.event_type,
         t.data::jsonb, $4
  FROM r, UNNEST($1::text[], $2::text[], $3::text[]) WITH ORDINALITY
       AS t(event_id, event_type, data, ord)
  ORDER BY t.ord
  RETURNING position, sequence_no
)"#,
    r#"m AS (
  INSERT INTO messages (run_id, sequence_no, id, app_id, runtime_message_id, role, content,
                        message_type, content_blocks, tool_invocations, created_at)
  SELECT r.id, r.message_seq - $48 + t.ord, t.id, r.app_id, t.runtime_message_id, t.role,
         t.content, t.message_type, t.content_blocks::jsonb, t.tool_invocations::jsonb,
         t.created_at
  FROM r, UNNEST($5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[],
                 $11::text[], $12::timestamptz[]) WITH ORDINALITY
       AS t(id, runtime_message_id, role, content, message_type, content_blocks,
            tool_invocations, created_at, ord)
)"#,
    r#"a AS (
  INSERT INTO artifacts (run_id, sequence_no, id, app_id, artifact_type, format, storage_mode,
                         inline_content, metadata, created_at)
  SELECT r.id, r.artifact_seq - $49 + t.ord, t.id, r.app_id, t.artifact_type, t.format,
         t.storage_mode, t.inline_content, t.metadata::jsonb, t.created_at
  FROM r, UNNEST($13::text[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[],
                 $19::timestamptz[]) WITH ORDINALITY
       AS t(id, artifact_type, format, storage_mode, inline_content, metadata, created_at, ord)
)"#,
    r#"i AS (
  INSERT INTO interactions (run_id, id, app_id, runtime_kind, interaction_kind, status, title,
                            summary, request_payload, response_payload,
                            resolved_by_external_id, resolved_at, created_at, updated_at)
  SELECT r.id, t.id, r.app_id, t.runtime_kind, t.interaction_kind, t.status, t.title,
         t.summary, t.request_payload::jsonb, t.response_payload::jsonb,
         t.resolved_by_external_id, t.resolved_at, t.created_at, t.updated_at
  FROM r, UNNEST($20::text[], $21::text[], $22::text[], $23::text[], $24::text[], $25::text[],
                 $26::text[], $27::text[], $28::text[], $29::timestamptz[],
                 $30::timestamptz[], $31::timestamptz[])
       AS t(id, runtime_kind, interaction_kind, status, title, summary, request_payload,
            response_payload, resolved_by_external_id, resolved_at, created_at, updated_at)
  ON CONFLICT (run_id, id) DO UPDATE SET app_id = excluded.app_id,
    runtime_kind = excluded.runtime_kind, interaction_kind = excluded.interaction_kind,
    status = excluded.status, title = excluded.title, summary = excluded.summary,
    request_payload = excluded.request_payload, response_payload = excluded.response_payload,
    resolved_by_external_id = excluded.resolved_by_external_id,
    resolved_at = excluded.resolved_at, created_at = excluded.created_at,
    updated_at = excluded.updated_at
)"#,
    r#"tc AS (
  INSERT INTO tool_calls (run_id, id, app_id, tool_name, input, output, error, mutating,
                          approval_required, created_at)
  SELECT r.id, t.id, r.app_id, t.tool_name, t.input::jsonb, t.output::jsonb, t.error,
         t.mutating, t.approval_required, t.created_at
  FROM r, UNNEST($32::text[], $33::text[], $34::text[], $35::text[], $36::text[],
                 $37::boolean[], $38::boolean[], $39::timestamptz[])
       AS t(id, tool_name, input, output, error, mutating, approval_required, created_at)
  ON CONFLICT (run_id, id) DO UPDATE SET app_id = excluded.app_id,
    tool_name = excluded.tool_name, input = excluded.input, output = excluded.output,
    error = excluded.error, mutating = excluded.mutating,
    approval_required = excluded.approval_required, created_at = excluded.created_at
)"#,
    r#"c AS (
  INSERT INTO checkpoints (run_id, step, state, created_at)
  SELECT r.id, $40::bigint, $41::jsonb, $42::timestamptz FROM r WHERE $40::bigint IS NOT NULL
  ON CONFLICT (run_id, step) DO UPDATE SET state = excluded.state,
    created_at = excluded.created_at
)"#,
    r#"sd AS (
  DELETE FROM run_secrets s USING r
  WHERE s.run_id = r.id AND ($43::boolean OR s.kind = ANY($44::text[]))
    AND NOT (s.kind = ANY($45::text[]))
)"#,
    r#"sp AS (
  INSERT INTO run_secrets (run_id, kind, ciphertext)
  SELECT r.id, t.kind, t.ciphertext FROM r, UNNEST($45::text[], $46::bytea[]) AS t(kind, ciphertext)
  ON CONFLICT (run_id, kind) DO UPDATE SET ciphertext = excluded.ciphertext
)"#,
];

const EVENTS_PART: u8 = 1 << 0;
const MESSAGES_PART: u8 = 1 << 1;
const ARTIFACTS_PART: u8 = 1 << 2;
const INTERACTIONS_PART: u8 = 1 << 3;
const TOOL_CALLS_PART: u8 = 1 << 4;
const CHECKPOINT_PART: u8 = 1 << 5;
const SECRET_DELETES_PART: u8 = 1 << 6;
const SECRET_PUTS_PART: u8 = 1 << 7;

fn mutable_assignments(first: usize) -> String {
    RUN_MUTABLE
        .iter()
        .enumerate()
        .map(|(index, (column, cast))| format!("{column} = ${}{cast}", first + index))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The run CTE of each statement kind.
#[derive(Clone, Copy)]
enum Head {
    /// Update the run row under its version guard ($52..$71 mutable columns, $72 version,
    /// $73/$74 lease taker and expiry, $75 owner releasing the lease).
    Update = 0,
    /// Lock the run row and bump its counters only.
    Touch = 1,
    /// Insert the run row ($52..$71 mutable columns, $72 host run id, $73 created_at, $74/$75
    /// lease taker and expiry).
    Create = 2,
}

static HEADS: LazyLock<[String; 3]> = LazyLock::new(|| {
    let columns: Vec<&str> = RUN_MUTABLE.iter().map(|(column, _)| *column).collect();
    let values: Vec<String> = RUN_MUTABLE
        .iter()
        .enumerate()
        .map(|(index, (_, cast))| format!("${}{cast}", 52 + index))
        .collect();
    [
        format!(
            "UPDATE runs SET {}, version = version + 1, event_seq = event_seq + $47, \
             message_seq = message_seq + $48, artifact_seq = artifact_seq + $49, \
             lease_owner = CASE WHEN $73::text IS NOT NULL THEN $73::text \
             WHEN lease_owner = $75::text THEN NULL ELSE lease_owner END, \
             lease_expires_at = CASE WHEN $73::text IS NOT NULL THEN $74::timestamptz \
             WHEN lease_owner = $75::text THEN NULL ELSE lease_expires_at END \
             WHERE id = $50 AND app_id = $51 AND version = $72 {RUN_RETURNING}",
            mutable_assignments(52)
        ),
        format!(
            "UPDATE runs SET event_seq = event_seq + $47, message_seq = message_seq + $48, \
             artifact_seq = artifact_seq + $49 WHERE id = $50 AND app_id = $51 {RUN_RETURNING}"
        ),
        format!(
            "INSERT INTO runs (id, app_id, host_run_id, created_at, version, event_seq, \
             message_seq, artifact_seq, lease_owner, lease_expires_at, {}) \
             VALUES ($50, $51, $72, $73, 1, $47, $48, $49, $74::text, $75::timestamptz, {}) \
             ON CONFLICT DO NOTHING {RUN_RETURNING}",
            columns.join(", "),
            values.join(", ")
        ),
    ]
});

/// Statement texts by head and part mask, built on first use (at most 3 x 256, in practice a
/// handful); each stays prepared on the connections that ran it.
static STATEMENTS: LazyLock<Vec<OnceLock<String>>> =
    LazyLock::new(|| (0..3 * 256).map(|_| OnceLock::new()).collect());

fn commit_statement(head: Head, parts: u8) -> &'static str {
    STATEMENTS[head as usize * 256 + usize::from(parts)].get_or_init(|| {
        let mut sql = format!("WITH r AS ({})", HEADS[head as usize]);
        for (bit, part) in RECORD_PARTS.iter().enumerate() {
            if parts & (1 << bit) != 0 {
                sql.push_str(",\n");
                sql.push_str(part);
            }
        }
        let positions = if parts & EVENTS_PART != 0 {
            "COALESCE((SELECT array_agg(e.position ORDER BY e.sequence_no) FROM e), '{}'::bigint[])"
        } else {
            "'{}'::bigint[]"
        };
        sql.push_str(&format!(
            "\nSELECT r.version, r.event_seq, r.message_seq, r.artifact_seq, r.host_run_id, \
             {positions} AS positions FROM r"
        ));
        sql
    })
}

/// Which record CTEs a change needs.
fn parts_of(change: &Prepared) -> u8 {
    let secrets = &change.secrets;
    [
        (!change.events.is_empty(), EVENTS_PART),
        (!change.messages.is_empty(), MESSAGES_PART),
        (!change.artifacts.is_empty(), ARTIFACTS_PART),
        (!change.interactions.is_empty(), INTERACTIONS_PART),
        (!change.tool_calls.is_empty(), TOOL_CALLS_PART),
        (change.checkpoint.is_some(), CHECKPOINT_PART),
        (
            secrets.delete_all || !secrets.deletes.is_empty(),
            SECRET_DELETES_PART,
        ),
        (!secrets.puts.is_empty(), SECRET_PUTS_PART),
    ]
    .into_iter()
    .filter(|(needed, _)| *needed)
    .fold(0, |mask, (_, bit)| mask | bit)
}

type PgQuery<'q> = sqlx::query::Query<'q, Postgres, PgArguments>;

/// One column of a record array: a value per row, bound as one PostgreSQL array.
fn column<'q, T, V>(rows: &'q [T], value: impl FnMut(&'q T) -> V) -> Vec<V> {
    rows.iter().map(value).collect()
}

/// Binds $1..$51: every record array, the counts, the run id and app id.
fn bind_records<'q>(query: PgQuery<'q>, change: &'q Prepared) -> PgQuery<'q> {
    let query = bind_events(query, change);
    let query = bind_messages(query, &change.messages);
    let query = bind_artifacts(query, &change.artifacts);
    let query = bind_interactions(query, &change.interactions);
    let query = bind_tool_calls(query, &change.tool_calls);
    let query = bind_checkpoint(query, change.checkpoint.as_ref());
    bind_secrets(query, &change.secrets)
        // Counts $47..$49, run id $50, app id $51.
        .bind(change.events.len() as i64)
        .bind(change.messages.len() as i64)
        .bind(change.artifacts.len() as i64)
        .bind(change.run_id.as_str())
        .bind(change.app_id.as_str())
}

/// Events $1..$4 (`created_at` is one time for the whole change).
fn bind_events<'q>(query: PgQuery<'q>, change: &'q Prepared) -> PgQuery<'q> {
    let events = &change.events;
    query
        .bind(column(events, |event| event.event_id.as_str()))
        .bind(column(events, |event| event.kind.as_str()))
        .bind(column(events, |event| event.data_json.get()))
        .bind(change.event_time)
}

/// Messages $5..$12.
fn bind_messages<'q>(query: PgQuery<'q>, rows: &'q [MessageRow]) -> PgQuery<'q> {
    query
        .bind(column(rows, |row| row.record.id.as_str()))
        .bind(column(rows, |row| row.record.runtime_message_id.as_str()))
        .bind(column(rows, |row| row.record.role.as_str()))
        .bind(column(rows, |row| row.record.content.as_str()))
        .bind(column(rows, |row| row.record.message_type.as_str()))
        .bind(column(rows, |row| row.content_blocks.as_deref()))
        .bind(column(rows, |row| row.tool_invocations.as_deref()))
        .bind(column(rows, |row| row.record.created_at))
}

/// Artifacts $13..$19.
fn bind_artifacts<'q>(query: PgQuery<'q>, rows: &'q [ArtifactRow]) -> PgQuery<'q> {
    query
        .bind(column(rows, |row| row.record.id.as_str()))
        .bind(column(rows, |row| row.record.artifact_type.as_str()))
        .bind(column(rows, |row| row.record.format.as_str()))
        .bind(column(rows, |row| row.record.storage_mode.as_str()))
        .bind(column(rows, |row| row.record.inline_content.as_str()))
        .bind(column(rows, |row| row.metadata.as_deref()))
        .bind(column(rows, |row| row.record.created_at))
}

/// Interactions $20..$31.
fn bind_interactions<'q>(query: PgQuery<'q>, rows: &'q [InteractionRow]) -> PgQuery<'q> {
    query
        .bind(column(rows, |row| row.record.id.as_str()))
        .bind(column(rows, |row| row.record.runtime_kind.as_str()))
        .bind(column(rows, |row| row.record.interaction_kind.as_str()))
        .bind(column(rows, |row| row.record.status.as_str()))
        .bind(column(rows, |row| row.record.title.as_str()))
        .bind(column(rows, |row| row.record.summary.as_str()))
        .bind(column(rows, |row| row.request_payload.as_deref()))
        .bind(column(rows, |row| row.response_payload.as_deref()))
        .bind(column(rows, |row| {
            row.record.resolved_by_external_id.as_str()
        }))
        .bind(column(rows, |row| row.record.resolved_at))
        .bind(column(rows, |row| row.record.created_at))
        .bind(column(rows, |row| row.record.updated_at))
}

/// Tool calls $32..$39.
fn bind_tool_calls<'q>(query: PgQuery<'q>, rows: &'q [ToolCallRow]) -> PgQuery<'q> {
    query
        .bind(column(rows, |row| row.record.id.as_str()))
        .bind(column(rows, |row| row.record.tool_name.as_str()))
        .bind(column(rows, |row| row.input.as_str()))
        .bind(column(rows, |row| row.output.as_deref()))
        .bind(column(rows, |row| row.record.error.as_str()))
        .bind(column(rows, |row| row.record.mutating))
        .bind(column(rows, |row| row.record.approval_required))
        .bind(column(rows, |row| row.record.created_at))
}

/// Checkpoint $40..$42 (all NULL without one: its CTE then inserts nothing).
fn bind_checkpoint<'q>(query: PgQuery<'q>, checkpoint: Option<&'q CheckpointRow>) -> PgQuery<'q> {
    query
        .bind(checkpoint.map(|c| c.step))
        .bind(checkpoint.map(|c| c.state.as_str()))
        .bind(checkpoint.map(|c| c.created_at))
}

/// Secrets $43..$46: delete everything?, kinds to delete, kinds and ciphertexts to put.
fn bind_secrets<'q>(query: PgQuery<'q>, secrets: &'q SecretPlan) -> PgQuery<'q> {
    query
        .bind(secrets.delete_all)
        .bind(column(&secrets.deletes, String::as_str))
        .bind(column(&secrets.puts, |(kind, _)| kind.as_str()))
        .bind(column(&secrets.puts, |(_, bytes)| bytes.as_slice()))
}

/// Binds the mutable run columns in `RUN_MUTABLE` order.
fn bind_run_mutable<'q>(query: PgQuery<'q>, run: &'q RunRow) -> PgQuery<'q> {
    query
        .bind(run.agent_id.as_str())
        .bind(run.target_type.as_str())
        .bind(run.target_id.as_str())
        .bind(run.target.as_str())
        .bind(run.runtime_kind)
        .bind(run.execution_mode)
        .bind(run.invocation_mode)
        .bind(run.external_actor_id.as_str())
        .bind(run.status)
        .bind(run.pause_reason)
        .bind(run.approval_state)
        .bind(run.input.as_str())
        .bind(run.output_summary.as_str())
        .bind(run.workspace_lease.as_deref())
        .bind(run.error_message.as_str())
        .bind(run.started_at)
        .bind(run.completed_at)
        .bind(run.updated_at)
        .bind(run.pause_requested)
        .bind(run.engine_state.as_str())
}

/// Runs a change's commit statement: the run row (updated under its version guard, or only
/// touched) with its records. `None` when the run row matched nothing.
async fn commit_row(
    conn: &mut PgConnection,
    change: &Prepared,
) -> Result<Option<PgRow>, sqlx::Error> {
    match &change.run {
        Some(run) => {
            bind_run_mutable(
                bind_records(
                    sqlx::query(commit_statement(Head::Update, parts_of(change))),
                    change,
                ),
                run,
            )
            .bind(change.expected_version)
            .bind(change.lease.take().0)
            .bind(change.lease.take().1)
            .bind(change.lease.release())
            .fetch_optional(conn)
            .await
        }
        None => {
            bind_records(
                sqlx::query(commit_statement(Head::Touch, parts_of(change))),
                change,
            )
            .fetch_optional(conn)
            .await
        }
    }
}

/// A commit that also deletes messages (a rolled-back resume; rare, so a transaction of two
/// statements rather than one more part of the hot commit statement). The deletion is undone
/// when the run row matched nothing.
async fn commit_removing_messages(
    conn: &mut PgConnection,
    change: &Prepared,
) -> Result<Option<PgRow>, sqlx::Error> {
    let mut tx = conn.begin().await?;
    sqlx::query("DELETE FROM messages WHERE run_id = $1 AND app_id = $2 AND id = ANY($3)")
        .bind(change.run_id.as_str())
        .bind(change.app_id.as_str())
        .bind(&change.removed_messages)
        .execute(&mut *tx)
        .await?;
    let row = commit_row(&mut tx, change).await?;
    if row.is_some() {
        tx.commit().await?;
    }
    Ok(row)
}

/// Reads what the commit statement returns: the version, counters, host run id and the
/// events' positions in sequence order.
fn head_from(row: &PgRow) -> StoreResult<(i64, Counters, String, Vec<i64>)> {
    let positions: Vec<i64> = row
        .try_get("positions")
        .map_err(|error| corrupt("positions", error))?;
    Ok((
        row.int("version")?,
        Counters {
            events: row.int("event_seq")?,
            messages: row.int("message_seq")?,
            artifacts: row.int("artifact_seq")?,
        },
        row.text("host_run_id")?,
        positions,
    ))
}

fn search_needle(query: &str) -> String {
    clean(query.trim()).to_lowercase()
}

const SEARCH_FILTER: &str = "app_id = $1 \
     AND ($2 = '' OR strpos(lower(id), $2) > 0 OR strpos(lower(host_run_id), $2) > 0 \
     OR strpos(lower(agent_id), $2) > 0 OR strpos(lower(target_id), $2) > 0 \
     OR strpos(lower(target_type), $2) > 0) \
     AND ($3::text IS NULL OR status = $3)";

static SEARCH_PAGE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {} FROM runs WHERE {SEARCH_FILTER} \
         ORDER BY created_at DESC, id DESC LIMIT $4 OFFSET $5",
        pg_run_columns!()
    )
});

static SEARCH_COUNT: LazyLock<String> =
    LazyLock::new(|| format!("SELECT COUNT(*) FROM runs WHERE {SEARCH_FILTER}"));

#[async_trait]
impl Store for PostgresStore {
    fn driver(&self) -> &'static str {
        "postgres"
    }

    fn in_memory(&self) -> bool {
        false
    }

    async fn ping(&self) -> StoreResult<()> {
        let mut lane = self.pool.get("postgres: ping").await?;
        sqlx::query("SELECT 1")
            .execute(lane.conn())
            .await
            .map_err(|error| lane.fail("postgres: ping", error))?;
        Ok(())
    }

    async fn put_agent(&self, agent: &Agent) -> StoreResult<bool> {
        let row = AgentRow::encode(agent)?;
        let mut lane = self.pool.get("postgres: put agent").await?;
        let created: bool = sqlx::query_scalar(
            "INSERT INTO agents (app_id, id, name, runtime_kind, provider, model, system_prompt, \
             skills, allowed_tools, allowed_targets, approval_mode, default_invocation_mode, \
             execution_config, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9::jsonb, $10::jsonb, $11, $12, \
             $13::jsonb, $14, $15) \
             ON CONFLICT (app_id, id) DO UPDATE SET name = excluded.name, \
             runtime_kind = excluded.runtime_kind, provider = excluded.provider, \
             model = excluded.model, system_prompt = excluded.system_prompt, \
             skills = excluded.skills, allowed_tools = excluded.allowed_tools, \
             allowed_targets = excluded.allowed_targets, approval_mode = excluded.approval_mode, \
             default_invocation_mode = excluded.default_invocation_mode, \
             execution_config = excluded.execution_config, created_at = excluded.created_at, \
             updated_at = excluded.updated_at \
             RETURNING (xmax = 0) AS created",
        )
        .bind(row.app_id.as_str())
        .bind(row.id.as_str())
        .bind(row.name.as_str())
        .bind(row.runtime_kind)
        .bind(row.provider.as_str())
        .bind(row.model.as_str())
        .bind(row.system_prompt.as_str())
        .bind(row.skills.as_str())
        .bind(row.allowed_tools.as_str())
        .bind(row.allowed_targets.as_str())
        .bind(row.approval_mode)
        .bind(row.default_invocation_mode)
        .bind(row.execution_config.as_deref())
        .bind(row.created_at)
        .bind(row.updated_at)
        .fetch_one(lane.conn())
        .await
        .map_err(|error| {
            if is_unique_violation(&error) {
                StoreError::Conflict(format!("agent: {error}"))
            } else {
                lane.fail("postgres: put agent", error)
            }
        })?;
        Ok(created)
    }

    async fn get_agent(&self, app_id: &str, agent_id: &str) -> StoreResult<Option<Agent>> {
        let mut lane = self.pool.get("postgres: get agent").await?;
        let row = sqlx::query(concat!(
            "SELECT ",
            pg_agent_columns!(),
            " FROM agents WHERE app_id = $1 AND id = $2"
        ))
        .bind(clean(app_id))
        .bind(clean(agent_id))
        .fetch_optional(lane.conn())
        .await
        .map_err(|error| lane.fail("postgres: get agent", error))?;
        row.as_ref().map(codec::agent_from).transpose()
    }

    async fn list_agents(&self, app_id: &str) -> StoreResult<Vec<Agent>> {
        let mut lane = self.pool.get("postgres: list agents").await?;
        let rows = sqlx::query(concat!(
            "SELECT ",
            pg_agent_columns!(),
            " FROM agents WHERE app_id = $1 ORDER BY created_at, id"
        ))
        .bind(clean(app_id))
        .fetch_all(lane.conn())
        .await
        .map_err(|error| lane.fail("postgres: list agents", error))?;
        rows.iter().map(codec::agent_from).collect()
    }

    async fn create_run(&self, change: RunChange) -> StoreResult<CreateRun> {
        let change = Prepared::for_create(change)?;
        let Some(run) = change.run.as_ref() else {
            return Err(StoreError::backend_msg("create_run: missing run"));
        };
        let query = bind_run_mutable(
            bind_records(
                sqlx::query(commit_statement(Head::Create, parts_of(&change))),
                &change,
            ),
            run,
        )
        .bind(run.host_run_id.as_str())
        .bind(run.created_at)
        .bind(change.lease.take().0)
        .bind(change.lease.take().1);
        let mut lane = self.pool.get("postgres: create run").await?;
        let row = query
            .fetch_optional(lane.conn())
            .await
            .map_err(|error| lane.fail("postgres: create run", error))?;
        drop(lane);
        let Some(row) = row else {
            if !run.host_run_id.is_empty() {
                if let Some(existing) = self
                    .run_by_host_run_id(&run.app_id, &run.host_run_id)
                    .await?
                {
                    return Ok(CreateRun::HostRunIdTaken(Box::new(existing)));
                }
            }
            return Err(StoreError::Conflict(format!(
                "run {} already exists",
                run.id
            )));
        };
        let (version, counters, host_run_id, positions) = head_from(&row)?;
        change
            .committed(version, &host_run_id, counters, &positions)
            .map(CreateRun::Created)
    }

    async fn get_run(&self, app_id: &str, run_id: &str) -> StoreResult<Option<Run>> {
        let mut lane = self.pool.get("postgres: get run").await?;
        let row = sqlx::query(concat!(
            "SELECT ",
            pg_run_columns!(),
            " FROM runs WHERE id = $1 AND app_id = $2"
        ))
        .bind(clean(run_id))
        .bind(clean(app_id))
        .fetch_optional(lane.conn())
        .await
        .map_err(|error| lane.fail("postgres: get run", error))?;
        row.as_ref().map(codec::run_from).transpose()
    }

    async fn get_run_by_host_run_id(
        &self,
        app_id: &str,
        host_run_id: &str,
    ) -> StoreResult<Option<Run>> {
        if host_run_id.is_empty() {
            return Ok(None);
        }
        self.run_by_host_run_id(app_id, host_run_id).await
    }

    async fn list_runs(&self, app_id: &str) -> StoreResult<Vec<Run>> {
        let mut lane = self.pool.get("postgres: list runs").await?;
        let rows = sqlx::query(concat!(
            "SELECT ",
            pg_run_columns!(),
            " FROM runs WHERE app_id = $1 ORDER BY created_at DESC, id DESC"
        ))
        .bind(clean(app_id))
        .fetch_all(lane.conn())
        .await
        .map_err(|error| lane.fail("postgres: list runs", error))?;
        rows.iter().map(codec::run_from).collect()
    }

    async fn count_runs_by_status(&self) -> StoreResult<Vec<(RunStatus, i64)>> {
        let mut lane = self.pool.get("postgres: count runs by status").await?;
        let counts: Vec<(String, i64)> =
            sqlx::query_as("SELECT status, COUNT(*) FROM runs GROUP BY status")
                .fetch_all(lane.conn())
                .await
                .map_err(|error| lane.fail("postgres: count runs by status", error))?;
        crate::statuses_counted(counts)
    }

    async fn search_runs(&self, search: &RunSearch) -> StoreResult<(Vec<Run>, i64)> {
        let needle = search_needle(&search.query);
        let status = search.status.map(RunStatus::as_str);
        // A limit of zero or less means no limit (LIMIT NULL).
        let limit = (search.limit > 0).then_some(search.limit);
        let offset = search.offset.max(0);
        let mut lane = self.pool.get("postgres: search runs").await?;
        let rows = sqlx::query(SEARCH_PAGE.as_str())
            .bind(clean(&search.app_id))
            .bind(needle.as_str())
            .bind(status)
            .bind(limit)
            .bind(offset)
            .fetch_all(lane.conn())
            .await
            .map_err(|error| lane.fail("postgres: search runs", error))?;
        let mut lane = self.pool.get("postgres: count runs").await?;
        let total: i64 = sqlx::query_scalar(SEARCH_COUNT.as_str())
            .bind(clean(&search.app_id))
            .bind(needle.as_str())
            .bind(status)
            .fetch_one(lane.conn())
            .await
            .map_err(|error| lane.fail("postgres: count runs", error))?;
        let runs = rows
            .iter()
            .map(codec::run_from)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((runs, total))
    }

    async fn commit(&self, change: RunChange) -> StoreResult<Committed> {
        let change = Prepared::new(change)?;
        let mut lane = self.pool.get("postgres: commit").await?;
        let row = if change.removed_messages.is_empty() {
            commit_row(lane.conn(), &change).await
        } else {
            commit_removing_messages(lane.conn(), &change).await
        }
        .map_err(|error| lane.fail("postgres: commit", error))?;
        drop(lane);
        let Some(row) = row else {
            let exists = self.run_exists(&change.app_id, &change.run_id).await?;
            return Err(change.missing_or_stale(exists));
        };
        let (version, counters, host_run_id, positions) = head_from(&row)?;
        change.committed(version, &host_run_id, counters, &positions)
    }

    async fn list_messages(&self, app_id: &str, run_id: &str) -> StoreResult<Vec<Message>> {
        let mut lane = self.pool.get("postgres: list messages").await?;
        let rows = sqlx::query(
            "SELECT run_id, sequence_no, id, app_id, runtime_message_id, role, content, \
             message_type, content_blocks::text AS content_blocks, \
             tool_invocations::text AS tool_invocations, created_at FROM messages \
             WHERE run_id = $1 AND app_id = $2 ORDER BY sequence_no",
        )
        .bind(clean(run_id))
        .bind(clean(app_id))
        .fetch_all(lane.conn())
        .await
        .map_err(|error| lane.fail("postgres: list messages", error))?;
        rows.iter().map(codec::message_from).collect()
    }

    async fn list_artifacts(&self, app_id: &str, run_id: &str) -> StoreResult<Vec<Artifact>> {
        let mut lane = self.pool.get("postgres: list artifacts").await?;
        let rows = sqlx::query(
            "SELECT run_id, sequence_no, id, app_id, artifact_type, format, storage_mode, \
             inline_content, metadata::text AS metadata, created_at FROM artifacts \
             WHERE run_id = $1 AND app_id = $2 ORDER BY sequence_no",
        )
        .bind(clean(run_id))
        .bind(clean(app_id))
        .fetch_all(lane.conn())
        .await
        .map_err(|error| lane.fail("postgres: list artifacts", error))?;
        rows.iter().map(codec::artifact_from).collect()
    }

    async fn list_interactions(&self, app_id: &str, run_id: &str) -> StoreResult<Vec<Interaction>> {
        let mut lane = self.pool.get("postgres: list interactions").await?;
        let rows = sqlx::query(
            "SELECT run_id, id, app_id, runtime_kind, interaction_kind, status, title, summary, \
             request_payload::text AS request_payload, \
             response_payload::text AS response_payload, resolved_by_external_id, resolved_at, \
             created_at, updated_at FROM interactions \
             WHERE run_id = $1 AND app_id = $2 ORDER BY created_at, id",
        )
        .bind(clean(run_id))
        .bind(clean(app_id))
        .fetch_all(lane.conn())
        .await
        .map_err(|error| lane.fail("postgres: list interactions", error))?;
        rows.iter().map(codec::interaction_from).collect()
    }

    async fn list_tool_calls(
        &self,
        app_id: &str,
        run_id: &str,
    ) -> StoreResult<Vec<ToolCallRecord>> {
        let mut lane = self.pool.get("postgres: list tool calls").await?;
        let rows = sqlx::query(
            "SELECT run_id, id, app_id, tool_name, input::text AS input, output::text AS output, \
             error, mutating, approval_required, created_at FROM tool_calls \
             WHERE run_id = $1 AND app_id = $2 ORDER BY created_at, id",
        )
        .bind(clean(run_id))
        .bind(clean(app_id))
        .fetch_all(lane.conn())
        .await
        .map_err(|error| lane.fail("postgres: list tool calls", error))?;
        rows.iter().map(codec::tool_call_from).collect()
    }

    async fn list_events_after(
        &self,
        app_id: &str,
        run_id: &str,
        after: i64,
        limit: Option<i64>,
    ) -> StoreResult<Vec<StoredEvent>> {
        let mut lane = self.pool.get("postgres: list events").await?;
        let rows = sqlx::query(concat!(
            "SELECT ",
            pg_event_columns!(),
            " FROM events WHERE run_id = $1 AND app_id = $2 AND sequence_no > $3 \
             ORDER BY sequence_no LIMIT $4"
        ))
        .bind(clean(run_id))
        .bind(clean(app_id))
        .bind(after)
        .bind(limit.map(|limit| limit.max(0)))
        .fetch_all(lane.conn())
        .await
        .map_err(|error| lane.fail("postgres: list events", error))?;
        rows.iter().map(codec::event_from).collect()
    }

    async fn list_events_after_position(
        &self,
        after: i64,
        limit: i64,
    ) -> StoreResult<Vec<StoredEvent>> {
        // Positions are drawn when a transaction inserts but become visible when it commits,
        // possibly out of order: rows are shown only up to the first position that a running
        // transaction may still commit (`position_gaps`), judged by this statement's snapshot.
        let mut lane = self.pool.get("postgres: list events by position").await?;
        let rows = sqlx::query(concat!(
            "SELECT ",
            pg_event_columns!(),
            ", pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS snapshot_xmin \
             FROM events WHERE position > $1 ORDER BY position LIMIT $2"
        ))
        .bind(after)
        .bind(limit.max(0))
        .fetch_all(lane.conn())
        .await
        .map_err(|error| lane.fail("postgres: list events by position", error))?;
        let Some(first) = rows.first() else {
            return Ok(Vec::new());
        };
        let xmin = first.int("snapshot_xmin")?;
        let positions = rows
            .iter()
            .map(|row| row.int("position"))
            .collect::<StoreResult<Vec<i64>>>()?;
        let visible = self.gaps.visible(after, &positions, xmin);
        if let Some(gap) = visible.new_gap {
            let mark = fresh_transaction_id(lane.conn())
                .await
                .map_err(|error| lane.fail("postgres: mark a gap in the event feed", error))?;
            self.gaps.mark(gap, mark);
        }
        rows[..visible.rows].iter().map(codec::event_from).collect()
    }

    async fn latest_checkpoint(&self, run_id: &str) -> StoreResult<Option<Checkpoint>> {
        let mut lane = self.pool.get("postgres: latest checkpoint").await?;
        let row = sqlx::query(
            "SELECT run_id, step, state::text AS state, created_at FROM checkpoints \
             WHERE run_id = $1 ORDER BY step DESC LIMIT 1",
        )
        .bind(clean(run_id))
        .fetch_optional(lane.conn())
        .await
        .map_err(|error| lane.fail("postgres: latest checkpoint", error))?;
        row.as_ref().map(codec::checkpoint_from).transpose()
    }

    async fn checkpoint_at(&self, run_id: &str, step: i64) -> StoreResult<Option<Checkpoint>> {
        let mut lane = self.pool.get("postgres: checkpoint at step").await?;
        let row = sqlx::query(
            "SELECT run_id, step, state::text AS state, created_at FROM checkpoints \
             WHERE run_id = $1 AND step = $2",
        )
        .bind(clean(run_id))
        .bind(step)
        .fetch_optional(lane.conn())
        .await
        .map_err(|error| lane.fail("postgres: checkpoint at step", error))?;
        row.as_ref().map(codec::checkpoint_from).transpose()
    }

    async fn get_secret(&self, run_id: &str, kind: &str) -> StoreResult<Option<Vec<u8>>> {
        let mut lane = self.pool.get("postgres: get secret").await?;
        let row = sqlx::query("SELECT ciphertext FROM run_secrets WHERE run_id = $1 AND kind = $2")
            .bind(clean(run_id))
            .bind(clean(kind))
            .fetch_optional(lane.conn())
            .await
            .map_err(|error| lane.fail("postgres: get secret", error))?;
        row.as_ref().map(|row| row.bytes("ciphertext")).transpose()
    }

    async fn put_app_secret(&self, app_id: &str, name: &str, ciphertext: &[u8]) -> StoreResult<()> {
        let mut lane = self.pool.get("postgres: put app secret").await?;
        sqlx::query(
            "INSERT INTO app_secrets (app_id, name, ciphertext, updated_at) \
             VALUES ($1, $2, $3, now()) ON CONFLICT (app_id, name) \
             DO UPDATE SET ciphertext = excluded.ciphertext, updated_at = excluded.updated_at",
        )
        .bind(clean(app_id))
        .bind(clean(name))
        .bind(ciphertext)
        .execute(lane.conn())
        .await
        .map_err(|error| lane.fail("postgres: put app secret", error))?;
        Ok(())
    }

    async fn get_app_secret(&self, app_id: &str, name: &str) -> StoreResult<Option<Vec<u8>>> {
        let mut lane = self.pool.get("postgres: get app secret").await?;
        let row = sqlx::query("SELECT ciphertext FROM app_secrets WHERE app_id = $1 AND name = $2")
            .bind(clean(app_id))
            .bind(clean(name))
            .fetch_optional(lane.conn())
            .await
            .map_err(|error| lane.fail("postgres: get app secret", error))?;
        row.as_ref().map(|row| row.bytes("ciphertext")).transpose()
    }

    async fn try_acquire_lease(
        &self,
        run_id: &str,
        owner: &str,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let mut lane = self.pool.get("postgres: acquire lease").await?;
        let taken = sqlx::query(
            "UPDATE runs SET lease_owner = $2, lease_expires_at = $3 WHERE id = $1 \
             AND (lease_owner IS NULL OR lease_owner = $2 OR lease_expires_at IS NULL \
             OR lease_expires_at <= $4)",
        )
        .bind(clean(run_id))
        .bind(clean(owner))
        .bind(micros(until))
        .bind(micros(now))
        .execute(lane.conn())
        .await
        .map_err(|error| lane.fail("postgres: acquire lease", error))?
        .rows_affected();
        Ok(taken == 1)
    }

    async fn renew_leases(&self, owner: &str, until: DateTime<Utc>) -> StoreResult<u64> {
        let mut lane = self.pool.get("postgres: renew leases").await?;
        let renewed = sqlx::query("UPDATE runs SET lease_expires_at = $2 WHERE lease_owner = $1")
            .bind(clean(owner))
            .bind(micros(until))
            .execute(lane.conn())
            .await
            .map_err(|error| lane.fail("postgres: renew leases", error))?
            .rows_affected();
        Ok(renewed)
    }

    async fn release_lease(&self, run_id: &str, owner: &str) -> StoreResult<()> {
        let mut lane = self.pool.get("postgres: release lease").await?;
        sqlx::query(
            "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL \
             WHERE id = $1 AND lease_owner = $2",
        )
        .bind(clean(run_id))
        .bind(clean(owner))
        .execute(lane.conn())
        .await
        .map_err(|error| lane.fail("postgres: release lease", error))?;
        Ok(())
    }

    async fn list_orphaned_runs(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<Run>> {
        let mut lane = self.pool.get("postgres: list orphaned runs").await?;
        let rows = sqlx::query(concat!(
            "SELECT ",
            pg_run_columns!(),
            " FROM runs WHERE status IN ('queued', 'running') \
             AND (lease_owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at <= $1) \
             ORDER BY created_at, id LIMIT $2"
        ))
        .bind(micros(now))
        .bind(limit.max(0))
        .fetch_all(lane.conn())
        .await
        .map_err(|error| lane.fail("postgres: list orphaned runs", error))?;
        rows.iter().map(codec::run_from).collect()
    }

    async fn list_stale_durable_runs(
        &self,
        before: DateTime<Utc>,
        limit: i64,
    ) -> StoreResult<Vec<Run>> {
        let mut lane = self.pool.get("postgres: list stale durable runs").await?;
        let rows = sqlx::query(concat!(
            "SELECT ",
            pg_run_columns!(),
            " FROM runs WHERE execution_mode = 'durable' \
             AND status IN ('queued', 'running', 'paused') AND updated_at <= $1 \
             ORDER BY updated_at, id LIMIT $2"
        ))
        .bind(micros(before))
        .bind(limit.max(0))
        .fetch_all(lane.conn())
        .await
        .map_err(|error| lane.fail("postgres: list stale durable runs", error))?;
        rows.iter().map(codec::run_from).collect()
    }

    async fn list_runs_leased_by(&self, owner: &str) -> StoreResult<Vec<Run>> {
        let mut lane = self.pool.get("postgres: list leased runs").await?;
        let rows = sqlx::query(concat!(
            "SELECT ",
            pg_run_columns!(),
            " FROM runs WHERE lease_owner = $1 AND status IN ('queued', 'running') \
             ORDER BY created_at, id"
        ))
        .bind(clean(owner))
        .fetch_all(lane.conn())
        .await
        .map_err(|error| lane.fail("postgres: list leased runs", error))?;
        rows.iter().map(codec::run_from).collect()
    }

    async fn get_cursor(&self, name: &str) -> StoreResult<Option<i64>> {
        let mut lane = self.pool.get("postgres: get cursor").await?;
        sqlx::query_scalar("SELECT position FROM cursors WHERE name = $1")
            .bind(clean(name))
            .fetch_optional(lane.conn())
            .await
            .map_err(|error| lane.fail("postgres: get cursor", error))
    }

    async fn advance_cursor(&self, name: &str, from: Option<i64>, to: i64) -> StoreResult<bool> {
        let query = match from {
            None => sqlx::query(
                "INSERT INTO cursors (name, position) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
            )
            .bind(clean(name))
            .bind(to),
            Some(from) => {
                sqlx::query("UPDATE cursors SET position = $2 WHERE name = $1 AND position = $3")
                    .bind(clean(name))
                    .bind(to)
                    .bind(from)
            }
        };
        let mut lane = self.pool.get("postgres: advance cursor").await?;
        let moved = query
            .execute(lane.conn())
            .await
            .map_err(|error| lane.fail("postgres: advance cursor", error))?
            .rows_affected();
        Ok(moved == 1)
    }
}
