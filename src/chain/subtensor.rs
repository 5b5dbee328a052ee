//! The real chain: subtensor through subxt's dynamic API (no codegen), against the
//! chain's own metadata. Reads the metagraph (`SubnetworkN`, `Keys`,
//! `BlockAtRegistration`, `ValidatorPermit`), commitments (`CommitmentOf`) and weights
//! (`Weights`, `WeightsSetRateLimit`, `LastUpdate`, `CommitRevealWeightsEnabled`,
//! `WeightsVersionKey`); submits `Commitments.set_commitment` and
//! `SubtensorModule.set_weights` signed by the sr25519 hotkey. Secrets are never logged.
//!
//! The calls are built by the same functions online and offline ([`set_commitment_call`],
//! [`set_weights_call`]), so the golden-bytes tests on the real finney metadata check
//! what a live validator submits.

use super::tlock::{Beacon, EpochSchedule};
use super::{
    check_weight_limits, Chain, ChainError, CommitmentRecord, Neuron, PendingCommit, TimelockInfo, Timelocked,
    WeightLimits,
};

/// Subtensor's block time.
pub const SUBTENSOR_BLOCK_MS: u64 = 12_000;
use subxt::dynamic::Value;
use subxt::ext::scale_value::{Composite, Primitive, ValueDef};
use subxt::{ArcMetadata, Metadata, OnlineClient, SubstrateConfig};
use subxt_signer::sr25519::Keypair;

/// Env var holding a hotkey's seed phrase or secret URI (instead of a wallet file).
pub const HOTKEY_PHRASE_ENV: &str = "AF_HOTKEY_PHRASE";
/// Env var naming a metadata file for the offline tests (else ../shared/fixtures/subtensor/).
pub const METADATA_ENV: &str = "AF_SUBTENSOR_METADATA";

pub fn load_metadata(bytes: &[u8]) -> Result<ArcMetadata, ChainError> {
    Metadata::decode_from(bytes).map(Metadata::arc).map_err(|e| ChainError::Metadata(e.to_string()))
}

fn raw_data(bytes: &[u8]) -> Value {
    Value::unnamed_variant(format!("Raw{}", bytes.len()), [Value::from_bytes(bytes)])
}

/// `Commitments.set_commitment(netuid, CommitmentInfo { fields })` with one
/// `Data::Raw<len>` per field.
pub fn set_commitment_payload(netuid: u16, fields: &[Vec<u8>]) -> subxt::tx::DynamicPayload<Vec<Value>> {
    let info = Value::named_composite([("fields", Value::unnamed_composite(fields.iter().map(|f| raw_data(f))))]);
    subxt::dynamic::tx("Commitments", "set_commitment", vec![Value::u128(u128::from(netuid)), info])
}

/// `SubtensorModule.serve_axon(netuid, version, ip, port, ip_type, protocol, 0, 0)`.
pub fn serve_axon_payload(netuid: u16, ip: std::net::IpAddr, port: u16) -> subxt::tx::DynamicPayload<Vec<Value>> {
    let (ip, ip_type) = super::axon_ip_parts(ip);
    subxt::dynamic::tx(
        "SubtensorModule",
        "serve_axon",
        vec![
            Value::u128(u128::from(netuid)),
            Value::u128(u128::from(super::AXON_VERSION)),
            Value::u128(ip),
            Value::u128(u128::from(port)),
            Value::u128(u128::from(ip_type)),
            Value::u128(u128::from(super::AXON_PROTOCOL_TCP)),
            Value::u128(0),
            Value::u128(0),
        ],
    )
}

/// `SubtensorModule.set_weights(netuid, dests, weights, version_key)`.
pub fn set_weights_payload(
    netuid: u16,
    uids: &[u16],
    weights: &[u16],
    version_key: u64,
) -> subxt::tx::DynamicPayload<Vec<Value>> {
    let list = |xs: &[u16]| Value::unnamed_composite(xs.iter().map(|&x| Value::u128(u128::from(x))));
    subxt::dynamic::tx(
        "SubtensorModule",
        "set_weights",
        vec![Value::u128(u128::from(netuid)), list(uids), list(weights), Value::u128(u128::from(version_key))],
    )
}

/// The timelocked weights commit this metadata has: `commit_timelocked_mechanism_weights`
/// (mecid 0, the main mechanism) where present, else `commit_timelocked_weights`; `None`
/// when it has neither (a chain without commit-reveal v4).
pub fn timelocked_call_name(metadata: &Metadata) -> Option<&'static str> {
    let pallet = metadata.pallet_by_name("SubtensorModule")?;
    ["commit_timelocked_mechanism_weights", "commit_timelocked_weights"]
        .into_iter()
        .find(|name| pallet.call_variant_by_name(name).is_some())
}

/// The call `name` (one of [`timelocked_call_name`]'s) carrying a timelocked commit.
pub fn commit_timelocked_payload_named(
    name: &'static str,
    netuid: u16,
    commit: &[u8],
    reveal_round: u64,
    version: u16,
) -> subxt::tx::DynamicPayload<Vec<Value>> {
    let (netuid, commit) = (Value::u128(u128::from(netuid)), Value::from_bytes(commit));
    let (round, version) = (Value::u128(u128::from(reveal_round)), Value::u128(u128::from(version)));
    let args = if name == "commit_timelocked_mechanism_weights" {
        vec![netuid, Value::u128(0), commit, round, version]
    } else {
        vec![netuid, commit, round, version]
    };
    subxt::dynamic::tx("SubtensorModule", name, args)
}

/// The timelocked commit call this metadata takes, or `None` without one.
pub fn commit_timelocked_payload(
    metadata: &Metadata,
    netuid: u16,
    commit: &[u8],
    reveal_round: u64,
    version: u16,
) -> Option<subxt::tx::DynamicPayload<Vec<Value>>> {
    Some(commit_timelocked_payload_named(timelocked_call_name(metadata)?, netuid, commit, reveal_round, version))
}

/// Whether the metadata has the stateful epoch schedule (`LastEpochBlock`, ...).
pub fn has_stateful_epochs(metadata: &Metadata) -> bool {
    metadata
        .pallet_by_name("SubtensorModule")
        .and_then(|p| p.storage().map(|s| s.entry_by_name("LastEpochBlock").is_some()))
        .unwrap_or(false)
}

/// An offline client for `metadata` (spec version and genesis hash as given).
pub fn offline_client(
    metadata: ArcMetadata,
    spec_version: u32,
    transaction_version: u32,
    genesis_hash: [u8; 32],
) -> subxt::OfflineClient<SubstrateConfig> {
    let config = SubstrateConfig::builder()
        .set_genesis_hash(genesis_hash.into())
        .set_metadata_for_spec_versions([(spec_version, metadata)])
        .set_spec_version_for_block_ranges([subxt::config::substrate::SpecVersionForRange {
            block_range: 0..u64::MAX,
            spec_version,
            transaction_version,
        }])
        .build();
    subxt::OfflineClient::new_with_config(config)
}

/// Call bytes (pallet index, call index, arguments) of a payload, encoded offline.
pub fn call_data(
    client: &subxt::OfflineClient<SubstrateConfig>,
    payload: &subxt::tx::DynamicPayload<Vec<Value>>,
) -> Result<Vec<u8>, ChainError> {
    let at = client.at_block(0u64).map_err(|e| ChainError::Metadata(e.to_string()))?;
    at.transactions().call_data(payload).map_err(|e| ChainError::Metadata(e.to_string()))
}

/// The hotkey in `AF_HOTKEY_PHRASE` (a seed phrase or secret URI), if that is set.
pub fn hotkey_from_env() -> Option<Result<Keypair, ChainError>> {
    let phrase = std::env::var(HOTKEY_PHRASE_ENV).ok()?;
    let uri: Result<subxt_signer::SecretUri, _> = phrase.parse();
    Some(match uri {
        Ok(uri) => Keypair::from_uri(&uri).map_err(|e| ChainError::Key(format!("{HOTKEY_PHRASE_ENV}: {e}"))),
        Err(_) => Err(ChainError::Key(format!("{HOTKEY_PHRASE_ENV} is not a seed phrase or secret URI"))),
    })
}

/// ss58 (generic substrate prefix 42, as Bittensor uses) of a 32-byte account.
pub fn ss58(account: &[u8; 32]) -> String {
    subxt::utils::AccountId32(*account).to_string()
}

pub fn parse_ss58(text: &str) -> Result<[u8; 32], ChainError> {
    text.parse::<subxt::utils::AccountId32>().map(|a| a.0).map_err(|e| ChainError::Key(format!("{text}: {e}")))
}

/// The subtensor backend.
pub struct SubtensorClient {
    client: OnlineClient<SubstrateConfig>,
    endpoint: String,
    netuid: u16,
    signer: Option<Keypair>,
}

impl SubtensorClient {
    /// Connects to a node (`ws://`, `wss://`; plain `ws://` only for loopback tests).
    pub async fn connect(url: &str, netuid: u16, signer: Option<Keypair>) -> Result<SubtensorClient, ChainError> {
        let transport =
            |e: subxt::error::OnlineClientError| ChainError::Transport { endpoint: url.into(), message: e.to_string() };
        let client = if url.starts_with("wss://") {
            OnlineClient::<SubstrateConfig>::from_url(url).await.map_err(transport)?
        } else {
            OnlineClient::<SubstrateConfig>::from_insecure_url(url).await.map_err(transport)?
        };
        Ok(SubtensorClient { client, endpoint: url.into(), netuid, signer })
    }

    fn transport(&self, e: impl std::fmt::Display) -> ChainError {
        ChainError::Transport { endpoint: self.endpoint.clone(), message: e.to_string() }
    }

    async fn at(&self) -> Result<subxt::OnlineClientAtBlock<SubstrateConfig>, ChainError> {
        self.client.at_current_block().await.map_err(|e| self.transport(e))
    }

    async fn fetch(
        &self,
        at: &subxt::OnlineClientAtBlock<SubstrateConfig>,
        entry: &str,
        keys: Vec<Value>,
    ) -> Result<Option<Value>, ChainError> {
        let address = subxt::dynamic::storage::<Vec<Value>, Value>(pallet_of(entry), entry);
        let value = at.storage().try_fetch(address, keys).await.map_err(|e| self.transport(e))?;
        value.map(|v| v.decode().map_err(|e| decode(entry, e))).transpose()
    }

    async fn fetch_or_default(
        &self,
        at: &subxt::OnlineClientAtBlock<SubstrateConfig>,
        entry: &str,
        keys: Vec<Value>,
    ) -> Result<Value, ChainError> {
        let address = subxt::dynamic::storage::<Vec<Value>, Value>(pallet_of(entry), entry);
        let value = at.storage().fetch(address, keys).await.map_err(|e| self.transport(e))?;
        value.decode().map_err(|e| decode(entry, e))
    }

    async fn submit(&self, payload: subxt::tx::DynamicPayload<Vec<Value>>) -> Result<u64, ChainError> {
        let signer = self.signer.as_ref().ok_or(ChainError::NoSigner)?;
        let at = self.at().await?;
        let block = at.block_number();
        at.transactions().sign_and_submit_default(&payload, signer).await.map_err(|e| self.transport(e))?;
        Ok(block)
    }
}

fn pallet_of(entry: &str) -> &'static str {
    if entry == "CommitmentOf" {
        "Commitments"
    } else {
        "SubtensorModule"
    }
}

fn decode(what: &str, e: impl std::fmt::Display) -> ChainError {
    ChainError::Decode { what: what.into(), message: e.to_string() }
}

fn netuid_key(netuid: u16) -> Value {
    Value::u128(u128::from(netuid))
}

/// Unwraps single-field composites (newtypes such as `NetUid`, `Compact<T>`).
fn unwrap_newtype(value: &Value) -> &Value {
    match &value.value {
        ValueDef::Composite(Composite::Unnamed(v)) if v.len() == 1 => unwrap_newtype(&v[0]),
        ValueDef::Composite(Composite::Named(v)) if v.len() == 1 => unwrap_newtype(&v[0].1),
        _ => value,
    }
}

fn as_u128(value: &Value) -> Option<u128> {
    match &unwrap_newtype(value).value {
        ValueDef::Primitive(Primitive::U128(n)) => Some(*n),
        ValueDef::Primitive(Primitive::Bool(b)) => Some(u128::from(*b)),
        _ => None,
    }
}

fn items(value: &Value) -> Vec<&Value> {
    match &value.value {
        ValueDef::Composite(c) => c.values().collect(),
        _ => Vec::new(),
    }
}

fn bytes_of(value: &Value) -> Option<Vec<u8>> {
    items(value).into_iter().map(|v| as_u128(v).and_then(|n| u8::try_from(n).ok())).collect()
}

fn field<'a>(value: &'a Value, name: &str) -> Option<&'a Value> {
    match &value.value {
        ValueDef::Composite(Composite::Named(fields)) => fields.iter().find(|(n, _)| n == name).map(|(_, v)| v),
        _ => None,
    }
}

/// `Registration { deposit, block, info: CommitmentInfo { fields: [Data] } }` into a record.
fn commitment_record(hotkey: String, value: &Value) -> Option<CommitmentRecord> {
    let block = as_u128(field(value, "block")?)? as u64;
    let fields = field(field(value, "info")?, "fields")?;
    let mut raw = Vec::new();
    for data in items(unwrap_newtype(fields)) {
        if let ValueDef::Variant(variant) = &data.value {
            // `RawN` holds exactly N bytes; `BigRaw` (later metadata) up to 512.
            let max = match variant.name.as_str() {
                "BigRaw" => Some(512),
                name => name.strip_prefix("Raw").and_then(|n| n.parse::<usize>().ok()),
            };
            let Some(max) = max else { continue };
            let inner: Vec<&Value> = variant.values.values().collect();
            let big = variant.name == "BigRaw";
            let bytes =
                inner.first().and_then(|v| bytes_of(if big { unwrap_newtype(v) } else { v })).unwrap_or_default();
            let fits = if big { bytes.len() <= max } else { bytes.len() == max };
            if fits {
                raw.push(bytes);
            }
        }
    }
    Some(CommitmentRecord { hotkey, block, fields: raw })
}

#[async_trait::async_trait]
impl Chain for SubtensorClient {
    fn netuid(&self) -> u16 {
        self.netuid
    }

    fn hotkey(&self) -> Option<String> {
        self.signer.as_ref().map(|k| ss58(&k.public_key().0))
    }

    async fn current_block(&self) -> Result<u64, ChainError> {
        Ok(self.at().await?.block_number())
    }

    /// `chain_getBlockHash(number)`: `None` for a block the node does not have yet.
    async fn block_hash(&self, number: u64) -> Result<Option<crate::bytes::Hash32>, ChainError> {
        match self.client.at_block(number).await {
            Ok(at) => Ok(Some(crate::bytes::Hash32(at.block_hash().0))),
            Err(subxt::error::OnlineClientAtBlockError::BlockNotFound { .. }) => Ok(None),
            Err(error) => Err(self.transport(error)),
        }
    }

    async fn neurons(&self) -> Result<Vec<Neuron>, ChainError> {
        let at = self.at().await?;
        let n = self.fetch_or_default(&at, "SubnetworkN", vec![netuid_key(self.netuid)]).await?;
        let n = as_u128(&n).ok_or_else(|| decode("SubnetworkN", "not a number"))? as u16;
        let permits = self.fetch_or_default(&at, "ValidatorPermit", vec![netuid_key(self.netuid)]).await?;
        let permits: Vec<bool> = items(&permits).into_iter().map(|v| as_u128(v) == Some(1)).collect();
        let mut neurons = Vec::with_capacity(usize::from(n));
        for uid in 0..n {
            let keys = vec![netuid_key(self.netuid), Value::u128(u128::from(uid))];
            let Some(account) = self.fetch(&at, "Keys", keys.clone()).await? else { continue };
            let account: [u8; 32] = bytes_of(unwrap_newtype(&account))
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| decode("Keys", "not a 32-byte account"))?;
            let registered = self.fetch_or_default(&at, "BlockAtRegistration", keys).await?;
            neurons.push(Neuron {
                uid,
                hotkey: ss58(&account),
                registration_block: as_u128(&registered).unwrap_or(0) as u64,
                validator_permit: permits.get(usize::from(uid)).copied().unwrap_or(false),
            });
        }
        Ok(neurons)
    }

    async fn commit_fields(&self, fields: &[Vec<u8>]) -> Result<u64, ChainError> {
        self.submit(set_commitment_payload(self.netuid, fields)).await
    }

    async fn serve_axon(&self, ip: std::net::IpAddr, port: u16) -> Result<u64, ChainError> {
        self.submit(serve_axon_payload(self.netuid, ip, port)).await
    }

    async fn axons(&self) -> Result<Vec<super::Axon>, ChainError> {
        let at = self.at().await?;
        let mut out = Vec::new();
        for neuron in self.neurons().await? {
            let account = parse_ss58(&neuron.hotkey)?;
            let keys = vec![netuid_key(self.netuid), Value::from_bytes(account)];
            let Some(info) = self.fetch(&at, "Axons", keys).await? else { continue };
            let number = |name: &str| field(&info, name).and_then(as_u128);
            let (Some(ip), Some(ip_type), Some(port)) = (number("ip"), number("ip_type"), number("port")) else {
                return Err(decode("Axons", "not an AxonInfo"));
            };
            if let Some(ip) = super::axon_ip(ip, ip_type as u8) {
                out.push(super::Axon {
                    hotkey: neuron.hotkey.clone(),
                    block: number("block").unwrap_or(0) as u64,
                    ip,
                    port: port as u16,
                });
            }
        }
        Ok(out)
    }

    async fn commitments(&self) -> Result<Vec<CommitmentRecord>, ChainError> {
        let at = self.at().await?;
        let mut out = Vec::new();
        for neuron in self.neurons().await? {
            let account = parse_ss58(&neuron.hotkey)?;
            let keys = vec![netuid_key(self.netuid), Value::from_bytes(account)];
            if let Some(value) = self.fetch(&at, "CommitmentOf", keys).await? {
                out.extend(commitment_record(neuron.hotkey.clone(), &value));
            }
        }
        Ok(out)
    }

    async fn set_weights(&self, uids: &[u16], weights: &[u16], version_key: u64) -> Result<u64, ChainError> {
        let limits = self.weight_limits().await?;
        if limits.commit_reveal_enabled {
            return Err(ChainError::Refused(format!(
                "CommitRevealWeightsEnabled on subnet {}: set_weights would fail; weights go in as a timelocked commit (send_weights)",
                self.netuid
            )));
        }
        check_weight_limits(&limits, self.netuid, self.current_block().await?)?;
        self.submit(set_weights_payload(self.netuid, uids, weights, version_key.max(limits.version_key))).await
    }

    async fn weights(&self) -> Result<Vec<(u16, Vec<(u16, u16)>)>, ChainError> {
        let at = self.at().await?;
        let mut out = Vec::new();
        for neuron in self.neurons().await? {
            let keys = vec![netuid_key(self.netuid), Value::u128(u128::from(neuron.uid))];
            let value = self.fetch_or_default(&at, "Weights", keys).await?;
            let pairs: Vec<(u16, u16)> = items(&value)
                .into_iter()
                .filter_map(|pair| {
                    let xs = items(pair);
                    Some((as_u128(xs.first()?)? as u16, as_u128(xs.get(1)?)? as u16))
                })
                .collect();
            if !pairs.is_empty() {
                out.push((neuron.uid, pairs));
            }
        }
        Ok(out)
    }

    async fn weight_limits(&self) -> Result<WeightLimits, ChainError> {
        let at = self.at().await?;
        let key = || vec![netuid_key(self.netuid)];
        let rate = self.fetch_or_default(&at, "WeightsSetRateLimit", key()).await?;
        let reveal = self.fetch_or_default(&at, "CommitRevealWeightsEnabled", key()).await?;
        let version = self.fetch_or_default(&at, "WeightsVersionKey", key()).await?;
        let last_update = match self.hotkey() {
            Some(hotkey) => {
                let uid = self.neurons().await?.into_iter().find(|n| n.hotkey == hotkey).map(|n| n.uid);
                let last = self.fetch_or_default(&at, "LastUpdate", key()).await?;
                uid.and_then(|u| items(&last).get(usize::from(u)).and_then(|v| as_u128(v)))
                    .map(|b| b as u64)
                    .filter(|&b| b > 0)
            }
            None => None,
        };
        Ok(WeightLimits {
            rate_limit_blocks: as_u128(&rate).unwrap_or(100) as u64,
            last_update,
            commit_reveal_enabled: as_u128(&reveal) == Some(1),
            version_key: as_u128(&version).unwrap_or(0) as u64,
        })
    }

    fn payload_hotkey(&self) -> Option<Vec<u8>> {
        self.signer.as_ref().map(|k| k.public_key().0.to_vec())
    }

    async fn timelock_info(&self) -> Result<TimelockInfo, ChainError> {
        let at = self.at().await?;
        let block = at.block_number();
        let key = || vec![netuid_key(self.netuid)];
        let number = |v: &Value, what: &str| as_u128(v).map(|n| n as u64).ok_or_else(|| decode(what, "not a number"));
        let version = self.fetch_or_default(&at, "CommitRevealWeightsVersion", vec![]).await?;
        let period = self.fetch_or_default(&at, "RevealPeriodEpochs", key()).await?;
        let tempo = number(&self.fetch_or_default(&at, "Tempo", key()).await?, "Tempo")?;
        let (schedule, epoch) = if has_stateful_epochs(at.metadata_ref()) {
            let last = number(&self.fetch_or_default(&at, "LastEpochBlock", key()).await?, "LastEpochBlock")?;
            let pending = number(&self.fetch_or_default(&at, "PendingEpochAt", key()).await?, "PendingEpochAt")?;
            let index = number(&self.fetch_or_default(&at, "SubnetEpochIndex", key()).await?, "SubnetEpochIndex")?;
            // `current_epoch_with_lookahead`: a commit in a block where an epoch fires
            // belongs to that epoch.
            let fires = block >= last.saturating_add(tempo) || (pending > 0 && block >= pending);
            (
                EpochSchedule::Stateful { tempo, last_epoch_block: last, pending_epoch_at: pending },
                index + u64::from(fires),
            )
        } else {
            let epoch = (block + u64::from(self.netuid) + 1) / (tempo + 1);
            (EpochSchedule::Legacy { tempo, netuid: self.netuid }, epoch)
        };
        let unrevealed_commits = match &self.signer {
            Some(signer) => {
                let keys = vec![netuid_key(self.netuid), Value::u128(u128::from(epoch))];
                let commits = self.fetch_or_default(&at, "TimelockedWeightCommits", keys).await?;
                let ours = signer.public_key().0.to_vec();
                items(&commits)
                    .into_iter()
                    .filter(|entry| {
                        items(entry).first().and_then(|who| bytes_of(unwrap_newtype(who))).as_deref() == Some(&ours[..])
                    })
                    .count() as u32
            }
            None => 0,
        };
        Ok(TimelockInfo {
            commit_reveal_version: number(&version, "CommitRevealWeightsVersion")? as u16,
            reveal_period_epochs: number(&period, "RevealPeriodEpochs")?,
            schedule,
            beacon: Beacon::quicknet(),
            block_ms: SUBTENSOR_BLOCK_MS,
            unrevealed_commits,
        })
    }

    async fn commit_timelocked_weights(
        &self,
        commit: &[u8],
        reveal_round: u64,
        version: u16,
    ) -> Result<u64, ChainError> {
        let at = self.at().await?;
        let payload = commit_timelocked_payload(at.metadata_ref(), self.netuid, commit, reveal_round, version)
            .ok_or(ChainError::CommitRevealUnsupported { netuid: self.netuid })?;
        self.submit(payload).await
    }

    /// Subtensor keeps pending commits in `TimelockedWeightCommits` and no record of a
    /// reveal but its event and the resulting `Weights`: the pending ones are listed.
    async fn timelocked(&self) -> Result<Timelocked, ChainError> {
        let info = self.timelock_info().await?;
        let at = self.at().await?;
        let block = at.block_number();
        let epoch = match info.schedule {
            EpochSchedule::Legacy { tempo, netuid } => (block + u64::from(netuid) + 1) / (tempo + 1),
            EpochSchedule::Stateful { .. } => {
                number_or_zero(&self.fetch_or_default(&at, "SubnetEpochIndex", vec![netuid_key(self.netuid)]).await?)
            }
        };
        let mut pending = Vec::new();
        for e in epoch.saturating_sub(info.reveal_period_epochs)..=epoch {
            let keys = vec![netuid_key(self.netuid), Value::u128(u128::from(e))];
            let commits = self.fetch_or_default(&at, "TimelockedWeightCommits", keys).await?;
            for entry in items(&commits) {
                let parts = items(entry);
                let (Some(who), Some(commit_block), Some(bytes), Some(round)) = (
                    parts.first().and_then(|v| bytes_of(unwrap_newtype(v))).and_then(|b| <[u8; 32]>::try_from(b).ok()),
                    parts.get(1).and_then(|v| as_u128(v)),
                    parts.get(2).and_then(|v| bytes_of(unwrap_newtype(v))),
                    parts.get(3).and_then(|v| as_u128(v)),
                ) else {
                    continue;
                };
                pending.push(PendingCommit {
                    hotkey: ss58(&who),
                    commit_block: commit_block as u64,
                    reveal_round: round as u64,
                    ciphertext_hash: crate::bytes::Hash32(*blake3::hash(&bytes).as_bytes()),
                });
            }
        }
        Ok(Timelocked { pending, revealed: Vec::new() })
    }
}

fn number_or_zero(value: &Value) -> u64 {
    as_u128(value).unwrap_or(0) as u64
}
