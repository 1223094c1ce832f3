//! The plan format's tests: parsing, every check with its position, placeholders, writing.

use std::collections::BTreeMap;

use proptest::prelude::{prop, prop_assert_eq, proptest};

use super::position::line_column;
use super::read::AGENT_KEYS;
use super::*;
use crate::Strategy;
use crate::words::{closest, edit_distance};

/// The example of the module documentation, taken from `mod.rs`'s `//!` lines.
fn doc_example() -> String {
    let src = include_str!("mod.rs");
    let mut out = String::new();
    let mut inside = false;
    for line in src.lines().take_while(|l| l.starts_with("//!")) {
        let line = line
            .trim_start_matches("//!")
            .strip_prefix(' ')
            .unwrap_or("");
        match (inside, line) {
            (false, "```toml") => inside = true,
            (true, "```") => break,
            (true, l) => {
                out.push_str(l);
                out.push('\n');
            }
            _ => {}
        }
    }
    out
}

#[test]
fn doc_example_parses() {
    let text = doc_example();
    assert!(text.starts_with("objective = "), "{text}");
    let plan = parse(&text).unwrap();
    assert_eq!(plan.objective, "Add rate limiting to the login endpoint");
    assert_eq!(plan.strategy, Strategy::Adaptive);
    assert_eq!(plan.phases, ["design", "implement"]);
    assert_eq!(
        plan.policy,
        RunPolicy {
            on_failure: OnFailure::FailSession,
            retries: 1,
            max_parallel: Some(4),
            grace_ms: 5000,
            landing: Serialise::Overlapping,
        }
    );
    let names: Vec<&str> = plan.agents.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["architect", "builder", "qa"]);
    let [architect, builder, qa] = &plan.agents[..] else {
        panic!("three agents");
    };
    assert_eq!(architect.role, "architect");
    assert_eq!(architect.command[2], "{task}");
    assert_eq!(architect.resume_command.as_ref().unwrap()[3], "--resume");
    assert_eq!(architect.phase, Some(0));
    assert_eq!(architect.retries(&plan.policy), 1);
    assert_eq!(builder.role, "implementer");
    assert_eq!(builder.depends_on, ["architect"]);
    assert_eq!(builder.phase, Some(1), "phase = 2 is the second phase");
    assert_eq!(builder.workdir.as_deref(), Some("services/auth"));
    assert_eq!(builder.retries(&plan.policy), 2);
    assert_eq!(
        builder.env.get("RUST_LOG").map(String::as_str),
        Some("info")
    );
    assert_eq!(qa.phase, Some(1));
    assert_eq!(qa.resume_command, None);
    assert_eq!(qa.stage, None);
    assert_eq!(plan.validate(), Ok(()));
}

#[test]
fn round_trips() {
    let plan = parse(&doc_example()).unwrap();
    // Through the file format.
    let text = plan.to_toml();
    assert_eq!(parse(&text).as_ref(), Ok(&plan), "{text}");
    // Through JSON (how the daemon receives plans).
    let json = serde_json::to_string(&plan).unwrap();
    let back: Plan = serde_json::from_str(&json).unwrap();
    assert_eq!(back, plan);
    assert_eq!(back.validate(), Ok(()));
}

#[test]
fn defaults() {
    let plan =
        parse("objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"true\"]\n")
            .unwrap();
    assert_eq!(plan.strategy, Strategy::Parallel);
    assert!(plan.phases.is_empty());
    assert_eq!(plan.policy, RunPolicy::default());
    assert_eq!(plan.policy.grace_ms, 5000);
    let a = &plan.agents[0];
    assert_eq!(a.role, "a");
    assert_eq!(
        (a.phase, a.stage, a.retries, &a.workdir),
        (None, None, None, &None)
    );
    assert!(a.env.is_empty() && a.depends_on.is_empty());
    assert_eq!(a.retries(&plan.policy), 0);
    // Minimal JSON: the serde defaults fill in.
    let json = r#"{"objective":"o","strategy":"adaptive","agents":[
        {"name":"a","role":"r","task":"t","command":["x"]}]}"#;
    let p: Plan = serde_json::from_str(json).unwrap();
    assert_eq!(p.policy, RunPolicy::default());
    assert_eq!(p.validate(), Ok(()));
}

#[test]
fn a_key_with_a_newline_is_named_on_one_line() {
    // Found by the `plan` fuzz target: the key is quoted as written.
    let e = parse("\"a\\nb\" = 1\n").unwrap_err();
    assert_eq!((e.line, e.column), (1, 1));
    assert!(e.message.contains("`a\\nb`"), "{e}");
    assert!(!e.to_string().contains('\n'), "{e:?}");
}

#[test]
fn every_key_and_form() {
    let text = r#"
objective = "o"
strategy = "pipeline"
phases = [" one ", "two"]
failure.policy = "continue"
failure.grace_ms = 0

[[agent]]
name = "a.b-c_9"
task = "t"
command = ["x", "{{literal}}"]
phase = 1
stage = 1
env.B = "2"
env.A = "1"

[[agent]]
name = "z"
task = "t"
command = ["y"]
phase = "two"
stage = 2
depends_on = ["a.b-c_9"]
[agent.env]
"QUOTED_KEY" = "v"
"#;
    let plan = parse(text).unwrap();
    assert_eq!(plan.phases, ["one", "two"]);
    assert_eq!(plan.policy.on_failure, OnFailure::Continue);
    assert_eq!(plan.policy.grace_ms, 0);
    assert_eq!(plan.agents[0].env.len(), 2);
    assert_eq!(plan.agents[1].env["QUOTED_KEY"], "v");
    assert_eq!(plan.agents[1].phase, Some(1));
    assert_eq!(parse(&plan.to_toml()), Ok(plan));
}

/// (file, line, column, message): one row per mistake.
const ERRORS: &[(&str, usize, usize, &str)] = &[
    // TOML syntax.
    (
        "objective = \"o\"\nstrategy = \n",
        2,
        12,
        "invalid TOML: invalid string; expected `\"`, `'`",
    ),
    (
        "objective = \"o\"\nobjective = \"p\"\n",
        2,
        1,
        "invalid TOML: duplicate key `objective` in document root",
    ),
    (
        "objective = \"o\"\nphases = [\"a\",\n",
        3,
        1,
        "invalid TOML: invalid array; expected `]`",
    ),
    // Unknown keys.
    (
        "objective = \"o\"\nobjectiv = \"p\"\n",
        2,
        1,
        "unknown top-level key `objectiv`; expected one of: objective, strategy, phases, \
         failure, landing, agent; did you mean `objective`?",
    ),
    (
        "objective = \"o\"\nretries = 2\n",
        2,
        1,
        "unknown top-level key `retries`; expected one of: objective, strategy, phases, \
         failure, landing, agent; it belongs in the [failure] section (or in an [[agent]] section)",
    ),
    (
        "objective = \"o\"\ndepends_on = []\n",
        2,
        1,
        "unknown top-level key `depends_on`; expected one of: objective, strategy, phases, \
         failure, landing, agent; it belongs in an [[agent]] section",
    ),
    (
        "objective = \"o\"\n[failure]\npolicy = \"fail\"\nretry = 1\n",
        4,
        1,
        "unknown key `retry` in [failure]; expected one of: policy, retries, max_parallel, \
         grace_ms; did you mean `retries`?",
    ),
    (
        "[failure]\nobjective = \"o\"\n",
        2,
        1,
        "unknown key `objective` in [failure]; expected one of: policy, retries, \
         max_parallel, grace_ms; top-level keys must come before the first [section] \
         (everything below a section header belongs to that section)",
    ),
    (
        "objective = \"o\"\n[[agent]]\nname = \"qa\"\ntask = \"t\"\ncomand = [\"x\"]\n",
        5,
        1,
        "unknown key `comand` in [[agent]] \"qa\"; expected one of: name, role, task, \
         command, resume_command, depends_on, phase, stage, workdir, retries, env, files, \
         overlap, land; did you mean `command`?",
    ),
    // Wrong types.
    (
        "objective = 3\n",
        1,
        13,
        "objective must be a string, not an integer",
    ),
    (
        "objective = 1979-05-27\n",
        1,
        13,
        "objective must be a string, not a datetime",
    ),
    (
        "objective = \"o\"\n[[agent]]\nname = \"qa\"\ntask = \"t\"\ncommand = \"claude -p\"\n",
        5,
        11,
        "agent \"qa\": command must be an array of strings, not a string; split the command \
         line into its arguments: command = [\"claude\", \"-p\", \"{task}\"]",
    ),
    (
        "objective = \"o\"\n[[agent]]\nname = \"qa\"\ntask = \"t\"\ncommand = [\"x\", 1]\n",
        5,
        17,
        "agent \"qa\": command[1] must be a string, not an integer",
    ),
    (
        "objective = \"o\"\n[[agent]]\nname = 5\n",
        3,
        8,
        "[[agent]] #1: name must be a string, not an integer",
    ),
    (
        "objective = \"o\"\nphases = \"a\"\n",
        2,
        10,
        "phases must be an array of strings, not a string",
    ),
    (
        "objective = \"o\"\nfailure = 1\n",
        2,
        11,
        "failure must be a table, not an integer: write it as a [failure] section",
    ),
    (
        "objective = \"o\"\n[failure]\nretries = \"2\"\n",
        3,
        11,
        "[failure] retries must be a whole number, not a string",
    ),
    (
        "objective = \"o\"\n[failure]\ngrace_ms = -1\n",
        3,
        12,
        "[failure] grace_ms cannot be negative (got -1)",
    ),
    (
        "objective = \"o\"\n[agent]\nname = \"a\"\n",
        2,
        1,
        "agent must be an array of tables: write each agent as an [[agent]] section (double \
         brackets)",
    ),
    (
        "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\nenv = \
         { A = 1 }\n",
        6,
        13,
        "agent \"a\": env A must be a string, not an integer",
    ),
    (
        "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\nstage = \
         4294967296\n",
        6,
        9,
        "agent \"a\": stage is too large (got 4294967296)",
    ),
    // Objective, agents, lengths.
    (
        "strategy = \"adaptive\"\n",
        1,
        1,
        "objective is missing; start the file with objective = \"what this session is for\"",
    ),
    (
        "objective = \"  \"\n",
        1,
        13,
        "objective is empty; say what this session is for",
    ),
    (
        "objective = \"o\"\n",
        1,
        1,
        "the plan has no agents; add at least one [[agent]] section",
    ),
    (
        "objective = \"o\"\nagent = []\n",
        2,
        9,
        "the plan has no agents; add at least one [[agent]] section",
    ),
    // Agent names.
    (
        "objective = \"o\"\n\n[[agent]]\ntask = \"t\"\n",
        3,
        1,
        "[[agent]] #1 has no name; add name = \"...\"",
    ),
    (
        "objective = \"o\"\n[[agent]]\nname = \"\"\ntask = \"t\"\ncommand = [\"x\"]\n",
        3,
        8,
        "[[agent]] #1: name is empty",
    ),
    (
        "objective = \"o\"\n[[agent]]\nname = \"q a\"\ntask = \"t\"\ncommand = [\"x\"]\n",
        3,
        8,
        "agent name \"q a\" contains ' '; names may only use letters, digits, '_', '.' and \
         '-'",
    ),
    (
        "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\n\
         [[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\n",
        7,
        8,
        "agent name \"a\" is used twice; the first is the [[agent]] at line 2",
    ),
    (
        "objective = \"o\"\n[[agent]]\nname = \"a\"\ncommand = [\"x\"]\n",
        2,
        1,
        "agent \"a\" has no task; add task = \"what this agent should do\"",
    ),
    (
        "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\n",
        2,
        1,
        "agent \"a\" has no command; add command = [\"program\", \"argument\", ...]",
    ),
    (
        "objective = \"o\"\n[[agent]]\nname = \"a\"\nrole = \"\"\ntask = \"t\"\ncommand = \
         [\"x\"]\n",
        4,
        8,
        "agent \"a\": role is empty; leave it out to use the name",
    ),
    // Commands.
    (
        "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = []\n",
        5,
        11,
        "agent \"a\": command is empty; give the program and its arguments, e.g. command = \
         [\"claude\", \"-p\", \"{task}\"]",
    ),
    (
        "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"\", \"x\"]\n",
        5,
        12,
        "agent \"a\": command[0], the program to run, is empty",
    ),
    (
        "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\n\
         resume_command = []\n",
        6,
        18,
        "agent \"a\": resume_command is empty; leave it out if the agent cannot be resumed",
    ),
    (
        "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\", \
         \"{tsak}\"]\n",
        5,
        17,
        "agent \"a\": command[1]: unknown placeholder {tsak} (did you mean {task}?); known: \
         {task}, {agent_id}, {session_id}, {claude_session_id}, {workdir}, {name}, {role}, \
         {attempt}; write {{ and }} for literal braces",
    ),
    (
        "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\n\
         resume_command = [\"x\", \"--id={claude_session_id\"]\n",
        6,
        24,
        "agent \"a\": resume_command[1]: unclosed placeholder `{claude_session_id` in \
         \"--id={claude_session_id\"; a placeholder is written {name}, a literal brace {{",
    ),
    // Dependencies.
    (
        "objective = \"o\"\nstrategy = \"adaptive\"\n[[agent]]\nname = \"a\"\ntask = \
         \"t\"\ncommand = [\"x\"]\ndepends_on = [\"bulder\"]\n[[agent]]\nname = \
         \"builder\"\ntask = \"t\"\ncommand = [\"x\"]\n",
        7,
        15,
        "agent \"a\": depends_on names \"bulder\", which is not an agent of this plan (did \
         you mean \"builder\"?)",
    ),
    (
        "objective = \"o\"\nstrategy = \"adaptive\"\n[[agent]]\nname = \"a\"\ntask = \
         \"t\"\ncommand = [\"x\"]\ndepends_on = [\"a\"]\n",
        7,
        15,
        "agent \"a\" depends on itself",
    ),
    (
        "objective = \"o\"\nstrategy = \"adaptive\"\n[[agent]]\nname = \"a\"\ntask = \
         \"t\"\ncommand = [\"x\"]\ndepends_on = [\"c\"]\n[[agent]]\nname = \"b\"\ntask = \
         \"t\"\ncommand = [\"x\"]\ndepends_on = [\"a\"]\n[[agent]]\nname = \"c\"\ntask = \
         \"t\"\ncommand = [\"x\"]\ndepends_on = [\"b\"]\n",
        7,
        15,
        "dependency cycle: a → c → b → a; an agent starts only after the agents it depends \
         on completed, so none of these could ever start",
    ),
    (
        "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\n\
         [[agent]]\nname = \"b\"\ntask = \"t\"\ncommand = [\"x\"]\ndepends_on = [\"a\"]\n",
        10,
        14,
        "agent \"b\": depends_on has no effect under strategy parallel (every agent starts \
         at once); use adaptive",
    ),
    (
        "objective = \"o\"\nstrategy = \"sequential\"\n[[agent]]\nname = \"a\"\ntask = \
         \"t\"\ncommand = [\"x\"]\ndepends_on = [\"b\"]\n[[agent]]\nname = \"b\"\ntask = \
         \"t\"\ncommand = [\"x\"]\n",
        7,
        15,
        "agent \"a\" depends on \"b\", which comes later in the file; under strategy \
         sequential agents run one at a time in file order, so move \"b\" above \"a\"",
    ),
    (
        "objective = \"o\"\nstrategy = \"pipeline\"\n[[agent]]\nname = \"a\"\ntask = \
         \"t\"\ncommand = [\"x\"]\nstage = 1\n[[agent]]\nname = \"b\"\ntask = \
         \"t\"\ncommand = [\"x\"]\nstage = 1\ndepends_on = [\"a\"]\n",
        13,
        15,
        "agent \"b\" (stage 1) depends on \"a\" (stage 1), the same stage; under strategy \
         pipeline an agent may only depend on agents of lower stages",
    ),
    (
        "objective = \"o\"\nstrategy = \"adaptive\"\nphases = [\"x\", \"y\"]\n[[agent]]\n\
         name = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\nphase = 1\ndepends_on = [\"b\"]\n\
         [[agent]]\nname = \"b\"\ntask = \"t\"\ncommand = [\"x\"]\nphase = 2\n",
        9,
        15,
        "agent \"a\" (phase \"x\") depends on \"b\" of the later phase \"y\"; phases run in \
         order, so \"b\" cannot have completed when \"a\" starts",
    ),
    (
        "objective = \"o\"\nstrategy = \"pipeline\"\n[[agent]]\nname = \"a\"\ntask = \
         \"t\"\ncommand = [\"x\"]\nstage = 1\ndepends_on = [\"b\"]\n[[agent]]\nname = \
         \"b\"\ntask = \"t\"\ncommand = [\"x\"]\nstage = 2\n",
        8,
        15,
        "agent \"a\" (stage 1) depends on \"b\" (stage 2), a later stage; under strategy \
         pipeline an agent may only depend on agents of lower stages",
    ),
    // Strategy and policy.
    (
        "objective = \"o\"\nstrategy = \"random\"\n",
        2,
        12,
        "unknown strategy \"random\"; expected one of: parallel, sequential, adaptive, \
         pipeline",
    ),
    (
        "objective = \"o\"\n[failure]\npolicy = \"ignore\"\n",
        3,
        10,
        "unknown failure policy \"ignore\"; expected fail or continue",
    ),
    (
        "objective = \"o\"\n[failure]\nretries = 11\n",
        3,
        11,
        "[failure] retries is 11; at most 10 are allowed",
    ),
    (
        "objective = \"o\"\n[failure]\nmax_parallel = 0\n[[agent]]\nname = \"a\"\ntask = \
         \"t\"\ncommand = [\"x\"]\n",
        3,
        16,
        "[failure] max_parallel must be at least 1; leave it out for no limit",
    ),
    (
        "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\n\
         retries = 12\n",
        6,
        11,
        "agent \"a\": retries is 12; at most 10 are allowed",
    ),
    // Phases.
    (
        "objective = \"o\"\nphases = [\"a\", \" \"]\n",
        2,
        16,
        "phase 2 in phases has an empty name",
    ),
    (
        "objective = \"o\"\nphases = [\"a\", \"b\", \"a\"]\n",
        2,
        21,
        "phase name \"a\" appears twice in phases (phases 1 and 3); phase names must be \
         unique",
    ),
    (
        "objective = \"o\"\nphases = [\"design\", \"build\"]\n[[agent]]\nname = \"a\"\ntask = \
         \"t\"\ncommand = [\"x\"]\nphase = \"desing\"\n",
        7,
        9,
        "agent \"a\": no phase named \"desing\"; the phases are: design, build; did you mean \
         \"design\"?",
    ),
    (
        "objective = \"o\"\nphases = [\"design\", \"build\"]\n[[agent]]\nname = \"a\"\ntask = \
         \"t\"\ncommand = [\"x\"]\nphase = \"2\"\n",
        7,
        9,
        "agent \"a\": no phase named \"2\"; the phases are: design, build; a phase number is \
         written without quotes (phase = 2)",
    ),
    (
        "objective = \"o\"\nphases = [\"design\", \"build\"]\n[[agent]]\nname = \"a\"\ntask = \
         \"t\"\ncommand = [\"x\"]\nphase = 0\n",
        7,
        9,
        "agent \"a\": phase 0 does not exist; phases are numbered from 1 to 2 (design, build)",
    ),
    (
        "objective = \"o\"\nphases = [\"design\", \"build\"]\n[[agent]]\nname = \"a\"\ntask = \
         \"t\"\ncommand = [\"x\"]\nphase = 3\n",
        7,
        9,
        "agent \"a\": phase 3 does not exist; phases are numbered from 1 to 2 (design, build)",
    ),
    (
        "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\nphase = \
         1\n",
        6,
        9,
        "agent \"a\": phase is given but the plan has no phases; add phases = [\"...\"] at \
         the top, or remove phase",
    ),
    (
        "objective = \"o\"\nphases = [\"design\"]\n[[agent]]\nname = \"a\"\ntask = \
         \"t\"\ncommand = [\"x\"]\n",
        3,
        1,
        "agent \"a\" has no phase; the plan has phases (design), so every agent needs phase \
         = \"<name>\" (or the phase's number, from 1)",
    ),
    // Stages.
    (
        "objective = \"o\"\nstrategy = \"adaptive\"\n[[agent]]\nname = \"a\"\ntask = \
         \"t\"\ncommand = [\"x\"]\nstage = 1\n",
        7,
        9,
        "agent \"a\": stage only applies to strategy pipeline (this plan's strategy is \
         adaptive)",
    ),
    (
        "objective = \"o\"\nstrategy = \"pipeline\"\n[[agent]]\nname = \"a\"\ntask = \
         \"t\"\ncommand = [\"x\"]\n",
        3,
        1,
        "agent \"a\" has no stage; under strategy pipeline every agent needs stage = 1, 2, ...",
    ),
    (
        "objective = \"o\"\nstrategy = \"pipeline\"\n[[agent]]\nname = \"a\"\ntask = \
         \"t\"\ncommand = [\"x\"]\nstage = 0\n",
        7,
        9,
        "agent \"a\": stage 0 does not exist; stages are numbered from 1",
    ),
    // Environment and workdir.
    (
        "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\nenv = \
         { OK = \"1\", \"A-B\" = \"2\" }\n",
        6,
        19,
        "agent \"a\": env \"A-B\" is not a valid variable name (letters, digits and '_', not \
         starting with a digit)",
    ),
    (
        "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\nworkdir \
         = \"\"\n",
        6,
        11,
        "agent \"a\": workdir is empty; leave it out to run in the project root",
    ),
];

/// Each text fails to parse with exactly this line, column and message.
fn assert_errors<'a>(cases: impl IntoIterator<Item = (&'a str, usize, usize, String)>) {
    let mut failures = Vec::new();
    for (text, line, column, message) in cases {
        let want = PlanError {
            line,
            column,
            message,
        };
        match parse(text) {
            Ok(_) => failures.push(format!("{text:?}: parsed, expected {want}")),
            Err(got) if got != want => {
                failures.push(format!("{text:?}:\n  got  {got}\n  want {want}"))
            }
            Err(_) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn errors_table() {
    assert_errors(
        ERRORS
            .iter()
            .map(|&(text, line, column, message)| (text, line, column, message.to_owned())),
    );
}

#[test]
fn error_display_and_long_texts() {
    let e = parse("objective = 3\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "line 1, column 13: objective must be a string, not an integer"
    );
    let long = "x".repeat(MAX_TEXT + 1);
    let text = format!("objective = \"{long}\"\n");
    assert_eq!(
        parse(&text).unwrap_err().message,
        format!(
            "objective is {} bytes long; the limit is 4096",
            MAX_TEXT + 1
        )
    );
    let text = format!(
        "objective = \"o\"\n[[agent]]\nname = \"a\"\nrole = \"{long}\"\ntask = \"t\"\n\
         command = [\"x\"]\n"
    );
    let e = parse(&text).unwrap_err();
    assert_eq!((e.line, e.column), (4, 8));
    assert_eq!(
        e.message,
        "agent \"a\": role is 4097 bytes long; the limit is 4096"
    );
    let text = format!(
        "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"{long}\"\ncommand = [\"x\"]\n"
    );
    assert_eq!(parse(&text).unwrap_err().line, 4);
    let name = "n".repeat(MAX_NAME + 1);
    let text = format!(
        "objective = \"o\"\n[[agent]]\nname = \"{name}\"\ntask = \"t\"\ncommand = [\"x\"]\n"
    );
    assert_eq!(
        parse(&text).unwrap_err().message,
        format!("agent name \"{name}\" is 65 bytes long; the limit is 64")
    );
}

#[test]
fn columns_count_characters() {
    // "é" is two bytes, one column.
    let e = parse("objective = \"é\"\nstrategy = \"ü\"\n").unwrap_err();
    assert_eq!((e.line, e.column), (2, 12));
    let e = parse("phases = [\"é\", 1]\n").unwrap_err();
    assert_eq!((e.line, e.column), (1, 16));
    assert_eq!(e.message, "phases[1] must be a string, not an integer");
    assert_eq!(line_column("ab\ncd", 99), (2, 3));
    assert_eq!(line_column("", 0), (1, 1));
}

#[test]
fn implicit_tables_have_positions() {
    // `failure` is an implicit table here (dotted keys): its key's position stands in.
    let e = parse("objective = \"o\"\nfailure.retries = 20\n").unwrap_err();
    assert_eq!(
        (e.line, e.column, e.message.as_str()),
        (2, 19, "[failure] retries is 20; at most 10 are allowed")
    );
    let e = parse("objective = \"o\"\nfailure.x = 1\n").unwrap_err();
    assert_eq!((e.line, e.column), (2, 9));
}

#[test]
fn validate_without_positions() {
    let mut plan = parse(&doc_example()).unwrap();
    assert_eq!(plan.validate(), Ok(()));
    plan.agents[2].name = "architect".into();
    assert_eq!(
        plan.validate(),
        Err("agent name \"architect\" is used twice; the first is agent #1".into())
    );
    let mut plan = parse(&doc_example()).unwrap();
    plan.agents[0].phase = Some(2);
    assert_eq!(
        plan.validate(),
        Err(
            "agent \"architect\": phase index 2 is out of range; the plan has 2 phases \
             (numbered 0..=1 in a plan sent to the daemon, 1..=2 in a file)"
                .into()
        )
    );
    let mut plan = parse(&doc_example()).unwrap();
    plan.agents[0].depends_on = vec!["qa".into()];
    assert_eq!(
        plan.validate(),
        Err(
            "dependency cycle: architect → qa → builder → architect; an agent starts only \
             after the agents it depends on completed, so none of these could ever start"
                .into()
        )
    );
    let mut plan = parse(&doc_example()).unwrap();
    plan.agents.clear();
    assert_eq!(
        plan.validate(),
        Err("the plan has no agents; add at least one [[agent]] section".into())
    );
    let mut plan = parse(&doc_example()).unwrap();
    plan.agents[1].depends_on.push("architect".into());
    assert_eq!(
        plan.validate(),
        Err("agent \"builder\": depends_on lists \"architect\" twice".into())
    );
    let mut plan = parse(&doc_example()).unwrap();
    plan.agents[1].command[1] = "a\0b".into();
    assert_eq!(
        plan.validate(),
        Err("agent \"builder\": command[1] contains a NUL byte".into())
    );
}

#[test]
fn expand_cases() {
    let lookup = |name: &str| match name {
        "task" => Some("do it".to_owned()),
        "attempt" => Some("2".to_owned()),
        "claude_session_id" => Some("c-1".to_owned()),
        _ => None,
    };
    let argv = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    type Case = (
        &'static [&'static str],
        Result<&'static [&'static str], &'static str>,
    );
    let cases: &[Case] = &[
        (&[], Ok(&[])),
        (&["claude", "-p", "{task}"], Ok(&["claude", "-p", "do it"])),
        (&["try {attempt}/{attempt}"], Ok(&["try 2/2"])),
        (&["--id={claude_session_id}x"], Ok(&["--id=c-1x"])),
        (
            &["{{task}}", "}}{{", "{{{task}}}"],
            Ok(&["{task}", "}{", "{do it}"]),
        ),
        (&["é{task}ü"], Ok(&["édo itü"])),
        (
            &["{}"],
            Err(
                "unknown placeholder {}; known: {task}, {agent_id}, {session_id}, \
             {claude_session_id}, {workdir}, {name}, {role}, {attempt}; write {{ and }} for \
             literal braces",
            ),
        ),
        (
            &["ok", "{session_id}"],
            Err("placeholder {session_id} has no value here"),
        ),
        (
            &["{tsak}"],
            Err(
                "unknown placeholder {tsak} (did you mean {task}?); known: {task}, \
             {agent_id}, {session_id}, {claude_session_id}, {workdir}, {name}, {role}, \
             {attempt}; write {{ and }} for literal braces",
            ),
        ),
        (
            &["a{task"],
            Err(
                "unclosed placeholder `{task` in \"a{task\"; a placeholder is \
             written {name}, a literal brace {{",
            ),
        ),
        (
            &["a}b"],
            Err("unmatched `}` in \"a}b\"; write `}}` for a literal brace"),
        ),
        (
            &["{a{b}"],
            Err("unknown placeholder {a{b}; known: {task}, {agent_id}, \
             {session_id}, {claude_session_id}, {workdir}, {name}, {role}, {attempt}; write \
             {{ and }} for literal braces"),
        ),
    ];
    for (input, want) in cases {
        let got = expand(&argv(input), lookup);
        let want = want.map(argv).map_err(str::to_owned);
        assert_eq!(got, want, "{input:?}");
    }
}

#[test]
fn uses_cases() {
    let argv = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(uses(
        &argv(&["x", "--resume", "{claude_session_id}"]),
        "claude_session_id"
    ));
    assert!(uses(&argv(&["a={task}b"]), "task"));
    assert!(!uses(&argv(&["{{task}}"]), "task"));
    assert!(!uses(&argv(&["{task}"]), "name"));
    assert!(!uses(&[], "task"));
    // Before a mistake in the same element still counts.
    assert!(uses(&argv(&["{task} }"]), "task"));
}

#[test]
fn placeholders_are_all_accepted() {
    let argv: Vec<String> = PLACEHOLDERS.iter().map(|p| format!("{{{p}}}")).collect();
    let got = expand(&argv, |n| Some(n.to_uppercase())).unwrap();
    let want: Vec<String> = PLACEHOLDERS.iter().map(|p| p.to_uppercase()).collect();
    assert_eq!(got, want);
    for p in PLACEHOLDERS {
        assert!(uses(&argv, p));
    }
}

#[test]
fn closest_and_distance() {
    assert_eq!(edit_distance("", "abc"), 3);
    assert_eq!(edit_distance("kitten", "sitting"), 3);
    assert_eq!(
        closest("comand", AGENT_KEYS.iter().copied()),
        Some("command")
    );
    assert_eq!(closest("zzz", AGENT_KEYS.iter().copied()), None);
    assert_eq!(closest("x", ["y"]), Some("y"));
}

proptest! {
    /// Any text survives the file format: quoting and escapes round trip.
    #[test]
    fn strings_round_trip(objective in "\\PC{1,40}", task in ".{1,40}", arg in "[^{}]{0,20}",
                          value in ".{0,20}") {
        let objective = if objective.trim().is_empty() { format!("x{objective}") } else { objective };
        let task = if task.trim().is_empty() { format!("t{task}") } else { task };
        let plan = Plan {
            objective,
            strategy: Strategy::Adaptive,
            phases: vec![],
            policy: RunPolicy::default(),
            agents: vec![AgentSpec {
                name: "a".into(),
                role: "r".into(),
                task,
                command: vec!["x".into(), arg.replace('\0', "")],
                resume_command: None,
                depends_on: vec![],
                phase: None,
                stage: None,
                env: BTreeMap::from([("V".to_owned(), value.replace('\0', ""))]),
                workdir: None,
                retries: None,
                files: vec![],
                overlap: Overlap::Wait,
                land: None,
                lands: None,
            }],
        };
        prop_assert_eq!(plan.validate(), Ok(()));
        prop_assert_eq!(parse(&plan.to_toml()), Ok(plan));
    }

    /// Arbitrary text never panics the parser, and errors point inside the text.
    #[test]
    fn parse_never_panics(text in prop::string::string_regex("(objective|agent|\\[\\[agent\\]\\]|name|=|\"|\\{|\\}|\\[|\\]|,|\\n| |a|1|é|phase|stage|depends_on|command|task)*").unwrap()) {
        if let Err(e) = parse(&text) {
            let lines = text.split('\n').count();
            proptest::prop_assert!(e.line >= 1 && e.line <= lines, "{e} in {text:?}");
            proptest::prop_assert!(e.column >= 1);
        }
    }
}

/// A one-agent plan with `extra` lines in its [[agent]] (line 6 on), and `tail` after it.
fn with_agent(extra: &str, tail: &str) -> String {
    format!(
        "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\n{extra}\n{tail}"
    )
}

#[test]
fn files_overlap_and_landing_errors() {
    let long = "d/".repeat(600);
    let many: Vec<String> = (0..=crate::pathglob::MAX_FILES)
        .map(|k| format!("\"f{k}\""))
        .collect();
    let many = format!("files = [{}]", many.join(", "));
    let cases: Vec<(String, usize, usize, String)> = vec![
        (with_agent("files = \"src/api.rs\"", ""), 6, 9,
         "agent \"a\": files must be an array of strings, not a string; write files = [\"src/api.rs\", \"src/net/**\"]".into()),
        (with_agent("files = [\"ok\", 3]", ""), 6, 16,
         "agent \"a\": files[1] must be a string, not an integer".into()),
        (with_agent("files = [\"ok\", \"/etc/passwd\"]", ""), 6, 16,
         "agent \"a\": files[1] \"/etc/passwd\" is absolute; give it relative to the project root".into()),
        (with_agent("files = [\"src/../../x\"]", ""), 6, 10,
         "agent \"a\": files[0] \"src/../../x\" contains '..'; name paths inside the project, from its root".into()),
        (with_agent("files = [\"\"]", ""), 6, 10,
         "agent \"a\": files[0] \"\" is empty; name a file or a glob (`**` is the whole project)".into()),
        (with_agent("files = [\"src/{a,b}.rs\"]", ""), 6, 10,
         "agent \"a\": files[0] \"src/{a,b}.rs\" uses '{': character classes and braces are not supported; list each path, or use '*', '?' and '**'".into()),
        (with_agent("files = [\"src/a**\"]", ""), 6, 10,
         "agent \"a\": files[0] \"src/a**\" has \"a**\": '**' must be a whole segment (src/**/test.rs); use '*' inside a name".into()),
        (with_agent(&format!("files = [\"{long}\"]"), ""), 6, 10,
         format!("agent \"a\": files[0] \"{}…\" is 1200 bytes long; the limit is 1024", "d/".repeat(40).chars().take(79).collect::<String>())),
        (with_agent(&many, ""), 6, 9,
         format!("agent \"a\": files lists {} paths; the limit is {} (name directories or globs instead)", crate::pathglob::MAX_FILES + 1, crate::pathglob::MAX_FILES)),
        (with_agent("overlap = \"sometimes\"", ""), 6, 11,
         "agent \"a\": unknown overlap \"sometimes\"; expected wait (the default: it does not run at the same time as an agent whose files overlap its own) or allow".into()),
        (with_agent("overlap = true", ""), 6, 11,
         "agent \"a\": overlap must be a string, not a boolean".into()),
        (with_agent("land = []", ""), 6, 8,
         "agent \"a\": land is empty; leave it out if the agent's work needs no landing".into()),
        (with_agent("land = \"git merge\"", ""), 6, 8,
         "agent \"a\": land must be an array of strings, not a string; split the command line into its arguments: land = [\"claude\", \"-p\", \"{task}\"]".into()),
        (with_agent("land = [\"git\", \"{branch}\"]", ""), 6, 16,
         "agent \"a\": land[1]: unknown placeholder {branch}; known: {task}, {agent_id}, {session_id}, {claude_session_id}, {workdir}, {name}, {role}, {attempt}; write {{ and }} for literal braces".into()),
        (with_agent("land = [\"git\"]", "[[agent]]\nname = \"a.land\"\ntask = \"t\"\ncommand = [\"x\"]\n"), 6, 8,
         "agent \"a\" has land, so maos adds an agent named \"a.land\" to run it, but the [[agent]] at line 7 already has that name; rename it".into()),
        ("objective = \"o\"\nlanding = \"all\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\n".into(), 2, 11,
         "landing must be a table, not a string: write it as a [landing] section".into()),
        ("objective = \"o\"\n[landing]\nserialize = \"all\"\n".into(), 3, 1,
         "unknown key `serialize` in [landing]; expected one of: serialise; did you mean `serialise`?".into()),
        ("objective = \"o\"\n[landing]\nserialise = \"conflicting\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\n".into(), 3, 13,
         "unknown [landing] serialise \"conflicting\"; expected none, overlapping (two landings whose agents' files overlap never run at once) or all (no two landings at once)".into()),
        ("objective = \"o\"\n[landing]\nserialise = 1\n".into(), 3, 13,
         "[landing] serialise must be a string, not an integer".into()),
    ];
    assert_errors(
        cases
            .iter()
            .map(|(t, l, c, m)| (t.as_str(), *l, *c, m.clone())),
    );
}

#[test]
fn files_overlap_and_landing_read_and_write() {
    let text = r#"
objective = "o"
strategy = "adaptive"

[landing]
serialise = "all"

[[agent]]
name = "api"
task = "t"
command = ["x"]
files = ["src/api.rs", "./src/net/**"]
land = ["git", "-C", "{workdir}", "merge", "{name}"]

[[agent]]
name = "net"
task = "t"
command = ["x"]
files = ["src/net/tcp.rs"]

[[agent]]
name = "docs"
task = "t"
command = ["x"]
files = ["docs/**", "src/api.rs"]
overlap = "allow"

[[agent]]
name = "tests"
task = "t"
command = ["x"]
files = ["tests/**"]
"#;
    let plan = parse(text).unwrap();
    assert_eq!(plan.policy.landing, Serialise::All);
    assert_eq!(plan.agents[0].files, ["src/api.rs", "./src/net/**"]);
    assert_eq!(plan.agents[2].overlap, Overlap::Allow);
    assert_eq!(plan.agents[1].overlap, Overlap::Wait);
    assert_eq!(plan.agents[0].land.as_ref().map(Vec::len), Some(5));
    assert_eq!(parse(&plan.to_toml()), Ok(plan.clone()));
    let overlaps = plan.overlaps().unwrap();
    assert_eq!(
        overlaps,
        [
            FileOverlap {
                a: "api".into(),
                b: "net".into(),
                files: vec![("./src/net/**".into(), "src/net/tcp.rs".into())],
                allowed: false,
            },
            FileOverlap {
                a: "api".into(),
                b: "docs".into(),
                files: vec![("src/api.rs".into(), "src/api.rs".into())],
                allowed: true,
            },
        ]
    );
    // The scheduler's relation: api and net apart; docs allows; tests overlaps nobody.
    let specs: Vec<Option<&AgentSpec>> = plan.agents.iter().map(Some).collect();
    assert_eq!(
        compare(&specs).unwrap().apart(&specs, plan.policy.landing),
        [vec![1], vec![0], vec![], vec![]]
    );
    // Landing agents: each carries its agent's files and depends on it.
    let land = plan.agents[0].landing().unwrap();
    assert_eq!(land.name, "api.land");
    assert_eq!(land.depends_on, ["api"]);
    assert_eq!(land.lands.as_deref(), Some("api"));
    assert_eq!(land.overlap, Overlap::Allow);
    assert_eq!(plan.agents[1].landing(), None);
    let mut other = plan.agents[3].clone();
    other.land = Some(vec!["true".into()]);
    let other = other.landing().unwrap();
    // A landing and a work agent are never apart; two landings are under `all`, and under
    // `overlapping` only when their agents' files overlap.
    let with = vec![Some(&plan.agents[1]), Some(&land), Some(&other)];
    assert_eq!(
        compare(&with).unwrap().apart(&with, Serialise::All),
        [vec![], vec![2], vec![1]]
    );
    let none: [Vec<usize>; 3] = Default::default();
    assert_eq!(
        compare(&with).unwrap().apart(&with, Serialise::Overlapping),
        none
    );
    assert_eq!(compare(&with).unwrap().apart(&with, Serialise::None), none);
    let mut net_land = plan.agents[1].clone();
    net_land.land = Some(vec!["true".into()]);
    let net_land = net_land.landing().unwrap();
    let with = vec![Some(&land), Some(&net_land), None];
    assert_eq!(
        compare(&with).unwrap().apart(&with, Serialise::Overlapping),
        [vec![1], vec![0], vec![]]
    );
}

#[test]
fn a_plan_declares_a_bounded_number_of_files_in_all() {
    use crate::pathglob::{MAX_FILES, MAX_PLAN_FILES};
    let mut text = "objective = \"o\"\n".to_string();
    let agents = MAX_PLAN_FILES / MAX_FILES + 1;
    for n in 0..agents {
        let files: Vec<String> = (0..MAX_FILES).map(|k| format!("\"a{n}/f{k}\"")).collect();
        text += &format!(
            "[[agent]]\nname = \"a{n}\"\ntask = \"t\"\ncommand = [\"x\"]\nfiles = [{}]\n",
            files.join(", ")
        );
    }
    let e = parse(&text).unwrap_err();
    assert_eq!(
        e.message,
        format!(
            "the plan declares more than {MAX_PLAN_FILES} files in all (agent \"a{}\" brings it \
             to {}); name directories or globs instead",
            agents - 1,
            agents * MAX_FILES
        )
    );
    assert_eq!(e.line, 5 * agents + 1, "at the last agent's files");
}
