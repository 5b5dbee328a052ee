//! Model test: random operations against the real store and a plain `Vec` per
//! validator, compared after every step (and across reopenings).

use crate::{test_seed, TestRng};
use af::bytes::Hash32;
use af::ledger::block::{self, SealedBlock};
use af::ledger::event::{ChatMessage, EnvRef, Event, MinerRef, Transcript};
use af::ledger::{Appended, LedgerKey, Store, StoreError};

fn transcript(rng: &mut TestRng, hotkey: &str) -> Event {
    Event::Transcript(Transcript {
        match_id: Hash32([1; 32]),
        env: EnvRef { name: "mult".into(), version: 1 },
        challenge_id: Hash32([(rng.below(6)) as u8; 32]),
        challenge_index: rng.below(100),
        invocation_id: Hash32([(rng.next_u64() & 0xff) as u8; 32]),
        miner: MinerRef { hotkey: hotkey.into(), uid: 1, model: "m".into() },
        messages: vec![ChatMessage { role: "user".into(), content: "x".repeat(rng.below(200) as usize) }],
        answer: rng.next_u64().to_string(),
        reward_milli: if rng.below(2) == 0 { 1000 } else { 0 },
        latency_ms: rng.below(1000),
        error: None,
    })
}

#[test]
fn store_matches_a_vec_model() {
    let seed = test_seed("store_matches_a_vec_model");
    let mut rng = TestRng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let keys = [LedgerKey::from_seed([1; 32]), LedgerKey::from_seed([2; 32]), LedgerKey::from_seed([3; 32])];
    let hotkeys = ["5Alice", "5Bob"];
    let mut model: Vec<Vec<SealedBlock>> = vec![Vec::new(), Vec::new(), Vec::new()];
    let mut store = Store::create(dir.path()).unwrap();
    let mut time_ms = 1_000;
    for step in 0..300 {
        let v = rng.below(3) as usize;
        let key = &keys[v];
        let chain = &mut model[v];
        let ctx = format!("seed {seed} step {step}");
        match rng.below(10) {
            // Append the next block (most common).
            0..=5 => {
                time_ms += rng.below(5_000);
                let n_events = rng.below(5);
                let events = (0..n_events)
                    .map(|_| {
                        let hotkey = hotkeys[rng.below(2) as usize];
                        transcript(&mut rng, hotkey)
                    })
                    .collect();
                let sealed =
                    block::seal(key.signing_key(), chain.last().map(|b| b.tip()).as_ref(), time_ms, events).unwrap();
                assert_eq!(store.append(&sealed).unwrap(), Appended::New(sealed.tip()), "{ctx}");
                chain.push(sealed);
            }
            // Re-deliver a stored block: idempotent.
            6 if !chain.is_empty() => {
                let old = &chain[rng.below(chain.len() as u64) as usize];
                assert_eq!(store.append(old).unwrap(), Appended::AlreadyStored, "{ctx}");
            }
            // A block that skips a height is refused and changes nothing.
            7 => {
                let fake_tip = af::ledger::Tip { height: chain.len() as u64 + 3, hash: Hash32([9; 32]), time_ms };
                let sealed = block::seal(key.signing_key(), Some(&fake_tip), time_ms, vec![]).unwrap();
                assert!(matches!(store.append(&sealed), Err(StoreError::Rejected { .. })), "{ctx}");
            }
            // A different block at a stored height is equivocation.
            8 if !chain.is_empty() => {
                let height = rng.below(chain.len() as u64) as usize;
                let prev = if height == 0 { None } else { Some(chain[height - 1].tip()) };
                let other = block::seal(key.signing_key(), prev.as_ref(), time_ms + 1_000_000, vec![]).unwrap();
                match store.append(&other) {
                    Err(StoreError::Conflict { height: h, stored, offered, .. }) => {
                        assert_eq!(h, height as u64, "{ctx}");
                        assert_eq!(stored, chain[height].decoded().hash, "{ctx}");
                        assert_eq!(offered, other.decoded().hash, "{ctx}");
                    }
                    other => panic!("{ctx}: expected a conflict, got {other:?}"),
                }
            }
            // Reopen the store: everything acknowledged must still be there.
            _ => {
                drop(store);
                store = Store::open(dir.path()).unwrap();
            }
        }
        // Compare the whole observable state with the model.
        for (i, chain) in model.iter().enumerate() {
            let validator = keys[i].validator();
            assert_eq!(store.tip(&validator).unwrap(), chain.last().map(|b| b.tip()), "{ctx} validator {i}");
            if let Some(last) = chain.last() {
                let height = last.tip().height;
                assert_eq!(store.block_bytes(&validator, height).unwrap().as_deref(), Some(last.bytes()), "{ctx}");
                assert_eq!(store.block_bytes(&validator, height + 1).unwrap(), None, "{ctx}");
            }
        }
        let probe = Hash32([rng.below(6) as u8; 32]);
        let mut expected: Vec<_> = model
            .iter()
            .enumerate()
            .flat_map(|(i, chain)| {
                let validator = keys[i].validator();
                chain.iter().flat_map(move |b| {
                    b.decoded().block.events.iter().enumerate().filter_map(move |(idx, e)| match e {
                        Event::Transcript(t) if t.challenge_id == probe => {
                            Some(af::ledger::Location { validator, height: b.tip().height, event_idx: idx as u32 })
                        }
                        _ => None,
                    })
                })
            })
            .collect();
        expected.sort();
        let mut found = store.locate_challenge(&probe).unwrap();
        found.sort();
        assert_eq!(found, expected, "{ctx}: challenge index");
    }
    let report = af::ledger::verify::verify_store(&store, &|_, _| {}).unwrap();
    assert!(report.ok, "seed {seed}: {report:?}");
    assert_eq!(report.n_blocks, model.iter().map(|c| c.len() as u64).sum::<u64>());
}
