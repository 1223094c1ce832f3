//! What the `maos` binary shares with `maos-demo` and `maos-top`: the connection to the daemon
//! (`client`), how replies read to people (`output`, coloured by `paint` on a terminal only),
//! and writing to a stdout that may close (`outln!`, `out!`).

pub mod client;
pub mod output;
pub mod paint;
pub mod process;
pub mod stdout;
