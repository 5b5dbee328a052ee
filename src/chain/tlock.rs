//! Commit-reveal v4, the pure parts: the weights payload subtensor decrypts, timelock
//! encryption of it to a drand round (the `timelock` crate subtensor itself uses:
//! Boneh-Franklin IBE on BLS12-381 with signatures in G1, AES-GCM for the body), the
//! check of a round's signature against a beacon's public key, a beacon of our own for
//! the stand-in chain, and the choice of the round to encrypt to (ledger-spec/12).
//!
//! No IO and no clock: callers pass the time and the chain state they read.

use ark_ec::Group;
use ark_serialize::{CanonicalDeserialize, CanonicalSerialize};
use parity_scale_codec::{Decode, Encode};
use sha2::Digest;
use timelock::curves::drand::TinyBLS381;
use timelock::ibe::fullident::Identity;
use timelock::stream_ciphers::AESGCMStreamCipherProvider;
use timelock::tlock::{tld, tle, EngineBLS, TLECiphertext};

type PublicKeyGroup = <TinyBLS381 as EngineBLS>::PublicKeyGroup;
type SignatureGroup = <TinyBLS381 as EngineBLS>::SignatureGroup;
type Scalar = <TinyBLS381 as EngineBLS>::Scalar;

/// drand quicknet (`bls-unchained-g1-rfc9380`), the beacon subtensor's drand pallet
/// ingests: its public key (G2, compressed), genesis and period.
pub const QUICKNET_PUBLIC_KEY_HEX: &str = "83cf0f2896adee7eb8b5f01fcad3912212c437e0073e911fb90022d3e760183c8c4b450b6a0a6c3ac6a5776a2d1064510d1fec758c921cc22b0e17e63aaf4bcb5ed66304de9cf809bd274ca73bab4af5a6e9c76a4bc09e76eae8991ef5ece45a";
pub const QUICKNET_CHAIN_HASH: &str = "52db9ba70e0cc0f6eaf7803dd07447a1f5477735fd3f661792ba94600c84e971";
pub const QUICKNET_GENESIS_S: u64 = 1_692_803_367;
pub const QUICKNET_PERIOD_S: u64 = 3;
/// Blocks past the first block of the reveal epoch whose time the round is taken at, so
/// the round's pulse has reached the chain when it reveals (bittensor-drand's offset).
pub const SECURITY_BLOCK_OFFSET: u64 = 3;
/// The pallet's bound on a timelocked commit (`MAX_CRV3_COMMIT_SIZE_BYTES`).
pub const MAX_COMMIT_BYTES: usize = 5_000;
/// Unrevealed commits a hotkey may have per epoch (`TooManyUnrevealedCommits` beyond).
pub const MAX_UNREVEALED_COMMITS: u32 = 10;

/// What subtensor decrypts and applies as `set_weights` (SCALE-encoded).
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct WeightsTlockPayload {
    /// The committing hotkey's public key (32 bytes on subtensor): a commit whose
    /// payload names another hotkey is dropped by the chain.
    pub hotkey: Vec<u8>,
    pub uids: Vec<u16>,
    pub values: Vec<u16>,
    pub version_key: u64,
}

impl std::fmt::Display for WeightsTlockPayload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hotkey = hex::encode(&self.hotkey);
        write!(f, "hotkey {hotkey}, uids {:?}, values {:?}, version key {}", self.uids, self.values, self.version_key)
    }
}

impl WeightsTlockPayload {
    /// The payload as `af chain tlock decrypt --json` shows it (the hotkey in hex).
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "hotkey": hex::encode(&self.hotkey), "uids": self.uids, "values": self.values, "version_key": self.version_key,
        })
    }

    /// Decodes a payload that must use every byte (a trailing byte is not a payload).
    pub fn decode_exact(bytes: &[u8]) -> Result<WeightsTlockPayload, TlockError> {
        use parity_scale_codec::DecodeAll;
        WeightsTlockPayload::decode_all(&mut &bytes[..]).map_err(|e| TlockError::Payload(e.to_string()))
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TlockError {
    #[error("not a weights payload: {0}")]
    Payload(String),
    #[error("beacon public key: {0}")]
    PublicKey(String),
    #[error("round signature: {0}")]
    Signature(String),
    #[error("the signature is not the beacon's signature of round {round}")]
    WrongSignature { round: u64 },
    #[error("ciphertext: {0}")]
    Ciphertext(String),
    #[error("decryption failed: {0}")]
    Decrypt(String),
    #[error("the commit is {len} bytes, over the chain's {MAX_COMMIT_BYTES}")]
    TooLarge { len: usize },
    #[error("{0}")]
    Schedule(String),
}

/// A randomness beacon's public parameters: drand quicknet on subtensor, or the stand-in
/// chain's own beacon. Round `r` is signed at `genesis_s + (r - 1) * period_s` (round 1
/// at genesis, as drand numbers them).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Beacon {
    /// Compressed G2 point, 96 bytes, hex.
    pub public_key: String,
    pub genesis_s: u64,
    pub period_s: u64,
}

impl Beacon {
    pub fn quicknet() -> Beacon {
        Beacon {
            public_key: QUICKNET_PUBLIC_KEY_HEX.into(),
            genesis_s: QUICKNET_GENESIS_S,
            period_s: QUICKNET_PERIOD_S,
        }
    }

    fn key(&self) -> Result<PublicKeyGroup, TlockError> {
        let bytes = hex::decode(&self.public_key).map_err(|e| TlockError::PublicKey(e.to_string()))?;
        if bytes.len() != 96 {
            return Err(TlockError::PublicKey(format!("{} bytes, not 96", bytes.len())));
        }
        PublicKeyGroup::deserialize_compressed(&bytes[..]).map_err(|e| TlockError::PublicKey(e.to_string()))
    }

    /// The round to encrypt to for a reveal at unix time `unix_ms`: the last round whose
    /// time is at least one period before it, so its pulse exists by then. This is
    /// bittensor-drand's `floor((t - genesis) / period)`, one below drand's own number for
    /// time `t`; never below 1.
    pub fn round_for_time(&self, unix_ms: u64) -> u64 {
        let genesis_ms = self.genesis_s.saturating_mul(1000);
        let period_ms = self.period_s.max(1).saturating_mul(1000);
        (unix_ms.saturating_sub(genesis_ms) / period_ms).max(1)
    }

    /// When round `round` is signed.
    pub fn round_time_ms(&self, round: u64) -> u64 {
        self.genesis_s.saturating_add(round.saturating_sub(1).saturating_mul(self.period_s)).saturating_mul(1000)
    }

    /// The latest round signed by unix time `unix_ms` (0 before genesis).
    pub fn latest_round(&self, unix_ms: u64) -> u64 {
        let genesis_ms = self.genesis_s.saturating_mul(1000);
        if unix_ms < genesis_ms {
            return 0;
        }
        (unix_ms - genesis_ms) / self.period_s.max(1).saturating_mul(1000) + 1
    }
}

/// The IBE identity of a round: `sha256(round as u64 big-endian)`, as drand signs it.
fn round_identity(round: u64) -> Identity {
    Identity::new(b"", vec![sha2::Sha256::digest(round.to_be_bytes()).to_vec()])
}

/// Encrypts `plaintext` so that only round `round`'s signature by `beacon` opens it;
/// returns the ciphertext as the chain reads it (arkworks compressed `TLECiphertext`).
pub fn encrypt<R>(beacon: &Beacon, round: u64, plaintext: &[u8], rng: &mut R) -> Result<Vec<u8>, TlockError>
where
    R: rand_core::RngCore + rand_core::CryptoRng,
{
    let key = beacon.key()?;
    let mut secret = [0u8; 32];
    rng.fill_bytes(&mut secret);
    let ciphertext =
        tle::<TinyBLS381, AESGCMStreamCipherProvider, _>(key, secret, plaintext, round_identity(round), rng)
            .map_err(|e| TlockError::Ciphertext(format!("{e:?}")))?;
    let mut bytes = Vec::new();
    ciphertext.serialize_compressed(&mut bytes).map_err(|e| TlockError::Ciphertext(e.to_string()))?;
    if bytes.len() > MAX_COMMIT_BYTES {
        return Err(TlockError::TooLarge { len: bytes.len() });
    }
    Ok(bytes)
}

fn signature_point(signature: &[u8]) -> Result<SignatureGroup, TlockError> {
    if signature.len() != 48 {
        return Err(TlockError::Signature(format!("{} bytes, not 48", signature.len())));
    }
    SignatureGroup::deserialize_compressed(signature).map_err(|e| TlockError::Signature(e.to_string()))
}

/// Checks that `signature` (48 bytes, compressed G1) is `beacon`'s signature of `round`:
/// `e(signature, g2) == e(H(sha256(round)), public key)`, as the drand pallet verifies.
pub fn verify_round_signature(beacon: &Beacon, round: u64, signature: &[u8]) -> Result<(), TlockError> {
    let key = beacon.key()?;
    let point = signature_point(signature)?;
    let message = round_identity(round).public::<TinyBLS381>();
    let g2 = PublicKeyGroup::generator();
    if TinyBLS381::pairing(g2, point) == TinyBLS381::pairing(key, message) {
        Ok(())
    } else {
        Err(TlockError::WrongSignature { round })
    }
}

/// Opens a ciphertext with its round's signature (what the chain does at reveal).
pub fn decrypt(ciphertext: &[u8], signature: &[u8]) -> Result<Vec<u8>, TlockError> {
    if ciphertext.len() > MAX_COMMIT_BYTES {
        return Err(TlockError::TooLarge { len: ciphertext.len() });
    }
    let parsed = TLECiphertext::<TinyBLS381>::deserialize_compressed(ciphertext)
        .map_err(|e| TlockError::Ciphertext(e.to_string()))?;
    tld::<TinyBLS381, AESGCMStreamCipherProvider>(parsed, signature_point(signature)?)
        .map_err(|e| TlockError::Decrypt(format!("{e:?}")))
}

/// Opens a ciphertext as `af chain tlock decrypt` does: the signature checked as
/// `beacon`'s of `round` first where a round is named, then the plaintext, read as a
/// weights payload where it is one.
pub fn open(
    beacon: &Beacon,
    round: Option<u64>,
    ciphertext: &[u8],
    signature: &[u8],
) -> Result<(Vec<u8>, Option<WeightsTlockPayload>), TlockError> {
    if let Some(round) = round {
        verify_round_signature(beacon, round, signature)?;
    }
    let plaintext = decrypt(ciphertext, signature)?;
    let weights = WeightsTlockPayload::decode_exact(&plaintext).ok();
    Ok((plaintext, weights))
}

/// The stand-in chain's beacon: a BLS secret of the same scheme as quicknet, signing
/// each round's identity. Held only by the stand-in chain's process.
pub struct BeaconKey {
    secret: Scalar,
}

impl BeaconKey {
    /// A key derived from 32 seed bytes (the stand-in chain keeps its seed on disk).
    pub fn from_seed(seed: &[u8; 32]) -> BeaconKey {
        use ark_ff::PrimeField;
        let wide = blake3::Hasher::new_derive_key("af stand-in beacon key v1").update(seed).finalize_xof().fill_owned();
        BeaconKey { secret: Scalar::from_le_bytes_mod_order(&wide) }
    }

    pub fn public_key_hex(&self) -> String {
        let mut bytes = Vec::new();
        (PublicKeyGroup::generator() * self.secret).serialize_compressed(&mut bytes).expect("a point serializes");
        hex::encode(bytes)
    }

    /// Round `round`'s signature: the IBE secret of its identity (48 bytes).
    pub fn sign(&self, round: u64) -> Vec<u8> {
        let mut bytes = Vec::new();
        round_identity(round)
            .extract::<TinyBLS381>(self.secret)
            .0
            .serialize_compressed(&mut bytes)
            .expect("serializes");
        bytes
    }
}

trait FillOwned {
    fn fill_owned(self) -> [u8; 64];
}

impl FillOwned for blake3::OutputReader {
    fn fill_owned(mut self) -> [u8; 64] {
        let mut out = [0u8; 64];
        self.fill(&mut out);
        out
    }
}

/// When the subnet's epochs fire, as far as a commit made now needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum EpochSchedule {
    /// Before stateful epochs: epoch of block `b` is `(b + netuid + 1) / (tempo + 1)`.
    Legacy { tempo: u64, netuid: u16 },
    /// `LastEpochBlock` and `PendingEpochAt` (0: none) from storage: the next epoch
    /// fires at `min(last + tempo, pending)`, then every `tempo` blocks.
    Stateful { tempo: u64, last_epoch_block: u64, pending_epoch_at: u64 },
}

/// The chain block at which a commit made with the chain's head at `block` is revealed:
/// the first block of epoch `commit epoch + reveal_period`.
pub fn reveal_block(schedule: EpochSchedule, block: u64, reveal_period: u64) -> Result<u64, TlockError> {
    if reveal_period == 0 {
        return Err(TlockError::Schedule("RevealPeriodEpochs is 0: commits would expire unrevealed".into()));
    }
    match schedule {
        EpochSchedule::Legacy { tempo, netuid } => {
            let (period, offset) = (tempo.saturating_add(1), u64::from(netuid) + 1);
            let epoch = block.saturating_add(offset) / period;
            Ok(epoch.saturating_add(reveal_period).saturating_mul(period).saturating_sub(offset))
        }
        EpochSchedule::Stateful { tempo, last_epoch_block, pending_epoch_at } => {
            if tempo == 0 {
                return Err(TlockError::Schedule("tempo is 0: the subnet runs no epochs".into()));
            }
            let auto = last_epoch_block.saturating_add(tempo);
            let next = if pending_epoch_at > 0 { auto.min(pending_epoch_at) } else { auto };
            // `block` is the head; the commit lands in `block + 1`. A commit in a block
            // where an epoch fires belongs to that epoch already
            // (`current_epoch_with_lookahead`); an epoch due by `block + 1` (on time, or
            // deferred past it) fires there, so the reveal is `reveal_period` whole epochs
            // after `block + 1`; otherwise the first of those epochs starts at `next`.
            // This is bittensor-drand's `get_encrypted_commit_v2` (scripts/drand-check.py).
            let landing = block.saturating_add(1);
            let first = if landing >= next { landing.saturating_add(tempo) } else { next };
            Ok(first.saturating_add((reveal_period - 1).saturating_mul(tempo)))
        }
    }
}

/// Where a commit made now is aimed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RevealPlan {
    pub reveal_block: u64,
    /// `reveal_block + SECURITY_BLOCK_OFFSET`: the block whose time picks the round.
    pub target_block: u64,
    pub target_unix_ms: u64,
    pub reveal_round: u64,
}

/// The round to encrypt a commit made at chain block `block` (at unix time `now_ms`) to:
/// the epoch schedule gives the reveal block, `SECURITY_BLOCK_OFFSET` blocks later is the
/// target, its time is estimated at `block_ms` per block, and the beacon's round for
/// that time is taken (ledger-spec/12).
pub fn reveal_plan(
    beacon: &Beacon,
    schedule: EpochSchedule,
    reveal_period: u64,
    block: u64,
    now_ms: u64,
    block_ms: u64,
) -> Result<RevealPlan, TlockError> {
    let reveal_block = reveal_block(schedule, block, reveal_period)?;
    let target_block = reveal_block.saturating_add(SECURITY_BLOCK_OFFSET);
    let target_unix_ms = now_ms.saturating_add(target_block.saturating_sub(block).saturating_mul(block_ms));
    Ok(RevealPlan { reveal_block, target_block, target_unix_ms, reveal_round: beacon.round_for_time(target_unix_ms) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Round 1000 of quicknet, as subtensor's drand pallet tests carry it.
    const ROUND_1000_SIGNATURE: &str =
        "b44679b9a59af2ec876b1a6b1ad52ea9b1615fc3982b19576350f93447cb1125e342b73a8dd2bacbe47e4b6b63ed5e39";
    const ROUND_1000_RANDOMNESS: &str = "fe290beca10872ef2fb164d2aa4442de4566183ec51c56ff3cd603d930e54fdd";

    #[test]
    fn a_real_quicknet_round_verifies_and_opens_what_was_encrypted_to_it() {
        let beacon = Beacon::quicknet();
        let signature = hex::decode(ROUND_1000_SIGNATURE).unwrap();
        assert_eq!(hex::encode(sha2::Sha256::digest(&signature)), ROUND_1000_RANDOMNESS);
        verify_round_signature(&beacon, 1000, &signature).unwrap();
        assert_eq!(verify_round_signature(&beacon, 1001, &signature), Err(TlockError::WrongSignature { round: 1001 }));
        let payload =
            WeightsTlockPayload { hotkey: vec![7; 32], uids: vec![3], values: vec![u16::MAX], version_key: 9 };
        let ciphertext = encrypt(&beacon, 1000, &payload.encode(), &mut rand_core::OsRng).unwrap();
        let opened = decrypt(&ciphertext, &signature).unwrap();
        assert_eq!(WeightsTlockPayload::decode(&mut &opened[..]).unwrap(), payload);
        // Another round's ciphertext does not open with this signature.
        let other = encrypt(&beacon, 1001, b"x", &mut rand_core::OsRng).unwrap();
        assert!(decrypt(&other, &signature).is_err());
        // A flip anywhere in the header or body is refused or fails to open. (The last 16
        // bytes name the cipher suite, `u64 length || "AES_GCM_"`, which decryption,
        // here as on chain, does not read.)
        assert_eq!(&ciphertext[ciphertext.len() - 8..], b"AES_GCM_");
        for i in 0..ciphertext.len() - 16 {
            let mut bad = ciphertext.clone();
            bad[i] ^= 0x10;
            assert_ne!(decrypt(&bad, &signature).ok(), Some(payload.encode()), "byte {i}");
        }
    }

    #[test]
    fn the_stand_in_beacon_signs_rounds_that_verify_and_decrypt() {
        let key = BeaconKey::from_seed(&[5; 32]);
        let beacon = Beacon { public_key: key.public_key_hex(), genesis_s: 1_800_000_000, period_s: 1 };
        let signature = key.sign(42);
        verify_round_signature(&beacon, 42, &signature).unwrap();
        assert!(verify_round_signature(&Beacon::quicknet(), 42, &signature).is_err());
        let ciphertext = encrypt(&beacon, 42, b"weights", &mut rand_core::OsRng).unwrap();
        assert_eq!(decrypt(&ciphertext, &signature).unwrap(), b"weights");
        assert!(decrypt(&ciphertext, &key.sign(43)).is_err());
        assert!(decrypt(&ciphertext, &BeaconKey::from_seed(&[6; 32]).sign(42)).is_err());
    }

    #[test]
    fn the_payload_is_scale_encoded_as_subtensor_decodes_it() {
        let payload =
            WeightsTlockPayload { hotkey: vec![1, 2], uids: vec![0, 5], values: vec![0, 65535], version_key: 1 };
        // compact(2) 01 02 | compact(2) 0000 0500 | compact(2) 0000 ffff | u64 LE 1
        assert_eq!(hex::encode(payload.encode()), "0801020800000500080000ffff0100000000000000");
    }

    #[test]
    fn rounds_follow_drands_numbering() {
        let beacon = Beacon::quicknet();
        assert_eq!(beacon.round_time_ms(1), QUICKNET_GENESIS_S * 1000);
        assert_eq!(beacon.latest_round(QUICKNET_GENESIS_S * 1000), 1);
        assert_eq!(beacon.latest_round(QUICKNET_GENESIS_S * 1000 + 2_999), 1);
        assert_eq!(beacon.latest_round(QUICKNET_GENESIS_S * 1000 + 3_000), 2);
        // The round chosen for time t was signed at least one period before t.
        for t in [3_000u64, 3_001, 299_999, 1_000_000_000] {
            let at = QUICKNET_GENESIS_S * 1000 + t;
            let round = beacon.round_for_time(at);
            assert!(beacon.round_time_ms(round) + 3_000 <= at, "t {t}");
            assert!(beacon.round_time_ms(round + 1) + 3_000 > at, "t {t}: not the latest such round");
        }
    }

    #[test]
    fn reveal_blocks_by_hand() {
        // Legacy, tempo 360, netuid 1: epoch of block 1000 is 1002 / 361 = 2; epoch 3
        // starts at 3 * 361 - 2 = 1081.
        let legacy = EpochSchedule::Legacy { tempo: 360, netuid: 1 };
        assert_eq!(reveal_block(legacy, 1000, 1).unwrap(), 1081);
        assert_eq!(reveal_block(legacy, 1000, 2).unwrap(), 1442);
        // The last block of epoch 2 (1080) still reveals at 1081; 1081 is in epoch 3.
        assert_eq!(reveal_block(legacy, 1080, 1).unwrap(), 1081);
        assert_eq!(reveal_block(legacy, 1081, 1).unwrap(), 1442);
        // Stateful: last epoch at 5000, tempo 100: next fires at 5100.
        let stateful = EpochSchedule::Stateful { tempo: 100, last_epoch_block: 5000, pending_epoch_at: 0 };
        assert_eq!(reveal_block(stateful, 5040, 1).unwrap(), 5100);
        assert_eq!(reveal_block(stateful, 5040, 3).unwrap(), 5300);
        // A commit made with the head just before the fire block lands in it, and so
        // belongs to the epoch that fires there.
        assert_eq!(reveal_block(stateful, 5099, 1).unwrap(), 5200);
        assert_eq!(reveal_block(stateful, 5098, 1).unwrap(), 5100);
        assert_eq!(reveal_block(stateful, 5099, 2).unwrap(), 5300);
        // The head at the fire block, or past a deferred one: the epoch fires in the
        // block the commit lands in.
        assert_eq!(reveal_block(stateful, 5100, 1).unwrap(), 5201);
        assert_eq!(reveal_block(stateful, 5101, 1).unwrap(), 5202);
        // An owner-triggered epoch earlier than the automatic one comes first.
        let pending = EpochSchedule::Stateful { tempo: 100, last_epoch_block: 5000, pending_epoch_at: 5060 };
        assert_eq!(reveal_block(pending, 5040, 1).unwrap(), 5060);
        assert!(reveal_block(stateful, 5040, 0).is_err());
        // The plan: 3 blocks past the reveal, at 12 s a block from now.
        let plan = reveal_plan(&Beacon::quicknet(), legacy, 1, 1000, 1_800_000_000_000, 12_000).unwrap();
        assert_eq!((plan.reveal_block, plan.target_block), (1081, 1084));
        assert_eq!(plan.target_unix_ms, 1_800_000_000_000 + 84 * 12_000);
        assert_eq!(plan.reveal_round, (plan.target_unix_ms / 1000 - QUICKNET_GENESIS_S) / 3);
    }
}
