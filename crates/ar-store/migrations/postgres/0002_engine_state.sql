-- The engine's own state of a run (turn start, last resume, CLI workdir, studio policy) moves
-- out of the host's metadata (`input.metadata`) into a column of its own. Existing rows keep
-- what the engine had written there.
ALTER TABLE runs ADD COLUMN engine_state JSONB NOT NULL DEFAULT '{}'::jsonb;

UPDATE runs
SET engine_state = jsonb_strip_nulls(jsonb_build_object(
        'turn_started_at', input -> 'metadata' -> 'turn_started_at',
        'last_resume', input -> 'metadata' -> 'last_resume',
        'workdir', input -> 'metadata' -> 'workdir',
        'studio', input -> 'metadata' -> 'studio')),
    input = jsonb_set(input, '{metadata}',
        CASE WHEN input -> 'metadata' ? 'studio'
            THEN (input -> 'metadata') - 'turn_started_at' - 'last_resume' - 'workdir'
                 - 'studio' - 'forked_from'
            ELSE (input -> 'metadata') - 'turn_started_at' - 'last_resume' - 'workdir'
        END)
WHERE jsonb_typeof(input -> 'metadata') = 'object'
  AND (input -> 'metadata') ?| ARRAY['turn_started_at', 'last_resume', 'workdir', 'studio'];
