//! The subtensor backend against a loopback JSON-RPC node of ours (jsonrpsee) that
//! serves the real finney metadata, a runtime version, headers and storage values under
//! keys computed by hand from the metadata's hashers, and records every extrinsic it is
//! sent. The backend must read neurons, commitments and weight settings back, and what
//! it submits must decode to the expected calls, signed by our hotkey.

use super::chain_subtensor::{compact_u32, finney_metadata};
use af::bytes::{Hash32, ValidatorKey};
use af::chain::subtensor::{self, SubtensorClient};
use af::chain::{Chain, ChainError, LedgerCommitment};
use jsonrpsee::server::{RpcModule, Server};
use jsonrpsee::types::ErrorObjectOwned;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use subxt::dynamic::Value;
use subxt::ext::scale_encode::EncodeAsType;

const SPEC_VERSION: u32 = 393;
const BEST_BLOCK: u64 = 5_000;
const NETUID: u16 = 7;

struct Node {
    metadata_bytes: Vec<u8>,
    metadata: subxt::Metadata,
    storage: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
    submitted: Mutex<Vec<Vec<u8>>>,
    asked: Mutex<Vec<String>>,
}

fn hex0x(bytes: &[u8]) -> String {
    format!("0x{}", hex::encode(bytes))
}

fn unhex(text: &str) -> Vec<u8> {
    hex::decode(text.trim_start_matches("0x")).expect("hex from subxt")
}

fn block_hash(number: u64) -> [u8; 32] {
    sp_crypto_hashing::blake2_256(&number.to_le_bytes())
}

impl Node {
    /// The storage key of `pallet.entry(keys...)`: twox128(pallet) ++ twox128(entry) ++
    /// each key part SCALE-encoded as its metadata type and hashed by its metadata hasher.
    fn key(&self, pallet: &str, entry: &str, keys: &[Value]) -> Vec<u8> {
        let storage = self.metadata.pallet_by_name(pallet).unwrap().storage().unwrap();
        let info = storage.entry_by_name(entry).unwrap_or_else(|| panic!("{pallet}.{entry} in metadata"));
        let mut key = sp_crypto_hashing::twox_128(storage.prefix().as_bytes()).to_vec();
        key.extend_from_slice(&sp_crypto_hashing::twox_128(entry.as_bytes()));
        assert_eq!(info.keys().len(), keys.len(), "{entry} takes {} keys", info.keys().len());
        for (part, key_info) in keys.iter().zip(info.keys()) {
            let mut encoded = Vec::new();
            part.encode_as_type_to(key_info.key_id, self.metadata.types(), &mut encoded).unwrap();
            match format!("{:?}", key_info.hasher).as_str() {
                "Identity" => key.extend_from_slice(&encoded),
                "Twox64Concat" => {
                    key.extend_from_slice(&sp_crypto_hashing::twox_64(&encoded));
                    key.extend_from_slice(&encoded);
                }
                "Blake2_128Concat" => {
                    key.extend_from_slice(&sp_crypto_hashing::blake2_128(&encoded));
                    key.extend_from_slice(&encoded);
                }
                "Twox128" => key.extend_from_slice(&sp_crypto_hashing::twox_128(&encoded)),
                "Blake2_128" => key.extend_from_slice(&sp_crypto_hashing::blake2_128(&encoded)),
                "Blake2_256" => key.extend_from_slice(&sp_crypto_hashing::blake2_256(&encoded)),
                other => panic!("hasher {other}"),
            }
        }
        key
    }

    fn put(&self, pallet: &str, entry: &str, keys: &[Value], value: Value) {
        let storage = self.metadata.pallet_by_name(pallet).unwrap().storage().unwrap();
        let info = storage.entry_by_name(entry).unwrap();
        let mut encoded = Vec::new();
        value.encode_as_type_to(info.value_ty(), self.metadata.types(), &mut encoded).unwrap();
        self.storage.lock().unwrap().insert(self.key(pallet, entry, keys), encoded);
    }

    fn header(number: u64) -> serde_json::Value {
        serde_json::json!({
            "parentHash": hex0x(&block_hash(number.saturating_sub(1))),
            "number": format!("0x{number:x}"),
            "stateRoot": hex0x(&[1; 32]),
            "extrinsicsRoot": hex0x(&[2; 32]),
            "digest": { "logs": [] },
        })
    }
}

/// `sp_version::RuntimeVersion`, SCALE: spec and impl names, authoring, spec and impl
/// versions, apis, transaction version, system version.
fn runtime_version_scale() -> Vec<u8> {
    use subxt::ext::codec::Encode;
    let mut out = Vec::new();
    "node-subtensor".encode_to(&mut out);
    "node-subtensor".encode_to(&mut out);
    1u32.encode_to(&mut out);
    SPEC_VERSION.encode_to(&mut out);
    1u32.encode_to(&mut out);
    Vec::<([u8; 8], u32)>::new().encode_to(&mut out);
    1u32.encode_to(&mut out);
    1u8.encode_to(&mut out);
    out
}

fn rpc_error(message: String) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(-32601, message, None::<()>)
}

async fn start(node: Arc<Node>) -> String {
    let mut module = RpcModule::from_arc(node);
    let methods: &[&'static str] = &[
        "rpc_methods",
        "chain_getBlockHash",
        "chain_getFinalizedHead",
        "chain_getHeader",
        "state_getRuntimeVersion",
        "state_call",
        "state_getStorage",
        "state_getMetadata",
        "system_accountNextIndex",
        "author_submitExtrinsic",
        "system_chain",
        "system_properties",
    ];
    for &method in methods {
        module
            .register_method(method, move |params, node, _| -> Result<serde_json::Value, ErrorObjectOwned> {
                node.asked.lock().unwrap().push(method.to_string());
                let args: Vec<serde_json::Value> = params.parse().unwrap_or_default();
                let arg = |i: usize| args.get(i).cloned().unwrap_or(serde_json::Value::Null);
                Ok(match method {
                    "rpc_methods" => serde_json::json!({ "version": 1, "methods": methods }),
                    "chain_getBlockHash" => {
                        // As a node does: no hash for a block it does not have yet.
                        match arg(0).as_u64().unwrap_or(BEST_BLOCK) {
                            number if number > BEST_BLOCK => serde_json::Value::Null,
                            number => serde_json::json!(hex0x(&block_hash(number))),
                        }
                    }
                    "chain_getFinalizedHead" => serde_json::json!(hex0x(&block_hash(BEST_BLOCK))),
                    "chain_getHeader" => Node::header(BEST_BLOCK),
                    "state_getRuntimeVersion" => serde_json::json!({
                        "specName": "node-subtensor", "implName": "node-subtensor", "authoringVersion": 1,
                        "specVersion": SPEC_VERSION, "implVersion": 1, "apis": [], "transactionVersion": 1, "stateVersion": 1
                    }),
                    "state_getMetadata" => serde_json::json!(hex0x(&node.metadata_bytes)),
                    "state_call" => {
                        let name = arg(0).as_str().unwrap_or_default().to_string();
                        let data = unhex(arg(1).as_str().unwrap_or("0x"));
                        let reply: Vec<u8> = match name.as_str() {
                            "Metadata_metadata_versions" => vec![0x04, 16, 0, 0, 0],
                            "Metadata_metadata_at_version" if data == 16u32.to_le_bytes() => {
                                let mut out = vec![0x01];
                                out.extend(subxt::ext::codec::Encode::encode(&subxt::ext::codec::Compact(node.metadata_bytes.len() as u32)));
                                out.extend_from_slice(&node.metadata_bytes);
                                out
                            }
                            "Metadata_metadata_at_version" => vec![0x00],
                            "AccountNonceApi_account_nonce" => 3u32.to_le_bytes().to_vec(),
                            "Core_version" => runtime_version_scale(),
                            other => return Err(rpc_error(format!("state_call {other} not served"))),
                        };
                        serde_json::json!(hex0x(&reply))
                    }
                    "state_getStorage" => {
                        let key = unhex(arg(0).as_str().unwrap_or("0x"));
                        match node.storage.lock().unwrap().get(&key) {
                            Some(value) => serde_json::json!(hex0x(value)),
                            None => serde_json::Value::Null,
                        }
                    }
                    "system_accountNextIndex" => serde_json::json!(3),
                    "system_chain" => serde_json::json!("af loopback subtensor"),
                    "system_properties" => serde_json::json!({ "ss58Format": 42, "tokenSymbol": "TAO", "tokenDecimals": 9 }),
                    "author_submitExtrinsic" => {
                        let bytes = unhex(arg(0).as_str().unwrap_or("0x"));
                        let hash = sp_crypto_hashing::blake2_256(&bytes);
                        node.submitted.lock().unwrap().push(bytes);
                        serde_json::json!(hex0x(&hash))
                    }
                    _ => unreachable!(),
                })
            })
            .unwrap();
    }
    // Legacy submission is a subscription: record the extrinsic, report it ready.
    module
        .register_subscription(
            "author_submitAndWatchExtrinsic",
            "author_extrinsicUpdate",
            "author_unwatchExtrinsic",
            |params, pending, node, _| async move {
                node.asked.lock().unwrap().push("author_submitAndWatchExtrinsic".into());
                let args: Vec<String> = params.parse().unwrap_or_default();
                node.submitted.lock().unwrap().push(unhex(args.first().map_or("0x", String::as_str)));
                let sink = pending.accept().await.map_err(|e| e.to_string())?;
                let ready = serde_json::value::to_raw_value(&"ready").unwrap();
                sink.send(jsonrpsee::SubscriptionMessage::from(ready)).await.map_err(|e| e.to_string())?;
                // Keep the subscription open as a node would until inclusion.
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                Ok(())
            },
        )
        .unwrap();
    let server = Server::builder().build("127.0.0.1:0").await.unwrap();
    let addr = server.local_addr().unwrap();
    let handle = server.start(module);
    std::mem::forget(handle); // serves until the test process ends
    format!("ws://{addr}")
}

fn subnet_key() -> [Value; 1] {
    [Value::u128(u128::from(NETUID))]
}

fn account(seed: u8) -> [u8; 32] {
    [seed; 32]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_subtensor_backend_reads_and_submits_through_a_loopback_node() {
    let Some(metadata_bytes) = finney_metadata() else { return };
    let metadata = subxt::Metadata::decode_from(&metadata_bytes).unwrap();
    let node = Arc::new(Node {
        metadata_bytes,
        metadata,
        storage: Mutex::default(),
        submitted: Mutex::default(),
        asked: Mutex::default(),
    });
    let netuid = Value::u128(u128::from(NETUID));
    let keypair = crate::chain_subtensor::seed_keypair(&"5a".repeat(32));
    let ours = keypair.public_key().0;
    node.put("SubtensorModule", "SubnetworkN", &subnet_key(), Value::u128(3));
    for (uid, who, registered) in [(0u16, account(1), 100u64), (1, ours, 250), (2, account(3), 4_000)] {
        let uid_value = Value::u128(u128::from(uid));
        node.put("SubtensorModule", "Keys", &[netuid.clone(), uid_value.clone()], Value::from_bytes(who));
        node.put(
            "SubtensorModule",
            "BlockAtRegistration",
            &[netuid.clone(), uid_value],
            Value::u128(u128::from(registered)),
        );
    }
    node.put(
        "SubtensorModule",
        "ValidatorPermit",
        &subnet_key(),
        Value::unnamed_composite([Value::bool(false), Value::bool(true), Value::bool(false)]),
    );
    let committed =
        LedgerCommitment { tip_hash: Hash32([0xaa; 32]), ledger_key: ValidatorKey([0xbb; 32]), tip_height: 77 };
    let data = |bytes: &[u8]| Value::unnamed_variant(format!("Raw{}", bytes.len()), [Value::from_bytes(bytes)]);
    node.put(
        "Commitments",
        "CommitmentOf",
        &[netuid.clone(), Value::from_bytes(ours)],
        Value::named_composite([
            ("deposit", Value::u128(0)),
            ("block", Value::u128(4_321)),
            (
                "info",
                Value::named_composite([(
                    "fields",
                    Value::unnamed_composite(committed.fields().iter().map(|f| data(f))),
                )]),
            ),
        ]),
    );
    // A miner's commitment (uid 2): compact JSON over several Raw fields (ledger-spec/13).
    let miner_commitment = af::chain::miner::MinerCommitment::new(
        "acme/reasoner-7b-with-a-long-name-that-needs-more-than-one-field",
        "0123456789abcdef0123456789abcdef01234567",
        "https://miner.example.net:8443/openai/v1",
    )
    .unwrap();
    let miner_fields = miner_commitment.to_fields().unwrap();
    assert!(miner_fields.len() > 1, "the commitment spans fields: {}", miner_commitment.to_json().len());
    node.put(
        "Commitments",
        "CommitmentOf",
        &[netuid.clone(), Value::from_bytes(account(3))],
        Value::named_composite([
            ("deposit", Value::u128(0)),
            ("block", Value::u128(4_500)),
            (
                "info",
                Value::named_composite([("fields", Value::unnamed_composite(miner_fields.iter().map(|f| data(f))))]),
            ),
        ]),
    );
    // Our axon, and another hotkey's (AxonInfo, as serve_axon stores it).
    let axon = |ip: u128, port: u128, ip_type: u128| {
        Value::named_composite([
            ("block", Value::u128(4_100)),
            ("version", Value::u128(1)),
            ("ip", Value::u128(ip)),
            ("port", Value::u128(port)),
            ("ip_type", Value::u128(ip_type)),
            ("protocol", Value::u128(0)),
            ("placeholder1", Value::u128(0)),
            ("placeholder2", Value::u128(0)),
        ])
    };
    node.put("SubtensorModule", "Axons", &[netuid.clone(), Value::from_bytes(ours)], axon(0x0a01_0203, 4001, 4));
    node.put("SubtensorModule", "Axons", &[netuid.clone(), Value::from_bytes(account(3))], axon(1, 9, 6));
    // The metadata's default for this subnet setting is on (as on finney): turn it off.
    node.put("SubtensorModule", "CommitRevealWeightsEnabled", &subnet_key(), Value::bool(false));
    node.put("SubtensorModule", "WeightsSetRateLimit", &subnet_key(), Value::u128(100));
    node.put("SubtensorModule", "WeightsVersionKey", &subnet_key(), Value::u128(9));
    node.put(
        "SubtensorModule",
        "LastUpdate",
        &subnet_key(),
        Value::unnamed_composite([Value::u128(0), Value::u128(4_950), Value::u128(0)]),
    );
    let url = start(node.clone()).await;

    let client = SubtensorClient::connect(&url, NETUID, Some(keypair.clone())).await.unwrap();
    assert_eq!(client.hotkey(), Some(subtensor::ss58(&ours)));
    assert_eq!(client.current_block().await.unwrap(), BEST_BLOCK);
    // Block hashes by number (chain_getBlockHash): the match ids' randomness.
    assert_eq!(client.block_hash(4_000).await.unwrap(), Some(af::bytes::Hash32(block_hash(4_000))));
    assert_eq!(client.block_hash(BEST_BLOCK + 1).await.unwrap(), None, "a block the node does not have");

    let neurons = client.neurons().await.unwrap();
    assert_eq!(neurons.len(), 3);
    assert_eq!(neurons[1].hotkey, subtensor::ss58(&ours));
    assert_eq!(neurons[0].hotkey, subtensor::ss58(&account(1)));
    assert_eq!(neurons.iter().map(|n| n.registration_block).collect::<Vec<_>>(), [100, 250, 4_000]);
    assert_eq!(neurons.iter().map(|n| n.validator_permit).collect::<Vec<_>>(), [false, true, false]);

    // Axons: ours at 10.1.2.3:4001, uid 2's at [::1]:9; uid 0 published none.
    let axons = client.axons().await.unwrap();
    assert_eq!(axons.len(), 2, "{axons:?}");
    assert_eq!(
        (axons[0].hotkey.clone(), axons[0].ip.to_string(), axons[0].port, axons[0].block),
        (subtensor::ss58(&ours), "10.1.2.3".into(), 4001, 4_100)
    );
    assert_eq!((axons[1].ip.to_string(), axons[1].port), ("::1".into(), 9));

    let commitments = client.commitments().await.unwrap();
    assert_eq!(commitments.len(), 2, "our ledger commitment and uid 2's miner commitment");
    let of = |who: [u8; 32]| commitments.iter().find(|c| c.hotkey == subtensor::ss58(&who)).unwrap();
    assert_eq!(of(ours).block, 4_321);
    assert_eq!(of(ours).ledger(), Some(committed));
    assert_eq!((of(account(3)).block, &of(account(3)).fields), (4_500, &miner_fields));
    assert_eq!(af::chain::miner::MinerCommitment::from_fields(&of(account(3)).fields).unwrap(), miner_commitment);
    // What a validator makes of this metagraph: uid 2 is the one contender; our ledger
    // commitment is a validator's, not a miner's, and is not listed as invalid.
    let found = af::validator::discovery::discover(&neurons, &commitments, None, &Default::default());
    assert_eq!(found.queue.len(), 1, "{found:?}");
    assert_eq!((found.queue[0].uid, found.queue[0].commit_block), (2, 4_500));
    assert_eq!(found.queue[0].commitment, miner_commitment);
    assert!(found.skipped.is_empty(), "{:?}", found.skipped);

    let limits = client.weight_limits().await.unwrap();
    assert_eq!(
        (limits.rate_limit_blocks, limits.last_update, limits.commit_reveal_enabled, limits.version_key),
        (100, Some(4_950), false, 9)
    );

    // Submitting: the extrinsic the node receives carries the hand-derived call bytes.
    let new = LedgerCommitment { tip_hash: Hash32([0x11; 32]), ledger_key: ValidatorKey([0x22; 32]), tip_height: 5 };
    client.commit(&new).await.unwrap();
    let mut expected_call = vec![0x12, 0x00, 0x07, 0x00, 0x0c, 0x21];
    expected_call.extend_from_slice(&[0x11; 32]);
    expected_call.push(0x21);
    expected_call.extend_from_slice(&[0x22; 32]);
    expected_call.push(0x09);
    expected_call.extend_from_slice(&5u64.to_le_bytes());
    let sent = node.submitted.lock().unwrap().last().cloned().expect("an extrinsic was submitted");
    let (length, prefix) = compact_u32(&sent);
    assert_eq!(sent.len() - prefix, length as usize);
    assert_eq!(sent[prefix], 0x84, "signed, version 4");
    assert_eq!(&sent[prefix + 2..prefix + 34], &ours, "signed by our hotkey");
    assert!(sent.ends_with(&expected_call), "the submitted call is set_commitment with our three fields");

    // A miner's commitment as `af mine commit` sends it: set_commitment(7, fields) with
    // each field a Data::Raw<len> (variant index len + 1).
    client.commit_fields(&miner_fields).await.unwrap();
    let sent = node.submitted.lock().unwrap().last().cloned().unwrap();
    let mut expected_call = vec![0x12, 0x00, 0x07, 0x00, (miner_fields.len() as u8) << 2];
    for field in &miner_fields {
        expected_call.push(field.len() as u8 + 1);
        expected_call.extend_from_slice(field);
    }
    assert!(sent.ends_with(&expected_call), "set_commitment with the miner's JSON fields");

    // serve_axon, signed by our hotkey: the address other validators dial.
    client.serve_axon("10.1.2.3".parse().unwrap(), 4001).await.unwrap();
    let sent = node.submitted.lock().unwrap().last().cloned().unwrap();
    assert_eq!(&sent[compact_u32(&sent).1 + 2..compact_u32(&sent).1 + 34], &ours, "signed by our hotkey");
    let mut expected_axon = vec![0x07, 0x00, 0x01, 0x00, 0x00, 0x00];
    expected_axon.extend_from_slice(&0x0a01_0203u128.to_le_bytes());
    expected_axon.extend_from_slice(&[0xa1, 0x0f, 4, 0, 0, 0]);
    assert!(sent.ends_with(&expected_axon), "serve_axon(7, 1, 10.1.2.3, 4001, ipv4, tcp) call bytes");

    // Weights: the rate limit is enforced before anything is sent (last update 4950 + 100 > 5000)...
    let n_sent = node.submitted.lock().unwrap().len();
    let error = client.set_weights(&[2], &[65535], 0).await.unwrap_err();
    assert!(matches!(error, ChainError::RateLimited { last: 4_950, limit: 100, next: 5_050 }), "{error}");
    assert_eq!(node.submitted.lock().unwrap().len(), n_sent, "nothing was sent");
    node.put(
        "SubtensorModule",
        "LastUpdate",
        &subnet_key(),
        Value::unnamed_composite([Value::u128(0), Value::u128(4_000), Value::u128(0)]),
    );
    client.set_weights(&[2], &[65535], 0).await.unwrap();
    let sent = node.submitted.lock().unwrap().last().cloned().unwrap();
    assert_eq!(node.submitted.lock().unwrap().len(), n_sent + 1);
    // set_weights(7, [2], [65535], version_key raised to the subnet's 9)
    let mut expected_call = vec![0x07, 0x00, 0x07, 0x00, 0x04, 0x02, 0x00, 0x04, 0xff, 0xff];
    expected_call.extend_from_slice(&9u64.to_le_bytes());
    assert!(sent.ends_with(&expected_call), "set_weights call bytes");

    // Commit-reveal on: refused with the setting named, nothing sent.
    node.put("SubtensorModule", "CommitRevealWeightsEnabled", &subnet_key(), Value::bool(true));
    let error = client.set_weights(&[2], &[65535], 0).await.unwrap_err();
    assert!(error.to_string().contains("CommitRevealWeightsEnabled"), "{error}");
    assert_eq!(node.submitted.lock().unwrap().len(), n_sent + 1);
    // The one weights path commits them timelocked instead: the node receives
    // commit_timelocked_mechanism_weights(7, mecid 0, ciphertext, round, version).
    let sent = af::chain::send_weights(&client, &[2], &[65535], 1_800_000_000_000).await.unwrap();
    let af::chain::WeightsSent::Committed { plan, ciphertext_hash, .. } = sent else { panic!("{sent:?}") };
    assert_eq!(node.submitted.lock().unwrap().len(), n_sent + 2);
    let extrinsic = node.submitted.lock().unwrap().last().cloned().unwrap();
    let call_at = extrinsic.windows(5).position(|w| w == [0x07, 118, 0x07, 0x00, 0x00]).expect("the commit call");
    let call = &extrinsic[call_at + 5..];
    let (len, prefix) = compact_u32(call);
    let ciphertext = &call[prefix..prefix + len as usize];
    assert_eq!(blake3::hash(ciphertext).as_bytes(), &ciphertext_hash.0);
    let rest = &call[prefix + len as usize..];
    assert_eq!(&rest[..8], &plan.reveal_round.to_le_bytes());
    assert!(plan.reveal_round > 1_000, "a quicknet round of 2027: {}", plan.reveal_round);
    // Only that round's signature opens it (tlock.rs tests the real quicknet round trip).
    assert!(af::chain::tlock::decrypt(ciphertext, &[0u8; 48]).is_err(), "a wrong key never opens it");
    let asked = node.asked.lock().unwrap().clone();
    assert!(
        asked.iter().any(|m| m == "author_submitAndWatchExtrinsic") && asked.iter().any(|m| m == "state_getStorage")
    );
}
