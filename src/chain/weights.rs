//! Weights on chain: what a validator sends (`send_weights`, once per rate limit and
//! never the same twice, through one `SentWeights`), the chain's limits on a send as
//! both backends check them, and weights in words for people.

use super::{tlock, Chain, ChainError, WeightLimits};
use crate::bytes::Hash32;
use serde::Serialize;

/// How weights went to the chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum WeightsSent {
    Set { chain_block: u64, version_key: u64 },
    Committed { chain_block: u64, version_key: u64, plan: tlock::RevealPlan, ciphertext_hash: Hash32 },
}

/// What this process last sent as weights, kept between the chain's blocks: an
/// extrinsic waits in the pool until a block includes it, and until then the chain's
/// `LastUpdate` and `TimelockedWeightCommits` do not show it. Every weights send of a
/// validator goes through one of these (the match loop's anchoring, the final anchoring
/// and the serving loop share it), so the same decision is never sent twice.
#[derive(Debug, Default)]
pub struct SentWeights {
    last: tokio::sync::Mutex<Option<LastSend>>,
}

/// Our last send and the weights it carried.
#[derive(Debug)]
struct LastSend {
    sent: WeightsSent,
    uids: Vec<u16>,
    weights: Vec<u16>,
}

impl SentWeights {
    /// The block our next weights may go at, by the rate limit over the later of the
    /// chain's last update and our own last send.
    pub async fn check_rate(&self, limits: &WeightLimits, netuid: u16, now: u64) -> Result<(), ChainError> {
        check_rate_counting(self.last.lock().await.as_ref().map(|l| &l.sent), limits, netuid, now)
    }

    /// `ChainError::Unchanged` when these weights equal our last send's and a tempo has
    /// not passed since it ([`send_weights`] checks the same; asking first spares a caller
    /// the reads a send makes).
    pub async fn check_repeat(&self, uids: &[u16], weights: &[u16], tempo: u64, now: u64) -> Result<(), ChainError> {
        check_repeat(self.last.lock().await.as_ref(), uids, weights, tempo, now)
    }
}

/// Weights equal to our last send's wait one epoch after it: sent once an epoch they keep
/// the validator active (the chain's activity cutoff is many epochs) and the chain's
/// weights current, and sending them whenever the rate limit allows would only add
/// blocks to the log and extrinsics to the pool (docs/design/invariants.md: disk grows
/// with the blocks, not with time).
fn check_repeat(
    last: Option<&LastSend>,
    uids: &[u16],
    weights: &[u16],
    tempo: u64,
    now: u64,
) -> Result<(), ChainError> {
    let Some(last) = last.filter(|l| l.uids == uids && l.weights == weights) else { return Ok(()) };
    let next = last.sent.chain_block().saturating_add(tempo.max(1));
    if now < next {
        return Err(ChainError::Unchanged { last: last.sent.chain_block(), next });
    }
    Ok(())
}

/// The rate limit over the later of the chain's last update and `ours`, our last send.
fn check_rate_counting(
    ours: Option<&WeightsSent>,
    limits: &WeightLimits,
    netuid: u16,
    now: u64,
) -> Result<(), ChainError> {
    let last_update = limits.last_update.max(ours.map(WeightsSent::chain_block));
    check_weight_limits(&WeightLimits { last_update, ..limits.clone() }, netuid, now)
}

impl WeightsSent {
    pub fn chain_block(&self) -> u64 {
        match self {
            WeightsSent::Set { chain_block, .. } | WeightsSent::Committed { chain_block, .. } => *chain_block,
        }
    }
}

/// The one path for weights: from the chain's state, `set_weights` where commit-reveal
/// is off, else a timelocked commit to the round the chain will reveal it with. Refuses
/// (sending nothing) what the chain would refuse, counting our own sends still in the
/// pool: the rate limit, a commit while one of ours for this epoch waits for its reveal
/// (`CommitPending`), and 10 unrevealed commits. `now_ms` is the time the reveal round is
/// planned from. One send at a time per `sent`.
pub async fn send_weights(
    chain: &dyn Chain,
    sent: &SentWeights,
    uids: &[u16],
    weights: &[u16],
    now_ms: u64,
) -> Result<WeightsSent, ChainError> {
    let mut last = sent.last.lock().await;
    let limits = chain.weight_limits().await?;
    let block = chain.current_block().await?;
    check_rate_counting(last.as_ref().map(|l| &l.sent), &limits, chain.netuid(), block)?;
    check_repeat(last.as_ref(), uids, weights, limits.tempo, block)?;
    let version_key = limits.version_key;
    let record = |sent: &WeightsSent| LastSend { sent: sent.clone(), uids: uids.to_vec(), weights: weights.to_vec() };
    if !limits.commit_reveal_enabled {
        let chain_block = chain.set_weights(uids, weights, version_key).await?;
        let done = WeightsSent::Set { chain_block, version_key };
        *last = Some(record(&done));
        return Ok(done);
    }
    if let Some(WeightsSent::Committed { plan, .. }) = last.as_ref().map(|l| &l.sent) {
        if block < plan.reveal_block {
            return Err(ChainError::CommitPending { reveal_block: plan.reveal_block });
        }
    }
    let info = chain.timelock_info().await?;
    let plan =
        tlock::reveal_plan(&info.beacon, info.schedule, info.reveal_period_epochs, block, now_ms, info.block_ms)?;
    if info.unrevealed_commits >= tlock::MAX_UNREVEALED_COMMITS {
        return Err(ChainError::TooManyUnrevealed {
            count: info.unrevealed_commits,
            max: tlock::MAX_UNREVEALED_COMMITS,
            reveal_block: plan.reveal_block,
        });
    }
    if info.unrevealed_commits > 0 {
        return Err(ChainError::CommitPending { reveal_block: plan.reveal_block });
    }
    let hotkey = chain.payload_hotkey().ok_or(ChainError::NoSigner)?;
    let payload = tlock::WeightsTlockPayload { hotkey, uids: uids.to_vec(), values: weights.to_vec(), version_key };
    let ciphertext = tlock::encrypt(
        &info.beacon,
        plan.reveal_round,
        &parity_scale_codec::Encode::encode(&payload),
        &mut rand_core::OsRng,
    )?;
    let chain_block =
        chain.commit_timelocked_weights(&ciphertext, plan.reveal_round, info.commit_reveal_version).await?;
    let done = WeightsSent::Committed {
        chain_block,
        version_key,
        plan,
        ciphertext_hash: Hash32(*blake3::hash(&ciphertext).as_bytes()),
    };
    *last = Some(record(&done));
    Ok(done)
}

/// Refuses a weight update (set or commit) that the rate limit would refuse, with the
/// block it is next allowed at.
pub fn check_weight_limits(limits: &WeightLimits, _netuid: u16, now: u64) -> Result<(), ChainError> {
    if limits.in_pool > 0 {
        return Err(ChainError::InPool { n: limits.in_pool });
    }
    if let Some(last) = limits.last_update {
        let next = last + limits.rate_limit_blocks;
        if now < next {
            return Err(ChainError::RateLimited { last, limit: limits.rate_limit_blocks, next });
        }
    }
    Ok(())
}

/// Weights in words, as shares of their sum (the chain normalizes them so): `uid 1
/// 100%`, or `uid 1 75%, uid 4 25%`; `none` for no weights.
pub fn weight_shares(pairs: impl IntoIterator<Item = (u16, u16)>) -> String {
    let pairs: Vec<(u16, u16)> = pairs.into_iter().collect();
    let total: u64 = pairs.iter().map(|(_, w)| u64::from(*w)).sum();
    if pairs.is_empty() {
        return "none".into();
    }
    let share = |w: u16| {
        if total == 0 {
            return "0%".to_string();
        }
        let percent = format!("{:.1}", 100.0 * f64::from(w) / total as f64);
        format!("{}%", percent.strip_suffix(".0").unwrap_or(&percent))
    };
    pairs.iter().map(|(uid, w)| format!("uid {uid} {}", share(*w))).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::WeightLimits;

    #[test]
    fn weights_read_as_shares_of_their_sum() {
        assert_eq!(super::weight_shares([(1, 65535)]), "uid 1 100%");
        assert_eq!(super::weight_shares([(1, 49151), (4, 16384)]), "uid 1 75%, uid 4 25%");
        assert_eq!(super::weight_shares([(2, 1), (3, 2)]), "uid 2 33.3%, uid 3 66.7%");
        assert_eq!(super::weight_shares([(0, 0)]), "uid 0 0%");
        assert_eq!(super::weight_shares([]), "none");
    }

    #[test]
    fn weight_limits_name_the_reason() {
        let limits = WeightLimits {
            rate_limit_blocks: 100,
            last_update: Some(1000),
            commit_reveal_enabled: false,
            version_key: 0,
            tempo: 360,
            registered: Some(true),
            in_pool: 0,
            at_block: None,
        };
        assert!(matches!(check_weight_limits(&limits, 1, 1050), Err(ChainError::RateLimited { next: 1100, .. })));
        assert!(check_weight_limits(&limits, 1, 1100).is_ok());
        // Commits count against the same limit.
        let reveal = WeightLimits { commit_reveal_enabled: true, ..limits };
        assert!(matches!(check_weight_limits(&reveal, 7, 1099), Err(ChainError::RateLimited { .. })));
    }

    #[test]
    fn the_same_weights_go_again_only_after_an_epoch() {
        let last = LastSend {
            sent: WeightsSent::Set { chain_block: 1000, version_key: 0 },
            uids: vec![3],
            weights: vec![65535],
        };
        let repeat = check_repeat(Some(&last), &[3], &[65535], 360, 1359);
        assert!(matches!(repeat, Err(ChainError::Unchanged { last: 1000, next: 1360 })), "{repeat:?}");
        assert!(repeat.unwrap_err().is_wait());
        assert!(check_repeat(Some(&last), &[3], &[65535], 360, 1360).is_ok());
        // New weights (a new champion) go at once; so does a first send.
        assert!(check_repeat(Some(&last), &[4], &[65535], 360, 1001).is_ok());
        assert!(check_repeat(None, &[3], &[65535], 360, 1001).is_ok());
    }
}
