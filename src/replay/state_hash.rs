//! The network state's canonical bytes and its hash (ledger-spec/14, "The state hash"):
//! what every validator and auditor compares to say they replayed the same logs to the
//! same champion, ratio, vTrust and weights. Only values the spec derives are here: no
//! finding's text, no count of what this process cached or skipped, so an independent
//! implementation written from the spec computes the same bytes.

use super::combine::{ChampionChange, NetworkMatches, NetworkState};
use super::records::{DiscrepancyKind, HeldMiner};
use crate::bytes::{Hash32, ValidatorKey};
use crate::ledger::codec;
use serde::Serialize;

/// The first field of the state's bytes: bumped with any change to what they hold.
pub const STATE_FORMAT: u32 = 1;

/// The state as its hash covers it (ledger-spec/14 lists each field).
#[derive(Serialize)]
struct StateRecord<'s> {
    state_format: u32,
    validators: Vec<ValidatorRecord>,
    matches: &'s NetworkMatches,
    champion: &'s Option<HeldMiner>,
    champion_history: &'s [ChampionChange],
    ratio_set_ppm: u32,
    ratio_set_at_block: u64,
    weights: &'s [(u16, u16)],
}

#[derive(Serialize)]
struct ValidatorRecord {
    validator: ValidatorKey,
    tip: Option<(u64, Hash32)>,
    n_events: u64,
    n_transcripts: u64,
    n_matches: u64,
    invalid_at: Option<u64>,
    equivocated: bool,
    proofs_by_kind: Vec<(DiscrepancyKind, u64)>,
    n_compared: u64,
    n_disagreements: u64,
    vtrust_ppm: u32,
}

fn record(state: &NetworkState) -> StateRecord<'_> {
    StateRecord {
        state_format: STATE_FORMAT,
        validators: state
            .validators
            .iter()
            .map(|v| ValidatorRecord {
                validator: v.validator,
                tip: v.tip_height.zip(v.tip_hash),
                n_events: v.n_events,
                n_transcripts: v.n_transcripts,
                n_matches: v.n_matches,
                invalid_at: v.invalid_at,
                equivocated: v.equivocated,
                proofs_by_kind: v.proofs_by_kind.clone(),
                n_compared: v.n_compared,
                n_disagreements: v.n_disagreements,
                vtrust_ppm: v.vtrust_ppm,
            })
            .collect(),
        matches: &state.matches,
        champion: &state.champion,
        champion_history: &state.champion_history,
        ratio_set_ppm: state.ratio_set_ppm,
        ratio_set_at_block: state.ratio_set_at_block,
        weights: &state.weights,
    }
}

/// The state's canonical bytes (ledger-spec/14). Fails only when one of the state's
/// matches does not read back from the replay's file.
pub fn state_bytes(state: &NetworkState) -> Result<Vec<u8>, codec::CodecError> {
    codec::encode(&record(state), "network state", u64::MAX)
}

/// The state hash: blake3 over [`state_hash`], computed as they are encoded.
/// Fails only when one of the state's matches does not read back from the replay's file.
pub fn state_hash(state: &NetworkState) -> Result<Hash32, codec::CodecError> {
    Ok(Hash32(*codec::try_hash_encoding(&record(state), "network state")?.as_bytes()))
}
