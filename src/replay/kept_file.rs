//! The replay's kept file: what `af audit --snapshot` folds into and starts from next
//! time (`DIR/replay-projection.redb`). It is the same file every replay keeps its
//! matches and records in past its cache (`spill_file`), kept after the run with each chain's
//! fold head (the fold without the matches and records the file holds), so there is one
//! representation of the replay's state, on disk or in memory, and no second encoding of
//! every match to load whole. The same rules as any snapshot hold (`FoldSource::Untrusted`):
//! a head is used only if its chain, verified afresh, ends at the head's tip, and only by
//! the same `REPLAY_VERSION`. The heads leave the file before anything else is written to
//! it and come back, durably, last: a run that stops half way leaves no heads, and the
//! next one folds from genesis.

use super::fold::ChainFold;
use super::match_table::{MatchTable, TableHead};
use super::record_lists::{ListHead, RecordList};
use super::records::{EquivocationFound, SkipFold};
use super::spill_file::{CacheSize, SpillFile, SpillFileError, MAX_HEADS_BYTES};
use super::{replay, replay_in, FoldSource, Progress, Replay, ReplayError, Snapshot, REPLAY_VERSION};
use crate::ledger::codec;
use crate::ledger::event::ChainCommitment;
use crate::ledger::Store;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The kept file, in the data directory of the store it was folded from.
pub const PROJECTION_FILE: &str = "replay-projection.redb";
/// The file of builds before the kept file: ignored, and removed by the next `--snapshot`.
const OLD_SNAPSHOT_FILE: &str = "replay-snapshot.bin";

/// A chain's fold as the kept file holds it: the fold with its tables empty, and what of
/// each table is not in the file.
#[derive(Serialize, Deserialize)]
struct FoldHead {
    fold: ChainFold,
    matches: TableHead,
    commitments: ListHead<ChainCommitment>,
    skipped: ListHead<SkipFold>,
    equivocations: ListHead<EquivocationFound>,
}

#[derive(Serialize, Deserialize)]
struct Heads {
    replay_version: u32,
    folds: Vec<FoldHead>,
}

/// A kept file, open, and the folds its heads held (taken out of it).
pub struct Kept {
    pub cold: SpillFile,
    pub folds: Vec<ChainFold>,
}

/// Opens `dir`'s kept file with an audit's cache, taking its heads out. A file that
/// fails its page checks is told to `note` and made afresh; heads of another replay
/// version, or that do not decode, are told and dropped: every chain then folds from
/// genesis. A file another process holds is an error (nothing is removed).
pub fn open(dir: &Path, note: &mut dyn FnMut(&str)) -> Result<Kept, SpillFileError> {
    open_with_cache(dir, CacheSize::AUDIT, note)
}

/// [`open`] with `cache` (a validator's replays keep the same file with theirs).
pub fn open_with_cache(dir: &Path, cache: CacheSize, note: &mut dyn FnMut(&str)) -> Result<Kept, SpillFileError> {
    let path = dir.join(PROJECTION_FILE);
    if std::fs::remove_file(dir.join(OLD_SNAPSHOT_FILE)).is_ok() {
        note(&format!(
            "removed {OLD_SNAPSHOT_FILE}, the snapshot of earlier builds: the replay keeps {PROJECTION_FILE}"
        ));
    }
    let cold = match SpillFile::open_kept(&path, cache) {
        Err(error @ SpillFileError::Damaged { .. }) => {
            note(&format!("{error}; it is made afresh, and every chain folds from genesis"));
            std::fs::remove_file(&path)
                .map_err(|e| SpillFileError::Engine { path: path.display().to_string(), message: e.to_string() })?;
            SpillFile::open_kept(&path, cache)?
        }
        opened => opened?,
    };
    let heads = match cold.take_heads() {
        Err(error @ SpillFileError::Damaged { .. }) => {
            note(&format!("{error}; every chain folds from genesis"));
            None
        }
        taken => taken?,
    };
    let folds = match heads {
        None => Vec::new(),
        Some(bytes) => match codec::decode_canonical::<Heads>(&bytes, "fold heads", MAX_HEADS_BYTES) {
            Ok(heads) if heads.replay_version == REPLAY_VERSION => {
                let snapshot = std::sync::Arc::new(cold.snapshot().map_err(|e| SpillFileError::Engine {
                    path: path.display().to_string(),
                    message: e.to_string(),
                })?);
                let n_heads = heads.folds.len();
                let folds: Vec<ChainFold> =
                    heads.folds.into_iter().filter_map(|head| fold_of(head, &snapshot)).collect();
                if folds.len() < n_heads {
                    note(&format!(
                        "{}: {} fold head(s) do not match the matches and records beside them; those chains fold from genesis",
                        path.display(),
                        n_heads - folds.len()
                    ));
                }
                folds
            }
            Ok(heads) => {
                let version = heads.replay_version;
                note(&format!(
                    "{}: made by replay version {version}, this build is version {REPLAY_VERSION}; every chain folds from genesis",
                    path.display()
                ));
                Vec::new()
            }
            Err(error) => {
                note(&format!(
                    "{}: its fold heads do not decode ({error}); every chain folds from genesis",
                    path.display()
                ));
                Vec::new()
            }
        },
    };
    Ok(Kept { cold, folds })
}

/// Keeps `folds` in `spill_file`'s file for the next run: their matches and records go to the
/// file (the fold's last started match and last record of each kind stay in the heads),
/// then the heads, durably.
pub fn save(cold: &SpillFile, folds: &mut [ChainFold]) -> Result<(), SpillFileError> {
    super::spill::spill(cold, folds)?;
    let heads = Heads { replay_version: REPLAY_VERSION, folds: folds.iter().map(head_of).collect() };
    let bytes = codec::encode(&heads, "fold heads", MAX_HEADS_BYTES)
        .map_err(|e| SpillFileError::Engine { path: cold.path().display().to_string(), message: e.to_string() })?;
    cold.put_heads(&bytes)
}

fn head_of(fold: &ChainFold) -> FoldHead {
    let mut bare = fold.clone();
    bare.matches = MatchTable::default();
    bare.commitments = RecordList::default();
    bare.skipped = RecordList::default();
    bare.equivocations = RecordList::default();
    FoldHead {
        fold: bare,
        matches: fold.matches.head(),
        commitments: fold.commitments.head(),
        skipped: fold.skipped.head(),
        equivocations: fold.equivocations.head(),
    }
}

/// The fold `head` describes, or `None` when the file's rows of its log are not the ones
/// it counts (the file was changed since, by something other than a run of this code).
fn fold_of(head: FoldHead, snapshot: &std::sync::Arc<super::spill_snapshot::SpillSnapshot>) -> Option<ChainFold> {
    let mut fold = head.fold;
    let validator = fold.validator;
    fold.matches = MatchTable::from_head(head.matches, validator, snapshot)?;
    fold.commitments = RecordList::from_head(head.commitments, validator, snapshot)?;
    fold.skipped = RecordList::from_head(head.skipped, validator, snapshot)?;
    fold.equivocations = RecordList::from_head(head.equivocations, validator, snapshot)?;
    Some(fold)
}

/// Replays `store`, the one in data directory `data`, from genesis, re-verifying,
/// re-scoring and re-deriving everything. With `keep`, a chain's fold from `data`'s kept
/// file is reused when the freshly verified chain reaches exactly its recorded tip, and
/// the new folds are kept (a kept file that cannot be opened or saved is told to `note`:
/// the replay then folds from genesis, or keeps nothing). The one replay behind
/// `af audit`, `af transcripts` and `af weights show` (the last two never keep one: a
/// cache never stands in for a check).
pub fn replay_kept(
    store: &Store,
    data: &Path,
    keep: bool,
    registry: &crate::envs::Registry,
    progress: Progress<'_>,
    note: &mut dyn FnMut(&str),
) -> Result<Replay, ReplayError> {
    let params = &crate::evaluation::ratio::DEFAULT_RATIO_PARAMS;
    let kept = match keep.then(|| open(data, note)) {
        None => return replay(store, registry, None, params, progress),
        Some(Ok(kept)) => kept,
        Some(Err(error)) => {
            // A read-only copy, or a file another audit holds: nothing is kept this time.
            note(&format!("{error}; nothing is kept, and every chain folds from genesis"));
            return replay(store, registry, None, params, progress);
        }
    };
    let snapshot = Snapshot { replay_version: REPLAY_VERSION, folds: kept.folds };
    let source = Some((snapshot, FoldSource::Untrusted));
    let mut replayed = replay_in(&kept.cold, store, registry, source, params, progress, None)?;
    if let Err(error) = save(&kept.cold, &mut replayed.folds) {
        note(&format!("could not keep the replay (the next run folds from genesis): {error}"));
    }
    Ok(replayed)
}
