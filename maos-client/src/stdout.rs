//! Writing the CLI's output: `outln!` and `out!` are `println!` and `print!` that end the
//! process quietly when stdout is closed (`maos ... | head`), as `events --follow` does,
//! instead of panicking. A program with something to clean up first (`maos-demo`: its daemon
//! and temporary directory) asks for [`unwind_when_closed`] instead, and catches [`Closed`].

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

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

/// A closed stdout unwinds (with a [`Closed`] payload) instead of ending the process.
static UNWIND: AtomicBool = AtomicBool::new(false);
/// Stdout was found closed: later output is dropped.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// The payload of the unwind that a closed stdout starts under [`unwind_when_closed`].
#[derive(Debug)]
pub struct Closed;

/// From now on a closed stdout unwinds the writing thread with a [`Closed`] payload (for
/// `std::panic::catch_unwind`), so that the program's guards run (`Drop`) before it ends; the
/// output written after that (by those guards) is dropped.
pub fn unwind_when_closed() {
    UNWIND.store(true, Ordering::Relaxed);
}

/// Whether stdout was found closed.
pub fn closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}

/// Write to stdout; a closed stdout (the reader went away) ends the process quietly, or
/// unwinds it (see [`unwind_when_closed`]).
pub fn write(args: std::fmt::Arguments) {
    if closed() {
        return;
    }
    let mut out = std::io::stdout().lock();
    if out.write_fmt(args).and_then(|()| out.flush()).is_ok() {
        return;
    }
    CLOSED.store(true, Ordering::Relaxed);
    if !UNWIND.load(Ordering::Relaxed) {
        std::process::exit(0);
    }
    drop(out);
    if !std::thread::panicking() {
        std::panic::resume_unwind(Box::new(Closed));
    }
}
