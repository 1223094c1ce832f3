//! The protocol version this daemon speaks (a leaf: the connection, the daemon's status and
//! the supervisor read it).

/// The protocol this daemon speaks: [`maos_proto::PROTOCOL_VERSION`], unless
/// `MAOS_TEST_PROTOCOL` sets another number. That override exists for the end-to-end tests of
/// the version handshake (an "outdated" or "newer" daemon without a second build); nothing else
/// sets it.
pub fn protocol() -> u32 {
    static PROTOCOL: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *PROTOCOL.get_or_init(|| {
        std::env::var("MAOS_TEST_PROTOCOL")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(maos_proto::PROTOCOL_VERSION)
    })
}
