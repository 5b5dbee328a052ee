//! Salvage: every block a damaged store still holds that checks out, written as a block
//! export (`export`'s format) for `af ledger import` into a fresh store. One damaged page
//! makes redb refuse the whole file; most of what the file holds is still there. Each
//! chain is read from height 0 through the tree as far as it can be, and every block is
//! verified as an importer would (canonical bytes, Merkle root, signature, link to the
//! block before): a chain stops at its first block that is missing, unreadable or does
//! not check out, so what is written is always a verified prefix of each chain, and the
//! report says where each chain stopped and why. Nothing is repaired or guessed.

use super::block::{check_link, SealedBlock};
use super::export::MAGIC;
use super::{Store, StoreError, Tip, ValidatorKey};
use std::io::Write;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum SalvageError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("writing the export: {0}")]
    Write(std::io::Error),
}

/// What salvage wrote of one chain, and why it stopped where it did.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SalvagedChain {
    pub validator: ValidatorKey,
    pub n_blocks: u64,
    /// The last block written; `None` when not even block 0 checked out.
    pub tip: Option<Tip>,
    /// The tip the store's tips table records, where it could be read.
    pub recorded_tip: Option<u64>,
    /// Why the chain stops before its recorded tip (`None`: all of it was written).
    pub stopped: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SalvageReport {
    pub chains: Vec<SalvagedChain>,
    pub n_blocks: u64,
    /// Why the tips table could not be read (chains were then found from the blocks).
    pub tips_unreadable: Option<String>,
}

impl SalvageReport {
    /// The report in words, for blocks written to `out`: what was written and how to use
    /// it, then a line per chain.
    pub fn lines(&self, out: &std::path::Path) -> Vec<String> {
        let out = out.display();
        let mut lines = vec![format!(
            "{} blocks of {} chain(s) written to {out} (import them into a fresh store: af ledger import --data NEW --file {out})",
            self.n_blocks,
            self.chains.len(),
        )];
        if let Some(why) = &self.tips_unreadable {
            lines.push(format!("the tips table is unreadable ({why}): chains were found from the blocks"));
        }
        for chain in &self.chains {
            let upto = chain.tip.map_or("nothing".into(), |t| format!("heights 0 to {}", t.height));
            lines.push(match &chain.stopped {
                None => format!("whole  {}: {upto}", chain.validator),
                Some(why) => format!("short  {}: {upto}; stopped at {why}", chain.validator),
            });
        }
        lines
    }

    /// Every chain written whole, up to its recorded tip.
    pub fn complete(&self) -> bool {
        self.tips_unreadable.is_none() && self.chains.iter().all(|c| c.stopped.is_none())
    }
}

/// A read of a damaged file: its error, or the engine's panic, as a reason.
fn guarded<T>(read: impl FnOnce() -> Result<T, StoreError>) -> Result<T, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(read)) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err("the storage engine failed reading it (a damaged page)".into()),
    }
}

/// Salvages the store in `dir` into `out`; `progress` is called with the blocks written.
pub fn salvage(dir: &Path, out: &mut dyn Write, progress: &mut dyn FnMut(u64)) -> Result<SalvageReport, SalvageError> {
    let store = guarded(|| Store::open_for_salvage(dir)).map_err(StoreError::Corrupt)?;
    out.write_all(MAGIC).map_err(SalvageError::Write)?;
    let mut report = SalvageReport::default();
    let chains: Vec<(ValidatorKey, Option<u64>)> = match guarded(|| store.tips()) {
        Ok(tips) => tips.into_iter().map(|(v, tip)| (v, Some(tip.height))).collect(),
        Err(why) => {
            report.tips_unreadable = Some(why);
            guarded(|| store.chains_in_blocks()).unwrap_or_default().into_iter().map(|v| (v, None)).collect()
        }
    };
    for (validator, recorded_tip) in chains {
        let mut chain = SalvagedChain { validator, n_blocks: 0, tip: None, recorded_tip, stopped: None };
        let last = recorded_tip.unwrap_or(u64::MAX);
        let mut height = 0u64;
        while height <= last {
            let checked = guarded(|| store.block_bytes(&validator, height)).and_then(|bytes| match bytes {
                None if recorded_tip.is_none() => Ok(None),
                None => Err("missing".into()),
                Some(bytes) => {
                    let block = SealedBlock::from_bytes(bytes).map_err(|e| e.to_string())?;
                    check_link(&validator, chain.tip.as_ref(), &block.decoded().block.header)
                        .map_err(|e| e.to_string())?;
                    Ok(Some(block))
                }
            });
            let block = match checked {
                Ok(Some(block)) => block,
                // The end of a chain whose tip is unknown.
                Ok(None) => break,
                Err(why) => {
                    chain.stopped = Some(format!("block {height}: {why}"));
                    break;
                }
            };
            let bytes = block.bytes();
            out.write_all(&(bytes.len() as u32).to_le_bytes())
                .and_then(|()| out.write_all(bytes))
                .map_err(SalvageError::Write)?;
            chain.tip = Some(block.tip());
            chain.n_blocks += 1;
            report.n_blocks += 1;
            progress(report.n_blocks);
            height += 1;
        }
        report.chains.push(chain);
    }
    out.flush().map_err(SalvageError::Write)?;
    Ok(report)
}
