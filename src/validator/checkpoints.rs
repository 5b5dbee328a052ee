//! Our replay's fold checkpoints recorded in our own log (ledger-spec/02, "Fold
//! checkpoints"): every half minute the shared replay is read (it folds only what is new)
//! and each log's newest point our log does not claim yet is recorded in one
//! `FoldCheckpoint`. Equal points in other validators' logs are their countersignatures;
//! the folds themselves are kept in `DIR/folds` as the replay passes each point.

use crate::bytes::ValidatorKey;
use crate::evaluation::ratio::RatioParams;
use crate::ledger::{Event, OwnLog};
use crate::replay::fold_checkpoints::to_claim;
use crate::replay::latest_replay::LatestReplay;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::mpsc;

/// `FoldCheckpoint`'s tag (ledger-spec/02).
const FOLD_CHECKPOINT_TAG: u32 = 10;

/// How often the replay is read for new points.
const EVERY_MS: u64 = 30_000;

/// What this run recorded, so a point is not recorded again before the replay has
/// folded our block that records it.
#[derive(Default)]
pub struct CheckpointRecorder {
    sent: BTreeMap<ValidatorKey, u64>,
    last_ms: Option<u64>,
}

impl CheckpointRecorder {
    /// Records new points if the last look was `EVERY_MS` ago; a replay that fails is said
    /// at debug level (the anchoring and the API say it where it matters) and tried again
    /// at the next look.
    pub async fn tick(
        &mut self,
        log: &Arc<OwnLog>,
        replays: &Arc<LatestReplay>,
        events: &mpsc::Sender<Vec<Event>>,
        ratio_params: RatioParams,
        now_ms: u64,
    ) {
        if self.last_ms.is_some_and(|last| now_ms < last.saturating_add(EVERY_MS)) {
            return;
        }
        self.last_ms = Some(now_ms);
        let (log, shared) = (log.clone(), replays.clone());
        let validator = log.validator();
        let replayed = tokio::task::spawn_blocking(move || shared.get(&log.store, &ratio_params)).await;
        let replayed = match replayed {
            Ok(Ok(replayed)) => replayed,
            Ok(Err(error)) => {
                tracing::debug!(event = "fold_checkpoint_wait", error = %error, "no replay for fold checkpoints yet");
                return;
            }
            Err(_) => return,
        };
        // A kind our log's protocol version does not have yet would make our block
        // invalid: the version is the one active at the greatest chain block our log has
        // recorded (the replay's fold of it may lag our log, never lead it).
        let protocol = replays.protocol();
        let seen = replayed.folds.iter().find(|f| f.validator == validator).map_or(0, |f| f.chain_block_seen);
        if protocol.version_at(seen).refuses_kind(FOLD_CHECKPOINT_TAG).is_some() {
            return;
        }
        let Some(mut claim) = to_claim(&replayed.folds, &validator) else { return };
        claim.points.retain(|p| self.sent.get(&p.validator).is_none_or(|sent| *sent < p.height));
        if claim.points.is_empty() {
            return;
        }
        let heights: Vec<(ValidatorKey, u64)> = claim.points.iter().map(|p| (p.validator, p.height)).collect();
        if events.send(vec![Event::FoldCheckpoint(claim)]).await.is_ok() {
            tracing::info!(
                event = "fold_checkpoint",
                logs = heights.len(),
                "recorded fold checkpoints of {} log(s) in our log",
                heights.len()
            );
            self.sent.extend(heights);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluation::ratio::DEFAULT_RATIO_PARAMS;
    use crate::ledger::{LedgerKey, Store};
    use crate::replay::fold_checkpoints::{fold_file, CHECKPOINT_EVERY, FOLDS_DIR};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_new_point_is_recorded_once_and_its_fold_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(OwnLog::new(Store::create(dir.path()).unwrap(), LedgerKey::from_seed([9; 32])));
        let blocks = |from: u64, to: u64| (from..to).map(|h| (vec![], 1_000 + h)).collect::<Vec<_>>();
        log.append_many(blocks(0, CHECKPOINT_EVERY - 2)).unwrap();
        let replays = Arc::new(LatestReplay::kept(dir.path(), &mut |_| {}).unwrap());
        let (events, mut received) = mpsc::channel(4);
        let mut recorder = CheckpointRecorder::default();
        recorder.tick(&log, &replays, &events, DEFAULT_RATIO_PARAMS, 0).await;
        assert!(received.try_recv().is_err(), "no log has reached a checkpoint height");
        log.append_many(blocks(CHECKPOINT_EVERY - 2, CHECKPOINT_EVERY + 3)).unwrap();
        recorder.tick(&log, &replays, &events, DEFAULT_RATIO_PARAMS, 1).await;
        assert!(received.try_recv().is_err(), "the next look is 30 s after the last");
        recorder.tick(&log, &replays, &events, DEFAULT_RATIO_PARAMS, EVERY_MS).await;
        let Event::FoldCheckpoint(claim) = received.try_recv().unwrap().remove(0) else { panic!("a checkpoint") };
        assert_eq!(claim.points.len(), 1);
        let point = claim.points[0];
        assert_eq!((point.validator, point.height), (log.validator(), CHECKPOINT_EVERY - 1));
        let kept = std::fs::read(fold_file(&dir.path().join(FOLDS_DIR), &point.validator, point.height)).unwrap();
        assert_eq!(blake3::hash(&kept).as_bytes(), &point.fold_hash.0);
        // Not recorded again, though our log does not hold the claim yet.
        log.append_many(blocks(CHECKPOINT_EVERY + 3, CHECKPOINT_EVERY + 5)).unwrap();
        recorder.tick(&log, &replays, &events, DEFAULT_RATIO_PARAMS, 2 * EVERY_MS).await;
        assert!(received.try_recv().is_err());
    }
}
