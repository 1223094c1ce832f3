//! Sessions and agents already under way, the set-up most `ps`, `brief` and error tests
//! begin with: created and started through the real `maos`, as a person would.

use crate::Env;

/// `maos session create --objective OBJECTIVE` then `maos session start`: the session's id.
pub fn session(env: &Env, objective: &str) -> String {
    let id = env.session(objective, &[]);
    env.maos_json(&["session", "start"]);
    id
}

/// A top-level agent of `role` doing `task` in the active session, registered then started
/// (`maos agent start`): its id.
pub fn agent(env: &Env, role: &str, task: &str) -> String {
    let id = env.agent(None, role, task);
    env.maos_json(&["agent", "start", &id]);
    id
}
