//! The view of the chain that the audit and `af weights show` compare the logs with:
//! block, neurons, weights, pending timelocked commits and commitments, read once.

use crate::chain::{ChainError, ChainSpec};
use crate::replay::Replay;

/// What the audit and `af weights show` read from the chain `args` names.
pub struct ChainView {
    pub endpoint: String,
    pub block: u64,
    pub tempo: u64,
    pub neurons: Vec<crate::chain::Neuron>,
    pub weights: Vec<(u16, Vec<(u16, u16)>)>,
    pub timelocked: crate::chain::Timelocked,
    pub records: Vec<crate::chain::CommitmentRecord>,
    /// The chain's hash of each block asked for (`None`: no such block).
    pub block_hashes: std::collections::BTreeMap<u64, Option<crate::bytes::Hash32>>,
}

impl ChainView {
    pub fn weights_input(&self) -> crate::audit::WeightsOnChain<'_> {
        crate::audit::WeightsOnChain {
            endpoint: &self.endpoint,
            block: self.block,
            tempo: self.tempo,
            neurons: &self.neurons,
            weights: &self.weights,
            timelocked: &self.timelocked,
            records: &self.records,
        }
    }

    /// Replay's winner-takes-all weights with the champion's uid on this chain now.
    pub fn replay_weights(&self, state: &crate::replay::combine::NetworkState) -> Vec<(u16, u16)> {
        state
            .champion
            .as_ref()
            .and_then(|c| self.neurons.iter().find(|n| *n.hotkey == *c.hotkey))
            .map(|n| vec![(n.uid, u16::MAX)])
            .unwrap_or_default()
    }
}

/// Reads the chain `spec` names: block, neurons, weights, pending timelocked commits,
/// every commitment, and the hash of each of `blocks`. A chain without timelocked commits
/// in its metadata has none pending.
pub async fn read(spec: &ChainSpec, blocks: &[u64]) -> Result<ChainView, ChainError> {
    let chain = crate::chain::connect(spec).await?;
    let block = chain.current_block().await?;
    let (tempo, timelocked) = match chain.timelock_info().await {
        Ok(info) => {
            let tempo = match info.schedule {
                crate::chain::tlock::EpochSchedule::Legacy { tempo, .. } => tempo,
                crate::chain::tlock::EpochSchedule::Stateful { tempo, .. } => tempo,
            };
            (tempo, chain.timelocked().await?)
        }
        Err(ChainError::CommitRevealUnsupported { .. }) => (0, crate::chain::Timelocked::default()),
        Err(error) => return Err(error),
    };
    let mut block_hashes = std::collections::BTreeMap::new();
    for &number in blocks {
        block_hashes.insert(number, chain.block_hash(number).await?);
    }
    Ok(ChainView {
        block_hashes,
        endpoint: spec.endpoint.clone(),
        block,
        tempo,
        neurons: chain.neurons().await?,
        weights: chain.weights().await?,
        timelocked,
        records: chain.commitments().await?,
    })
}

/// The chain's block now, and the ledger keys its permit-holding validators committed
/// (those who may countersign a fold checkpoint, ledger-spec/02).
pub async fn listed_validators(
    spec: &ChainSpec,
) -> Result<(u64, std::collections::BTreeSet<crate::bytes::ValidatorKey>), ChainError> {
    let chain = crate::chain::connect(spec).await?;
    let block = chain.current_block().await?;
    let (neurons, records) = (chain.neurons().await?, chain.commitments().await?);
    Ok((block, crate::chain::ledger_commitment::listed_ledger_keys(&neurons, &records)))
}

/// The weights audit over `replayed`, against the chain where one was read.
pub fn weights_audit(
    replayed: &Replay,
    commitments: &crate::audit::CommitmentAudit,
    view: Option<&ChainView>,
) -> crate::audit::WeightsAudit {
    // A validator whose on-chain tip is past our copy may have sent weights we cannot see.
    let behind: Vec<_> =
        commitments.rows.iter().filter(|r| r.status == "ahead_of_our_copy").map(|r| r.commitment.ledger_key).collect();
    let replay_weights = view.map_or_else(|| replayed.state.weights.clone(), |v| v.replay_weights(&replayed.state));
    crate::audit::audit_weights(&replayed.folds, &replay_weights, &behind, view.map(|v| v.weights_input()))
}
