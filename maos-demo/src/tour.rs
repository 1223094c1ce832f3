//! Part 3 (`maos demo cli`): a session with phases and agents driven through its life by
//! real `maos` commands, each printed with its output.

use std::path::Path;

use crate::demo::{Demo, outcome, say, tell};

/// The CLI tour: sessions, phases, agents, locks, a deadlock, pause and resume, by hand.
pub fn run(keep: bool) -> Result<(), String> {
    let d = Demo::new(keep)?;
    say(&format!(
        "a throw-away project in {} with its own daemon; your real maos state is not touched",
        d.project.display()
    ));
    say("a session with three phases; it becomes the project's active session");
    let out = d.run(&[
        "session",
        "create",
        "--objective",
        "Add rate limiting to the login endpoint",
        "--strategy",
        "adaptive",
        "--phase",
        "design",
        "--phase",
        "implement",
        "--phase",
        "verify",
    ])?;
    Demo::id_of(&out)?;
    say(
        "agents: an architect, then backend and tests that depend on it, and a reviewer spawned by backend",
    );
    let architect = Demo::id_of(&d.run(&[
        "agent",
        "register",
        "--role",
        "architect",
        "--task",
        "Design the token bucket",
    ])?)?;
    let backend = Demo::id_of(&d.run(&[
        "agent",
        "register",
        "--role",
        "backend",
        "--task",
        "Implement the limiter in src/auth/limit.rs",
        "--depends-on",
        &architect,
    ])?)?;
    let qa = Demo::id_of(&d.run(&[
        "agent",
        "register",
        "--role",
        "qa",
        "--task",
        "Write tests for the limiter",
        "--depends-on",
        &architect,
    ])?)?;
    let reviewer = Demo::id_of(&d.run(&[
        "agent",
        "register",
        "--role",
        "reviewer",
        "--task",
        "Review the limiter",
        "--parent",
        &backend,
    ])?)?;

    tell(
        "a session with phases design, implement, verify; agents architect, backend, qa and a reviewer",
    );
    say("ids can be shortened to any unique prefix");
    d.run(&["session", "start"])?;
    d.run(&["phase", "start"])?;
    d.run(&["agent", "start", maos_core::ids::short(&architect)])?;
    d.run(&[
        "agent",
        "complete",
        maos_core::ids::short(&architect),
        "--exit-code",
        "0",
    ])?;
    d.run(&[
        "phase",
        "complete",
        "--artifacts",
        r#"{"files":["docs/limiter.md"]}"#,
    ])?;
    d.run(&["phase", "start", "implement"])?;
    d.run(&["agent", "start", &backend])?;
    d.run(&["agent", "start", &qa])?;
    tell("design is done; backend and qa work on implement, and both want src/auth/limit.rs:");

    say(
        "locks: backend takes the limiter; qa's write to the same file is refused, naming the holder",
    );
    d.show(&["lock", "acquire", "src/auth/limit.rs", "--agent", &backend])?;
    d.show_refused(&["lock", "acquire", "src/auth/limit.rs", "--agent", &qa])?;
    d.run(&["lock", "acquire", "tests/limit.rs", "--agent", &qa])?;
    tell(
        "qa locks tests/limit.rs instead; backend then asks for it too, and waits in the background;",
    );
    tell("now qa asks for backend's file, ready to wait as long as it takes:");
    say("a deadlock: backend waits for qa's file while qa asks for backend's");
    let waiting = d.spawn(&[
        "lock",
        "acquire",
        "tests/limit.rs",
        "--agent",
        &backend,
        "--wait-forever",
    ])?;
    d.until_waiting()?;
    d.run(&["lock", "list"])?;
    say("qa, the younger agent, loses: its request ends with `deadlock` naming the cycle");
    d.show_refused(&[
        "lock",
        "acquire",
        "src/auth/limit.rs",
        "--agent",
        &qa,
        "--wait-forever",
    ])?;
    say("qa lets go of its locks, and backend's waiting request is granted");
    d.run(&["lock", "release-all", "--agent", &qa])?;
    let out = waiting
        .wait_with_output()
        .map_err(|e| format!("background request: {e}"))?;
    if crate::demo::full() {
        out!("{}", String::from_utf8_lossy(&out.stdout));
        outln!();
    }
    if !out.status.success() {
        return Err(format!(
            "backend's wait failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    outcome(
        false,
        "DEADLOCK",
        "found the moment it formed, not after a timeout: qa, the younger agent, was refused; once it let go of its locks, backend's wait for tests/limit.rs was granted",
    );
    d.run(&["ps"])?;

    say("pause the whole session (who, why and what was running are recorded)");
    d.show_command(&["pause", "--reason", "lunch break"])?;
    say("nothing starts while the session is paused");
    d.show_refused(&["agent", "start", &reviewer])?;
    outcome(
        false,
        "PAUSED",
        "nothing starts while the session is paused; who paused it, why and what was running are recorded",
    );
    d.run(&["ps"])?;
    d.show_command(&["resume"])?;
    tell("the work goes on: verify fails its checkpoint once (recorded), is retried and passes");

    d.run(&["agent", "start", &reviewer])?;
    d.run(&["agent", "complete", &reviewer])?;
    d.run(&["agent", "complete", &backend])?;
    d.run(&["agent", "complete", &qa])?;
    d.run(&["phase", "complete"])?;

    say("a failed checkpoint is recorded, then the phase is retried");
    d.run(&["phase", "start"])?;
    d.run(&[
        "phase",
        "complete",
        "--failed",
        "--artifacts",
        r#"{"failing":["limit::burst"]}"#,
    ])?;
    d.run(&["phase", "start", "3"])?;
    d.run(&["status"])?;
    say("completing the last phase completes the workflow and the session");
    d.run(&["phase", "complete"])?;
    say("an illegal transition is refused with its reason, and changes nothing");
    d.refused(&["session", "start"])?;
    d.show(&["ps", "--all"])?;
    say("the timeline: every change, in order, with its data");
    d.run(&["events"])?;
    let changes = d.events(&[])?.len();
    d.run(&["daemon", "status"])?;
    outcome(
        true,
        "COMPLETED",
        &format!(
            "the session, its 3/3 phases and 4/4 agents; `maos events` lists its {changes} changes, in order"
        ),
    );
    say(&format!(
        "done; data lived in {}",
        Path::new(&d.home).display()
    ));
    Ok(())
}
