//! Colour for people at a terminal: only when stdout is one, and never when `NO_COLOR` is set
//! to anything (<https://no-color.org>). Plain SGR codes around text that is already padded,
//! so columns line up the same with and without colour.

use std::io::IsTerminal;

use maos_core::{AgentState, SessionState};

/// Whether to colour, decided once per command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Paint {
    on: bool,
}

impl Paint {
    /// Colour when stdout is a terminal and `NO_COLOR` is unset or empty.
    pub fn stdout() -> Paint {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Paint {
            on: !no_color && std::io::stdout().is_terminal(),
        }
    }

    /// Never colour (files, pipes, JSON, tests of the text).
    pub const fn off() -> Paint {
        Paint { on: false }
    }

    fn sgr(self, code: &str, text: &str) -> String {
        if self.on && !text.is_empty() {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    pub fn bold(self, text: &str) -> String {
        self.sgr("1", text)
    }

    pub fn dim(self, text: &str) -> String {
        self.sgr("2", text)
    }

    pub fn red(self, text: &str) -> String {
        self.sgr("31", text)
    }

    pub fn yellow(self, text: &str) -> String {
        self.sgr("33", text)
    }

    /// An agent's state: running green, waiting or paused yellow, failed red, finished dim.
    pub fn agent_state(self, state: AgentState, paused: bool, text: &str) -> String {
        match state {
            _ if paused => self.yellow(text),
            AgentState::Running => self.sgr("32", text),
            AgentState::Failed => self.red(text),
            AgentState::Resumable | AgentState::Pending => self.yellow(text),
            _ => self.dim(text),
        }
    }

    /// A session's state, the same way.
    pub fn session_state(self, state: SessionState, text: &str) -> String {
        match state {
            SessionState::Running => self.sgr("32", text),
            SessionState::Paused | SessionState::Created => self.yellow(text),
            SessionState::Failed => self.red(text),
            _ => self.dim(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_leaves_text_alone_and_on_wraps_it_whole() {
        assert_eq!(Paint::off().red("failed  "), "failed  ");
        let on = Paint { on: true };
        assert_eq!(on.red("failed  "), "\x1b[31mfailed  \x1b[0m");
        assert_eq!(on.red(""), "", "nothing to colour, no codes");
    }
}
