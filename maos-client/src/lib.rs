//! What the `maos` binary shares with `maos-demo`: how replies read to people (`output`) and
//! writing to a stdout that may close (`outln!`, `out!`). Nothing here talks to the daemon.

pub mod output;
pub mod stdout;
