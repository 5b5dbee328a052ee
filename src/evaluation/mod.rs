//! Head-to-head evaluation: deciding, from paired games, whether a contender beats the
//! champion by more than the ratio to beat. Pure and deterministic: no IO, no clock.
//!
//! `stopping` holds the per-environment stopping rules and their exact error rates,
//! `matchplay` the match state machine (tallies, majority of environments, early stop),
//! `ratio` the ratio to beat and its decay. The loop that queries miners and writes the
//! ledger comes with the rest of issue 4.

pub mod matchplay;
pub mod ratio;
pub mod stopping;
