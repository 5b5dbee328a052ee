//! Challenge ids are derived, never chosen: `blake3::derive_key` over the env, its
//! version, the validator, the match and the index. An auditor can then recompute a
//! validator's whole schedule and see that indices 0..n were all played, none skipped.
//!
//! Input bytes (ledger-spec/06-challenge-id.md): `u32 LE len(env name) || env name ||
//! u32 LE env version || validator key (32) || match id (32) || u64 LE index`,
//! under the blake3 derive-key context [`CHALLENGE_ID_CONTEXT`].

use crate::bytes::{ChallengeId, Hash32, MatchId, ValidatorKey};

pub const CHALLENGE_ID_CONTEXT: &str = "af 2026-11 challenge_id v1";
pub const MATCH_ID_CONTEXT: &str = "af 2026-11 match_id v2";

pub fn derive_challenge_id(
    env_name: &str,
    env_version: u32,
    validator: &ValidatorKey,
    match_id: &MatchId,
    index: u64,
) -> ChallengeId {
    let mut input = Vec::with_capacity(4 + env_name.len() + 4 + 32 + 32 + 8);
    input.extend_from_slice(&(env_name.len() as u32).to_le_bytes());
    input.extend_from_slice(env_name.as_bytes());
    input.extend_from_slice(&env_version.to_le_bytes());
    input.extend_from_slice(&validator.0);
    input.extend_from_slice(&match_id.0);
    input.extend_from_slice(&index.to_le_bytes());
    Hash32(blake3::derive_key(CHALLENGE_ID_CONTEXT, &input))
}

/// The id `af env test --seed N` uses: index N of the all-zero validator and match,
/// so a seed names the same task everywhere.
pub fn challenge_id_for_seed(env_name: &str, env_version: u32, seed: u64) -> ChallengeId {
    derive_challenge_id(env_name, env_version, &ValidatorKey([0; 32]), &Hash32([0; 32]), seed)
}

/// A match id no one picks by hand and no one knows in advance: derived from the
/// validator, the contestants, the number of matches this validator decided before, and
/// the chain block at the match's start with its hash (ledger-spec/06), which nobody
/// knows before that block exists.
pub fn derive_match_id(
    validator: &ValidatorKey,
    contender: &str,
    champion: &str,
    n_decided: u64,
    chain_block: u64,
    chain_block_hash: &Hash32,
) -> MatchId {
    let mut input = Vec::new();
    input.extend_from_slice(&validator.0);
    for name in [contender, champion] {
        input.extend_from_slice(&(name.len() as u32).to_le_bytes());
        input.extend_from_slice(name.as_bytes());
    }
    input.extend_from_slice(&n_decided.to_le_bytes());
    input.extend_from_slice(&chain_block.to_le_bytes());
    input.extend_from_slice(&chain_block_hash.0);
    Hash32(blake3::derive_key(MATCH_ID_CONTEXT, &input))
}
