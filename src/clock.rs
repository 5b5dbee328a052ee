//! The wall clock in Unix milliseconds: one reading, in one place, for the edges that
//! need it (the binary's injected clocks, a mirror's and a node's future-tolerance
//! checks); the pure cores take the time as an argument.

/// Milliseconds since the Unix epoch; 0 on a clock set before 1970, saturating far ahead.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
