//! Request parsing as the daemon does it: a frame body parsed as a `ClientMsg` (and the
//! fallback that looks for the id of a bad frame). Never a panic; a refused frame's error is
//! one line; an accepted request serializes and parses back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use maos_proto::{ClientMsg, Request};

fuzz_target!(|data: &[u8]| {
    let mut frame = (data.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(data);
    match maos_proto::read_frame::<_, ClientMsg>(&mut &frame[..]) {
        Ok(ClientMsg::Request { body, .. }) => {
            let text = serde_json::to_string(&body).expect("a request serializes");
            let back: Request = serde_json::from_str(&text).expect("a request parses back");
            assert_eq!(
                serde_json::to_value(&back).expect("to_value"),
                serde_json::to_value(&body).expect("to_value")
            );
        }
        Ok(_) => {}
        Err(e) => {
            let msg = e.to_string();
            assert!(!msg.contains('\n') && !msg.contains('\r'), "{msg:?}");
            let _ = serde_json::from_slice::<serde_json::Value>(data)
                .ok()
                .and_then(|v| v.get("id").and_then(serde_json::Value::as_u64));
        }
    }
    let _ = serde_json::from_slice::<Request>(data);
});
