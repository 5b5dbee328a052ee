//! Protocol versions (ledger-spec/15): which consensus rules apply from which chain block.
//! One number names every rule that decides weights: the event kinds a block may hold,
//! the environments a match may play, the network's plan, and the replay of 14. A match
//! is played and judged by the version active at its `MatchStarted.chain_block`, and a
//! block by the version active at the greatest chain block its log has recorded by then.
//! A build that meets a version it does not know stops judging there instead of calling
//! the unknown invalid: the log waits for an upgrade, and nobody's trust moves.
//!
//! Plain data, imported by the layers that apply it (`envs::Registry` carries it to the
//! replay); it imports nothing, so it sits below them all.

/// The rules of one protocol version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionRules {
    pub version: u32,
    /// The chain block from which matches start, and blocks are judged, under it.
    pub activation_block: u64,
    /// Event kinds with tags below this are valid in a block of this version (02).
    pub n_event_kinds: u32,
    /// The environments a match may play, by (name, version) (06).
    pub envs: &'static [(&'static str, u32)],
    /// The network's plan, exactly (02, "The network's plan").
    pub plan: &'static str,
}

/// The network's plan of protocol version 2 (and of the tables built from it).
pub const PLAN_V2: &str = "score alpha_ppm=50000 prior=4,4 challenges=4000 epsilon_ppm=10000 \
                           half_life_blocks=7200 dominance rate_ppm=950000 alpha_ppm=5000 \
                           share_ppm=40000 share_alpha_ppm=50000 futility margin_ppm=60000 \
                           alpha_ppm=50000 mean_margin_ppm=0";

/// The network's plan of protocol version 4: version 2's crowns, with what a contender
/// can make validators pay bounded (issue 76; ledger-spec/02, "The network's plan"): the
/// dominance crown's bets weighted half on the all-in bet at level 0.6%, its reach
/// condition, the share bets at 10%, and the futility's mean condition rising 2 points
/// over the cap.
pub const PLAN_V4: &str = "score alpha_ppm=50000 prior=4,4 challenges=4000 epsilon_ppm=10000 \
                           half_life_blocks=7200 dominance-reach rate_ppm=950000 alpha_ppm=6000 \
                           share_ppm=40000 share_alpha_ppm=100000 futility margin_ppm=60000 \
                           alpha_ppm=50000 rise_ppm=20000";

/// The six environments of version 2.
const ENVS_V2: &[(&str, u32)] = &[("abd", 1), ("coin", 1), ("ded", 1), ("mult", 1), ("sat", 1), ("tictactoe", 1)];

/// Event kinds of version 2: tags 0 (`MatchStarted`) to 10 (`FoldCheckpoint`).
const EVENT_KINDS_V2: u32 = 11;

/// Event kinds of version 3: version 2's, the key rotation's, tags 11 (`KeyRotated`) and
/// 12 (`KeySucceeded`), ledger-spec/16, and 13 (`ChampionLeft`), ledger-spec/13.
const EVENT_KINDS_V3: u32 = 14;

/// The subnet's chain block at which version 3 activates: mid-January 2027 at 12 s a
/// block, weeks after the build that applies it is released (ledger-spec/15).
pub const V3_ACTIVATION_BLOCK: u64 = 10_000_000;

/// The subnet's chain block at which version 4 (the bounded plan) activates: early
/// February 2027, two weeks after version 3 (ledger-spec/15).
pub const V4_ACTIVATION_BLOCK: u64 = 10_100_000;

/// A table of versions and the most this build applies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protocol {
    /// The network it is the table of, as the spec names it.
    pub network: String,
    /// Ascending in version and in activation block; the first activates at block 0.
    versions: Vec<VersionRules>,
    /// The highest version this build applies: every version of the table, unless a
    /// test capped it ([`Protocol::capped`]) to stand for a build released before.
    known_max: u32,
    /// A later version this build does not apply, as the chain announced it (ledger-spec/15,
    /// "Announcements"): (version, activation block). From that block on nothing is
    /// judged by this build's rules.
    announced: Option<(u32, u64)>,
}

impl Default for Protocol {
    fn default() -> Protocol {
        Protocol::network()
    }
}

impl Protocol {
    /// The subnet's table (ledger-spec/15): version 2 from the first block, version 3
    /// (key rotation) from [`V3_ACTIVATION_BLOCK`], version 4 (the bounded plan) from
    /// [`V4_ACTIVATION_BLOCK`].
    pub fn network() -> Protocol {
        let v2 = VersionRules {
            version: 2,
            activation_block: 0,
            n_event_kinds: EVENT_KINDS_V2,
            envs: ENVS_V2,
            plan: PLAN_V2,
        };
        let v3 =
            VersionRules { version: 3, activation_block: V3_ACTIVATION_BLOCK, n_event_kinds: EVENT_KINDS_V3, ..v2 };
        let v4 = VersionRules { version: 4, activation_block: V4_ACTIVATION_BLOCK, plan: PLAN_V4, ..v3.clone() };
        Protocol::new("af", vec![v2, v3, v4])
    }

    /// The local table of ledger-spec/15: the network's newest version from block 0, for a
    /// devnet on a fresh local chain, whose blocks never reach the network's activations.
    pub fn local() -> Protocol {
        let mut newest = Protocol::network().versions.pop().expect("one at least");
        newest.activation_block = 0;
        Protocol::new("local", vec![newest])
    }

    /// The upgrade-test network of ledger-spec/15: version 1 is version 2 without
    /// `FoldCheckpoint` (tag 10) and without the `coin` environment, version 2 the
    /// network's, from `activation_block`. Every rule it names is one this build has,
    /// so a devnet can cross an upgrade with one build, capped in some validators.
    pub fn upgrade_test(activation_block: u64) -> Protocol {
        const ENVS_V1: &[(&str, u32)] = &[("abd", 1), ("ded", 1), ("mult", 1), ("sat", 1), ("tictactoe", 1)];
        let v1 = VersionRules {
            version: 1,
            activation_block: 0,
            n_event_kinds: EVENT_KINDS_V2 - 1,
            envs: ENVS_V1,
            plan: PLAN_V2,
        };
        let mut v2 = Protocol::network().versions.remove(0);
        v2.n_event_kinds = EVENT_KINDS_V2;
        v2.activation_block = activation_block.max(1);
        Protocol::new(&format!("upgrade-test@{}", v2.activation_block), vec![v1, v2])
    }

    fn new(network: &str, versions: Vec<VersionRules>) -> Protocol {
        assert!(versions.first().is_some_and(|v| v.activation_block == 0), "the first version starts at block 0");
        assert!(
            versions.windows(2).all(|w| w[0].version < w[1].version && w[0].activation_block < w[1].activation_block),
            "versions ascend in number and activation"
        );
        let known_max = versions.last().expect("checked above").version;
        Protocol { network: network.into(), versions, known_max, announced: None }
    }

    /// Parses a table's name as `network()` and `upgrade_test()` write it.
    pub fn named(name: &str) -> Option<Protocol> {
        match name {
            "af" => return Some(Protocol::network()),
            "local" => return Some(Protocol::local()),
            _ => {}
        }
        let block = name.strip_prefix("upgrade-test@")?;
        let block: u64 = block.parse().ok().filter(|b: &u64| *b >= 1 && block == b.to_string())?;
        Some(Protocol::upgrade_test(block))
    }

    /// This table as a build released before version `max + 1` has it (tests: an older
    /// build, without a second binary): the later versions are gone, rules, blocks and
    /// all; it learns of them only as the chain announces them.
    pub fn capped(mut self, max: u32) -> Protocol {
        self.versions.retain(|v| v.version <= max || v.activation_block == 0);
        self.known_max = self.versions.last().expect("the first stays").version;
        self
    }

    /// The table with a later version this build does not apply, announced by the chain
    /// (ledger-spec/15): ignored unless later than what it applies and than any
    /// activation it has; an earlier announced activation replaces a later one.
    pub fn with_announced(mut self, version: u32, activation_block: u64) -> Protocol {
        let newest = self.versions.last().expect("one at least");
        if version > self.known_max
            && activation_block > newest.activation_block
            && self.announced.is_none_or(|(_, block)| activation_block < block)
        {
            self.announced = Some((version, activation_block));
        }
        self
    }

    /// The highest version this build applies.
    pub fn known_max(&self) -> u32 {
        self.known_max
    }

    /// The newest version this build applies, and its activation block: what its chain
    /// commitments announce (ledger-spec/07).
    pub fn newest(&self) -> (u32, u64) {
        let newest = self.versions.last().expect("one at least");
        (newest.version, newest.activation_block)
    }

    /// The version active at `chain_block`, of those this build applies.
    pub fn version_at(&self, chain_block: u64) -> &VersionRules {
        self.versions.iter().rev().find(|v| v.activation_block <= chain_block).expect("the first starts at block 0")
    }

    /// The announced version this build does not apply, if it is active at `chain_block`.
    pub fn unknown_at(&self, chain_block: u64) -> Option<u32> {
        self.announced.filter(|(_, block)| chain_block >= *block).map(|(version, _)| version)
    }

    /// Whether some version this build applies has the event kind `tag`.
    pub fn has_kind(&self, tag: u32) -> bool {
        self.versions.iter().any(|v| tag < v.n_event_kinds)
    }

    /// Whether some version this build applies has the environment (`name`, `version`).
    pub fn has_env(&self, name: &str, version: u32) -> bool {
        self.versions.iter().any(|v| v.envs.contains(&(name, version)))
    }

    /// The announced version this build does not apply, and its activation block: a
    /// build that meets the block stops signing (ledger-spec/15).
    pub fn next_unknown(&self) -> Option<(u32, u64)> {
        self.announced
    }

    /// Every version of the table.
    pub fn versions(&self) -> &[VersionRules] {
        &self.versions
    }

    /// Whether a match started at `chain_block` with `plan` and `envs` plays by the
    /// network's rules: the plan of its version, exactly, and only environments of it.
    pub fn is_network_match<'a>(
        &self,
        chain_block: u64,
        plan: &str,
        mut envs: impl Iterator<Item = (&'a str, u32)>,
    ) -> bool {
        let rules = self.version_at(chain_block);
        plan == rules.plan && envs.all(|env| rules.envs.contains(&env))
    }
}

impl VersionRules {
    /// Why an event of kind `tag` may not be in a block of this version, if it may not.
    pub fn refuses_kind(&self, tag: u32) -> Option<String> {
        (tag >= self.n_event_kinds).then(|| {
            format!(
                "event tag {tag} is not a kind of protocol version {} (tags 0 to {})",
                self.version,
                self.n_event_kinds - 1
            )
        })
    }
}

/// The words a build says when `version` activates at `block` and it does not apply it.
pub fn upgrade_message(version: u32, block: u64) -> String {
    format!("protocol version {version} activates at block {block}; upgrade af")
}

/// The later version the chain announces to a build that applies versions up to
/// `known_max` (ledger-spec/15, "Announcements"): from `announcements`, the (version,
/// activation block) each other validator holding a permit commits, the one more than
/// half of them commit, if any (the smallest such version). Validators the chain does not
/// list with a permit are not counted: a fresh key or address buys no say.
pub fn announced_by_majority(known_max: u32, announcements: &[(u32, u64)]) -> Option<(u32, u64)> {
    let mut later: Vec<(u32, u64)> = announcements.iter().copied().filter(|(v, _)| *v > known_max).collect();
    later.sort_unstable();
    later.dedup();
    later.into_iter().find(|a| announcements.iter().filter(|b| *b == a).count() * 2 > announcements.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_applies_from_its_block_and_a_capped_build_learns_the_next_from_the_chain() {
        let p = Protocol::upgrade_test(100);
        assert_eq!(p.version_at(0).version, 1);
        assert_eq!(p.version_at(99).version, 1);
        assert_eq!(p.version_at(100).version, 2);
        assert!(p.next_unknown().is_none());
        assert_eq!(p.newest(), (2, 100));
        let old = p.clone().capped(1);
        assert_eq!(old.known_max(), 1);
        assert_eq!(old.newest(), (1, 0));
        assert_eq!(old.version_at(500).version, 1, "an older build knows nothing of version 2");
        assert_eq!(old.next_unknown(), None);
        let told = old.clone().with_announced(2, 100);
        assert_eq!(told.next_unknown(), Some((2, 100)));
        assert_eq!((told.unknown_at(99), told.unknown_at(100)), (None, Some(2)));
        assert_eq!(told.clone().with_announced(1, 5), told, "a version it applies is no news");
        assert_eq!(told.clone().with_announced(3, 90).next_unknown(), Some((3, 90)), "the earlier block first");
        assert_eq!(upgrade_message(2, 100), "protocol version 2 activates at block 100; upgrade af");
        assert!(p.version_at(5).refuses_kind(10).is_some() && p.version_at(100).refuses_kind(10).is_none());
        assert!(!p.is_network_match(5, PLAN_V2, [("coin", 1)].into_iter()));
        assert!(p.is_network_match(100, PLAN_V2, [("coin", 1), ("mult", 1)].into_iter()));
        assert!(!p.is_network_match(100, "score alpha_ppm=1", std::iter::empty()));
        assert!(!p.is_network_match(100, PLAN_V2, [("coin", 2)].into_iter()), "an env's version is part of it");
    }

    #[test]
    fn key_rotation_is_version_3_on_the_network_from_its_block_and_from_block_0_on_a_local_chain() {
        let network = Protocol::network();
        assert_eq!(network.newest(), (4, V4_ACTIVATION_BLOCK));
        assert_eq!(network.version_at(V3_ACTIVATION_BLOCK).version, 3);
        assert!(network.version_at(V3_ACTIVATION_BLOCK - 1).refuses_kind(11).is_some());
        assert!(network.version_at(V3_ACTIVATION_BLOCK).refuses_kind(12).is_none());
        assert!(network.version_at(V3_ACTIVATION_BLOCK).refuses_kind(13).is_none());
        assert!(network.version_at(V3_ACTIVATION_BLOCK).refuses_kind(14).is_some());
        assert_eq!(network.clone().capped(2).newest(), (2, 0), "a build released before version 3");
        let local = Protocol::local();
        assert_eq!((local.newest(), local.version_at(0).plan), ((4, 0), PLAN_V4));
        assert!(local.version_at(0).refuses_kind(11).is_none());
        assert!(Protocol::upgrade_test(40).version_at(40).refuses_kind(11).is_some(), "upgrade-test stops at 2");
    }

    #[test]
    fn an_announcement_counts_only_with_more_than_half_of_the_permitted_validators() {
        assert_eq!(announced_by_majority(1, &[(2, 100)]), Some((2, 100)));
        assert_eq!(announced_by_majority(1, &[(2, 100), (1, 0)]), None, "half is not more than half");
        assert_eq!(announced_by_majority(1, &[(2, 100), (2, 100), (1, 0)]), Some((2, 100)));
        assert_eq!(announced_by_majority(1, &[(2, 100), (2, 101), (2, 100)]), Some((2, 100)));
        assert_eq!(announced_by_majority(1, &[(2, 100), (2, 101)]), None, "no block agreed");
        assert_eq!(announced_by_majority(2, &[(2, 100), (2, 100)]), None, "already applied");
        assert_eq!(announced_by_majority(1, &[]), None);
    }

    #[test]
    fn table_names_round_trip_and_odd_spellings_are_refused() {
        assert_eq!(Protocol::named("af"), Some(Protocol::network()));
        assert_eq!(Protocol::named("upgrade-test@40"), Some(Protocol::upgrade_test(40)));
        assert_eq!(Protocol::named("local"), Some(Protocol::local()));
        for bad in ["upgrade-test@0", "upgrade-test@040", "upgrade-test@", "upgrade-test@x", "finney", ""] {
            assert_eq!(Protocol::named(bad), None, "{bad:?}");
        }
    }
}
