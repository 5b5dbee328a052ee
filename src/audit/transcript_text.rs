//! `af transcripts` in words, for a person at a terminal: the library renders the lines
//! so the CLI only prints them (each line made terminal-safe there, since answers are a
//! miner's bytes).

use crate::bytes::{Hash32, ValidatorKey};
use crate::display::one_line;
use crate::ledger::entry::{EntryError, TranscriptEntry, VerifiedEntry};
use crate::ledger::event::{EnvOutcome, Event};

/// The most characters of one answer shown in text (`--json` has every byte).
pub const ANSWER_SHOWN: usize = 2_000;

/// The entries as text, grouped: a header per match (validator, roles, rule in words),
/// a line per env with its tally and decision, then each challenge with the result and
/// both answers in full (every turn of a multi-turn game), up to [`ANSWER_SHOWN`]. Fed
/// one entry at a time; it keeps the match and env it is in.
#[derive(Default)]
pub struct TranscriptText {
    current: Option<(ValidatorKey, Hash32)>,
    current_env: Option<String>,
}

impl TranscriptText {
    /// The lines `e` adds after the entries fed before it.
    pub fn lines(&mut self, e: &TranscriptEntry) -> Vec<String> {
        let mut out = Vec::new();
        let t = &e.transcript;
        if self.current != Some((e.validator, t.match_id)) {
            if self.current.is_some() {
                out.push(String::new());
            }
            self.current = Some((e.validator, t.match_id));
            self.current_env = None;
            let against = match (e.unproven.role.as_str(), &e.opponent) {
                ("contender", Some(o)) => format!(" against the champion {}", one_line(&o.hotkey)),
                ("champion", Some(o)) => format!(" against the contender {}", one_line(&o.hotkey)),
                (_, Some(o)) => format!(" against {}", one_line(&o.hotkey)),
                (_, None) => String::new(),
            };
            out.push(format!("match {}  in the log of validator {}", t.match_id, e.validator));
            out.push(format!(
                "  {} ({}) played as {}{against}",
                one_line(&t.miner.hotkey),
                one_line(&t.miner.model),
                e.unproven.role
            ));
            if let Some(rule) = &e.unproven.rule {
                out.push(format!("  rule: {}", crate::evaluation::plan::plan_in_words(rule)));
            }
            if let Some(reason) = &e.unproven.match_reason {
                out.push(format!("  result: {reason}"));
            }
        }
        if self.current_env.as_deref() != Some(t.env.name.as_str()) {
            self.current_env = Some(t.env.name.clone());
            let tally = match &e.unproven.env_tally {
                Some(tally) => format!(
                    "the contender won {}, lost {}, drew {} of {} challenges",
                    tally.wins, tally.losses, tally.draws, tally.n_challenges
                ),
                None => "no tally (the match's start is not in the logs held)".into(),
            };
            let decision = e.unproven.env_decision.map_or("undecided", env_decision_words);
            out.push(format!("  env {} v{}: {tally}: {decision}", t.env.name, t.env.version));
        }
        let reward = crate::envs::reward_text;
        let result = match (&e.outcome, &e.opponent) {
            (Some(outcome), Some(o)) => {
                format!("{outcome:<4}  {} vs {}", reward(t.reward_milli), reward(o.reward_milli))
            }
            _ => format!("      {}, no opponent answer in this block", reward(t.reward_milli)),
        };
        let proof = match e.proof.commitment.as_ref().map(|p| &p.event) {
            Some(Event::ChainCommitment(c)) => format!("proven to the tip committed at chain block {}", c.chain_block),
            Some(_) => "proven to the tip".into(),
            None => "proven to the tip; no commitment covers it yet".into(),
        };
        let challenge: String = t.challenge_id.to_hex().chars().take(16).collect();
        out.push(format!(
            "    #{:<4} {result}  challenge {challenge}  (block {} event {}, {proof})",
            t.challenge_index, e.height, e.event_idx
        ));
        let turns: Vec<&str> =
            t.messages.iter().filter(|m| m.role == "assistant").map(|m| m.content.as_str()).collect();
        if turns.len() > 1 {
            for (turn, content) in turns.iter().enumerate() {
                answer_lines(&mut out, &format!("ours, turn {}", turn + 1), content);
            }
        } else {
            answer_lines(&mut out, "ours", &t.answer);
        }
        if let Some(error) = &t.error {
            out.push(format!("          error: {}", one_line(error)));
        }
        if let Some(o) = &e.opponent {
            answer_lines(&mut out, if turns.len() > 1 { "theirs, last turn" } else { "theirs" }, &o.answer);
        }
        out
    }
}

/// An env decision in words (the JSON keeps its snake_case name).
pub fn env_decision_words(decision: EnvOutcome) -> &'static str {
    match decision {
        EnvOutcome::ContenderBetter => "the contender is better",
        EnvOutcome::ContenderNotBetter => "the contender is not better",
        EnvOutcome::Inconclusive => "inconclusive (a cap was reached, or the match was decided first)",
    }
}

/// One answer under its label, every line indented, cut at [`ANSWER_SHOWN`] characters.
fn answer_lines(out: &mut Vec<String>, label: &str, answer: &str) {
    let total = answer.chars().count();
    let shown: String = answer.chars().take(ANSWER_SHOWN).collect();
    let mut lines = shown.lines();
    out.push(format!("          {label}: {}", lines.next().unwrap_or("(empty)")));
    for line in lines {
        out.push(format!("          {:width$}  {line}", "", width = label.len()));
    }
    if total > ANSWER_SHOWN {
        out.push(format!("          ({} more characters; --json has all of it)", total - ANSWER_SHOWN));
    }
}

/// One transcript entry checked (`af transcripts verify`): its proofs, and, where a
/// chain was read, its tip against the validator's commitment there.
pub struct EntryCheck<'a> {
    pub entry: &'a TranscriptEntry,
    pub verified: Result<VerifiedEntry, EntryError>,
    pub on_chain: Option<crate::chain::OnChainCheck>,
}

impl EntryCheck<'_> {
    /// Proven, and the chain (where read) agrees.
    pub fn ok(&self) -> bool {
        self.verified.is_ok() && self.on_chain.as_ref().is_none_or(|c| c.ok)
    }

    /// The check as `--json` prints it.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "ok": self.ok(),
            "verified": self.verified.as_ref().ok(),
            "error": self.verified.as_ref().err().map(|e| e.to_string()),
            "on_chain": self.on_chain,
            "unproven": self.entry.unproven,
        })
    }

    /// Entry `n` of several, in one line.
    pub fn line(&self, n: usize) -> String {
        match &self.verified {
            Ok(v) => format!(
                "{}entry {n}: transcript {} of block {} (validator {}), proven to height {}{}",
                if self.ok() { "ok   " } else { "FAIL " },
                v.event_idx,
                v.height,
                v.validator,
                v.tip.height,
                self.on_chain.as_ref().map_or(String::new(), |c| format!("; on chain: {}", c.detail))
            ),
            Err(e) => format!("FAIL entry {n}: {e}"),
        }
    }

    /// One entry in words: what is proven, to which tip, whether a commitment and the
    /// chain (where read) cover it, and the replay's context that the proofs do not cover.
    pub fn lines(&self) -> Vec<String> {
        let v = match &self.verified {
            Ok(v) => v,
            Err(e) => return vec![format!("FAIL: {e}")],
        };
        let proven = format!(
            "ok: transcript {} of block {} (validator {}), every shown field proven, chained to height {} hash {}",
            v.event_idx, v.height, v.validator, v.tip.height, v.tip.hash
        );
        let commitment = match &v.commitment {
            Some(c) => format!(
                "proven from the validator's log: it committed that tip at chain block {} on netuid {}",
                c.chain_block, c.netuid
            ),
            None => {
                "unproven: no commitment covers this block yet; the proof reaches the validator's tip when it was made"
                    .into()
            }
        };
        let chain = match &self.on_chain {
            Some(check) => format!("{}on chain: {}", if check.ok { "" } else { "FAIL " }, check.detail),
            None => "not checked on chain (give --chain SPEC --netuid N to check it)".into(),
        };
        let verdict = match self.entry.unproven.match_contender_won {
            Some(true) => "the contender won",
            Some(false) => "the champion kept the crown",
            None => "not decided",
        };
        let decision = self.entry.unproven.env_decision.map_or("undecided", env_decision_words);
        let context = format!(
            "unproven (replay's context, not covered by the proofs): role {}, env: {decision}, match: {verdict}",
            self.entry.unproven.role
        );
        vec![proven, commitment, chain, context]
    }
}
