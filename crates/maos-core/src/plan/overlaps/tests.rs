//! Comparing declared files once: within its budget it says what comparing every two patterns
//! by brute force says; a plan costs what the session made from it costs; beyond the budget a
//! plan (or an imported session) is refused in one line, and the scheduler assumes overlap.

use proptest::prelude::*;

use super::*;
use crate::pathglob::{MAX_STARS, MAX_WORK};
use crate::pathglob::{paths, seg};

fn agent(name: &str, files: &[String]) -> AgentSpec {
    AgentSpec {
        name: name.into(),
        role: name.into(),
        task: "t".into(),
        command: vec!["true".into()],
        resume_command: None,
        depends_on: Vec::new(),
        phase: None,
        stage: None,
        env: Default::default(),
        workdir: None,
        retries: None,
        files: files.to_vec(),
        overlap: Overlap::Wait,
        land: None,
        lands: None,
    }
}

/// A plan's agents, each followed by its landing agent when it has `land`: the agents of the
/// session made from the plan, in the daemon's order.
fn session_of(agents: &[AgentSpec]) -> Vec<AgentSpec> {
    agents
        .iter()
        .flat_map(|a| std::iter::once(a.clone()).chain(a.landing()))
        .collect()
}

/// A plan of these agents.
fn plan_of(agents: &[AgentSpec]) -> Plan {
    Plan {
        objective: "o".into(),
        strategy: crate::Strategy::Parallel,
        phases: Vec::new(),
        policy: Default::default(),
        agents: agents.to_vec(),
    }
}

fn some(agents: &[AgentSpec]) -> Vec<Option<&AgentSpec>> {
    agents.iter().map(Some).collect()
}

/// Agents with `files` patterns each, within every bound of one pattern, that cost ~46,000
/// steps a pair to compare: a plan of 8 agents of 64 (within a plan file's bounds) has 114,688
/// pairs, ~5 billion steps (minutes of the project actor's time).
fn costly(agents: usize, files: usize) -> Vec<AgentSpec> {
    (0..agents)
        .map(|i| {
            let files: Vec<String> = (0..files)
                .map(|k| {
                    format!(
                        "*{}{}{i}x{k:02}",
                        "a*".repeat(MAX_STARS - 1),
                        "a".repeat(196)
                    )
                })
                .collect();
            agent(&format!("a{i}"), &files)
        })
        .collect()
}

#[test]
fn a_plan_whose_files_cost_too_much_to_compare_is_refused_in_one_line() {
    let plan = costly(8, 64);
    let (first, first_cost) = compare_within(&some(&plan[..1]), u64::MAX).unwrap();
    assert!(
        first.meets.is_empty() && first_cost == 0,
        "one agent: nothing to compare"
    );
    // An import of such a session is refused in one line (and `maos run --check`, which asks
    // `Plan::overlaps`, the same: both are `compare`); each pattern is within its bounds.
    let e = check_declared(&some(&plan)).unwrap_err();
    assert_eq!(
        e,
        format!(
            "comparing every two agents' declared files would take more than {MAX_WORK} steps \
             (the limit; agent \"a1\"'s files bring it over): declare fewer patterns, or \
             patterns with fewer wildcards ('*', '?', '**')"
        ),
        "the second agent's comparisons run over"
    );
    assert_eq!(
        plan_of(&plan).validate(),
        Ok(()),
        "within every bound of one pattern"
    );
    // Given such agents (a session older than the budget), the scheduler keeps every two of
    // them apart instead of comparing: they run one after another.
    let apart = FilePairs::assume_overlap(&some(&plan)).apart(&some(&plan), Serialise::None);
    for (i, js) in apart.iter().enumerate() {
        let others: Vec<usize> = (0..plan.len()).filter(|&j| j != i).collect();
        assert_eq!(js, &others);
    }
    // Two such agents of 8 patterns fit, and are compared exactly (they do not overlap).
    let two = costly(2, 8);
    let (pairs, cost) = compare_within(&some(&two), MAX_WORK).unwrap();
    assert!((2_000_000..MAX_WORK).contains(&cost), "{cost}");
    assert!(!pairs.meet(0, 1));
}

/// The plan the review found (512 patterns of `*a*a…`, 1,023 bytes each: about 10^11 steps to
/// compare every pair) no longer passes the check of one pattern.
#[test]
fn the_largest_patterns_of_wildcards_are_refused_by_the_bounds_of_a_name() {
    let pattern = format!("{}*", "*a".repeat(511));
    let files = format!("[{}]", vec![format!("\"{pattern}\""); 64].join(", "));
    let mut text = "objective = \"o\"\n".to_string();
    for i in 0..8 {
        text += &format!(
            "[[agent]]\nname = \"a{i}\"\ntask = \"t\"\ncommand = [\"x\"]\nfiles = {files}\n"
        );
    }
    let e = crate::plan::parse(&text).unwrap_err();
    assert!(
        e.message.starts_with("agent \"a0\": files[0] \"*a*a*a")
            && e.message.ends_with(
                "…\" has 512 '*' in one name (\"*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*…\"); \
                 the limit is 8"
            ),
        "{}",
        e.message
    );
    assert_eq!(
        (e.line, e.column),
        (6, 10),
        "at the first agent's first file"
    );
}

#[test]
fn a_plan_costs_what_its_session_costs() {
    let mut plan = costly(2, 4);
    plan.push(agent("c", &["src/**".to_string(), "docs/*.md".to_string()]));
    plan.push(agent("d", &["**/*.md".to_string()]));
    for a in &mut plan {
        a.land = Some(vec!["true".into()]);
    }
    plan[1].land = None;
    let session = session_of(&plan);
    assert_eq!(session.len(), 7);
    let (p, plan_cost) = compare_within(&some(&plan), u64::MAX).unwrap();
    let mut specs = some(&session);
    specs.push(None);
    let (s, session_cost) = compare_within(&specs, u64::MAX).unwrap();
    assert!(plan_cost > 500_000, "{plan_cost}");
    assert_eq!(
        session_cost, plan_cost,
        "landing agents are compared as their agents"
    );
    // The same pairs, at the session's indices (a0 0, its landing 1, a1 2, c 3 and its landing
    // 4, d 5 and its landing 6, an unmanaged agent 7): c and d overlap (`src/x.md`,
    // `docs/x.md`), and so do their landings, through them.
    assert_eq!(p.report(&some(&plan)), s.report(&specs));
    let both = [("src/**", "**/*.md"), ("docs/*.md", "**/*.md")];
    assert_eq!(s.files(&specs, 3, 5), both);
    assert_eq!(s.files(&specs, 6, 4), both.map(|(x, y)| (y, x)));
    assert!(s.meet(4, 6) && s.meet(3, 4) && !s.meet(0, 3) && !s.meet(0, 7));
    assert_eq!(
        s.apart(&specs, Serialise::Overlapping)[4],
        [6],
        "the landings of c and d"
    );
    assert_eq!(s.apart(&specs, Serialise::None)[3], [5]);
    // A budget of exactly the plan's cost is enough for both.
    assert!(compare_within(&some(&plan), plan_cost).is_ok());
    assert!(compare_within(&specs, plan_cost).is_ok());
    assert!(compare_within(&specs, plan_cost - 1).is_err());
}

/// An agent and its own landing agent are compared as one (the landing's owner is the agent,
/// whose very files it carries): each of their patterns that parses overlaps itself, one that
/// does not is left out, as from every comparison; they are never kept apart.
#[test]
fn an_agent_and_its_landing_share_every_pattern_that_parses() {
    let mut a = agent("a", &["src/**".into(), String::new(), "docs/*.md".into()]);
    a.land = Some(vec!["true".into()]);
    let session = session_of(&[a]);
    let specs = some(&session);
    let pairs = compare(&specs).unwrap();
    let own = [("src/**", "src/**"), ("docs/*.md", "docs/*.md")];
    assert_eq!(pairs.files(&specs, 0, 1), own);
    assert_eq!(pairs.files(&specs, 1, 0), own);
    assert_eq!(pairs.files(&specs, 0, 0), own, "an agent with itself");
    assert!(pairs.meet(0, 1) && pairs.meet(1, 0));
    for landing in [Serialise::None, Serialise::Overlapping, Serialise::All] {
        let apart = pairs.apart(&specs, landing);
        assert!(
            apart.len() == 2 && apart.iter().all(Vec::is_empty),
            "{apart:?}"
        );
    }
}

/// The relation the scheduler kept before the comparison was made once (every two agents
/// compared as they come), with `meet` for whether two agents' files overlap.
fn apart_by_pairs(
    agents: &[Option<&AgentSpec>],
    landing: Serialise,
    meet: impl Fn(usize, usize) -> bool,
) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new(); agents.len()];
    let wants = |a: &AgentSpec| match a.lands {
        Some(_) => landing != Serialise::None,
        None => !a.files.is_empty() && a.overlap == Overlap::Wait,
    };
    for i in 0..agents.len() {
        for j in i + 1..agents.len() {
            let (Some(Some(a)), Some(Some(b))) = (agents.get(i), agents.get(j)) else {
                continue;
            };
            if !wants(a) || !wants(b) {
                continue;
            }
            let keep = match (a.lands.is_some(), b.lands.is_some()) {
                (false, false) => meet(i, j),
                (true, true) => landing == Serialise::All || meet(i, j),
                _ => false,
            };
            if keep {
                out[i].push(j);
                out[j].push(i);
            }
        }
    }
    out
}

/// An agent of a generated plan: 0 to 3 patterns of 1 or 2 segments, `overlap`, `land`.
fn generated() -> impl Strategy<Value = (Vec<String>, bool, bool)> {
    (
        prop::collection::vec(
            prop::collection::vec(seg(), 1..=2).prop_map(|s| s.join("/")),
            0..=3,
        ),
        any::<bool>(),
        any::<bool>(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Within the budget, the one comparison says what brute force says of every two agents'
    /// patterns (a path covered by both), and the report and the kept-apart relation derived
    /// from it are those of comparing every pair as before.
    #[test]
    fn one_comparison_says_what_every_pair_says(
        made in prop::collection::vec(generated(), 1..=3),
    ) {
        let plan: Vec<AgentSpec> = made
            .iter()
            .enumerate()
            .map(|(i, (files, allow, land))| {
                let mut a = agent(&format!("a{i}"), files);
                if *allow {
                    a.overlap = Overlap::Allow;
                }
                if *land {
                    a.land = Some(vec!["true".into()]);
                }
                a
            })
            .collect();
        let session = session_of(&plan);
        let specs = some(&session);
        let pairs = compare(&specs).unwrap();
        let all = paths();
        let covered = |s: &str| -> Vec<bool> {
            let p = crate::pathglob::parse(s).unwrap();
            all.iter().map(|z| p.covers(z)).collect()
        };
        let cover: Vec<Vec<Vec<bool>>> =
            session.iter().map(|a| a.files.iter().map(|f| covered(f)).collect()).collect();
        let brute = |i: usize, j: usize| -> Vec<(&str, &str)> {
            let mut out = Vec::new();
            for (k, s) in session[i].files.iter().enumerate() {
                for (l, t) in session[j].files.iter().enumerate() {
                    if cover[i][k].iter().zip(&cover[j][l]).any(|(x, y)| *x && *y) {
                        out.push((s.as_str(), t.as_str()));
                    }
                }
            }
            out
        };
        // An agent and its own landing agent share their files: never compared, never apart.
        let own = |i: usize, j: usize| {
            session[i].lands.as_deref() == Some(session[j].name.as_str())
                || session[j].lands.as_deref() == Some(session[i].name.as_str())
        };
        for i in 0..session.len() {
            for j in 0..session.len() {
                if i == j || own(i, j) {
                    continue;
                }
                let b = brute(i, j);
                prop_assert_eq!(pairs.files(&specs, i, j), b.clone(), "{} / {}", i, j);
                prop_assert_eq!(pairs.meet(i, j), !b.is_empty());
            }
        }
        for landing in [Serialise::None, Serialise::Overlapping, Serialise::All] {
            prop_assert_eq!(
                pairs.apart(&specs, landing),
                apart_by_pairs(&specs, landing, |i, j| !brute(i, j).is_empty())
            );
        }
        let mut report = Vec::new();
        for (i, a) in plan.iter().enumerate() {
            for b in plan.iter().skip(i + 1) {
                let files = brute(
                    session.iter().position(|x| x.name == a.name).unwrap(),
                    session.iter().position(|x| x.name == b.name).unwrap(),
                );
                if !files.is_empty() {
                    report.push(FileOverlap {
                        a: a.name.clone(),
                        b: b.name.clone(),
                        files: files.iter().map(|(s, t)| (s.to_string(), t.to_string())).collect(),
                        allowed: a.overlap == Overlap::Allow || b.overlap == Overlap::Allow,
                    });
                }
            }
        }
        prop_assert_eq!(pairs.report(&specs), report.clone());
        prop_assert_eq!(plan_of(&plan).overlaps(), Ok(report));
    }
}

/// A session made from a plan whose agents all `land` carries each agent's files twice (its
/// landing agent's are a copy): its import counts them once, as the plan check did.
#[test]
fn a_landing_agents_copy_of_its_files_counts_once() {
    let agents: Vec<AgentSpec> = (0..5)
        .map(|i| {
            let files: Vec<String> = (0..crate::pathglob::MAX_FILES)
                .map(|k| format!("src/a{i}/f{k}.rs"))
                .collect();
            AgentSpec {
                land: Some(vec!["true".into()]),
                ..agent(&format!("a{i}"), &files)
            }
        })
        .collect();
    assert_eq!(plan_of(&agents).validate(), Ok(()), "320 files in the plan");
    let session = session_of(&agents);
    assert_eq!(session.len(), 10, "each agent and its landing agent");
    assert!(check_declared(&some(&session)).is_ok());
    // A landing agent whose files are not its agent's copy counts on its own: with three more
    // agents of 64 files the session holds exactly 512 (accepted), and 576 once one landing
    // agent's files are its own (refused).
    let more: Vec<AgentSpec> = (0..3)
        .map(|n| {
            let files: Vec<String> = (0..crate::pathglob::MAX_FILES)
                .map(|k| format!("lib/b{n}/f{k}.rs"))
                .collect();
            agent(&format!("b{n}"), &files)
        })
        .collect();
    let mut full = session.clone();
    full.extend(more);
    assert!(
        check_declared(&some(&full)).is_ok(),
        "320 + 192 = 512 files"
    );
    let mut forged = full.clone();
    forged[1].files = (0..crate::pathglob::MAX_FILES)
        .map(|k| format!("other/f{k}.rs"))
        .collect();
    assert!(check_declared(&some(&forged)).unwrap_err().contains("512"));
}
