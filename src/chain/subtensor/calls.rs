//! Subtensor's calls as the chain's metadata types them: the payloads of
//! `set_commitment`, `serve_axon`, `set_weights` and the timelocked commits, built by
//! the same functions online and offline (so the golden-bytes tests check what a live
//! validator submits), the hotkey from the environment, and the pool's refusals read.

use crate::chain::hotkey::Hotkey;
use crate::chain::ChainError;
use subxt::dynamic::Value;
use subxt::{ArcMetadata, Metadata, SubstrateConfig};
use subxt_signer::sr25519::Keypair;

/// Env var holding a hotkey's seed phrase or secret URI (instead of a wallet file).
pub const HOTKEY_PHRASE_ENV: &str = "AF_HOTKEY_PHRASE";

pub fn load_metadata(bytes: &[u8]) -> Result<ArcMetadata, ChainError> {
    Metadata::decode_from(bytes).map(Metadata::arc).map_err(|e| ChainError::Metadata(e.to_string()))
}

pub(super) fn raw_data(bytes: &[u8]) -> Value {
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
    let (ip, ip_type) = crate::chain::axon_ip_parts(ip);
    subxt::dynamic::tx(
        "SubtensorModule",
        "serve_axon",
        vec![
            Value::u128(u128::from(netuid)),
            Value::u128(u128::from(crate::chain::AXON_VERSION)),
            Value::u128(ip),
            Value::u128(u128::from(port)),
            Value::u128(u128::from(ip_type)),
            Value::u128(u128::from(crate::chain::AXON_PROTOCOL_TCP)),
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
pub fn hotkey_from_env() -> Option<Result<Hotkey, ChainError>> {
    let phrase = std::env::var(HOTKEY_PHRASE_ENV).ok()?;
    let uri: Result<subxt_signer::SecretUri, _> = phrase.parse();
    Some(match uri {
        Ok(uri) => {
            Keypair::from_uri(&uri).map(Hotkey::from).map_err(|e| ChainError::Key(format!("{HOTKEY_PHRASE_ENV}: {e}")))
        }
        Err(_) => Err(ChainError::Key(format!("{HOTKEY_PHRASE_ENV} is not a seed phrase or secret URI"))),
    })
}

pub fn parse_ss58(text: &str) -> Result<[u8; 32], ChainError> {
    text.parse::<subxt::utils::AccountId32>().map(|a| a.0).map_err(|e| ChainError::Key(format!("{text}: {e}")))
}

/// What the node said when it refused an extrinsic at submission.
#[derive(Debug, PartialEq, Eq)]
pub enum PoolRefusal {
    /// Another extrinsic of ours holds this nonce in the pool ("1014 Priority is too
    /// low"), or this very one is there already ("1013"), or a block took the nonce
    /// ("1010 ... Stale"/outdated): send again on a fresh nonce after a block.
    NonceTaken(String),
    /// The runtime refuses the call itself (a `CustomTransactionError`, named).
    Invalid(String),
}

/// Subtensor's `CustomTransactionError` codes (common/src/transaction_error.rs), named.
pub(super) fn custom_error_name(code: u8) -> &'static str {
    match code {
        1 => "StakeAmountTooLow",
        2 => "BalanceTooLow",
        3 => "SubnetNotExists",
        4 => "HotkeyAccountDoesntExist",
        6 => "RateLimitExceeded",
        10 => "HotKeyNotRegisteredInNetwork",
        11 => "InvalidIpAddress",
        12 => "ServingRateLimitExceeded",
        13 => "InvalidPort",
        14 => "BadRequest",
        16 => "InvalidRevealRound",
        20 => "UidNotFound",
        _ => "a custom transaction error",
    }
}

/// Reads a submission error the way a substrate node words it (author RPC codes 1010 to
/// 1014, the reason in the error's data); `None` for anything else (the node could not
/// be asked). `message` is the error's Display and Debug: only Debug shows the data.
pub fn pool_refusal(message: &str) -> Option<PoolRefusal> {
    let nonce_taken = [
        "code: 1014",
        "(1014)",
        "Priority is too low",
        "code: 1013",
        "(1013)",
        "Already Imported",
        "outdated",
        "Stale",
    ];
    if nonce_taken.iter().any(|needle| message.contains(needle)) {
        return Some(PoolRefusal::NonceTaken(message.to_string()));
    }
    if let Some(at) = message.find("Custom error: ") {
        let digits: String = message[at + 14..].chars().take_while(char::is_ascii_digit).collect();
        let name = digits.parse::<u8>().map_or("a custom transaction error", custom_error_name);
        return Some(PoolRefusal::Invalid(format!("{name} (Custom error: {digits})")));
    }
    (message.contains("code: 1010") || message.contains("Invalid Transaction"))
        .then(|| PoolRefusal::Invalid(message.to_string()))
}
