//! What `af mine status` says of one miner, gathered so the CLI only prints: its neuron
//! and commitment on chain, its place in the queue a validator would play (the champion
//! and what it played, folded from that validator's own log; without one, the queue of a
//! validator that has played nothing yet), and what the logs held record of it (its
//! matches, the skips recorded against it, and for "already played" the match that
//! played this model in the queue's own log).

use super::SkipRow;
use crate::bytes::ValidatorKey;
use crate::chain::miner::MinerCommitment;
use crate::chain::{CommitmentRecord, Neuron};
use crate::replay::queries::{matches_in_logs, LogMatch};
use crate::replay::{Replay, ReplayError};
use crate::validator::discovery::{self, Skipped};
use crate::validator::state::{Played, ValidatorState};

pub struct MinerStatus<'a> {
    pub neuron: Option<&'a Neuron>,
    pub record: Option<&'a CommitmentRecord>,
    /// The record read as a miner's commitment, or why it cannot be.
    pub commitment: Option<Result<MinerCommitment, String>>,
    /// Whose queue: the validator whose log gave the champion and what it played.
    pub queue_of: Option<ValidatorKey>,
    pub queue_len: usize,
    pub queue_position: Option<usize>,
    pub is_champion: bool,
    pub skipped: Option<Skipped>,
    /// With a replay of the logs held: the miner's matches in them, and the skips they
    /// recorded of it.
    pub matches: Option<Vec<LogMatch>>,
    pub recorded_skips: Option<Vec<SkipRow>>,
    /// Skipped as already played: the match that played this model as contender in the
    /// queue's own log.
    pub last_played: Option<LogMatch>,
}

/// `hotkey`'s status from the chain's `neurons` and `records`, the queue of `own` (a
/// validator and its state), and a replay of the logs held. A replay whose file could not
/// be read whole is an error, not a shorter list.
pub fn miner_status<'a>(
    hotkey: &str,
    neurons: &'a [Neuron],
    records: &'a [CommitmentRecord],
    own: Option<&(ValidatorKey, ValidatorState)>,
    replayed: Option<&Replay>,
) -> Result<MinerStatus<'a>, ReplayError> {
    let neuron = neurons.iter().find(|n| n.hotkey == hotkey);
    let record = records.iter().find(|r| r.hotkey == hotkey);
    let commitment = record.map(CommitmentRecord::miner);
    let nothing_played = Played::default();
    let (champion, played, queue_of) = match own {
        Some((validator, state)) => (state.champion.as_ref(), &state.played, Some(*validator)),
        None => (None, &nothing_played, None),
    };
    let found = discovery::queue_of(neurons, records, champion, played);
    let skipped = found.skipped.iter().find(|s| s.hotkey() == hotkey).cloned();
    let (matches, recorded_skips) = match replayed {
        Some(replayed) => {
            let mut skips = super::skip_rows(replayed)?;
            skips.retain(|row| row.skip.hotkey == hotkey);
            (Some(matches_in_logs(replayed, hotkey)?), Some(skips))
        }
        None => (None, None),
    };
    let last_played = match (&skipped, &matches, queue_of) {
        (Some(Skipped::AlreadyPlayed { candidate }), Some(rows), Some(validator)) => {
            LogMatch::last_as_contender(rows, &validator, &discovery::recorded_model(&candidate.commitment)).cloned()
        }
        _ => None,
    };
    Ok(MinerStatus {
        neuron,
        record,
        commitment,
        queue_of,
        queue_len: found.queue.len(),
        queue_position: found.queue.iter().position(|c| c.hotkey == hotkey),
        is_champion: champion.is_some_and(|c| c.hotkey == hotkey),
        skipped,
        matches,
        recorded_skips,
        last_played,
    })
}

impl MinerStatus<'_> {
    /// The status as `af mine status --json` prints it, with the models the endpoint
    /// serves (`models`, where it was asked).
    pub fn json(&self, hotkey: &str, models: Option<&Result<Vec<String>, String>>) -> serde_json::Value {
        serde_json::json!({
            "hotkey": hotkey,
            "already_played_in": self.last_played,
            "registered": self.neuron.is_some(),
            "uid": self.neuron.map(|n| n.uid),
            "registration_block": self.neuron.map(|n| n.registration_block),
            "commitment_block": self.record.map(|r| r.block),
            "commitment": self.commitment.as_ref().and_then(|d| d.as_ref().ok()),
            "commitment_error": self.commitment.as_ref().and_then(|d| d.as_ref().err()),
            "queue_position": self.queue_position,
            "queue_of": self.queue_of.map(|v| v.to_hex()),
            "champion": self.is_champion,
            "skipped": self.skipped,
            "models": models.map(|m| match m {
                Ok(ids) => serde_json::json!({ "ok": true, "ids": ids }),
                Err(why) => serde_json::json!({ "ok": false, "error": why }),
            }),
            "matches": self.matches,
            "recorded_skips": self.recorded_skips,
        })
    }

    /// The status in words for `hotkey` on subnet `netuid`, with what its endpoint's
    /// `/v1/models` answered where it was asked.
    pub fn lines(&self, hotkey: &str, netuid: u16, models: Option<&Result<Vec<String>, String>>) -> Vec<String> {
        use crate::display::one_line;
        let mut out = vec![match self.neuron {
            Some(n) => {
                format!("{hotkey}: uid {} on subnet {netuid}, registered at block {}", n.uid, n.registration_block)
            }
            None => format!("{hotkey}: not registered on subnet {netuid}"),
        }];
        out.push(match (&self.commitment, self.record) {
            (Some(Ok(c)), Some(r)) => format!(
                "commitment (block {}): {}@{} at {}",
                r.block,
                one_line(&c.model),
                one_line(&c.revision),
                one_line(&c.endpoint)
            ),
            (Some(Err(e)), Some(r)) => format!("commitment (block {}): {}", r.block, one_line(e)),
            _ => "commitment: none".into(),
        });
        let whose = match self.queue_of {
            Some(validator) => format!("validator {}…'s queue", &validator.to_hex()[..16]),
            None => "the queue of a validator that has played nothing yet (pass --data for a validator's own)".into(),
        };
        out.push(match (self.is_champion, self.queue_position, &self.skipped) {
            (true, _, _) => format!("validators: the champion, defending ({whose})"),
            (false, Some(k), _) => {
                format!(
                    "validators: queued as contender #{} of {}, oldest commitment first ({whose})",
                    k + 1,
                    self.queue_len
                )
            }
            (false, None, Some(s)) => match (s, &self.last_played) {
                (Skipped::AlreadyPlayed { .. }, Some(row)) => format!(
                    "validators: not played again: this model played as contender in match {} against {}: {} ({whose})",
                    row.match_id,
                    one_line(&row.opponent),
                    match row.verdict {
                        Some("champion stayed") => "it lost, the champion stayed",
                        Some(_) => "it won and was crowned",
                        None => "still open",
                    }
                ),
                _ => format!("validators: not played: {} ({whose})", s.describe()),
            },
            (false, None, None) => format!("validators: nothing to play ({whose})"),
        });
        out.push(match models {
            Some(Ok(ids)) => {
                let committed = self.commitment.as_ref().and_then(|c| c.as_ref().ok());
                let model = committed.map(|c| c.model.as_str()).unwrap_or_default();
                let listed = if ids.iter().any(|id| id == model) { "listed" } else { "NOT listed" };
                format!("endpoint: /v1/models answers with {} model(s); {model} is {listed}", ids.len())
            }
            Some(Err(why)) => format!("endpoint: /v1/models failed: {why}"),
            None => "endpoint: not checked (none committed, or served through Chutes)".into(),
        });
        if let Some(skips) = &self.recorded_skips {
            out.push(format!("logs that recorded not playing it: {}", skips.len()));
            out.extend(skips.iter().map(|row| format!("  {}", super::text::skip_line(row))));
        }
        if let Some(rows) = &self.matches {
            out.push(format!("matches in the logs held: {}", rows.len()));
            out.extend(rows.iter().map(|row| {
                let verdict = row.verdict.unwrap_or("open");
                format!("  {} as {} vs {}: {verdict}", row.match_id, row.role, one_line(&row.opponent))
            }));
        }
        out
    }
}
