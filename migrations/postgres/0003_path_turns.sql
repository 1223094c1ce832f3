-- Per-path turns (DESIGN.md §10, issue 34). A batch made only of lock acquires and releases
-- no longer takes its project's one key exclusive: it takes it shared, then the keys of the
-- paths it names (each path exclusive, every ancestor directory shared, the root included),
-- so batches on different files of one project run side by side while a directory or
-- workspace lock still waits for every batch under it. Any other batch takes the project's key
-- exclusive, as in maos_begin, and so waits for every batch of the project. The daemon passes
-- the path keys already merged (one entry per key, exclusive if any of its uses is) and
-- sorted: every batch takes its keys in one order (the project's first), so two batches never
-- wait for each other in a cycle.
--
-- The clock and the token block are read together, last, under a short session lock: batches
-- side by side read them in one order, so a batch that drew a larger token also has a later
-- `now` (tokens and lease times grow together along the project's grants). The lock is held for
-- two function calls only, and let go on every way out of the block. They come after the rows
-- are read: a lock row of a batch beside this one (another path) read here has a token below
-- this batch's block, which the daemon's lock table must number from.
CREATE FUNCTION maos_begin_paths(project_key text, known_seq bigint, known_lock_seq bigint,
    me text, path_keys bigint[], path_excl boolean[],
    OUT now_us bigint, OUT last_seq bigint, OUT lock_seq bigint, OUT token bigint,
    OUT changed jsonb, OUT events jsonb, OUT locks jsonb, OUT waits jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    project_lock bigint := hashtextextended('maos project ' || project_key, 0);
    clock_lock bigint := hashtextextended('maos clock ' || project_key, 0);
    i integer;
BEGIN
    IF path_keys IS NULL THEN
        PERFORM pg_advisory_xact_lock(project_lock);
    ELSE
        PERFORM pg_advisory_xact_lock_shared(project_lock);
        FOR i IN 1 .. coalesce(array_length(path_keys, 1), 0) LOOP
            IF path_excl[i] THEN
                PERFORM pg_advisory_xact_lock(path_keys[i]);
            ELSE
                PERFORM pg_advisory_xact_lock_shared(path_keys[i]);
            END IF;
        END LOOP;
    END IF;
    SELECT p.last_seq, p.lock_seq INTO last_seq, lock_seq FROM projects p
        WHERE p.key = project_key;
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
            FROM session_events e WHERE e.project = project_key AND e.seq > known_seq
                AND e.seq <= last_seq;
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
                AND ((w.daemon <> me AND w.outcome IS NULL AND w.lease_until > maos_now_us())
                    OR (w.daemon = me AND w.outcome IS NOT NULL));
    END IF;
    -- Last: every token in the rows read above was drawn before this block (a batch commits
    -- after it draws), so the daemon's table numbers this batch's grants from the block.
    PERFORM pg_advisory_lock(clock_lock);
    BEGIN
        now_us := maos_now_us();
        token := nextval('maos_fence');
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        PERFORM pg_advisory_unlock(clock_lock);
        RAISE;
    END;
    PERFORM pg_advisory_unlock(clock_lock);
END $$;
