-- A lock row lives as long as a grant: locks are inserted and deleted at the rate of grants.
-- Each index of the table is one more insertion per grant and one more index full of entries
-- of rows already gone until autovacuum comes (a minute apart at the least). PostgreSQL reads
-- locks only by project (a batch's fresh copy of the lock table) and deletes them by token or
-- by session (`maos gc`); the path, holder and expiry indexes served nothing (the daemon keeps
-- the table in memory and decides there), so one index on (project, token) replaces them.
DROP INDEX locks_path;
DROP INDEX locks_holder;
DROP INDEX locks_expiry;
CREATE INDEX locks_project ON locks (project, token);
