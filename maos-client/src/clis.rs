//! Every agent CLI's hook files, by CLI: where maos's hooks are, and whether they are there.
//! Claude Code's, Codex's and Gemini CLI's share one settings shape (`install`); GitHub
//! Copilot CLI, Cursor and OpenCode each have their own (`copilot`, `cursor`, `opencode`). The
//! commands and the doctor ask here, so that no installer needs to know the others.

use std::path::{Path, PathBuf};

use maos_proto::Cli;

use crate::install::{self, Installed};

/// The file of `cli`'s hooks: the project's, or with `user` the user's.
pub fn settings_path(root: &Path, user: bool, cli: Cli) -> Result<PathBuf, String> {
    match cli {
        Cli::Copilot => crate::copilot::settings_path(root, user),
        Cli::Cursor => crate::cursor::settings_path(root, user),
        Cli::OpenCode => crate::opencode::settings_path(root, user),
        Cli::Claude | Cli::Codex | Cli::Gemini => install::settings_path(root, user, cli),
    }
}

/// How far maos's hooks are installed in `path`, a file of `cli`'s (a broken file is an error).
pub fn installed(path: &Path, cli: Cli) -> Result<Installed, String> {
    match cli {
        Cli::Copilot => crate::copilot::installed(path),
        Cli::Cursor => crate::cursor::installed(path),
        Cli::OpenCode => crate::opencode::installed(path),
        Cli::Claude | Cli::Codex | Cli::Gemini => install::installed(path, cli),
    }
}

/// Whether anything of maos's is left in the project `root`'s files of `cli`: its hooks, or
/// its MCP server where maos registers one.
pub fn left(root: &Path, cli: Cli) -> Result<bool, String> {
    let hooks = installed(&settings_path(root, false, cli)?, cli)? != Installed::No;
    if hooks || !crate::mcpreg::has_mcp(cli) {
        return Ok(hooks);
    }
    let mcp = crate::mcpreg::config_path(root, false, cli)?;
    Ok(crate::mcpreg::registered(root, cli)?.contains(&mcp))
}
