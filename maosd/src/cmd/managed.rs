//! Requests about managed sessions and agents (plans, exits, recovery, validation, logs).

use maos_core::{AgentId, SessionId};
use maos_proto::{AgentExit, ErrorBody, Reply, req};

use super::{Handle, Outcome, agent_reply, session_reply};
use crate::ops::process;
use crate::txn::state::{Named, Txn};

/// `maos run PLAN` / `maos session create --plan PLAN`.
impl Handle for req::SessionFromPlan {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let sid = process::from_plan(tx, &self.path, &self.text, self.start)?;
        session_reply(tx, &sid)
    }

    fn creates_project(&self) -> bool {
        true
    }

    /// Its agents' programs runnable here, their `workdir`s inside the project.
    fn check_here(&self, root: &str) -> Result<(), ErrorBody> {
        crate::proc::plancheck::check(root, &self.path, &self.text)
    }
}

/// `maos agent start|complete|...`.
impl Handle for req::AgentTransition {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let r = *self;
        let id = tx.state().resolve_agent(&r.agent, None)?.id.clone();
        process::agent_op(tx, &id, r.op, r.exit_code, r.reason)?;
        agent_reply(tx, &id)
    }
}

/// A supervisor reports a managed agent's exit.
impl Handle for AgentExit {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        process::exited(tx, *self)?;
        Ok(Reply::Done.into())
    }
}

/// `maos retry [SESSION|AGENT]`: the session, with the agents it runs again.
impl Handle for req::Retry {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let (sid, agent) = match tx.state().resolve_target(self.target.as_deref())? {
            Named::Session(s) => (s.id.clone(), None),
            Named::Agent(a) => (a.session_id.clone(), Some(a.id.clone())),
        };
        process::retry(tx, &sid, agent.as_ref(), self.by)?;
        session_reply(tx, &sid)
    }
}

/// `maos recover [SESSION]`.
impl Handle for req::Recover {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let report = crate::ops::recovery::recover(tx, self.session.as_deref())?;
        Ok(Reply::Recovery(report).into())
    }

    fn empty_answer(&self) -> Option<Reply> {
        Some(Reply::Recovery(maos_proto::RecoveryReport::default()))
    }
}

/// What validation asks of the system: processes, locks, checkpoints.
struct Live<'a>(&'a crate::txn::state::State);

impl maos_core::validate::Facts for Live<'_> {
    fn launching(&self, agent: &AgentId) -> bool {
        self.0.is_launching(agent)
    }
    fn alive(&self, p: &maos_proto::ProcessInfo) -> bool {
        crate::ops::effects::live_process(Some(p))
    }
    fn held(&self, agent: &AgentId) -> Vec<maos_core::LockPath> {
        self.0
            .locks
            .held_by(agent)
            .into_iter()
            .map(|l| l.path.clone())
            .collect()
    }
    fn last_checkpoint(&self, session: &SessionId) -> Option<maos_core::Ts> {
        self.0.last_checkpoint(session)
    }
}

/// `maos validate [SESSION]`: what does not add up.
impl Handle for req::Validate {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let st = tx.state();
        let sessions: Vec<&maos_proto::SessionRecord> = match self.session.as_deref() {
            Some(name) => vec![st.resolve_session(Some(name))?],
            None => st
                .sessions()
                .iter()
                .filter(|s| !s.state.is_terminal())
                .collect(),
        };
        let problems = maos_core::validate::check(sessions, &Live(st));
        Ok(Reply::Validation(problems).into())
    }

    fn empty_answer(&self) -> Option<Reply> {
        Some(Reply::Validation(Vec::new()))
    }
}

/// Where a managed agent's output goes (`maos logs`).
impl Handle for req::AgentLog {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        log(tx, &self.agent)
    }
}

fn log(tx: &Txn<'_>, agent: &str) -> Result<Outcome, ErrorBody> {
    let runner = process::runner(tx)?;
    let a = tx.state().resolve_agent(agent, None)?;
    // Only an agent maos starts (from a plan) has a log; a hook's or a registered agent never
    // will, and "no output yet" would have the user wait for it.
    if a.spec.is_none() {
        return Err(ErrorBody::new(
            maos_proto::ErrorCode::BadRequest,
            format!(
                "agent {} ({}) is not a managed agent: maos did not start it, so it has no log; \
                 `maos events --agent {}` shows what it did",
                a.id.short(),
                a.role,
                a.id.short()
            ),
        ));
    }
    let files = crate::proc::procs::agent_files(&runner.project_dir, a.id.as_str());
    Ok(Reply::Log {
        agent: a.id.clone(),
        path: files.log.display().to_string(),
        state: a.state,
    }
    .into())
}
