//! Frame decoding: any bytes as a stream of frames. Never a panic; a length over the cap is
//! refused before its body is read; every error is one line; a decoded frame round-trips.
#![no_main]

use libfuzzer_sys::fuzz_target;
use maos_proto::frame::{encode, read_frame_bytes};
use maos_proto::{FrameError, MAX_FRAME_LEN};

/// Whether `v` holds a number serde_json keeps as an `f64` (a written `1.5`, or an integer
/// too large for 64 bits).
fn has_float(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Number(n) => n.is_f64(),
        serde_json::Value::Array(a) => a.iter().any(has_float),
        serde_json::Value::Object(o) => o.values().any(has_float),
        _ => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let mut r = std::io::Cursor::new(data);
    loop {
        let at = r.position();
        match read_frame_bytes(&mut r) {
            Ok(body) => {
                assert!(body.len() <= MAX_FRAME_LEN);
                assert_eq!(r.position(), at + 4 + body.len() as u64);
                if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&body) {
                    let f = encode(&v).expect("a decoded value fits again");
                    let back: serde_json::Value =
                        maos_proto::read_frame(&mut &f[..]).expect("own frame reads back");
                    // Floats may differ in their last digit; everything else is exact.
                    if !has_float(&v) {
                        assert_eq!(back, v);
                    }
                }
            }
            Err(FrameError::Closed) => break,
            Err(e) => {
                if let FrameError::TooLarge { len, .. } = e {
                    assert!(len > MAX_FRAME_LEN);
                    assert_eq!(r.position(), at + 4, "read the body of a refused frame");
                }
                let msg = e.to_string();
                assert!(!msg.contains('\n'), "{msg:?}");
                break;
            }
        }
    }
});
