//! `maos hook`'s input: any bytes on stdin. Never a panic; a refusal is one line; a call
//! survives the trip to the daemon. The parsing module is the client's own file.
#![no_main]

#[path = "../../maos-client/src/hook/input.rs"]
#[allow(dead_code)]
mod input;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // A small cap too, so that the over-the-cap path is reached.
    let clis = maos_proto::Cli::ALL;
    for (limit, cli) in [input::MAX_INPUT, 64].into_iter().flat_map(|l| clis.iter().map(move |c| (l, *c))) {
        match input::parse_for(data, limit, cli) {
            Ok((call, _)) => {
                let text = serde_json::to_string(&call).expect("a call serializes");
                let _: maos_proto::HookCall =
                    serde_json::from_str(&text).expect("a call parses back");
            }
            Err(e) => assert!(!e.is_empty() && !e.contains('\n'), "{e:?}"),
        }
    }
});
