-- Initial schema of the embedded SQLite store.
-- JSON values are TEXT; timestamps are fixed-width RFC 3339 TEXT in UTC with microseconds
-- ("2026-01-02T03:04:05.678901Z"), which sorts in time order.

CREATE TABLE agents (
    app_id                  TEXT NOT NULL,
    id                      TEXT NOT NULL,
    name                    TEXT NOT NULL,
    runtime_kind            TEXT NOT NULL,
    provider                TEXT NOT NULL,
    model                   TEXT NOT NULL,
    system_prompt           TEXT NOT NULL,
    skills                  TEXT NOT NULL,
    allowed_tools           TEXT NOT NULL,
    allowed_targets         TEXT NOT NULL,
    approval_mode           TEXT NOT NULL,
    default_invocation_mode TEXT NOT NULL,
    execution_config        TEXT,
    created_at              TEXT NOT NULL,
    updated_at              TEXT NOT NULL,
    PRIMARY KEY (app_id, id)
);

CREATE TABLE runs (
    id                TEXT PRIMARY KEY NOT NULL,
    app_id            TEXT NOT NULL,
    host_run_id       TEXT NOT NULL DEFAULT '',
    agent_id          TEXT NOT NULL,
    target_type       TEXT NOT NULL,
    target_id         TEXT NOT NULL,
    target            TEXT NOT NULL,
    runtime_kind      TEXT NOT NULL,
    execution_mode    TEXT NOT NULL,
    invocation_mode   TEXT NOT NULL,
    external_actor_id TEXT NOT NULL,
    status            TEXT NOT NULL,
    pause_reason      TEXT NOT NULL,
    approval_state    TEXT NOT NULL,
    input             TEXT NOT NULL,
    output_summary    TEXT NOT NULL,
    workspace_lease   TEXT,
    error_message     TEXT NOT NULL,
    started_at        TEXT,
    completed_at      TEXT,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL,
    version           INTEGER NOT NULL,
    pause_requested   INTEGER NOT NULL,
    -- Last sequence number handed out per record kind (assigned inside commits).
    event_seq         INTEGER NOT NULL DEFAULT 0,
    message_seq       INTEGER NOT NULL DEFAULT 0,
    artifact_seq      INTEGER NOT NULL DEFAULT 0,
    -- Ownership of lightweight runs across processes; commits never touch these.
    lease_owner       TEXT,
    lease_expires_at  TEXT,
    -- Stamped by each commit's run statement; the commit's record statements only write
    -- when they find their own stamp (see the commit batch in src/sqlite.rs).
    commit_token      TEXT
);

CREATE UNIQUE INDEX runs_app_host_run_id ON runs (app_id, host_run_id) WHERE host_run_id <> '';
CREATE INDEX runs_app_created ON runs (app_id, created_at);
CREATE INDEX runs_active_status ON runs (status) WHERE status IN ('queued', 'running');
CREATE INDEX runs_lease_owner ON runs (lease_owner) WHERE lease_owner IS NOT NULL;

CREATE TABLE events (
    -- The rowid: max + 1 on insert. Events are never deleted, so positions only grow (and
    -- with one writer they grow in commit order) without AUTOINCREMENT's extra page write.
    position    INTEGER PRIMARY KEY,
    run_id      TEXT NOT NULL REFERENCES runs (id),
    app_id      TEXT NOT NULL,
    host_run_id TEXT NOT NULL,
    sequence_no INTEGER NOT NULL,
    event_id    TEXT NOT NULL,
    event_type  TEXT NOT NULL,
    data        TEXT NOT NULL,
    created_at  TEXT NOT NULL
);

CREATE UNIQUE INDEX events_run_sequence ON events (run_id, sequence_no);

CREATE TABLE messages (
    run_id             TEXT NOT NULL REFERENCES runs (id),
    sequence_no        INTEGER NOT NULL,
    id                 TEXT NOT NULL,
    app_id             TEXT NOT NULL,
    runtime_message_id TEXT NOT NULL,
    role               TEXT NOT NULL,
    content            TEXT NOT NULL,
    message_type       TEXT NOT NULL,
    content_blocks     TEXT,
    tool_invocations   TEXT,
    created_at         TEXT NOT NULL,
    PRIMARY KEY (run_id, sequence_no)
);

CREATE TABLE artifacts (
    run_id         TEXT NOT NULL REFERENCES runs (id),
    sequence_no    INTEGER NOT NULL,
    id             TEXT NOT NULL,
    app_id         TEXT NOT NULL,
    artifact_type  TEXT NOT NULL,
    format         TEXT NOT NULL,
    storage_mode   TEXT NOT NULL,
    inline_content TEXT NOT NULL,
    metadata       TEXT,
    created_at     TEXT NOT NULL,
    PRIMARY KEY (run_id, sequence_no)
);

-- Interactions and tool calls are keyed per run: tool call ids come from model providers and
-- are only unique within a conversation.
CREATE TABLE interactions (
    run_id                  TEXT NOT NULL REFERENCES runs (id),
    id                      TEXT NOT NULL,
    app_id                  TEXT NOT NULL,
    runtime_kind            TEXT NOT NULL,
    interaction_kind        TEXT NOT NULL,
    status                  TEXT NOT NULL,
    title                   TEXT NOT NULL,
    summary                 TEXT NOT NULL,
    request_payload         TEXT,
    response_payload        TEXT,
    resolved_by_external_id TEXT NOT NULL,
    resolved_at             TEXT,
    created_at              TEXT NOT NULL,
    updated_at              TEXT NOT NULL,
    PRIMARY KEY (run_id, id)
) WITHOUT ROWID;

CREATE TABLE tool_calls (
    run_id            TEXT NOT NULL REFERENCES runs (id),
    id                TEXT NOT NULL,
    app_id            TEXT NOT NULL,
    tool_name         TEXT NOT NULL,
    input             TEXT NOT NULL,
    output            TEXT,
    error             TEXT NOT NULL,
    mutating          INTEGER NOT NULL,
    approval_required INTEGER NOT NULL,
    created_at        TEXT NOT NULL,
    PRIMARY KEY (run_id, id)
);

CREATE TABLE checkpoints (
    run_id     TEXT NOT NULL REFERENCES runs (id),
    step       INTEGER NOT NULL,
    state      TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (run_id, step)
);

CREATE TABLE run_secrets (
    run_id     TEXT NOT NULL REFERENCES runs (id),
    kind       TEXT NOT NULL,
    ciphertext BLOB NOT NULL,
    PRIMARY KEY (run_id, kind)
) WITHOUT ROWID;

CREATE TABLE cursors (
    name     TEXT PRIMARY KEY NOT NULL,
    position INTEGER NOT NULL
);
