//! The subtensor backend against the strict loopback node (`subtensor_node.rs`): it
//! reads neurons, axons, weight settings and commitments of every `Data` variant and
//! field count back exactly (or names why not), and what it submits decodes to the
//! intended calls, signed by our hotkey, on nonces the pool accepts. Each accepted
//! extrinsic is captured for the polkadot-js check.

use super::chain_subtensor::{compact_u32, finney_metadata, seed_keypair};
use super::subtensor_node::{self, block_hash, bytes, number, Node, Submission};
use af::bytes::{Hash32, ValidatorKey};
use af::chain::subtensor::{self, PoolRefusal, SubtensorClient};
use af::chain::{Chain, ChainError, LedgerCommitment};
use scale_info::TypeDef;
use std::sync::Arc;
use subxt::dynamic::Value;

const BEST_BLOCK: u64 = 5_000;
const NETUID: u16 = 7;

fn subnet_key() -> [Value; 1] {
    [Value::u128(u128::from(NETUID))]
}

fn account(seed: u8) -> [u8; 32] {
    [seed; 32]
}

/// Every variant of the commitments pallet's `Data` in this metadata, with its fields'
/// type ids.
fn data_variants(node: &Node) -> Vec<(String, Vec<u32>)> {
    let types = node.metadata.types();
    let data = types
        .types
        .iter()
        .find(|t| {
            t.ty.path.segments.last().is_some_and(|s| s == "Data") && t.ty.path.segments[0].contains("commitments")
        })
        .expect("the commitments pallet's Data type");
    let TypeDef::Variant(variants) = &data.ty.type_def else { panic!("Data is an enum") };
    variants.variants.iter().map(|v| (v.name.clone(), v.fields.iter().map(|f| f.ty.id).collect())).collect()
}

/// A sample field of `variant` and what reading it back must give: its bytes, or an
/// error naming the variant.
fn sample(variant: &str) -> (Value, Result<Vec<u8>, String>) {
    if let Some(n) = variant.strip_prefix("Raw").and_then(|n| n.parse::<usize>().ok()) {
        let bytes: Vec<u8> = (0..n).map(|i| (i * 7 + n) as u8).collect();
        return (Value::unnamed_variant(variant, [Value::from_bytes(&bytes)]), Ok(bytes));
    }
    match variant {
        "BigRaw" => {
            let bytes: Vec<u8> = (0..300).map(|i| (i % 251) as u8).collect();
            (Value::unnamed_variant(variant, [Value::from_bytes(&bytes)]), Ok(bytes))
        }
        "None" | "ResetBondsFlag" => (Value::unnamed_variant(variant, []), Err(variant.into())),
        "TimelockEncrypted" => (
            Value::named_variant(
                variant,
                [("encrypted", Value::from_bytes([9u8; 40])), ("reveal_round", Value::u128(1_000))],
            ),
            Err(variant.into()),
        ),
        hash => (Value::unnamed_variant(hash, [Value::from_bytes([5u8; 32])]), Err(hash.into())),
    }
}

/// What reading a commitment back must give: each field's bytes, or a reason naming this.
type Expected = Result<Vec<Vec<u8>>, String>;

fn registration(block: u64, fields: Vec<Value>) -> Value {
    Value::named_composite([
        ("deposit", Value::u128(0)),
        ("block", Value::u128(u128::from(block))),
        ("info", Value::named_composite([("fields", Value::unnamed_composite(fields))])),
    ])
}

fn raw(bytes: &[u8]) -> Value {
    Value::unnamed_variant(format!("Raw{}", bytes.len()), [Value::from_bytes(bytes)])
}

/// The `Data` fields of a set_commitment as polkadot-js types them: `{"RawN": "0x.."}`.
fn data_intent(fields: &[Vec<u8>]) -> serde_json::Value {
    serde_json::json!({ "fields": fields.iter().map(|f| serde_json::json!({ format!("Raw{}", f.len()): subtensor_node::hex0x(f) })).collect::<Vec<_>>() })
}

async fn strict_node(block_ms: Option<u64>) -> Option<(Arc<Node>, String)> {
    let node = Node::new(finney_metadata()?, BEST_BLOCK);
    let url = subtensor_node::start(node.clone(), block_ms).await;
    Some((node, url))
}

fn last_accepted(node: &Node) -> Submission {
    node.submissions().into_iter().rev().find(|s| s.pool.is_ok()).expect("an accepted extrinsic")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commitments_of_every_data_variant_and_field_count_read_back_exactly_or_are_refused_by_name() {
    let Some((node, url)) = strict_node(None).await else { return };
    let variants = data_variants(&node);
    let names: Vec<&str> = variants.iter().map(|(n, _)| n.as_str()).collect();
    for expected in ["None", "Raw0", "Raw1", "Raw81", "Raw128", "BlakeTwo256", "Sha256", "Keccak256", "ShaThree256"] {
        assert!(names.contains(&expected), "the metadata's Data has {expected}: {names:?}");
    }
    // One hotkey per variant with a one-field commitment of it, then two- and three-field
    // ones; uid = index.
    let mut cases: Vec<(Vec<Value>, Expected)> = Vec::new();
    for (name, _) in &variants {
        let (value, expect) = sample(name);
        cases.push((vec![value], expect.map(|b| vec![b])));
    }
    let spec_example = br#"{"model":"org/model-7b","revision":"0123abcd","endpoint":"http://127.0.0.1:8001"}"#;
    assert_eq!(spec_example.len(), 81, "ledger-spec/13's example is one Raw81 field");
    cases.push((vec![raw(spec_example)], Ok(vec![spec_example.to_vec()])));
    cases.push((vec![raw(&[1; 10]), raw(&[2; 128])], Ok(vec![vec![1; 10], vec![2; 128]])));
    cases.push((vec![raw(&[3; 32]), raw(&[4; 32]), raw(&[5; 8])], Ok(vec![vec![3; 32], vec![4; 32], vec![5; 8]])));
    cases.push((vec![raw(&[6; 5]), sample("Sha256").0], Err("field 2 of 2 is Sha256".into())));
    cases.push((vec![], Ok(vec![])));
    for (uid, (fields, _)) in cases.iter().enumerate() {
        let who = account(100 + uid as u8);
        node.register(NETUID, uid as u16, who, 10);
        let keys = [Value::u128(u128::from(NETUID)), Value::from_bytes(who)];
        node.put("Commitments", "CommitmentOf", &keys, registration(20 + uid as u64, fields.clone()));
    }
    let client = SubtensorClient::connect(&url, NETUID, None).await.unwrap();
    let records = client.commitments().await.unwrap();
    assert_eq!(records.len(), cases.len(), "every hotkey's commitment is read");
    for (uid, (_, expect)) in cases.iter().enumerate() {
        let record = records.iter().find(|r| r.hotkey == subtensor::ss58(&account(100 + uid as u8))).unwrap();
        assert_eq!(record.block, 20 + uid as u64);
        match expect {
            Ok(fields) => assert_eq!((&record.fields, &record.unreadable), (fields, &None), "case {uid}"),
            Err(name) => {
                let reason = record.unreadable.as_deref().unwrap_or_else(|| panic!("case {uid} refused: {record:?}"));
                assert!(reason.contains(name.as_str()), "case {uid}: {reason}");
                assert!(record.fields.is_empty());
            }
        }
    }
    // A miner whose JSON is one Raw81 field is a contender, as one spread over three is.
    let neurons = client.neurons().await.unwrap();
    let found = af::validator::discovery::discover(&neurons, &records, None, &af::validator::state::Played::default());
    let spec_uid = variants.len() as u16;
    assert!(found.valid.iter().any(|c| c.uid == spec_uid), "the one-field miner is valid: {found:?}");
    let refused = found
        .skipped
        .iter()
        .any(|s| matches!(s, af::validator::discovery::Skipped::Invalid { error, .. } if error.contains("Sha256")));
    assert!(refused, "the hash field is named in the skip: {:?}", found.skipped);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_subtensor_backend_reads_and_submits_through_a_strict_loopback_node() {
    let Some((node, url)) = strict_node(None).await else { return };
    Node::clear_capture("chain_node");
    let capture = |what: &serde_json::Value| node.capture("chain_node", &last_accepted(&node), what.clone());
    let netuid = Value::u128(u128::from(NETUID));
    let keypair = seed_keypair(&"5a".repeat(32));
    let ours = keypair.public_key();
    for (uid, who, registered) in [(0u16, account(1), 100u64), (1, ours, 250), (2, account(3), 4_000)] {
        node.register(NETUID, uid, who, registered);
    }
    node.put(
        "SubtensorModule",
        "ValidatorPermit",
        &subnet_key(),
        Value::unnamed_composite([Value::bool(false), Value::bool(true), Value::bool(false)]),
    );
    let committed = LedgerCommitment {
        tip_hash: Hash32([0xaa; 32]),
        ledger_key: ValidatorKey([0xbb; 32]),
        tip_height: 77,
        protocol: None,
    };
    let data = |fields: &[Vec<u8>]| fields.iter().map(|f| raw(f)).collect::<Vec<_>>();
    node.put(
        "Commitments",
        "CommitmentOf",
        &[netuid.clone(), Value::from_bytes(ours)],
        registration(4_321, data(&committed.fields())),
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
        registration(4_500, data(&miner_fields)),
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
    node.put("SubtensorModule", "Axons", &[netuid.clone(), Value::from_bytes(account(3))], axon(2, 9, 6));
    // The metadata's default for this subnet setting is on (as on finney): turn it off.
    node.put("SubtensorModule", "CommitRevealWeightsEnabled", &subnet_key(), Value::bool(false));
    node.put("SubtensorModule", "WeightsSetRateLimit", &subnet_key(), Value::u128(100));
    node.put("SubtensorModule", "WeightsVersionKey", &subnet_key(), Value::u128(9));
    // Our uid's (1) last weights update, as the chain records it.
    let last_updated_at = |block: u128| {
        node.put(
            "SubtensorModule",
            "LastUpdate",
            &subnet_key(),
            Value::unnamed_composite([Value::u128(0), Value::u128(block), Value::u128(0)]),
        )
    };
    last_updated_at(4_950);

    let client = SubtensorClient::connect(&url, NETUID, Some(keypair.clone())).await.unwrap();
    assert_eq!(client.hotkey(), Some(subtensor::ss58(&ours)));
    assert_eq!(client.current_block().await.unwrap(), BEST_BLOCK);
    // Block hashes by number (chain_getBlockHash): the match ids' randomness.
    assert_eq!(client.block_hash(4_000).await.unwrap(), Some(Hash32(block_hash(4_000))));
    assert_eq!(client.block_hash(BEST_BLOCK + 1).await.unwrap(), None, "a block the node does not have");

    let neurons = client.neurons().await.unwrap();
    assert_eq!(neurons.len(), 3);
    assert_eq!(neurons[1].hotkey, subtensor::ss58(&ours));
    assert_eq!(neurons.iter().map(|n| n.registration_block).collect::<Vec<_>>(), [100, 250, 4_000]);
    assert_eq!(neurons.iter().map(|n| n.validator_permit).collect::<Vec<_>>(), [false, true, false]);

    let axons = client.axons().await.unwrap();
    assert_eq!(axons.len(), 2, "{axons:?}");
    assert_eq!(
        (axons[0].hotkey.clone(), axons[0].ip.to_string(), axons[0].port, axons[0].block),
        (subtensor::ss58(&ours), "10.1.2.3".into(), 4001, 4_100)
    );
    assert_eq!((axons[1].ip.to_string(), axons[1].port), ("::2".into(), 9));

    let commitments = client.commitments().await.unwrap();
    assert_eq!(commitments.len(), 2, "our ledger commitment and uid 2's miner commitment");
    let of = |who: [u8; 32]| commitments.iter().find(|c| c.hotkey == subtensor::ss58(&who)).unwrap().clone();
    assert_eq!((of(ours).block, of(ours).ledger()), (4_321, Some(committed)));
    assert_eq!((of(account(3)).block, &of(account(3)).fields), (4_500, &miner_fields));
    let found =
        af::validator::discovery::discover(&neurons, &commitments, None, &af::validator::state::Played::default());
    assert_eq!(found.queue.len(), 1, "{found:?}");
    assert_eq!((found.queue[0].uid, found.queue[0].commitment.clone()), (2, miner_commitment));

    let limits = client.weight_limits().await.unwrap();
    assert_eq!(
        (limits.rate_limit_blocks, limits.last_update, limits.commit_reveal_enabled, limits.version_key),
        (100, Some(4_950), false, 9)
    );

    // Three commitments back to back, in one block: 1, 2 and 3 fields, on nonces 0, 1, 2
    // (system_accountNextIndex counts the pool; the runtime API still says 0).
    let new = LedgerCommitment {
        tip_hash: Hash32([0x11; 32]),
        ledger_key: ValidatorKey([0x22; 32]),
        tip_height: 5,
        protocol: None,
    };
    let one_field = br#"{"model":"a/b","revision":"0123456789abcdef0123456789abcdef01234567"}"#.to_vec();
    let sends: [Vec<Vec<u8>>; 3] = [miner_fields.clone(), new.fields(), vec![one_field.clone()]];
    for (i, fields) in sends.iter().enumerate() {
        client.commit_fields(fields).await.unwrap();
        let sent = last_accepted(&node);
        let decoded = sent.decoded.clone().unwrap();
        assert_eq!((decoded.signer, decoded.nonce, decoded.call.as_str()), (ours, i as u64, "set_commitment"));
        let (length, prefix) = compact_u32(&sent.bytes);
        assert_eq!((sent.bytes.len() - prefix, sent.bytes[prefix]), (length as usize, 0x84), "signed, version 4");
        let mut expected_call = vec![0x12, 0x00, 0x07, 0x00, (fields.len() as u8) << 2];
        for field in fields {
            expected_call.push(field.len() as u8 + 1);
            expected_call.extend_from_slice(field);
        }
        assert!(sent.bytes.ends_with(&expected_call), "set_commitment(7, {} Raw fields)", fields.len());
        capture(&serde_json::json!({ "netuid": NETUID, "info": data_intent(fields) }));
    }
    assert!(node.submissions().iter().all(|s| s.pool.is_ok()), "the pool took all three");
    node.produce_block();
    assert!(node.submissions().iter().all(|s| matches!(s.dispatch, Some((_, Ok(()))))), "a block applied all three");
    let mine = client.commitments().await.unwrap().into_iter().find(|c| c.hotkey == subtensor::ss58(&ours)).unwrap();
    assert_eq!((mine.block, mine.fields), (BEST_BLOCK + 1, vec![one_field]), "the last one is ours now");

    // The same bytes again, from elsewhere: the pool says 1013, and its words read as a
    // taken nonce. What a second sender on our nonce gets (1014) reads the same way.
    let rpc = subxt::rpcs::RpcClient::from_insecure_url(&url).await.unwrap();
    let stale = node.submissions()[0].bytes.clone();
    let error = rpc
        .request::<String>("author_submitExtrinsic", subxt::rpcs::rpc_params![subtensor_node::hex0x(&stale)])
        .await
        .unwrap_err();
    let error = format!("{error} {error:?}");
    assert!(matches!(subtensor::pool_refusal(&error), Some(PoolRefusal::NonceTaken(_))), "{error}");

    // serve_axon: the address other validators dial; 127.0.0.1 is refused before sending.
    client.serve_axon("10.1.2.3".parse().unwrap(), 4001).await.unwrap();
    let sent = last_accepted(&node);
    let mut expected_axon = vec![0x07, 0x00, 0x01, 0x00, 0x00, 0x00];
    expected_axon.extend_from_slice(&0x0a01_0203u128.to_le_bytes());
    expected_axon.extend_from_slice(&[0xa1, 0x0f, 4, 0, 0, 0]);
    assert!(sent.bytes.ends_with(&expected_axon), "serve_axon(7, 1, 10.1.2.3, 4001, ipv4, tcp) call bytes");
    capture(
        &serde_json::json!({ "netuid": NETUID, "version": 1, "ip": "167838211", "port": 4001, "ip_type": 4, "protocol": 0, "placeholder1": 0, "placeholder2": 0 }),
    );
    let n_sent = node.submissions().len();
    for (ip, port) in [("127.0.0.1", 4001), ("::1", 4001), ("255.255.255.255", 4001), ("10.0.0.1", 0)] {
        let error = client.serve_axon(ip.parse().unwrap(), port).await.unwrap_err().to_string();
        let name = if port == 0 { "InvalidPort" } else { "InvalidIpAddress" };
        assert!(error.contains(name), "{ip}:{port}: {error}");
    }
    assert_eq!(node.submissions().len(), n_sent, "nothing was sent");
    // Once a block holds it, a new address within the serving rate limit is refused by
    // the pool, and the refusal is named.
    node.produce_block();
    let error = client.serve_axon("10.1.2.4".parse().unwrap(), 4001).await.unwrap_err();
    assert!(error.to_string().contains("ServingRateLimitExceeded"), "{error}");

    // Weights: the rate limit is enforced before anything is sent (4950 + 100 > 5001)...
    let n_sent = node.submissions().len();
    let error = client.set_weights(&[2], &[65535], 0).await.unwrap_err();
    assert!(matches!(error, ChainError::RateLimited { last: 4_950, limit: 100, next: 5_050 }), "{error}");
    assert_eq!(node.submissions().len(), n_sent, "nothing was sent");
    last_updated_at(4_000);
    client.set_weights(&[2], &[65535], 0).await.unwrap();
    let sent = last_accepted(&node);
    let mut expected_call = vec![0x07, 0x00, 0x07, 0x00, 0x04, 0x02, 0x00, 0x04, 0xff, 0xff];
    expected_call.extend_from_slice(&9u64.to_le_bytes());
    assert!(sent.bytes.ends_with(&expected_call), "set_weights call bytes");
    capture(&serde_json::json!({ "netuid": NETUID, "dests": [2], "weights": [65535], "version_key": 9 }));
    node.produce_block();
    let weights = client.weights().await.unwrap();
    assert_eq!(weights, vec![(1, vec![(2, 65535)])], "the block applied our weights");

    // Commit-reveal on: set_weights is refused with the setting named, nothing sent.
    node.put("SubtensorModule", "CommitRevealWeightsEnabled", &subnet_key(), Value::bool(true));
    last_updated_at(4_000);
    let n_sent = node.submissions().len();
    let error = client.set_weights(&[2], &[65535], 0).await.unwrap_err();
    assert!(error.to_string().contains("CommitRevealWeightsEnabled"), "{error}");
    assert_eq!(node.submissions().len(), n_sent);
    // The one weights path commits them timelocked instead.
    let memory = af::chain::weights::SentWeights::default();
    let sent = af::chain::weights::send_weights(&client, &memory, &[2], &[65535], 1_800_000_000_000).await.unwrap();
    let af::chain::weights::WeightsSent::Committed { plan, ciphertext_hash, .. } = sent else { panic!("{sent:?}") };
    let submission = last_accepted(&node);
    let decoded = submission.decoded.clone().unwrap();
    assert_eq!(decoded.call, "commit_timelocked_mechanism_weights");
    let ciphertext = bytes(decoded.arg("commit"));
    assert_eq!(blake3::hash(&ciphertext).as_bytes(), &ciphertext_hash.0);
    assert_eq!(number(decoded.arg("reveal_round")) as u64, plan.reveal_round);
    assert!(plan.reveal_round > 1_000, "a quicknet round of 2027: {}", plan.reveal_round);
    assert!(af::chain::tlock::decrypt(&ciphertext, &[0u8; 48]).is_err(), "a wrong key never opens it");
    let commit_intent = |mecid: bool| {
        let mut args = serde_json::json!({ "netuid": NETUID, "commit": subtensor_node::hex0x(&ciphertext), "reveal_round": plan.reveal_round, "commit_reveal_version": 4 });
        if mecid {
            args["mecid"] = serde_json::json!(0);
        }
        args
    };
    capture(&commit_intent(true));
    node.produce_block();
    assert!(matches!(last_accepted(&node).dispatch, Some((_, Ok(())))), "{:?}", last_accepted(&node).dispatch);
    let pending = client.timelocked().await.unwrap().pending;
    assert_eq!(pending.len(), 1, "our commit waits on chain: {pending:?}");
    assert_eq!(pending[0].ciphertext_hash, ciphertext_hash);
    // Never twice for one epoch: within the rate limit our own send counts, and with no
    // rate limit at all our commit waiting for its reveal does, in this process and, from
    // the chain's TimelockedWeightCommits, in a restarted one.
    let n_sent = node.submissions().len();
    let again =
        af::chain::weights::send_weights(&client, &memory, &[2], &[65535], 1_800_000_000_000).await.unwrap_err();
    assert!(matches!(again, ChainError::RateLimited { .. }), "{again}");
    node.put("SubtensorModule", "WeightsSetRateLimit", &subnet_key(), Value::u128(0));
    let again =
        af::chain::weights::send_weights(&client, &memory, &[2], &[65535], 1_800_000_000_000).await.unwrap_err();
    assert!(matches!(again, ChainError::Unchanged { .. }), "the same weights wait an epoch: {again}");
    let again =
        af::chain::weights::send_weights(&client, &memory, &[3], &[65535], 1_800_000_000_000).await.unwrap_err();
    assert!(matches!(again, ChainError::CommitPending { .. }), "{again}");
    let restarted = af::chain::weights::SentWeights::default();
    let again =
        af::chain::weights::send_weights(&client, &restarted, &[2], &[65535], 1_800_000_000_000).await.unwrap_err();
    assert!(matches!(again, ChainError::CommitPending { .. }) && again.is_wait(), "{again}");
    assert_eq!(node.submissions().len(), n_sent, "nothing was sent");
    // The older call without a mechanism id, as chains before mechanisms take it.
    last_updated_at(4_000);
    let legacy = subtensor::commit_timelocked_payload_named(
        "commit_timelocked_weights",
        NETUID,
        &ciphertext,
        plan.reveal_round,
        4,
    );
    client.submit(legacy).await.unwrap();
    assert_eq!(last_accepted(&node).decoded.unwrap().call, "commit_timelocked_weights");
    capture(&commit_intent(false));
    let asked = node.asked.lock().unwrap().clone();
    assert!(asked.iter().any(|m| m == "system_accountNextIndex"), "nonces come from the pool-aware RPC");
}

/// A node whose nonce answer lags (as a load-balanced RPC endpoint's may): our second
/// send lands on a nonce the pool holds, is refused with 1014, and goes again after the
/// next block on a fresh nonce; nothing is lost and no nonce is used twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_refused_for_a_taken_nonce_goes_again_after_a_block_on_a_fresh_one() {
    let Some((node, url)) = strict_node(Some(400)).await else { return };
    let keypair = seed_keypair(&"5b".repeat(32));
    let ours = keypair.public_key();
    node.register(NETUID, 0, ours, 1);
    node.lag_next_index(true);
    let client = SubtensorClient::connect(&url, NETUID, Some(keypair)).await.unwrap();
    client.commit_fields(&[vec![1; 8]]).await.unwrap();
    client.commit_fields(&[vec![2; 8]]).await.unwrap();
    let submissions = node.submissions();
    let refused: Vec<&Submission> = submissions.iter().filter(|s| s.pool.is_err()).collect();
    assert_eq!(refused.len(), 1, "{submissions:#?}");
    assert!(refused[0].pool.as_ref().unwrap_err().contains("1014"), "{:?}", refused[0].pool);
    let accepted = node.accepted();
    assert_eq!(accepted.iter().map(|d| d.nonce).collect::<Vec<_>>(), [0, 1], "fresh nonce after the block");
    tokio::time::sleep(std::time::Duration::from_millis(900)).await;
    let records = client.commitments().await.unwrap();
    assert_eq!(records[0].fields, vec![vec![2; 8]], "both landed, in order");
}

/// `af validate --serve` against the strict node as a real subnet has it (a block every
/// 300 ms, weights every 5 blocks): it publishes its axon, commits its tip and sets
/// weights after its match and again while serving, and every extrinsic it sends is
/// accepted by the pool and applied by a block: no nonce used twice, no weights twice
/// within the rate limit. Then the same with commit-reveal on: one timelocked commit per
/// epoch at most.
#[test]
fn a_serving_validator_sends_each_extrinsic_once_and_the_strict_node_accepts_every_one() {
    for commit_reveal in [false, true] {
        serve_against_the_strict_node(commit_reveal);
    }
}

/// Two miners (`account(base)`, `account(base + 1)`) and `validator` registered, weights
/// every 5 blocks, a 20-block tempo, commit-reveal as asked.
fn small_subnet(node: &Node, base: u8, validator: [u8; 32], commit_reveal: bool) {
    node.register(NETUID, 0, account(base), 10);
    node.register(NETUID, 1, account(base + 1), 20);
    node.register(NETUID, 2, validator, 30);
    node.put("SubtensorModule", "CommitRevealWeightsEnabled", &subnet_key(), Value::bool(commit_reveal));
    node.put("SubtensorModule", "WeightsSetRateLimit", &subnet_key(), Value::u128(5));
    node.put("SubtensorModule", "Tempo", &subnet_key(), Value::u128(20));
}

type LogLines = Arc<std::sync::Mutex<Vec<String>>>;

/// `af validate --serve` in `dir` against the strict node at `url`, signing as `uri`,
/// playing the two `miners` (account, URL) from its config, listening on 127.0.0.2 and
/// serving its HTTP API on a free loopback port; its log lines collected as they come.
fn serve_on_strict_node(
    dir: &std::path::Path,
    url: &str,
    uri: &str,
    miners: [([u8; 32], &str); 2],
) -> (std::process::Child, LogLines, std::thread::JoinHandle<()>) {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let config = dir.join("v.toml");
    let mut text = String::from(
        "[evaluation]\nwindow = 8\n[ledger]\nblock_max_ms = 200\n\
         [client]\ntimeout_ms = 2000\nmax_attempts = 2\nbackoff_base_ms = 10\nbackoff_max_ms = 50\n",
    );
    for (uid, (who, url)) in miners.into_iter().enumerate() {
        let hotkey = subtensor::ss58(&who);
        text += &format!("\n[[miners]]\nhotkey = \"{hotkey}\"\nuid = {uid}\nbase_url = \"{url}\"\nmodel = \"m\"\n");
    }
    std::fs::write(&config, text).unwrap();
    let data = dir.join("v");
    let mut process = Command::new(crate::af_bin())
        .args(["validate", "--data", data.to_str().unwrap(), "--config", config.to_str().unwrap(), "--serve"])
        .args(["--chain", &format!("subtensor:{url}"), "--netuid", &NETUID.to_string()])
        .args(["--listen", "/ip4/127.0.0.2/tcp/0"])
        .args(["--http", &format!("127.0.0.1:{}", crate::free_port())])
        .env("AF_HOTKEY_PHRASE", uri)
        .env("RUST_LOG", "warn,af=info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines: LogLines = Arc::default();
    let reader = {
        let (lines, stderr) = (lines.clone(), process.stderr.take().unwrap());
        std::thread::spawn(move || {
            BufReader::new(stderr).lines().map_while(Result::ok).for_each(|l| lines.lock().unwrap().push(l))
        })
    };
    (process, lines, reader)
}

fn serve_against_the_strict_node(commit_reveal: bool) {
    use crate::validator_cli::miner;

    use std::process::Command;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let Some((node, url)) = runtime.block_on(strict_node(Some(300))) else { return };
    let uri = "//AfServeCheck";
    let validator = subxt_signer::sr25519::Keypair::from_uri(&uri.parse().unwrap()).unwrap().public_key().0;
    let (champion, contender) = (miner("random"), miner("perfect"));
    small_subnet(&node, 40, validator, commit_reveal);
    let dir = tempfile::tempdir().unwrap();
    let miners = [(account(40), champion.1.as_str()), (account(41), contender.1.as_str())];
    let (mut process, lines, reader) = serve_on_strict_node(dir.path(), &url, uri, miners);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !lines.lock().unwrap().iter().any(|l| l.contains("\"event\":\"serving\"")) {
        assert!(std::time::Instant::now() < deadline, "no serving line:\n{}", lines.lock().unwrap().join("\n"));
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // Serving for about 30 blocks: the same weights go again once an epoch (20 blocks).
    std::thread::sleep(std::time::Duration::from_secs(9));
    assert!(Command::new("kill").args(["-TERM", &process.id().to_string()]).status().unwrap().success());
    assert_eq!(process.wait().unwrap().code(), Some(130), "{}", lines.lock().unwrap().join("\n"));
    reader.join().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700)); // the last sends into a block
    let log = lines.lock().unwrap().join("\n");
    let submissions = node.submissions();
    let ours: Vec<&Submission> =
        submissions.iter().filter(|s| s.decoded.as_ref().is_some_and(|d| d.signer == validator)).collect();
    for s in &ours {
        let d = s.decoded.as_ref().unwrap();
        assert!(s.pool.is_ok(), "the pool refused {}.{} at block {}: {:?}\n{log}", d.pallet, d.call, s.block, s.pool);
        assert!(
            matches!(s.dispatch, Some((_, Ok(())))),
            "{}.{} (nonce {}) was not applied: {:?}",
            d.pallet,
            d.call,
            d.nonce,
            s.dispatch
        );
    }
    let nonces: Vec<u64> = ours.iter().map(|s| s.decoded.as_ref().unwrap().nonce).collect();
    assert_eq!(nonces, (0..ours.len() as u64).collect::<Vec<_>>(), "one nonce each, in order");
    let calls = |name: &str| ours.iter().filter(|s| s.decoded.as_ref().unwrap().call == name).count();
    let weights_call = if commit_reveal { "commit_timelocked_mechanism_weights" } else { "set_weights" };
    assert_eq!(calls("serve_axon"), 1, "the axon once: {log}");
    assert!(calls("set_commitment") >= 1 && calls(weights_call) >= 1, "{nonces:?}\n{log}");
    // Weights blocks at least the rate limit apart (never two for one decision).
    let weights_blocks: Vec<u64> = ours
        .iter()
        .filter(|s| s.decoded.as_ref().unwrap().call == weights_call)
        .map(|s| s.dispatch.as_ref().unwrap().0)
        .collect();
    assert!(weights_blocks.windows(2).all(|w| w[1] >= w[0] + 5), "{weights_blocks:?}");
    if commit_reveal {
        // Tempo 20: one commit per epoch at most.
        let epochs: Vec<u64> = weights_blocks.iter().map(|b| (b + u64::from(NETUID) + 1) / 21).collect();
        assert!(epochs.windows(2).all(|w| w[0] != w[1]), "{weights_blocks:?}");
    } else {
        assert!(calls(weights_call) >= 2, "weights again while serving: {weights_blocks:?}");
        // The champion never changed: its weights repeat once an epoch, not at every
        // block the rate limit allows.
        assert!(weights_blocks.windows(2).all(|w| w[1] >= w[0] + 20), "{weights_blocks:?}");
    }
    let axon = ours.iter().find(|s| s.decoded.as_ref().unwrap().call == "serve_axon").unwrap();
    assert_eq!(number(axon.decoded.as_ref().unwrap().arg("ip")), 0x7f00_0002, "127.0.0.2 published");
    if !commit_reveal {
        restarted_on_a_new_port_within_the_serving_rate_limit(&node, dir.path(), &url, uri, miners, validator);
    }
    eprintln!(
        "strict node, commit-reveal {commit_reveal}: {} extrinsics sent, {} accepted, {} applied ({} set_commitment, {} {weights_call}, 1 serve_axon)",
        ours.len(),
        ours.iter().filter(|s| s.pool.is_ok()).count(),
        ours.iter().filter(|s| matches!(s.dispatch, Some((_, Ok(()))))).count(),
        calls("set_commitment"),
        calls(weights_call)
    );
}

/// Issue 74, item 8: the validator restarts at once on a new p2p port (`tcp/0`), inside
/// subtensor's serving rate limit of its last `serve_axon`. It says it waits and sends the
/// new address when the limit allows, never into the pool's refusal (Custom error 12).
fn restarted_on_a_new_port_within_the_serving_rate_limit(
    node: &Node,
    dir: &std::path::Path,
    url: &str,
    uri: &str,
    miners: [([u8; 32], &str); 2],
    validator: [u8; 32],
) {
    let axons = || {
        node.submissions()
            .into_iter()
            .filter(|s| s.decoded.as_ref().is_some_and(|d| d.signer == validator && d.call == "serve_axon"))
            .collect::<Vec<_>>()
    };
    let (mut process, lines, reader) = serve_on_strict_node(dir, url, uri, miners);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(45);
    while !axons().iter().any(|s| matches!(s.dispatch, Some((_, Ok(())))) && s.block > axons()[0].block) {
        assert!(std::time::Instant::now() < deadline, "no second axon applied:\n{}", lines.lock().unwrap().join("\n"));
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(std::process::Command::new("kill").args(["-TERM", &process.id().to_string()]).status().unwrap().success());
    process.wait().unwrap();
    reader.join().unwrap();
    let log = lines.lock().unwrap().join("\n");
    assert!(log.contains("\"event\":\"axon_waits\""), "the wait is said: {log}");
    let sent = axons();
    assert_eq!(
        sent.len(),
        2,
        "one axon per address, none refused: {:?}",
        sent.iter().map(|s| (&s.pool, s.block)).collect::<Vec<_>>()
    );
    assert!(sent.iter().all(|s| s.pool.is_ok()), "{:?}", sent.iter().map(|s| &s.pool).collect::<Vec<_>>());
    assert!(sent[1].block >= sent[0].block + subtensor_node::SERVING_RATE_LIMIT, "sent when the limit allows");
    eprintln!("case-row | a restart on a new p2p port inside the serving rate limit | waited, then the axon sent {} blocks after the first, none refused |", sent[1].block - sent[0].block);
}

/// Reads until the node answers again; how long it took.
async fn until_answered(client: &SubtensorClient, within: std::time::Duration) -> std::time::Duration {
    let started = std::time::Instant::now();
    loop {
        if client.current_block().await.is_ok() && client.neurons().await.is_ok() {
            return started.elapsed();
        }
        assert!(started.elapsed() < within, "no answer within {within:?} of the node coming back");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_reconnects_by_itself_after_an_oversized_reply_and_after_the_node_restarts() {
    let Some(metadata) = finney_metadata() else { return };
    let node = Node::new(metadata, BEST_BLOCK);
    node.register(NETUID, 0, account(1), 10);
    let (url, handle) = subtensor_node::serve(node.clone(), "127.0.0.1:0").await;
    let client = SubtensorClient::connect(&url, NETUID, None).await.unwrap();
    assert_eq!(client.current_block().await.unwrap(), BEST_BLOCK);
    assert_eq!(client.neurons().await.unwrap().len(), 1);

    // A reply over the client's limit (hex doubles the bytes) closes its connection, not
    // the client: the read is made again on a new one, or fails as a transport failure.
    node.oversize_next_answer(subtensor::MAX_RPC_REPLY_BYTES as usize);
    let asked_before = node.asked.lock().unwrap().len();
    let read = client.neurons().await;
    assert!(matches!(read, Ok(_) | Err(ChainError::Transport { .. })), "{read:?}");
    assert!(node.oversize_next.load(std::sync::atomic::Ordering::SeqCst) == 0, "the oversized answer was sent");
    assert!(node.asked.lock().unwrap().len() > asked_before);
    let took = until_answered(&client, std::time::Duration::from_secs(30)).await;
    assert!(took < std::time::Duration::from_secs(10), "answered again after {took:?}");

    // The node stops, and comes back at the same address: the client finds it again
    // without being made anew.
    let address = url.trim_start_matches("ws://").to_string();
    handle.stop().unwrap();
    handle.stopped().await;
    let asked_before = node.asked.lock().unwrap().len();
    // A read while the node is away fails in bounded time, as a transport failure.
    let down = tokio::time::timeout(std::time::Duration::from_secs(20), client.current_block()).await;
    assert!(matches!(down, Ok(Err(ChainError::Transport { .. }))), "{down:?}");
    let (_, _handle) = subtensor_node::serve(node.clone(), &address).await;
    let took = until_answered(&client, std::time::Duration::from_secs(30)).await;
    assert!(took < std::time::Duration::from_secs(10), "answered again {took:?} after the node came back");
    assert!(node.asked.lock().unwrap().len() > asked_before, "the answers came from the node restarted");
    assert_eq!(client.neurons().await.unwrap()[0].uid, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metagraph_of_256_uids_is_read_in_a_few_calls_not_two_per_uid() {
    let Some((node, url)) = strict_node(None).await else { return };
    let n: u16 = 256;
    for uid in 0..n {
        let mut who = [0u8; 32];
        who[..2].copy_from_slice(&uid.to_le_bytes());
        who[2] = 0xa5;
        node.register(NETUID, uid, who, 10 + u64::from(uid));
        if uid % 2 == 0 {
            let keys = [Value::u128(u128::from(NETUID)), Value::from_bytes(who)];
            node.put("Commitments", "CommitmentOf", &keys, registration(20, vec![raw(&[uid as u8; 8])]));
        }
    }
    let client = SubtensorClient::connect(&url, NETUID, None).await.unwrap();
    let asked = || node.asked.lock().unwrap().len();
    let counted = |before: usize| asked() - before;

    let before = asked();
    let neurons = client.neurons().await.unwrap();
    let for_neurons = counted(before);
    assert_eq!(neurons.len(), usize::from(n));
    assert!(neurons.iter().enumerate().all(|(i, x)| x.uid as usize == i && x.registration_block == 10 + i as u64));

    let before = asked();
    let records = client.commitments().await.unwrap();
    let for_commitments = counted(before);
    assert_eq!(records.len(), usize::from(n) / 2);
    assert!(records.iter().all(|r| r.fields.len() == 1 && r.fields[0].len() == 8), "{:?}", &records[..1]);

    let before = asked();
    client.weight_limits().await.unwrap();
    let for_limits = counted(before);
    // Two per uid was 514 and 770; the issue's bound is 10 each.
    assert!(for_neurons < 10, "af chain neurons on {n} uids: {for_neurons} requests");
    assert!(for_commitments < 10, "af chain commitments on {n} uids: {for_commitments} requests");
    assert!(for_limits < 6, "the weight limits, read every anchoring tick: {for_limits} requests");

    // A validator's client learns from the same one call whether its hotkey holds a uid.
    let mut ours = [0u8; 32];
    ours[..2].copy_from_slice(&7u16.to_le_bytes());
    ours[2] = 0xa5;
    let signer = seed_keypair(&"11".repeat(32));
    let mine = SubtensorClient::connect(&url, NETUID, Some(signer.clone())).await.unwrap();
    assert_eq!(mine.weight_limits().await.unwrap().registered, Some(false), "not registered yet");
    node.register(NETUID, 7, signer.public_key(), 30);
    assert_eq!(mine.weight_limits().await.unwrap().registered, Some(true));
    node.register(NETUID, 7, ours, 40);
    assert_eq!(mine.weight_limits().await.unwrap().registered, Some(false), "its uid went to another hotkey");
    assert_eq!(client.weight_limits().await.unwrap().registered, None, "no hotkey, nothing to say");
    eprintln!("requests on {n} uids: neurons {for_neurons}, commitments {for_commitments}, weight limits {for_limits}");
}

/// A process that restarts while a send of its own still waits in the pool sees it there,
/// and sends no weights until a block takes it: no second commit of the same weights.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_still_in_the_pool_after_a_restart_holds_back_the_next_one() {
    let Some((node, url)) = strict_node(None).await else { return };
    let keypair = seed_keypair(&"5c".repeat(32));
    node.register(NETUID, 0, keypair.public_key(), 1);
    node.register(NETUID, 1, account(9), 2);
    node.put("SubtensorModule", "WeightsSetRateLimit", &subnet_key(), Value::u128(0));
    node.put("SubtensorModule", "CommitRevealWeightsEnabled", &subnet_key(), Value::bool(false));
    let before = SubtensorClient::connect(&url, NETUID, Some(keypair.clone())).await.unwrap();
    assert_eq!(before.weight_limits().await.unwrap().in_pool, 0);
    before.set_weights(&[1], &[u16::MAX], 0).await.unwrap();
    drop(before);

    // "After the restart": a new client, with no memory of what it sent.
    let after = SubtensorClient::connect(&url, NETUID, Some(keypair)).await.unwrap();
    assert_eq!(after.weight_limits().await.unwrap().in_pool, 1, "our set_weights waits in the pool");
    let held = after.set_weights(&[1], &[u16::MAX], 0).await;
    assert!(matches!(held, Err(ChainError::InPool { n: 1 })), "{held:?}");
    assert_eq!(node.accepted().len(), 1, "nothing more was sent");
    node.produce_block();
    assert_eq!(after.weight_limits().await.unwrap().in_pool, 0, "a block took it");
    after.set_weights(&[1], &[u16::MAX], 0).await.unwrap();
    assert_eq!(node.accepted().len(), 2);
}

/// A value larger than its entry can hold on subtensor is refused by name before it is
/// decoded (a lying node must not size our memory), and the next read goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_over_what_its_entry_holds_is_refused_by_name_before_decoding() {
    let Some((node, url)) = strict_node(None).await else { return };
    node.register(NETUID, 0, account(3), 1);
    let client = SubtensorClient::connect(&url, NETUID, None).await.unwrap();
    // 4 MiB: under the reply limit (8 MiB as hex), far over a subnet's size.
    node.oversize_next_answer(4 << 20);
    let refused = client.neurons().await;
    match refused {
        Err(ChainError::Decode { what, message }) => {
            assert_eq!(what, "SubnetworkN");
            assert!(message.contains("4194304 bytes, over the 4096"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(client.neurons().await.unwrap().len(), 1);
}

/// `af chain commitments` and `af mine status` say a commitment of a field that holds no
/// bytes is unreadable, naming the field and its variant (ledger-spec/13).
#[test]
fn commands_name_an_unreadable_commitment_by_its_field_and_variant() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let Some((node, url)) = runtime.block_on(strict_node(None)) else { return };
    let keypair = seed_keypair(&"5d".repeat(32));
    let who = keypair.public_key();
    node.register(NETUID, 0, who, 10);
    let keys = [Value::u128(u128::from(NETUID)), Value::from_bytes(who)];
    node.put("Commitments", "CommitmentOf", &keys, registration(20, vec![raw(&[1; 4]), sample("Sha256").0]));
    let chain = ["--chain".to_string(), format!("subtensor:{url}"), "--netuid".into(), NETUID.to_string()];
    let out = crate::af(
        &[&["chain", "commitments"][..], &chain.iter().map(String::as_str).collect::<Vec<_>>(), &["--json"]].concat(),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let reason = rows[0]["unreadable"].as_str().unwrap_or_default();
    assert!(reason.contains("field 2 of 2 is Sha256"), "{rows}");
    let text =
        crate::af(&[&["chain", "commitments"][..], &chain.iter().map(String::as_str).collect::<Vec<_>>()].concat());
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("unreadable: field 2 of 2 is Sha256"), "{text}");
    assert!(!text.contains("0 field(s)"), "{text}");
}

/// The strict node restarts under a serving validator: it says so once, finds the node
/// again by itself when it is back at its address, says that once, and goes on anchoring
/// (a new commitment of its tip lands after the restart).
#[test]
fn a_serving_validator_rides_out_a_node_restart() {
    use crate::validator_cli::miner;

    use std::process::Command;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let Some(metadata) = finney_metadata() else { return };
    let node = Node::new(metadata, BEST_BLOCK);
    let (url, handle) = runtime.block_on(subtensor_node::serve(node.clone(), "127.0.0.1:0"));
    let blocks = {
        let node = node.clone();
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                node.produce_block();
            }
        })
    };
    let uri = "//AfRestartCheck";
    let validator = subxt_signer::sr25519::Keypair::from_uri(&uri.parse().unwrap()).unwrap().public_key().0;
    let (champion, contender) = (miner("random"), miner("perfect"));
    small_subnet(&node, 50, validator, false);
    let dir = tempfile::tempdir().unwrap();
    let miners = [(account(50), champion.1.as_str()), (account(51), contender.1.as_str())];
    let (mut process, lines, reader) = serve_on_strict_node(dir.path(), &url, uri, miners);
    let count =
        |event: &str| lines.lock().unwrap().iter().filter(|l| l.contains(&format!("\"event\":\"{event}\""))).count();
    let wait = |what: &str, seconds: u64, done: &dyn Fn() -> bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
        while !done() {
            if std::time::Instant::now() >= deadline {
                let sent: Vec<String> = node
                    .submissions()
                    .iter()
                    .map(|s| {
                        format!("{:?} {:?} {:?}", s.decoded.as_ref().map(|d| (&d.call, d.nonce)), s.pool, s.dispatch)
                    })
                    .collect();
                panic!("waited for {what}:\n{}\nsent: {sent:#?}", lines.lock().unwrap().join("\n"));
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    };
    let ours = || {
        node.submissions()
            .iter()
            .filter(|s| {
                s.decoded.as_ref().is_some_and(|d| d.signer == validator) && matches!(s.dispatch, Some((_, Ok(()))))
            })
            .count()
    };
    wait("serving after weights", 60, &|| count("serving") >= 1 && count("weights_set") >= 1);

    let went_down = std::time::Instant::now();
    handle.stop().unwrap();
    runtime.block_on(handle.stopped());
    wait("the outage said", 30, &|| count("chain_unreachable") == 1);
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(count("chain_unreachable"), 1, "said once, not at every tick");
    let address = url.trim_start_matches("ws://").to_string();
    let back = std::time::Instant::now();
    let (_, _handle) = runtime.block_on(subtensor_node::serve(node.clone(), &address));
    wait("the chain back", 30, &|| count("chain_reachable") == 1);
    let took = back.elapsed();
    // The outage's length is counted from the last answer, not from the first failed
    // read some seconds after the node went down (issue 74: 62.6 s logged as 54.6 s).
    let down = back.duration_since(went_down).as_secs_f64();
    let said: f64 = lines
        .lock()
        .unwrap()
        .iter()
        .find(|l| l.contains("\"event\":\"chain_reachable\""))
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .and_then(|l| l["down_s"].as_f64())
        .unwrap();
    assert!(said >= down - 0.5, "an outage of {down:.1} s said as {said:.1} s");
    // Every other failing read is said once per outage too.
    for event in ["chain_peers_failed", "discovery_failed", "axon_failed"] {
        assert!(count(event) <= 1, "{event} said {} times in one outage", count(event));
    }
    // It anchors again once the chain is back: its log moved (weights recorded), so a
    // commitment of its tip, and the same weights again after an epoch (20 blocks).
    let applied_before = ours();
    wait("a send applied after the restart", 60, &|| ours() > applied_before);
    eprintln!("node restart: the validator read the chain again {took:?} after it came back");
    eprintln!("case-row | the chain node down {down:.1} s, then back | said once each ({said:.1} s down), read again {:.1} s after |", took.as_secs_f64());
    assert!(took < std::time::Duration::from_secs(30), "{took:?}");

    // Issue 74, item 4: the node now answers each request in 1.5 to 5 s. Within 60 s the
    // validator either still gets a send applied, or its `/healthz` is 503 and says why:
    // never 200 while it cannot work.
    node.reply_delay_ms.store(1_500, std::sync::atomic::Ordering::SeqCst);
    node.reply_delay_max_ms.store(5_000, std::sync::atomic::Ordering::SeqCst);
    let http_port: u16 = lines
        .lock()
        .unwrap()
        .iter()
        .find_map(|l| {
            let line: serde_json::Value = serde_json::from_str(l).ok()?;
            let url = line["url"].as_str().filter(|_| line["event"] == "http")?;
            url.trim_end_matches('/').rsplit(':').next()?.parse().ok()
        })
        .expect("the HTTP API's address is said");
    let (applied_slow, slow_from) = (ours(), std::time::Instant::now());
    let mut outcome = None;
    while outcome.is_none() && slow_from.elapsed() < std::time::Duration::from_secs(75) {
        if ours() > applied_slow {
            outcome = Some(format!("a send applied {:?} into the slow stretch", slow_from.elapsed()));
        } else if let (503, body) = crate::http_get(http_port, "/healthz") {
            outcome = Some(format!("/healthz 503 {:?} into the slow stretch: {body}", slow_from.elapsed()));
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    let outcome = outcome.unwrap_or_else(|| {
        let log = lines.lock().unwrap();
        panic!(
            "a 1.5-5 s node: no send applied and /healthz not 503 in 75 s: {:?}\nsent {:?}\nasked {:?}\n{}",
            crate::http_get(http_port, "/healthz"),
            node.submissions()
                .iter()
                .rev()
                .take(4)
                .map(|s| (s.decoded.as_ref().map(|d| (&d.call, d.nonce)), &s.pool, &s.dispatch, s.block))
                .collect::<Vec<_>>(),
            {
                let asked = node.asked.lock().unwrap();
                asked[asked.len().saturating_sub(60)..].to_vec()
            },
            log[log.len().saturating_sub(25)..].join("\n")
        )
    });
    eprintln!("slow node: {outcome}");
    eprintln!(
        "case-row | a chain node answering each request in 1.5 to 5 s, serving validator | {} |",
        outcome.split(':').next().unwrap_or_default()
    );
    assert!(Command::new("kill").args(["-TERM", &process.id().to_string()]).status().unwrap().success());
    assert_eq!(process.wait().unwrap().code(), Some(130));
    reader.join().unwrap();
    blocks.abort();
}

/// Issue 74, items 6 and 7: a node that lies about the subnet's size, or serves one
/// commitment that is too large or does not decode. The size is refused by name, before
/// any uid is read; each bad commitment is listed as unreadable, with why, and the others
/// are read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lying_subnet_size_is_refused_and_one_bad_commitment_spoils_only_itself() {
    let Some((node, url)) = strict_node(None).await else { return };
    for uid in 0..3u16 {
        node.register(NETUID, uid, account(50 + uid as u8), 10);
    }
    let keys = |uid: u16| [Value::u128(u128::from(NETUID)), Value::from_bytes(account(50 + uid as u8))];
    node.put("Commitments", "CommitmentOf", &keys(0), registration(20, vec![raw(&[7; 16])]));
    // 4 MB of bytes where a commitment holds at most three fields of 128.
    node.put_raw("Commitments", "CommitmentOf", &keys(1), vec![0x55; 4 << 20]);
    // A field list that claims 2^30 items.
    node.put_raw("Commitments", "CommitmentOf", &keys(2), vec![0x14, 0, 0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0, 0x10]);
    let client = SubtensorClient::connect(&url, NETUID, None).await.unwrap();
    let records = client.commitments().await.unwrap();
    assert_eq!(records.len(), 3, "{records:?}");
    let of = |uid: u16| records.iter().find(|r| r.hotkey == subtensor::ss58(&account(50 + uid as u8))).unwrap();
    assert_eq!((&of(0).fields, &of(0).unreadable), (&vec![vec![7u8; 16]], &None));
    let big = of(1).unreadable.as_deref().unwrap();
    assert!(big.contains("CommitmentOf") && big.contains("4194304 bytes"), "{big}");
    assert!(of(2).unreadable.as_deref().is_some_and(|why| why.contains("CommitmentOf")), "{:?}", of(2));

    node.put("SubtensorModule", "SubnetworkN", &subnet_key(), Value::u128(65_535));
    let refused = client.neurons().await.unwrap_err().to_string();
    assert!(refused.contains("SubnetworkN") && refused.contains("65535 uids"), "{refused}");
    eprintln!("case-row | a lying SubnetworkN of 65,535; a 4 MiB and a malformed commitment | the size refused by name; 2 commitments unreadable with why, 1 read |");
}

/// Issue 74, item 4: a node that answers each request in seconds (public RPC endpoints
/// under load). Each request has its deadline, not a chain of them: the head (one
/// request) and the neurons (the block, then the values) still read at 2.5 s an answer,
/// where one 10 s limit for subxt's five requests for the block was never met.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_answers_in_seconds_is_still_read() {
    let Some((node, url)) = strict_node(None).await else { return };
    for uid in 0..3u16 {
        node.register(NETUID, uid, account(60 + uid as u8), 10);
    }
    let client = SubtensorClient::connect(&url, NETUID, None).await.unwrap();
    node.reply_delay_ms.store(2_500, std::sync::atomic::Ordering::SeqCst);
    let asked_before = node.asked.lock().unwrap().len();
    let started = std::time::Instant::now();
    assert_eq!(client.current_block().await.unwrap(), BEST_BLOCK, "the head, in one request");
    assert_eq!(node.asked.lock().unwrap().len(), asked_before + 1);
    let neurons = client.neurons().await.unwrap();
    assert_eq!(neurons.len(), 3);
    let asked: Vec<String> = node.asked.lock().unwrap()[asked_before..].to_vec();
    eprintln!("a 2.5 s node: {} requests in {:?}: {asked:?}", asked.len(), started.elapsed());
}
