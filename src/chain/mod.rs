//! The chain as `af` sees it: one [`Chain`] trait with two backends, the real subtensor
//! (through subxt) and a local stand-in for the devnet and tests. The rest of `af`
//! knows only the trait.
//!
//! What a validator commits (`Commitments.set_commitment`, up to three `Data` fields):
//! `Raw32(tip hash)`, `Raw32(ledger ed25519 key)`, `Raw8(tip height, u64 LE)`. The
//! pallet charges each call `max(100, sum of field lengths)` bytes of space against 3100
//! per tempo, so the 72 bytes of all three fields cost the same 100 as the tip hash alone:
//! the key and height travel in every commitment for free, and `CommitmentOf` (which keeps
//! only the latest commitment of each hotkey) always binds the hotkey to its ledger key
//! and names the committed block without any archive lookup.

pub mod hotkey;
pub mod ledger_commitment;
pub mod local;
pub mod local_api;
pub mod local_client;
pub mod miner;
pub mod outage;
pub mod subtensor;
pub mod tlock;
pub mod wallet;
pub mod weights;

use crate::bytes::{Hash32, ValidatorKey};
use crate::ledger::Tip;
use serde::{Deserialize, Serialize};

pub use ledger_commitment::LedgerCommitment;

/// Space one commitment may use per tempo, and what each call costs at least.
pub const MAX_SPACE_PER_TEMPO: u64 = 3_100;
pub const MIN_COMMITMENT_COST: u64 = 100;
/// Blocks per tempo (epoch) on subtensor.
pub const DEFAULT_TEMPO: u64 = 360;
/// Commit at most once per this many chain blocks: 30 per tempo, inside the 31 allowed.
pub const COMMIT_EVERY_BLOCKS: u64 = 12;
/// Default `WeightsSetRateLimit`, in blocks.
pub const DEFAULT_WEIGHTS_RATE_LIMIT: u64 = 100;

const _: () = assert!(DEFAULT_TEMPO / COMMIT_EVERY_BLOCKS * MIN_COMMITMENT_COST <= MAX_SPACE_PER_TEMPO);

/// A registered neuron of the subnet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Neuron {
    pub uid: u16,
    /// ss58 address of the hotkey (sr25519 public key).
    pub hotkey: String,
    pub registration_block: u64,
    pub validator_permit: bool,
}

/// A hotkey's published network address (`AxonInfo`; ip 0 means none).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Axon {
    pub hotkey: String,
    pub block: u64,
    pub ip: std::net::IpAddr,
    pub port: u16,
}

/// `AxonInfo.protocol` for the address `af` publishes: libp2p over TCP.
pub const AXON_PROTOCOL_TCP: u8 = 0;
/// `AxonInfo.version` `af` publishes.
pub const AXON_VERSION: u32 = 1;

/// The chain's `ip: u128` with `ip_type` 4 or 6 as an address (`None` for 0 or a bad type).
pub fn axon_ip(ip: u128, ip_type: u8) -> Option<std::net::IpAddr> {
    match ip_type {
        4 if ip != 0 && ip <= u128::from(u32::MAX) => Some(std::net::IpAddr::V4((ip as u32).into())),
        6 if ip != 0 => Some(std::net::IpAddr::V6(ip.into())),
        _ => None,
    }
}

/// Subtensor's `is_valid_ip_address(ip_type, addr, allow_zero)` (pallets/subtensor,
/// subnets/serving.rs): refuses 0 unless allowed, IPv4 at or above `u32::MAX` and exactly
/// 127.0.0.1, IPv6 all ones and `::1`. `serve_axon` calls it with `allow_zero` true.
pub fn is_valid_axon_ip(ip_type: u8, addr: u128, allow_zero: bool) -> bool {
    if !allow_zero && addr == 0 {
        return false;
    }
    match ip_type {
        4 => addr < u128::from(u32::MAX) && addr != 0x7f00_0001,
        6 => addr != u128::MAX && addr != 1,
        _ => false,
    }
}

/// What `serve_axon` refuses, by the name of subtensor's error: `InvalidIpType`,
/// `InvalidIpAddress`, `InvalidPort` (checked by the pool's transaction extension, so
/// the refusal comes back at submission).
pub fn check_axon(ip_type: u8, addr: u128, port: u16) -> Result<(), String> {
    if ip_type != 4 && ip_type != 6 {
        return Err(format!("InvalidIpType: ip_type {ip_type} is neither 4 nor 6"));
    }
    if !is_valid_axon_ip(ip_type, addr, true) {
        let shown = axon_ip(addr, ip_type).map_or_else(|| format!("{addr:#x}"), |ip| ip.to_string());
        return Err(format!("InvalidIpAddress: subtensor refuses {shown} as an axon address"));
    }
    if port == 0 {
        return Err("InvalidPort: an axon needs a port".into());
    }
    Ok(())
}

/// Blocks between two `serve_axon` of one hotkey: subtensor's default `ServingRateLimit`
/// (`SubtensorInitialServingRateLimit`). A send inside it is refused (Custom error 12), so
/// a node restarted on a new port waits for it instead of sending into the refusal.
pub const SERVING_RATE_LIMIT_BLOCKS: u64 = 50;

/// Whether `af` publishes `ip:port` as its axon: what `serve_axon` accepts, and not an
/// unspecified address (accepted by the chain "for testing", but nobody can dial it).
pub fn check_published_axon(ip: std::net::IpAddr, port: u16) -> Result<(), String> {
    if ip.is_unspecified() {
        return Err(format!("{ip} is not an address other validators can dial"));
    }
    let (addr, ip_type) = axon_ip_parts(ip);
    check_axon(ip_type, addr, port)
}

/// An address as the chain stores it: `(ip as u128, ip_type)`.
pub fn axon_ip_parts(ip: std::net::IpAddr) -> (u128, u8) {
    match ip {
        std::net::IpAddr::V4(v4) => (u128::from(u32::from(v4)), 4),
        std::net::IpAddr::V6(v6) => (u128::from(v6), 6),
    }
}

/// What the chain says about a proven tip of one ledger key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OnChainCheck {
    pub ok: bool,
    pub detail: String,
}

/// Compares a proven tip `(height, hash)` of ledger key `validator` with the latest
/// commitments on chain (`CommitmentOf` keeps only the latest per hotkey): the same height
/// must carry the same hash; a later committed height is reported, not judged (the proof
/// would need the headers in between).
pub fn check_tip_on_chain(records: &[CommitmentRecord], validator: &ValidatorKey, tip: &Tip) -> OnChainCheck {
    let mine: Vec<(&CommitmentRecord, LedgerCommitment)> = records
        .iter()
        .filter_map(|r| LedgerCommitment::from_fields(&r.fields).map(|c| (r, c)))
        .filter(|(_, c)| c.ledger_key == *validator)
        .collect();
    let Some((record, c)) = mine.iter().max_by_key(|(r, _)| r.block) else {
        return OnChainCheck { ok: false, detail: format!("no hotkey on this subnet commits ledger key {validator}") };
    };
    let at = format!("hotkey {} at chain block {}", record.hotkey, record.block);
    match c.tip_height.cmp(&tip.height) {
        std::cmp::Ordering::Equal if c.tip_hash == tip.hash => {
            OnChainCheck { ok: true, detail: format!("{at} committed exactly this tip") }
        }
        std::cmp::Ordering::Equal => OnChainCheck {
            ok: false,
            detail: format!("{at} committed height {} with hash {}, not {}", c.tip_height, c.tip_hash, tip.hash),
        },
        std::cmp::Ordering::Greater => OnChainCheck {
            ok: true,
            detail: format!(
                "{at} committed a later tip (height {}); the chain keeps only the latest, so this height is not checkable there",
                c.tip_height
            ),
        },
        std::cmp::Ordering::Less => OnChainCheck {
            ok: false,
            detail: format!("{at} committed only up to height {}, below the proven {}", c.tip_height, tip.height),
        },
    }
}

/// `Data` of the Commitments pallet: `Raw(len)` has tag `len + 1` for 0..=128.
pub fn raw_data_tag(len: usize) -> u8 {
    assert!(len <= 128, "Raw data holds at most 128 bytes");
    len as u8 + 1
}

pub fn commitment_cost(fields: &[Vec<u8>]) -> u64 {
    (fields.iter().map(|f| f.len() as u64).sum::<u64>()).max(MIN_COMMITMENT_COST)
}

/// The latest commitment of one hotkey, as `CommitmentOf` holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitmentRecord {
    pub hotkey: String,
    /// Chain block at which it was made.
    pub block: u64,
    /// The bytes of each field, in order: `Raw0`..`Raw128` and `BigRaw` hold bytes.
    #[serde(with = "hex_fields")]
    pub fields: Vec<Vec<u8>>,
    /// Why the commitment's fields are not bytes (a `None`, hash, timelocked or reset
    /// field, named): `fields` is then empty, and no reader takes it for a commitment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
}

impl CommitmentRecord {
    /// A commitment whose fields all hold bytes.
    pub fn new(hotkey: impl Into<String>, block: u64, fields: Vec<Vec<u8>>) -> CommitmentRecord {
        CommitmentRecord { hotkey: hotkey.into(), block, fields, unreadable: None }
    }

    pub fn ledger(&self) -> Option<LedgerCommitment> {
        LedgerCommitment::from_fields(&self.fields)
    }

    /// The record read as a miner's commitment (ledger-spec/13): unreadable, with the
    /// field and variant named, where a field holds no bytes; else what its bytes say.
    pub fn miner(&self) -> Result<miner::MinerCommitment, String> {
        match &self.unreadable {
            Some(reason) => Err(format!("unreadable: {reason}")),
            None => miner::MinerCommitment::from_fields(&self.fields).map_err(|e| e.to_string()),
        }
    }
}

/// What governs weight setting for this subnet and hotkey.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WeightLimits {
    pub rate_limit_blocks: u64,
    /// Block of our last weight update, if any.
    pub last_update: Option<u64>,
    pub commit_reveal_enabled: bool,
    pub version_key: u64,
    /// Blocks per epoch: weights that repeat our last send wait this long after it.
    #[serde(default = "default_tempo")]
    pub tempo: u64,
    /// Whether our hotkey holds a uid on the subnet (none: no hotkey of ours). A
    /// validator whose uid went to another hotkey sends nothing until registered again.
    #[serde(default)]
    pub registered: Option<bool>,
    /// Extrinsics of ours the node's pool holds that no block has taken yet (a send of
    /// a process that restarted, say): nothing more is sent until a block takes them, so
    /// a restart never sends the same commit twice.
    #[serde(default)]
    pub in_pool: u64,
    /// The block these were read at, where the chain says: on a slow node the head read
    /// before them is seconds old, and a rate limit judged at it would wait for nothing.
    #[serde(default)]
    pub at_block: Option<u64>,
}

fn default_tempo() -> u64 {
    DEFAULT_TEMPO
}

#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error("chain endpoint {endpoint}: {message}")]
    Transport { endpoint: String, message: String },
    #[error("the chain refused the call: {0}")]
    Refused(String),
    #[error("subnet {netuid} has commit-reveal weights enabled, and this chain has no timelocked weights commit call (commit_timelocked_mechanism_weights or commit_timelocked_weights)")]
    CommitRevealUnsupported { netuid: u16 },
    #[error("this hotkey already has {count} unrevealed weight commits this epoch (the chain allows {max}): next commit after the reveal at block {reveal_block}")]
    TooManyUnrevealed { count: u32, max: u32, reveal_block: u64 },
    #[error("timelock: {0}")]
    Tlock(#[from] tlock::TlockError),
    #[error("our timelocked weights commit for this epoch waits for its reveal (at block {reveal_block}): no second commit before it")]
    CommitPending { reveal_block: u64 },
    #[error("{n} extrinsic(s) of ours still wait in the node's pool: nothing more is sent until a block takes them")]
    InPool { n: u64 },
    #[error("weights were set at block {last} and the rate limit is {limit} blocks: next allowed at block {next}")]
    RateLimited { last: u64, limit: u64, next: u64 },
    #[error("the same weights were sent at block {last}: sent again once an epoch has passed, at block {next}")]
    Unchanged { last: u64, next: u64 },
    #[error("this chain client has no hotkey to sign with")]
    NoSigner,
    #[error("metadata: {0}")]
    Metadata(String),
    #[error("decoding {what}: {message}")]
    Decode { what: String, message: String },
    #[error("key: {0}")]
    Key(String),
    #[error("chain {endpoint}: {message}")]
    Spec { endpoint: String, message: String },
}

impl ChainError {
    /// A short, stable reason for metrics and log fields.
    pub fn reason(&self) -> &'static str {
        match self {
            ChainError::Transport { .. } => "rpc",
            ChainError::Refused(_) => "refused_by_chain",
            ChainError::CommitRevealUnsupported { .. } => "commit_reveal_unsupported",
            ChainError::TooManyUnrevealed { .. } => "too_many_unrevealed",
            ChainError::CommitPending { .. } => "commit_pending",
            ChainError::Tlock(_) => "timelock",
            ChainError::RateLimited { .. } => "rate_limited",
            ChainError::InPool { .. } => "in_pool",
            ChainError::Unchanged { .. } => "unchanged",
            ChainError::NoSigner => "no_signer",
            ChainError::Metadata(_) => "metadata",
            ChainError::Decode { .. } => "decode",
            ChainError::Key(_) => "key",
            ChainError::Spec { .. } => "spec",
        }
    }

    /// Whether the chain said no (as opposed to: we could not ask it).
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            ChainError::Refused(_)
                | ChainError::CommitRevealUnsupported { .. }
                | ChainError::RateLimited { .. }
                | ChainError::TooManyUnrevealed { .. }
                | ChainError::CommitPending { .. }
        )
    }

    /// A refusal that only says "not yet": the next turn of the anchoring loop sends.
    pub fn is_wait(&self) -> bool {
        matches!(
            self,
            ChainError::RateLimited { .. }
                | ChainError::TooManyUnrevealed { .. }
                | ChainError::CommitPending { .. }
                | ChainError::Unchanged { .. }
        )
    }
}

/// Everything `af` needs from a chain.
#[async_trait::async_trait]
pub trait Chain: Send + Sync {
    fn netuid(&self) -> u16;
    /// Our hotkey's ss58 address, when this client can sign.
    fn hotkey(&self) -> Option<String>;
    async fn current_block(&self) -> Result<u64, ChainError>;
    /// The hash of block `number`, once that block exists (`None` before it does).
    async fn block_hash(&self, number: u64) -> Result<Option<Hash32>, ChainError>;
    async fn neurons(&self) -> Result<Vec<Neuron>, ChainError>;
    /// `Commitments.set_commitment` with these `Data::Raw` fields (at most 3 of at most
    /// 128 bytes); returns the chain block it was included at (or submitted at, where
    /// inclusion is not awaited).
    async fn commit_fields(&self, fields: &[Vec<u8>]) -> Result<u64, ChainError>;
    /// Commits our ledger's tip (ledger-spec/07).
    async fn commit(&self, commitment: &LedgerCommitment) -> Result<u64, ChainError> {
        self.commit_fields(&commitment.fields()).await
    }
    /// The latest commitment of every hotkey on the subnet.
    async fn commitments(&self) -> Result<Vec<CommitmentRecord>, ChainError>;
    /// Publishes our libp2p address (`SubtensorModule.serve_axon`; ledger-spec/13).
    async fn serve_axon(&self, ip: std::net::IpAddr, port: u16) -> Result<u64, ChainError>;
    /// Every registered hotkey's published address (`Axons`), where it has one.
    async fn axons(&self) -> Result<Vec<Axon>, ChainError>;
    async fn set_weights(&self, uids: &[u16], weights: &[u16], version_key: u64) -> Result<u64, ChainError>;
    /// Every uid's weights: (uid, [(dest uid, weight)]).
    async fn weights(&self) -> Result<Vec<(u16, Vec<(u16, u16)>)>, ChainError>;
    async fn weight_limits(&self) -> Result<WeightLimits, ChainError>;
    /// Our public key as a weights payload names the committer (subtensor: the hotkey's
    /// 32-byte public key; the stand-in chain: the hotkey's UTF-8 name).
    fn payload_hotkey(&self) -> Option<Vec<u8>>;
    /// What a timelocked commit needs to know, read from chain state now.
    async fn timelock_info(&self) -> Result<TimelockInfo, ChainError>;
    /// Submits a timelocked weights commit; returns the chain block (as `commit`).
    async fn commit_timelocked_weights(
        &self,
        commit: &[u8],
        reveal_round: u64,
        version: u16,
    ) -> Result<u64, ChainError>;
    /// Timelocked commits: those waiting and those the chain revealed (or dropped).
    async fn timelocked(&self) -> Result<Timelocked, ChainError>;
}

/// What a timelocked commit needs from chain state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelockInfo {
    /// `CommitRevealWeightsVersion`: the call must carry it.
    pub commit_reveal_version: u16,
    pub reveal_period_epochs: u64,
    pub schedule: tlock::EpochSchedule,
    /// The beacon whose rounds the chain decrypts with.
    pub beacon: tlock::Beacon,
    pub block_ms: u64,
    /// Our unrevealed commits in the current epoch.
    pub unrevealed_commits: u32,
}

/// A timelocked commit waiting on chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingCommit {
    pub hotkey: String,
    pub commit_block: u64,
    pub reveal_round: u64,
    /// blake3 of the ciphertext, as our log records it.
    pub ciphertext_hash: Hash32,
}

/// A timelocked commit the chain opened: the weights it applied, or why it dropped it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevealedCommit {
    pub hotkey: String,
    pub commit_block: u64,
    pub reveal_block: u64,
    pub reveal_round: u64,
    pub ciphertext_hash: Hash32,
    pub uids: Vec<u16>,
    pub weights: Vec<u16>,
    /// Empty when applied; else the chain's reason for dropping the commit.
    pub error: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timelocked {
    pub pending: Vec<PendingCommit>,
    /// What the chain still holds of revealed commits (subtensor keeps none: its
    /// `TimelockedWeightsRevealed` events and `Weights` say what was applied).
    pub revealed: Vec<RevealedCommit>,
}

/// Which chain to talk to and as whom: `local:ADDR` (the stand-in) or `subtensor:finney|test|local|URL`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChainSpec {
    /// `local:127.0.0.1:9944` or `subtensor:wss://entrypoint-finney.opentensor.ai:443`; empty: no chain.
    pub endpoint: String,
    pub netuid: u16,
    /// Local chain: the hotkey's name (ss58 or any label). Subtensor: the wallet's hotkey
    /// file name (or set `AF_HOTKEY_PHRASE`).
    pub hotkey: Option<String>,
    /// Subtensor wallet name under `wallets_dir`.
    pub wallet: Option<String>,
    /// Default `~/.bittensor/wallets`.
    pub wallets_dir: Option<std::path::PathBuf>,
    /// With no `[[miners]]`: how often an idle validator reads the metagraph and the
    /// miners' commitments for new contenders (it also reads them before each match).
    pub discover_every_ms: u64,
}

/// Default `discover_every_ms`: one subtensor block.
pub const DEFAULT_DISCOVER_EVERY_MS: u64 = 12_000;

impl Default for ChainSpec {
    fn default() -> Self {
        ChainSpec {
            endpoint: String::new(),
            netuid: 1,
            hotkey: None,
            wallet: None,
            wallets_dir: None,
            discover_every_ms: DEFAULT_DISCOVER_EVERY_MS,
        }
    }
}

impl ChainSpec {
    pub fn is_set(&self) -> bool {
        !self.endpoint.is_empty()
    }
}

/// Connects to the chain `spec` names.
/// The node a `subtensor:` spec names: `finney`, `test`, `local` (as btcli names them),
/// or a `ws://`/`wss://` URL.
pub fn subtensor_url(network: &str) -> Result<&str, ChainError> {
    match network {
        "finney" => Ok("wss://entrypoint-finney.opentensor.ai:443"),
        "test" => Ok("wss://test.finney.opentensor.ai:443"),
        "local" => Ok("ws://127.0.0.1:9944"),
        url if url.starts_with("ws://") || url.starts_with("wss://") => Ok(url),
        other => Err(ChainError::Spec {
            endpoint: format!("subtensor:{other}"),
            message: "expected finney, test, local, or a ws:// or wss:// URL".into(),
        }),
    }
}

/// The hotkey a local-chain client acts as: `--hotkey` itself, or, when a wallet is
/// named (`--wallet`, `--wallets-dir`), the ss58 address of that wallet's hotkey (as
/// btcli: naming one of wallet and hotkey means "default" for the other), so a wallet
/// means the same identity on the stand-in as on subtensor.
pub fn local_hotkey(spec: &ChainSpec) -> Result<Option<String>, ChainError> {
    if spec.wallet.is_none() && spec.wallets_dir.is_none() {
        return Ok(spec.hotkey.clone());
    }
    let paths = wallet::WalletPaths::new(spec.wallets_dir.clone(), spec.wallet.as_deref(), spec.hotkey.as_deref());
    paths.check_names()?;
    let pub_file = paths.hotkeypub_file();
    let public = match wallet::read_keyfile(&pub_file) {
        Ok(bytes) => wallet::public_from_json(&pub_file, &bytes)?,
        Err(_) => wallet::load_hotkey(&paths, wallet::Password::EnvOrPrompt)?.public_key(),
    };
    Ok(Some(subtensor::ss58(&public)))
}

pub async fn connect(spec: &ChainSpec) -> Result<Box<dyn Chain>, ChainError> {
    if let Some(addr) = spec.endpoint.strip_prefix("local:") {
        return Ok(Box::new(local_client::LocalClient::new(addr, spec.netuid, local_hotkey(spec)?)?));
    }
    if let Some(network) = spec.endpoint.strip_prefix("subtensor:") {
        let url = subtensor_url(network)?;
        // As btcli: a wallet or hotkey named means a signer, "default" filling the other.
        let signer = match (subtensor::hotkey_from_env(), &spec.wallet, &spec.hotkey) {
            (Some(from_env), _, _) => Some(from_env?),
            (None, None, None) => None,
            (None, wallet, hotkey) => {
                let paths = wallet::WalletPaths::new(spec.wallets_dir.clone(), wallet.as_deref(), hotkey.as_deref());
                Some(wallet::load_hotkey(&paths, wallet::Password::EnvOrPrompt)?)
            }
        };
        return Ok(Box::new(subtensor::SubtensorClient::connect(url, spec.netuid, signer).await?));
    }
    Err(ChainError::Spec {
        endpoint: spec.endpoint.clone(),
        message: "expected local:ADDR or subtensor:finney|test|local|URL".into(),
    })
}

#[cfg(test)]
mod network_tests {
    #[test]
    fn btcli_network_names_map_to_their_endpoints_and_others_are_refused() {
        assert_eq!(super::subtensor_url("finney").unwrap(), "wss://entrypoint-finney.opentensor.ai:443");
        assert_eq!(super::subtensor_url("test").unwrap(), "wss://test.finney.opentensor.ai:443");
        assert_eq!(super::subtensor_url("local").unwrap(), "ws://127.0.0.1:9944");
        assert_eq!(super::subtensor_url("ws://10.0.0.1:9944").unwrap(), "ws://10.0.0.1:9944");
        let error = super::subtensor_url("mainnet").unwrap_err().to_string();
        assert!(error.contains("subtensor:mainnet") && error.contains("finney, test, local"), "{error}");
    }
}

mod hex_fields {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(fields: &[Vec<u8>], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(fields.iter().map(hex::encode))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Vec<u8>>, D::Error> {
        let texts = Vec::<String>::deserialize(deserializer)?;
        texts.iter().map(|t| hex::decode(t).map_err(serde::de::Error::custom)).collect()
    }
}
