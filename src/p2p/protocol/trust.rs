//! How much a chain is trusted when there is no room for every chain, or no time to fetch
//! them all first: what orders fetches, the tips we answer and the chain cap. Junk keys
//! are free, so key order (what came before) let anyone with 3,000 throwaway keys be
//! fetched first, fill the cap and be passed on (issue 53, case 3). The tiers rest only
//! on what an attacker cannot fake:
//! - `Listed`: our own chain and the validators on the allow-list (the chain's
//!   validators, `--allow`);
//! - `Vouched`: claimed by a peer we dialed (a configured address or one the chain
//!   lists), which a stranger cannot make us do;
//! - `Stranger`: claimed only by peers that dialed us.
//!
//! Within a tier, a peer's claims are taken in the order it gave them, so a node that
//! answers tips trust-first (as ours do) passes its trust on without a wire change: a
//! fresh node that knows one honest node fetches that node's validators before the junk
//! it also holds.

use crate::bytes::ValidatorKey;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Trust {
    Listed,
    Vouched,
    Stranger,
}

impl Trust {
    /// Whether a chain of this tier that we do not hold yet may be started, with `held`
    /// chains held or being fetched, under the cap `max_chains`. Listed chains always may
    /// (the list is the chain's validators, a bounded set); strangers' chains may take at
    /// most half the cap, so however many junk chains a node took before, vouched ones
    /// still find room.
    pub fn room(self, held: usize, max_chains: usize) -> bool {
        match self {
            Trust::Listed => true,
            Trust::Vouched => held < max_chains,
            Trust::Stranger => held < max_chains / 2,
        }
    }
}

/// The tiers' inputs, as the sync machine keeps them.
pub struct TrustInputs<'a> {
    pub own: Option<&'a ValidatorKey>,
    pub allowed: Option<&'a std::collections::BTreeSet<ValidatorKey>>,
    pub vouched: &'a std::collections::BTreeSet<ValidatorKey>,
}

impl TrustInputs<'_> {
    pub fn of(&self, validator: &ValidatorKey) -> Trust {
        if self.own == Some(validator) || self.allowed.is_some_and(|set| set.contains(validator)) {
            Trust::Listed
        } else if self.vouched.contains(validator) {
            Trust::Vouched
        } else {
            Trust::Stranger
        }
    }
}

/// Chains a node may vouch for at most: a dialed peer's claims are bounded by `MAX_TIPS`
/// each, but dialed peers come and go, so the set is capped too; past it, a chain is a
/// stranger's until a dialed peer claims it again after a restart.
pub const MAX_VOUCHED: usize = super::MAX_TIPS;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn tiers_and_room() {
        let (own, listed, vouched, stranger) =
            (ValidatorKey([1; 32]), ValidatorKey([2; 32]), ValidatorKey([3; 32]), ValidatorKey([0; 32]));
        let allowed = BTreeSet::from([listed]);
        let vouched_set = BTreeSet::from([vouched, listed]);
        let inputs = TrustInputs { own: Some(&own), allowed: Some(&allowed), vouched: &vouched_set };
        assert_eq!(inputs.of(&own), Trust::Listed);
        assert_eq!(inputs.of(&listed), Trust::Listed);
        assert_eq!(inputs.of(&vouched), Trust::Vouched);
        assert_eq!(inputs.of(&stranger), Trust::Stranger);
        assert!(Trust::Listed < Trust::Vouched && Trust::Vouched < Trust::Stranger);
        assert!(Trust::Listed.room(5_000, 1024));
        assert!(Trust::Vouched.room(1023, 1024) && !Trust::Vouched.room(1024, 1024));
        assert!(Trust::Stranger.room(511, 1024) && !Trust::Stranger.room(512, 1024));
    }
}
