//! An empty binary: the baseline that whole-process timings are compared with.
fn main() {}
