//! Head-to-head evaluation: deciding, from paired games, whether a contender beats the
//! champion by more than the ratio to beat. Pure and deterministic: no IO, no clock.
//!
//! Today: the stopping rules and their exact error rates (`stopping`). The match loop,
//! environment majority and ratio-to-beat decay come with the rest of issue 4.

pub mod stopping;
