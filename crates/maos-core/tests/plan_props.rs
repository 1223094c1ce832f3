//! Hostile plan files: whatever text `maos run` is given, the parser never panics, and every
//! refusal points at a real place in the file (line and column inside the text) with a
//! one-line message. A plan it accepts is valid and survives `to_toml` unchanged.

use maos_core::plan::{PlanError, parse};
use proptest::prelude::*;

/// The example plan of `plan/mod.rs`'s module documentation (every feature of the format).
fn doc_example() -> String {
    let src = include_str!("../src/plan/mod.rs");
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
    assert!(
        out.contains("[[agent]]"),
        "no example plan found in plan/mod.rs"
    );
    out
}

/// A few more valid plans, for the other strategies.
fn seeds() -> Vec<String> {
    vec![
        doc_example(),
        "objective = \"o\"\nstrategy = \"pipeline\"\n\n[[agent]]\nname = \"a\"\ntask = \"t\"\n\
         command = [\"x\", \"{task}\"]\nstage = 1\n\n[[agent]]\nname = \"b\"\ntask = \"t\"\n\
         command = [\"y\"]\nstage = 2\ndepends_on = [\"a\"]\n"
            .into(),
        "objective = \"o\"\nstrategy = \"sequential\"\nphases = [\"one\", \"two\"]\n\
         [failure]\npolicy = \"continue\"\nretries = 3\nmax_parallel = 1\n\
         [[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\nphase = 1\n\
         [[agent]]\nname = \"b\"\ntask = \"t\"\ncommand = [\"x\"]\nphase = \"two\"\n\
         depends_on = [\"a\"]\nenv = { K = \"v\" }\n"
            .into(),
    ]
}

/// One edit of a plan's text.
#[derive(Clone, Debug)]
enum Edit {
    /// Delete `len` characters at a position (a fraction of the text).
    Delete(f64, usize),
    /// Insert text at a position.
    Insert(f64, String),
    /// Replace one line by another line of the text.
    CopyLine(f64, f64),
    /// Swap two characters.
    Swap(f64, f64),
}

fn edit() -> impl Strategy<Value = Edit> {
    let at = 0.0..1.0f64;
    let snippet = prop_oneof![
        Just("\"".to_string()),
        Just("[".to_string()),
        Just("]".to_string()),
        Just("{".to_string()),
        Just("}".to_string()),
        Just("\n".to_string()),
        Just("\r\n".to_string()),
        Just("=".to_string()),
        Just(",".to_string()),
        Just("#".to_string()),
        Just("\\".to_string()),
        Just("\\u".to_string()),
        Just("'''".to_string()),
        Just("\"\"\"".to_string()),
        Just("[[agent]]\n".to_string()),
        Just("[failure]\n".to_string()),
        Just("depends_on = [\"qa\"]\n".to_string()),
        Just("phase = 0\n".to_string()),
        Just("phase = 99999999999\n".to_string()),
        Just("stage = -1\n".to_string()),
        Just("retries = 4294967296\n".to_string()),
        Just("grace_ms = 18446744073709551616\n".to_string()),
        Just("1e400".to_string()),
        Just("\u{0}".to_string()),
        Just("é✓\u{200b}".to_string()),
        Just("{unknown}".to_string()),
        Just("{{".to_string()),
        "\\PC{0,8}",
        "(?s).{0,8}",
    ];
    prop_oneof![
        (at.clone(), 0usize..40).prop_map(|(a, n)| Edit::Delete(a, n)),
        (at.clone(), snippet).prop_map(|(a, s)| Edit::Insert(a, s)),
        (at.clone(), at.clone()).prop_map(|(a, b)| Edit::CopyLine(a, b)),
        (at.clone(), at).prop_map(|(a, b)| Edit::Swap(a, b)),
    ]
}

fn apply(text: &str, e: &Edit) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    let pos = |f: f64, n: usize| ((f * n as f64) as usize).min(n);
    match e {
        Edit::Delete(a, len) => {
            let i = pos(*a, chars.len());
            let j = (i + len).min(chars.len());
            chars.drain(i..j);
        }
        Edit::Insert(a, s) => {
            let i = pos(*a, chars.len());
            chars.splice(i..i, s.chars());
        }
        Edit::CopyLine(a, b) => {
            let mut lines: Vec<&str> = text.split('\n').collect();
            let n = lines.len();
            let (i, j) = (pos(*a, n - 1), pos(*b, n - 1));
            lines[i] = lines[j];
            return lines.join("\n");
        }
        Edit::Swap(a, b) => {
            if !chars.is_empty() {
                let n = chars.len() - 1;
                chars.swap(pos(*a, n), pos(*b, n));
            }
        }
    }
    chars.into_iter().collect()
}

/// A refusal points inside the text and says what is wrong in one line.
fn check_error(text: &str, e: &PlanError) -> Result<(), TestCaseError> {
    let lines: Vec<&str> = text.split('\n').collect();
    prop_assert!(
        e.line >= 1 && e.line <= lines.len(),
        "line {} of {}: {e}",
        e.line,
        lines.len()
    );
    let width = lines[e.line - 1].chars().count();
    prop_assert!(
        e.column >= 1 && e.column <= width + 1,
        "column {} of a {width}-character line: {e}",
        e.column
    );
    prop_assert!(!e.message.trim().is_empty(), "empty message at {e}");
    let shown = e.to_string();
    prop_assert!(
        shown.starts_with(&format!("line {}, column {}: ", e.line, e.column)),
        "{shown}"
    );
    prop_assert!(
        !shown.contains('\n') && !shown.contains('\r'),
        "not one line: {shown:?}"
    );
    Ok(())
}

/// An accepted plan is valid, and its `to_toml` parses back to the same plan.
fn check_plan(text: &str) -> Result<(), TestCaseError> {
    match parse(text) {
        Ok(plan) => {
            prop_assert_eq!(plan.validate(), Ok(()));
            let again = plan.to_toml();
            let back = parse(&again).map_err(|e| {
                TestCaseError::fail(format!("to_toml gave a refused plan ({e}):\n{again}"))
            })?;
            prop_assert_eq!(back, plan);
        }
        Err(e) => check_error(text, &e)?,
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Any text at all.
    #[test]
    fn arbitrary_text(text in "(?s).{0,200}") {
        check_plan(&text)?;
    }

    /// Text made of the format's own pieces, so that the parser gets far.
    #[test]
    fn tokens(text in prop::string::string_regex(
        "(objective|strategy|phases|\\[failure\\]|policy|retries|max_parallel|grace_ms|\
         \\[\\[agent\\]\\]|name|role|task|command|resume_command|depends_on|phase|stage|workdir|\
         env|\"adaptive\"|\"pipeline\"|\"sequential\"|\"a\"|\"\\{task\\}\"|= |\"|\\{|\\}|\\[|\\]|, |\
         \\n|\\r\\n| |0|1|-1|99999999999|é|#)*").unwrap()) {
        check_plan(&text)?;
    }

    /// Valid plans with a few random edits: accepted (and then sound) or refused at a real
    /// place, never a panic.
    #[test]
    fn mutated_plans(seed in 0usize..3, edits in prop::collection::vec(edit(), 1..5)) {
        let mut text = seeds()[seed].clone();
        for e in &edits {
            text = apply(&text, e);
        }
        check_plan(&text)?;
    }
}

#[test]
fn seeds_are_valid() {
    for s in seeds() {
        let plan = parse(&s).unwrap_or_else(|e| panic!("{e}\n{s}"));
        assert_eq!(parse(&plan.to_toml()), Ok(plan));
    }
}

#[test]
fn deep_nesting_and_huge_input_are_refused_in_one_line() {
    // TOML arrays and inline tables nested far past anything a plan needs.
    for (open, close) in [("[", "]"), ("{a=", "}")] {
        let text = format!(
            "objective = {}1{}\n",
            open.repeat(10_000),
            close.repeat(10_000)
        );
        let e = parse(&text).unwrap_err();
        assert_eq!(e.line, 1, "{e}");
        assert!(!e.to_string().contains('\n'), "{e}");
    }
    // A very long objective is refused at its value (the cap is MAX_TEXT).
    let text = format!(
        "objective = \"{}\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\n",
        "x".repeat(1 << 20)
    );
    let e = parse(&text).unwrap_err();
    assert_eq!((e.line, e.column), (1, 13), "{e}");
    assert!(e.message.contains("objective"), "{e}");
}
