-- maos schema, version 1. Timestamps are INTEGER microseconds since the Unix epoch (UTC):
-- they sort and compare exactly. JSON columns hold free-form data as text.

CREATE TABLE sessions (
    id                     TEXT PRIMARY KEY NOT NULL,
    objective              TEXT NOT NULL,
    state                  TEXT NOT NULL,
    strategy               TEXT NOT NULL,
    active                 INTEGER NOT NULL DEFAULT 0,
    created_at             INTEGER NOT NULL,
    updated_at             INTEGER NOT NULL,
    started_at             INTEGER,
    ended_at               INTEGER,
    workflow_completed_at  INTEGER,
    resume_count           INTEGER NOT NULL DEFAULT 0,
    pause                  TEXT,                 -- JSON PauseInfo or NULL
    paused_phases          TEXT NOT NULL DEFAULT '[]',
    errors                 TEXT NOT NULL DEFAULT '[]',
    archived               INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX sessions_state ON sessions (state);
-- At most one session per project is active; the daemon (the only writer) keeps that true.

CREATE TABLE session_agents (
    id                  TEXT PRIMARY KEY NOT NULL,
    session_id          TEXT NOT NULL REFERENCES sessions (id),
    role                TEXT NOT NULL,
    instance            INTEGER NOT NULL,
    task                TEXT NOT NULL,
    state               TEXT NOT NULL,
    paused              INTEGER NOT NULL DEFAULT 0,
    parent_id           TEXT,
    depends_on          TEXT NOT NULL DEFAULT '[]',
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    started_at          INTEGER,
    ended_at            INTEGER,
    exit_code           INTEGER,
    external_session_id TEXT,                    -- e.g. Claude Code session_id, never parsed
    external_agent_id   TEXT,                    -- e.g. Claude Code agent_id, never parsed
    pid                 INTEGER,
    data                TEXT NOT NULL DEFAULT '{}'
) STRICT;
CREATE INDEX session_agents_session ON session_agents (session_id, state);

CREATE TABLE phases (
    session_id  TEXT NOT NULL REFERENCES sessions (id),
    idx         INTEGER NOT NULL,                -- 0-based position in the workflow
    name        TEXT NOT NULL,
    state       TEXT NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    started_at  INTEGER,
    ended_at    INTEGER,
    result      TEXT,                            -- passed | failed
    artifacts   TEXT NOT NULL DEFAULT 'null',
    handoff     TEXT NOT NULL DEFAULT 'null',
    PRIMARY KEY (session_id, idx)
) STRICT;

CREATE TABLE session_events (
    seq         INTEGER PRIMARY KEY NOT NULL,    -- monotonic per project
    ts          INTEGER NOT NULL,
    session_id  TEXT,
    agent_id    TEXT,
    type        TEXT NOT NULL,
    data        TEXT NOT NULL DEFAULT '{}'
) STRICT;
CREATE INDEX session_events_session ON session_events (session_id, seq);
CREATE INDEX session_events_type ON session_events (type, seq);
CREATE INDEX session_events_agent ON session_events (agent_id, seq);
CREATE INDEX session_events_ts ON session_events (ts);

CREATE TABLE locks (
    token        INTEGER PRIMARY KEY NOT NULL,   -- fencing token, unique per project
    path         TEXT NOT NULL,                  -- project-relative ('' = whole project)
    holder_id    TEXT NOT NULL,                  -- agent id
    session_id   TEXT NOT NULL,
    mode         TEXT NOT NULL,                  -- read | write | directory | workspace
    acquired_at  INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    ttl_us       INTEGER NOT NULL                -- lease length, re-applied on renewal
) STRICT;
CREATE INDEX locks_holder ON locks (holder_id);
CREATE INDEX locks_path ON locks (path);

-- Per-project counters that must never go backwards (the next fencing token survives the
-- release of every lock).
CREATE TABLE meta (
    key    TEXT PRIMARY KEY NOT NULL,
    value  INTEGER NOT NULL
) STRICT;

CREATE TABLE checkpoints (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id  TEXT NOT NULL,
    seq         INTEGER NOT NULL,                -- last event included
    ts          INTEGER NOT NULL,
    reason      TEXT NOT NULL,
    state       TEXT NOT NULL                    -- JSON snapshot of the session
) STRICT;
CREATE INDEX checkpoints_session ON checkpoints (session_id, id);
