//! Random and mutated bytes into the block decoder: never a panic, always a clear error,
//! and nothing but the original bytes passes every check.

use crate::{test_seed, TestRng};
use af::ledger::block::{check_block, decode_block, SealedBlock, EVENTS_OFFSET};
use af::ledger::{block, LedgerKey};

fn valid_block() -> Vec<u8> {
    let key = LedgerKey::from_seed([5; 32]);
    let events = super::ledger_vectors::vector_events();
    block::seal(key.signing_key(), None, 1_000, events).unwrap().bytes().to_vec()
}

fn mutate(rng: &mut TestRng, original: &[u8]) -> Vec<u8> {
    let mut bytes = original.to_vec();
    for _ in 0..1 + rng.below(3) {
        let len = bytes.len().max(1) as u64;
        match rng.below(7) {
            0 => {
                let i = rng.below(len) as usize % bytes.len().max(1);
                if !bytes.is_empty() {
                    bytes[i] ^= 1 << rng.below(8);
                }
            }
            1 => bytes.truncate(rng.below(len) as usize),
            2 => {
                let i = rng.below(len) as usize;
                bytes.insert(i.min(bytes.len()), rng.next_u64() as u8);
            }
            3 if !bytes.is_empty() => {
                let i = rng.below(len) as usize % bytes.len();
                bytes.remove(i);
            }
            // Huge length prefix somewhere in the events (attacker-sized allocation).
            4 if bytes.len() > EVENTS_OFFSET + 16 => {
                let i = EVENTS_OFFSET + rng.below((bytes.len() - EVENTS_OFFSET - 8) as u64) as usize;
                bytes[i..i + 8].copy_from_slice(&(u64::MAX - rng.below(1000)).to_le_bytes());
            }
            5 => bytes.extend((0..rng.below(64)).map(|_| rng.next_u64() as u8)),
            _ => {
                let i = rng.below(len) as usize % bytes.len().max(1);
                if !bytes.is_empty() {
                    bytes[i] = rng.next_u64() as u8;
                }
            }
        }
    }
    bytes
}

#[test]
fn mutated_blocks_are_refused_without_panic() {
    let seed = test_seed("mutated_blocks_are_refused_without_panic");
    let mut rng = TestRng::new(seed);
    let original = valid_block();
    let mut refused = 0;
    for i in 0..20_000 {
        let bytes = mutate(&mut rng, &original);
        // The borrowed decoder (verification) and the owned one always agree.
        let borrowed = check_block(&bytes).map(|c| (c.hash, c.leaf_hashes)).map_err(|e| e.to_string());
        let owned = decode_block(&bytes).map(|d| (d.hash, d.leaf_hashes)).map_err(|e| e.to_string());
        assert_eq!(borrowed, owned, "seed {seed} iteration {i}");
        match SealedBlock::from_bytes(bytes.clone()) {
            Ok(_) => assert_eq!(bytes, original, "seed {seed} iteration {i}: mutated bytes passed every check"),
            Err(error) => {
                assert!(!error.to_string().is_empty());
                refused += 1;
            }
        }
    }
    assert!(refused > 19_000, "seed {seed}: only {refused} refused");
}

#[test]
fn random_bytes_are_refused_without_panic() {
    let seed = test_seed("random_bytes_are_refused_without_panic");
    let mut rng = TestRng::new(seed);
    for i in 0..5_000 {
        let len = rng.below(600) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        if len > 2 && rng.below(2) == 0 {
            bytes[0] = 1; // a plausible format version, to get further in
            bytes[1] = 0;
        }
        assert!(decode_block(&bytes).is_err(), "seed {seed} iteration {i}");
    }
}

#[test]
fn oversized_and_hostile_lengths_are_bounded() {
    let mut bytes = valid_block();
    // Claim 2^32 events: refused before any allocation of that size.
    bytes[EVENTS_OFFSET..EVENTS_OFFSET + 8].copy_from_slice(&(1u64 << 32).to_le_bytes());
    let error = decode_block(&bytes).unwrap_err().to_string();
    assert!(error.contains("more than the limit"), "{error}");
    let huge = vec![0u8; af::limits::MAX_BLOCK_BYTES as usize + 1];
    assert!(decode_block(&huge).unwrap_err().to_string().contains("over the limit"));
}

#[test]
fn non_canonical_encodings_are_refused() {
    let original = valid_block();
    // An Option tag of 2, a bool of 2 and an unknown event tag all fail to decode;
    // a trailing byte is refused even though everything before it is fine. An event tag
    // past every kind is named as a later protocol version's (ledger-spec/15), before
    // anything else of the block is read.
    let mut trailing = original.clone();
    trailing.push(0);
    assert!(decode_block(&trailing).is_err());
    let mut unknown_tag = original.clone();
    unknown_tag[EVENTS_OFFSET + 8] = 200;
    let error = decode_block(&unknown_tag).unwrap_err();
    assert!(matches!(error, af::ledger::BlockError::NewerEventKind { event_idx: 0, tag: 200 }), "{error}");
    assert!(error.to_string().contains("a kind this build does not know"), "{error}");
}
