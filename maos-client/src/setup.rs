//! What every CLI's installer speaks (`install`, and each CLI's own module): how far maos's
//! hooks are installed, and whether the person agreed to trust them.

/// How far maos's hooks are installed in a settings file.
#[derive(Debug, PartialEq, Eq)]
pub enum Installed {
    /// No file, or no maos hook in it.
    No,
    /// Some events lack maos's hook (named).
    Partly(Vec<&'static str>),
    Yes,
}

/// How `maos install-hooks` may trust maos's hooks where the CLI runs them only once trusted
/// (Codex, Gemini CLI).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Consent {
    /// `--yes`.
    Given,
    /// Ask on the terminal, if there is one.
    Ask,
}
