-- maos schema, version 4: the locks table keeps only its primary key (the fencing token).
-- Nothing reads locks by holder or by path: the daemon keeps the lock table in memory and
-- decides there, and reads the rows only when a project opens (all of them, by token);
-- releases delete them by token and `maos gc` by session (a scan of the few held locks
-- either way). Each index was one more page written per grant (a lock row is inserted and
-- deleted at the rate of grants), as in PostgreSQL's 0002_lock_indexes.sql.
DROP INDEX IF EXISTS locks_holder;
DROP INDEX IF EXISTS locks_path;
