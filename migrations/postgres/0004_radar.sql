-- The conflict radar across the fleet (issue 35): each daemon reports what the other machines'
-- radars need to merge its agents' worktrees with theirs, no machine reading another's disk.
-- One row per reported worktree: its base commit (the merge base of its HEAD with the
-- repository's main line) and its live agents; one row per file whose content differs from the
-- base's, with that content (NULL when deleted, or when the worktree was too large to report:
-- `too_large` says why, and the files are named only). A daemon rewrites its own rows only;
-- another daemon's rows are read back as input from outside and checked (paths relative, no
-- `..`, sizes under the caps, commit ids hex) before anything is written to a repository.
CREATE TABLE radar_worktrees (
    project text NOT NULL,
    daemon text NOT NULL,
    worktree text NOT NULL,
    machine text NOT NULL,
    agents jsonb NOT NULL DEFAULT '[]',
    base text NOT NULL,
    too_large text,
    version bigint NOT NULL,
    updated_at bigint NOT NULL,
    PRIMARY KEY (project, daemon, worktree)
);

CREATE TABLE radar_files (
    project text NOT NULL,
    daemon text NOT NULL,
    worktree text NOT NULL,
    path text NOT NULL,
    mode integer NOT NULL,
    blob text NOT NULL,
    size bigint NOT NULL,
    content bytea,
    PRIMARY KEY (project, daemon, worktree, path)
);

CREATE SEQUENCE maos_radar_version;
