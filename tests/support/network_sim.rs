//! A seeded network simulator with virtual time for the sync protocol: every node is a
//! `Sync` state machine over a `MemoryStore`, linked by a random connected topology with
//! loss, delays (so reordering) and duplicated gossip. The tests use it for convergence
//! under faults and equivocation; `benches/scale.rs` runs 64 validators through it and
//! reads its byte counters and the moment each node first held each block. Nodes can be
//! taken down and brought back (a validator that was away).

use crate::match_scenarios::SplitMix64;
use af::bytes::ValidatorKey;
use af::ledger::block::{seal, Tip};
use af::ledger::demo::demo_events;
use af::ledger::LedgerKey;
use af::p2p::blocks::{BlockStore, MemoryStore};
use af::p2p::protocol::{Input, Output, Sync, SyncConfig, Validation};
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

/// The simulator's one source of randomness, from its seed (the tests' generator too):
/// the simulations' splitmix64, its seed offset as the tests' generator always had it, so
/// a printed seed reruns the same test.
pub struct SimRng(SplitMix64);

impl SimRng {
    pub fn new(seed: u64) -> SimRng {
        SimRng(SplitMix64(seed ^ 0x9e37_79b9_7f4a_7c15))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// An index in `0..n`.
    pub fn pick(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }
}

pub type Node = usize;

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

pub struct Sim {
    pub rng: SimRng,
    loss: f64,
    pub now_ms: u64,
    seq: u64,
    queue: BinaryHeap<Scheduled>,
    neighbours: Vec<BTreeSet<Node>>,
    pub syncs: Vec<Sync<Node>>,
    pub stores: Vec<MemoryStore>,
    /// Gossip messages by id, and which nodes have seen each (gossipsub's seen cache).
    messages: Vec<Vec<u8>>,
    seen: Vec<BTreeSet<u64>>,
    /// Per node: gossip token -> message id, so an Accept can be forwarded.
    tokens: Vec<BTreeMap<u64, u64>>,
    /// Per node: inbound channel token -> (requester, its request id).
    channels: Vec<BTreeMap<u64, (Node, u64)>>,
    next_token: u64,
    pub evidence: Vec<Vec<(ValidatorKey, u64)>>,
    pub rejected_gossip: u64,
    /// Payload bytes each node sent and received (gossip, requests, responses).
    pub bytes_sent: Vec<u64>,
    pub bytes_received: Vec<u64>,
    /// When each block was sealed, and when each node first held it.
    pub sealed_at: BTreeMap<(ValidatorKey, u64), u64>,
    pub held_at: Vec<BTreeMap<(ValidatorKey, u64), u64>>,
    /// Nodes that are down: nothing reaches them or leaves them.
    down: BTreeSet<Node>,
    /// Each link's one-way delay range, in milliseconds.
    delay_ms: (u64, u64),
}

impl Sim {
    /// `n` nodes, each linked to at least `degree` others, losing `loss` of messages,
    /// with the tests' fast protocol timings.
    pub fn new(seed: u64, n: usize, degree: usize, loss: f64) -> Sim {
        let config = SyncConfig {
            tips_interval_ms: 1_000,
            request_timeout_ms: 2_000,
            blocks_per_request: 4,
            ..SyncConfig::default()
        };
        Sim::with_config(seed, n, degree, loss, config, (1, 80))
    }

    pub fn with_config(seed: u64, n: usize, degree: usize, loss: f64, config: SyncConfig, delay_ms: (u64, u64)) -> Sim {
        let mut rng = SimRng::new(seed);
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
            bytes_sent: vec![0; n],
            bytes_received: vec![0; n],
            sealed_at: BTreeMap::new(),
            held_at: vec![BTreeMap::new(); n],
            down: BTreeSet::new(),
            delay_ms,
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
        let from = match &delivery {
            Delivery::Gossip { from, .. } | Delivery::Request { from, .. } | Delivery::Response { from, .. } => *from,
            Delivery::Failed { .. } => to,
        };
        let lost = self.chance(self.loss) || self.down.contains(&to) || self.down.contains(&from);
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
        let size = match &delivery {
            Delivery::Gossip { id, .. } => self.messages[*id as usize].len() as u64,
            Delivery::Request { data, .. } | Delivery::Response { data, .. } => data.len() as u64,
            Delivery::Failed { .. } => 0,
        };
        self.bytes_sent[from] += size;
        self.bytes_received[to] += size;
        let delay = self.delay_ms.0 + self.rng.below(self.delay_ms.1.saturating_sub(self.delay_ms.0) + 1);
        if matches!(delivery, Delivery::Gossip { .. }) && self.chance(0.1) {
            let again = 1 + self.rng.below(200);
            self.schedule(to, delivery.clone(), again);
        }
        self.schedule(to, delivery, delay);
    }

    fn schedule(&mut self, to: Node, delivery: Delivery, delay_ms: u64) {
        if self.down.contains(&to) {
            return;
        }
        self.seq += 1;
        self.queue.push(Scheduled { at_ms: self.now_ms + delay_ms, seq: self.seq, to, delivery });
    }

    pub fn input(&mut self, node: Node, input: Input<Node>) {
        if self.down.contains(&node) {
            return;
        }
        let stored = self.syncs[node].counters.blocks_stored;
        let outputs =
            self.syncs[node].handle(input, self.now_ms, &self.stores[node]).expect("memory store never fails");
        if self.syncs[node].counters.blocks_stored != stored {
            self.note_held(node);
        }
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

    /// Records the first moment `node` holds each block it holds.
    fn note_held(&mut self, node: Node) {
        for (validator, tip) in self.stores[node].tips().expect("memory store never fails") {
            // Newly held blocks are the top of the chain: walk down to the first known.
            let now = self.now_ms;
            let held = &mut self.held_at[node];
            for height in (0..=tip.height).rev() {
                if held.contains_key(&(validator, height)) {
                    break;
                }
                held.insert((validator, height), now);
            }
        }
    }

    /// Takes `node` down: it receives and sends nothing until `up`.
    pub fn down(&mut self, node: Node) {
        self.down.insert(node);
        for peer in self.neighbours[node].clone() {
            self.input(peer, Input::PeerDisconnected(node));
        }
    }

    /// Brings `node` back: it and its neighbours reconnect.
    pub fn up(&mut self, node: Node) {
        self.down.remove(&node);
        for peer in self.neighbours[node].clone() {
            self.input(node, Input::PeerConnected(peer));
            self.input(peer, Input::PeerConnected(node));
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
    pub fn run_until(&mut self, until_ms: u64) {
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

    /// `node` seals a block of `key`'s chain of `events_per_block` events of `event_bytes`.
    pub fn own_block(&mut self, node: Node, key: &LedgerKey, events_per_block: u32, event_bytes: usize) {
        let validator = key.validator();
        let prev = self.stores[node].tip(&validator).expect("memory store never fails");
        let height = prev.map_or(0, |t| t.height + 1);
        let events = demo_events(&validator, height, events_per_block, event_bytes);
        let sealed = seal(key.signing_key(), prev.as_ref(), self.now_ms, events).expect("demo events seal");
        self.stores[node].append(&sealed).expect("our own next block appends");
        self.sealed_at.insert((validator, height), self.now_ms);
        self.held_at[node].insert((validator, height), self.now_ms);
        self.input(node, Input::OwnBlock { validator, height });
    }

    pub fn tips(&self, node: Node) -> Vec<(ValidatorKey, Tip)> {
        self.stores[node].tips().expect("memory store never fails")
    }
}
