-- maos schema, version 2: a session's free-form facts (notes for the briefing, the plan's run
-- policy) as one JSON object, like `session_agents.data`.
ALTER TABLE sessions ADD COLUMN data TEXT NOT NULL DEFAULT '{}';
