//! The chain as the anchoring task saw it (its head, our last commitment and weights,
//! what has been failing since when): what `/healthz`, the live page and the chain
//! gauges report, kept beside the metrics that export it.

use super::Metrics;

/// The chain as the anchoring task saw it, for `/healthz`, the live page and gauges.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ChainSeen {
    /// Unix ms when anchoring started (reads are judged from then on).
    pub expected_ms: u64,
    /// Unix ms of the last successful read of the chain's head.
    pub last_read_ms: Option<u64>,
    /// The head block, and when it was first seen at that height.
    pub head: Option<u64>,
    pub head_since_ms: Option<u64>,
    /// The first head this process saw: the age of our anchors before we sent any.
    pub first_head: Option<u64>,
    /// Chain blocks of our last commitment and weights sent by this process.
    pub last_commitment_block: Option<u64>,
    pub last_weights_block: Option<u64>,
    /// The head when a commitment that was due (our log had news) first failed, and
    /// when setting weights first failed; cleared by the next success.
    pub commitment_failing_since: Option<u64>,
    pub weights_failing_since: Option<u64>,
    /// Why our hotkey holds no uid on the subnet, if it does not.
    pub deregistered: Option<String>,
    /// Unix ms since which reading the chain's miners has failed (a node that answers the
    /// head but too slowly, or not at all, for the reads a validator works by).
    pub miners_failing_since_ms: Option<u64>,
    /// Unix ms the anchoring round in progress began (its head, limits, commitment and
    /// weights), and how long the last finished one took: a node that answers each read,
    /// but so slowly that a round outlasts `ANCHOR_ROUND_MS`, is too slow to anchor on.
    pub round_started_ms: Option<u64>,
    pub last_round_ms: u64,
}

impl ChainSeen {
    /// Blocks since our last commitment (or since this process first saw the chain).
    pub fn blocks_since_commitment(&self) -> Option<u64> {
        Some(self.head?.saturating_sub(self.last_commitment_block.or(self.first_head)?))
    }

    /// How long the chain's head has stood at `now_ms`: since it was first read at its
    /// height (a chain that stops answering stands too: the head is read only from an
    /// answer), or since anchoring started when it never answered.
    pub fn head_age_ms(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.head_since_ms.unwrap_or(self.expected_ms))
    }

    /// How long anchoring rounds take at `now_ms`: the one in progress, or the last.
    pub fn round_ms(&self, now_ms: u64) -> u64 {
        self.round_started_ms.map_or(0, |started| now_ms.saturating_sub(started)).max(self.last_round_ms)
    }

    pub fn blocks_since_weights(&self) -> Option<u64> {
        Some(self.head?.saturating_sub(self.last_weights_block.or(self.first_head)?))
    }
}

impl Metrics {
    /// A read of the chain's miners (discovery) that answered, or failed.
    pub fn miners_read(&self, ok: bool, now_ms: u64) {
        self.update_chain(|seen| match ok {
            true => seen.miners_failing_since_ms = None,
            false => {
                seen.miners_failing_since_ms.get_or_insert(now_ms);
            }
        });
    }

    /// An anchoring round begins at `now_ms` (`Some`), or the one in progress ends.
    pub fn anchor_round(&self, began: bool, now_ms: u64) {
        self.update_chain(|seen| match (began, seen.round_started_ms.take()) {
            (true, _) => seen.round_started_ms = Some(now_ms),
            (false, Some(started)) => seen.last_round_ms = now_ms.saturating_sub(started),
            (false, None) => {}
        });
    }

    /// The anchoring task read the chain's head `block` at `now_ms`.
    pub fn chain_read(&self, block: u64, now_ms: u64) {
        self.update_chain(|seen| {
            seen.last_read_ms = Some(now_ms);
            if seen.head != Some(block) {
                seen.head = Some(block);
                seen.head_since_ms = Some(now_ms);
            }
            seen.first_head.get_or_insert(block);
        });
    }

    /// Whether our hotkey holds a uid on the subnet, as of the chain's head: `None` once
    /// registered, else why not.
    pub fn chain_registration(&self, deregistered: Option<String>) {
        self.chain_registered.set(if deregistered.is_some() { 0 } else { 1 });
        self.update_chain(|seen| seen.deregistered = deregistered);
    }

    /// Our commitment (or weights) landed at chain block `block`.
    pub fn chain_anchored(&self, weights: bool, block: u64) {
        self.update_chain(|seen| {
            let (last, failing) = if weights {
                (&mut seen.last_weights_block, &mut seen.weights_failing_since)
            } else {
                (&mut seen.last_commitment_block, &mut seen.commitment_failing_since)
            };
            *last = Some(block.max(last.unwrap_or(0)));
            *failing = None;
        });
    }

    /// A commitment that was due (or weights) failed to go out at head `block`.
    pub fn chain_send_failed(&self, weights: bool, block: u64) {
        self.update_chain(|seen| {
            let failing = if weights { &mut seen.weights_failing_since } else { &mut seen.commitment_failing_since };
            failing.get_or_insert(block);
        });
    }

    /// A chain is configured: health reports on it from `now_ms` on.
    pub fn chain_expected(&self, now_ms: u64) {
        self.update_chain(|seen| seen.expected_ms = now_ms);
    }

    fn update_chain(&self, change: impl FnOnce(&mut ChainSeen)) {
        let mut chain = self.chain.lock().unwrap_or_else(|e| e.into_inner());
        let seen = chain.get_or_insert_with(ChainSeen::default);
        change(seen);
        if let Some(since) = seen.blocks_since_commitment() {
            self.chain_blocks_since_commitment.set(since as i64);
        }
        if let Some(since) = seen.blocks_since_weights() {
            self.chain_blocks_since_weights.set(since as i64);
        }
        if let Some(head) = seen.head {
            self.chain_head_block.set(head as i64);
        }
    }

    #[cfg(test)]
    pub(crate) fn set_chain_seen(&self, seen: ChainSeen) {
        *self.chain.lock().unwrap() = Some(seen);
    }

    /// Sets the chain's head age as of `now_ms` (nothing without a chain).
    pub fn sample_chain(&self, now_ms: u64) {
        if let Some(seen) = self.chain_seen() {
            self.chain_head_age_seconds.set(seen.head_age_ms(now_ms) as f64 / 1e3);
            self.chain_round_seconds.set(seen.round_ms(now_ms) as f64 / 1e3);
        }
    }

    /// What the anchoring task saw of the chain, if there is one.
    pub fn chain_seen(&self) -> Option<ChainSeen> {
        self.chain.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
