-- A batch's start as maos_begin_paths (0003), its rows sent cheaper (issue 34). Every fleet
-- batch starts here, and in a busy fleet each one reads back the project's held locks whole and
-- the events other daemons committed since its last batch. Built as `jsonb` objects (each one
-- built binary, its keys sorted, then aggregated and printed as text), that was the largest
-- part of the call (the jsonb functions were about a sixth of PostgreSQL's CPU under 3 daemons
-- x 20 agents); here each row is a `json` array, its columns in a fixed order (the daemon reads
-- them by name from that order), written straight as text. The same values; with 30 held locks
-- and 16 new events, a call took 0.4-0.9 ms instead of 1.5 ms.
--
--   changed: [id, archived]
--   events:  [seq, ts, session_id, agent_id, type, data as text]
--   locks:   [token, path, holder_id, mode, acquired_at, expires_at, ttl_us]
--   waits:   [daemon, wait, agent_id, path, mode, born, since, deadline, lease_until, message]
--
-- maos_begin_paths stays for daemons of the release before (they join no database migrated
-- past what they know, but one running while this migration runs goes on calling it).
CREATE FUNCTION maos_begin_turn(project_key text, known_seq bigint, known_lock_seq bigint,
    me text, path_keys bigint[], path_excl boolean[],
    OUT now_us bigint, OUT last_seq bigint, OUT lock_seq bigint, OUT token bigint,
    OUT changed json, OUT events json, OUT locks json, OUT waits json)
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
        SELECT coalesce(json_agg(json_build_array(c.id, c.archived)), '[]')
            INTO changed
            FROM (SELECT s.id, s.archived FROM sessions s
                      WHERE s.project = project_key AND s.changed_seq > known_seq
                  UNION
                  SELECT s.id, s.archived FROM session_agents a
                      JOIN sessions s ON s.project = a.project AND s.id = a.session_id
                      WHERE a.project = project_key AND a.changed_seq > known_seq) c;
        SELECT coalesce(json_agg(json_build_array(e.seq, e.ts, e.session_id, e.agent_id,
                e.type, e.data::text) ORDER BY e.seq), '[]')
            INTO events
            FROM session_events e WHERE e.project = project_key AND e.seq > known_seq
                AND e.seq <= last_seq;
    END IF;
    IF lock_seq IS DISTINCT FROM known_lock_seq THEN
        SELECT coalesce(json_agg(json_build_array(l.token, l.path, l.holder_id, l.mode,
                l.acquired_at, l.expires_at, l.ttl_us) ORDER BY l.token), '[]')
            INTO locks
            FROM locks l WHERE l.project = project_key;
        SELECT coalesce(json_agg(json_build_array(w.daemon, w.wait, w.agent_id, w.path, w.mode,
                w.born, w.since, w.deadline, w.lease_until, w.message) ORDER BY w.ord), '[]')
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
