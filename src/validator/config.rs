//! `af validate` configuration: a TOML file in which every field has a default, and
//! environment variables `AF_<SECTION>__<KEY>` that override any field (the value is read
//! as a TOML literal, else as a string), so containers can be configured without files.

use crate::evaluation::futility::{AdvantageFutility, BarFutility, Futility};
use crate::evaluation::ratio::{Arithmetic, RatioParams};
use crate::evaluation::stopping::{StoppingRule, DEFAULT_CAP};
use crate::miner::client::{ClientConfig, Endpoint};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub ledger: LedgerConfig,
    pub evaluation: EvaluationConfig,
    pub client: ClientConfig,
    /// The first is the champion until a match says otherwise; the rest are contenders,
    /// played in order against the current champion.
    pub miners: Vec<MinerConfig>,
    /// Where to commit our tip and set weights; no chain when `endpoint` is empty.
    pub chain: crate::chain::ChainSpec,
    /// The read-only HTTP API (ledger-spec/11-http.md).
    pub http: HttpConfig,
    /// Gossip and sync with other validators (libp2p).
    pub p2p: P2pConfig,
    /// Publishing this store's logs to an archive as they grow (ledger-spec/11's layout).
    pub archive: ArchiveConfig,
    /// The protocol table the validator plays and judges by (ledger-spec/15).
    pub protocol: ProtocolConfig,
}

/// The protocol table: the network's (`af`) on any real chain; a devnet on a local chain
/// may name the local table (the newest version from block 0) or the upgrade-test table, and a test may cap the versions this build applies
/// to stand for a build released before the newest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProtocolConfig {
    /// `af` (the network's), or `local` or `upgrade-test@BLOCK` on a local chain only.
    pub table: String,
    /// Tests only: apply no version past this one, as an older build would not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub known_max: Option<u32>,
}

impl Default for ProtocolConfig {
    fn default() -> Self {
        ProtocolConfig { table: "af".into(), known_max: None }
    }
}

impl Config {
    /// The protocol table as configured (checked by `validate`).
    pub fn protocol(&self) -> crate::protocol::Protocol {
        let table =
            crate::protocol::Protocol::named(&self.protocol.table).unwrap_or_else(crate::protocol::Protocol::network);
        match self.protocol.known_max {
            Some(max) => table.capped(max),
            None => table,
        }
    }

    /// The environment registry, judging by [`Config::protocol`].
    pub fn registry(&self) -> crate::envs::Registry {
        crate::envs::registry().with_protocol(self.protocol())
    }
}

/// Where the validator publishes every log it holds, and how often: what `af ledger
/// publish --out URL` does, run in the background (each run writes only what is new).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ArchiveConfig {
    /// A folder or an object store URL (`s3://BUCKET/PREFIX`, `gs://`, `az://`,
    /// `file://`); empty: no archive.
    pub url: String,
    /// Seconds between publishes (a failed one is tried again sooner, backing off).
    pub every_s: u64,
    /// Days of other validators' logs kept whole; older blocks the archive holds keep
    /// only their header, signature and leaf hashes (ledger-spec/05, pruned bodies),
    /// fetched back from the archive when a reader needs one. 0: every body is kept.
    /// Our own log is never pruned.
    pub keep_days: u64,
}

impl Default for ArchiveConfig {
    fn default() -> Self {
        ArchiveConfig { url: String::new(), every_s: 300, keep_days: 0 }
    }
}

/// Networking. `--listen`, `--peer` and `--allow` on the command line replace the
/// matching list here. With neither `listen` nor `peers`, the validator runs alone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct P2pConfig {
    /// Multiaddrs to listen on, e.g. `/ip4/0.0.0.0/tcp/4001`.
    pub listen: Vec<String>,
    /// Bootstrap peers' multiaddrs, dialled at start and whenever not connected.
    pub peers: Vec<String>,
    /// Validator keys (hex) whose logs are kept; empty: every validly signed log.
    pub allow: Vec<String>,
    /// With a chain: the address published with `serve_axon`, where other validators
    /// dial this one (`IP` or `IP:PORT`; default the first `listen` address, its port
    /// too). Subtensor refuses 127.0.0.1, `::1` and the broadcast address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external: Option<String>,
    /// The most memory, in MiB above the node's own working set, that peers and HTTP
    /// readers together may make it hold (`budget.rs`; docs/design/invariants.md). Half is
    /// counted byte for byte (responses read and sent, blocks buffered for readers);
    /// the other half covers what connection limits bound (buffers per connection).
    pub memory_budget_mb: u64,
}

/// The default of `[p2p] memory_budget_mb`.
pub const DEFAULT_MEMORY_BUDGET_MB: u64 = 256;

impl Default for P2pConfig {
    fn default() -> Self {
        P2pConfig {
            listen: Vec::new(),
            peers: Vec::new(),
            allow: Vec::new(),
            external: None,
            memory_budget_mb: DEFAULT_MEMORY_BUDGET_MB,
        }
    }
}

impl P2pConfig {
    /// The budget counted byte for byte: half of `memory_budget_mb`.
    /// The budgets of `memory_budget_mb`: half counted byte for byte, split evenly between
    /// libp2p sync and HTTP readers, so readers can slow readers but never take the room
    /// sync needs (the other half is what the connection limits bound).
    pub fn budgets(&self) -> Result<crate::budget::Budgets, ConfigError> {
        if !(16..=1 << 20).contains(&self.memory_budget_mb) {
            return Err(ConfigError::Invalid(format!(
                "p2p.memory_budget_mb = {} is outside 16..=1048576",
                self.memory_budget_mb
            )));
        }
        Ok(crate::budget::Budgets::split(self.memory_budget_mb * 1024 * 1024 / 2))
    }

    pub fn enabled(&self) -> bool {
        !self.listen.is_empty() || !self.peers.is_empty()
    }

    /// Each field parsed, a bad value refused by field and position.
    pub fn parsed(&self) -> Result<ParsedP2p, ConfigError> {
        let addresses = |field: &str, list: &[String]| -> Result<Vec<libp2p::Multiaddr>, ConfigError> {
            list.iter()
                .enumerate()
                .map(|(i, text)| {
                    text.parse().map_err(|_| {
                        ConfigError::Invalid(format!(
                            "p2p.{field}[{i}] = {} is not a multiaddr (e.g. /ip4/127.0.0.1/tcp/4001)",
                            crate::bytes::quote_prefix(text)
                        ))
                    })
                })
                .collect()
        };
        let allow = self
            .allow
            .iter()
            .enumerate()
            .map(|(i, hex)| {
                crate::bytes::ValidatorKey::from_hex(hex)
                    .map_err(|e| ConfigError::Invalid(format!("p2p.allow[{i}]: {e}")))
            })
            .collect::<Result<_, _>>()?;
        let external = match &self.external {
            None => None,
            Some(text) => Some(parse_external(text).ok_or_else(|| {
                ConfigError::Invalid(format!(
                    "p2p.external = {} is not an IP or IP:PORT (e.g. 203.0.113.7:4001)",
                    crate::bytes::quote_prefix(text)
                ))
            })?),
        };
        Ok(ParsedP2p {
            listen: addresses("listen", &self.listen)?,
            peers: addresses("peers", &self.peers)?,
            allow,
            external,
        })
    }
}

fn parse_external(text: &str) -> Option<(std::net::IpAddr, Option<u16>)> {
    match text.parse::<std::net::SocketAddr>() {
        Ok(socket) => Some((socket.ip(), Some(socket.port()))),
        Err(_) => text.parse::<std::net::IpAddr>().ok().map(|ip| (ip, None)),
    }
}

/// The IP of a `/ip4/..` or `/ip6/..` multiaddr.
pub fn multiaddr_ip(address: &libp2p::Multiaddr) -> Option<std::net::IpAddr> {
    address.iter().find_map(|part| match part {
        libp2p::multiaddr::Protocol::Ip4(ip) => Some(std::net::IpAddr::V4(ip)),
        libp2p::multiaddr::Protocol::Ip6(ip) => Some(std::net::IpAddr::V6(ip)),
        _ => None,
    })
}

impl ParsedP2p {
    /// The IP published on chain: `external`'s, else the first listen address's (the
    /// node listens on 127.0.0.1 when none is given).
    pub fn published_ip(&self) -> std::net::IpAddr {
        self.external
            .map(|(ip, _)| ip)
            .or_else(|| self.listen.first().and_then(multiaddr_ip))
            .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST))
    }
}

/// [`P2pConfig`] with every value parsed.
#[derive(Clone, Debug)]
pub struct ParsedP2p {
    pub listen: Vec<libp2p::Multiaddr>,
    pub peers: Vec<libp2p::Multiaddr>,
    pub allow: Vec<crate::bytes::ValidatorKey>,
    /// `external`: the IP published on chain, and its port if named.
    pub external: Option<(std::net::IpAddr, Option<u16>)>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Address to serve the HTTP API on, e.g. `127.0.0.1:7080`; empty: no HTTP API.
    /// `--http ADDR` sets it from the command line.
    pub listen: String,
    /// Address to serve `/healthz` and `/metrics` alone on, with connections of their own
    /// (bind it where only the orchestrator and the scraper reach: a crowd on the API's
    /// port cannot fail them there); empty: none. `--probes ADDR` sets it.
    pub probes: String,
}

impl HttpConfig {
    /// The address, if set; a value that is not `IP:PORT` is refused by name.
    pub fn address(&self) -> Result<Option<std::net::SocketAddr>, ConfigError> {
        optional_address("http.listen", &self.listen)
    }

    /// The probes' address, if set; a value that is not `IP:PORT` is refused by name.
    pub fn probes_address(&self) -> Result<Option<std::net::SocketAddr>, ConfigError> {
        optional_address("http.probes", &self.probes)
    }
}

/// `text` as an address (`None` when empty), or `field`'s value refused by name.
fn optional_address(field: &str, text: &str) -> Result<Option<std::net::SocketAddr>, ConfigError> {
    if text.is_empty() {
        return Ok(None);
    }
    text.parse().map(Some).map_err(|_| ConfigError::Invalid(format!("{field}: {text:?} is not IP:PORT")))
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LedgerConfig {
    /// Seal a block once this many events are waiting...
    pub block_max_events: usize,
    /// ...or this long after the first one arrived.
    pub block_max_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvaluationConfig {
    /// `mixture`, `wilson`, `wilson-calibrated` or `sprt`.
    pub rule: String,
    pub alpha: f64,
    /// Cap on decisive games per environment.
    pub cap: u32,
    /// Cap on challenges per environment, draws included.
    pub max_challenges: u64,
    /// Challenges in flight per environment.
    pub window: usize,
    pub envs: Vec<String>,
    pub ratio_epsilon_ppm: u32,
    pub ratio_half_life_blocks: u64,
    /// Futility stop of the `score` rule: the margin over the ratio to beat a contender's
    /// mean score is tested against (0 turns the stop off).
    pub futility_margin: f64,
    /// Futility stop of the `mixture` rule: the margin on the contender's advantage per
    /// challenge over 1/2 (0 turns the stop off).
    pub futility_advantage: f64,
    /// The futility stop's level (either rule).
    pub futility_alpha: f64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinerConfig {
    pub hotkey: String,
    pub uid: u16,
    pub base_url: String,
    pub model: String,
    #[serde(default)]
    pub api_key_env: Option<String>,
}

impl Default for LedgerConfig {
    fn default() -> Self {
        LedgerConfig { block_max_events: 256, block_max_ms: 2_000 }
    }
}

impl Default for EvaluationConfig {
    fn default() -> Self {
        EvaluationConfig {
            rule: "score".into(),
            alpha: 0.05,
            cap: DEFAULT_CAP,
            max_challenges: 4 * u64::from(DEFAULT_CAP),
            window: 8,
            envs: vec!["tictactoe".into(), "mult".into(), "sat".into(), "coin".into(), "abd".into(), "ded".into()],
            ratio_epsilon_ppm: 10_000,
            ratio_half_life_blocks: 7_200,
            futility_margin: 0.06,
            futility_advantage: crate::evaluation::futility::DEFAULT_ADVANTAGE_FUTILITY.advantage,
            futility_alpha: 0.05,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config is not valid TOML: {0}")]
    Toml(String),
    #[error("config: {0}")]
    Invalid(String),
    #[error("environment variable {name}: {reason}")]
    Override { name: String, reason: String },
    #[error("no miners to play: add [[miners]] entries (hotkey, uid, base_url, model) to the config, or a [chain] (--chain) to discover them from")]
    NothingToPlay,
}

impl MinerConfig {
    pub fn endpoint(&self) -> Endpoint {
        Endpoint { base_url: self.base_url.clone(), model: self.model.clone(), api_key_env: self.api_key_env.clone() }
    }
}

impl EvaluationConfig {
    pub fn stopping_rule(&self) -> Result<StoppingRule, ConfigError> {
        match self.rule.as_str() {
            "score" => Ok(StoppingRule::Score {
                alpha_ppm: ppm(self.alpha),
                prior_a: 4,
                prior_b: 4,
                max_challenges: self.max_challenges,
                epsilon_ppm: self.ratio_epsilon_ppm,
                half_life_blocks: self.ratio_half_life_blocks,
                // The network plan's dominance crown (not a setting).
                dominance: Some(crate::evaluation::stopping::DEFAULT_DOMINANCE),
            }),
            "mixture" => Ok(StoppingRule::Mixture { alpha: self.alpha, prior_a: 4, prior_b: 4 }),
            "wilson" => Ok(StoppingRule::Wilson { z: 1.96 }),
            "wilson-calibrated" => Ok(StoppingRule::wilson_calibrated(self.cap)),
            "sprt" => Ok(StoppingRule::Sprt { delta: 0.1, alpha: self.alpha / 2.0, beta: 0.1 }),
            other => Err(ConfigError::Invalid(format!(
                "evaluation.rule {}: expected score, mixture, wilson, wilson-calibrated or sprt",
                crate::bytes::quote_prefix(other)
            ))),
        }
    }

    /// The futility stop: against the bar for the `score` rule (none when
    /// `futility_margin` is 0), on the advantage for the others (none when
    /// `futility_advantage` is 0).
    pub fn futility(&self) -> Option<Futility> {
        if self.rule == "score" {
            (self.futility_margin > 0.0).then_some(Futility::Bar(BarFutility {
                margin_ppm: ppm(self.futility_margin),
                alpha_ppm: ppm(self.futility_alpha),
                // The network plan's mean condition at the bar (not a setting).
                mean_margin_ppm: Some(0),
                rise: None,
            }))
        } else {
            (self.futility_advantage > 0.0).then_some(Futility::Advantage(AdvantageFutility {
                advantage: self.futility_advantage,
                alpha: self.futility_alpha,
            }))
        }
    }

    /// Refuses a plan other than the network's (ledger-spec/02, "The network's plan"),
    /// naming the first field that differs and the network's value: a validator decides
    /// by the network's plan only, and a log decided under another is a finding against it.
    pub fn check_network_plan(&self) -> Result<(), ConfigError> {
        use crate::evaluation::network_plan::{NETWORK_FUTILITY, NETWORK_RULE, PLAN_VERSION};
        let network = EvaluationConfig::default();
        debug_assert_eq!(network.stopping_rule().ok(), Some(NETWORK_RULE));
        debug_assert_eq!(network.futility(), Some(NETWORK_FUTILITY));
        // (field, equal to the network's, value shown, network's value shown): floats
        // compared as the plan records them, in ppm.
        let float =
            |name, ours: f64, theirs: f64| (name, ppm(ours) == ppm(theirs), ours.to_string(), theirs.to_string());
        let int = |name, ours: u64, theirs: u64| (name, ours == theirs, ours.to_string(), theirs.to_string());
        let fields = [
            ("rule", self.rule == network.rule, format!("{:?}", self.rule), format!("{:?}", network.rule)),
            float("alpha", self.alpha, network.alpha),
            int("max_challenges", self.max_challenges, network.max_challenges),
            int("cap", self.cap.into(), network.cap.into()),
            int("ratio_epsilon_ppm", self.ratio_epsilon_ppm.into(), network.ratio_epsilon_ppm.into()),
            int("ratio_half_life_blocks", self.ratio_half_life_blocks, network.ratio_half_life_blocks),
            float("futility_margin", self.futility_margin, network.futility_margin),
            float("futility_alpha", self.futility_alpha, network.futility_alpha),
            float("futility_advantage", self.futility_advantage, network.futility_advantage),
        ];
        if let Some((name, _, shown, network_shown)) = fields.into_iter().find(|field| !field.1) {
            return Err(ConfigError::Invalid(format!(
                "evaluation.{name} = {shown} differs from the network's plan (ledger-spec/02, plan v{PLAN_VERSION}: \
                 {network_shown}); a validator decides by the network's plan only: leave it out"
            )));
        }
        Ok(())
    }

    /// The ratio's parameters, with the arithmetic of this config's rule.
    pub fn ratio_params(&self) -> RatioParams {
        RatioParams {
            epsilon_ppm: self.ratio_epsilon_ppm,
            half_life_blocks: self.ratio_half_life_blocks,
            arithmetic: if self.rule == "score" { Arithmetic::Exact } else { Arithmetic::Float },
        }
    }
}

/// A probability in (0, 1) in parts per million, as `score` plans record it.
fn ppm(x: f64) -> u32 {
    libm::round(x * 1e6) as u32
}

/// Parses `text` (empty for all defaults), applies `AF_*` overrides from `vars`, checks.
pub fn parse(text: &str, vars: impl Iterator<Item = (String, String)>) -> Result<Config, ConfigError> {
    let mut table: toml::Table = text.parse().map_err(|e: toml::de::Error| ConfigError::Toml(e.to_string()))?;
    for (name, value) in vars {
        let Some(path) = name.strip_prefix("AF_") else { continue };
        let Some((section, key)) = path.split_once("__") else { continue };
        let (section, key) = (section.to_ascii_lowercase(), key.to_ascii_lowercase());
        let parsed = format!("v = {value}")
            .parse::<toml::Table>()
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or(toml::Value::String(value.clone()));
        let entry = table.entry(section.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let Some(section_table) = entry.as_table_mut() else {
            return Err(ConfigError::Override { name, reason: format!("{section} is not a section") });
        };
        section_table.insert(key, parsed);
    }
    let config: Config =
        toml::Value::Table(table).try_into().map_err(|e: toml::de::Error| ConfigError::Toml(e.to_string()))?;
    config.check()?;
    Ok(config)
}

impl Config {
    /// The config as TOML with every setting shown: TOML has no null, so an unset
    /// optional field of `[chain]` is a comment in its section, saying what unset means.
    pub fn to_toml_commented(&self) -> Result<String, ConfigError> {
        let text = toml::to_string(self).map_err(|e| ConfigError::Toml(e.to_string()))?;
        let spec = &self.chain;
        let unset: Vec<String> = [
            ("hotkey", spec.hotkey.is_none(), "no signing: read-only chain access"),
            ("wallet", spec.wallet.is_none(), "needed with hotkey on subtensor"),
            ("wallets_dir", spec.wallets_dir.is_none(), "~/.bittensor/wallets"),
        ]
        .iter()
        .filter(|(_, is_unset, _)| *is_unset)
        .map(|(name, _, meaning)| format!("# {name}: unset ({meaning})\n"))
        .collect();
        let mut out = String::with_capacity(text.len() + 200);
        for line in text.lines() {
            out.push_str(line);
            out.push('\n');
            if line.starts_with("netuid = ") {
                unset.iter().for_each(|comment| out.push_str(comment));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> impl Iterator<Item = (String, String)> {
        list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>().into_iter()
    }

    #[test]
    fn pruning_needs_an_archive_and_a_bounded_window() {
        let error = parse("[archive]\nkeep_days = 2\n", vars(&[])).unwrap_err().to_string();
        assert!(error.contains("archive.keep_days") && error.contains("archive.url"), "{error}");
        let config = parse("[archive]\nurl = \"/srv/archive\"\nkeep_days = 2\n", vars(&[])).unwrap();
        assert_eq!(config.archive.keep_days, 2);
        let error = parse("[archive]\nurl = \"/a\"\nkeep_days = 40000\n", vars(&[])).unwrap_err().to_string();
        assert!(error.contains("archive.keep_days = 40000"), "{error}");
    }

    #[test]
    fn defaults_overrides_and_errors() {
        let config = parse("", vars(&[])).unwrap();
        assert_eq!(config, Config::default());
        let text =
            "[evaluation]\nwindow = 50\n[[miners]]\nhotkey = \"a\"\nuid = 0\nbase_url = \"http://x\"\nmodel = \"m\"\n";
        let config = parse(
            text,
            vars(&[
                ("AF_EVALUATION__WINDOW", "70"),
                ("AF_CLIENT__TIMEOUT_MS", "5"),
                ("AF_EVALUATION__ALPHA", "0.05"),
                ("HOME", "/"),
            ]),
        )
        .unwrap();
        assert_eq!(config.evaluation.window, 70);
        assert_eq!(config.client.timeout_ms, 5);
        assert_eq!(config.miners.len(), 1);
        // The plan is the network's: naming another value for any of its fields is
        // refused by the field's name, from the file or the environment.
        for (text, var, field) in [
            ("[evaluation]\nalpha = 0.5\n", None, "evaluation.alpha"),
            ("[evaluation]\nmax_challenges = 400\n", None, "evaluation.max_challenges"),
            ("[evaluation]\ncap = 50\n", None, "evaluation.cap"),
            ("[evaluation]\nfutility_margin = 0\n", None, "evaluation.futility_margin"),
            ("[evaluation]\nfutility_alpha = 0.1\n", None, "evaluation.futility_alpha"),
            ("[evaluation]\nfutility_advantage = 0\n", None, "evaluation.futility_advantage"),
            ("", Some(("AF_EVALUATION__RATIO_EPSILON_PPM", "0")), "evaluation.ratio_epsilon_ppm"),
            ("", Some(("AF_EVALUATION__RATIO_HALF_LIFE_BLOCKS", "1")), "evaluation.ratio_half_life_blocks"),
            ("", Some(("AF_EVALUATION__RULE", "sprt")), "evaluation.rule"),
        ] {
            let error = parse(text, vars(&var.into_iter().collect::<Vec<_>>())).unwrap_err().to_string();
            assert!(error.contains(field) && error.contains("network's plan"), "{text:?} {var:?}: {error}");
        }
        assert!(matches!(parse("[evaluation]\ncapp = 1\n", vars(&[])), Err(ConfigError::Toml(_))));
        assert!(matches!(parse("", vars(&[("AF_EVALUATION__RULE", "coinflip")])), Err(ConfigError::Invalid(_))));
        assert!(matches!(parse("", vars(&[("AF_EVALUATION__ENVS", "[\"chess\"]")])), Err(ConfigError::Invalid(_))));
    }

    /// Values that parse but that no run could survive are refused by the field's name.
    #[test]
    fn extreme_values_are_refused_by_name() {
        let miner = |hotkey: &str, model: &str| {
            format!("[[miners]]\nhotkey = \"{hotkey}\"\nuid = 0\nbase_url = \"http://x\"\nmodel = \"{model}\"\n")
        };
        let long = "h".repeat(300);
        let cases: Vec<(String, &str)> = vec![
            ("[ledger]\nblock_max_events = 1152921504606846976\n".into(), "ledger.block_max_events"),
            ("[ledger]\nblock_max_events = 4611686018427387904\n".into(), "ledger.block_max_events"),
            ("[ledger]\nblock_max_events = 0\n".into(), "ledger.block_max_events"),
            ("[client]\nmax_concurrent_total = 4611686018427387904\n".into(), "client.max_concurrent_total"),
            ("[client]\nmax_concurrent_per_miner = 4611686018427387904\n".into(), "client.max_concurrent_per_miner"),
            ("[evaluation]\nwindow = 100000000\n".into(), "evaluation.window"),
            ("[evaluation]\nalpha = 0.0\n".into(), "evaluation.alpha"),
            ("[evaluation]\nalpha = nan\n".into(), "evaluation.alpha"),
            ("[evaluation]\nenvs = [\"mult\", \"mult\"]\n".into(), "evaluation.envs"),
            ("[client]\ntimeout_ms = 0\n".into(), "client.timeout_ms"),
            ("[client]\nmax_response_bytes = 4611686018427387904\n".into(), "client.max_response_bytes"),
            ("[client]\nbackoff_base_ms = 5000\nbackoff_max_ms = 10\n".into(), "client.backoff_max_ms"),
            (miner(&long, "m"), "miners[0].hotkey"),
            (miner("h", &long), "miners[0].model"),
            (miner("h", ""), "miners[0].model"),
        ];
        for (text, field) in cases {
            let error = parse(&text, vars(&[])).expect_err(&text).to_string();
            assert!(error.contains(field), "{text:?}: {error:?} does not name {field}");
        }
    }
}
