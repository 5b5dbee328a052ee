//! Issue 53, case 3, on a node without an allow-list: chains are fetched, answered and
//! kept by trust (`p2p/protocol/trust.rs`), not by key order, so 3,000 junk keys that sort
//! first neither delay an honest chain nor fill the chain cap, and are not passed on
//! ahead of the validators a node vouches for; one dialed peer's junk fills half the cap
//! at most and goes round-robin with other peers' chains (issue 74, case 2). Driven on
//! the sync machine itself, with
//! signed blocks in a memory store.

use af::bytes::ValidatorKey;
use af::ledger::block::{seal, SealedBlock};
use af::ledger::demo::demo_events;
use af::ledger::LedgerKey;
use af::p2p::blocks::{BlockStore, MemoryStore};
use af::p2p::protocol::{Input, Output, Sync, SyncConfig};
use af::p2p::wire::{self, Request, Response, SignedHeader};
use std::collections::BTreeMap;

fn genesis(key: &LedgerKey) -> SealedBlock {
    seal(key.signing_key(), None, 1, demo_events(&key.validator(), 0, 1, 100)).unwrap()
}

fn signed(block: &SealedBlock) -> SignedHeader {
    SignedHeader { header: block.decoded().block.header.clone(), signature: block.decoded().block.signature }
}

/// The requests a batch of outputs sends: tips requests by id, block requests by id.
fn requests(out: &[Output<u8>]) -> (Vec<u64>, Vec<(u64, u8, ValidatorKey)>) {
    let (mut tips, mut blocks) = (Vec::new(), Vec::new());
    for o in out {
        if let Output::SendRequest { to, request, data } = o {
            match wire::decode_request(data).unwrap() {
                Request::Tips => tips.push(*request),
                Request::Blocks { validator, .. } => blocks.push((*request, *to, validator)),
            }
        }
    }
    (tips, blocks)
}

/// Keys whose validator keys sort before `than`'s: what a junk flood chooses, so key
/// order would fetch them first.
fn keys_sorting_before(than: &ValidatorKey, n: usize) -> Vec<LedgerKey> {
    (0u32..)
        .map(|i| {
            let mut seed = [0x5a; 32];
            seed[..4].copy_from_slice(&i.to_le_bytes());
            LedgerKey::from_seed(seed)
        })
        .filter(|k| k.validator() < *than)
        .take(n)
        .collect()
}

/// A key whose validator key sorts after most: the honest chain, last in key order.
fn late_key() -> LedgerKey {
    (0u8..).map(|i| LedgerKey::from_seed([i; 32])).find(|k| k.validator().0[0] >= 0xe0).unwrap()
}

/// A fresh node that dialed one honest node fetches the chains in the order that node
/// answered them (trust first), not in key order: the honest chain first, although 50
/// junk chains it also holds sort before it.
#[test]
fn a_fresh_node_fetches_in_the_order_its_dialed_peer_vouches() {
    let store = MemoryStore::default();
    let honest = late_key();
    let junk = keys_sorting_before(&honest.validator(), 50);
    let mut sync: Sync<u8> = Sync::new(SyncConfig::default());
    let peer: u8 = 1;
    let out = sync.handle(Input::DialedPeerConnected(peer), 0, &store).unwrap();
    let (tips, _) = requests(&out);
    let answer: Vec<SignedHeader> = std::iter::once(&honest).chain(&junk).map(|k| signed(&genesis(k))).collect();
    let data = wire::encode_response(&Response::Tips(answer)).unwrap();
    let out = sync.handle(Input::Response { from: peer, request: tips[0], data }, 10, &store).unwrap();
    let (_, blocks) = requests(&out);
    assert!(!blocks.is_empty(), "the claimed chains are fetched");
    assert_eq!(blocks[0].2, honest.validator(), "the chain the peer listed first is fetched first");
}

/// A node answers tips trust first: a chain a dialed peer vouched for comes before the
/// chains only strangers (peers that dialed us) claimed, though they sort before it.
#[test]
fn tips_are_answered_vouched_chains_first() {
    let store = MemoryStore::default();
    let honest = late_key();
    let junk = keys_sorting_before(&honest.validator(), 20);
    let mut blocks: Vec<SealedBlock> = junk.iter().map(genesis).collect();
    blocks.push(genesis(&honest));
    store.append_batch(&blocks).unwrap();
    let mut sync: Sync<u8> = Sync::new(SyncConfig::default());
    let (dialed, stranger, asker): (u8, u8, u8) = (1, 2, 3);
    let out = sync.handle(Input::DialedPeerConnected(dialed), 0, &store).unwrap();
    let tips_request = requests(&out).0[0];
    let data = wire::encode_response(&Response::Tips(vec![signed(&genesis(&honest))])).unwrap();
    sync.handle(Input::Response { from: dialed, request: tips_request, data }, 10, &store).unwrap();
    let out = sync.handle(Input::PeerConnected(stranger), 20, &store).unwrap();
    let tips_request = requests(&out).0[0];
    let data = wire::encode_response(&Response::Tips(junk.iter().map(|k| signed(&genesis(k))).collect())).unwrap();
    sync.handle(Input::Response { from: stranger, request: tips_request, data }, 30, &store).unwrap();
    sync.handle(Input::PeerConnected(asker), 40, &store).unwrap();
    let out = sync
        .handle(Input::Request { from: asker, channel: 9, data: wire::encode_request(&Request::Tips) }, 50, &store)
        .unwrap();
    let answer = out
        .iter()
        .find_map(|o| match o {
            Output::Respond { channel: 9, data } => Some(wire::decode_response(data).unwrap()),
            _ => None,
        })
        .expect("the tips request is answered");
    let Response::Tips(tips) = answer else { panic!("a tips answer") };
    assert_eq!(tips.len(), 21, "every chain held is answered");
    assert_eq!(tips[0].validator(), honest.validator(), "the vouched chain first");
    let rest: Vec<ValidatorKey> = tips[1..].iter().map(|t| t.validator()).collect();
    let mut sorted = rest.clone();
    sorted.sort();
    assert_eq!(rest, sorted, "within a tier, key order");
}

/// Strangers' chains take at most half the chain cap: a peer that dialed us and serves
/// 20 junk chains under a cap of 8 gets 4 of them stored, and a chain a dialed peer
/// claims afterwards still finds room (before, the junk filled the cap and it was refused).
#[test]
fn strangers_chains_fill_at_most_half_the_cap() {
    let store = MemoryStore::default();
    let honest = late_key();
    let junk = keys_sorting_before(&honest.validator(), 20);
    let by_key: BTreeMap<ValidatorKey, SealedBlock> =
        junk.iter().chain([&honest]).map(|k| (k.validator(), genesis(k))).collect();
    let config = SyncConfig { max_chains: 8, ..SyncConfig::default() };
    let mut sync: Sync<u8> = Sync::new(config);
    let (stranger, dialed): (u8, u8) = (1, 2);
    let answer = |validator: &ValidatorKey| vec![by_key[validator].bytes().to_vec()];
    let mut now = 0u64;
    let out = sync.handle(Input::PeerConnected(stranger), now, &store).unwrap();
    let tips_request = requests(&out).0[0];
    let data =
        wire::encode_response(&Response::Tips(junk.iter().map(|k| signed(&by_key[&k.validator()])).collect())).unwrap();
    now += 1;
    let out = sync.handle(Input::Response { from: stranger, request: tips_request, data }, now, &store).unwrap();
    serve_all(&mut sync, &store, out, &mut now, &answer);
    for _ in 0..5 {
        now += 1_000;
        let out = sync.handle(Input::Tick, now, &store).unwrap();
        serve_all(&mut sync, &store, out, &mut now, &answer);
    }
    assert_eq!(store.tips().unwrap().len(), 4, "strangers' chains fill half the cap of 8");
    let out = sync.handle(Input::DialedPeerConnected(dialed), now, &store).unwrap();
    let tips_request = requests(&out).0[0];
    let data = wire::encode_response(&Response::Tips(vec![signed(&by_key[&honest.validator()])])).unwrap();
    now += 1;
    let out = sync.handle(Input::Response { from: dialed, request: tips_request, data }, now, &store).unwrap();
    serve_all(&mut sync, &store, out, &mut now, &answer);
    assert!(store.tip(&honest.validator()).unwrap().is_some(), "the vouched chain found room");
}

/// Answers every block request in `out` (and those that follow) with `answer(validator)`.
fn serve_all(
    sync: &mut Sync<u8>,
    store: &MemoryStore,
    out: Vec<Output<u8>>,
    now: &mut u64,
    answer: &dyn Fn(&ValidatorKey) -> Vec<Vec<u8>>,
) {
    let mut pending = requests(&out).1;
    while let Some((request, from, validator)) = pending.pop() {
        *now += 1;
        let data = wire::encode_response(&Response::Blocks(answer(&validator))).unwrap();
        let out = sync.handle(Input::Response { from, request, data }, *now, store).unwrap();
        pending.extend(requests(&out).1);
    }
}

/// Issue 74, case 2: one peer we dialed that holds 20 junk chains sorting first gets half
/// the cap of 8 (not all of it), another dialed peer's honest chain still finds room, and
/// our tips answer takes vouched chains round-robin over the peers that vouched, so a
/// fresh node that dials us fetches the honest chain second, not after all the junk.
#[test]
fn one_dialed_peer_takes_half_the_cap_and_does_not_go_first_for_all() {
    let store = MemoryStore::default();
    let honest = late_key();
    let junk = keys_sorting_before(&honest.validator(), 20);
    let by_key: BTreeMap<ValidatorKey, SealedBlock> =
        junk.iter().chain([&honest]).map(|k| (k.validator(), genesis(k))).collect();
    let mut sync: Sync<u8> = Sync::new(SyncConfig { max_chains: 8, ..SyncConfig::default() });
    let (junk_holder, honest_peer, asker): (u8, u8, u8) = (1, 2, 3);
    let answer = |validator: &ValidatorKey| vec![by_key[validator].bytes().to_vec()];
    let mut now = 0u64;
    let out = sync.handle(Input::DialedPeerConnected(junk_holder), now, &store).unwrap();
    let tips_request = requests(&out).0[0];
    let data =
        wire::encode_response(&Response::Tips(junk.iter().map(|k| signed(&by_key[&k.validator()])).collect())).unwrap();
    now += 1;
    let out = sync.handle(Input::Response { from: junk_holder, request: tips_request, data }, now, &store).unwrap();
    serve_all(&mut sync, &store, out, &mut now, &answer);
    for _ in 0..5 {
        now += 1_000;
        let out = sync.handle(Input::Tick, now, &store).unwrap();
        serve_all(&mut sync, &store, out, &mut now, &answer);
    }
    assert_eq!(store.tips().unwrap().len(), 4, "one dialed peer's chains fill half the cap of 8");
    let out = sync.handle(Input::DialedPeerConnected(honest_peer), now, &store).unwrap();
    let tips_request = requests(&out).0[0];
    let data = wire::encode_response(&Response::Tips(vec![signed(&by_key[&honest.validator()])])).unwrap();
    now += 1;
    let out = sync.handle(Input::Response { from: honest_peer, request: tips_request, data }, now, &store).unwrap();
    serve_all(&mut sync, &store, out, &mut now, &answer);
    assert!(store.tip(&honest.validator()).unwrap().is_some(), "the other dialed peer's chain found room");
    sync.handle(Input::PeerConnected(asker), now, &store).unwrap();
    let out = sync
        .handle(Input::Request { from: asker, channel: 9, data: wire::encode_request(&Request::Tips) }, now + 1, &store)
        .unwrap();
    let Some(Response::Tips(tips)) = out.iter().find_map(|o| match o {
        Output::Respond { channel: 9, data } => Some(wire::decode_response(data).unwrap()),
        _ => None,
    }) else {
        panic!("a tips answer")
    };
    let order: Vec<ValidatorKey> = tips.iter().map(|t| t.validator()).collect();
    assert_eq!(order.len(), 5);
    assert_eq!(order[1], honest.validator(), "round-robin over the vouching peers: {order:?}");
    eprintln!("case-row | one dialed peer vouching for 20 junk chains sorting first, cap 8 | 4 stored (half the cap); another dialed peer's chain stored, answered 2nd of 5 |");
}
