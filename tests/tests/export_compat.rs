//! Compatibility with what the first release wrote: `maos export` files written by the 0.1
//! binaries (`tests/fixtures/export/`, see its README) are read, imported into a fresh daemon
//! and exported again. The file that comes back is the fixture, byte for byte, except for what
//! an import changes by design:
//! - `exported_at`: the time of the new export;
//! - `session.active`: an imported session never becomes the project's active one;
//! - one more event at the end of the timeline, `session_imported`, recording the import.
//!
//! (An import also pauses a running session and drops agents' processes; the fixtures hold a
//! paused and a completed session, whose agents have no process, so neither applies.) The
//! `--json` shapes of `session show`, `ps` and `brief` of the imported session keep every key
//! they had (`release-0.1-shapes.json`); keys added since are allowed.

use std::collections::BTreeSet;
use std::path::PathBuf;

use maos_proto::export::SessionExport;
use maos_tests::Env;
use serde_json::{Value, json};

const FIXTURES: [&str; 2] = ["release-0.1-manual.json", "release-0.1-plan.json"];

fn fixture_path(name: &str) -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join("export")
        .join(name)
}

fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What `maos export -o` writes for `file`.
fn written(file: &SessionExport) -> String {
    serde_json::to_string_pretty(file).expect("an export serializes")
}

/// Every key path of `v`, array elements as `[]` (so `a.b[].c`).
fn key_paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(path.clone());
                key_paths(child, &path, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                key_paths(item, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

fn shape(v: &Value) -> Vec<String> {
    let mut out = BTreeSet::new();
    key_paths(v, "", &mut out);
    out.into_iter().collect()
}

/// The types read and write a release file unchanged: every field, its order, what is left out.
#[test]
fn release_exports_read_and_write_back_byte_for_byte() {
    for name in FIXTURES {
        let text = read(&fixture_path(name));
        let file: SessionExport =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name} no longer reads: {e}"));
        assert_eq!(written(&file), text, "{name} writes back differently");
    }
}

#[test]
fn a_release_export_imported_and_exported_again_is_the_same_file() {
    let env = Env::new();
    let want_shapes: Value =
        serde_json::from_str(&read(&fixture_path("release-0.1-shapes.json"))).expect("shapes");
    let mut shapes = serde_json::Map::new();
    for name in FIXTURES {
        let path = fixture_path(name);
        let text = read(&path);
        let original: SessionExport = serde_json::from_str(&text).expect("fixture");
        let sid = original.session.id.to_string();
        let project = env.make_project(name.trim_end_matches(".json"));
        let imported = env.maos_json_in(&project, &["import", path.to_str().expect("utf-8")]);
        assert_eq!(imported["id"], sid.as_str());

        let out = env.root().join(format!("again-{name}"));
        env.maos_json_in(
            &project,
            &["export", &sid, "-o", out.to_str().expect("utf-8")],
        );
        let again_text = read(&out);
        let mut again: SessionExport = serde_json::from_str(&again_text).expect("export");

        // What the import changes by design, checked, then put back.
        assert!(again.exported_at > original.exported_at, "{name}");
        assert!(original.session.active, "{name}: exported while active");
        // A live session becomes the active one of the fresh project, with its event last.
        let live = !again.session.state.is_terminal();
        assert_eq!(again.session.active, live, "{name}: activated when live");
        if live {
            let activated = again.events.pop().expect("events");
            assert_eq!(activated.kind, "session_activated", "{name}");
        }
        let last = again.events.pop().expect("events");
        assert_eq!(
            (
                last.kind.as_str(),
                last.session_id.as_ref(),
                last.agent_id.as_ref()
            ),
            ("session_imported", Some(&original.session.id), None),
            "{name}"
        );
        assert_eq!(
            last.data,
            json!({"path": path, "events": original.events.len(), "format_version": 1}),
            "{name}"
        );
        assert_eq!(
            last.seq,
            original.events.last().map_or(0, |e| e.seq) + 1,
            "{name}: a fresh project numbers the imported events as the release did"
        );
        again.exported_at = original.exported_at;
        again.session.active = true;
        assert_eq!(
            written(&again),
            text,
            "{name}: the export came back changed"
        );

        // The same, without the types: the JSON trees are equal.
        let mut raw: Value = serde_json::from_str(&again_text).expect("json");
        raw["exported_at"] = json!(original.exported_at);
        raw["session"]["active"] = json!(true);
        raw["events"].as_array_mut().map(Vec::pop);
        if live {
            raw["events"].as_array_mut().map(Vec::pop);
        }
        let fixture: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(raw, fixture, "{name}");

        // The `--json` shapes of the imported session.
        let show = env.maos_json_in(&project, &["session", "show", &sid]);
        let ps = env.maos_json_in(&project, &["ps", "--all"]);
        let ps = ps
            .as_array()
            .and_then(|all| all.iter().find(|s| s["id"] == sid.as_str()))
            .cloned()
            .unwrap_or_else(|| panic!("{name}: not in ps --all: {ps}"));
        let brief = env.maos_json_in(&project, &["brief", &sid]);
        shapes.insert(
            name.to_string(),
            json!({"session show": shape(&show), "ps": shape(&ps), "brief": shape(&brief)}),
        );
    }
    // Every key the release had is still there (keys are only ever added).
    let shapes = Value::Object(shapes);
    let lost: Vec<String> = FIXTURES
        .iter()
        .flat_map(|name| {
            ["session show", "ps", "brief"].map(|view| (name, view, &shapes[name][view]))
        })
        .flat_map(|(name, view, now)| {
            want_shapes[name][view]
                .as_array()
                .into_iter()
                .flatten()
                .filter(move |k| !now.as_array().is_some_and(|n| n.contains(k)))
                .map(move |k| format!("{name} {view}: {k}"))
        })
        .collect();
    assert!(
        lost.is_empty(),
        "the --json shapes lost keys: {lost:?}; now:\n{}",
        serde_json::to_string_pretty(&shapes).unwrap_or_default()
    );
}
