-- maos fleet schema (PostgreSQL), version 1. The tables of ../ (SQLite: 0001-0003) for every
-- project of a fleet in one database, each row keyed by its project's key
-- (maos_core::project_key), plus what several daemons need: the members, the lock waits, the
-- fencing sequence. DESIGN.md §10 says how they are used. Timestamps are bigint microseconds
-- since the Unix epoch (UTC), as in SQLite; leases are measured by maos_now_us(), PostgreSQL's
-- clock, never a daemon's. JSON columns are jsonb (filtered in SQL), but for the checkpoint
-- snapshot, a large value read back whole.

CREATE FUNCTION maos_now_us() RETURNS bigint LANGUAGE sql VOLATILE AS
$$ SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint $$;

-- A batch that would commit on top of another last event number than the one its daemon
-- knows: its daemon's memory is stale (another daemon served the project meanwhile).
CREATE FUNCTION maos_stale(project text, found bigint, expected bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'project % is at event % in PostgreSQL, but this daemon knew it at %',
        project, found, expected USING ERRCODE = 'MA001';
END $$;

-- A project of the fleet. Its events are numbered under this row: a batch takes it last, just
-- before its commit, so a project's events commit in `seq` order without gaps.
CREATE TABLE projects (
    key         text PRIMARY KEY,
    last_seq    bigint NOT NULL DEFAULT 0,
    -- Moved by every batch that writes lock rows (a renewal writes no event): a daemon
    -- re-reads the project's locks when it moved.
    lock_seq    bigint NOT NULL DEFAULT 0,
    created_at  bigint NOT NULL DEFAULT maos_now_us()
);

-- The start of a batch (DESIGN.md §10), in one round trip: the project's key locked to the end
-- of the transaction (batches of one project, on every daemon, follow each other), then, in
-- this order, PostgreSQL's clock (after the lock: a lease is judged when the batch runs), the
-- project's counters, a fresh block of fencing tokens, and what the calling daemon (`me`, which
-- knew the project at event `known_seq` and its locks at `known_lock_seq`) has not seen: the
-- sessions changed since (id, archived), the events since, and when any lock or wait row
-- changed, every held lock and the waits it needs (the others' live ones, its own that
-- another daemon ended). JSON arrays, NULL when unchanged.
CREATE FUNCTION maos_begin(project_key text, known_seq bigint, known_lock_seq bigint, me text,
    OUT now_us bigint, OUT last_seq bigint, OUT lock_seq bigint, OUT token bigint,
    OUT changed jsonb, OUT events jsonb, OUT locks jsonb, OUT waits jsonb)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('maos project ' || project_key, 0));
    SELECT p.last_seq, p.lock_seq INTO last_seq, lock_seq FROM projects p
        WHERE p.key = project_key;
    now_us := maos_now_us();
    token := nextval('maos_fence');
    IF last_seq > known_seq THEN
        SELECT coalesce(jsonb_agg(jsonb_build_object('id', c.id, 'archived', c.archived)), '[]')
            INTO changed
            FROM (SELECT s.id, s.archived FROM sessions s
                      WHERE s.project = project_key AND s.changed_seq > known_seq
                  UNION
                  SELECT s.id, s.archived FROM session_agents a
                      JOIN sessions s ON s.project = a.project AND s.id = a.session_id
                      WHERE a.project = project_key AND a.changed_seq > known_seq) c;
        SELECT coalesce(jsonb_agg(jsonb_build_object('seq', e.seq, 'ts', e.ts,
                'session_id', e.session_id, 'agent_id', e.agent_id, 'type', e.type,
                'data', e.data::text) ORDER BY e.seq), '[]')
            INTO events
            FROM session_events e WHERE e.project = project_key AND e.seq > known_seq;
    END IF;
    IF lock_seq IS DISTINCT FROM known_lock_seq THEN
        SELECT coalesce(jsonb_agg(jsonb_build_object('token', l.token, 'path', l.path,
                'holder_id', l.holder_id, 'mode', l.mode, 'acquired_at', l.acquired_at,
                'expires_at', l.expires_at, 'ttl_us', l.ttl_us) ORDER BY l.token), '[]')
            INTO locks
            FROM locks l WHERE l.project = project_key;
        SELECT coalesce(jsonb_agg(jsonb_build_object('daemon', w.daemon, 'wait', w.wait,
                'agent_id', w.agent_id, 'path', w.path, 'mode', w.mode, 'born', w.born,
                'since', w.since, 'deadline', w.deadline, 'lease_until', w.lease_until,
                'message', w.message) ORDER BY w.ord), '[]')
            INTO waits
            FROM lock_waits w WHERE w.project = project_key
                AND ((w.daemon <> me AND w.outcome IS NULL AND w.lease_until > now_us)
                    OR (w.daemon = me AND w.outcome IS NOT NULL));
    END IF;
END $$;

-- A member of the fleet: one daemon (its machine and MAOS_HOME).
CREATE TABLE daemons (
    id          text PRIMARY KEY,
    machine     text NOT NULL,
    started_at  bigint NOT NULL,
    last_seen   bigint NOT NULL
);

-- Where each daemon's clone of a project is (roots differ between machines; paths do not).
CREATE TABLE project_roots (
    project     text NOT NULL REFERENCES projects (key),
    daemon      text NOT NULL REFERENCES daemons (id),
    root        text NOT NULL,
    PRIMARY KEY (project, daemon)
);

-- `changed_seq`: the last event number of the batch that wrote the row, so a daemon refreshes
-- its cache with the rows changed past the last `seq` it applied.
CREATE TABLE sessions (
    project                text NOT NULL REFERENCES projects (key),
    id                     text NOT NULL,
    objective              text NOT NULL,
    state                  text NOT NULL,
    strategy               text NOT NULL,
    active                 boolean NOT NULL DEFAULT false,
    created_at             bigint NOT NULL,
    updated_at             bigint NOT NULL,
    started_at             bigint,
    ended_at               bigint,
    workflow_completed_at  bigint,
    resume_count           integer NOT NULL DEFAULT 0,
    pause                  jsonb,                 -- PauseInfo or NULL
    paused_phases          jsonb NOT NULL DEFAULT '[]',
    errors                 jsonb NOT NULL DEFAULT '[]',
    archived               boolean NOT NULL DEFAULT false,
    data                   jsonb NOT NULL DEFAULT '{}',
    changed_seq            bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (project, id)
);
CREATE INDEX sessions_state ON sessions (project, state);
CREATE INDEX sessions_changed ON sessions (project, changed_seq);
-- At most one session per project is active; the batches (under the project's key) keep that
-- true. No partial unique index: one batch may move the flag from one row to another.

CREATE TABLE session_agents (
    project             text NOT NULL,
    id                  text NOT NULL,
    session_id          text NOT NULL,
    role                text NOT NULL,
    instance            integer NOT NULL,
    task                text NOT NULL,
    state               text NOT NULL,
    paused              boolean NOT NULL DEFAULT false,
    parent_id           text,
    depends_on          jsonb NOT NULL DEFAULT '[]',
    created_at          bigint NOT NULL,
    updated_at          bigint NOT NULL,
    started_at          bigint,
    ended_at            bigint,
    exit_code           integer,
    external_session_id text,                     -- e.g. Claude Code session_id, never parsed
    external_agent_id   text,                     -- e.g. Claude Code agent_id, never parsed
    pid                 integer,
    data                jsonb NOT NULL DEFAULT '{}',
    -- The daemon whose machine runs the agent (its process, its CLI window): only it starts,
    -- signals or reaps the process. NULL for an agent no daemon runs (registered by hand).
    daemon              text REFERENCES daemons (id),
    changed_seq         bigint NOT NULL DEFAULT 0,
    -- Creation order (SQLite's rowid): agents created in one batch share their created_at.
    ord                 bigint GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (project, id),
    FOREIGN KEY (project, session_id) REFERENCES sessions (project, id)
);
CREATE INDEX session_agents_session ON session_agents (project, session_id, state);
CREATE INDEX session_agents_changed ON session_agents (project, changed_seq);

CREATE TABLE phases (
    project     text NOT NULL,
    session_id  text NOT NULL,
    idx         integer NOT NULL,                 -- 0-based position in the workflow
    name        text NOT NULL,
    state       text NOT NULL,
    attempts    integer NOT NULL DEFAULT 0,
    started_at  bigint,
    ended_at    bigint,
    result      text,                             -- passed | failed
    artifacts   jsonb NOT NULL DEFAULT 'null',
    handoff     jsonb NOT NULL DEFAULT 'null',
    PRIMARY KEY (project, session_id, idx),
    FOREIGN KEY (project, session_id) REFERENCES sessions (project, id)
);

CREATE TABLE session_events (
    project     text NOT NULL,
    seq         bigint NOT NULL,                  -- per project, from projects.last_seq
    ts          bigint NOT NULL,
    session_id  text,
    agent_id    text,
    type        text NOT NULL,
    data        jsonb NOT NULL DEFAULT '{}',
    PRIMARY KEY (project, seq)
);
CREATE INDEX session_events_session ON session_events (project, session_id, seq);
CREATE INDEX session_events_type ON session_events (project, type, seq);
CREATE INDEX session_events_agent ON session_events (project, agent_id, seq);
CREATE INDEX session_events_ts ON session_events (project, ts);

-- Fencing tokens, one sequence for the whole fleet: a batch draws one value once its keys are
-- locked and numbers its grants from it, so a path's tokens grow in grant order and no token
-- is given twice. (SQLite's `meta` row of the next token has no counterpart here.)
CREATE SEQUENCE maos_fence AS bigint INCREMENT BY 65536 MINVALUE 1 START WITH 1;

CREATE TABLE locks (
    token        bigint PRIMARY KEY,              -- fencing token, unique in the fleet
    project      text NOT NULL,
    path         text NOT NULL,                   -- repository-relative ('' = whole project)
    holder_id    text NOT NULL,                   -- agent id
    session_id   text NOT NULL,
    mode         text NOT NULL CHECK (mode IN ('read', 'write', 'directory', 'workspace')),
    acquired_at  bigint NOT NULL,
    expires_at   bigint NOT NULL,                 -- by maos_now_us()
    ttl_us       bigint NOT NULL                  -- lease length, re-applied on renewal
);
CREATE INDEX locks_path ON locks (project, path);
CREATE INDEX locks_holder ON locks (project, holder_id);
CREATE INDEX locks_expiry ON locks (expires_at);

-- Lock waits, fleet-wide: each daemon writes the waits of its agents (in the batch that parks
-- them, deleted in the batch that ends them), so that every daemon queues a request behind the
-- earlier waits of all of them and sees the wait-for cycles that run through other machines.
-- `ord` is the fleet-wide arrival order (batches of a project follow each other). Only a wait's
-- own daemon grants it, times it out or cancels it; another daemon may end it as a deadlock's
-- victim (`outcome`, with the message its daemon answers its agent with). A wait has a lease,
-- renewed by its daemon while it waits: the waits of a daemon that died lapse and leave the
-- queue. A daemon's waits do not outlive it: it deletes them when it joins again.
CREATE SEQUENCE maos_wait_order AS bigint;
CREATE TABLE lock_waits (
    project      text NOT NULL REFERENCES projects (key),
    daemon       text NOT NULL REFERENCES daemons (id),
    wait         bigint NOT NULL,                 -- the wait's id in its daemon
    ord          bigint NOT NULL DEFAULT nextval('maos_wait_order'),
    agent_id     text NOT NULL,
    session_id   text NOT NULL,
    path         text NOT NULL,
    mode         text NOT NULL CHECK (mode IN ('read', 'write', 'directory', 'workspace')),
    born         bigint NOT NULL,                 -- when its agent was registered
    since        bigint NOT NULL,
    deadline     bigint,                          -- NULL: waits for ever
    lease_until  bigint NOT NULL,                 -- by maos_now_us()
    outcome      text CHECK (outcome IN ('deadlock')),
    message      text,
    PRIMARY KEY (project, daemon, wait),
    CHECK ((outcome IS NULL) = (message IS NULL))
);
CREATE INDEX lock_waits_queue ON lock_waits (project, ord);

CREATE TABLE checkpoints (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project     text NOT NULL,
    session_id  text NOT NULL,
    seq         bigint NOT NULL,                  -- last event included
    ts          bigint NOT NULL,
    reason      text NOT NULL,
    state       text NOT NULL                     -- JSON snapshot of the session, as written
);
CREATE INDEX checkpoints_session ON checkpoints (project, session_id, id);
CREATE INDEX checkpoints_session_ts ON checkpoints (project, session_id, ts);
