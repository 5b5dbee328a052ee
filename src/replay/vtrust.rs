//! vTrust: the one formula for how much the network trusts a validator's word, used by
//! the combine (`network`) and by the history of past points (`vtrust_history`) alike,
//! so that a change to the formula is made here and nowhere else.
//!
//! vTrust, in parts per million (ledger-spec/14 defines it; this is its one implementation):
//! - an invalid block or proven equivocation: 0, whatever else;
//! - each false score, false tally, bad challenge id, schedule gap or repeat, false
//!   evidence or false ratio: minus 200,000 (five such proofs zero a validator: scoring
//!   and schedules are deterministic, so an honest validator never makes one);
//! - disagreement: minus 500,000 times the share of compared matches on which it voted
//!   against the majority of the other validators (a share, because honest validators
//!   facing noisy miners can legitimately land on different sides now and then).
//!
//! It is computed in two passes: proofs first ([`from_proofs`]), because only validators
//! still trusted by their proofs count in the majority a vote is compared with; then the
//! disagreements ([`after_disagreement`]).

/// One point of a vTrust history: a chain block, and each validator's vTrust (ppm) at it.
pub type VtrustPoint = (u64, Vec<(crate::bytes::ValidatorKey, u32)>);

pub const VTRUST_FULL_PPM: u32 = 1_000_000;
pub const PENALTY_PER_PROOF_PPM: u64 = 200_000;
pub const PENALTY_FULL_DISAGREEMENT_PPM: u64 = 500_000;

/// vTrust from proofs alone: 0 for a `zeroed` validator (an invalid block or a proven
/// equivocation), else full less a penalty per proof.
pub fn from_proofs(zeroed: bool, n_proofs: u64) -> u32 {
    if zeroed {
        return 0;
    }
    u64::from(VTRUST_FULL_PPM).saturating_sub(n_proofs.saturating_mul(PENALTY_PER_PROOF_PPM)) as u32
}

/// vTrust once `n_disagreements` of `n_compared` votes went against the majority of the
/// other trusted validators: `base_ppm` ([`from_proofs`]) less the share of the penalty.
pub fn after_disagreement(base_ppm: u32, n_compared: u64, n_disagreements: u64) -> u32 {
    let penalty = PENALTY_FULL_DISAGREEMENT_PPM.saturating_mul(n_disagreements).checked_div(n_compared).unwrap_or(0);
    u64::from(base_ppm).saturating_sub(penalty) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::records::DiscrepancyKind;

    #[test]
    fn five_proofs_zero_a_validator_and_disagreement_costs_its_share() {
        assert_eq!(from_proofs(false, 0), VTRUST_FULL_PPM);
        assert_eq!(from_proofs(false, 1), 800_000);
        assert_eq!(from_proofs(false, 5), 0);
        assert_eq!(from_proofs(false, u64::MAX), 0, "no overflow on a log's count");
        assert_eq!(from_proofs(true, 0), 0);
        assert_eq!(after_disagreement(1_000_000, 0, 0), 1_000_000, "nothing compared, nothing taken");
        assert_eq!(after_disagreement(1_000_000, 4, 1), 875_000);
        assert_eq!(after_disagreement(1_000_000, 4, 4), 500_000);
        assert_eq!(after_disagreement(200_000, 1, 1), 0);
        assert!(!DiscrepancyKind::Disagreement.is_proof() && !DiscrepancyKind::InvalidBlock.is_proof());
        assert!(DiscrepancyKind::FalseScore.is_proof() && DiscrepancyKind::FalseDecision.is_proof());
    }
}
