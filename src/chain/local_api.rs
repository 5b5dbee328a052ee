//! The local stand-in chain's HTTP/JSON API (`local` holds its state and rules): each
//! route a handler that reads or changes the chain's state under its lock, refusing by
//! name what subtensor would refuse. The routes are listed in `local`'s module text.

use super::local::{
    refuse, registered, subnet_mut, LocalChain, LocalCommit, Refusal, Status, Subnet, COMMIT_REVEAL_VERSION,
    MAX_SEND_DELAY_MS,
};
use super::tlock::{self, EpochSchedule};
use super::{
    commitment_cost, CommitmentRecord, Neuron, PendingCommit, TimelockInfo, Timelocked, WeightLimits,
    DEFAULT_WEIGHTS_RATE_LIMIT, MAX_SPACE_PER_TEMPO,
};
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

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

/// Serves `chain` on `listener` until `stop`, opening the timelocked weight commits that
/// are due at every block (every `block_ms`), as subtensor does.
pub async fn serve(
    chain: Arc<LocalChain>,
    listener: tokio::net::TcpListener,
    block_ms: u64,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let ticking = chain.clone();
    let ticks = tokio::spawn(async move {
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(block_ms)).await;
            if let Err(error) = ticking.tick() {
                tracing::error!(event = "chain_tick_failed", error = %error, "revealing commits failed");
            }
        }
    });
    let served = axum::serve(listener, router(chain)).with_graceful_shutdown(stop).await;
    ticks.abort();
    served
}

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
        .route("/v1/subnets/{netuid}/swap_hotkey", post(swap_hotkey))
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
    Json(chain.read(|s, block| {
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
            at_block: Some(block),
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

#[derive(Deserialize)]
struct SwapRequest {
    old_hotkey: String,
    new_hotkey: String,
}

/// `swap_hotkey` on one subnet, as subtensor's `perform_hotkey_swap_on_one_subnet` moves
/// it: the uid (`Uids`, `Keys`) with its registration block, permit, weights and
/// `LastUpdate` (kept by uid), the axon, and the timelocked weight commits go to the new
/// hotkey; the commitments pallet is not touched, so a commitment stays under the old
/// hotkey until the new one commits. Refused as subtensor refuses: the same hotkey
/// (`NewHotKeyIsSameWithOld`), a new hotkey registered already
/// (`HotKeyAlreadyRegisteredInSubNet`), an old one that is not (subtensor:
/// `NonAssociatedColdKey`; this chain has no coldkeys, and no swap interval or fee).
async fn swap_hotkey(
    State(chain): Shared,
    UrlPath(netuid): UrlPath<u16>,
    Json(request): Json<SwapRequest>,
) -> Result<Json<Neuron>, Refusal> {
    let (old, new) = (request.old_hotkey, request.new_hotkey);
    if new.is_empty() || new.len() > 128 {
        return Err(refuse(StatusCode::BAD_REQUEST, "hotkey must be 1 to 128 bytes"));
    }
    if old == new {
        return Err(refuse(StatusCode::BAD_REQUEST, "NewHotKeyIsSameWithOld"));
    }
    chain
        .change(|state, _| {
            let subnet = subnet_mut(state, netuid);
            if subnet.neurons.iter().any(|n| n.hotkey == new) {
                return Err(refuse(StatusCode::CONFLICT, format!("HotKeyAlreadyRegisteredInSubNet: {new}")));
            }
            let uid = registered(subnet, &old)?.uid;
            let neuron = &mut subnet.neurons[usize::from(uid)];
            neuron.hotkey = new.clone();
            let moved = neuron.clone();
            if let Some(mut axon) = subnet.axons.remove(&old) {
                axon.hotkey = new.clone();
                subnet.axons.insert(new.clone(), axon);
            }
            for commit in subnet.timelocked.iter_mut().filter(|c| c.hotkey == old) {
                commit.hotkey = new.clone();
            }
            Ok(moved)
        })
        .map(Json)
}
