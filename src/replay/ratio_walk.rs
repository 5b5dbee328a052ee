//! The ratio to beat, walked through a validator's matches in log order (ledger-spec/14,
//! section 2): each match must be played at the ratio the last win set, decayed to its
//! start block, and a win must set the geometric mean of its win rates. A rotated
//! validator's logs are walked one after the other (ledger-spec/16).

use super::fold::ChainFold;
use super::records::{Discrepancy, DiscrepancyKind, MatchFold, Name};
use super::spill_file::SpillFileError;
use crate::bytes::ValidatorKey;
use crate::evaluation::ratio::{RatioParams, RatioToBeat};

/// The ratio to beat, replayed through one log's own matches in log order: each match
/// must be played at the ratio its log's last win set, decayed to the match's start
/// block, and a win must set the geometric mean of the win rates it records
/// (`false_decision` otherwise). Each check takes the log's recorded values forward, so
/// one false number is one finding, not a cascade.
pub fn ratio_findings(fold: &ChainFold, legacy: &RatioParams) -> Result<Vec<Discrepancy>, SpillFileError> {
    let mut found = Vec::new();
    each_ratio_finding(fold, legacy, &mut |d| found.push(d))?;
    Ok(found)
}

/// [`ratio_findings`], each handed to `found` as it is made (a log may hold millions).
pub fn each_ratio_finding(
    fold: &ChainFold,
    legacy: &RatioParams,
    found: &mut dyn FnMut(Discrepancy),
) -> Result<(), SpillFileError> {
    walk_log(&mut RatioWalk::default(), fold, legacy, found).map(|_| ())
}

/// Takes `fold`'s matches through `walk` in log order, each finding to `found`; gives
/// their count. A rotated validator's logs share one walk (ledger-spec/16).
pub fn walk_log(
    walk: &mut RatioWalk,
    fold: &ChainFold,
    legacy: &RatioParams,
    found: &mut dyn FnMut(Discrepancy),
) -> Result<u64, SpillFileError> {
    fold.matches.in_log_order().try_fold(0, |n, read| {
        let (_, m) = read?;
        Ok(n + walk.step(fold.validator, &m, legacy, Some(&mut *found)))
    })
}

/// The ratio to beat as one log's matches set it, taken a match at a time in log order
/// ([`each_ratio_finding`]); cloned where walks over different cuts of a log part.
#[derive(Clone)]
pub struct RatioWalk {
    ratio: RatioToBeat,
    /// A log's matches name one plan for long stretches: parsed once per change, not
    /// once per match (every replay runs this over every match of every log).
    last_plan: Option<(Name, RatioParams)>,
}

impl Default for RatioWalk {
    fn default() -> RatioWalk {
        // No win yet: the floor of whatever parameters the next match names.
        RatioWalk { ratio: RatioToBeat { set_ppm: 0, set_at_block: 0 }, last_plan: None }
    }
}

impl RatioWalk {
    /// Takes `validator`'s next match `m`: counts the findings it makes, and hands each
    /// to `found` if there is one to take them.
    pub fn step(
        &mut self,
        validator: ValidatorKey,
        m: &MatchFold,
        legacy: &RatioParams,
        mut found: Option<&mut dyn FnMut(Discrepancy)>,
    ) -> u64 {
        let mut n = 0;
        let params = match &self.last_plan {
            Some((plan, params)) if *plan == m.rule => *params,
            _ => plan_ratio_params(&m.rule, legacy),
        };
        self.last_plan = Some((m.rule.clone(), params));
        let ratio = self.ratio;
        let expected = params.current_ppm(&ratio, m.chain_block);
        if m.ratio_to_beat_ppm != expected {
            n += 1;
            if let Some(found) = found.as_mut() {
                found(Discrepancy {
                    validator,
                    kind: DiscrepancyKind::FalseDecision,
                    height: m.started_height,
                    event_idx: Some(m.started_event_idx),
                    detail: format!(
                        "{} vs {}: played at ratio {} ppm, but the ratio set at chain block {} ({} ppm) is {expected} ppm at its start block {}",
                        m.contender.hotkey, m.champion.hotkey, m.ratio_to_beat_ppm, ratio.set_at_block, ratio.set_ppm, m.chain_block
                    ),
                });
            }
        }
        let Some(decided) = m.decided.as_ref().filter(|d| d.contender_won) else { return n };
        if !decided.win_rates_ppm.is_empty() {
            let set = params.after_win(&decided.win_rates_ppm, m.chain_block).set_ppm;
            if decided.new_ratio_to_beat_ppm != set {
                n += 1;
                if let Some(found) = found.as_mut() {
                    found(Discrepancy {
                        validator,
                        kind: DiscrepancyKind::FalseDecision,
                        height: decided.height,
                        event_idx: None,
                        detail: format!(
                            "{} beat {}: the new ratio is {} ppm, but the geometric mean of its win rates {:?} gives {set} ppm",
                            m.contender.hotkey, m.champion.hotkey, decided.new_ratio_to_beat_ppm, decided.win_rates_ppm
                        ),
                    });
                }
            }
        }
        self.ratio = RatioToBeat { set_ppm: decided.new_ratio_to_beat_ppm, set_at_block: m.chain_block };
        n
    }
}

/// The ratio parameters a match was played under: those its `score` plan records (the
/// network's, the same for every auditor), else, for the `mixture` plans of older logs,
/// the auditor's `legacy` ones with the binary64 arithmetic those logs were written with.
pub fn plan_ratio_params(plan: &str, legacy: &RatioParams) -> RatioParams {
    use crate::evaluation::ratio::Arithmetic;
    match crate::evaluation::plan::parse_plan(plan) {
        Some((rule, _)) => rule.ratio_params(legacy),
        None => legacy.with_arithmetic(Arithmetic::Float),
    }
}
