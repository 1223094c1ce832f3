//! OpenCode: where maos's plugin lives, and `install-hooks --opencode` / `uninstall-hooks
//! --opencode`. OpenCode has no hook commands: it loads every `*.js` / `*.ts` file in a
//! config directory's `plugin/` or `plugins/` (observed with 1.18.33: the project's
//! `.opencode/`, the user's `$XDG_CONFIG_HOME/opencode/`), and maos's plugin
//! (`opencode_plugin.js`, embedded here) runs `maos hook --cli opencode` on its events.

use std::path::{Path, PathBuf};

use crate::install::{Consent, Installed};

/// The plugin maos writes, this version of it.
pub const PLUGIN: &str = include_str!("opencode_plugin.js");

/// The first words of every version of maos's plugin: a file that starts otherwise is not
/// maos's.
const MARK: &str = "// maos-opencode-plugin ";

/// The file maos's plugin for OpenCode is in: the project's (`.opencode/plugins/maos.js`) or
/// the user's (`$XDG_CONFIG_HOME/opencode/plugins/maos.js`, `~/.config/...` by default).
pub fn settings_path(root: &Path, user: bool) -> Result<PathBuf, String> {
    if !user {
        return Ok(root.join(".opencode/plugins/maos.js"));
    }
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".config"))
        })
        .ok_or("HOME is not set: cannot find the user's settings")?;
    Ok(config.join("opencode/plugins/maos.js"))
}

/// The text of `path`, `None` when there is no such file.
fn read(path: &Path) -> Result<Option<String>, String> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// How far maos's plugin is installed in `path`: this maos's plugin, another maos's (an
/// older one: install again), or none.
pub fn installed(path: &Path) -> Result<Installed, String> {
    Ok(match read(path)? {
        Some(text) if text == PLUGIN => Installed::Yes,
        Some(text) if text.starts_with(MARK) => {
            Installed::Partly(vec!["this maos's plugin (the file is another maos's)"])
        }
        _ => Installed::No,
    })
}

/// `install-hooks --opencode`: the plugin written (a file of that name that is not maos's is
/// left alone); the line to print. OpenCode asks no trust of a project's plugins.
pub fn install(root: &Path, path: &Path, user: bool, consent: Consent) -> Result<String, String> {
    let _ = (root, user, consent);
    match read(path)? {
        Some(text) if text == PLUGIN => {
            return Ok(format!(
                "maos's OpenCode plugin already installed in {} (nothing changed)",
                path.display()
            ));
        }
        Some(text) if !text.starts_with(MARK) => {
            return Err(format!(
                "{} is not maos's plugin: left unchanged; move it away and run `maos install-hooks --opencode` again",
                path.display()
            ));
        }
        _ => {}
    }
    write(path)?;
    Ok(format!(
        "maos's OpenCode plugin installed in {} (OpenCode loads it at its next start)",
        path.display()
    ))
}

/// [`PLUGIN`] written to `path` beside it, then renamed into place (never half a file).
fn write(path: &Path) -> Result<(), String> {
    let failed = |e: std::io::Error| format!("{}: {e}; nothing was changed", path.display());
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(failed)?;
    }
    let tmp = path.with_extension("js.maos-tmp");
    std::fs::write(&tmp, PLUGIN).map_err(failed)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        failed(e)
    })
}

/// `uninstall-hooks --opencode`: maos's plugin removed (any other file left alone), with the
/// `plugins/` directory and its config directory when nothing else is in them; the line to
/// print.
pub fn uninstall(root: &Path, path: &Path) -> Result<String, String> {
    let _ = root;
    match read(path)? {
        Some(text) if text.starts_with(MARK) => {}
        Some(_) => {
            return Ok(format!(
                "{} is not maos's plugin: left unchanged",
                path.display()
            ));
        }
        None => return Ok(format!("no maos plugin in {}", path.display())),
    }
    std::fs::remove_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // Empty directories only (`remove_dir` refuses any other).
    if let Some(plugins) = path.parent() {
        let _ = std::fs::remove_dir(plugins);
        if let Some(config) = plugins.parent() {
            let _ = std::fs::remove_dir(config);
        }
    }
    Ok(format!(
        "maos's OpenCode plugin removed from {}",
        path.display()
    ))
}
