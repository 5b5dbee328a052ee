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

mod calls;
mod values;

pub use calls::*;
use values::*;

use super::tlock::{Beacon, EpochSchedule};
use super::weights::check_weight_limits;
use super::{Chain, ChainError, CommitmentRecord, Neuron, PendingCommit, TimelockInfo, Timelocked, WeightLimits};

/// Subtensor's block time.
pub const SUBTENSOR_BLOCK_MS: u64 = 12_000;
pub use super::hotkey::ss58;
use super::hotkey::Hotkey;
use subxt::dynamic::Value;
use subxt::{OnlineClient, SubstrateConfig};

/// Env var naming a metadata file for the offline tests (else ../shared/fixtures/subtensor/).
pub const METADATA_ENV: &str = "AF_SUBTENSOR_METADATA";

/// The subtensor backend.
pub struct SubtensorClient {
    client: OnlineClient<SubstrateConfig>,
    rpc: subxt::rpcs::RpcClient,
    endpoint: String,
    netuid: u16,
    signer: Option<Hotkey>,
    /// Held from nonce to submission: this client's extrinsics go out one at a time, in
    /// order, each on the nonce after the last.
    sending: tokio::sync::Mutex<()>,
}

/// The largest reply taken from a node; one over it is refused and its connection
/// replaced. The largest a subtensor node sends us is its metadata (under 1 MiB, 2 as hex).
pub const MAX_RPC_REPLY_BYTES: u32 = 10 << 20;

/// Storage keys asked for in one `state_queryStorageAt`.
const QUERY_KEYS: usize = 256;

/// One block's answer to `state_queryStorageAt`: each key asked for, with its value's hex
/// or null.
#[derive(serde::Deserialize)]
struct ChangeSet {
    changes: Vec<(String, Option<String>)>,
}

/// One request's answer is waited for this long on the connection.
pub const RPC_TIMEOUT_MS: u64 = 30_000;

/// One read, made again by subxt across reconnections, is given up after this.
pub const READ_TIMEOUT_MS: u64 = 10_000;

/// Requests subxt makes to read at the current block (`at`).
const AT_BLOCK_REQUESTS: u64 = 5;

/// The first connection is waited for this long (a caller retries: `connect_chain`).
pub const FIRST_CONNECT_MS: u64 = 10_000;

/// A lost connection is tried again after this, doubling up to `RECONNECT_MAX_MS`.
const RECONNECT_FIRST_MS: u64 = 100;

const RECONNECT_MAX_MS: u64 = 5_000;

/// How many times one extrinsic is sent, a block apart, while the pool holds another of
/// ours on its nonce.
pub const SUBMIT_ATTEMPTS: u32 = 3;

/// How long a send waits for the next block before trying again.
pub const WAIT_FOR_BLOCK_MS: u64 = 3 * SUBTENSOR_BLOCK_MS;

impl SubtensorClient {
    /// Connects to a node (`ws://`, `wss://`; plain `ws://` only for loopback tests).
    pub async fn connect(url: &str, netuid: u16, signer: Option<Hotkey>) -> Result<SubtensorClient, ChainError> {
        let transport = |message: String| ChainError::Transport { endpoint: url.into(), message };
        if !(url.starts_with("wss://") || url.starts_with("ws://")) {
            return Err(transport("not a ws:// or wss:// URL".into()));
        }
        // A client that reconnects by itself, with backoff, for as long as it lives: RPC
        // nodes restart and load-balancers move connections all the time, and a reply
        // over the size limit closes the connection, not the client. The first connection
        // is bounded in time here; a caller that must wait for the node retries.
        let builder = subxt::rpcs::client::ReconnectingRpcClient::builder()
            .retry_policy(
                subxt::rpcs::client::reconnecting_rpc_client::ExponentialBackoff::from_millis(RECONNECT_FIRST_MS)
                    .max_delay(std::time::Duration::from_millis(RECONNECT_MAX_MS)),
            )
            .max_response_size(MAX_RPC_REPLY_BYTES)
            .request_timeout(std::time::Duration::from_millis(RPC_TIMEOUT_MS))
            .connection_timeout(std::time::Duration::from_millis(RPC_TIMEOUT_MS));
        let first = std::time::Duration::from_millis(FIRST_CONNECT_MS);
        // A port nobody listens on is said at once, not after the connection's deadline.
        if let Some(address) =
            url::Url::parse(url).ok().and_then(|u| Some(format!("{}:{}", u.host_str()?, u.port_or_known_default()?)))
        {
            let probe = tokio::time::timeout(first, tokio::net::TcpStream::connect(&address)).await;
            if let Ok(Err(e)) = probe.as_ref().map(|r| r.as_ref().map(|_| ())) {
                if e.kind() == std::io::ErrorKind::ConnectionRefused {
                    return Err(transport(format!(
                        "connection refused: nothing listens at {address} (is the node running, and is this its RPC port?)"
                    )));
                }
            }
        }
        let rpc = match tokio::time::timeout(first, builder.build(url)).await {
            Ok(Ok(client)) => subxt::rpcs::RpcClient::new(client),
            Ok(Err(e)) => return Err(transport(e.to_string())),
            Err(_) => return Err(transport(format!("no connection within {FIRST_CONNECT_MS} ms"))),
        };
        let client = OnlineClient::<SubstrateConfig>::from_rpc_client(rpc.clone())
            .await
            .map_err(|e| transport(e.to_string()))?;
        Ok(SubtensorClient { client, rpc, endpoint: url.into(), netuid, signer, sending: tokio::sync::Mutex::new(()) })
    }

    fn transport(&self, e: impl std::fmt::Display) -> ChainError {
        ChainError::Transport { endpoint: self.endpoint.clone(), message: e.to_string() }
    }

    /// `call`, given up after `READ_TIMEOUT_MS`: while a lost connection is remade, subxt
    /// makes a call again and again, and a validator must hear that the chain does not
    /// answer (and say so, and report it unhealthy) rather than wait on it.
    async fn timed<T, E: std::fmt::Display>(
        &self,
        what: &str,
        call: impl std::future::Future<Output = Result<T, E>>,
    ) -> Result<T, ChainError> {
        match tokio::time::timeout(std::time::Duration::from_millis(READ_TIMEOUT_MS), call).await {
            Ok(result) => result.map_err(|e| self.transport(e)),
            Err(_) => Err(self.transport(format!("{what}: no answer within {READ_TIMEOUT_MS} ms"))),
        }
    }

    /// The block reads are made at. subxt asks for it in `AT_BLOCK_REQUESTS` requests (the
    /// finalized head, its header, the runtime's version and metadata calls), so they
    /// get a deadline each, not one for all: a node that answers each in a few seconds, as
    /// public ones do under load, is slow but read (at 3 s an answer one 10 s limit for all
    /// five was never met).
    async fn at(&self) -> Result<subxt::OnlineClientAtBlock<SubstrateConfig>, ChainError> {
        let deadline = std::time::Duration::from_millis(READ_TIMEOUT_MS * AT_BLOCK_REQUESTS);
        match tokio::time::timeout(deadline, self.client.at_current_block()).await {
            Ok(result) => result.map_err(|e| self.transport(e)),
            Err(_) => Err(self.transport(format!(
                "the current block: no answer to its {AT_BLOCK_REQUESTS} requests within {READ_TIMEOUT_MS} ms each"
            ))),
        }
    }

    async fn fetch_or_default(
        &self,
        at: &subxt::OnlineClientAtBlock<SubstrateConfig>,
        entry: &str,
        keys: Vec<Value>,
    ) -> Result<Value, ChainError> {
        let address = subxt::dynamic::storage::<Vec<Value>, Value>(pallet_of(entry), entry);
        let value = self.timed(entry, at.storage().fetch(address, keys)).await?;
        value.decode().map_err(|e| decode(entry, e))
    }

    /// The values of many storage entries at `at` (each entry's default where it holds
    /// none; `None` where it has no default either), in one `state_queryStorageAt` per
    /// `QUERY_KEYS` keys: the metagraph is read in a few calls whatever the subnet's size,
    /// not two per uid. Each value must decode as its entry's type, to its last byte.
    async fn fetch_many(
        &self,
        at: &subxt::OnlineClientAtBlock<SubstrateConfig>,
        wanted: &[(&str, Vec<Value>)],
    ) -> Result<Vec<Option<Value>>, ChainError> {
        self.fetch_each(at, wanted).await?.into_iter().collect()
    }

    /// [`Self::fetch_many`], each value on its own: a value that is too large or does not
    /// decode is its entry's error, and the others are read (a command that lists every
    /// commitment shows the rest, and names the one). The call fails as a whole only when
    /// the node does not answer.
    async fn fetch_each(
        &self,
        at: &subxt::OnlineClientAtBlock<SubstrateConfig>,
        wanted: &[(&str, Vec<Value>)],
    ) -> Result<Vec<Result<Option<Value>, ChainError>>, ChainError> {
        let metadata = at.metadata_ref();
        let mut keys = Vec::with_capacity(wanted.len());
        for (entry, parts) in wanted {
            let address = subxt::dynamic::storage::<Vec<Value>, Value>(pallet_of(entry), *entry);
            let storage = at.storage();
            let found = storage.entry(address).map_err(|e| decode(entry, e))?;
            keys.push(format!("0x{}", hex::encode(found.fetch_key(parts.clone()).map_err(|e| decode(entry, e))?)));
        }
        let hash = format!("0x{}", hex::encode(at.block_hash().0));
        let mut values = Vec::with_capacity(wanted.len());
        for (chunk, entries) in keys.chunks(QUERY_KEYS).zip(wanted.chunks(QUERY_KEYS)) {
            let params = subxt::rpcs::rpc_params![chunk, &hash];
            let sets: Vec<ChangeSet> =
                self.timed("state_queryStorageAt", self.rpc.request("state_queryStorageAt", params)).await?;
            let mut answered: std::collections::HashMap<&str, Option<&str>> = std::collections::HashMap::new();
            for (key, value) in sets.iter().flat_map(|set| &set.changes) {
                answered.insert(key.as_str(), value.as_deref());
            }
            for (key, (entry, _)) in chunk.iter().zip(entries) {
                let info = metadata
                    .pallet_by_name(pallet_of(entry))
                    .and_then(|p| p.storage())
                    .and_then(|s| s.entry_by_name(entry))
                    .ok_or_else(|| decode(entry, "not in the chain's metadata"))?;
                let bytes = match answered.get(key.as_str()).copied().flatten() {
                    // Bounded before it is decoded: a node that lies must not size our memory.
                    Some(text) if text.len() > 2 + 2 * max_value_bytes(entry) => Err(decode(
                        entry,
                        format!(
                            "{} bytes, over the {} this entry holds on subtensor",
                            text.len().saturating_sub(2) / 2,
                            max_value_bytes(entry)
                        ),
                    )),
                    Some(text) => hex::decode(text.trim_start_matches("0x"))
                        .map(Some)
                        .map_err(|e| decode(entry, format!("not hex: {e}"))),
                    None => Ok(info.default_value().map(<[u8]>::to_vec)),
                };
                let value = bytes.and_then(|bytes| {
                    bytes
                        .map(|bytes| {
                            let mut rest = &bytes[..];
                            let value = subxt::ext::scale_value::scale::decode_as_type(
                                &mut rest,
                                info.value_ty(),
                                metadata.types(),
                            )
                            .map_err(|e| decode(entry, e))?;
                            match rest.is_empty() {
                                true => Ok(value.remove_context()),
                                false => Err(decode(entry, format!("{} bytes past the value", rest.len()))),
                            }
                        })
                        .transpose()
                });
                values.push(value);
            }
        }
        Ok(values)
    }

    /// The neurons of our subnet at `at`: three calls (the subnet's size and permits, then
    /// every uid's hotkey and registration block).
    async fn neurons_at(&self, at: &subxt::OnlineClientAtBlock<SubstrateConfig>) -> Result<Vec<Neuron>, ChainError> {
        let subnet = || vec![netuid_key(self.netuid)];
        let head = self.fetch_many(at, &[("SubnetworkN", subnet()), ("ValidatorPermit", subnet())]).await?;
        let n = head[0].as_ref().and_then(as_u128).ok_or_else(|| decode("SubnetworkN", "not a number"))?;
        // A node that lies about the subnet's size must not size our reads or memory.
        if n > MAX_UIDS as u128 {
            return Err(decode(
                "SubnetworkN",
                format!("{n} uids, more than the {MAX_UIDS} subtensor lets a subnet hold"),
            ));
        }
        let n = n as u16;
        let permits: Vec<bool> =
            head[1].as_ref().map(items).unwrap_or_default().into_iter().map(|v| as_u128(v) == Some(1)).collect();
        let mut wanted = Vec::with_capacity(2 * usize::from(n));
        for uid in 0..n {
            let keys = vec![netuid_key(self.netuid), Value::u128(u128::from(uid))];
            wanted.push(("Keys", keys.clone()));
            wanted.push(("BlockAtRegistration", keys));
        }
        let values = self.fetch_many(at, &wanted).await?;
        let mut neurons = Vec::with_capacity(usize::from(n));
        for (uid, pair) in (0..n).zip(values.chunks(2)) {
            let Some(account) = &pair[0] else { continue };
            let account: [u8; 32] = byte_sequence(account)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| decode("Keys", "not a 32-byte account"))?;
            neurons.push(Neuron {
                uid,
                hotkey: ss58(&account),
                registration_block: pair[1].as_ref().and_then(as_u128).unwrap_or(0) as u64,
                validator_permit: permits.get(usize::from(uid)).copied().unwrap_or(false),
            });
        }
        Ok(neurons)
    }

    /// For each neuron, the value of `entry` under (netuid, its `key`), read in a few calls.
    async fn per_neuron(
        &self,
        at: &subxt::OnlineClientAtBlock<SubstrateConfig>,
        neurons: &[Neuron],
        entry: &'static str,
        key: impl Fn(&Neuron) -> Result<Value, ChainError>,
    ) -> Result<Vec<Option<Value>>, ChainError> {
        let wanted = neurons
            .iter()
            .map(|n| Ok((entry, vec![netuid_key(self.netuid), key(n)?])))
            .collect::<Result<Vec<(&str, Vec<Value>)>, ChainError>>()?;
        self.fetch_many(at, &wanted).await
    }

    /// How many of our extrinsics the pool holds that no block has taken: the nonce the
    /// pool would give our next one (`system_accountNextIndex`) less the one the chain's
    /// state gives (`AccountNonceApi_account_nonce`, which ignores the pool).
    async fn in_pool(
        &self,
        signer: &Hotkey,
        at: &subxt::OnlineClientAtBlock<SubstrateConfig>,
    ) -> Result<u64, ChainError> {
        let next = self.next_nonce(signer).await?;
        let hash = format!("0x{}", hex::encode(at.block_hash().0));
        let account = format!("0x{}", hex::encode(signer.public_key()));
        let params = subxt::rpcs::rpc_params!["AccountNonceApi_account_nonce", account, hash];
        let reply: String = self.timed("AccountNonceApi_account_nonce", self.rpc.request("state_call", params)).await?;
        let bytes =
            hex::decode(reply.trim_start_matches("0x")).map_err(|e| decode("AccountNonceApi_account_nonce", e))?;
        let nonce: [u8; 4] = bytes
            .try_into()
            .map_err(|b: Vec<u8>| decode("AccountNonceApi_account_nonce", format!("{} bytes, not a u32", b.len())))?;
        Ok(next.saturating_sub(u64::from(u32::from_le_bytes(nonce))))
    }

    /// The nonce our next extrinsic takes: `system_accountNextIndex`, which counts our
    /// extrinsics waiting in the pool (the runtime API subxt asks by default does not).
    async fn next_nonce(&self, signer: &Hotkey) -> Result<u64, ChainError> {
        let account = ss58(&signer.public_key());
        self.rpc
            .request::<u64>("system_accountNextIndex", subxt::rpcs::rpc_params![account])
            .await
            .map_err(|e| self.transport(format!("system_accountNextIndex: {e}")))
    }

    /// Signs and submits `payload` (any call of the chain's metadata), one extrinsic at a time. A nonce the pool already
    /// holds (ours, not yet in a block) is tried again after the next block, on a fresh
    /// nonce, at most [`SUBMIT_ATTEMPTS`] times; a call the runtime refuses is
    /// `Refused` with subtensor's error named. Returns the block it was submitted at.
    pub async fn submit(&self, payload: subxt::tx::DynamicPayload<Vec<Value>>) -> Result<u64, ChainError> {
        let signer = self.signer.as_ref().ok_or(ChainError::NoSigner)?;
        let _one_at_a_time = self.sending.lock().await;
        let mut last_refusal = String::new();
        for attempt in 0..SUBMIT_ATTEMPTS {
            let at = self.at().await?;
            let block = at.block_number();
            let nonce = self.next_nonce(signer).await?;
            let params = subxt::config::DefaultExtrinsicParamsBuilder::<SubstrateConfig>::new().nonce(nonce).build();
            let sent = at.transactions().sign_and_submit(&payload, signer, params).await;
            let message = match sent {
                Ok(_) => return Ok(block),
                Err(error) => format!("{error} ({error:?})"),
            };
            match pool_refusal(&message) {
                Some(PoolRefusal::NonceTaken(why)) => {
                    tracing::info!(
                        event = "nonce_taken",
                        nonce,
                        block,
                        attempt,
                        "the pool holds nonce {nonce} already; sending again after a block"
                    );
                    last_refusal = why;
                    if attempt + 1 < SUBMIT_ATTEMPTS {
                        self.wait_for_block_after(block).await?;
                    }
                }
                Some(PoolRefusal::Invalid(why)) => return Err(ChainError::Refused(why)),
                None => return Err(self.transport(message)),
            }
        }
        Err(ChainError::Refused(format!(
            "the pool kept refusing our nonce for {SUBMIT_ATTEMPTS} blocks: {last_refusal}"
        )))
    }

    /// Waits until the chain's head is past `block` (at most [`WAIT_FOR_BLOCK_MS`]).
    async fn wait_for_block_after(&self, block: u64) -> Result<(), ChainError> {
        let started = std::time::Instant::now();
        while started.elapsed() < std::time::Duration::from_millis(WAIT_FOR_BLOCK_MS) {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            if self.at().await?.block_number() > block {
                return Ok(());
            }
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl Chain for SubtensorClient {
    fn netuid(&self) -> u16 {
        self.netuid
    }

    fn hotkey(&self) -> Option<String> {
        self.signer.as_ref().map(|k| ss58(&k.public_key()))
    }

    /// The best block's number, in one call (`chain_getHeader`): what the anchoring loop
    /// asks every tick to see whether the chain moved.
    async fn current_block(&self) -> Result<u64, ChainError> {
        #[derive(serde::Deserialize)]
        struct Header {
            number: String,
        }
        let params = subxt::rpcs::rpc_params![];
        let header: Header = self.timed("chain_getHeader", self.rpc.request("chain_getHeader", params)).await?;
        let digits = header.number.trim_start_matches("0x");
        u64::from_str_radix(digits, 16)
            .map_err(|e| decode("chain_getHeader", format!("block number {:?}: {e}", header.number)))
    }

    /// `chain_getBlockHash(number)`: `None` for a block the node does not have yet.
    async fn block_hash(&self, number: u64) -> Result<Option<crate::bytes::Hash32>, ChainError> {
        let deadline = std::time::Duration::from_millis(READ_TIMEOUT_MS);
        match tokio::time::timeout(deadline, self.client.at_block(number)).await {
            Ok(Ok(at)) => Ok(Some(crate::bytes::Hash32(at.block_hash().0))),
            Ok(Err(subxt::error::OnlineClientAtBlockError::BlockNotFound { .. })) => Ok(None),
            Ok(Err(error)) => Err(self.transport(error)),
            Err(_) => Err(self.transport(format!("block {number}'s hash: no answer within {READ_TIMEOUT_MS} ms"))),
        }
    }

    async fn neurons(&self) -> Result<Vec<Neuron>, ChainError> {
        self.neurons_at(&self.at().await?).await
    }

    async fn commit_fields(&self, fields: &[Vec<u8>]) -> Result<u64, ChainError> {
        self.submit(set_commitment_payload(self.netuid, fields)).await
    }

    async fn serve_axon(&self, ip: std::net::IpAddr, port: u16) -> Result<u64, ChainError> {
        super::check_published_axon(ip, port).map_err(ChainError::Refused)?;
        self.submit(serve_axon_payload(self.netuid, ip, port)).await
    }

    async fn axons(&self) -> Result<Vec<super::Axon>, ChainError> {
        let at = self.at().await?;
        let neurons = self.neurons_at(&at).await?;
        let infos = self.per_neuron(&at, &neurons, "Axons", |n| Ok(Value::from_bytes(parse_ss58(&n.hotkey)?))).await?;
        let mut out = Vec::new();
        for (neuron, info) in neurons.iter().zip(infos) {
            let Some(info) = info else { continue };
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
        let neurons = self.neurons_at(&at).await?;
        let wanted = neurons
            .iter()
            .map(|n| Ok(("CommitmentOf", vec![netuid_key(self.netuid), Value::from_bytes(parse_ss58(&n.hotkey)?)])))
            .collect::<Result<Vec<(&str, Vec<Value>)>, ChainError>>()?;
        let values = self.fetch_each(&at, &wanted).await?;
        let mut out = Vec::new();
        for (neuron, value) in neurons.iter().zip(values) {
            match value {
                Ok(Some(value)) => out.extend(commitment_record(neuron.hotkey.clone(), &value)),
                Ok(None) => {}
                // One commitment that does not read is listed as unreadable, by name; the
                // others are read.
                Err(error) => out.push(CommitmentRecord {
                    unreadable: Some(error.to_string()),
                    ..CommitmentRecord::new(neuron.hotkey.clone(), 0, Vec::new())
                }),
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
        let neurons = self.neurons_at(&at).await?;
        let values = self.per_neuron(&at, &neurons, "Weights", |n| Ok(Value::u128(u128::from(n.uid)))).await?;
        let mut out = Vec::new();
        for (neuron, value) in neurons.iter().zip(values) {
            let pairs: Vec<(u16, u16)> = value
                .as_ref()
                .map(items)
                .unwrap_or_default()
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
        // Our uid from `Uids` (hotkey -> uid), in the same one call: no metagraph read.
        let ours = self.hotkey().map(|hotkey| parse_ss58(&hotkey)).transpose()?;
        let mut wanted = vec![
            ("WeightsSetRateLimit", key()),
            ("CommitRevealWeightsEnabled", key()),
            ("WeightsVersionKey", key()),
            ("Tempo", key()),
            ("LastUpdate", key()),
        ];
        if let Some(account) = ours {
            wanted.push(("Uids", vec![netuid_key(self.netuid), Value::from_bytes(account)]));
        }
        let values = self.fetch_many(&at, &wanted).await?;
        let number = |i: usize| values[i].as_ref().and_then(as_u128);
        let tempo = number(3).map(|n| n as u64).ok_or_else(|| decode("Tempo", "not a number"))?;
        let uid = values.get(5).and_then(|v| v.as_ref()).and_then(as_u128);
        let last_update = uid
            .and_then(|u| values[4].as_ref().map(items).unwrap_or_default().get(u as usize).and_then(|v| as_u128(v)))
            .map(|b| b as u64)
            .filter(|&b| b > 0);
        Ok(WeightLimits {
            rate_limit_blocks: number(0).unwrap_or(100) as u64,
            last_update,
            commit_reveal_enabled: number(1) == Some(1),
            version_key: number(2).unwrap_or(0) as u64,
            tempo,
            registered: ours.map(|_| uid.is_some()),
            in_pool: match self.signer.as_ref() {
                Some(signer) => self.in_pool(signer, &at).await?,
                None => 0,
            },
            at_block: Some(at.block_number()),
        })
    }

    fn payload_hotkey(&self) -> Option<Vec<u8>> {
        self.signer.as_ref().map(|k| k.public_key().to_vec())
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
                let ours = signer.public_key().to_vec();
                items(&commits)
                    .into_iter()
                    .filter(|entry| {
                        items(entry).first().and_then(|who| byte_sequence(who)).as_deref() == Some(&ours[..])
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
                    parts.first().and_then(|v| byte_sequence(v)).and_then(|b| <[u8; 32]>::try_from(b).ok()),
                    parts.get(1).and_then(|v| as_u128(v)),
                    parts.get(2).and_then(|v| byte_sequence(v)),
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
