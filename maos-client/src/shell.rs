//! Shell integration: completion scripts, the man page, `maos --version`.

use std::path::Path;

use crate::Res;

pub fn completions(_shell: &str) -> Res {
    Err(crate::usage("maos completions is not built yet"))
}

pub fn man(_dir: Option<&Path>) -> Res {
    Err(crate::usage("maos man is not built yet"))
}
