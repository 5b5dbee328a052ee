//! The node's Prometheus metrics: one registry per process, handed to each part that
//! records (miner client, match loop, log writer, anchoring, network) as an `Arc`, and
//! encoded in the text exposition format by `prometheus-client` for `GET /metrics`.
//! Label values come from a closed set (outcomes, verdicts, env names, reasons) or from
//! miners and validators the node already tracks, so cardinality stays bounded.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// How one request to a miner ended (the `outcome` label).
pub mod outcome {
    pub const OK: &str = "ok";
    pub const TIMEOUT: &str = "timeout";
    pub const CONNECT: &str = "connect";
    pub const HTTP_4XX: &str = "http_4xx";
    pub const HTTP_429: &str = "http_429";
    pub const HTTP_5XX: &str = "http_5xx";
    pub const TOO_LARGE: &str = "too_large";
    pub const UNPARSABLE: &str = "unparsable";
    pub const TRANSPORT: &str = "transport";
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MinerOutcome {
    pub miner: String,
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Miner {
    pub miner: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Verdict {
    pub verdict: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EnvGame {
    pub env: String,
    /// The contender's result: win, loss or draw.
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ChainSend {
    /// `commitment` or `weights`.
    pub kind: String,
    /// `sent`, `refused` (the chain or a limit said no) or `failed` (could not ask).
    pub result: String,
    /// A short reason, e.g. `rate_limited`, `commit_reveal`, `rpc`; empty when sent.
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ChainRpc {
    pub call: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PeerChain {
    pub validator: String,
}

/// Every metric the node exports. Cloning a handle (`Family`, `Counter`...) shares it.
pub struct Metrics {
    registry: Registry,
    pub miner_requests: Family<MinerOutcome, Counter>,
    pub miner_latency_seconds: Family<Miner, Histogram, fn() -> Histogram>,
    pub miner_overhead_seconds: Family<Miner, Histogram, fn() -> Histogram>,
    /// The miners that have label sets now, oldest first (at most `MAX_MINER_LABELS`).
    miner_labels: Mutex<VecDeque<String>>,
    pub matches_started: Counter,
    pub matches_decided: Family<Verdict, Counter>,
    pub games: Family<EnvGame, Counter>,
    pub blocks_appended: Counter,
    pub bytes_appended: Counter,
    pub append_seconds: Histogram,
    pub peers: Gauge,
    pub chain_lag_blocks: Family<PeerChain, Gauge>,
    pub chain_sends: Family<ChainSend, Counter>,
    pub chain_rpc_errors: Family<ChainRpc, Counter>,
    /// Log lines the per-call-site rate limit held back (`logging::LineLimiter`).
    pub log_lines_suppressed: Counter,
    /// Bytes reserved from the memory budget now, and its limit (`budget::MemoryBudget`).
    pub budget_used_bytes: Gauge,
    pub budget_limit_bytes: Gauge,
    /// Unix milliseconds of the validator loop's last sign of life (0: no loop yet).
    heartbeat_ms: AtomicU64,
    /// Why the log stopped being writable, if it did.
    log_failure: Mutex<Option<String>>,
    /// What the anchoring task last saw of the chain (none: no chain to anchor on).
    chain: Mutex<Option<ChainSeen>>,
    pub chain_head_block: Gauge,
    /// Seconds the chain has given us nothing new (`ChainSeen::head_age_ms`), set when
    /// scraped: the age `/healthz` judges, so one alert can fire when it does.
    pub chain_head_age_seconds: Gauge<f64, AtomicU64>,
    /// Seconds an anchoring round takes (`ChainSeen::round_ms`), set when scraped.
    pub chain_round_seconds: Gauge<f64, AtomicU64>,
    /// 1 while our hotkey holds a uid on the subnet, 0 once it does not (-1: not known).
    pub chain_registered: Gauge,
    /// 1 once a protocol version this build does not apply has activated: it signs
    /// nothing more (ledger-spec/15); 0 otherwise.
    pub protocol_upgrade_required: Gauge,
    upgrade_required: Mutex<Option<String>>,
    pub chain_blocks_since_commitment: Gauge,
    pub chain_blocks_since_weights: Gauge,
    /// Folded from our own log when `/metrics` is read: the champion, the ratio to beat
    /// and our tip; vTrust per validator from the latest replay.
    pub champion_uid: Gauge,
    pub ratio_to_beat: Gauge<f64, AtomicU64>,
    pub tip_height: Gauge,
    /// Block bytes of every log the store holds, as the last replay folded them.
    pub store_block_bytes: Gauge,
    /// The store file's size, and the bytes an unprivileged writer may still use on its
    /// file system: a validator that runs for weeks must be told before its disk fills.
    pub store_file_bytes: Gauge,
    pub store_disk_free_bytes: Gauge,
    /// Matches of every log the last replay holds, and how many of them it holds in
    /// memory (the rest are in the replay's file): the second stays bounded for weeks.
    /// The state's matches are always in the file.
    pub replay_matches: Gauge,
    pub replay_matches_in_memory: Gauge,
    pub state_matches: Gauge,
    pub vtrust: Family<PeerChain, Gauge<f64, AtomicU64>>,
    /// Blocks of the logs this store holds that its archive (`[archive]`) did not hold
    /// at the last attempt to publish; its failed attempts; its last success (unix
    /// seconds); blocks of other logs pruned since the start, their bodies left to it.
    pub archive_behind_blocks: Gauge,
    pub archive_failures: Counter,
    pub archive_published_time_seconds: Gauge,
    pub archive_pruned_blocks: Counter,
    /// The allocator's live heap and the pages it holds, read by `heap_probe` when
    /// `/metrics` is read: RSS growth with a flat live heap is fragmentation, not a leak.
    pub heap_allocated_bytes: Gauge,
    pub heap_active_bytes: Gauge,
    pub heap_metadata_bytes: Gauge,
    pub heap_resident_bytes: Gauge,
    heap_probe: Option<HeapProbe>,
}

/// Reads the process's allocator; the binary picks the allocator, so it supplies the probe.
pub type HeapProbe = fn() -> Option<HeapSample>;

/// What the allocator holds, in bytes. Where RSS grows with a flat live heap, these say
/// why: `active - allocated` is room in partly used pages (fragmentation), `metadata` the
/// allocator's own books, and `resident - active - metadata` freed pages not yet given back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeapSample {
    /// Handed out and not had back: the live heap.
    pub allocated: u64,
    /// In pages that hold at least one live allocation.
    pub active: u64,
    pub metadata: u64,
    /// In physical pages.
    pub resident: u64,
}

/// Miners with label sets at once: a validator meets new miners for weeks, so the
/// least recently labelled miner's series are dropped past this (the subnet has 256 uids;
/// a scrape every 15 s has long kept the dropped ones).
pub const MAX_MINER_LABELS: usize = 256;

/// Every `outcome` label, so a dropped miner's series can be named for removal.
const OUTCOMES: [&str; 9] = [
    outcome::OK,
    outcome::TIMEOUT,
    outcome::CONNECT,
    outcome::HTTP_4XX,
    outcome::HTTP_429,
    outcome::HTTP_5XX,
    outcome::TOO_LARGE,
    outcome::UNPARSABLE,
    outcome::TRANSPORT,
];

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Metrics whose `log_lines_suppressed` is the counter the log filter increments.
    pub fn with_log_counter(log_lines_suppressed: Counter) -> Metrics {
        let mut metrics = Metrics::new();
        metrics.log_lines_suppressed = log_lines_suppressed.clone();
        metrics.registry.register(
            "log_lines_suppressed",
            "Log lines not printed because their call site was over its rate",
            log_lines_suppressed,
        );
        metrics
    }

    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("af");
        // 1 ms .. ~65 s by powers of two: miners answer in milliseconds to minutes.
        fn seconds() -> Histogram {
            Histogram::new(exponential_buckets(0.001, 2.0, 17))
        }
        let metrics = Metrics {
            miner_requests: Family::default(),
            miner_latency_seconds: Family::new_with_constructor(seconds),
            miner_overhead_seconds: Family::new_with_constructor(seconds),
            miner_labels: Mutex::new(VecDeque::new()),
            matches_started: Counter::default(),
            matches_decided: Family::default(),
            games: Family::default(),
            blocks_appended: Counter::default(),
            bytes_appended: Counter::default(),
            // 50 us .. ~1.6 s: an fsync'd append.
            append_seconds: Histogram::new(exponential_buckets(0.00005, 2.0, 16)),
            peers: Gauge::default(),
            chain_lag_blocks: Family::default(),
            chain_sends: Family::default(),
            chain_rpc_errors: Family::default(),
            log_lines_suppressed: Counter::default(),
            budget_used_bytes: Gauge::default(),
            budget_limit_bytes: Gauge::default(),
            heartbeat_ms: AtomicU64::new(0),
            log_failure: Mutex::new(None),
            chain: Mutex::new(None),
            chain_head_block: Gauge::default(),
            chain_head_age_seconds: Gauge::default(),
            chain_round_seconds: Gauge::default(),
            chain_registered: {
                let g = Gauge::default();
                g.set(-1);
                g
            },
            protocol_upgrade_required: Gauge::default(),
            upgrade_required: Mutex::new(None),
            chain_blocks_since_commitment: Gauge::default(),
            chain_blocks_since_weights: Gauge::default(),
            champion_uid: Gauge::default(),
            ratio_to_beat: Gauge::default(),
            tip_height: Gauge::default(),
            store_block_bytes: Gauge::default(),
            store_file_bytes: Gauge::default(),
            store_disk_free_bytes: Gauge::default(),
            replay_matches: Gauge::default(),
            replay_matches_in_memory: Gauge::default(),
            state_matches: Gauge::default(),
            vtrust: Family::default(),
            archive_behind_blocks: Gauge::default(),
            archive_failures: Counter::default(),
            archive_pruned_blocks: Counter::default(),
            archive_published_time_seconds: Gauge::default(),
            heap_allocated_bytes: Gauge::default(),
            heap_active_bytes: Gauge::default(),
            heap_metadata_bytes: Gauge::default(),
            heap_resident_bytes: Gauge::default(),
            heap_probe: None,
            registry: Registry::default(),
        };
        let r = &mut registry;
        r.register(
            "miner_requests",
            "Requests to miners (after retries), by miner hotkey and outcome",
            metrics.miner_requests.clone(),
        );
        r.register(
            "miner_latency_seconds",
            "Client-side latency of each HTTP attempt to a miner, by miner hotkey",
            metrics.miner_latency_seconds.clone(),
        );
        r.register(
            "miner_overhead_seconds",
            "Latency minus the miner's own Server-Timing, for attempts that report it, by miner hotkey",
            metrics.miner_overhead_seconds.clone(),
        );
        r.register(
            "matches_started",
            "Matches started (or resumed) by this validator",
            metrics.matches_started.clone(),
        );
        r.register("matches_decided", "Matches decided, by verdict", metrics.matches_decided.clone());
        r.register("games", "Paired games played, by env and the contender's result", metrics.games.clone());
        r.register("blocks_appended", "Blocks appended to our own log", metrics.blocks_appended.clone());
        r.register("block_bytes_appended", "Bytes of blocks appended to our own log", metrics.bytes_appended.clone());
        r.register("append_seconds", "Time to append and fsync one block", metrics.append_seconds.clone());
        r.register("peers", "Connected libp2p peers", metrics.peers.clone());
        r.register(
            "archive_behind_blocks",
            "Blocks this store holds that its archive did not hold at the last attempt to publish",
            metrics.archive_behind_blocks.clone(),
        );
        r.register(
            "archive_failures",
            "Attempts to publish to the archive that failed",
            metrics.archive_failures.clone(),
        );
        r.register(
            "archive_pruned_blocks",
            "Blocks of other validators' logs pruned to header and leaf hashes since the start, their bodies left to the archive",
            metrics.archive_pruned_blocks.clone(),
        );
        r.register(
            "archive_published_time_seconds",
            "When the archive last took a whole publish (unix seconds; 0: not yet)",
            metrics.archive_published_time_seconds.clone(),
        );
        r.register(
            "chain_lag_blocks",
            "Blocks a peer's log is ahead of our copy of it, by validator",
            metrics.chain_lag_blocks.clone(),
        );
        r.register(
            "chain_sends",
            "Commitments and weights sent to the chain, refused or failed, by reason",
            metrics.chain_sends.clone(),
        );
        r.register("chain_rpc_errors", "Chain RPC calls that failed, by call", metrics.chain_rpc_errors.clone());
        r.register(
            "chain_head_block",
            "The chain's head block as the anchoring task last read it",
            metrics.chain_head_block.clone(),
        );
        r.register(
            "chain_head_age_seconds",
            "Seconds the chain head has stood (unmoved or unanswered; since start if the chain never answered); /healthz fails past 60",
            metrics.chain_head_age_seconds.clone(),
        );
        r.register(
            "chain_round_seconds",
            "Seconds one anchoring round (head, limits, commitment, weights) takes, the one in progress or the last; /healthz fails past 60 (a chain that answers, too slowly to work)",
            metrics.chain_round_seconds.clone(),
        );
        r.register(
            "protocol_upgrade_required",
            "1 once a protocol version this build does not apply has activated (it signs nothing more; upgrade af), else 0",
            metrics.protocol_upgrade_required.clone(),
        );
        r.register(
            "chain_registered",
            "1 while our hotkey holds a uid on the subnet, 0 once it does not (deregistered: nothing is sent), -1 not known yet",
            metrics.chain_registered.clone(),
        );
        r.register(
            "chain_blocks_since_commitment",
            "Chain blocks since our last commitment of our tip (or since this process first saw the chain)",
            metrics.chain_blocks_since_commitment.clone(),
        );
        r.register(
            "chain_blocks_since_weights",
            "Chain blocks since our last weights (set or committed; or since this process first saw the chain)",
            metrics.chain_blocks_since_weights.clone(),
        );
        r.register("champion_uid", "The champion's uid in our own log (-1: none yet)", metrics.champion_uid.clone());
        r.register(
            "ratio_to_beat",
            "The ratio to beat now, after decay, in our own log (0.5 to 1)",
            metrics.ratio_to_beat.clone(),
        );
        r.register("tip_height", "The height of our own log's last block", metrics.tip_height.clone());
        r.register(
            "store_block_bytes",
            "Bytes of the blocks of every log the store holds, as the last replay folded them",
            metrics.store_block_bytes.clone(),
        );
        r.register("store_file_bytes", "Bytes of the store's file on disk", metrics.store_file_bytes.clone());
        r.register(
            "replay_matches",
            "Matches of every log the latest replay holds, each log's own play counted",
            metrics.replay_matches.clone(),
        );
        r.register(
            "replay_matches_in_memory",
            "Of those, the matches held in memory; the rest are in the replay's file",
            metrics.replay_matches_in_memory.clone(),
        );
        r.register(
            "state_matches",
            "Matches of the network state the latest replay combined, one per pair of miners",
            metrics.state_matches.clone(),
        );
        r.register(
            "store_disk_free_bytes",
            "Bytes still free to the validator on the file system holding its store",
            metrics.store_disk_free_bytes.clone(),
        );
        r.register(
            "vtrust",
            "Each validator's vTrust (0 to 1) in the latest replay of every log held, by ledger key",
            metrics.vtrust.clone(),
        );
        r.register(
            "memory_budget_used_bytes",
            "Bytes peers and readers make this node hold now (responses, buffered blocks)",
            metrics.budget_used_bytes.clone(),
        );
        r.register(
            "memory_budget_limit_bytes",
            "The most bytes peers and readers may make this node hold ([node] memory_budget_mb)",
            metrics.budget_limit_bytes.clone(),
        );
        Metrics { registry, ..metrics }
    }

    /// These metrics with the allocator's heap gauges, read through `probe`.
    pub fn with_heap_probe(mut self, probe: HeapProbe) -> Metrics {
        self.registry.register(
            "heap_allocated_bytes",
            "Bytes the process's allocator has handed out and not had back (its live heap)",
            self.heap_allocated_bytes.clone(),
        );
        self.registry.register(
            "heap_active_bytes",
            "Bytes in the allocator's pages that hold at least one live allocation (above the live heap: fragmentation)",
            self.heap_active_bytes.clone(),
        );
        self.registry.register(
            "heap_metadata_bytes",
            "Bytes the allocator uses for its own bookkeeping",
            self.heap_metadata_bytes.clone(),
        );
        self.registry.register(
            "heap_resident_bytes",
            "Bytes of memory the process's allocator holds in physical pages",
            self.heap_resident_bytes.clone(),
        );
        self.heap_probe = Some(probe);
        self
    }

    /// Sets the disk gauges from the store file at `path` (left as they were if it cannot
    /// be read).
    pub fn sample_disk(&self, path: &std::path::Path) {
        if let Ok(meta) = std::fs::metadata(path) {
            self.store_file_bytes.set(i64::try_from(meta.len()).unwrap_or(i64::MAX));
        }
        if let Ok(fs) = rustix::fs::statvfs(path) {
            let free = fs.f_bavail.saturating_mul(fs.f_frsize);
            self.store_disk_free_bytes.set(i64::try_from(free).unwrap_or(i64::MAX));
        }
    }

    /// Sets the heap gauges from the probe, if there is one and it answers.
    pub fn sample_heap(&self) {
        if let Some(heap) = self.heap_probe.and_then(|probe| probe()) {
            let set = |gauge: &Gauge, bytes: u64| gauge.set(i64::try_from(bytes).unwrap_or(i64::MAX));
            set(&self.heap_allocated_bytes, heap.allocated);
            set(&self.heap_active_bytes, heap.active);
            set(&self.heap_metadata_bytes, heap.metadata);
            set(&self.heap_resident_bytes, heap.resident);
        }
    }

    /// OpenMetrics 1.0 text, as `GET /metrics` serves a scraper that asks for it.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("writing to a String never fails");
        text
    }

    /// The classic Prometheus text format 0.0.4, for scrapers and parsers that do not
    /// ask for OpenMetrics: a counter's `# HELP`/`# TYPE` carry its `_total` sample name
    /// (0.0.4 names a family by its samples), and `# EOF` is not part of that format.
    pub fn encode_classic(&self) -> String {
        let open = self.encode();
        let mut counters = std::collections::HashSet::new();
        for line in open.lines() {
            if let Some(name) = line.strip_prefix("# TYPE ").and_then(|rest| rest.strip_suffix(" counter")) {
                counters.insert(name.to_string());
            }
        }
        let mut text = String::with_capacity(open.len() + 64 * counters.len());
        for line in open.lines() {
            if line == "# EOF" || line.starts_with("# UNIT ") {
                continue;
            }
            let meta = ["# HELP ", "# TYPE "].into_iter().find(|prefix| line.starts_with(prefix));
            match meta.map(|prefix| (prefix, line[prefix.len()..].split_once(' '))) {
                Some((prefix, Some((name, rest)))) if counters.contains(name) => {
                    text.push_str(&format!("{prefix}{name}_total {rest}"));
                }
                _ => text.push_str(line),
            }
            text.push('\n');
        }
        text
    }

    pub fn miner_request(&self, miner: &str, outcome: &str) {
        self.label_miner(miner);
        self.miner_requests.get_or_create(&MinerOutcome { miner: miner.into(), outcome: outcome.into() }).inc();
    }

    /// One HTTP attempt to `miner` took `seconds`, of which the miner reported `server`.
    pub fn miner_attempt(&self, miner: &str, seconds: f64, server: Option<f64>) {
        self.label_miner(miner);
        let labels = Miner { miner: miner.into() };
        self.miner_latency_seconds.get_or_create(&labels).observe(seconds);
        if let Some(server) = server {
            self.miner_overhead_seconds.get_or_create(&labels).observe(seconds - server);
        }
    }

    /// Marks `miner` as the most recently labelled, dropping the series of the least
    /// recently labelled one past `MAX_MINER_LABELS`.
    fn label_miner(&self, miner: &str) {
        let mut labels = self.miner_labels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = labels.iter().position(|m| m == miner) {
            if at + 1 == labels.len() {
                return;
            }
            let known = labels.remove(at).expect("the position was just found");
            labels.push_back(known);
            return;
        }
        labels.push_back(miner.to_string());
        while labels.len() > MAX_MINER_LABELS {
            let Some(gone) = labels.pop_front() else { break };
            for outcome in OUTCOMES {
                self.miner_requests.remove(&MinerOutcome { miner: gone.clone(), outcome: outcome.into() });
            }
            self.miner_latency_seconds.remove(&Miner { miner: gone.clone() });
            self.miner_overhead_seconds.remove(&Miner { miner: gone });
        }
    }

    pub fn game(&self, env: &str, outcome: &str) {
        self.games.get_or_create(&EnvGame { env: env.into(), outcome: outcome.into() }).inc();
    }

    pub fn match_decided(&self, verdict: &str) {
        self.matches_decided.get_or_create(&Verdict { verdict: verdict.into() }).inc();
    }

    pub fn block_appended(&self, bytes: u64, seconds: f64) {
        self.blocks_appended.inc();
        self.bytes_appended.inc_by(bytes);
        self.append_seconds.observe(seconds);
    }

    pub fn chain_send(&self, kind: &str, result: &str, reason: &str) {
        self.chain_sends
            .get_or_create(&ChainSend { kind: kind.into(), result: result.into(), reason: reason.into() })
            .inc();
    }

    pub fn chain_rpc_error(&self, call: &str) {
        self.chain_rpc_errors.get_or_create(&ChainRpc { call: call.into() }).inc();
    }

    /// A read of the chain's miners (discovery) that answered, or failed.
    pub fn miners_read(&self, ok: bool, now_ms: u64) {
        self.update_chain(|seen| seen.miners_read(ok, now_ms));
    }

    /// An anchoring round begins at `now_ms` (`true`), or the one in progress ends.
    pub fn anchor_round(&self, began: bool, now_ms: u64) {
        self.update_chain(|seen| seen.anchor_round(began, now_ms));
    }

    /// The anchoring task read the chain's head `block` at `now_ms`.
    pub fn chain_read(&self, block: u64, now_ms: u64) {
        self.update_chain(|seen| seen.read(block, now_ms));
    }

    /// Whether our hotkey holds a uid on the subnet, as of the chain's head: `None` once
    /// registered, else why not.
    pub fn chain_registration(&self, deregistered: Option<String>) {
        self.chain_registered.set(if deregistered.is_some() { 0 } else { 1 });
        self.update_chain(|seen| seen.deregistered = deregistered);
    }

    /// Our commitment (or weights) landed at chain block `block`.
    pub fn chain_anchored(&self, weights: bool, block: u64) {
        self.update_chain(|seen| seen.anchored(weights, block));
    }

    /// A commitment that was due (or weights) failed to go out at head `block`.
    pub fn chain_send_failed(&self, weights: bool, block: u64) {
        self.update_chain(|seen| seen.send_failed(weights, block));
    }

    /// A chain is configured: health reports on it from `now_ms` on.
    pub fn chain_expected(&self, now_ms: u64) {
        self.update_chain(|seen| seen.expected_ms = now_ms);
    }

    fn update_chain(&self, change: impl FnOnce(&mut ChainSeen)) {
        let mut chain = self.chain.lock().unwrap_or_else(|e| e.into_inner());
        let seen = chain.get_or_insert_with(ChainSeen::default);
        change(seen);
        if let Some(since) = seen.blocks_since_commitment() {
            self.chain_blocks_since_commitment.set(since as i64);
        }
        if let Some(since) = seen.blocks_since_weights() {
            self.chain_blocks_since_weights.set(since as i64);
        }
        if let Some(head) = seen.head {
            self.chain_head_block.set(head as i64);
        }
    }

    #[cfg(test)]
    pub(crate) fn set_chain_seen(&self, seen: ChainSeen) {
        *self.chain.lock().unwrap() = Some(seen);
    }

    /// Sets the chain's head age as of `now_ms` (nothing without a chain).
    pub fn sample_chain(&self, now_ms: u64) {
        if let Some(seen) = self.chain_seen() {
            self.chain_head_age_seconds.set(seen.head_age_ms(now_ms) as f64 / 1e3);
            self.chain_round_seconds.set(seen.round_ms(now_ms) as f64 / 1e3);
        }
    }

    /// What the anchoring task saw of the chain, if there is one.
    pub fn chain_seen(&self) -> Option<ChainSeen> {
        self.chain.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn heartbeat(&self, now_ms: u64) {
        self.heartbeat_ms.store(now_ms.max(1), Ordering::Relaxed);
    }

    pub fn last_heartbeat_ms(&self) -> Option<u64> {
        Some(self.heartbeat_ms.load(Ordering::Relaxed)).filter(|&ms| ms > 0)
    }

    /// Our log cannot be written any more (the writer failed).
    pub fn log_failed(&self, why: String) {
        *self.log_failure.lock().expect("never poisoned") = Some(why);
    }

    pub fn log_failure(&self) -> Option<String> {
        self.log_failure.lock().expect("never poisoned").clone()
    }

    /// A protocol version this build does not apply has activated; `why` names it.
    pub fn upgrade_needed(&self, why: String) {
        self.protocol_upgrade_required.set(1);
        *self.upgrade_required.lock().expect("never poisoned") = Some(why);
    }

    pub fn upgrade_required(&self) -> Option<String> {
        self.upgrade_required.lock().expect("never poisoned").clone()
    }
}

/// The `outcome` label of a miner request: from its HTTP status and the client's error
/// text (whose wording `miner::client` owns and the tests below pin).
pub fn classify_request(status: Option<u16>, error: Option<&str>) -> &'static str {
    let Some(error) = error else { return outcome::OK };
    match status {
        Some(429) => return outcome::HTTP_429,
        Some(s) if (500..600).contains(&s) => return outcome::HTTP_5XX,
        Some(s) if (400..500).contains(&s) => return outcome::HTTP_4XX,
        _ => {}
    }
    let error = match error.strip_prefix("gave up after ") {
        Some(rest) => rest.split_once(": ").map_or(rest, |(_, cause)| cause),
        None => error,
    };
    let error = error.strip_prefix("reading the response: ").unwrap_or(error);
    // Without the status (a recorded error), the client's "HTTP 503" text says it.
    if let Some(code) = error.strip_prefix("HTTP ").and_then(|rest| rest.get(..3)) {
        match code.as_bytes()[0] {
            _ if code == "429" => return outcome::HTTP_429,
            b'5' => return outcome::HTTP_5XX,
            b'4' => return outcome::HTTP_4XX,
            _ => {}
        }
    }
    if error.starts_with("timeout") {
        outcome::TIMEOUT
    } else if error.starts_with("connection refused") || error.starts_with("connect failed") {
        outcome::CONNECT
    } else if error.starts_with("response larger than") {
        outcome::TOO_LARGE
    } else if error.starts_with("not a chat completion") || error.starts_with("chat completion without") {
        outcome::UNPARSABLE
    } else {
        outcome::TRANSPORT
    }
}

mod chain_seen;
pub use chain_seen::ChainSeen;

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
