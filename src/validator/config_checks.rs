//! What a config must be to be run: every number in its range (by name, never clamped),
//! the network's plan where the chain is the network's, addresses and URLs that parse,
//! and no miner twice. Checked when a config is loaded and again after the command
//! line's flags change it.

use super::config::{Config, ConfigError};

/// Every numeric field's allowed range, inclusive, checked by name when a config is
/// loaded (docs/operator.md): a value outside is refused, never clamped.
pub const RANGES: &[(&str, u64, u64)] = &[
    ("ledger.block_max_events", 1, crate::limits::MAX_EVENTS_PER_BLOCK as u64),
    ("ledger.block_max_ms", 1, 3_600_000),
    ("evaluation.cap", 1, 100_000),
    ("evaluation.max_challenges", 1, 1_000_000),
    ("evaluation.window", 1, 1_024),
    ("evaluation.ratio_epsilon_ppm", 0, 499_999),
    ("evaluation.ratio_half_life_blocks", 1, 1_000_000_000),
    ("client.timeout_ms", 1, 3_600_000),
    ("client.max_attempts", 1, 20),
    ("client.backoff_base_ms", 0, 600_000),
    ("client.backoff_max_ms", 0, 3_600_000),
    ("client.max_response_bytes", 1_024, 64 * 1024 * 1024),
    ("client.max_concurrent_per_miner", 1, 4_096),
    ("client.max_concurrent_total", 1, 65_536),
    ("miners (count)", 0, crate::limits::MAX_LIST_ITEMS as u64),
    ("chain.discover_every_ms", 100, 3_600_000),
    ("archive.every_s", 1, 86_400),
    ("archive.keep_days", 0, 36_500),
];

/// Longest miner `base_url` accepted, in bytes.
pub const MAX_URL_BYTES: usize = 2048;

impl Config {
    fn numeric_fields(&self) -> [(&'static str, u64); 18] {
        let (l, e, c) = (&self.ledger, &self.evaluation, &self.client);
        [
            ("ledger.block_max_events", l.block_max_events as u64),
            ("ledger.block_max_ms", l.block_max_ms),
            ("evaluation.cap", u64::from(e.cap)),
            ("evaluation.max_challenges", e.max_challenges),
            ("evaluation.window", e.window as u64),
            ("evaluation.ratio_epsilon_ppm", u64::from(e.ratio_epsilon_ppm)),
            ("evaluation.ratio_half_life_blocks", e.ratio_half_life_blocks),
            ("client.timeout_ms", c.timeout_ms),
            ("client.max_attempts", u64::from(c.max_attempts)),
            ("client.backoff_base_ms", c.backoff_base_ms),
            ("client.backoff_max_ms", c.backoff_max_ms),
            ("client.max_response_bytes", c.max_response_bytes as u64),
            ("client.max_concurrent_per_miner", c.max_concurrent_per_miner as u64),
            ("client.max_concurrent_total", c.max_concurrent_total as u64),
            ("miners (count)", self.miners.len() as u64),
            ("chain.discover_every_ms", self.chain.discover_every_ms),
            ("archive.every_s", self.archive.every_s),
            ("archive.keep_days", self.archive.keep_days),
        ]
    }

    /// Refuses a validator's config with nothing to play: no miners listed, and no chain
    /// to discover them from.
    pub fn check_playable(&self) -> Result<(), ConfigError> {
        if self.miners.is_empty() && !self.chain.is_set() {
            return Err(ConfigError::NothingToPlay);
        }
        Ok(())
    }

    /// Every check a loaded config passes; public for a config changed after loading
    /// (by command-line flags).
    pub fn check(&self) -> Result<(), ConfigError> {
        let invalid = |why: String| Err(ConfigError::Invalid(why));
        for ((name, value), (range_name, lo, hi)) in self.numeric_fields().iter().zip(RANGES) {
            debug_assert_eq!(name, range_name);
            if value < lo || value > hi {
                return invalid(format!("{name} = {value} is outside its range {lo}..={hi}"));
            }
        }
        if self.client.backoff_max_ms < self.client.backoff_base_ms {
            return invalid("client.backoff_max_ms is below client.backoff_base_ms".into());
        }
        let alpha = self.evaluation.alpha;
        if !(alpha > 0.0 && alpha <= 0.5) {
            return invalid(format!("evaluation.alpha = {alpha} is outside its range (0, 0.5]"));
        }
        let advantage = self.evaluation.futility_advantage;
        if !(0.0..=0.5).contains(&advantage) {
            return invalid(format!(
                "evaluation.futility_advantage = {advantage} is outside its range [0, 0.5] (0: off)"
            ));
        }
        let margin = self.evaluation.futility_margin;
        if !(0.0..=0.5).contains(&margin) {
            return invalid(format!("evaluation.futility_margin = {margin} is outside its range [0, 0.5] (0: off)"));
        }
        let futility_alpha = self.evaluation.futility_alpha;
        if !(futility_alpha > 0.0 && futility_alpha <= 0.5) {
            return invalid(format!("evaluation.futility_alpha = {futility_alpha} is outside its range (0, 0.5]"));
        }
        self.evaluation.stopping_rule()?;
        self.evaluation.check_network_plan()?;
        let archive = &self.archive.url;
        if self.archive.keep_days > 0 && archive.is_empty() {
            return invalid(format!(
                "archive.keep_days = {} prunes old bodies, which needs an archive to fetch them back from: set archive.url",
                self.archive.keep_days
            ));
        }
        if archive.contains("://") && !crate::http::archive::is_object_store(archive) {
            return invalid(format!(
                "archive.url = {} is neither a folder nor one of {}",
                crate::bytes::quote_prefix(archive),
                crate::http::archive::OBJECT_SCHEMES.join(", ")
            ));
        }
        self.http.address()?;
        let p2p = self.p2p.parsed()?;
        if self.chain.is_set() && self.p2p.enabled() {
            // Refused now rather than by the chain later: other validators would never
            // find this one.
            let ip = p2p.published_ip();
            let (port, named) = match p2p.external {
                Some((_, Some(port))) => (port, "p2p.external"),
                Some((_, None)) => (1, "p2p.external"),
                None => (1, "p2p.listen"),
            };
            // An unspecified address (0.0.0.0) listens everywhere and is simply not
            // published (ledger-spec/13); one subtensor refuses would never be found.
            if let Err(why) = crate::chain::check_published_axon(ip, port).or_else(|why| match ip.is_unspecified() {
                true => Ok(()),
                false => Err(why),
            }) {
                return invalid(format!(
                    "{named} would be published on chain (serve_axon) as {ip}: {why}; listen on an address other validators can reach, or name it with --external-addr IP[:PORT] ([p2p] external)"
                ));
            }
        }
        if self.p2p.listen.len() + self.p2p.peers.len() + self.p2p.allow.len() > crate::limits::MAX_LIST_ITEMS {
            return invalid(format!("p2p lists hold more than {} entries", crate::limits::MAX_LIST_ITEMS));
        }
        let Some(table) = crate::protocol::Protocol::named(&self.protocol.table) else {
            return invalid(format!(
                "protocol.table is {}; known: af (the network's), local and upgrade-test@BLOCK (a local chain only)",
                crate::bytes::quote_prefix(&self.protocol.table)
            ));
        };
        if table != crate::protocol::Protocol::network() && !self.chain.endpoint.starts_with("local:") {
            return invalid(format!(
                "protocol.table {} is a test network's; a validator on {} plays by the network's table (af)",
                self.protocol.table,
                if self.chain.endpoint.is_empty() { "no chain" } else { &self.chain.endpoint }
            ));
        }
        if self.evaluation.envs.is_empty() {
            return invalid("evaluation.envs is empty".into());
        }
        let registry = crate::envs::registry();
        if let Some(unknown) = self.evaluation.envs.iter().find(|e| registry.get(e).is_none()) {
            return invalid(format!(
                "evaluation.envs names {}; known: {}",
                crate::bytes::quote_prefix(unknown),
                registry.names().join(", ")
            ));
        }
        // Each match plays the configured envs its protocol version has (ledger-spec/15):
        // one no version has is never played, and a version with none of them could
        // play no match.
        let protocol = self.protocol();
        let spec_of = |name: &String| registry.get(name).map(|env| (env.spec().name, env.spec().version));
        let in_version = |rules: &crate::protocol::VersionRules, name: &String| {
            spec_of(name).is_some_and(|env| rules.envs.contains(&env))
        };
        if let Some(name) =
            self.evaluation.envs.iter().find(|name| !protocol.versions().iter().any(|rules| in_version(rules, name)))
        {
            return invalid(format!(
                "evaluation.envs names {name}, which no version of protocol table {} has",
                self.protocol.table
            ));
        }
        if let Some(rules) =
            protocol.versions().iter().find(|rules| !self.evaluation.envs.iter().any(|name| in_version(rules, name)))
        {
            return invalid(format!(
                "evaluation.envs names no environment of protocol version {} (it has {})",
                rules.version,
                rules.envs.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", ")
            ));
        }
        let mut envs: Vec<&str> = self.evaluation.envs.iter().map(String::as_str).collect();
        envs.sort();
        if let Some(pair) = envs.windows(2).find(|w| w[0] == w[1]) {
            // Twice the same env would play one schedule twice in one match.
            return invalid(format!("evaluation.envs lists {:?} twice", pair[0]));
        }
        let max_name = crate::limits::MAX_NAME_BYTES;
        for (i, miner) in self.miners.iter().enumerate() {
            for (field, value) in [("hotkey", &miner.hotkey), ("model", &miner.model)] {
                if value.is_empty() || value.len() > max_name {
                    return invalid(format!(
                        "miners[{i}].{field} is {} bytes; the ledger records 1..={max_name}",
                        value.len()
                    ));
                }
            }
            let url = &miner.base_url;
            if url.len() > MAX_URL_BYTES || !(url.starts_with("http://") || url.starts_with("https://")) {
                return invalid(format!(
                    "miners[{i}].base_url {} is not an http(s) URL of at most {MAX_URL_BYTES} bytes",
                    crate::bytes::quote_prefix(url)
                ));
            }
        }
        let mut hotkeys: Vec<&str> = self.miners.iter().map(|m| m.hotkey.as_str()).collect();
        hotkeys.sort();
        if let Some(pair) = hotkeys.windows(2).find(|w| w[0] == w[1]) {
            return invalid(format!("miner {} is listed twice", pair[0]));
        }
        Ok(())
    }
}
