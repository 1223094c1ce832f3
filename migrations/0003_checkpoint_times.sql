-- maos schema, version 3: each session's latest checkpoint time straight from an index. The
-- daemon reads it for every session when it opens a project; without the index that read
-- visits every checkpoint row, each a large snapshot on its own pages.
CREATE INDEX checkpoints_session_ts ON checkpoints (session_id, ts);
