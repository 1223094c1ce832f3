//! A hash fixed at compile time (FNV-1a, 64 bits): stable across builds and machines.

/// FNV-1a, 64 bits, of `bytes`: the stable short hash maos names things by (a project root's
/// state directory, a project's notification channel, the Gantt fold's code). Never changes
/// between versions.
pub const fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    h
}
