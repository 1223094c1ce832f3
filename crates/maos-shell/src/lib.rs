//! What a shell command will write, read before it runs.
//!
//! The shell tools of the agent CLIs (Claude Code's `Bash`, Codex's shell, Gemini CLI's
//! `run_shell_command`) run a command line. [`analyze`] reads it with a real bash parser
//! ([`brush_parser`]) and says which files it will write, create, delete or move
//! ([`Analysis::writes`]), which Codex `apply_patch` bodies it carries ([`Analysis::patches`]),
//! what each `git` in it does to the working tree and the index ([`Analysis::git`]), and which
//! programs may write files nobody can name beforehand ([`Analysis::opaque`]: a script, `make`, a
//! formatter, a code generator), for the caller to check after the command ran.
//!
//! Pure: no filesystem, no processes, no environment. A path is reported as the command names it
//! (relative paths relative to [`Write::dir`]); the caller resolves it. A path may name a
//! directory (`rm -r d`; `cp a d` when `d` is one): the caller treats it as covering everything
//! under it.
//!
//! Bounded: input above [`MAX_LEN`] bytes, more than [`MAX_NESTING`] nested constructs or
//! [`MAX_SUBSTITUTIONS`] substitutions, and shells inside shells deeper than [`MAX_DEPTH`] give
//! [`Analysis::error`] instead of a deep recursion. No I/O; a command with many substitutions
//! (above [`MAX_NESTING`]) is tokenized on a short-lived thread with a large stack.

mod cmds;
mod git;
mod model;
mod patch;
mod walk;
mod word;

pub use model::*;

/// Reads `command` and says what it will write. Never panics; never touches the system.
pub fn analyze(command: &str) -> Analysis {
    let mut out = Analysis::default();
    walk::analyze_into(command, &mut out);
    out.writes = dedup(std::mem::take(&mut out.writes));
    out.opaque = dedup(std::mem::take(&mut out.opaque));
    out
}

fn dedup<T: PartialEq>(items: Vec<T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(items.len());
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

#[cfg(test)]
mod tests;
