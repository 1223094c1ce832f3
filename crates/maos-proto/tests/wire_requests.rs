//! The wire shape of every request, pinned: each object of `fixtures/requests.json` (as an
//! older client writes it: defaults left out, and a hook call carrying the fields only the
//! daemon may set, which it drops) parses, and writes back as the JSON recorded beside it
//! (a hook call writes none of those fields: they are the daemon's `Hook`'s, issue 33 §3).
//! Written before the request types were reshaped (issue 33 §3), so that a change of the Rust
//! types that changed the JSON fails here. `MAOS_BLESS=1` rewrites the recorded answers.

use maos_proto::Request;
use serde_json::Value;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/requests.json");

#[test]
fn every_request_keeps_its_wire_shape() {
    let text = std::fs::read_to_string(FIXTURE).unwrap();
    let cases: Vec<[Value; 2]> = serde_json::from_str(&text).unwrap();
    let mut blessed = Vec::new();
    let mut kinds = std::collections::BTreeSet::new();
    for [input, recorded] in cases {
        let parsed: Request = serde_json::from_value(input.clone())
            .unwrap_or_else(|e| panic!("{input} no longer parses: {e}"));
        let written = serde_json::to_value(&parsed).unwrap();
        kinds.insert(input["request"].as_str().unwrap().to_string());
        if std::env::var_os("MAOS_BLESS").is_some() {
            blessed.push([input, written]);
            continue;
        }
        assert_eq!(written, recorded, "{input} now writes differently");
        // What a daemon writes, a daemon reads back the same.
        let again: Request = serde_json::from_value(recorded.clone()).unwrap();
        assert_eq!(serde_json::to_value(&again).unwrap(), recorded);
    }
    if std::env::var_os("MAOS_BLESS").is_some() {
        let out = serde_json::to_string_pretty(&blessed).unwrap();
        std::fs::write(FIXTURE, out + "\n").unwrap();
    }
    // Every request kind is pinned: a new one gets its line in the fixture.
    let all = request_kinds();
    assert!(
        all.len() >= 48,
        "the request kinds, as serde names them: {all:?}"
    );
    let missing: Vec<_> = all.difference(&kinds).collect();
    assert!(
        missing.is_empty(),
        "request kinds with no line in the fixture: {missing:?}"
    );
}

/// Every request kind the wire knows, as serde names them: the list its refusal of an unknown
/// kind gives (so that a new request needs no count bumped here, only its fixture line).
fn request_kinds() -> std::collections::BTreeSet<String> {
    let unknown = serde_json::json!({"request": "no_such_request"});
    let e = serde_json::from_value::<Request>(unknown)
        .expect_err("an unknown request kind is refused")
        .to_string();
    let (_, list) = e
        .split_once("expected one of ")
        .unwrap_or_else(|| panic!("serde's refusal no longer lists the kinds: {e}"));
    list.split(", ")
        .map(|k| k.trim().trim_matches('`').to_string())
        .collect()
}
