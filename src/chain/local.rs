//! The local stand-in chain: a small HTTP/JSON API of ours (not Substrate) with a block
//! clock, registrations, commitments and weights, kept durably on disk and shared by
//! every process of a devnet. It applies subtensor's rules that `af` relies on: only
//! registered hotkeys commit or set weights, commitments cost `max(100, bytes)` against
//! 3100 per tempo, weights respect the rate limit, commit-reveal and the version key.
//! It trusts the hotkey a caller names (no signatures): it listens on loopback only.
//!
//! API (JSON; errors are `{"error": "..."}` with status 400, 403, 404 or 429): `GET /v1/status`, `POST
//! /v1/register {netuid, hotkey, validator_permit}`, `GET /v1/subnets/N/neurons`, `POST /v1/subnets/N/commit
//! {hotkey, fields: [hex]}`, `GET /v1/subnets/N/commitments`, `POST /v1/subnets/N/weights {hotkey, uids,
//! weights, version_key}`, `GET /v1/subnets/N/weights`, `GET /v1/subnets/N/limits?hotkey=H`, `POST
//! /v1/subnets/N/settings {commit_reveal_enabled?, rate_limit_blocks?, version_key?, reveal_period_epochs?,
//! send_delay_ms?}` (`send_delay_ms`: sends are applied, then answered that much later, as a slow node's).
//!
//! Commit-reveal v4 as subtensor runs it (ledger-spec/12): `GET /v1/subnets/N/timelock?hotkey=H`
//! (version, reveal period, epoch schedule, beacon), `POST /v1/subnets/N/timelocked {hotkey,
//! commit (hex), reveal_round, version}`, `GET /v1/subnets/N/timelocked` (pending and
//! revealed commits), `GET /v1/beacon/rounds/R` (a round's signature, once its time has
//! come), `GET /v1/blocks/N` (`{number, hash}` once block N exists; 404 before),
//! `POST /v1/subnets/N/axons {hotkey, ip, port}` and `GET /v1/subnets/N/axons`
//! (`serve_axon` and `Axons`). Its own beacon (a BLS12-381 key of quicknet's scheme) signs a
//! round a second; each block opens the commits whose reveal epoch has come with their
//! round's signature (real timelock decryption, subtensor's code) and applies the weights
//! inside; a commit still closed when its reveal epoch ends is dropped.

use super::tlock::{self, Beacon, BeaconKey, EpochSchedule, WeightsTlockPayload};
use super::{
    commitment_cost, CommitmentRecord, Neuron, PendingCommit, RevealedCommit, TimelockInfo, Timelocked, WeightLimits,
    DEFAULT_TEMPO, DEFAULT_WEIGHTS_RATE_LIMIT, MAX_SPACE_PER_TEMPO,
};
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub const STATE_FILE: &str = "chain-state.json";

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Subnet {
    pub neurons: Vec<Neuron>,
    pub commitments: BTreeMap<String, CommitmentRecord>,
    /// Every commitment ever made, in order: the local chain keeps what an archive node would.
    pub history: Vec<CommitmentRecord>,
    /// Space used per hotkey in the tempo it was used: (tempo index, bytes).
    pub space_used: BTreeMap<String, (u64, u64)>,
    pub weights: BTreeMap<u16, Vec<(u16, u16)>>,
    pub last_update: BTreeMap<u16, u64>,
    pub commit_reveal_enabled: bool,
    pub rate_limit_blocks: u64,
    pub version_key: u64,
    #[serde(default = "one")]
    pub reveal_period_epochs: u64,
    /// Timelocked weight commits not yet opened.
    #[serde(default)]
    pub timelocked: Vec<LocalCommit>,
    /// Commits opened (or dropped), newest last; at most `MAX_REVEALED_KEPT`.
    #[serde(default)]
    pub revealed: Vec<RevealedCommit>,
    /// Published network addresses, by hotkey (`serve_axon`).
    #[serde(default)]
    pub axons: BTreeMap<String, super::Axon>,
    /// How long a send (commit, weights, timelocked commit) waits after it is applied
    /// before its answer: a slow node, whose sends land before the sender hears so.
    #[serde(default)]
    pub send_delay_ms: u64,
}

/// Longest `send_delay_ms` the stand-in takes (the stand-in's clients give up at 30 s).
pub const MAX_SEND_DELAY_MS: u64 = 60_000;

fn one() -> u64 {
    1
}

/// Revealed commits the stand-in keeps for inspection.
pub const MAX_REVEALED_KEPT: usize = 1_000;
/// The stand-in beacon signs one round per this many seconds.
pub const BEACON_PERIOD_S: u64 = 1;
/// `CommitRevealWeightsVersion` on the stand-in chain, as on subtensor today.
pub const COMMIT_REVEAL_VERSION: u16 = 4;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LocalCommit {
    pub hotkey: String,
    pub uid: u16,
    pub commit_block: u64,
    pub epoch: u64,
    pub reveal_round: u64,
    /// Hex of the ciphertext as the committer sent it.
    pub commit: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LocalState {
    pub genesis_ms: u64,
    pub block_ms: u64,
    pub tempo: u64,
    pub subnets: BTreeMap<u16, Subnet>,
    /// Seed of the stand-in beacon's key (hex, 32 bytes); made at genesis.
    #[serde(default)]
    pub beacon_seed: String,
}

impl LocalState {
    /// The beacon's public parameters: genesis at the chain's genesis second.
    pub fn beacon(&self) -> Beacon {
        Beacon {
            public_key: self.beacon_key().public_key_hex(),
            genesis_s: self.genesis_ms / 1000,
            period_s: BEACON_PERIOD_S,
        }
    }

    /// Block `number`'s hash: blake3 keyed by a key derived from the chain's secret seed.
    fn block_hash(&self, number: u64) -> crate::bytes::Hash32 {
        let seed = hex::decode(&self.beacon_seed).unwrap_or_default();
        let key = blake3::derive_key("af stand-in chain block hash v1", &seed);
        crate::bytes::Hash32(*blake3::keyed_hash(&key, &number.to_le_bytes()).as_bytes())
    }

    fn beacon_key(&self) -> BeaconKey {
        let mut seed = [0u8; 32];
        if let Ok(bytes) = hex::decode(&self.beacon_seed) {
            if bytes.len() == 32 {
                seed.copy_from_slice(&bytes);
            }
        }
        BeaconKey::from_seed(&seed)
    }

    /// Epoch of `block` on `netuid` (subtensor's legacy schedule).
    fn epoch(&self, netuid: u16, block: u64) -> u64 {
        (block + u64::from(netuid) + 1) / (self.tempo + 1)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LocalChainError {
    #[error("{path}: {message}")]
    State { path: PathBuf, message: String },
}

/// The chain's state on disk: rewritten atomically and fsync'd on every change.
pub struct LocalChain {
    path: PathBuf,
    state: Mutex<LocalState>,
    clock: fn() -> u64,
}

#[derive(Serialize, Deserialize)]
pub struct Status {
    pub block: u64,
    pub block_ms: u64,
    pub tempo: u64,
    pub genesis_ms: u64,
}

type Refusal = (StatusCode, Json<serde_json::Value>);

fn refuse(status: StatusCode, message: impl Into<String>) -> Refusal {
    (status, Json(serde_json::json!({ "error": message.into() })))
}

impl LocalChain {
    /// Opens the chain kept in `dir`, creating it (genesis now) if absent.
    pub fn open(dir: &Path, block_ms: u64, tempo: u64, clock: fn() -> u64) -> Result<LocalChain, LocalChainError> {
        let path = dir.join(STATE_FILE);
        let err = |message: String| LocalChainError::State { path: path.clone(), message };
        std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
        let state = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| err(format!("not a chain state: {e}")))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => LocalState {
                genesis_ms: clock(),
                block_ms: block_ms.max(1),
                tempo: if tempo == 0 { DEFAULT_TEMPO } else { tempo },
                subnets: BTreeMap::new(),
                beacon_seed: String::new(),
            },
            Err(e) => return Err(err(e.to_string())),
        };
        let mut state: LocalState = state;
        if state.beacon_seed.is_empty() {
            let mut seed = [0u8; 32];
            getrandom::getrandom(&mut seed).map_err(|e| err(format!("no randomness for the beacon key: {e}")))?;
            state.beacon_seed = hex::encode(seed);
        }
        let chain = LocalChain { path, state: Mutex::new(state), clock };
        chain.persist(&chain.state.lock().expect("never poisoned"))?;
        Ok(chain)
    }

    fn persist(&self, state: &LocalState) -> Result<(), LocalChainError> {
        use std::io::Write;
        let err = |e: std::io::Error| LocalChainError::State { path: self.path.clone(), message: e.to_string() };
        let tmp = self.path.with_extension("json.tmp");
        let mut file = std::fs::File::create(&tmp).map_err(err)?;
        file.write_all(&serde_json::to_vec_pretty(state).expect("serializable")).map_err(err)?;
        file.sync_all().map_err(err)?;
        std::fs::rename(&tmp, &self.path).map_err(err)?;
        if let Some(dir) = self.path.parent() {
            std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(err)?;
        }
        Ok(())
    }

    fn block_of(&self, state: &LocalState) -> u64 {
        (self.clock)().saturating_sub(state.genesis_ms) / state.block_ms
    }

    /// Applies a change under the lock and makes it durable before answering.
    fn change<T>(&self, apply: impl FnOnce(&mut LocalState, u64) -> Result<T, Refusal>) -> Result<T, Refusal> {
        let mut state = self.state.lock().expect("never poisoned");
        let block = self.block_of(&state);
        let mut next = state.clone();
        let out = apply(&mut next, block)?;
        self.persist(&next).map_err(|e| refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        *state = next;
        Ok(out)
    }

    fn read<T>(&self, look: impl FnOnce(&LocalState, u64) -> T) -> T {
        let state = self.state.lock().expect("never poisoned");
        look(&state, self.block_of(&state))
    }

    /// Opens the timelocked commits that are due (the serving loop calls this every
    /// block); changes and persists the state only when one was.
    pub fn tick(&self) -> Result<(), LocalChainError> {
        let mut state = self.state.lock().expect("never poisoned");
        let block = self.block_of(&state);
        let now_ms = (self.clock)();
        let mut next = state.clone();
        if reveal_due(&mut next, block, now_ms) {
            self.persist(&next)?;
            *state = next;
        }
        Ok(())
    }
}

/// Opens every commit whose reveal epoch has come and whose round has been signed, and
/// drops those whose reveal epoch has passed: what subtensor's `reveal_crv3_commits` does
/// each block. Returns whether anything changed.
fn reveal_due(state: &mut LocalState, block: u64, now_ms: u64) -> bool {
    let beacon = state.beacon();
    let key = state.beacon_key();
    let signed = beacon.latest_round(now_ms);
    let mut changed = false;
    let netuids: Vec<u16> = state.subnets.keys().copied().collect();
    for netuid in netuids {
        let current = state.epoch(netuid, block);
        let subnet = state.subnets.get_mut(&netuid).expect("listed");
        let period = subnet.reveal_period_epochs;
        let (mut keep, mut opened) = (Vec::new(), Vec::new());
        for commit in std::mem::take(&mut subnet.timelocked) {
            let reveal_epoch = commit.epoch + period;
            if current < reveal_epoch || (current == reveal_epoch && commit.reveal_round > signed) {
                keep.push(commit);
                continue;
            }
            let bytes = hex::decode(&commit.commit).unwrap_or_default();
            let mut record = RevealedCommit {
                hotkey: commit.hotkey.clone(),
                commit_block: commit.commit_block,
                reveal_block: block,
                reveal_round: commit.reveal_round,
                ciphertext_hash: crate::bytes::Hash32(*blake3::hash(&bytes).as_bytes()),
                uids: Vec::new(),
                weights: Vec::new(),
                error: String::new(),
            };
            if current > reveal_epoch {
                record.error =
                    format!("expired: round {} was not signed within epoch {reveal_epoch}", commit.reveal_round);
            } else {
                match open_commit(subnet, &commit, &bytes, &key.sign(commit.reveal_round)) {
                    Ok(payload) => {
                        record.uids = payload.uids;
                        record.weights = payload.values;
                    }
                    Err(why) => record.error = why,
                }
            }
            opened.push(record);
        }
        changed |= !opened.is_empty();
        subnet.timelocked = keep;
        subnet.revealed.extend(opened);
        let excess = subnet.revealed.len().saturating_sub(MAX_REVEALED_KEPT);
        subnet.revealed.drain(..excess);
    }
    changed
}

/// Decrypts one commit and applies its weights as `set_weights` would, or says why not.
fn open_commit(
    subnet: &mut Subnet,
    commit: &LocalCommit,
    bytes: &[u8],
    signature: &[u8],
) -> Result<WeightsTlockPayload, String> {
    use parity_scale_codec::Decode;
    let plaintext = tlock::decrypt(bytes, signature).map_err(|e| e.to_string())?;
    let payload =
        WeightsTlockPayload::decode(&mut &plaintext[..]).map_err(|e| format!("not a weights payload: {e}"))?;
    if payload.hotkey != commit.hotkey.as_bytes() {
        return Err("the payload names another hotkey than the committer".into());
    }
    if payload.uids.len() != payload.values.len() {
        return Err("uids and weights differ in length".into());
    }
    if payload.version_key < subnet.version_key {
        return Err(format!("IncorrectWeightVersionKey: {} < {}", payload.version_key, subnet.version_key));
    }
    let n = subnet.neurons.len() as u16;
    if let Some(bad) = payload.uids.iter().find(|&&u| u >= n) {
        return Err(format!("UidVecContainInvalidOne: uid {bad}"));
    }
    subnet.weights.insert(commit.uid, payload.uids.iter().copied().zip(payload.values.iter().copied()).collect());
    Ok(payload)
}

fn subnet_mut(state: &mut LocalState, netuid: u16) -> &mut Subnet {
    state
        .subnets
        .entry(netuid)
        .or_insert_with(|| Subnet { rate_limit_blocks: DEFAULT_WEIGHTS_RATE_LIMIT, ..Subnet::default() })
}

fn registered<'a>(subnet: &'a Subnet, hotkey: &str) -> Result<&'a Neuron, Refusal> {
    subnet
        .neurons
        .iter()
        .find(|n| n.hotkey == hotkey)
        .ok_or_else(|| refuse(StatusCode::FORBIDDEN, format!("hotkey {hotkey} is not registered on this subnet")))
}

#[derive(Deserialize)]
struct RegisterRequest {
    netuid: u16,
    hotkey: String,
    #[serde(default)]
    validator_permit: bool,
    /// Take this uid, deregistering its hotkey (subtensor gives a full subnet's
    /// lowest-ranked uid to a new registration; here the caller names it).
    #[serde(default)]
    replace_uid: Option<u16>,
}

#[derive(Deserialize)]
struct CommitRequest {
    hotkey: String,
    fields: Vec<String>,
}

#[derive(Deserialize)]
struct AxonRequest {
    hotkey: String,
    ip: std::net::IpAddr,
    port: u16,
}

#[derive(Deserialize)]
struct WeightsRequest {
    hotkey: String,
    uids: Vec<u16>,
    weights: Vec<u16>,
    version_key: u64,
}

#[derive(Deserialize)]
struct SettingsRequest {
    commit_reveal_enabled: Option<bool>,
    rate_limit_blocks: Option<u64>,
    version_key: Option<u64>,
    reveal_period_epochs: Option<u64>,
    send_delay_ms: Option<u64>,
}

#[derive(Deserialize)]
struct TimelockedRequest {
    hotkey: String,
    commit: String,
    reveal_round: u64,
    version: u16,
}

#[derive(Serialize, Deserialize)]
pub(super) struct RoundReply {
    pub(super) round: u64,
    pub(super) signature: String,
}

#[derive(Deserialize)]
struct HotkeyQuery {
    hotkey: Option<String>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct BlockReply {
    pub(super) block: u64,
}

type Shared = State<Arc<LocalChain>>;

pub fn router(chain: Arc<LocalChain>) -> Router {
    Router::new()
        .route("/v1/status", get(status))
        .route("/v1/register", post(register))
        .route("/v1/subnets/{netuid}/neurons", get(neurons))
        .route("/v1/subnets/{netuid}/commit", post(commit))
        .route("/v1/subnets/{netuid}/commitments", get(commitments))
        .route("/v1/subnets/{netuid}/weights", post(set_weights).get(weights))
        .route("/v1/subnets/{netuid}/limits", get(limits))
        .route("/v1/subnets/{netuid}/settings", post(settings))
        .route("/v1/subnets/{netuid}/timelock", get(timelock_info))
        .route("/v1/subnets/{netuid}/timelocked", post(commit_timelocked).get(timelocked))
        .route("/v1/beacon/rounds/{round}", get(beacon_round))
        .route("/v1/blocks/{number}", get(block))
        .route("/v1/subnets/{netuid}/axons", post(serve_axon).get(axons))
        .with_state(chain)
}

async fn status(State(chain): Shared) -> Json<Status> {
    Json(chain.read(|s, block| Status { block, block_ms: s.block_ms, tempo: s.tempo, genesis_ms: s.genesis_ms }))
}

async fn register(State(chain): Shared, Json(request): Json<RegisterRequest>) -> Result<Json<Neuron>, Refusal> {
    if request.hotkey.is_empty() || request.hotkey.len() > 128 {
        return Err(refuse(StatusCode::BAD_REQUEST, "hotkey must be 1 to 128 bytes"));
    }
    chain
        .change(|state, block| {
            let subnet = subnet_mut(state, request.netuid);
            if let Some(existing) = subnet.neurons.iter().find(|n| n.hotkey == request.hotkey) {
                if request.replace_uid.is_some_and(|uid| uid != existing.uid) {
                    return Err(refuse(
                        StatusCode::CONFLICT,
                        format!("{} is already registered as uid {}", existing.hotkey, existing.uid),
                    ));
                }
                return Ok(existing.clone());
            }
            let uid = match request.replace_uid {
                Some(uid) if usize::from(uid) < subnet.neurons.len() => uid,
                Some(uid) => {
                    return Err(refuse(
                        StatusCode::BAD_REQUEST,
                        format!("replace_uid {uid} is not a registered uid (the subnet has {})", subnet.neurons.len()),
                    ))
                }
                None if subnet.neurons.len() >= usize::from(u16::MAX) => {
                    return Err(refuse(StatusCode::CONFLICT, "the subnet is full: name a uid to replace"))
                }
                None => subnet.neurons.len() as u16,
            };
            let neuron = Neuron {
                uid,
                hotkey: request.hotkey.clone(),
                registration_block: block,
                validator_permit: request.validator_permit,
            };
            match subnet.neurons.get_mut(usize::from(uid)) {
                Some(slot) => *slot = neuron.clone(),
                None => subnet.neurons.push(neuron.clone()),
            }
            Ok(neuron)
        })
        .map(Json)
}

async fn neurons(State(chain): Shared, UrlPath(netuid): UrlPath<u16>) -> Json<Vec<Neuron>> {
    Json(chain.read(|s, _| s.subnets.get(&netuid).map(|n| n.neurons.clone()).unwrap_or_default()))
}

async fn commit(
    State(chain): Shared,
    UrlPath(netuid): UrlPath<u16>,
    Json(request): Json<CommitRequest>,
) -> Result<Json<BlockReply>, Refusal> {
    let fields: Vec<Vec<u8>> = request
        .fields
        .iter()
        .map(|f| hex::decode(f).map_err(|e| refuse(StatusCode::BAD_REQUEST, format!("field is not hex: {e}"))))
        .collect::<Result<_, _>>()?;
    if fields.len() > 3 || fields.iter().any(|f| f.len() > 128) {
        return Err(refuse(StatusCode::BAD_REQUEST, "at most 3 fields of at most 128 bytes (BoundedVec<Data, 3>)"));
    }
    let applied = chain
        .change(|state, block| {
            let tempo = state.tempo;
            let subnet = subnet_mut(state, netuid);
            registered(subnet, &request.hotkey)?;
            let cost = commitment_cost(&fields);
            let epoch = block / tempo;
            let used = match subnet.space_used.get(&request.hotkey) {
                Some(&(e, used)) if e == epoch => used,
                _ => 0,
            };
            if used + cost > MAX_SPACE_PER_TEMPO {
                return Err(refuse(
                    StatusCode::TOO_MANY_REQUESTS,
                    format!(
                        "SpaceLimitExceeded: {used} + {cost} bytes > {MAX_SPACE_PER_TEMPO} this tempo; the space resets at block {}",
                        (epoch + 1) * tempo
                    ),
                ));
            }
            subnet.space_used.insert(request.hotkey.clone(), (epoch, used + cost));
            let record = CommitmentRecord::new(request.hotkey.clone(), block, fields.clone());
            subnet.commitments.insert(request.hotkey.clone(), record.clone());
            subnet.history.push(record);
            Ok(BlockReply { block })
        });
    answer_late(&chain, netuid, applied).await
}

/// A send's answer, `send_delay_ms` (settings) after it was applied.
async fn answer_late(
    chain: &LocalChain,
    netuid: u16,
    applied: Result<BlockReply, Refusal>,
) -> Result<Json<BlockReply>, Refusal> {
    let reply = applied?;
    let delay = chain.read(|s, _| s.subnets.get(&netuid).map_or(0, |n| n.send_delay_ms));
    if delay > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
    }
    Ok(Json(reply))
}

async fn commitments(State(chain): Shared, UrlPath(netuid): UrlPath<u16>) -> Json<Vec<CommitmentRecord>> {
    Json(
        chain
            .read(|s, _| s.subnets.get(&netuid).map(|n| n.commitments.values().cloned().collect()).unwrap_or_default()),
    )
}

async fn set_weights(
    State(chain): Shared,
    UrlPath(netuid): UrlPath<u16>,
    Json(request): Json<WeightsRequest>,
) -> Result<Json<BlockReply>, Refusal> {
    if request.uids.len() != request.weights.len() {
        return Err(refuse(StatusCode::BAD_REQUEST, "uids and weights differ in length"));
    }
    let applied = chain.change(|state, block| {
        let subnet = subnet_mut(state, netuid);
        let uid = registered(subnet, &request.hotkey)?.uid;
        if subnet.commit_reveal_enabled {
            return Err(refuse(StatusCode::FORBIDDEN, "CommitRevealEnabled: set_weights is refused on this subnet"));
        }
        if request.version_key < subnet.version_key {
            return Err(refuse(
                StatusCode::FORBIDDEN,
                format!("IncorrectWeightVersionKey: {} < {}", request.version_key, subnet.version_key),
            ));
        }
        if let Some(&last) = subnet.last_update.get(&uid) {
            if block < last + subnet.rate_limit_blocks {
                return Err(refuse(
                    StatusCode::TOO_MANY_REQUESTS,
                    format!("SettingWeightsTooFast: last at {last}, limit {} blocks", subnet.rate_limit_blocks),
                ));
            }
        }
        let n = subnet.neurons.len() as u16;
        if let Some(bad) = request.uids.iter().find(|&&u| u >= n) {
            return Err(refuse(StatusCode::BAD_REQUEST, format!("UidVecContainInvalidOne: uid {bad}")));
        }
        subnet.weights.insert(uid, request.uids.iter().copied().zip(request.weights.iter().copied()).collect());
        subnet.last_update.insert(uid, block);
        Ok(BlockReply { block })
    });
    answer_late(&chain, netuid, applied).await
}

async fn weights(State(chain): Shared, UrlPath(netuid): UrlPath<u16>) -> Json<Vec<(u16, Vec<(u16, u16)>)>> {
    Json(chain.read(|s, _| {
        s.subnets.get(&netuid).map(|n| n.weights.iter().map(|(u, w)| (*u, w.clone())).collect()).unwrap_or_default()
    }))
}

async fn limits(
    State(chain): Shared,
    UrlPath(netuid): UrlPath<u16>,
    Query(query): Query<HotkeyQuery>,
) -> Json<WeightLimits> {
    Json(chain.read(|s, _| {
        let default = Subnet { rate_limit_blocks: DEFAULT_WEIGHTS_RATE_LIMIT, ..Subnet::default() };
        let subnet = s.subnets.get(&netuid).unwrap_or(&default);
        let uid = query.hotkey.as_ref().and_then(|h| subnet.neurons.iter().find(|n| n.hotkey == *h).map(|n| n.uid));
        WeightLimits {
            rate_limit_blocks: subnet.rate_limit_blocks,
            last_update: uid.and_then(|u| subnet.last_update.get(&u).copied()),
            commit_reveal_enabled: subnet.commit_reveal_enabled,
            version_key: subnet.version_key,
            tempo: s.tempo,
            registered: query.hotkey.as_ref().map(|_| uid.is_some()),
            in_pool: 0, // the local chain applies a send as it answers: nothing waits
        }
    }))
}

async fn settings(
    State(chain): Shared,
    UrlPath(netuid): UrlPath<u16>,
    Json(request): Json<SettingsRequest>,
) -> Result<Json<BlockReply>, Refusal> {
    chain
        .change(|state, block| {
            let subnet = subnet_mut(state, netuid);
            if let Some(v) = request.commit_reveal_enabled {
                subnet.commit_reveal_enabled = v;
            }
            if let Some(v) = request.rate_limit_blocks {
                subnet.rate_limit_blocks = v;
            }
            if let Some(v) = request.version_key {
                subnet.version_key = v;
            }
            if let Some(v) = request.reveal_period_epochs {
                if !(1..=100).contains(&v) {
                    return Err(refuse(StatusCode::BAD_REQUEST, "reveal_period_epochs must be in 1..=100"));
                }
                subnet.reveal_period_epochs = v;
            }
            if let Some(v) = request.send_delay_ms {
                if v > MAX_SEND_DELAY_MS {
                    return Err(refuse(
                        StatusCode::BAD_REQUEST,
                        format!("send_delay_ms must be at most {MAX_SEND_DELAY_MS}"),
                    ));
                }
                subnet.send_delay_ms = v;
            }
            Ok(BlockReply { block })
        })
        .map(Json)
}

async fn timelock_info(
    State(chain): Shared,
    UrlPath(netuid): UrlPath<u16>,
    Query(query): Query<HotkeyQuery>,
) -> Json<TimelockInfo> {
    Json(chain.read(|s, block| {
        let epoch = s.epoch(netuid, block);
        let subnet = s.subnets.get(&netuid);
        TimelockInfo {
            commit_reveal_version: COMMIT_REVEAL_VERSION,
            reveal_period_epochs: subnet.map_or(1, |n| n.reveal_period_epochs),
            schedule: EpochSchedule::Legacy { tempo: s.tempo, netuid },
            beacon: s.beacon(),
            block_ms: s.block_ms,
            unrevealed_commits: subnet.map_or(0, |n| {
                n.timelocked.iter().filter(|c| Some(&c.hotkey) == query.hotkey.as_ref() && c.epoch == epoch).count()
                    as u32
            }),
        }
    }))
}

async fn commit_timelocked(
    State(chain): Shared,
    UrlPath(netuid): UrlPath<u16>,
    Json(request): Json<TimelockedRequest>,
) -> Result<Json<BlockReply>, Refusal> {
    let bytes = hex::decode(&request.commit).map_err(|e| refuse(StatusCode::BAD_REQUEST, format!("commit: {e}")))?;
    if bytes.len() > tlock::MAX_COMMIT_BYTES {
        return Err(refuse(StatusCode::BAD_REQUEST, format!("commit over {} bytes", tlock::MAX_COMMIT_BYTES)));
    }
    let applied = chain.change(|state, block| {
        let epoch = state.epoch(netuid, block);
        let subnet = subnet_mut(state, netuid);
        let uid = registered(subnet, &request.hotkey)?.uid;
        if !subnet.commit_reveal_enabled {
            return Err(refuse(StatusCode::FORBIDDEN, "CommitRevealDisabled: commit-reveal is off on this subnet"));
        }
        if request.version != COMMIT_REVEAL_VERSION {
            return Err(refuse(
                StatusCode::FORBIDDEN,
                format!("IncorrectCommitRevealVersion: {} is not {COMMIT_REVEAL_VERSION}", request.version),
            ));
        }
        if let Some(&last) = subnet.last_update.get(&uid) {
            if block < last + subnet.rate_limit_blocks {
                return Err(refuse(
                    StatusCode::TOO_MANY_REQUESTS,
                    format!("CommittingWeightsTooFast: last at {last}, limit {} blocks", subnet.rate_limit_blocks),
                ));
            }
        }
        let unrevealed = subnet.timelocked.iter().filter(|c| c.hotkey == request.hotkey && c.epoch == epoch).count();
        if unrevealed >= tlock::MAX_UNREVEALED_COMMITS as usize {
            return Err(refuse(StatusCode::TOO_MANY_REQUESTS, "TooManyUnrevealedCommits"));
        }
        subnet.timelocked.push(LocalCommit {
            hotkey: request.hotkey.clone(),
            uid,
            commit_block: block,
            epoch,
            reveal_round: request.reveal_round,
            commit: request.commit.clone(),
        });
        subnet.last_update.insert(uid, block);
        Ok(BlockReply { block })
    });
    answer_late(&chain, netuid, applied).await
}

async fn timelocked(State(chain): Shared, UrlPath(netuid): UrlPath<u16>) -> Json<Timelocked> {
    Json(chain.read(|s, _| {
        let Some(subnet) = s.subnets.get(&netuid) else { return Timelocked::default() };
        Timelocked {
            pending: subnet
                .timelocked
                .iter()
                .map(|c| PendingCommit {
                    hotkey: c.hotkey.clone(),
                    commit_block: c.commit_block,
                    reveal_round: c.reveal_round,
                    ciphertext_hash: crate::bytes::Hash32(
                        *blake3::hash(&hex::decode(&c.commit).unwrap_or_default()).as_bytes(),
                    ),
                })
                .collect(),
            revealed: subnet.revealed.clone(),
        }
    }))
}

/// A round's signature, once its time has come: anyone can then open the commits
/// encrypted to it, as the chain does.
async fn beacon_round(State(chain): Shared, UrlPath(round): UrlPath<u64>) -> Result<Json<RoundReply>, Refusal> {
    let now_ms = (chain.clock)();
    chain.read(|s, _| {
        if round == 0 || round > s.beacon().latest_round(now_ms) {
            return Err(refuse(StatusCode::NOT_FOUND, format!("round {round} is not signed yet")));
        }
        Ok(Json(RoundReply { round, signature: hex::encode(s.beacon_key().sign(round)) }))
    })
}

#[derive(Serialize, Deserialize)]
pub(super) struct BlockInfo {
    pub(super) number: u64,
    pub(super) hash: crate::bytes::Hash32,
}

/// A block's hash, once the block exists: keyed by the chain's secret seed, so nobody
/// outside can compute it before the chain's clock reaches it.
async fn block(State(chain): Shared, UrlPath(number): UrlPath<u64>) -> Result<Json<BlockInfo>, Refusal> {
    chain.read(|s, current| {
        if number > current {
            return Err(refuse(
                StatusCode::NOT_FOUND,
                format!("block {number} does not exist yet (the head is {current})"),
            ));
        }
        Ok(Json(BlockInfo { number, hash: s.block_hash(number) }))
    })
}

/// `serve_axon`: only a registered hotkey publishes, at an address subtensor accepts and a port.
async fn serve_axon(
    State(chain): Shared,
    UrlPath(netuid): UrlPath<u16>,
    Json(request): Json<AxonRequest>,
) -> Result<Json<BlockReply>, Refusal> {
    // As subtensor's transaction extension checks it (is_valid_ip_address with
    // allow_zero, and the port).
    let (addr, ip_type) = super::axon_ip_parts(request.ip);
    if let Err(why) = super::check_axon(ip_type, addr, request.port) {
        return Err(refuse(StatusCode::BAD_REQUEST, why));
    }
    chain
        .change(|state, block| {
            let subnet = subnet_mut(state, netuid);
            registered(subnet, &request.hotkey)?;
            let axon = super::Axon { hotkey: request.hotkey.clone(), block, ip: request.ip, port: request.port };
            subnet.axons.insert(request.hotkey.clone(), axon);
            Ok(BlockReply { block })
        })
        .map(Json)
}

/// Registered hotkeys' axons (a deregistered hotkey's is not listed).
async fn axons(State(chain): Shared, UrlPath(netuid): UrlPath<u16>) -> Json<Vec<super::Axon>> {
    Json(chain.read(|s, _| {
        s.subnets
            .get(&netuid)
            .map(|n| n.axons.values().filter(|a| n.neurons.iter().any(|x| x.hotkey == a.hotkey)).cloned().collect())
            .unwrap_or_default()
    }))
}
