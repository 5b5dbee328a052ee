//! Head-to-head evaluation: deciding, from paired games, whether a contender beats the
//! champion by more than the ratio to beat. Pure and deterministic: no IO, no clock.
//!
//! `plan` the plan's text (written, read back, in words), `stopping` holds the per-environment stopping rules and their exact error rates,
//! `dominance` the crown of a contender that (almost) never loses, read on decisive games,
//! `matchplay` the match state machine (tallies, majority of environments, early stop),
//! `ratio` the ratio to beat and its decay, `exact` the exact
//! per-env figures of the score rule (adaptive contenders included), `network_plan` the
//! one plan the network decides by.

pub mod dominance;
pub mod exact;
pub mod futility;
pub mod matchplay;
pub mod network_plan;
pub mod plan;
pub mod ratio;
pub mod stopping;
