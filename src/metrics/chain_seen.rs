//! The chain as the anchoring task saw it (its head, our last commitment and weights,
//! what has been failing since when): what `/healthz`, the live page and the chain
//! gauges report, and how each event of the anchoring task changes it (pure: the
//! metrics hold one and export it).

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

impl ChainSeen {
    /// A read of the chain's miners (discovery) that answered, or failed, at `now_ms`.
    pub fn miners_read(&mut self, ok: bool, now_ms: u64) {
        match ok {
            true => self.miners_failing_since_ms = None,
            false => {
                self.miners_failing_since_ms.get_or_insert(now_ms);
            }
        }
    }

    /// An anchoring round begins at `now_ms`, or the one in progress ends.
    pub fn anchor_round(&mut self, began: bool, now_ms: u64) {
        match (began, self.round_started_ms.take()) {
            (true, _) => self.round_started_ms = Some(now_ms),
            (false, Some(started)) => self.last_round_ms = now_ms.saturating_sub(started),
            (false, None) => {}
        }
    }

    /// The chain's head `block`, read at `now_ms`.
    pub fn read(&mut self, block: u64, now_ms: u64) {
        self.last_read_ms = Some(now_ms);
        if self.head != Some(block) {
            self.head = Some(block);
            self.head_since_ms = Some(now_ms);
        }
        self.first_head.get_or_insert(block);
    }

    /// Our commitment (or weights) landed at chain block `block`.
    pub fn anchored(&mut self, weights: bool, block: u64) {
        let (last, failing) = if weights {
            (&mut self.last_weights_block, &mut self.weights_failing_since)
        } else {
            (&mut self.last_commitment_block, &mut self.commitment_failing_since)
        };
        *last = Some(block.max(last.unwrap_or(0)));
        *failing = None;
    }

    /// A commitment that was due (or weights) failed to go out at head `block`.
    pub fn send_failed(&mut self, weights: bool, block: u64) {
        let failing = if weights { &mut self.weights_failing_since } else { &mut self.commitment_failing_since };
        failing.get_or_insert(block);
    }
}
