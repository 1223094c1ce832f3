//! The command line. Every command that prints something a script may read takes `--json`
//! for a stable, documented machine shape (docs/commands.md: JSON output and exit codes).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use maos_proto::{ErrorBody, ErrorCode};

use crate::failure::{Failure, Res, usage};

/// maos keeps multi-agent coding sessions safe, durable and resumable.
#[derive(Parser, Debug)]
#[command(
    name = "maos",
    version,
    // The man page's NAME line is "maos - ABOUT": the about text does not say "maos" again.
    about = "keeps multi-agent coding sessions safe, durable and resumable",
    long_about = "maos keeps multi-agent coding sessions safe, durable and resumable.",
    after_help = "Data lives in $MAOS_HOME (default ~/.local/state/maos); the daemon starts on demand.",
    // `maos --version` is ours (it asks the daemon too): see `version` below.
    disable_version_flag = true
)]
pub struct Cli {
    /// Print machine-readable JSON instead of tables (see docs/commands.md: JSON output and
    /// exit codes; refused where a command prints no JSON: completions, man without --dir,
    /// demo, top).
    #[arg(long, global = true)]
    pub json: bool,
    /// The project directory (default: the main worktree of the git repository around the
    /// current directory, else the nearest directory with .maos/; see docs/commands.md:
    /// Commands).
    #[arg(long, global = true, env = "MAOS_PROJECT", value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Print the versions of maos and of the running daemon (never starts one).
    #[arg(short = 'V', long)]
    pub version: bool,
    /// `--project` was typed on the command line (not inherited from `MAOS_PROJECT`).
    #[arg(skip)]
    pub project_typed: bool,
    /// The project root once resolved: `ps`, `status` and `brief` name it in the request and
    /// again in their header, and resolving walks the filesystem.
    #[arg(skip)]
    pub resolved: std::cell::OnceCell<String>,
    #[command(subcommand)]
    pub cmd: Cmd,
}

impl Cli {
    /// The project root this invocation works on, as the daemon names it: the one `--project`
    /// names (the project it lies in, else that directory itself), else the project around the
    /// current directory ([`maos_proto::paths::find_project`]); outside any, one line saying
    /// so and how to make one (exit 1; nothing is created).
    pub fn project_root(&self) -> Res<String> {
        if let Some(root) = self.resolved.get() {
            return Ok(root.clone());
        }
        let root = match &self.project {
            Some(dir) => explicit_root(dir)?,
            None => {
                let cwd = std::env::current_dir()
                    .map_err(|e| usage(format!("cannot read the current directory: {e}")))?;
                match maos_proto::paths::find_project(&cwd) {
                    Some(root) => root.to_string_lossy().into_owned(),
                    None => return Err(no_project(&cwd)),
                }
            }
        };
        Ok(self.resolved.get_or_init(|| root).clone())
    }

    /// The project around the current directory, or the current directory when there is none
    /// (and nothing names one): for the commands that set a project up (`install-hooks`) or
    /// look at one (`doctor`).
    pub fn project_or_cwd(&self) -> Res<(String, bool)> {
        match self.project_root() {
            Ok(root) => Ok((root, true)),
            Err(_) if self.project.is_none() => {
                let cwd = std::env::current_dir()
                    .map_err(|e| usage(format!("cannot read the current directory: {e}")))?;
                let cwd = std::fs::canonicalize(&cwd).unwrap_or(cwd);
                Ok((cwd.to_string_lossy().into_owned(), false))
            }
            Err(e) => Err(e),
        }
    }
}

impl Cli {
    /// A typed `--project` where the command works on no project (the daemon, a shell
    /// script, the pages, the demo's own projects, `init`'s DIR), and `--json` where the
    /// command prints no JSON (a shell script, a roff page, the demo's tour, a full-screen
    /// view): refused in one line rather than accepted and ignored. `MAOS_PROJECT` in the
    /// environment is not refused: it is set for every command alike.
    pub fn check_globals(&self) -> Res {
        let project = match &self.cmd {
            _ if !self.project_typed || self.version => None,
            Cmd::Daemon { .. } => Some("`maos daemon` serves every project"),
            Cmd::Completions { .. } | Cmd::Man { .. } => Some("it describes the command line"),
            Cmd::Demo { .. } => Some("`maos demo` makes its own throw-away projects"),
            Cmd::Init { .. } => Some("`maos init DIR` takes the directory as its argument"),
            Cmd::Dashboard { .. } => Some("the dashboard shows every open project"),
            _ => None,
        };
        if let Some(why) = project {
            return Err(usage(format!("--project does not apply here: {why}")));
        }
        self.check_json()
    }

    fn check_json(&self) -> Res {
        let what = match &self.cmd {
            _ if !self.json || self.version => return Ok(()),
            Cmd::Completions { .. } => "`maos completions` prints a shell script",
            Cmd::Man { dir: None } => {
                "`maos man` prints a roff page (with --dir DIR it lists the pages it wrote as JSON)"
            }
            Cmd::Demo { .. } => "`maos demo` is a tour for people",
            Cmd::Top { .. } => {
                "`maos top` is a full-screen view (`maos ps --json` is the snapshot)"
            }
            Cmd::Mcp { .. } => "`maos mcp` speaks MCP on stdin and stdout",
            _ => return Ok(()),
        };
        Err(usage(format!("--json does not apply here: {what}")))
    }
}

/// The top-level commands in the groups and the order `maos --help` shows them: watching
/// first. A name this build lacks is skipped (`top` has its slot), and a test checks that every
/// command has a group.
pub const GROUPS: &[(&str, &[&str])] = &[
    (
        "Watch",
        &[
            "ps",
            "top",
            "dashboard",
            "radar",
            "status",
            "brief",
            "events",
            "logs",
            "history",
        ],
    ),
    (
        "Steer",
        &[
            "pause",
            "resume",
            "retry",
            "note",
            "run",
            "session",
            "agent",
            "phase",
            "lock",
            "restore-file",
        ],
    ),
    (
        "Keep and repair",
        &[
            "export", "import", "backup", "restore", "repair", "gc", "recover", "validate",
        ],
    ),
    (
        "Set up",
        &[
            "init",
            "install-hooks",
            "uninstall-hooks",
            "doctor",
            "daemon",
            "hook",
            "git-check",
            "mcp",
            "completions",
            "man",
            "demo",
            "help",
        ],
    ),
];

/// The command line as clap sees it, its subcommands ordered by [`GROUPS`] (for the man
/// pages and completions too) and the root help listing them under the groups' headings.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    // Not built: `man` turns clap's `help` subcommand off before it is added.
    let mut cmd = Cli::command();
    let width = cmd
        .get_subcommands()
        .map(|s| s.get_name().len())
        .max()
        .unwrap_or(0);
    let mut listing = String::new();
    let mut order = 0;
    for (title, names) in GROUPS {
        listing.push_str(&format!("{title}:\n"));
        for name in names.iter().copied() {
            let about = match cmd.find_subcommand(name) {
                Some(sub) => sub.get_about().map(ToString::to_string).unwrap_or_default(),
                // clap adds it when the command is built.
                None if name == "help" => {
                    "Print this message or the help of the given subcommand(s)".to_string()
                }
                None => continue,
            };
            if name == "help" {
                listing.push_str(&format!("  {name:<width$}  {about}\n"));
                continue;
            }
            listing.push_str(&format!("  {name:<width$}  {about}\n"));
            order += 1;
            cmd = cmd.mut_subcommand(name, |s| s.display_order(order));
        }
        listing.push('\n');
    }
    cmd.help_template(format!(
        "{{about-with-newline}}\n{{usage-heading}} {{usage}}\n\n{listing}Options:\n{{options}}{{after-help}}"
    ))
}

/// `--project DIR`: the project DIR lies in, else DIR itself.
fn explicit_root(dir: &std::path::Path) -> Res<String> {
    if !dir.is_dir() {
        return Err(usage(format!(
            "project directory {} does not exist",
            dir.display()
        )));
    }
    Ok(maos_proto::paths::project_root(dir)
        .to_string_lossy()
        .into_owned())
}

/// The refusal of a command run outside every project.
pub fn no_project(dir: &std::path::Path) -> Failure {
    Failure {
        body: ErrorBody::new(
            ErrorCode::NotFound,
            format!(
                "no maos project at {}: not inside a git repository, and no .maos/ here or above; run `maos init` to make this directory one, or pass --project DIR",
                dir.display()
            ),
        ),
        exit: 1,
    }
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Start, stop or inspect the daemon.
    Daemon {
        #[command(subcommand)]
        cmd: DaemonCmd,
    },
    /// Create, list and drive sessions.
    Session {
        #[command(subcommand)]
        cmd: SessionCmd,
    },
    /// Register agents and drive their lifecycle.
    Agent {
        #[command(subcommand)]
        cmd: AgentCmd,
    },
    /// Start, complete or skip the phases of a session.
    Phase {
        #[command(subcommand)]
        cmd: PhaseCmd,
    },
    /// Delete finished sessions that ended long ago, each exported first (to the project's
    /// `exports/` directory under MAOS_HOME).
    Gc {
        /// How long ago a session must have ended (500ms, 30s, 5m, 1h, 30d).
        #[arg(long, default_value = "30d", value_name = "DURATION")]
        older_than: String,
        /// Only list what would be deleted.
        #[arg(long)]
        dry_run: bool,
    },
    /// A consistent copy of this project's database, taken while the daemon serves.
    Backup {
        /// Where to write it (must not exist; default `$MAOS_HOME/backups/PROJECT-DATE-TIME.db`).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Put back the version of a file its holder last wrote (kept by maos when a held file's
    /// holder writes it), after another agent's command changed it; the content it replaces
    /// is kept too, so nothing is lost either way.
    #[command(name = "restore-file")]
    RestoreFile {
        /// The file, in this project.
        path: String,
        /// Put back this kept version instead (a SHA-256, or its first digits), as
        /// `maos events --type lock_violated` lists them.
        #[arg(long, value_name = "HASH")]
        version: Option<String>,
    },
    /// Replace this project's database with a backup, once the backup checks out; the old
    /// database is kept beside it.
    Restore {
        /// The backup (a `maos backup` file).
        file: PathBuf,
        /// Even though sessions are live (they are replaced by the backup's).
        #[arg(long)]
        force: bool,
    },
    /// List the rows of this project's database that maos cannot read (they keep the project
    /// from loading); with --quarantine, move their sessions aside to a file so that it loads.
    Repair {
        /// Move every row of each such session to `quarantine/` in the project's state
        /// directory and delete it from the database (the rest stays as it is).
        #[arg(long)]
        quarantine: bool,
    },
    /// Write a session with its timeline and checkpoints as JSON (archived sessions too).
    Export {
        /// Session id or unique prefix (default: the active session).
        session: Option<String>,
        /// Write to this new file (mode 0600; an existing file is refused) instead of stdout.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Bring in a session file: a `maos export`, or an orchestrator's session JSON.
    Import {
        /// A `maos export` file, or an orchestrator's session JSON.
        file: PathBuf,
    },
    /// Finished sessions, newest first, archived ones included.
    History {
        /// At most this many (default 20).
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// Sessions with their agents, what each is doing now, and their locks (live sessions;
    /// --all for finished ones too).
    Ps {
        /// Finished sessions too.
        #[arg(long)]
        all: bool,
        /// Draw it again every --interval until interrupted (Ctrl-C); waits for the daemon
        /// when it goes away.
        #[arg(long, short)]
        watch: bool,
        /// How often --watch redraws (500ms, 2s, 1m).
        #[arg(
            long,
            default_value = "2s",
            value_name = "DURATION",
            requires = "watch"
        )]
        interval: String,
    },
    /// A live full-screen view of the sessions and agents: what each does now, locks held and
    /// waited for, denials and deadlocks as they happen; keys to pause, resume, cancel, filter
    /// and read events. Runs `maos-top` (built with the workspace), passing its arguments
    /// (`maos top --help`).
    #[command(disable_help_flag = true)]
    Top {
        /// The arguments of `maos-top`.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<OsString>,
    },
    /// maos as an MCP server over stdio, for agent CLIs (`maos install-hooks` registers it):
    /// who holds what, enforced locks with fencing tokens, progress, notes, the briefing.
    /// Runs `maos-mcp` (built with the workspace), passing its arguments.
    #[command(disable_help_flag = true)]
    Mcp {
        /// The arguments of `maos-mcp`.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<OsString>,
    },
    /// The browser view: find the running dashboard or start one (on 127.0.0.1, behind a
    /// secret token made at each start), print its URL, and open it in `$BROWSER` if set.
    Dashboard {
        /// Stop the running dashboard instead.
        #[arg(long)]
        stop: bool,
    },
    /// Take, release, list and check file locks.
    Lock {
        #[command(subcommand)]
        cmd: LockCmd,
    },
    /// Pause a session, one of its agents, or one of its phases.
    Pause(PauseArgs),
    /// Resume what `maos pause` paused (or an interrupted agent).
    Resume(ResumeArgs),
    /// The timeline of a project or session.
    Events(EventsArgs),
    /// Progress, phase timing, ETA and whether the session is stalled.
    Status {
        /// Session id or unique prefix (default: the active session).
        session: Option<String>,
    },
    /// Where a session stands: objective, progress, what is done, in progress and pending,
    /// decisions, errors, blockers, locks and the next step (what a new AI session is told).
    Brief {
        /// Session id or unique prefix (default: the active session).
        session: Option<String>,
    },
    /// Record a fact for the briefing: a decision, work done, an error, or work still to do.
    Note(NoteArgs),
    /// The conflict radar: live agents' worktrees whose work (committed or not) would conflict
    /// if both landed, with the files and the conflicting lines.
    Radar {
        /// Only the pairs one side of which is this agent (id or unique prefix).
        #[arg(long)]
        agent: Option<String>,
        /// Turn each predicted conflict into a Read lock on the file for the pair's later
        /// writer, so the two must coordinate (no other agent may write it while it holds it).
        #[arg(long)]
        lock: bool,
    },
    /// Create a session from a plan file and start it: maos starts its agents (see
    /// docs/commands.md: Managed sessions (plans)).
    Run {
        /// The plan (TOML).
        plan: PathBuf,
        /// Wait until the session ends and print how; the exit code is its outcome: 0
        /// completed, 4 failed, 5 cancelled.
        #[arg(long)]
        wait: bool,
        /// Only check the plan file (without the daemon, which also checks each agent's
        /// program and workdir when it runs it) and list the agents whose declared files
        /// overlap.
        #[arg(long, conflicts_with = "wait")]
        check: bool,
    },
    /// A managed agent's output (its log file).
    Logs {
        /// Agent id, unique prefix, or its name in the plan.
        agent: String,
        /// Keep printing new output until the agent ends.
        #[arg(long, short)]
        follow: bool,
    },
    /// Run a managed session's failed (and cancelled) agents again, or one failed agent and
    /// the agents cancelled because of it; a failed session runs again.
    Retry {
        /// Session id or unique prefix, or an agent's id, prefix or plan name (default: the
        /// active session).
        target: Option<String>,
    },
    /// Reconcile managed sessions with their processes (the daemon does it when it starts).
    Recover {
        /// Session id or unique prefix (default: every live managed session).
        session: Option<String>,
    },
    /// Report inconsistencies (running agents without a process, locks of finished agents,
    /// a checkpoint older than the state); exit 1 if there are any.
    Validate {
        /// Session id or unique prefix (default: every live session).
        session: Option<String>,
    },
    /// Make a directory outside git a maos project: creates DIR/.maos/ (a git repository is
    /// one already; see docs/commands.md: Commands).
    Init {
        /// The directory (default: the current one).
        #[arg(value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Answer an agent CLI's hook call: one JSON object on stdin (see docs/hooks.md: Hooks).
    Hook {
        /// The CLI that calls: claude (the default), codex or gemini.
        #[arg(long, value_name = "CLI", value_parser = ["claude", "codex", "gemini"])]
        cli: Option<String>,
    },
    /// Check the files a git commit takes against other agents' locks, for the pre-commit
    /// hook of `maos install-hooks --git`: exit 1 naming each file another live agent holds,
    /// its holder and the command that commits the rest (bypass: `git commit --no-verify`).
    GitCheck {
        /// The git hook that runs it: pre-commit.
        #[arg(value_parser = ["pre-commit"])]
        hook: String,
    },
    /// Add maos's hooks to .claude/settings.json (or the user's, or Codex's), keeping the rest.
    InstallHooks(HookTarget),
    /// Remove exactly the hooks install-hooks added.
    UninstallHooks(HookTarget),
    /// Check the set-up: hooks installed, `maos` on PATH, daemon reachable, versions, database.
    Doctor,
    /// Print a shell completion script: `maos completions bash > ~/.local/share/bash-completion/completions/maos`.
    Completions {
        /// The shell the script is for.
        #[arg(value_parser = ["bash", "zsh", "fish"])]
        shell: String,
    },
    /// Print the man page (roff), generated from this command line; with --dir, write maos.1 and
    /// one page per subcommand (maos-daemon-install.1, ...) into DIR.
    Man {
        /// Write every page into DIR instead of printing the root page.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Show maos at work in three short acts, each in a throw-away project and daemon: a
    /// Claude Code session replayed through `maos hook`, a managed session that survives a
    /// kill -9 of its daemon, the CLI by hand. Runs `maos-demo`, passing its arguments: `hooks`,
    /// `managed` or `cli` for one act, `--full` for every command and hook call, `--no-pause`,
    /// `--keep` (`maos demo --help`).
    #[command(disable_help_flag = true)]
    Demo {
        /// The arguments of `maos-demo`.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<OsString>,
    },
}

#[derive(Args, Debug)]
pub struct HookTarget {
    /// The user's settings (~/.claude/settings.json, $CODEX_HOME/hooks.json,
    /// ~/.gemini/settings.json) instead of the project's.
    #[arg(long)]
    pub user: bool,
    /// Codex's hooks file (.codex/hooks.json) instead of Claude Code's settings.
    #[arg(long, conflicts_with = "gemini")]
    pub codex: bool,
    /// Gemini CLI's settings (.gemini/settings.json) instead of Claude Code's.
    #[arg(long, conflicts_with_all = ["copilot", "cursor", "opencode"])]
    pub gemini: bool,
    /// GitHub Copilot CLI's hooks (.github/hooks/maos.json) instead of Claude Code's.
    #[arg(long, conflicts_with_all = ["codex", "cursor", "opencode"])]
    pub copilot: bool,
    /// Cursor's hooks (.cursor/hooks.json) instead of Claude Code's.
    #[arg(long, conflicts_with_all = ["codex", "opencode"])]
    pub cursor: bool,
    /// OpenCode's plugin (.opencode/plugins/maos.js) instead of Claude Code's hooks.
    #[arg(long, conflicts_with = "codex")]
    pub opencode: bool,
    /// git's pre-commit hook in this repository (core.hooksPath, else .git/hooks) instead of
    /// an agent CLI's: it refuses a commit of files another agent holds, for people and tools
    /// without hooks. An existing pre-commit is kept and runs first.
    #[arg(long, conflicts_with_all = ["codex", "gemini", "copilot", "cursor", "opencode", "user"])]
    pub git: bool,
    /// Trust maos's hooks without asking where the CLI runs hooks only once trusted (Codex:
    /// writes their trust, and the project's, to $CODEX_HOME/config.toml; Gemini CLI: trusts
    /// the project folder in ~/.gemini/trustedFolders.json). Without it, install asks on a
    /// terminal, and elsewhere says what to run.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

impl HookTarget {
    /// The CLI these flags name (Claude Code without one).
    pub fn cli(&self) -> maos_proto::Cli {
        use maos_proto::Cli;
        [
            (self.codex, Cli::Codex),
            (self.gemini, Cli::Gemini),
            (self.copilot, Cli::Copilot),
            (self.cursor, Cli::Cursor),
            (self.opencode, Cli::OpenCode),
        ]
        .into_iter()
        .find_map(|(on, cli)| on.then_some(cli))
        .unwrap_or(Cli::Claude)
    }
}

#[derive(Subcommand, Debug)]
pub enum DaemonCmd {
    /// Start the daemon if it is not running.
    Start,
    /// Stop the daemon gracefully (in-flight requests finish and commit).
    Stop,
    /// Pid, version, uptime, socket and open projects.
    Status,
    /// Run maosd as a user service: write the unit files (systemd) or the agent plist (launchd)
    /// for this installation's `maosd` and enable its socket, so that the daemon starts on the
    /// first connection after every login.
    Install(ServiceArgs),
    /// Stop and remove the user service that `maos daemon install` set up.
    Uninstall(ServiceArgs),
}

#[derive(Args, Debug)]
pub struct ServiceArgs {
    /// A systemd user service (the default on Linux).
    #[arg(long, conflicts_with = "launchd")]
    pub systemd: bool,
    /// A launchd user agent (the default on macOS).
    #[arg(long)]
    pub launchd: bool,
    /// Only write (or remove) the files; do not run systemctl or launchctl.
    #[arg(long)]
    pub files_only: bool,
}

#[derive(Subcommand, Debug)]
pub enum SessionCmd {
    /// Create a session; it becomes the active one when the project has none.
    Create {
        /// What the session is for (taken from the plan with --plan).
        #[arg(long, required_unless_present = "plan", conflicts_with = "plan")]
        objective: Option<String>,
        /// Create it from a plan file (TOML): objective, strategy, phases and agents that maos
        /// starts once the session starts.
        #[arg(long, value_name = "PLAN", conflicts_with_all = ["strategy", "phases"])]
        plan: Option<PathBuf>,
        /// How its agents run: all at once, one after another, as their dependencies allow, or
        /// each phase's output feeding the next.
        #[arg(
            long,
            default_value = "parallel",
            value_name = "parallel|sequential|adaptive|pipeline"
        )]
        strategy: String,
        /// A phase of the workflow, in order (repeat for several).
        #[arg(long = "phase", value_name = "NAME")]
        phases: Vec<String>,
    },
    /// Sessions of this project: the live ones and the active one, even once it has finished
    /// (--all for every finished one too).
    List {
        /// Every finished session too (not archived ones: `maos history` lists those).
        #[arg(long)]
        all: bool,
    },
    /// One session in full.
    Show {
        /// Session id or unique prefix (default: the active session; archived ones too).
        session: Option<String>,
    },
    /// Make a session the project's active one (the default of every command).
    Activate {
        /// Session id or unique prefix.
        session: String,
    },
    /// Created → Running.
    Start(SessionTarget),
    /// Finish a session successfully.
    Complete(SessionTarget),
    /// Finish a session as failed.
    Fail(SessionTarget),
    /// Abandon a session.
    Cancel(SessionTarget),
    /// Take a finished session out of `ps` and `session list`; the database keeps it, with
    /// its events and checkpoints, and `maos history` lists it.
    Archive {
        /// Session id or unique prefix.
        session: String,
    },
}

#[derive(Args, Debug)]
pub struct SessionTarget {
    /// Session id or unique prefix (default: the active session).
    pub session: Option<String>,
    /// Why (recorded in the timeline).
    #[arg(long)]
    pub reason: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum AgentCmd {
    /// Register an agent in a session (Pending until started).
    Register {
        /// What the agent is (coder, reviewer, ...): shown in `ps` and in denials.
        #[arg(long)]
        role: String,
        /// What the agent is to do, in a line.
        #[arg(long)]
        task: String,
        /// An agent of the same session this one waits for (repeat for several).
        #[arg(long = "depends-on", value_name = "ID")]
        depends_on: Vec<String>,
        /// The agent that spawned this one.
        #[arg(long, value_name = "ID")]
        parent: Option<String>,
        /// Session id or unique prefix (default: the active session).
        #[arg(long, value_name = "ID")]
        session: Option<String>,
    },
    /// Pending → Running (or resume an interrupted agent).
    Start(AgentTarget),
    /// The agent finished its task.
    Complete(AgentTarget),
    /// The agent failed.
    Fail(AgentTarget),
    /// Stop the agent for good.
    Cancel(AgentTarget),
    /// Agents of a session.
    List {
        /// Session id or unique prefix (default: the active session).
        #[arg(long, value_name = "ID")]
        session: Option<String>,
    },
    /// A sign of life: renews every lock lease the agent holds.
    Heartbeat {
        /// Agent id, unique prefix, or its name in the plan.
        agent: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum LockCmd {
    /// Take a lock for an agent and print its fencing token.
    Acquire {
        /// File or directory (absolute, or relative to the current directory).
        path: String,
        /// The agent that takes it (id or unique prefix).
        #[arg(long, value_name = "ID")]
        agent: String,
        /// read: shared; write: one file; directory: a whole subtree; workspace: the whole
        /// project.
        #[arg(
            long,
            default_value = "write",
            value_name = "read|write|directory|workspace"
        )]
        mode: String,
        /// Fail at once when the lock is taken (the default).
        #[arg(long, conflicts_with_all = ["wait", "wait_forever"])]
        no_wait: bool,
        /// Wait up to DURATION (500ms, 30s, 5m, 1h) for the holders to let go.
        #[arg(long, value_name = "DURATION", conflicts_with = "wait_forever")]
        wait: Option<String>,
        /// Wait until granted (a deadlock still ends the wait).
        #[arg(long)]
        wait_forever: bool,
        /// Lease length (default 10m): the lock expires unless the agent shows life.
        #[arg(long, value_name = "DURATION")]
        ttl: Option<String>,
    },
    /// Release a lock. Only its holder may, unless --force (which is logged).
    Release {
        /// The locked file or directory (absolute, or relative to the current directory).
        path: String,
        /// The holder (id or unique prefix); not needed with --force.
        #[arg(long, value_name = "ID", required_unless_present = "force")]
        agent: Option<String>,
        /// Break the lock whoever holds it.
        #[arg(long)]
        force: bool,
    },
    /// Release every lock of an agent and end its waits.
    ReleaseAll {
        /// Agent id or unique prefix.
        #[arg(long, value_name = "ID")]
        agent: String,
    },
    /// Held locks and queued requests.
    List {
        /// Only the locks of this session's agents (id or unique prefix; default: all).
        #[arg(long, value_name = "ID")]
        session: Option<String>,
    },
    /// Would this agent be blocked on PATH, and by whom? Exits 1 when it would be.
    Check {
        /// File or directory (absolute, or relative to the current directory).
        path: String,
        /// The agent that would ask (default: one holding nothing, so every conflicting lock
        /// shows).
        #[arg(long, value_name = "ID")]
        agent: Option<String>,
        /// The mode it would ask for (as in `lock acquire`).
        #[arg(
            long,
            default_value = "write",
            value_name = "read|write|directory|workspace"
        )]
        mode: String,
    },
}

#[derive(Args, Debug)]
pub struct AgentTarget {
    /// Agent id, unique prefix, or its name in the plan.
    pub agent: String,
    /// The agent's exit code, recorded with it.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub exit_code: Option<i32>,
    /// Why (recorded in the timeline).
    #[arg(long)]
    pub reason: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum PhaseCmd {
    /// Start the current phase (or retry it after a failed checkpoint).
    Start(PhaseTarget),
    /// Complete the running phase; --failed records a failed checkpoint (retry with start).
    Complete {
        #[command(flatten)]
        target: PhaseTarget,
        /// Record a failed checkpoint instead (`phase start` retries the phase).
        #[arg(long)]
        failed: bool,
        /// Artifacts of the phase as JSON (outputs, evidence, files, commands run).
        #[arg(long, value_name = "JSON")]
        artifacts: Option<String>,
    },
    /// Skip the current phase.
    Skip(PhaseTarget),
    /// Grow the plan of a live session by one phase, appended after the others (not for a
    /// session that runs a plan file).
    Add {
        /// The new phase's name.
        name: String,
        /// Session id or unique prefix (default: the active session).
        #[arg(long, value_name = "ID")]
        session: Option<String>,
    },
}

#[derive(Args, Debug)]
pub struct PhaseTarget {
    /// Phase name or number (1-based; default: the current phase).
    pub phase: Option<String>,
    /// Session id or unique prefix (default: the active session).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
}

#[derive(Args, Debug)]
pub struct PauseArgs {
    /// Session id or unique prefix (default: the active session); else one agent, by id,
    /// prefix or plan name.
    pub session: Option<String>,
    /// Pause one agent only (id, unique prefix or plan name).
    #[arg(long, value_name = "ID", conflicts_with = "phase")]
    pub agent: Option<String>,
    /// Pause one phase only.
    #[arg(long, value_name = "NAME")]
    pub phase: Option<String>,
    /// Why (shown to whoever resumes, recorded in the timeline).
    #[arg(long)]
    pub reason: Option<String>,
}

#[derive(Args, Debug)]
pub struct ResumeArgs {
    /// Session id or unique prefix (default: the active session); else one agent, by id,
    /// prefix or plan name.
    pub session: Option<String>,
    /// Resume one agent only (id, unique prefix or plan name; an interrupted managed agent runs
    /// its resume command).
    #[arg(long, value_name = "ID", conflicts_with = "phase")]
    pub agent: Option<String>,
    /// Resume one phase only.
    #[arg(long, value_name = "NAME")]
    pub phase: Option<String>,
}

#[derive(Args, Debug)]
pub struct NoteArgs {
    /// What the note records.
    #[arg(value_enum)]
    pub kind: NoteKind,
    /// The note (several words are joined with spaces).
    #[arg(required = true, value_name = "TEXT")]
    pub text: Vec<String>,
    /// The agent it is about (default: `MAOS_AGENT_ID`, set for agents maos started).
    #[arg(long, value_name = "ID", env = "MAOS_AGENT_ID")]
    pub agent: Option<String>,
    /// Session id or unique prefix (default: `MAOS_SESSION_ID`, else the active session).
    #[arg(long, value_name = "ID", env = "MAOS_SESSION_ID")]
    pub session: Option<String>,
}

/// `maos note` kinds.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum NoteKind {
    /// A decision, with its rationale.
    Decision,
    /// Work completed, with its outcome.
    Done,
    /// An error or blocker.
    Error,
    /// Work still to do.
    Pending,
}

impl From<NoteKind> for maos_proto::NoteKind {
    fn from(k: NoteKind) -> Self {
        match k {
            NoteKind::Decision => Self::Decision,
            NoteKind::Done => Self::Done,
            NoteKind::Error => Self::Error,
            NoteKind::Pending => Self::Pending,
        }
    }
}

#[derive(Args, Debug)]
pub struct EventsArgs {
    /// Only this session's events (default: the whole project).
    pub session: Option<String>,
    /// Only events of this type (repeat for several); an unknown type is refused with the list.
    #[arg(long = "type", value_name = "TYPE")]
    pub types: Vec<String>,
    /// Only this agent's events (id or unique prefix).
    #[arg(long, value_name = "ID")]
    pub agent: Option<String>,
    /// Only events at or after TIME: RFC 3339 (2026-11-22T10:00:00Z) or an age (30s, 10m, 2h, 1d).
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Only events before TIME: RFC 3339 or an age, as for --since.
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Only events about a path: TEXT occurs in the file or directory they name.
    #[arg(long, value_name = "TEXT")]
    pub path: Option<String>,
    /// Only events whose type or data contain TEXT (ASCII letters in any case).
    #[arg(long, value_name = "TEXT")]
    pub grep: Option<String>,
    /// Only the newest N events.
    #[arg(long, value_name = "N")]
    pub limit: Option<u32>,
    /// Keep streaming new events as they happen (Ctrl-C to stop). When the daemon goes away
    /// it says so on stderr, waits for it to come back and resumes after the last event shown.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// With --follow: how long to wait for a daemon that went away to come back (30s, 10m;
    /// default 60s) before exiting with code 3.
    #[arg(long, value_name = "TIME", requires = "follow")]
    pub reconnect_for: Option<String>,
}

#[cfg(test)]
mod tests {
    /// Every subcommand says what it does and every argument what it means, at every depth:
    /// the help, the man pages and the completions are all made from these texts.
    #[test]
    fn every_command_and_argument_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {}", arg.get_id()));
                }
            }
            for sub in cmd.get_subcommands() {
                let path = format!("{path} {}", sub.get_name());
                if sub.get_about().is_none() && sub.get_long_about().is_none() {
                    missing.push(format!("{path} (the command)"));
                }
                walk(sub, &path, missing);
            }
        }
        let mut cmd = super::command();
        cmd.build();
        let mut missing = Vec::new();
        walk(&cmd, "maos", &mut missing);
        assert!(
            missing.is_empty(),
            "without help text:\n{}",
            missing.join("\n")
        );
    }

    /// Every top-level command is listed in exactly one group of `maos --help`, and `ps`
    /// comes first.
    #[test]
    fn every_command_has_one_group_and_ps_leads() {
        let cmd = super::command();
        let listed: Vec<&str> = super::GROUPS
            .iter()
            .flat_map(|(_, names)| names.iter().copied())
            .collect();
        for sub in cmd.get_subcommands() {
            let n = listed.iter().filter(|l| **l == sub.get_name()).count();
            assert_eq!(n, 1, "{} is in {n} groups", sub.get_name());
        }
        assert_eq!(listed[0], "ps");
        let help = cmd.clone().render_help().to_string();
        let watch = help.find("Watch:").expect("the Watch heading");
        let ps = help.find("\n  ps ").expect("ps in the list");
        let daemon = help.find("\n  daemon ").expect("daemon in the list");
        assert!(watch < ps && ps < daemon, "{help}");
        assert!(!help.contains("Commands:"), "{help}");
    }
}
