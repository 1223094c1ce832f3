//! Plan files: any text given to `maos run`. Never a panic; a refusal points inside the text
//! (line and column) in one line; an accepted plan is valid and survives `to_toml`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use maos_core::plan;

fuzz_target!(|text: &str| {
    match plan::parse(text) {
        Ok(p) => {
            assert_eq!(p.validate(), Ok(()));
            let again = p.to_toml();
            assert_eq!(plan::parse(&again).as_ref(), Ok(&p), "{again}");
        }
        Err(e) => {
            let lines: Vec<&str> = text.split('\n').collect();
            assert!(e.line >= 1 && e.line <= lines.len(), "{e}");
            let width = lines[e.line - 1].chars().count();
            assert!(e.column >= 1 && e.column <= width + 1, "{e}");
            assert!(!e.to_string().contains('\n'), "{e:?}");
        }
    }
});
