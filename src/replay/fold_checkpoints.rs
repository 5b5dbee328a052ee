//! Fold checkpoints (ledger-spec/02, "Fold checkpoints"): every replay hashes each log's
//! fold when the fold ends at a checkpoint height (every 360th block of that log), a
//! validator records the points its replay reached in its own log (`FoldCheckpoint`),
//! and equal points recorded by several validators are countersignatures. An auditor or
//! a new validator can then start each log from a point a quorum agrees on, with the
//! fold's bytes from anyone (they are checked against the agreed hash), and fold only
//! the blocks after it.
//!
//! A fold at a height depends on that log's blocks up to it and nothing else, so the
//! points of different logs are independent: each log starts from its own.

pub use super::checkpoint_points::{is_checkpoint_height, Checkpoints, Claim, CHECKPOINT_EVERY, FOLD_VERSION};
use super::checkpoint_record::{FoldBytes, FoldRecord};
use super::fold::ChainFold;
use super::spill_file::{SpillFile, SpillFileError};
use crate::bytes::{Hash32, ValidatorKey};
use crate::ledger::codec::{self, CodecError};
use crate::ledger::event::{FoldCheckpoint, FoldPoint};
use crate::limits::MAX_LIST_ITEMS;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A fold's own points kept in it (the newest), so claims of a few tempos ago compare;
/// a replay hashes a log's fold at these last checkpoint heights below its stored tip
/// only (`hash_from`), so a replay from genesis hashes each fold a few times, not once
/// per 360 blocks of its whole history.
const KEPT_POINTS: usize = 8;

/// The first height at which a replay of a log stored up to `tip` hashes its fold.
pub fn hash_from(tip: u64) -> u64 {
    (tip + 1).saturating_sub(KEPT_POINTS as u64 * CHECKPOINT_EVERY)
}

/// Fold files kept per log by a validator (`SpillFile::keep_fold_points_in`): the
/// newest two, so the one its last `FoldCheckpoint` names is there while the next is
/// written.
const KEPT_FILES: usize = 2;

/// Most bytes of a fold read from outside (`decode_fold`).
pub const MAX_FOLD_BYTES: u64 = 1 << 30;

/// blake3 of `fold`'s bytes in the fold format (`checkpoint_record`, ledger-spec/02), its
/// matches read back from the replay's file where spilled.
pub fn fold_hash(fold: &ChainFold) -> Result<Hash32, CodecError> {
    Ok(Hash32(*codec::try_hash_encoding(&FoldBytes(fold), "a log's fold")?.as_bytes()))
}

/// Records `fold`'s point if it ends at a checkpoint height: hashed, and its encoding
/// kept where `spill_file` keeps them (a validator's, which serves them; one that cannot be
/// written is said and the point still taken). Fails only when a spilled match does not
/// read back.
pub fn take_point(cold: &SpillFile, fold: &mut ChainFold, hash_from: u64) -> Result<(), SpillFileError> {
    let Some(tip) = fold.tip.filter(|tip| is_checkpoint_height(tip.height) && tip.height >= hash_from) else {
        return Ok(());
    };
    let (path, validator) = (cold.path().display().to_string(), fold.validator);
    let read_back = |e: CodecError| SpillFileError::Engine {
        path,
        message: format!("reading the fold of {validator} back to hash it at block {}: {e}", tip.height),
    };
    let written = cold.fold_points_dir().map(|dir| write_fold(dir, fold));
    let fold_hash = match written {
        Some(Ok(hash)) => hash,
        Some(Err(error)) => {
            tracing::warn!(
                event = "fold_point_not_kept",
                validator = %validator,
                height = tip.height,
                error = %error,
                "the fold at a checkpoint height was not kept: readers of this point must fetch it from another validator"
            );
            fold_hash(fold).map_err(read_back)?
        }
        None => fold_hash(fold).map_err(read_back)?,
    };
    push_point(fold, FoldPoint { validator, height: tip.height, block_hash: tip.hash, fold_hash });
    Ok(())
}

/// Adds `point` to the fold's own, after it was hashed (a fold does not hold its own hash).
fn push_point(fold: &mut ChainFold, point: FoldPoint) {
    let points = &mut fold.checkpoints.points;
    points.push(point);
    if points.len() > KEPT_POINTS {
        points.remove(0);
    }
}

/// Where a fold is in a site (ledger-spec/11).
pub fn fold_path(validator: &ValidatorKey, height: u64) -> String {
    format!("af/v1/log/{validator}/fold/{height}")
}

/// Where a fold file is in a folder of them: the site's layout, so the folder is a site
/// an auditor can start from and an archive can copy as it is.
pub fn fold_file(dir: &Path, validator: &ValidatorKey, height: u64) -> PathBuf {
    dir.join(fold_path(validator, height))
}

/// The folder of a validator's fold files, in its data directory.
pub const FOLDS_DIR: &str = "folds";

/// Why a fold was not kept.
#[derive(Debug, thiserror::Error)]
pub enum FoldFileError {
    #[error("writing {path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error("encoding the fold: {0}")]
    Encode(CodecError),
}

/// Writes `fold`'s encoding to its file under `dir` durably (a temporary file renamed
/// over it), hashing it on the way, and drops the log's older files past the newest
/// `KEPT_FILES`.
fn write_fold(dir: &Path, fold: &ChainFold) -> Result<Hash32, FoldFileError> {
    let height = fold.tip.map_or(0, |t| t.height);
    let path = fold_file(dir, &fold.validator, height);
    let log_dir = path.parent().expect("a fold file is in its log's directory").to_owned();
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |error| FoldFileError::Io { path, error }
    };
    std::fs::create_dir_all(&log_dir).map_err(io(&log_dir))?;
    let temporary = log_dir.join(format!("{height}.partial"));
    let file = std::fs::File::create(&temporary).map_err(io(&temporary))?;
    let mut out = Tee { file: std::io::BufWriter::new(file), hasher: blake3::Hasher::new() };
    codec::encode_to(&FoldBytes(fold), &mut out, "a log's fold").map_err(FoldFileError::Encode)?;
    let file = out.file.into_inner().map_err(|e| io(&temporary)(e.into_error()))?;
    file.sync_all().map_err(io(&temporary))?;
    std::fs::rename(&temporary, &path).map_err(io(&path))?;
    std::fs::File::open(&log_dir).and_then(|d| d.sync_all()).map_err(io(&log_dir))?;
    let mut heights: Vec<u64> = std::fs::read_dir(&log_dir)
        .map_err(io(&log_dir))?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    heights.sort_unstable();
    for old in heights.iter().rev().skip(KEPT_FILES) {
        let _ = std::fs::remove_file(log_dir.join(old.to_string()));
    }
    Ok(Hash32(*out.hasher.finalize().as_bytes()))
}

/// A writer that hashes what it writes.
struct Tee<W> {
    file: W,
    hasher: blake3::Hasher,
}

impl<W: Write> Write for Tee<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// Why fold bytes are not the agreed point's fold.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FoldBytesError {
    #[error("the fold's bytes hash to {actual}, not the agreed {expected}")]
    Hash { expected: Hash32, actual: Hash32 },
    #[error("the fold does not decode: {0}")]
    Decode(CodecError),
    #[error("the fold is of log {actual}, not {expected}")]
    Validator { expected: ValidatorKey, actual: ValidatorKey },
    #[error("the fold ends at {actual}, not at block {height} with hash {hash}")]
    Tip { height: u64, hash: Hash32, actual: String },
}

/// The fold `bytes` hold, if they are exactly the fold `point` names: hash first, so
/// nothing from a server is decoded before it is known to be the agreed bytes.
pub fn decode_fold(bytes: &[u8], point: &FoldPoint) -> Result<ChainFold, FoldBytesError> {
    let actual = Hash32(*blake3::hash(bytes).as_bytes());
    if actual != point.fold_hash {
        return Err(FoldBytesError::Hash { expected: point.fold_hash, actual });
    }
    let record: FoldRecord =
        codec::decode_canonical(bytes, "a log's fold", MAX_FOLD_BYTES).map_err(FoldBytesError::Decode)?;
    let malformed = |message: String| FoldBytesError::Decode(CodecError::Malformed { what: "a log's fold", message });
    let mut fold = record.into_fold().map_err(malformed)?;
    // Canonical: the fold read back encodes to these very bytes (envs, hotkeys and pairs
    // in their order, nothing twice).
    if codec::encode(&FoldBytes(&fold), "a log's fold", MAX_FOLD_BYTES).map_err(FoldBytesError::Decode)? != bytes {
        return Err(malformed("not in the fold format's order (ledger-spec/02)".into()));
    }
    if fold.validator != point.validator {
        return Err(FoldBytesError::Validator { expected: point.validator, actual: fold.validator });
    }
    match fold.tip {
        Some(tip) if tip.height == point.height && tip.hash == point.block_hash && fold.invalid_at.is_none() => {}
        tip => {
            return Err(FoldBytesError::Tip {
                height: point.height,
                hash: point.block_hash,
                actual: tip.map_or("no block".into(), |t| format!("block {} with hash {}", t.height, t.hash)),
            })
        }
    }
    // The point is the fold's own, as after the replay that hashed it.
    push_point(&mut fold, *point);
    Ok(fold)
}

/// What one replay says of the claims in its logs: per claimed point, whether this
/// replay computed the same fold there.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ClaimsChecked {
    /// Claims equal to this replay's point at the same height.
    pub n_agree: u64,
    /// Claims this replay cannot compare: the log claimed is not folded that far, or the
    /// fold no longer keeps that point.
    pub n_unchecked: u64,
    /// Claims that differ from this replay's point: (claimer, the block recording it,
    /// the point claimed, this replay's fold hash there).
    pub false_claims: Vec<(ValidatorKey, u64, FoldPoint, Hash32)>,
    /// Claims that differ from this replay's point about a log this replay started from a
    /// checkpoint (same fields): either the claimer or the checkpoint's countersigners are
    /// false, and only a replay from genesis tells which, so no one is named false.
    pub disputed: Vec<(ValidatorKey, u64, FoldPoint, Hash32)>,
    /// Points ignored, counted (ledger-spec/02): of another fold format, or past the most
    /// logs a claimer's list is kept for.
    pub n_ignored: u64,
}

/// Compares every log's newest claim of each log with this replay's folds; `started`
/// names the logs this replay started from a checkpoint (and its height), whose folds
/// rest on that checkpoint.
pub fn check_claims(folds: &[ChainFold], started: &BTreeMap<ValidatorKey, u64>) -> ClaimsChecked {
    let by_validator: BTreeMap<ValidatorKey, &ChainFold> = folds.iter().map(|f| (f.validator, f)).collect();
    let mut checked = ClaimsChecked::default();
    for claimer in folds {
        checked.n_ignored += claimer.checkpoints.n_claims_ignored;
        for claim in claimer.checkpoints.claims.values() {
            let ours =
                by_validator.get(&claim.point.validator).and_then(|f| f.checkpoints.point_at(claim.point.height));
            match ours {
                Some(ours) if ours == &claim.point => checked.n_agree += 1,
                Some(ours) => {
                    let rests_on_checkpoint = started.get(&claim.point.validator).is_some_and(|h| *h <= ours.height);
                    let list = if rests_on_checkpoint { &mut checked.disputed } else { &mut checked.false_claims };
                    list.push((claimer.validator, claim.at, claim.point, ours.fold_hash))
                }
                None => checked.n_unchecked += 1,
            }
        }
    }
    checked
}

/// The points a validator's log does not yet claim: each log's newest point in `folds`
/// newer than what `own`'s fold claims of it. `None` when there is nothing new.
pub fn to_claim(folds: &[ChainFold], own: &ValidatorKey) -> Option<FoldCheckpoint> {
    let claimed = folds.iter().find(|f| f.validator == *own).map(|f| &f.checkpoints.claims);
    let points: Vec<FoldPoint> = folds
        .iter()
        .filter_map(|fold| fold.checkpoints.points.last())
        .filter(|point| claimed.and_then(|c| c.get(&point.validator)).is_none_or(|c| c.point.height < point.height))
        .copied()
        .take(MAX_LIST_ITEMS)
        .collect();
    // Folds are in validator order, so the points are too (ledger-spec/02).
    (!points.is_empty()).then_some(FoldCheckpoint { fold_version: FOLD_VERSION, points })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::Tip;

    fn point(v: u8, height: u64) -> FoldPoint {
        FoldPoint {
            validator: ValidatorKey([v; 32]),
            height,
            block_hash: Hash32([v; 32]),
            fold_hash: Hash32([height as u8; 32]),
        }
    }

    #[test]
    fn a_log_keeps_its_newest_claim_of_each_log_and_counts_what_it_ignores() {
        let mut checkpoints = Checkpoints::default();
        let claim = |points| FoldCheckpoint { fold_version: FOLD_VERSION, points };
        checkpoints.claim(10, &claim(vec![point(1, 719), point(2, 359)]));
        // An older point claimed later does not hide the newer one.
        checkpoints.claim(11, &claim(vec![point(1, 359)]));
        checkpoints.claim(12, &FoldCheckpoint { fold_version: FOLD_VERSION + 1, points: vec![point(2, 719)] });
        assert_eq!(checkpoints.claims[&ValidatorKey([1; 32])], Claim { at: 10, point: point(1, 719) });
        assert_eq!(checkpoints.claims[&ValidatorKey([2; 32])].point.height, 359);
        assert_eq!(checkpoints.n_claims_ignored, 1, "another fold format");
        // A height no replay hashes a fold at is no claim either; an empty list is nothing.
        checkpoints.claim(13, &claim(vec![point(3, 500)]));
        checkpoints.claim(14, &claim(vec![]));
        assert!(!checkpoints.claims.contains_key(&ValidatorKey([3; 32])));
        assert_eq!(checkpoints.n_claims_ignored, 2, "a point at no checkpoint height");
        // And the audit's count says so (it was 0 agree, 0 unchecked, 0 false before).
        let mut fold = ChainFold::new(ValidatorKey([9; 32]));
        fold.checkpoints = checkpoints;
        assert_eq!(check_claims(std::slice::from_ref(&fold), &BTreeMap::new()).n_ignored, 2);
    }

    #[test]
    fn fold_bytes_are_taken_only_as_the_point_names_them() {
        let mut fold = ChainFold::new(ValidatorKey([4; 32]));
        fold.tip = Some(Tip { height: 359, hash: Hash32([5; 32]), time_ms: 1 });
        let bytes = codec::encode(&FoldBytes(&fold), "fold", MAX_FOLD_BYTES).unwrap();
        let hash = Hash32(*blake3::hash(&bytes).as_bytes());
        let agreed = FoldPoint { validator: fold.validator, height: 359, block_hash: Hash32([5; 32]), fold_hash: hash };
        let taken = decode_fold(&bytes, &agreed).unwrap();
        assert_eq!(taken.checkpoints.points, [agreed], "the point is the fold's own, as after hashing it");
        let mut other = bytes.clone();
        *other.last_mut().unwrap() ^= 1;
        assert!(matches!(decode_fold(&other, &agreed), Err(FoldBytesError::Hash { .. })));
        let elsewhere = FoldPoint { height: 719, ..agreed };
        assert!(matches!(decode_fold(&bytes, &elsewhere), Err(FoldBytesError::Tip { .. })));
        let someone_else = FoldPoint { validator: ValidatorKey([6; 32]), ..agreed };
        assert!(matches!(decode_fold(&bytes, &someone_else), Err(FoldBytesError::Validator { .. })));
        let trailing = [bytes.as_slice(), &[0]].concat();
        let with_trailing = FoldPoint { fold_hash: Hash32(*blake3::hash(&trailing).as_bytes()), ..agreed };
        assert!(matches!(decode_fold(&trailing, &with_trailing), Err(FoldBytesError::Decode(_))));
    }
}
