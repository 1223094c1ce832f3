//! Writing the CLI's output: `outln!` and `out!` are `println!` and `print!` that end the
//! process quietly when stdout is closed (`maos ... | head`), as `events --follow` does,
//! instead of panicking.

use std::io::Write;

/// `println!` for the CLI's output (see the module).
#[macro_export]
macro_rules! outln {
    () => {
        $crate::stdout::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::stdout::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` that ends the process quietly when stdout is closed (see `outln!`).
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdout::write(format_args!($($arg)*))
    };
}

/// Write to stdout; a closed stdout (the reader went away) ends the process quietly.
pub fn write(args: std::fmt::Arguments) {
    let mut out = std::io::stdout().lock();
    if out.write_fmt(args).and_then(|()| out.flush()).is_err() {
        std::process::exit(0);
    }
}
