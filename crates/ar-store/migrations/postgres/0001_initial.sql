-- Initial schema of the PostgreSQL store.
-- JSON values are JSONB and timestamps TIMESTAMPTZ (microsecond precision). Child tables carry
-- no foreign keys: every write to them happens in a statement that first updates (and so
-- locks) the run row, runs are never deleted, and the per-row RI triggers would cost more
-- than the rest of a commit.

CREATE TABLE agents (
    app_id                  TEXT NOT NULL,
    id                      TEXT NOT NULL,
    name                    TEXT NOT NULL,
    runtime_kind            TEXT NOT NULL,
    provider                TEXT NOT NULL,
    model                   TEXT NOT NULL,
    system_prompt           TEXT NOT NULL,
    skills                  JSONB NOT NULL,
    allowed_tools           JSONB NOT NULL,
    allowed_targets         JSONB NOT NULL,
    approval_mode           TEXT NOT NULL,
    default_invocation_mode TEXT NOT NULL,
    execution_config        JSONB,
    created_at              TIMESTAMPTZ NOT NULL,
    updated_at              TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (app_id, id)
);

CREATE TABLE runs (
    id                TEXT PRIMARY KEY,
    app_id            TEXT NOT NULL,
    host_run_id       TEXT NOT NULL DEFAULT '',
    agent_id          TEXT NOT NULL,
    target_type       TEXT NOT NULL,
    target_id         TEXT NOT NULL,
    target            JSONB NOT NULL,
    runtime_kind      TEXT NOT NULL,
    execution_mode    TEXT NOT NULL,
    invocation_mode   TEXT NOT NULL,
    external_actor_id TEXT NOT NULL,
    status            TEXT NOT NULL,
    pause_reason      TEXT NOT NULL,
    approval_state    TEXT NOT NULL,
    input             JSONB NOT NULL,
    output_summary    JSONB NOT NULL,
    workspace_lease   JSONB,
    error_message     TEXT NOT NULL,
    started_at        TIMESTAMPTZ,
    completed_at      TIMESTAMPTZ,
    created_at        TIMESTAMPTZ NOT NULL,
    updated_at        TIMESTAMPTZ NOT NULL,
    version           BIGINT NOT NULL,
    pause_requested   BOOLEAN NOT NULL,
    -- Last sequence number handed out per record kind (assigned inside commits, under the
    -- row lock the commit's UPDATE takes).
    event_seq         BIGINT NOT NULL DEFAULT 0,
    message_seq       BIGINT NOT NULL DEFAULT 0,
    artifact_seq      BIGINT NOT NULL DEFAULT 0,
    -- Ownership of lightweight runs across processes; commits never touch these.
    lease_owner       TEXT,
    lease_expires_at  TIMESTAMPTZ
);

CREATE UNIQUE INDEX runs_app_host_run_id ON runs (app_id, host_run_id) WHERE host_run_id <> '';
CREATE INDEX runs_app_created ON runs (app_id, created_at);
CREATE INDEX runs_active_status ON runs (status) WHERE status IN ('queued', 'running');
CREATE INDEX runs_lease_owner ON runs (lease_owner) WHERE lease_owner IS NOT NULL;

CREATE TABLE events (
    position    BIGSERIAL PRIMARY KEY,
    run_id      TEXT NOT NULL,
    app_id      TEXT NOT NULL,
    host_run_id TEXT NOT NULL,
    sequence_no BIGINT NOT NULL,
    event_id    TEXT NOT NULL,
    event_type  TEXT NOT NULL,
    data        JSONB NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    -- The writing transaction: the position feed only shows events of transactions older
    -- than every running one, so a reader never skips a position committed late.
    txid        XID8 NOT NULL DEFAULT pg_current_xact_id()
);

CREATE UNIQUE INDEX events_run_sequence ON events (run_id, sequence_no);

CREATE TABLE messages (
    run_id             TEXT NOT NULL,
    sequence_no        BIGINT NOT NULL,
    id                 TEXT NOT NULL,
    app_id             TEXT NOT NULL,
    runtime_message_id TEXT NOT NULL,
    role               TEXT NOT NULL,
    content            TEXT NOT NULL,
    message_type       TEXT NOT NULL,
    content_blocks     JSONB,
    tool_invocations   JSONB,
    created_at         TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (run_id, sequence_no)
);

CREATE TABLE artifacts (
    run_id         TEXT NOT NULL,
    sequence_no    BIGINT NOT NULL,
    id             TEXT NOT NULL,
    app_id         TEXT NOT NULL,
    artifact_type  TEXT NOT NULL,
    format         TEXT NOT NULL,
    storage_mode   TEXT NOT NULL,
    inline_content TEXT NOT NULL,
    metadata       JSONB,
    created_at     TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (run_id, sequence_no)
);

-- Interactions and tool calls are keyed per run: tool call ids come from model providers and
-- are only unique within a conversation.
CREATE TABLE interactions (
    run_id                  TEXT NOT NULL,
    id                      TEXT NOT NULL,
    app_id                  TEXT NOT NULL,
    runtime_kind            TEXT NOT NULL,
    interaction_kind        TEXT NOT NULL,
    status                  TEXT NOT NULL,
    title                   TEXT NOT NULL,
    summary                 TEXT NOT NULL,
    request_payload         JSONB,
    response_payload        JSONB,
    resolved_by_external_id TEXT NOT NULL,
    resolved_at             TIMESTAMPTZ,
    created_at              TIMESTAMPTZ NOT NULL,
    updated_at              TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (run_id, id)
);

CREATE TABLE tool_calls (
    run_id            TEXT NOT NULL,
    id                TEXT NOT NULL,
    app_id            TEXT NOT NULL,
    tool_name         TEXT NOT NULL,
    input             JSONB NOT NULL,
    output            JSONB,
    error             TEXT NOT NULL,
    mutating          BOOLEAN NOT NULL,
    approval_required BOOLEAN NOT NULL,
    created_at        TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (run_id, id)
);

CREATE TABLE checkpoints (
    run_id     TEXT NOT NULL,
    step       BIGINT NOT NULL,
    state      JSONB NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (run_id, step)
);

CREATE TABLE run_secrets (
    run_id     TEXT NOT NULL,
    kind       TEXT NOT NULL,
    ciphertext BYTEA NOT NULL,
    PRIMARY KEY (run_id, kind)
);

CREATE TABLE cursors (
    name     TEXT PRIMARY KEY,
    position BIGINT NOT NULL
);
