//! Writing a plan as TOML ([`Plan::to_toml`](super::Plan::to_toml)).

use std::fmt;

use super::model::Plan;

impl Plan {
    /// The plan as a plan file: [`parse`] of the result gives the plan back (for a valid plan).
    /// Phases are written by name, defaults are written out.
    pub fn to_toml(&self) -> String {
        use fmt::Write as _;
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = writeln!(out, "objective = {}", quote(&self.objective));
        let _ = writeln!(out, "strategy = {}", quote(self.strategy.as_str()));
        if !self.phases.is_empty() {
            let _ = writeln!(out, "phases = {}", array(&self.phases));
        }
        let p = &self.policy;
        let _ = writeln!(out, "\n[failure]");
        let _ = writeln!(out, "policy = {}", quote(p.on_failure.plan_word()));
        let _ = writeln!(out, "retries = {}", p.retries);
        if let Some(m) = p.max_parallel {
            let _ = writeln!(out, "max_parallel = {m}");
        }
        let _ = writeln!(out, "grace_ms = {}", p.grace_ms);
        if !p.landing.is_none() {
            let _ = writeln!(out, "\n[landing]");
            let _ = writeln!(out, "serialise = {}", quote(p.landing.plan_word()));
        }
        for a in &self.agents {
            let _ = writeln!(out, "\n[[agent]]");
            let _ = writeln!(out, "name = {}", quote(&a.name));
            let _ = writeln!(out, "role = {}", quote(&a.role));
            let _ = writeln!(out, "task = {}", quote(&a.task));
            let _ = writeln!(out, "command = {}", array(&a.command));
            if let Some(r) = &a.resume_command {
                let _ = writeln!(out, "resume_command = {}", array(r));
            }
            if !a.depends_on.is_empty() {
                let _ = writeln!(out, "depends_on = {}", array(&a.depends_on));
            }
            if let Some(ph) = a.phase {
                let by_name = usize::try_from(ph).ok().and_then(|i| {
                    self.phases
                        .get(i)
                        .filter(|n| self.phase_index(n) == Some(i))
                });
                match by_name {
                    Some(name) => {
                        let _ = writeln!(out, "phase = {}", quote(name));
                    }
                    None => {
                        let _ = writeln!(out, "phase = {}", u64::from(ph) + 1);
                    }
                }
            }
            if let Some(s) = a.stage {
                let _ = writeln!(out, "stage = {s}");
            }
            if let Some(w) = &a.workdir {
                let _ = writeln!(out, "workdir = {}", quote(w));
            }
            if let Some(r) = a.retries {
                let _ = writeln!(out, "retries = {r}");
            }
            if !a.files.is_empty() {
                let _ = writeln!(out, "files = {}", array(&a.files));
            }
            if !a.overlap.is_wait() {
                let _ = writeln!(out, "overlap = {}", quote(a.overlap.plan_word()));
            }
            if let Some(l) = &a.land {
                let _ = writeln!(out, "land = {}", array(l));
            }
            if !a.env.is_empty() {
                let pairs: Vec<String> = a
                    .env
                    .iter()
                    .map(|(k, v)| format!("{} = {}", key(k), quote(v)))
                    .collect();
                let _ = writeln!(out, "env = {{ {} }}", pairs.join(", "));
            }
        }
        out
    }
}

/// A TOML basic string.
pub(super) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A TOML key: bare when it can be.
pub(super) fn key(k: &str) -> String {
    let bare = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare { k.to_owned() } else { quote(k) }
}

pub(super) fn array(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| quote(s)).collect();
    format!("[{}]", quoted.join(", "))
}
