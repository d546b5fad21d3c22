-- The engine's own state of a run (turn start, last resume, CLI workdir, studio policy) moves
-- out of the host's metadata (`input.metadata`) into a column of its own. Existing rows keep
-- what the engine had written there; `json_patch` drops the keys a row never had.
ALTER TABLE runs ADD COLUMN engine_state TEXT NOT NULL DEFAULT '{}';

UPDATE runs
SET engine_state = json_patch('{}', json_object(
        'turn_started_at', json_extract(input, '$.metadata.turn_started_at'),
        'last_resume', json(json_extract(input, '$.metadata.last_resume')),
        'workdir', json_extract(input, '$.metadata.workdir'),
        'studio', json(json_extract(input, '$.metadata.studio')))),
    input = CASE
        WHEN json_type(input, '$.metadata.studio') IS NOT NULL THEN json_remove(input,
            '$.metadata.turn_started_at', '$.metadata.last_resume', '$.metadata.workdir',
            '$.metadata.studio', '$.metadata.forked_from')
        ELSE json_remove(input,
            '$.metadata.turn_started_at', '$.metadata.last_resume', '$.metadata.workdir')
    END
WHERE json_type(input, '$.metadata') = 'object'
  AND (json_type(input, '$.metadata.turn_started_at') IS NOT NULL
    OR json_type(input, '$.metadata.last_resume') IS NOT NULL
    OR json_type(input, '$.metadata.workdir') IS NOT NULL
    OR json_type(input, '$.metadata.studio') IS NOT NULL);
