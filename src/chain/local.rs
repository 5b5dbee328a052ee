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
//! (`serve_axon` and `Axons`), `POST /v1/subnets/N/swap_hotkey {old_hotkey, new_hotkey}`
//! (`swap_hotkey` on one subnet). The routes are `local_api`'s; this module holds the
//! state and the rules they share. Its own beacon (a BLS12-381 key of quicknet's scheme) signs a
//! round a second; each block opens the commits whose reveal epoch has come with their
//! round's signature (real timelock decryption, subtensor's code) and applies the weights
//! inside; a commit still closed when its reveal epoch ends is dropped.

use super::tlock::{self, Beacon, BeaconKey, WeightsTlockPayload};
use super::{CommitmentRecord, Neuron, RevealedCommit, DEFAULT_TEMPO, DEFAULT_WEIGHTS_RATE_LIMIT};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

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
    pub(super) fn block_hash(&self, number: u64) -> crate::bytes::Hash32 {
        let seed = hex::decode(&self.beacon_seed).unwrap_or_default();
        let key = blake3::derive_key("af stand-in chain block hash v1", &seed);
        crate::bytes::Hash32(*blake3::keyed_hash(&key, &number.to_le_bytes()).as_bytes())
    }

    pub(super) fn beacon_key(&self) -> BeaconKey {
        let mut seed = [0u8; 32];
        if let Ok(bytes) = hex::decode(&self.beacon_seed) {
            if bytes.len() == 32 {
                seed.copy_from_slice(&bytes);
            }
        }
        BeaconKey::from_seed(&seed)
    }

    /// Epoch of `block` on `netuid` (subtensor's legacy schedule).
    pub(super) fn epoch(&self, netuid: u16, block: u64) -> u64 {
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
    pub(super) clock: fn() -> u64,
}

#[derive(Serialize, Deserialize)]
pub struct Status {
    pub block: u64,
    pub block_ms: u64,
    pub tempo: u64,
    pub genesis_ms: u64,
}

pub(super) type Refusal = (StatusCode, Json<serde_json::Value>);

pub(super) fn refuse(status: StatusCode, message: impl Into<String>) -> Refusal {
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
    pub(super) fn change<T>(
        &self,
        apply: impl FnOnce(&mut LocalState, u64) -> Result<T, Refusal>,
    ) -> Result<T, Refusal> {
        let mut state = self.state.lock().expect("never poisoned");
        let block = self.block_of(&state);
        let mut next = state.clone();
        let out = apply(&mut next, block)?;
        self.persist(&next).map_err(|e| refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        *state = next;
        Ok(out)
    }

    pub(super) fn read<T>(&self, look: impl FnOnce(&LocalState, u64) -> T) -> T {
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

pub(super) fn subnet_mut(state: &mut LocalState, netuid: u16) -> &mut Subnet {
    state
        .subnets
        .entry(netuid)
        .or_insert_with(|| Subnet { rate_limit_blocks: DEFAULT_WEIGHTS_RATE_LIMIT, ..Subnet::default() })
}

pub(super) fn registered<'a>(subnet: &'a Subnet, hotkey: &str) -> Result<&'a Neuron, Refusal> {
    subnet
        .neurons
        .iter()
        .find(|n| n.hotkey == hotkey)
        .ok_or_else(|| refuse(StatusCode::FORBIDDEN, format!("hotkey {hotkey} is not registered on this subnet")))
}
