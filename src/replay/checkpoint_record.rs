//! A log's fold as fold checkpoints hash and carry it (ledger-spec/02, "The fold
//! format"): the values ledger-spec/14 folds a log into, and nothing an implementation
//! keeps for its own reports (findings' texts, the chain commitments and weights its log
//! recorded, caches), so that a second implementation written from the spec computes the
//! same bytes from the same blocks, checks a claim, and may countersign one. A fold read
//! back from these bytes folds on exactly as the fold they were taken from; what it lacks
//! is report data about the blocks below the point, which a start from a checkpoint does
//! not check anyway.

use super::fold::ChainFold;
use super::records::{DecidedFold, EnvFold, EnvFolds, EquivocationFound, FindingCounts, MatchFold, Name};
use crate::bytes::{Hash32, MatchId, ValidatorKey};
use crate::ledger::event::{EnvOutcome, EnvRef, MinerRef};
use crate::ledger::Tip;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The fold format these bytes are: a `FoldCheckpoint`'s `fold_version` names it.
pub use super::checkpoint_points::FOLD_VERSION as FOLD_FORMAT;

/// ledger-spec/02 lists each field, in this order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoldRecord {
    pub fold_format: u32,
    pub validator: ValidatorKey,
    /// (height, hash, time_ms) of the last block folded.
    pub tip: Option<(u64, Hash32, u64)>,
    pub invalid_at: Option<u64>,
    pub chain_block_seen: u64,
    pub n_events: u64,
    pub n_transcripts: u64,
    pub n_decided: u64,
    /// One count per finding kind, in kind order (ledger-spec/14, section 4).
    pub findings: Vec<u64>,
    /// (accused, height, hash of header a, hash of header b, height and event index of
    /// the evidence), in log order.
    pub equivocations: Vec<(ValidatorKey, u64, Hash32, Hash32, u64, u32)>,
    /// In the order the log started them.
    pub matches: Vec<MatchRecord>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchRecord {
    pub match_id: MatchId,
    pub contender: MinerRef,
    pub champion: MinerRef,
    pub envs: Vec<EnvRef>,
    pub rule: String,
    pub ratio_to_beat_ppm: u32,
    pub started_height: u64,
    pub started_event_idx: u32,
    pub started_time_ms: u64,
    pub chain_block: u64,
    pub chain_block_hash: Hash32,
    pub network_rules: bool,
    pub n_transcripts: u64,
    /// In env name order (bytewise).
    pub env_folds: Vec<EnvRecord>,
    pub decided: Option<DecidedFold>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvRecord {
    pub name: String,
    pub next_contender: u64,
    pub next_champion: u64,
    /// Next index due from each other hotkey, in hotkey order (bytewise).
    pub next_other: Vec<(String, u64)>,
    /// (index, contender's reward, champion's reward) of each incomplete pair, by index.
    pub pending: Vec<(u64, Option<i32>, Option<i32>)>,
    pub wins: u32,
    pub losses: u32,
    pub draws: u32,
    pub decision: Option<EnvOutcome>,
    pub decided_tally: Option<(u32, u32, u32)>,
}

fn miner(m: &MinerRef<Name>) -> MinerRef {
    MinerRef { hotkey: m.hotkey.to_string(), uid: m.uid, model: m.model.to_string() }
}

fn held(m: MinerRef) -> MinerRef<Name> {
    MinerRef { hotkey: m.hotkey.into(), uid: m.uid, model: m.model.into() }
}

impl FoldRecord {
    /// The fold this record describes, ready to fold on, or why no fold has it (another
    /// format, a count list of another length, a match listed twice). Report data
    /// (findings' texts, commitments, weights and skips recorded below the point, claims)
    /// starts empty. Its bytes are canonical only if the fold encodes back to them
    /// (`fold_checkpoints::decode_fold` checks).
    pub fn into_fold(self) -> Result<ChainFold, String> {
        if self.fold_format != FOLD_FORMAT {
            return Err(format!("fold format {}, not {FOLD_FORMAT}", self.fold_format));
        }
        let findings = FindingCounts::from_counts(&self.findings)
            .ok_or_else(|| format!("{} finding counts, not one per kind", self.findings.len()))?;
        let mut fold = ChainFold::new(self.validator);
        fold.tip = self.tip.map(|(height, hash, time_ms)| Tip { height, hash, time_ms });
        fold.invalid_at = self.invalid_at;
        fold.chain_block_seen = self.chain_block_seen;
        fold.n_events = self.n_events;
        fold.n_transcripts = self.n_transcripts;
        fold.n_decided = self.n_decided;
        fold.findings = findings;
        for (accused, height, hash_a, hash_b, at, idx) in self.equivocations {
            fold.equivocations.push(EquivocationFound { accused, height, hash_a, hash_b, recorded_at: (at, idx) });
        }
        let mut last = None;
        for m in self.matches {
            if fold.matches.contains(&m.match_id) {
                return Err(format!("match {} is listed twice", m.match_id));
            }
            let envs: Arc<[EnvRef<Name>]> =
                m.envs.into_iter().map(|e| EnvRef { name: e.name.into(), version: e.version }).collect();
            let env_folds: EnvFolds = m.env_folds.into_iter().map(env_fold).collect();
            fold.matches.insert(
                m.match_id,
                MatchFold {
                    contender: held(m.contender),
                    champion: held(m.champion),
                    envs,
                    rule: m.rule.into(),
                    ratio_to_beat_ppm: m.ratio_to_beat_ppm,
                    started_height: m.started_height,
                    started_event_idx: m.started_event_idx,
                    started_time_ms: m.started_time_ms,
                    chain_block: m.chain_block,
                    chain_block_hash: m.chain_block_hash,
                    env_folds,
                    decided: m.decided,
                    n_transcripts: m.n_transcripts,
                    network_rules: m.network_rules,
                },
            );
            last = Some(m.match_id);
        }
        fold.last_started = last;
        fold.share_names();
        Ok(fold)
    }
}

/// `fold`'s record as bytes are written: the same encoding as [`FoldRecord::of`]'s, but
/// with the matches read and encoded one at a time in log order, so hashing or writing
/// the fold of a long log holds one match at a time, not a copy of all of them.
pub struct FoldBytes<'f>(pub &'f ChainFold);

impl Serialize for FoldBytes<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeSeq, SerializeStruct};
        let fold = self.0;
        struct Matches<'f>(&'f ChainFold);
        impl Serialize for Matches<'_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut seq = serializer.serialize_seq(Some(self.0.matches.len()))?;
                let mut n = 0;
                for read in self.0.matches.in_log_order() {
                    let (id, m) = read.map_err(S::Error::custom)?;
                    seq.serialize_element(&match_record(id, &m))?;
                    n += 1;
                }
                if n != self.0.matches.len() {
                    return Err(S::Error::custom("a spilled match did not read back from the replay's file"));
                }
                seq.end()
            }
        }
        let equivocations: Vec<_> = fold
            .equivocations
            .iter()
            .map(|e| e.map(|e| (e.accused, e.height, e.hash_a, e.hash_b, e.recorded_at.0, e.recorded_at.1)))
            .collect::<Result<_, _>>()
            .map_err(S::Error::custom)?;
        let mut s = serializer.serialize_struct("FoldRecord", 11)?;
        s.serialize_field("fold_format", &FOLD_FORMAT)?;
        s.serialize_field("validator", &fold.validator)?;
        s.serialize_field("tip", &fold.tip.map(|t| (t.height, t.hash, t.time_ms)))?;
        s.serialize_field("invalid_at", &fold.invalid_at)?;
        s.serialize_field("chain_block_seen", &fold.chain_block_seen)?;
        s.serialize_field("n_events", &fold.n_events)?;
        s.serialize_field("n_transcripts", &fold.n_transcripts)?;
        s.serialize_field("n_decided", &fold.n_decided)?;
        s.serialize_field("findings", fold.findings.counts())?;
        s.serialize_field("equivocations", &equivocations)?;
        s.serialize_field("matches", &Matches(fold))?;
        s.end()
    }
}

fn match_record(id: MatchId, m: &MatchFold) -> MatchRecord {
    MatchRecord {
        match_id: id,
        contender: miner(&m.contender),
        champion: miner(&m.champion),
        envs: m.envs.iter().map(|e| EnvRef { name: e.name.to_string(), version: e.version }).collect(),
        rule: m.rule.to_string(),
        ratio_to_beat_ppm: m.ratio_to_beat_ppm,
        started_height: m.started_height,
        started_event_idx: m.started_event_idx,
        started_time_ms: m.started_time_ms,
        chain_block: m.chain_block,
        chain_block_hash: m.chain_block_hash,
        network_rules: m.network_rules,
        n_transcripts: m.n_transcripts,
        env_folds: m
            .env_folds
            .iter()
            .map(|(name, e)| EnvRecord {
                name: name.to_string(),
                next_contender: e.next_contender,
                next_champion: e.next_champion,
                next_other: e.next_other.iter().flat_map(|o| o.iter()).map(|(h, n)| (h.clone(), *n)).collect(),
                pending: e.pending.iter().flat_map(|p| p.iter()).map(|(i, (c, ch))| (*i, *c, *ch)).collect(),
                wins: e.wins,
                losses: e.losses,
                draws: e.draws,
                decision: e.decision,
                decided_tally: e.decided_tally,
            })
            .collect(),
        decided: m.decided.clone(),
    }
}

fn env_fold(e: EnvRecord) -> (Name, EnvFold) {
    let fold = EnvFold {
        next_contender: e.next_contender,
        next_champion: e.next_champion,
        next_other: (!e.next_other.is_empty()).then(|| Box::new(e.next_other.into_iter().collect())),
        pending: (!e.pending.is_empty())
            .then(|| Box::new(e.pending.into_iter().map(|(i, c, ch)| (i, (c, ch))).collect())),
        wins: e.wins,
        losses: e.losses,
        draws: e.draws,
        decision: e.decision,
        decided_tally: e.decided_tally,
    };
    (e.name.into(), fold)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::codec;
    use crate::ledger::event::FoldPoint;
    use crate::replay::fold_checkpoints::{decode_fold, FoldBytesError, MAX_FOLD_BYTES};

    fn env(name: &str, wins: u32) -> EnvRecord {
        EnvRecord {
            name: name.into(),
            next_contender: 3,
            next_champion: 2,
            next_other: vec![("5Other".into(), 1)],
            pending: vec![(2, Some(500), None)],
            wins,
            losses: 1,
            draws: 0,
            decision: None,
            decided_tally: None,
        }
    }

    fn record(env_folds: Vec<EnvRecord>) -> FoldRecord {
        let miner = |hotkey: &str| MinerRef { hotkey: hotkey.into(), uid: 1, model: "m".into() };
        FoldRecord {
            fold_format: FOLD_FORMAT,
            validator: ValidatorKey([7; 32]),
            tip: Some((359, Hash32([8; 32]), 1_000)),
            invalid_at: None,
            chain_block_seen: 5,
            n_events: 10,
            n_transcripts: 6,
            n_decided: 0,
            findings: vec![0; crate::replay::records::DiscrepancyKind::ALL.len()],
            equivocations: vec![],
            matches: vec![MatchRecord {
                match_id: Hash32([9; 32]),
                contender: miner("5A"),
                champion: miner("5B"),
                envs: vec![EnvRef { name: "abd".into(), version: 1 }, EnvRef { name: "mult".into(), version: 1 }],
                rule: "rule".into(),
                ratio_to_beat_ppm: 510_000,
                started_height: 0,
                started_event_idx: 0,
                started_time_ms: 1,
                chain_block: 5,
                chain_block_hash: Hash32([1; 32]),
                network_rules: true,
                n_transcripts: 6,
                env_folds,
                decided: None,
            }],
        }
    }

    fn point(bytes: &[u8]) -> FoldPoint {
        let fold_hash = Hash32(*blake3::hash(bytes).as_bytes());
        FoldPoint { validator: ValidatorKey([7; 32]), height: 359, block_hash: Hash32([8; 32]), fold_hash }
    }

    #[test]
    fn a_record_reads_back_into_a_fold_that_writes_the_same_bytes_and_one_out_of_order_is_refused() {
        let bytes = codec::encode(&record(vec![env("abd", 2), env("mult", 1)]), "fold", MAX_FOLD_BYTES).unwrap();
        let fold = decode_fold(&bytes, &point(&bytes)).unwrap();
        assert_eq!(codec::encode(&FoldBytes(&fold), "fold", MAX_FOLD_BYTES).unwrap(), bytes);
        let abd = fold.matches.get(&Hash32([9; 32])).unwrap().unwrap().env_folds.get("abd").cloned().unwrap();
        assert_eq!((abd.wins, abd.pending.map(|p| p.len())), (2, Some(1)));
        // The same values with the envs out of name order: not a fold, whatever its hash.
        let swapped = codec::encode(&record(vec![env("mult", 1), env("abd", 2)]), "fold", MAX_FOLD_BYTES).unwrap();
        assert!(matches!(decode_fold(&swapped, &point(&swapped)), Err(FoldBytesError::Decode(_))));
        // An env named twice, and a count list of another length, neither.
        let twice = codec::encode(&record(vec![env("abd", 2), env("abd", 2)]), "fold", MAX_FOLD_BYTES).unwrap();
        assert!(matches!(decode_fold(&twice, &point(&twice)), Err(FoldBytesError::Decode(_))));
        let mut short = record(vec![env("abd", 2)]);
        short.findings.pop();
        let short = codec::encode(&short, "fold", MAX_FOLD_BYTES).unwrap();
        assert!(matches!(decode_fold(&short, &point(&short)), Err(FoldBytesError::Decode(_))));
    }
}
