//! What the daemon remembers of each window (a CLI session) across projects, in memory: its
//! last prompt and the other projects it wrote in (read by `crate::edge::scope`, held by the daemon).

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use maos_proto::HookCall;

/// Windows remembered; past it the one heard from longest ago is forgotten.
const MAX_WINDOWS: usize = 4096;

/// What the daemon remembers of each window (a CLI session) across projects: its last prompt
/// (the task it is known by) and the other projects it wrote in.
#[derive(Default)]
pub struct Windows {
    inner: Mutex<WindowMap>,
}

#[derive(Default)]
struct WindowMap {
    windows: HashMap<String, Window>,
    tick: u64,
}

#[derive(Default)]
struct Window {
    prompt: Option<String>,
    projects: BTreeSet<String>,
    heard: u64,
}

fn window_key(call: &HookCall) -> String {
    format!("{}\u{0}{}", call.cli.label(), call.session_id)
}

impl Windows {
    fn with<T>(&self, call: &HookCall, f: impl FnOnce(&mut Window) -> T) -> T {
        let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        map.tick += 1;
        let tick = map.tick;
        let key = window_key(call);
        if !map.windows.contains_key(&key) && map.windows.len() >= MAX_WINDOWS {
            let oldest = map
                .windows
                .iter()
                .min_by_key(|(_, w)| w.heard)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                map.windows.remove(&oldest);
            }
        }
        let w = map.windows.entry(key).or_default();
        w.heard = tick;
        f(w)
    }

    /// A window's prompt (its task), kept to name it in the projects it writes in later.
    pub fn heard(&self, call: &HookCall) {
        let prompt =
            call.event == "UserPromptSubmit" && call.agent_id.is_none() && call.subagent.is_none();
        if let Some(line) = call
            .summary
            .as_deref()
            .filter(|s| prompt && !s.trim().is_empty())
        {
            self.with(call, |w| w.prompt = Some(line.to_string()));
        }
    }

    /// The window writes in `project`: `Some(prompt)` the first time (what to tell that project
    /// of its task first), None when it wrote there before.
    pub fn visit(&self, call: &HookCall, project: &str) -> Option<Option<String>> {
        self.with(call, |w| {
            w.projects
                .insert(project.to_string())
                .then(|| w.prompt.clone())
        })
    }

    /// The other projects the window wrote in.
    pub fn visited(&self, call: &HookCall) -> Vec<String> {
        let map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        map.windows
            .get(&window_key(call))
            .map(|w| w.projects.iter().cloned().collect())
            .unwrap_or_default()
    }

    pub fn forget(&self, call: &HookCall) {
        let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        map.windows.remove(&window_key(call));
    }
}
