//! Contenders from the chain (ledger-spec/13): from the metagraph and every hotkey's
//! commitment, which registered miners committed a model, which of them are the same
//! model (sybil collapse: the oldest commitment keeps it), and in what order the rest
//! play the champion. Pure over what the caller read from the chain and what our log
//! says was played, so replay can make the same decisions from the same inputs.

use crate::chain::miner::{MinerCommitment, ModelIdentity};
use crate::chain::{CommitmentRecord, Neuron};
use crate::ledger::event::LeaveReason;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// A registered miner's valid commitment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Candidate {
    pub hotkey: String,
    pub uid: u16,
    pub registration_block: u64,
    pub commit_block: u64,
    pub commitment: MinerCommitment,
}

/// Chutes' OpenAI-compatible API, for `chutes:SLUG` endpoints (bearer token in
/// `CHUTES_API_KEY`).
pub const CHUTES_BASE_URL: &str = "https://llm.chutes.ai";
pub const CHUTES_API_KEY_ENV: &str = "CHUTES_API_KEY";

/// Where a validator sends a committed model's requests.
pub fn endpoint_of(commitment: &MinerCommitment) -> crate::miner::client::Endpoint {
    match commitment.endpoint.strip_prefix("chutes:") {
        Some(slug) => crate::miner::client::Endpoint {
            base_url: CHUTES_BASE_URL.into(),
            model: slug.into(),
            api_key_env: Some(CHUTES_API_KEY_ENV.into()),
        },
        None => crate::miner::client::Endpoint {
            base_url: commitment.endpoint.clone(),
            model: commitment.model.clone(),
            api_key_env: None,
        },
    }
}

impl Candidate {
    fn order_key(&self) -> (u64, u16, &str) {
        (self.commit_block, self.uid, &self.hotkey)
    }
}

/// Why a registered hotkey's commitment is not in the queue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Skipped {
    /// Another hotkey committed the same model and revision earlier.
    Duplicate { candidate: Candidate, kept_by: String, kept_uid: u16, kept_block: u64 },
    /// The champion serves this very model and revision.
    SameAsChampion { candidate: Candidate, champion: String, champion_block: u64 },
    /// This hotkey already played a match with this model.
    AlreadyPlayed { candidate: Candidate },
    /// A commitment made before the hotkey's current registration (a previous holder's,
    /// or its own before a deregistration): it must commit again.
    Stale { hotkey: String, uid: u16, commit_block: u64, registration_block: u64 },
    /// Commitment fields that do not read as a miner commitment (a validator's ledger
    /// commitment is not listed here).
    Invalid { hotkey: String, uid: u16, commit_block: u64, error: String },
}

impl Skipped {
    /// The hotkey whose commitment was skipped.
    pub fn hotkey(&self) -> &str {
        match self {
            Skipped::Duplicate { candidate, .. }
            | Skipped::SameAsChampion { candidate, .. }
            | Skipped::AlreadyPlayed { candidate } => &candidate.hotkey,
            Skipped::Stale { hotkey, .. } | Skipped::Invalid { hotkey, .. } => hotkey,
        }
    }

    /// Why, in words for the miner.
    pub fn describe(&self) -> String {
        match self {
            Skipped::Duplicate { kept_by, kept_uid, kept_block, .. } => {
                format!("the same model and revision was committed earlier by {kept_by} (uid {kept_uid}, block {kept_block})")
            }
            Skipped::SameAsChampion { .. } => "it is the champion's model".into(),
            Skipped::AlreadyPlayed { .. } => "already played with this model".into(),
            Skipped::Stale { commit_block, registration_block, .. } => format!(
                "its commitment (block {commit_block}) predates its registration (block {registration_block}): commit again"
            ),
            Skipped::Invalid { error, .. } => format!("its commitment does not read: {error}"),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Discovery {
    /// Contenders to play, oldest commitment first (then lower uid, then hotkey).
    pub queue: Vec<Candidate>,
    pub skipped: Vec<Skipped>,
    /// Every registered miner's valid commitment in queue order, the champion's included
    /// (where validators find the endpoint of a miner their log names).
    #[serde(skip)]
    pub valid: Vec<Candidate>,
    /// The chain block at which the commitments were read (set by the caller).
    #[serde(skip)]
    pub read_at_block: u64,
    /// Why the champion the log names no longer holds the crown on chain, if it does not
    /// (ledger-spec/13, "The champion's life").
    #[serde(skip)]
    pub champion_left: Option<LeaveReason>,
}

/// How the log records a miner from the chain: `MinerRef.model` is `MODEL@REVISION`
/// (ledger-spec/13), so the log alone says which model and revision played.
pub fn recorded_model(commitment: &MinerCommitment) -> String {
    format!("{}@{}", commitment.model, commitment.revision)
}

/// The model identity in a recorded `MODEL@REVISION` (none for a `[[miners]]` name).
pub fn recorded_identity(model: &str) -> Option<ModelIdentity> {
    let (model, revision) = model.rsplit_once('@')?;
    Some(ModelIdentity { model: model.into(), revision: revision.into() })
}

/// The miners a log says played: (hotkey, model identity) pairs.
pub trait PlayedModels {
    fn played(&self, hotkey: &str, identity: &ModelIdentity) -> bool;
}

impl PlayedModels for BTreeSet<(String, ModelIdentity)> {
    fn played(&self, hotkey: &str, identity: &ModelIdentity) -> bool {
        self.contains(&(hotkey.to_string(), identity.clone()))
    }
}

/// The skipped commitments a log recorded: (hotkey, commitment block) pairs.
pub trait SkipsRecorded {
    /// Adds the pair; whether it was new.
    fn record(&mut self, hotkey: &str, commit_block: u64) -> bool;
}

impl SkipsRecorded for BTreeSet<(String, u64)> {
    fn record(&mut self, hotkey: &str, commit_block: u64) -> bool {
        self.insert((hotkey.to_string(), commit_block))
    }
}

/// The model a commitment of `identity` is recorded as, if recording it and reading it
/// back gives `identity` (a revision holding an `@` does not: it was never recorded as
/// itself, so it never played).
pub fn identity_recorded(identity: &ModelIdentity) -> Option<String> {
    let recorded = format!("{}@{}", identity.model, identity.revision);
    (recorded_identity(&recorded).as_ref() == Some(identity)).then_some(recorded)
}

/// The champion as discovery needs it: its hotkey and model identity (none for a
/// champion from `[[miners]]` whose revision is unknown).
pub struct ChampionRef<'a> {
    pub hotkey: &'a str,
    pub identity: Option<&'a ModelIdentity>,
}

/// The queue a validator plays next, given what its log folds to: its champion and the
/// (hotkey, recorded model) pairs that played. `af validate` and `af mine status` both
/// call this, so what a miner is told is the queue the validator will play.
pub fn queue_of(
    neurons: &[Neuron],
    records: &[CommitmentRecord],
    champion: Option<&crate::ledger::event::MinerRef>,
    played: &dyn PlayedModels,
) -> Discovery {
    let identity = champion.and_then(|c| recorded_identity(&c.model));
    let champion_ref = champion.map(|c| ChampionRef { hotkey: c.hotkey.as_str(), identity: identity.as_ref() });
    let mut found = discover(neurons, records, champion_ref, played);
    // A champion from the chain (its recorded model names a revision) stands while its
    // hotkey is registered and commits the model and revision it won with.
    if let Some(champion) = champion.filter(|_| identity.is_some()) {
        found.champion_left = if !neurons.iter().any(|n| n.hotkey == champion.hotkey) {
            Some(LeaveReason::Deregistered)
        } else if found
            .valid
            .iter()
            .any(|c| c.hotkey == champion.hotkey && recorded_model(&c.commitment) == champion.model)
        {
            None
        } else {
            Some(LeaveReason::Recommitted)
        };
    }
    found
}

/// Decides the queue. `played` holds (hotkey, model identity) pairs our log says played
/// a match as contender; commitments of hotkeys not in `neurons` (deregistered) are
/// ignored.
pub fn discover(
    neurons: &[Neuron],
    records: &[CommitmentRecord],
    champion: Option<ChampionRef<'_>>,
    played: &dyn PlayedModels,
) -> Discovery {
    let by_hotkey: BTreeMap<&str, &Neuron> = neurons.iter().map(|n| (n.hotkey.as_str(), n)).collect();
    let mut discovery = Discovery::default();
    let mut valid: Vec<Candidate> = Vec::new();
    for record in records {
        let Some(neuron) = by_hotkey.get(record.hotkey.as_str()) else { continue };
        if record.ledger().is_some() {
            continue; // a validator's ledger commitment
        }
        if record.block < neuron.registration_block {
            discovery.skipped.push(Skipped::Stale {
                hotkey: record.hotkey.clone(),
                uid: neuron.uid,
                commit_block: record.block,
                registration_block: neuron.registration_block,
            });
            continue;
        }
        let read = record.miner();
        match read {
            Ok(commitment) => valid.push(Candidate {
                hotkey: record.hotkey.clone(),
                uid: neuron.uid,
                registration_block: neuron.registration_block,
                commit_block: record.block,
                commitment,
            }),
            Err(error) => discovery.skipped.push(Skipped::Invalid {
                hotkey: record.hotkey.clone(),
                uid: neuron.uid,
                commit_block: record.block,
                error,
            }),
        }
    }
    valid.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
    discovery.valid = valid.clone();
    // The oldest commitment of each model identity keeps it.
    let mut keeper: BTreeMap<ModelIdentity, &Candidate> = BTreeMap::new();
    for candidate in &valid {
        keeper.entry(candidate.commitment.identity()).or_insert(candidate);
    }
    for candidate in &valid {
        let identity = candidate.commitment.identity();
        let kept = keeper[&identity];
        if kept.hotkey != candidate.hotkey {
            discovery.skipped.push(Skipped::Duplicate {
                candidate: candidate.clone(),
                kept_by: kept.hotkey.clone(),
                kept_uid: kept.uid,
                kept_block: kept.commit_block,
            });
        } else if champion.as_ref().is_some_and(|c| c.hotkey == candidate.hotkey) {
            // The champion defends; it is not its own contender.
        } else if champion.as_ref().and_then(|c| c.identity).is_some_and(|id| *id == identity) {
            let champion = champion.as_ref().map_or(String::new(), |c| c.hotkey.to_string());
            let champion_block = valid.iter().find(|c| c.hotkey == champion).map_or(0, |c| c.commit_block);
            discovery.skipped.push(Skipped::SameAsChampion { candidate: candidate.clone(), champion, champion_block });
        } else if played.played(&candidate.hotkey, &identity) {
            discovery.skipped.push(Skipped::AlreadyPlayed { candidate: candidate.clone() });
        } else {
            discovery.queue.push(candidate.clone());
        }
    }
    discovery
}

/// The `MinerSkipped` events (ledger-spec/02, tag 9) for this read's duplicates and
/// copies of the champion not yet in `recorded` ((hotkey, commitment block) pairs),
/// which gains them: each skipped commitment is recorded once.
pub fn skip_events(
    found: &Discovery,
    netuid: u16,
    chain_block: u64,
    recorded: &mut dyn SkipsRecorded,
) -> Vec<crate::ledger::event::MinerSkipped> {
    use crate::ledger::event::{MinerSkipped, SkipReason};
    let mut events = Vec::new();
    for skipped in &found.skipped {
        let (candidate, reason, kept_by, kept_block) = match skipped {
            Skipped::Duplicate { candidate, kept_by, kept_block, .. } => {
                (candidate, SkipReason::Duplicate, kept_by, *kept_block)
            }
            Skipped::SameAsChampion { candidate, champion, champion_block } => {
                (candidate, SkipReason::SameAsChampion, champion, *champion_block)
            }
            _ => continue,
        };
        if !recorded.record(&candidate.hotkey, candidate.commit_block) {
            continue;
        }
        events.push(MinerSkipped {
            netuid,
            hotkey: candidate.hotkey.clone(),
            uid: candidate.uid,
            model: candidate.commitment.model.clone(),
            revision: candidate.commitment.revision.clone(),
            commit_block: candidate.commit_block,
            reason,
            kept_by: kept_by.clone(),
            kept_block,
            chain_block,
        });
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::{Hash32, ValidatorKey};
    use crate::chain::LedgerCommitment;

    fn none() -> BTreeSet<(String, ModelIdentity)> {
        BTreeSet::new()
    }

    fn neuron(uid: u16, hotkey: &str, registered: u64) -> Neuron {
        Neuron { uid, hotkey: hotkey.into(), registration_block: registered, validator_permit: false }
    }

    fn commit(hotkey: &str, block: u64, model: &str, revision: &str) -> CommitmentRecord {
        let c = MinerCommitment::new(model, revision, &format!("http://127.0.0.1/{hotkey}")).unwrap();
        CommitmentRecord::new(hotkey, block, c.to_fields().unwrap())
    }

    fn hotkeys(queue: &[Candidate]) -> Vec<&str> {
        queue.iter().map(|c| c.hotkey.as_str()).collect()
    }

    #[test]
    fn a_champion_stands_while_registered_with_the_model_it_won_with_and_leaves_otherwise() {
        let champion = crate::ledger::event::MinerRef { hotkey: "champ".into(), uid: 1, model: "m/c@1".into() };
        let neurons = [neuron(1, "champ", 10), neuron(2, "next", 10)];
        let stands = [commit("champ", 50, "m/c", "1"), commit("next", 60, "m/n", "1")];
        let left = |neurons: &[Neuron], records: &[CommitmentRecord]| {
            queue_of(neurons, records, Some(&champion), &none()).champion_left
        };
        assert_eq!(left(&neurons, &stands), None);
        // Its uid given to another hotkey (deregistered, or swapped away).
        let taken = [neuron(1, "newcomer", 90), neuron(2, "next", 10)];
        assert_eq!(left(&taken, &stands), Some(LeaveReason::Deregistered));
        // Another revision committed, or no valid commitment at all.
        let other = [commit("champ", 70, "m/c", "2"), commit("next", 60, "m/n", "1")];
        assert_eq!(left(&neurons, &other), Some(LeaveReason::Recommitted));
        assert_eq!(left(&neurons, &stands[1..]), Some(LeaveReason::Recommitted));
        // A champion from [[miners]] (no revision recorded) is not judged by the chain.
        let configured = crate::ledger::event::MinerRef { hotkey: "champ".into(), uid: 1, model: "m".into() };
        assert_eq!(queue_of(&taken, &stands, Some(&configured), &none()).champion_left, None);
    }

    #[test]
    fn the_queue_is_oldest_commitment_first_and_a_recommit_with_a_new_model_queues_again() {
        let neurons = [neuron(1, "a", 10), neuron(2, "b", 10), neuron(3, "c", 10)];
        let records = [commit("c", 50, "m/c", "1"), commit("a", 70, "m/a", "1"), commit("b", 50, "m/b", "1")];
        let d = discover(&neurons, &records, None, &none());
        // Same block: lower uid first.
        assert_eq!(hotkeys(&d.queue), ["b", "c", "a"]);
        // b has played m/b; a new revision from b queues it again, at its new block.
        let played = BTreeSet::from([("b".to_string(), ModelIdentity { model: "m/b".into(), revision: "1".into() })]);
        let d = discover(&neurons, &records, None, &played);
        assert_eq!(hotkeys(&d.queue), ["c", "a"]);
        assert!(matches!(&d.skipped[..], [Skipped::AlreadyPlayed { candidate }] if candidate.hotkey == "b"));
        let recommitted = [commit("c", 50, "m/c", "1"), commit("a", 70, "m/a", "1"), commit("b", 90, "m/b", "2")];
        assert_eq!(hotkeys(&discover(&neurons, &recommitted, None, &played).queue), ["c", "a", "b"]);
    }

    #[test]
    fn the_same_model_and_revision_is_one_model_kept_by_the_oldest_commitment() {
        let neurons = [neuron(1, "early", 10), neuron(2, "late", 10), neuron(3, "other", 10)];
        let records =
            [commit("late", 80, "m/x", "r"), commit("early", 60, "m/x", "r"), commit("other", 70, "m/x", "r2")];
        let d = discover(&neurons, &records, None, &none());
        assert_eq!(hotkeys(&d.queue), ["early", "other"]);
        match &d.skipped[..] {
            [Skipped::Duplicate { candidate, kept_by, kept_uid, kept_block }] => {
                assert_eq!((candidate.hotkey.as_str(), candidate.commit_block), ("late", 80));
                assert_eq!((kept_by.as_str(), *kept_uid, *kept_block), ("early", 1, 60));
            }
            other => panic!("{other:?}"),
        }
        // A duplicate stays one after the keeper has played: it never plays.
        let played =
            BTreeSet::from([("early".to_string(), ModelIdentity { model: "m/x".into(), revision: "r".into() })]);
        let d = discover(&neurons, &records, None, &played);
        assert_eq!(hotkeys(&d.queue), ["other"]);
        assert!(d
            .skipped
            .iter()
            .any(|s| matches!(s, Skipped::Duplicate { candidate, .. } if candidate.hotkey == "late")));
    }

    #[test]
    fn the_champions_model_the_champion_itself_and_deregistered_or_stale_commitments_do_not_play() {
        let identity = ModelIdentity { model: "m/champ".into(), revision: "1".into() };
        // "copy" commits the champion's model before the champion's own commitment block
        // is known here (the champion came from [[miners]]): it is the champion's model.
        let neurons = [neuron(0, "champ", 1), neuron(1, "copy", 10), neuron(2, "reused", 100), neuron(3, "new", 10)];
        let records = [
            commit("copy", 20, "m/champ", "1"),
            commit("gone", 20, "m/gone", "1"),  // deregistered: not in the metagraph
            commit("reused", 40, "m/old", "1"), // made before its uid's registration at 100
            commit("new", 30, "m/new", "1"),
            commit("champ", 5, "m/champ-self", "1"),
        ];
        let champion = ChampionRef { hotkey: "champ", identity: Some(&identity) };
        let d = discover(&neurons, &records, Some(champion), &none());
        assert_eq!(hotkeys(&d.queue), ["new"]);
        assert!(d
            .skipped
            .iter()
            .any(|s| matches!(s, Skipped::SameAsChampion { candidate, champion, champion_block: 5 } if candidate.hotkey == "copy" && champion == "champ")));
        assert!(d.skipped.iter().any(
            |s| matches!(s, Skipped::Stale { hotkey, commit_block: 40, registration_block: 100, .. } if hotkey == "reused")
        ));
        assert!(!format!("{d:?}").contains("gone"));
    }

    #[test]
    fn validator_commitments_are_not_miners_and_garbage_is_skipped_by_name() {
        let neurons = [neuron(1, "v", 1), neuron(2, "junk", 1)];
        let ledger = LedgerCommitment {
            tip_hash: Hash32([1; 32]),
            ledger_key: ValidatorKey([2; 32]),
            tip_height: 3,
            protocol: None,
        };
        let records = [
            CommitmentRecord::new("v", 5, ledger.fields()),
            CommitmentRecord::new("junk", 5, vec![b"{\"model\":".to_vec()]),
        ];
        let d = discover(&neurons, &records, None, &none());
        assert!(d.queue.is_empty());
        assert!(matches!(&d.skipped[..], [Skipped::Invalid { hotkey, .. }] if hotkey == "junk"));
    }

    #[test]
    fn each_skipped_commitment_is_recorded_once() {
        let neurons = [neuron(1, "early", 10), neuron(2, "late", 10)];
        let records = [commit("early", 60, "m/x", "r"), commit("late", 80, "m/x", "r")];
        let found = discover(&neurons, &records, None, &none());
        let mut recorded: BTreeSet<(String, u64)> = BTreeSet::new();
        let events = skip_events(&found, 1, 99, &mut recorded);
        assert_eq!(events.len(), 1);
        let e = &events[0];
        assert_eq!((e.hotkey.as_str(), e.commit_block, e.kept_by.as_str(), e.kept_block), ("late", 80, "early", 60));
        assert_eq!(
            (e.reason, e.chain_block, e.model.as_str()),
            (crate::ledger::event::SkipReason::Duplicate, 99, "m/x")
        );
        assert!(skip_events(&found, 1, 100, &mut recorded).is_empty(), "already recorded");
        // A new commitment by the same hotkey is a new skip.
        let again = [commit("early", 60, "m/x", "r"), commit("late", 90, "m/x", "r")];
        let found = discover(&neurons, &again, None, &none());
        assert_eq!(skip_events(&found, 1, 101, &mut recorded).len(), 1);
    }
}
