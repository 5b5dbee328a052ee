//! The sync protocol under a seeded network simulator with virtual time: random
//! topologies, message loss up to 30%, delays, duplicates and reordering. All logs must
//! converge; an equivocating validator must be caught by every honest node. A failing
//! run prints its seed (rerun with AF_TEST_SEED=N).

use crate::TestRng;
use af::bytes::ValidatorKey;
use af::ledger::block::{seal, SealedBlock, Tip};
use af::ledger::demo::demo_events;
use af::ledger::LedgerKey;
use af::p2p::blocks::{BlockStore, MemoryStore};
use af::p2p::protocol::{Input, Output, Sync, SyncConfig, Validation};
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

type Node = usize;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Delivery {
    Gossip { from: Node, id: u64 },
    Request { from: Node, request: u64, data: Vec<u8> },
    Response { from: Node, request: u64, data: Vec<u8> },
    Failed { request: u64 },
}

#[derive(PartialEq, Eq)]
struct Scheduled {
    at_ms: u64,
    seq: u64,
    to: Node,
    delivery: Delivery,
}

impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.at_ms, other.seq).cmp(&(self.at_ms, self.seq)) // min-heap
    }
}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

struct Sim {
    rng: TestRng,
    loss: f64,
    now_ms: u64,
    seq: u64,
    queue: BinaryHeap<Scheduled>,
    neighbours: Vec<BTreeSet<Node>>,
    syncs: Vec<Sync<Node>>,
    stores: Vec<MemoryStore>,
    /// Gossip messages by id, and which nodes have seen each (gossipsub's seen cache).
    messages: Vec<Vec<u8>>,
    seen: Vec<BTreeSet<u64>>,
    /// Per node: gossip token -> message id, so an Accept can be forwarded.
    tokens: Vec<BTreeMap<u64, u64>>,
    /// Per node: inbound channel token -> (requester, its request id).
    channels: Vec<BTreeMap<u64, (Node, u64)>>,
    next_token: u64,
    evidence: Vec<Vec<(ValidatorKey, u64)>>,
    rejected_gossip: u64,
}

impl Sim {
    fn new(seed: u64, n: usize, degree: usize, loss: f64) -> Sim {
        let mut rng = TestRng::new(seed);
        // A ring (so the graph is connected) plus random chords.
        let mut neighbours = vec![BTreeSet::new(); n];
        for i in 0..n {
            let j = (i + 1) % n;
            neighbours[i].insert(j);
            neighbours[j].insert(i);
        }
        for i in 0..n {
            while neighbours[i].len() < degree.min(n - 1) {
                let j = rng.below(n as u64) as usize;
                if j != i {
                    neighbours[i].insert(j);
                    neighbours[j].insert(i);
                }
            }
        }
        let config = SyncConfig {
            tips_interval_ms: 1_000,
            request_timeout_ms: 2_000,
            blocks_per_request: 4,
            ..SyncConfig::default()
        };
        let mut sim = Sim {
            rng,
            loss,
            now_ms: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            neighbours,
            syncs: (0..n).map(|_| Sync::new(config.clone())).collect(),
            stores: (0..n).map(|_| MemoryStore::default()).collect(),
            messages: Vec::new(),
            seen: vec![BTreeSet::new(); n],
            tokens: vec![BTreeMap::new(); n],
            channels: vec![BTreeMap::new(); n],
            next_token: 0,
            evidence: vec![Vec::new(); n],
            rejected_gossip: 0,
        };
        for node in 0..n {
            for peer in sim.neighbours[node].clone() {
                sim.input(node, Input::PeerConnected(peer));
            }
        }
        sim
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.rng.below(1_000_000) as f64) < p * 1_000_000.0
    }

    /// Sends with loss, a random delay (so reordering), and sometimes twice.
    fn send(&mut self, to: Node, delivery: Delivery) {
        let lost = self.chance(self.loss);
        let delivery = match (&delivery, lost) {
            (Delivery::Gossip { .. }, true) => return,
            // A lost request or response surfaces as a failed request at the requester.
            (Delivery::Request { from, request, .. }, true) => {
                let (requester, request) = (*from, *request);
                self.schedule(requester, Delivery::Failed { request }, 50);
                return;
            }
            (Delivery::Response { request, .. }, true) => {
                let request = *request;
                self.schedule(to, Delivery::Failed { request }, 50);
                return;
            }
            _ => delivery,
        };
        let delay = 1 + self.rng.below(80);
        if matches!(delivery, Delivery::Gossip { .. }) && self.chance(0.1) {
            let again = 1 + self.rng.below(200);
            self.schedule(to, delivery.clone(), again);
        }
        self.schedule(to, delivery, delay);
    }

    fn schedule(&mut self, to: Node, delivery: Delivery, delay_ms: u64) {
        self.seq += 1;
        self.queue.push(Scheduled { at_ms: self.now_ms + delay_ms, seq: self.seq, to, delivery });
    }

    fn input(&mut self, node: Node, input: Input<Node>) {
        let outputs =
            self.syncs[node].handle(input, self.now_ms, &self.stores[node]).expect("memory store never fails");
        for output in outputs {
            match output {
                Output::Publish(data) => {
                    self.messages.push(data);
                    let id = self.messages.len() as u64 - 1;
                    self.seen[node].insert(id);
                    self.forward(node, id, None);
                }
                Output::Validate { token, from, result } => {
                    let id = self.tokens[node].remove(&token).expect("a token we issued");
                    match result {
                        Validation::Accept => self.forward(node, id, Some(from)),
                        Validation::Reject => self.rejected_gossip += 1,
                        Validation::Ignore => {}
                    }
                }
                Output::SendRequest { to, request, data } => {
                    self.send(to, Delivery::Request { from: node, request, data })
                }
                Output::Respond { channel, data } => {
                    let (requester, request) = self.channels[node].remove(&channel).expect("a channel we issued");
                    self.send(requester, Delivery::Response { from: node, request, data });
                }
                Output::Evidence(evidence) => self.evidence[node].push((evidence.validator, evidence.height)),
                Output::Misbehaved { peer, reason } => panic!("honest peer {peer} blamed by {node}: {reason}"),
            }
        }
    }

    fn forward(&mut self, node: Node, id: u64, except: Option<Node>) {
        for peer in self.neighbours[node].clone() {
            if Some(peer) != except {
                self.send(peer, Delivery::Gossip { from: node, id });
            }
        }
    }

    fn deliver(&mut self, to: Node, delivery: Delivery) {
        match delivery {
            Delivery::Gossip { from, id } => {
                if !self.seen[to].insert(id) {
                    return; // gossipsub drops what it has seen before validation
                }
                self.next_token += 1;
                let token = self.next_token;
                self.tokens[to].insert(token, id);
                let data = self.messages[id as usize].clone();
                self.input(to, Input::Gossip { from, token, data });
            }
            Delivery::Request { from, request, data } => {
                self.next_token += 1;
                let channel = self.next_token;
                self.channels[to].insert(channel, (from, request));
                self.input(to, Input::Request { from, channel, data });
            }
            Delivery::Response { from, request, data } => self.input(to, Input::Response { from, request, data }),
            Delivery::Failed { request } => self.input(to, Input::RequestFailed { request }),
        }
    }

    /// Runs virtual time to `until_ms`, ticking every node every 100 ms.
    fn run_until(&mut self, until_ms: u64) {
        while self.now_ms < until_ms {
            let next_tick = (self.now_ms / 100 + 1) * 100;
            while self.queue.peek().is_some_and(|s| s.at_ms <= next_tick) {
                let scheduled = self.queue.pop().expect("peeked");
                self.now_ms = scheduled.at_ms.max(self.now_ms);
                self.deliver(scheduled.to, scheduled.delivery);
            }
            self.now_ms = next_tick;
            for node in 0..self.syncs.len() {
                self.input(node, Input::Tick);
            }
        }
    }

    fn own_block(&mut self, node: Node, key: &LedgerKey, events_per_block: u32) {
        let validator = key.validator();
        let prev = self.stores[node].tip(&validator).unwrap();
        let height = prev.map_or(0, |t| t.height + 1);
        let sealed =
            seal(key.signing_key(), prev.as_ref(), self.now_ms, demo_events(&validator, height, events_per_block, 200))
                .unwrap();
        self.stores[node].append(&sealed).unwrap();
        self.input(node, Input::OwnBlock { validator, height });
    }

    fn tips(&self, node: Node) -> Vec<(ValidatorKey, Tip)> {
        self.stores[node].tips().unwrap()
    }
}

fn keys(n: usize, salt: u8) -> Vec<LedgerKey> {
    (0..n)
        .map(|i| {
            LedgerKey::from_seed([
                i as u8 + 1,
                salt,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
            ])
        })
        .collect()
}

fn seeds(default_runs: u64) -> Vec<u64> {
    match std::env::var("AF_TEST_SEED") {
        Ok(seed) => vec![seed.parse().expect("AF_TEST_SEED is a number")],
        Err(_) => (1..=default_runs).collect(),
    }
}

#[test]
fn eight_validators_converge_under_loss_delay_duplication_and_reordering() {
    for seed in seeds(12) {
        let loss = [0.0, 0.1, 0.2, 0.3][(seed % 4) as usize];
        let n = 8;
        let mut sim = Sim::new(seed, n, 3, loss);
        let keys = keys(n, 1);
        // Each validator writes 10 blocks at random moments over the first 5 seconds.
        let mut writes: Vec<(u64, Node)> = Vec::new();
        for node in 0..n {
            for _ in 0..10 {
                writes.push((sim.rng.below(5_000), node));
            }
        }
        writes.sort();
        for (at, node) in writes {
            sim.run_until(at);
            sim.own_block(node, &keys[node], 3);
        }
        let mut converged_at = None;
        for step in 1..=120 {
            sim.run_until(5_000 + step * 500);
            let reference = sim.tips(0);
            if reference.len() == n && (1..n).all(|node| sim.tips(node) == reference) {
                converged_at = Some(sim.now_ms);
                break;
            }
        }
        let converged_at = converged_at.unwrap_or_else(|| {
            let summary: Vec<usize> = (0..n).map(|node| sim.tips(node).len()).collect();
            panic!(
                "seed {seed} (loss {loss}): logs did not converge in 65 virtual seconds; chains per node {summary:?}"
            )
        });
        for node in 0..n {
            for (validator, tip) in sim.tips(node) {
                assert_eq!(tip.height, 9, "seed {seed}: node {node} holds {validator} to height {}", tip.height);
            }
            assert!(sim.evidence[node].is_empty(), "seed {seed}: no one equivocated");
        }
        assert_eq!(sim.rejected_gossip, 0, "seed {seed}: honest gossip is never rejected");
        eprintln!("seed {seed}: loss {loss}: converged at {converged_at} ms virtual");
    }
}

#[test]
fn an_equivocating_validator_is_caught_by_every_honest_node() {
    for seed in seeds(6) {
        let n = 6;
        let mut sim = Sim::new(seed, n, 3, 0.1);
        let honest = keys(n, 2);
        let cheat = LedgerKey::from_seed([99; 32]);
        let validator = cheat.validator();
        // Two blocks 0 of the cheat's chain, each given to half of the nodes.
        let forks: Vec<SealedBlock> = (0..2)
            .map(|fork| seal(cheat.signing_key(), None, fork, demo_events(&validator, 0, 2, 100)).unwrap())
            .collect();
        assert_ne!(forks[0].decoded().hash, forks[1].decoded().hash);
        for node in 0..n {
            sim.stores[node].append(&forks[node % 2]).unwrap();
            sim.input(node, Input::OwnBlock { validator, height: 0 });
            sim.own_block(node, &honest[node], 2);
        }
        sim.run_until(30_000);
        for node in 0..n {
            assert_eq!(sim.evidence[node], vec![(validator, 0)], "seed {seed}: node {node} recorded the evidence once");
            assert_eq!(sim.syncs[node].forked().get(&validator), Some(&0));
            // The honest chains converged all the same.
            let honest_tips = sim.tips(node).into_iter().filter(|(v, _)| *v != validator).count();
            assert_eq!(honest_tips, n, "seed {seed}: node {node}");
        }
    }
}
