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
//!
//! A dialed peer is one voice, not a licence: the chains it vouches for may take at most
//! [`VOUCHED_SHARE`] of the cap, and a tips answer takes vouched chains round-robin over
//! the peers that vouched for them, so one junk-holding peer we dialed can neither fill
//! the cap nor put its 3,000 chains ahead of another peer's one (issue 74, case 2).

use crate::bytes::ValidatorKey;
use std::collections::BTreeMap;

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
pub struct TrustInputs<'a, P> {
    pub own: Option<&'a ValidatorKey>,
    pub allowed: Option<&'a std::collections::BTreeSet<ValidatorKey>>,
    pub vouched: &'a Vouchers<P>,
}

impl<P: Ord + Clone> TrustInputs<'_, P> {
    pub fn of(&self, validator: &ValidatorKey) -> Trust {
        if self.own == Some(validator) || self.allowed.is_some_and(|set| set.contains(validator)) {
            Trust::Listed
        } else if self.vouched.by_chain.contains_key(validator) {
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

/// The part of the chain cap (numerator, denominator) the chains one dialed peer vouched
/// for may take: half, so another dialed peer's chains always find room.
pub const VOUCHED_SHARE: (usize, usize) = (1, 2);

/// The most chains one dialed peer's vouching may take under the cap `max_chains`.
pub fn vouched_share(max_chains: usize) -> usize {
    max_chains * VOUCHED_SHARE.0 / VOUCHED_SHARE.1
}

/// Which dialed peer first vouched for each chain (at most [`MAX_VOUCHED`] chains).
#[derive(Debug)]
pub struct Vouchers<P> {
    by_chain: BTreeMap<ValidatorKey, P>,
}

impl<P: Ord + Clone> Vouchers<P> {
    pub fn new() -> Vouchers<P> {
        Vouchers { by_chain: BTreeMap::new() }
    }

    /// `peer`, which we dialed, claims `validator`'s chain: the first to do so vouches.
    pub fn vouch(&mut self, validator: ValidatorKey, peer: &P) {
        if self.by_chain.len() < MAX_VOUCHED && !self.by_chain.contains_key(&validator) {
            self.by_chain.insert(validator, peer.clone());
        }
    }

    /// The peer that vouched for `validator`, if one did.
    pub fn voucher(&self, validator: &ValidatorKey) -> Option<&P> {
        self.by_chain.get(validator)
    }

    /// How many chains each vouching peer has taken, with `taken(chain)` saying which
    /// chains are held or being fetched (at most `MAX_VOUCHED` looked at). Counted when
    /// asked, so nothing goes stale when a chain is dropped or a peer leaves.
    pub fn shares(&self, taken: impl Fn(&ValidatorKey) -> bool) -> BTreeMap<P, usize> {
        let mut shares = BTreeMap::new();
        for (chain, by) in &self.by_chain {
            if taken(chain) {
                *shares.entry(by.clone()).or_default() += 1;
            }
        }
        shares
    }

    /// Puts `chains` in the order a tips answer gives them: by tier, and within the
    /// vouched tier round-robin over the peers that vouched, each peer's in key order.
    pub fn answer_order<T>(
        &self,
        chains: Vec<(ValidatorKey, T)>,
        trust: impl Fn(&ValidatorKey) -> Trust,
    ) -> Vec<(ValidatorKey, T)> {
        let mut turns: BTreeMap<&P, usize> = BTreeMap::new();
        let mut keyed: Vec<((Trust, usize), (ValidatorKey, T))> = chains
            .into_iter()
            .map(|(validator, value)| {
                let tier = trust(&validator);
                let turn = match (tier, self.by_chain.get(&validator)) {
                    (Trust::Vouched, Some(voucher)) => {
                        let turn = turns.entry(voucher).or_default();
                        *turn += 1;
                        *turn
                    }
                    _ => 0,
                };
                ((tier, turn), (validator, value))
            })
            .collect();
        keyed.sort_by_key(|(key, _)| *key);
        keyed.into_iter().map(|(_, chain)| chain).collect()
    }
}

impl<P: Ord + Clone> Default for Vouchers<P> {
    fn default() -> Self {
        Vouchers::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn tiers_and_room() {
        let (own, listed, vouched, stranger) =
            (ValidatorKey([1; 32]), ValidatorKey([2; 32]), ValidatorKey([3; 32]), ValidatorKey([0; 32]));
        let allowed = BTreeSet::from([listed]);
        let mut vouchers = Vouchers::new();
        vouchers.vouch(vouched, &"peer");
        vouchers.vouch(listed, &"peer");
        let inputs = TrustInputs { own: Some(&own), allowed: Some(&allowed), vouched: &vouchers };
        assert_eq!(inputs.of(&own), Trust::Listed);
        assert_eq!(inputs.of(&listed), Trust::Listed);
        assert_eq!(inputs.of(&vouched), Trust::Vouched);
        assert_eq!(inputs.of(&stranger), Trust::Stranger);
        assert!(Trust::Listed < Trust::Vouched && Trust::Vouched < Trust::Stranger);
        assert!(Trust::Listed.room(5_000, 1024));
        assert!(Trust::Vouched.room(1023, 1024) && !Trust::Vouched.room(1024, 1024));
        assert!(Trust::Stranger.room(511, 1024) && !Trust::Stranger.room(512, 1024));
    }

    /// One peer's 3,000 vouched chains that sort first take half the cap at most, and the
    /// one chain another dialed peer vouched for comes second in a tips answer, not last.
    #[test]
    fn one_voucher_neither_fills_the_cap_nor_goes_first_for_all() {
        let junk: Vec<ValidatorKey> = (0..3000u32)
            .map(|i| {
                let mut key = [0u8; 32];
                key[..4].copy_from_slice(&i.to_be_bytes());
                ValidatorKey(key)
            })
            .collect();
        let honest = ValidatorKey([0xff; 32]);
        let mut vouchers = Vouchers::new();
        for chain in &junk {
            vouchers.vouch(*chain, &"junk-holder");
        }
        vouchers.vouch(honest, &"honest");
        let held: BTreeSet<ValidatorKey> = junk[..512].iter().copied().collect();
        let shares = vouchers.shares(|c| held.contains(c));
        assert_eq!(shares.get(&"junk-holder"), Some(&vouched_share(1024)), "half of 1,024 is taken");
        assert_eq!(shares.get(&"honest"), None, "the other peer's share is whole");
        assert_eq!(vouchers.voucher(&junk[600]), Some(&"junk-holder"));
        let inputs = TrustInputs { own: None, allowed: None, vouched: &vouchers };
        let chains: Vec<(ValidatorKey, ())> = junk.iter().chain([&honest]).map(|c| (*c, ())).collect();
        let order = vouchers.answer_order(chains, |c| inputs.of(c));
        assert_eq!(order.len(), 3001);
        assert_eq!(order[0].0, junk[0]);
        assert_eq!(order[1].0, honest, "round-robin over vouchers, not key order");
        assert_eq!(order[2].0, junk[1]);
    }
}
