//! Import files as the daemon reads them (`maos import`): maos-session exports and
//! orchestrator-session JSON. Never a panic; a refusal is one line; an accepted file's
//! session belongs to it (its agents carry its id) and serializes back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use maos_core::{AgentId, SessionId};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut n = 0u128;
    let sid = SessionId::parse("sess_00000000000000000000000000000001").expect("a valid id");
    let parsed = maos_proto::export::parse(text, chrono::Utc::now(), sid, || {
        n += 1;
        AgentId::parse(&format!("agt_{:032x}", 1000 + n)).expect("a valid id")
    });
    match parsed {
        Ok(e) => {
            assert!(e.session.agents.iter().all(|a| a.session_id == e.session.id));
            serde_json::to_string(&e).expect("an import serializes");
        }
        Err(err) => {
            let msg = err.to_string();
            assert!(!msg.contains('\n') && !msg.contains('\r'), "{msg:?}");
        }
    }
    let _ = maos_proto::export::ids_of(text);
});
