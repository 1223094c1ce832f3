//! GitHub Copilot CLI: where maos's hooks live, and `install-hooks --copilot` / `uninstall-hooks --copilot`.
//! (Scaffolding: filled in by issue 32's work on GitHub Copilot CLI.)

use std::path::{Path, PathBuf};

use crate::install::{Consent, Installed};

/// The file maos's hooks for GitHub Copilot CLI are in: the project's (`.github/hooks/maos.json`) or the user's
/// (`~/.copilot/hooks/maos.json`).
pub fn settings_path(root: &Path, user: bool) -> Result<PathBuf, String> {
    let base = if user {
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .ok_or("HOME is not set: cannot find the user's settings")?
    } else {
        root.to_path_buf()
    };
    Ok(base.join(if user {
        ".copilot/hooks/maos.json"
    } else {
        ".github/hooks/maos.json"
    }))
}

/// How far maos's hooks are installed in `path`.
pub fn installed(path: &Path) -> Result<Installed, String> {
    let _ = path;
    Ok(Installed::No)
}

/// `install-hooks --copilot`: the line to print.
pub fn install(root: &Path, path: &Path, user: bool, consent: Consent) -> Result<String, String> {
    let _ = (root, path, user, consent);
    Err("maos cannot install hooks for GitHub Copilot CLI yet".into())
}

/// `uninstall-hooks --copilot`: the line to print.
pub fn uninstall(root: &Path, path: &Path) -> Result<String, String> {
    let _ = (root, path);
    Err("maos cannot uninstall hooks for GitHub Copilot CLI yet".into())
}
