//! `af validate` configuration: a TOML file in which every field has a default, and
//! environment variables `AF_<SECTION>__<KEY>` that override any field (the value is read
//! as a TOML literal, else as a string), so containers can be configured without files.

use crate::evaluation::ratio::RatioParams;
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
            rule: "mixture".into(),
            alpha: 0.05,
            cap: DEFAULT_CAP,
            max_challenges: 4 * u64::from(DEFAULT_CAP),
            window: 8,
            envs: vec!["tictactoe".into(), "mult".into(), "sat".into(), "coin".into()],
            ratio_epsilon_ppm: 10_000,
            ratio_half_life_blocks: 7_200,
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
}

impl MinerConfig {
    pub fn endpoint(&self) -> Endpoint {
        Endpoint { base_url: self.base_url.clone(), model: self.model.clone(), api_key_env: self.api_key_env.clone() }
    }
}

impl EvaluationConfig {
    pub fn stopping_rule(&self) -> Result<StoppingRule, ConfigError> {
        match self.rule.as_str() {
            "mixture" => Ok(StoppingRule::Mixture { alpha: self.alpha, prior_a: 4, prior_b: 4 }),
            "wilson" => Ok(StoppingRule::Wilson { z: 1.96 }),
            "wilson-calibrated" => Ok(StoppingRule::wilson_calibrated(self.cap)),
            "sprt" => Ok(StoppingRule::Sprt { delta: 0.1, alpha: self.alpha / 2.0, beta: 0.1 }),
            other => Err(ConfigError::Invalid(format!(
                "evaluation.rule {other:?}: expected mixture, wilson, wilson-calibrated or sprt"
            ))),
        }
    }

    pub fn ratio_params(&self) -> RatioParams {
        RatioParams { epsilon_ppm: self.ratio_epsilon_ppm, half_life_blocks: self.ratio_half_life_blocks }
    }
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
    fn check(&self) -> Result<(), ConfigError> {
        let invalid = |why: String| Err(ConfigError::Invalid(why));
        self.evaluation.stopping_rule()?;
        if self.evaluation.envs.is_empty() {
            return invalid("evaluation.envs is empty".into());
        }
        let registry = crate::envs::registry();
        if let Some(unknown) = self.evaluation.envs.iter().find(|e| registry.get(e).is_none()) {
            return invalid(format!("evaluation.envs names {unknown:?}; known: {}", registry.names().join(", ")));
        }
        if self.evaluation.cap == 0 || self.evaluation.max_challenges == 0 || self.evaluation.window == 0 {
            return invalid("evaluation.cap, max_challenges and window must be positive".into());
        }
        if !(0.0..1.0).contains(&self.evaluation.alpha) || self.evaluation.alpha == 0.0 {
            return invalid("evaluation.alpha must be in (0, 1)".into());
        }
        if self.ledger.block_max_events == 0 {
            return invalid("ledger.block_max_events must be positive".into());
        }
        let mut hotkeys: Vec<&str> = self.miners.iter().map(|m| m.hotkey.as_str()).collect();
        hotkeys.sort();
        if let Some(pair) = hotkeys.windows(2).find(|w| w[0] == w[1]) {
            return invalid(format!("miner {} is listed twice", pair[0]));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> impl Iterator<Item = (String, String)> {
        list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>().into_iter()
    }

    #[test]
    fn defaults_overrides_and_errors() {
        let config = parse("", vars(&[])).unwrap();
        assert_eq!(config, Config::default());
        let text =
            "[evaluation]\ncap = 50\n[[miners]]\nhotkey = \"a\"\nuid = 0\nbase_url = \"http://x\"\nmodel = \"m\"\n";
        let config = parse(
            text,
            vars(&[
                ("AF_EVALUATION__CAP", "70"),
                ("AF_CLIENT__TIMEOUT_MS", "5"),
                ("AF_EVALUATION__RULE", "sprt"),
                ("HOME", "/"),
            ]),
        )
        .unwrap();
        assert_eq!(config.evaluation.cap, 70);
        assert_eq!(config.client.timeout_ms, 5);
        assert_eq!(config.evaluation.rule, "sprt");
        assert_eq!(config.miners.len(), 1);
        assert!(matches!(parse("[evaluation]\ncapp = 1\n", vars(&[])), Err(ConfigError::Toml(_))));
        assert!(matches!(parse("", vars(&[("AF_EVALUATION__RULE", "coinflip")])), Err(ConfigError::Invalid(_))));
        assert!(matches!(parse("", vars(&[("AF_EVALUATION__ENVS", "[\"chess\"]")])), Err(ConfigError::Invalid(_))));
    }
}
