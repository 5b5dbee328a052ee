//! The weights audit: each validator's weights on chain against the weights its log says
//! it last set or committed (timelocked), and those against replay's winner-takes-all
//! weights. Pure over the folds and what the caller read from the chain; the rules are
//! in ledger-spec/12 ("Auditing weights").

use crate::bytes::ValidatorKey;
use crate::chain::{CommitmentRecord, Neuron, Timelocked};
use crate::replay::fold::ChainFold;
use crate::replay::records::{Discrepancy, DiscrepancyKind, LoggedWeights};
use serde::Serialize;

/// What the caller read from the chain, all at about one block.
pub struct WeightsOnChain<'a> {
    pub endpoint: &'a str,
    pub block: u64,
    /// Blocks per epoch: a commit not yet opened one epoch past its planned reveal block
    /// is no longer "awaiting reveal".
    pub tempo: u64,
    pub neurons: &'a [Neuron],
    /// Per setter uid, its weights row.
    pub weights: &'a [(u16, Vec<(u16, u16)>)],
    pub timelocked: &'a Timelocked,
    /// Every hotkey's latest commitment: links a hotkey to its ledger key.
    pub records: &'a [CommitmentRecord],
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct WeightsAudit {
    pub checked: bool,
    pub note: String,
    pub rows: Vec<WeightsRow>,
    pub discrepancies: Vec<Discrepancy>,
}

/// One validator log we hold.
#[derive(Clone, Debug, Serialize)]
pub struct WeightsRow {
    pub validator: ValidatorKey,
    /// The hotkey whose on-chain commitment names this ledger key.
    pub hotkey: Option<String>,
    pub uid: Option<u16>,
    pub logged: Option<LoggedWeights>,
    /// This uid's weights row on chain (zero weights dropped).
    pub on_chain: Option<Vec<(u16, u16)>>,
    /// `matches`, `pending`, `awaiting_reveal`, `dropped`, `our_copy_behind`, `mismatch`,
    /// `none_logged`, `no_hotkey` or `not_registered` (ledger-spec/12).
    pub status: &'static str,
    pub detail: String,
    /// Whether the logged weights give all weight to replay's champion (`None`: no
    /// weights logged, or no champion).
    pub agrees_with_replay: Option<bool>,
}

/// Weights as a set of nonzero (uid, weight) pairs scaled so the largest is 65535, the
/// way the chain stores a revealed or set row (`max_upscale`): what two rows must share
/// to be the same weights.
pub fn normalized(pairs: impl IntoIterator<Item = (u16, u16)>) -> Vec<(u16, u16)> {
    let mut pairs: Vec<(u16, u16)> = pairs.into_iter().filter(|&(_, w)| w > 0).collect();
    pairs.sort_unstable();
    let max = pairs.iter().map(|&(_, w)| u64::from(w)).max().unwrap_or(0);
    for (_, w) in &mut pairs {
        // Rounded to nearest, as subtensor's `vec_max_upscale_to_u16`.
        if let Some(scaled) = (u64::from(*w) * u64::from(u16::MAX) + max / 2).checked_div(max) {
            *w = scaled as u16;
        }
    }
    pairs
}

fn logged_pairs(logged: &LoggedWeights) -> Vec<(u16, u16)> {
    normalized(logged.uids.iter().copied().zip(logged.weights.iter().copied()))
}

/// Audits every fold's last logged weights. `replay_weights` are replay's winner-takes-all
/// weights with the champion's current uid; `behind` lists validators whose on-chain tip
/// commitment is ahead of our copy (their chain weights may come from blocks we lack).
pub fn audit_weights(
    folds: &[ChainFold],
    replay_weights: &[(u16, u16)],
    behind: &[ValidatorKey],
    on_chain: Option<WeightsOnChain<'_>>,
) -> WeightsAudit {
    let replay = normalized(replay_weights.iter().copied());
    let mut audit = WeightsAudit::default();
    let Some(chain) = on_chain else {
        audit.note = "skipped: no --chain given, so weights on chain were not checked".into();
        for fold in folds {
            audit.rows.push(WeightsRow {
                validator: fold.validator,
                hotkey: None,
                uid: None,
                logged: fold.last_weights.clone(),
                on_chain: None,
                status: if fold.last_weights.is_some() { "not_checked" } else { "none_logged" },
                detail: String::new(),
                agrees_with_replay: agreement(fold.last_weights.as_ref(), &replay),
            });
        }
        return audit;
    };
    audit.checked = true;
    let identities = super::report::identities_from_chain(chain.records, chain.neurons);
    for fold in folds {
        let (uid, hotkey) = match identities.get(&fold.validator) {
            Some((uid, hotkey)) => (*uid, Some(hotkey.clone())),
            None => (None, None),
        };
        let on_chain_row = uid.map(|uid| {
            normalized(
                chain.weights.iter().filter(|(setter, _)| *setter == uid).flat_map(|(_, row)| row.iter().copied()),
            )
        });
        let logged = fold.last_weights.clone();
        let (status, detail) = judge(
            &chain,
            hotkey.as_deref(),
            uid,
            logged.as_ref(),
            on_chain_row.as_deref(),
            behind.contains(&fold.validator),
        );
        if status == "mismatch" {
            let logged = logged.as_ref().expect("a mismatch has logged weights");
            audit.discrepancies.push(Discrepancy {
                validator: fold.validator,
                kind: DiscrepancyKind::FalseWeights,
                height: logged.height,
                event_idx: None,
                detail: detail.clone(),
            });
        }
        audit.rows.push(WeightsRow {
            validator: fold.validator,
            hotkey,
            uid,
            agrees_with_replay: agreement(logged.as_ref(), &replay),
            logged,
            on_chain: on_chain_row,
            status,
            detail,
        });
    }
    let count = |status: &str| audit.rows.iter().filter(|r| r.status == status).count();
    audit.note = format!(
        "checked the weights of {} log(s) on {} at block {}: {} match, {} pending, {} awaiting reveal, {} dropped by the chain, {} mismatch",
        audit.rows.len(),
        chain.endpoint,
        chain.block,
        count("matches"),
        count("pending"),
        count("awaiting_reveal"),
        count("dropped"),
        count("mismatch")
    );
    audit
}

fn agreement(logged: Option<&LoggedWeights>, replay: &[(u16, u16)]) -> Option<bool> {
    match logged {
        Some(logged) if !replay.is_empty() => Some(logged_pairs(logged) == replay),
        _ => None,
    }
}

/// The status of one log's weights against the chain, and why.
fn judge(
    chain: &WeightsOnChain<'_>,
    hotkey: Option<&str>,
    uid: Option<u16>,
    logged: Option<&LoggedWeights>,
    on_chain: Option<&[(u16, u16)]>,
    behind: bool,
) -> (&'static str, String) {
    let Some(hotkey) = hotkey else {
        return ("no_hotkey", "no hotkey on this subnet commits this ledger key".into());
    };
    let (Some(uid), Some(on_chain)) = (uid, on_chain) else {
        return ("not_registered", format!("hotkey {hotkey} is not registered on this subnet"));
    };
    let Some(logged) = logged else {
        return ("none_logged", "its log records no weights".into());
    };
    let expected = logged_pairs(logged);
    if let Some(commit) = &logged.commit {
        let ours = |hk: &str, hash| hk == hotkey && hash == commit.ciphertext_hash;
        if chain.timelocked.pending.iter().any(|p| ours(&p.hotkey, p.ciphertext_hash)) {
            return (
                "pending",
                format!(
                    "committed at chain block {}; opens with round {}, planned reveal block {}",
                    logged.chain_block, commit.reveal_round, commit.reveal_block
                ),
            );
        }
        if expected.as_slice() == on_chain {
            return (
                "matches",
                format!(
                    "revealed: uid {uid}'s weights on chain are the weights committed at chain block {}",
                    logged.chain_block
                ),
            );
        }
        if let Some(dropped) =
            chain.timelocked.revealed.iter().find(|r| ours(&r.hotkey, r.ciphertext_hash) && !r.error.is_empty())
        {
            return (
                "dropped",
                format!("the chain dropped the commit of chain block {}: {}", logged.chain_block, dropped.error),
            );
        }
        if chain.block < commit.reveal_block.saturating_add(chain.tempo) {
            return (
                "awaiting_reveal",
                format!(
                    "committed at chain block {}, not yet open at block {} (planned reveal block {})",
                    logged.chain_block, chain.block, commit.reveal_block
                ),
            );
        }
    } else if expected.as_slice() == on_chain {
        return (
            "matches",
            format!("uid {uid}'s weights on chain are the weights set at chain block {}", logged.chain_block),
        );
    }
    if behind {
        return ("our_copy_behind", "its on-chain tip is past our copy, which may lack later weights".into());
    }
    (
        "mismatch",
        format!(
            "uid {uid} ({hotkey}) has {on_chain:?} on chain at block {}, but its log's last {} (height {}, chain block {}) is {expected:?}",
            chain.block,
            if logged.commit.is_some() { "commit" } else { "set" },
            logged.height,
            logged.chain_block
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::Hash32;
    use crate::chain::{LedgerCommitment, PendingCommit, RevealedCommit};
    use crate::replay::records::LoggedCommit;

    fn key(byte: u8) -> ValidatorKey {
        ValidatorKey([byte; 32])
    }

    fn fold(byte: u8, logged: Option<LoggedWeights>) -> ChainFold {
        let mut fold = ChainFold::new(key(byte));
        fold.last_weights = logged;
        fold
    }

    fn committed(uid: u16, hash: u8) -> LoggedWeights {
        LoggedWeights {
            height: 9,
            netuid: 1,
            uids: vec![uid],
            weights: vec![u16::MAX],
            version_key: 0,
            chain_block: 100,
            commit: Some(LoggedCommit { reveal_round: 50, reveal_block: 120, ciphertext_hash: Hash32([hash; 32]) }),
        }
    }

    fn record(hotkey: &str, ledger: u8) -> CommitmentRecord {
        let fields =
            LedgerCommitment { ledger_key: key(ledger), tip_height: 1, tip_hash: Hash32([0; 32]), protocol: None }
                .fields();
        CommitmentRecord::new(hotkey, 90, fields)
    }

    fn neuron(uid: u16, hotkey: &str) -> Neuron {
        Neuron { uid, hotkey: hotkey.into(), registration_block: 1, validator_permit: true }
    }

    fn run(
        folds: &[ChainFold],
        block: u64,
        weights: &[(u16, Vec<(u16, u16)>)],
        timelocked: &Timelocked,
    ) -> WeightsAudit {
        let neurons = [neuron(0, "v0"), neuron(1, "v1"), neuron(2, "champ")];
        let records = [record("v0", 1), record("v1", 2)];
        let chain = WeightsOnChain {
            endpoint: "local:test",
            block,
            tempo: 10,
            neurons: &neurons,
            weights,
            timelocked,
            records: &records,
        };
        audit_weights(folds, &[(2, u16::MAX)], &[], Some(chain))
    }

    #[test]
    fn revealed_weights_equal_to_the_commit_match_and_agree_with_replay() {
        let audit =
            run(&[fold(1, Some(committed(2, 7)))], 125, &[(0, vec![(2, u16::MAX), (1, 0)])], &Timelocked::default());
        let row = &audit.rows[0];
        assert_eq!((row.status, row.uid, row.agrees_with_replay), ("matches", Some(0), Some(true)), "{}", row.detail);
        assert!(audit.discrepancies.is_empty());
    }

    #[test]
    fn a_commit_still_held_by_the_chain_is_pending_and_one_not_yet_opened_awaits() {
        let pending = Timelocked {
            pending: vec![PendingCommit {
                hotkey: "v0".into(),
                commit_block: 100,
                reveal_round: 50,
                ciphertext_hash: Hash32([7; 32]),
            }],
            revealed: vec![],
        };
        assert_eq!(run(&[fold(1, Some(committed(2, 7)))], 110, &[], &pending).rows[0].status, "pending");
        // Another hotkey's commit with the same hash is not ours.
        let theirs = Timelocked {
            pending: vec![PendingCommit { hotkey: "v1".into(), ..pending.pending[0].clone() }],
            revealed: vec![],
        };
        assert_eq!(run(&[fold(1, Some(committed(2, 7)))], 110, &[], &theirs).rows[0].status, "awaiting_reveal");
    }

    #[test]
    fn weights_on_chain_past_the_reveal_that_differ_from_the_log_are_a_finding() {
        // Its log says uid 2; the chain has uid 1 a full epoch after the planned reveal.
        let audit = run(&[fold(1, Some(committed(2, 7)))], 131, &[(0, vec![(1, u16::MAX)])], &Timelocked::default());
        assert_eq!(audit.rows[0].status, "mismatch");
        assert_eq!(audit.discrepancies.len(), 1);
        assert_eq!(audit.discrepancies[0].kind, DiscrepancyKind::FalseWeights);
        assert_eq!(audit.discrepancies[0].validator, key(1));
        // The same, while our copy lags the validator's on-chain tip: not blamed.
        let neurons = [neuron(0, "v0")];
        let records = [record("v0", 1)];
        let weights = [(0, vec![(1, u16::MAX)])];
        let timelocked = Timelocked::default();
        let chain = WeightsOnChain {
            endpoint: "x",
            block: 131,
            tempo: 10,
            neurons: &neurons,
            weights: &weights,
            timelocked: &timelocked,
            records: &records,
        };
        let lagging = audit_weights(&[fold(1, Some(committed(2, 7)))], &[], &[key(1)], Some(chain));
        assert_eq!((lagging.rows[0].status, lagging.discrepancies.len()), ("our_copy_behind", 0));
    }

    #[test]
    fn a_commit_the_chain_dropped_is_reported_with_its_reason_not_blamed() {
        let dropped = Timelocked {
            pending: vec![],
            revealed: vec![RevealedCommit {
                hotkey: "v0".into(),
                commit_block: 100,
                reveal_block: 121,
                reveal_round: 50,
                ciphertext_hash: Hash32([7; 32]),
                uids: vec![],
                weights: vec![],
                error: "the round's pulse never came".into(),
            }],
        };
        let audit = run(&[fold(1, Some(committed(2, 7)))], 200, &[], &dropped);
        assert_eq!(audit.rows[0].status, "dropped");
        assert!(audit.rows[0].detail.contains("never came"));
        assert!(audit.discrepancies.is_empty());
    }

    #[test]
    fn set_weights_compare_directly_and_rows_say_what_is_missing() {
        let set = LoggedWeights { commit: None, uids: vec![1, 2], weights: vec![0, 100], ..committed(2, 0) };
        let folds = [fold(1, Some(set)), fold(2, None), fold(3, Some(committed(2, 1)))];
        let audit = run(&folds, 500, &[(0, vec![(2, u16::MAX)])], &Timelocked::default());
        let statuses: Vec<&str> = audit.rows.iter().map(|r| r.status).collect();
        assert_eq!(statuses, ["matches", "none_logged", "no_hotkey"]);
        // uid 2 at 100 of 100 is all weight: the same as 65535.
        assert_eq!(normalized([(2, 100), (1, 0)]), [(2, u16::MAX)]);
        assert_eq!(normalized([(3, 10), (2, 20)]), [(2, u16::MAX), (3, 32768)]);
    }

    #[test]
    fn weights_giving_all_to_another_uid_disagree_with_replay() {
        let audit = audit_weights(&[fold(1, Some(committed(5, 7)))], &[(2, u16::MAX)], &[], None);
        assert_eq!((audit.rows[0].status, audit.rows[0].agrees_with_replay), ("not_checked", Some(false)));
        assert!(!audit.checked && audit.note.starts_with("skipped"));
    }
}
