//! Subtensor calls built offline by subxt from the real finney metadata (spec 393),
//! compared byte for byte with hand-derived bytes; a signed extrinsic is taken apart by
//! hand, its sr25519 signature verified, and its call found intact.

use af::bytes::{Hash32, ValidatorKey};
use af::chain::subtensor::{self, call_data, offline_client, set_commitment_payload, set_weights_payload};
use af::chain::{wallet, LedgerCommitment};
use subxt::config::DefaultExtrinsicParamsBuilder;
use subxt::SubstrateConfig;

/// The real metadata, or `None` (with a note) where this checkout has no ../shared.
pub fn finney_metadata() -> Option<Vec<u8>> {
    let path = std::env::var(subtensor::METADATA_ENV)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| super::repo_path("../shared/fixtures/subtensor/finney-spec393.scale"));
    match std::fs::read(&path) {
        Ok(bytes) => Some(bytes),
        // A skipped check would pass silently: only an explicit opt-out skips it.
        Err(e) if std::env::var("AF_SKIP_REAL_METADATA").is_ok_and(|v| v == "1") => {
            eprintln!("SKIPPED real-metadata test (AF_SKIP_REAL_METADATA=1): {} unreadable ({e})", path.display());
            None
        }
        Err(e) => panic!(
            "{} unreadable ({e}): set {} or put ../shared beside the checkout (CI has it); AF_SKIP_REAL_METADATA=1 skips these tests",
            path.display(),
            subtensor::METADATA_ENV
        ),
    }
}

fn client() -> Option<subxt::OfflineClient<SubstrateConfig>> {
    let metadata = subtensor::load_metadata(&finney_metadata()?).expect("finney metadata decodes");
    Some(offline_client(metadata, 393, 1, [0x11; 32]))
}

#[test]
fn set_commitment_call_bytes_match_the_hand_derived_layout() {
    let Some(client) = client() else { return };
    let hash = [0xab; 32];
    // pallet 18 (0x12), call 0 | netuid u16 LE | compact(1 field) = 0x04 | Data::Raw32 = 0x21 | 32 bytes
    let mut expected = vec![0x12, 0x00, 0x07, 0x00, 0x04, 0x21];
    expected.extend_from_slice(&hash);
    assert_eq!(call_data(&client, &set_commitment_payload(7, &[hash.to_vec()])).unwrap(), expected);

    // Our commitment: three fields, Raw32 tip hash, Raw32 ledger key, Raw8 height.
    let commitment = LedgerCommitment {
        tip_hash: Hash32([1; 32]),
        ledger_key: ValidatorKey([2; 32]),
        tip_height: 0x0102,
        protocol: None,
    };
    let mut expected = vec![0x12, 0x00, 0x40, 0x01, 0x0c, 0x21];
    expected.extend_from_slice(&[1; 32]);
    expected.push(0x21);
    expected.extend_from_slice(&[2; 32]);
    expected.push(0x09);
    expected.extend_from_slice(&0x0102u64.to_le_bytes());
    assert_eq!(call_data(&client, &set_commitment_payload(320, &commitment.fields())).unwrap(), expected);
}

#[test]
fn set_weights_call_bytes_match_the_hand_derived_layout() {
    let Some(client) = client() else { return };
    let bytes = call_data(&client, &set_weights_payload(7, &[3, 260], &[65535, 1], 42)).unwrap();
    // SubtensorModule is pallet 7; set_weights is its call 0.
    let mut expected = vec![0x07, 0x00, 0x07, 0x00];
    expected.push(0x08); // compact(2)
    expected.extend_from_slice(&[0x03, 0x00, 0x04, 0x01]);
    expected.push(0x08);
    expected.extend_from_slice(&[0xff, 0xff, 0x01, 0x00]);
    expected.extend_from_slice(&42u64.to_le_bytes());
    assert_eq!(bytes, expected);
}

#[test]
fn timelocked_commit_call_bytes_match_the_hand_derived_layout() {
    let Some(metadata) = finney_metadata() else { return };
    let metadata = subtensor::load_metadata(&metadata).unwrap();
    // Finney at spec 393 has the mechanism call, and not yet the stateful epochs.
    assert_eq!(subtensor::timelocked_call_name(&metadata), Some("commit_timelocked_mechanism_weights"));
    assert!(!subtensor::has_stateful_epochs(&metadata));
    let client = offline_client(metadata, 393, 1, [0x11; 32]);
    let commit = vec![0xc7u8; 300];
    let tail = |out: &mut Vec<u8>| {
        out.extend_from_slice(&[0xb1, 0x04]); // compact(300) = (300 << 2) | 1, two bytes LE
        out.extend_from_slice(&commit);
        out.extend_from_slice(&123_456u64.to_le_bytes());
        out.extend_from_slice(&4u16.to_le_bytes());
    };
    // SubtensorModule (7), call 118: netuid u16 LE, mecid u8, commit, reveal_round, version.
    let mut expected = vec![0x07, 118, 0x07, 0x00, 0x00];
    tail(&mut expected);
    let named =
        subtensor::commit_timelocked_payload_named("commit_timelocked_mechanism_weights", 7, &commit, 123_456, 4);
    assert_eq!(call_data(&client, &named).unwrap(), expected);
    // Call 113, the older form without mecid.
    let mut expected = vec![0x07, 113, 0x07, 0x00];
    tail(&mut expected);
    let older = subtensor::commit_timelocked_payload_named("commit_timelocked_weights", 7, &commit, 123_456, 4);
    assert_eq!(call_data(&client, &older).unwrap(), expected);
}

#[test]
fn a_signed_set_commitment_extrinsic_verifies_and_decodes_back() {
    let Some(client) = client() else { return };
    let keypair = seed_keypair(&"42".repeat(32));
    let payload = set_commitment_payload(7, &[vec![0xcd; 32]]);
    let call = call_data(&client, &payload).unwrap();
    let at = client.at_block(0u64).unwrap();
    let params = DefaultExtrinsicParamsBuilder::<SubstrateConfig>::new().nonce(5).build();
    let mut signable = at.transactions().create_v4_signable_offline(&payload, params).unwrap();
    let signer_payload = signable.signer_payload().unwrap();
    let extrinsic = signable.sign(&keypair).unwrap().encoded().to_vec();

    // compact(length) | 0x84 (v4, signed) | 0x00 MultiAddress::Id | account | 0x01 Sr25519 | signature | extensions | call
    let (length, prefix) = compact_u32(&extrinsic);
    assert_eq!(extrinsic.len() - prefix, length as usize, "the length prefix covers the rest");
    let body = &extrinsic[prefix..];
    assert_eq!(body[0], 0x84, "version 4, signed");
    assert_eq!(body[1], 0x00, "MultiAddress::Id");
    assert_eq!(&body[2..34], &keypair.public_key(), "the signer is our hotkey");
    assert_eq!(body[34], 0x01, "MultiSignature::Sr25519");
    let signature: [u8; 64] = body[35..99].try_into().unwrap();
    assert!(body.ends_with(&call), "the call is the last part of the extrinsic");
    // Substrate signs the payload itself, or its blake2-256 hash when over 256 bytes.
    let signed_message = if signer_payload.len() > 256 {
        subxt::ext::codec::Encode::encode(&sp_hash(&signer_payload)).to_vec()
    } else {
        signer_payload.clone()
    };
    assert!(subxt_signer::sr25519::verify(
        &subxt_signer::sr25519::Signature(signature),
        &signed_message,
        &subxt_signer::sr25519::PublicKey(keypair.public_key())
    ));
    let mut forged = signed_message.clone();
    forged[0] ^= 1;
    assert!(!subxt_signer::sr25519::verify(
        &subxt_signer::sr25519::Signature(signature),
        &forged,
        &subxt_signer::sr25519::PublicKey(keypair.public_key())
    ));
    // The signed payload starts with the call, then the extensions' data.
    assert!(signer_payload.starts_with(&call));
    assert_eq!(subtensor::ss58(&keypair.public_key()).len(), 48, "ss58 addresses with prefix 42 are 48 chars");
}

fn sp_hash(bytes: &[u8]) -> [u8; 32] {
    use subxt::config::Hasher;
    subxt::config::substrate::BlakeTwo256.hash(bytes).0
}

/// SCALE compact u32: (value, bytes used).
pub fn compact_u32(bytes: &[u8]) -> (u32, usize) {
    match bytes[0] & 0b11 {
        0 => (u32::from(bytes[0] >> 2), 1),
        1 => ((u32::from(u16::from_le_bytes([bytes[0], bytes[1]]))) >> 2, 2),
        2 => (u32::from_le_bytes(bytes[..4].try_into().unwrap()) >> 2, 4),
        _ => panic!("big compact"),
    }
}

#[test]
fn wallet_files_load_and_bad_ones_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let hotkeys = dir.path().join("default").join("hotkeys");
    std::fs::create_dir_all(&hotkeys).unwrap();
    std::fs::write(hotkeys.join("hk"), format!("{{\"secretSeed\": \"0x{}\"}}", "07".repeat(32))).unwrap();
    std::fs::write(hotkeys.join("bad"), "{\"secretSeed\": \"0x1234\"}").unwrap();
    std::fs::write(
        hotkeys.join("odd"),
        format!("{{\"secretSeed\": \"0x{}\", \"ss58Address\": \"x\"}}", "07".repeat(32)),
    )
    .unwrap();
    let load = |name: &str| {
        let paths = wallet::WalletPaths::new(Some(dir.path().to_path_buf()), None, Some(name));
        wallet::load_hotkey(&paths, wallet::Password::None)
    };
    let key = load("hk").unwrap();
    let again = seed_keypair(&"07".repeat(32));
    assert_eq!(key.public_key(), again.public_key());
    let error = load("bad").err().unwrap().to_string();
    assert!(error.contains("32 bytes") && !error.contains("1234"), "names the problem, never the secret: {error}");
    let error = load("odd").err().unwrap().to_string();
    assert!(error.contains("ss58Address is not an ss58 address") && !error.contains("0707"), "{error}");
    assert!(load("missing").is_err());
}

/// A hotkey from 32 seed bytes (hex), through the wallet keyfile parser.
pub fn seed_keypair(seed_hex: &str) -> af::chain::hotkey::Hotkey {
    let json = format!("{{\"secretSeed\": \"0x{seed_hex}\"}}");
    wallet::keypair_from_json(std::path::Path::new("test"), json.as_bytes()).unwrap()
}

#[test]
fn serve_axon_and_miner_commitment_call_bytes_match_the_hand_derived_layout() {
    let Some(client) = client() else { return };
    let bytes = call_data(&client, &subtensor::serve_axon_payload(7, "10.1.2.3".parse().unwrap(), 4001)).unwrap();
    // SubtensorModule (pallet 7), serve_axon | netuid u16 | version u32 | ip u128 | port u16
    // | ip_type u8 | protocol u8 | placeholder1 u8 | placeholder2 u8, all little-endian.
    assert_eq!(bytes[0], 0x07);
    let mut rest = vec![0x07, 0x00, 0x01, 0x00, 0x00, 0x00];
    rest.extend_from_slice(&u128::from(u32::from_be_bytes([10, 1, 2, 3])).to_le_bytes());
    rest.extend_from_slice(&[0xa1, 0x0f, 4, 0, 0, 0]);
    assert_eq!(&bytes[2..], &rest[..], "call index {}", bytes[1]);
    // The call index is serve_axon's in this metadata (it takes 8 arguments there).
    let metadata = subtensor::load_metadata(&finney_metadata().unwrap()).unwrap();
    let call = metadata.pallet_by_name("SubtensorModule").unwrap().call_variant_by_index(bytes[1]).unwrap();
    assert_eq!((call.name.as_str(), call.fields.len()), ("serve_axon", 8));

    // A miner's commitment (ledger-spec/13): its JSON in Raw fields of at most 128 bytes.
    let miner = af::chain::miner::MinerCommitment::new(&"m".repeat(100), "r1", "http://127.0.0.1:8001").unwrap();
    let fields = miner.to_fields().unwrap();
    let json = miner.to_json();
    let mut expected = vec![0x12, 0x00, 0x07, 0x00, 0x08, 0x81]; // 2 fields; Raw128 = 0x81
    expected.extend_from_slice(&json[..128]);
    expected.push(1 + (json.len() - 128) as u8); // Raw{n} is variant n + 1
    expected.extend_from_slice(&json[128..]);
    assert_eq!(call_data(&client, &set_commitment_payload(7, &fields)).unwrap(), expected);
}
