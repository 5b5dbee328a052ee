//! A new auditor's time from a countersigned fold checkpoint against a replay from
//! genesis (`scripts/bench-checkpoint.sh`), at two sizes of history. Each run writes
//! `AF_CKPT_VALIDATORS` logs (default 8) of blocks of two 2 to 8 kB transcripts into a real
//! store, log i started i/n of a checkpoint interval (360 blocks) ahead of log 0, as
//! validators that joined at different times, and grown 360/n blocks at a time; after
//! each step a validator's replay keeps the folds at the checkpoint heights passed and
//! every validator records its new points in its next block, as a running validator
//! does soon after passing them; then a tail of blocks after the last points. It times `af audit`'s two
//! starts in one process: from genesis, and from the checkpoint (reading the ends of the
//! logs for a quorum, reading and checking the folds from the validator's folder, then
//! folding only the tail), and checks both reach the same state hash.
//!
//! Without `--bench` (as `cargo test --all-targets` runs it) it is a tiny smoke run.

#[allow(dead_code)] // the benchmarks use part of the tests' support
#[path = "../tests/support/match_scenarios.rs"]
mod match_scenarios;
#[allow(dead_code)]
#[path = "../tests/support/network_sim.rs"]
mod network_sim;
use af::bytes::ValidatorKey;
use af::evaluation::ratio::DEFAULT_RATIO_PARAMS;
use af::ledger::block::{seal, SealedBlock, Tip};
use af::ledger::demo::demo_events;
use af::ledger::event::Event;
use af::ledger::{LedgerKey, Store};
use af::replay::fold_checkpoints::{to_claim, CHECKPOINT_EVERY, FOLDS_DIR};
use af::replay::{FoldSource, Snapshot, REPLAY_VERSION};
use network_sim::SimRng;
use std::time::Instant;

const START_MS: u64 = 1_790_000_000_000;

fn setting(name: &str, full: u64, smoke: u64, bench: bool) -> u64 {
    match std::env::var(name).ok().and_then(|v| v.parse().ok()) {
        Some(value) => value,
        None if bench => full,
        None => smoke,
    }
}

struct Net {
    keys: Vec<LedgerKey>,
    tips: Vec<Option<Tip>>,
    rng: SimRng,
}

impl Net {
    /// Appends `n(i)` blocks to log `i`; `extra` adds events to each log's first block.
    fn grow(&mut self, store: &Store, n: &dyn Fn(usize) -> u64, extra: &dyn Fn(usize) -> Vec<Event>) {
        for (i, key) in self.keys.iter().enumerate() {
            let validator: ValidatorKey = key.validator();
            let mut batch: Vec<SealedBlock> = Vec::with_capacity(n(i) as usize);
            for k in 0..n(i) {
                let height = self.tips[i].map_or(0, |t| t.height + 1);
                let mut events = demo_events(&validator, height, 2, 2_000 + self.rng.below(6_001) as usize);
                if k == 0 {
                    events.extend(extra(i));
                }
                let time_ms = START_MS + 12_000 * height;
                let sealed = seal(key.signing_key(), self.tips[i].as_ref(), time_ms, events).expect("a block");
                self.tips[i] = Some(sealed.tip());
                batch.push(sealed);
            }
            let (_, refused) = store.append_batch(&batch).expect("appended");
            assert!(refused.is_none(), "{refused:?}");
        }
    }
}

/// One run: logs of `history` blocks, points recorded, then `tail` more blocks.
fn run(dir: &std::path::Path, n_validators: usize, history: u64, tail: u64) -> Run {
    let _ = std::fs::remove_dir_all(dir);
    let store = Store::create(dir).expect("a store");
    let keys: Vec<LedgerKey> = (0..n_validators)
        .map(|i| {
            let mut seed = [0u8; 32];
            seed[..8].copy_from_slice(&(i as u64 + 1).to_le_bytes());
            seed[8..16].copy_from_slice(b"af-ckpts");
            LedgerKey::from_seed(seed)
        })
        .collect();
    let mut net = Net { tips: vec![None; n_validators], keys, rng: SimRng::new(58) };
    // A validator's replay, keeping the folds at each checkpoint height.
    let latest = af::replay::latest_replay::LatestReplay::kept(dir, &mut |_| {}).expect("a kept file");
    let mut claims: Vec<Vec<Event>> = vec![Vec::new(); n_validators];
    // Logs started at different times (as validators join), so their checkpoint heights
    // come at different moments: log i is i/n of an interval ahead.
    let step = (CHECKPOINT_EVERY / n_validators as u64).max(1);
    net.grow(&store, &|i| i as u64 * step, &|_| vec![]);
    for _ in 0..history / step {
        net.grow(&store, &|_| step, &|i| claims[i].clone());
        let replayed = latest.get(&store, &DEFAULT_RATIO_PARAMS).expect("a replay");
        claims = net
            .keys
            .iter()
            .map(|k| to_claim(&replayed.folds, &k.validator()).map(Event::FoldCheckpoint).into_iter().collect())
            .collect();
    }
    drop(latest);
    net.grow(&store, &|_| tail, &|i| claims[i].clone());

    let registry = af::envs::registry();
    let started = Instant::now();
    let genesis =
        af::replay::replay(&store, &registry, None, &DEFAULT_RATIO_PARAMS, &mut |_, _, _| {}).expect("replayed");
    let from_genesis = started.elapsed().as_secs_f64();
    let folds_dir = dir.join(FOLDS_DIR);
    let started = Instant::now();
    let site = af::http::folds::FoldSite::open(folds_dir.to_str().expect("a path")).expect("the folds");
    let read_bytes = std::sync::atomic::AtomicU64::new(0);
    let read = |point: &_| {
        let bytes = site.read(point)?;
        read_bytes.fetch_add(bytes.as_ref().map_or(0, |b| b.len() as u64), std::sync::atomic::Ordering::Relaxed);
        Ok(bytes)
    };
    // Every validator of the synthetic network may countersign, as the chain would list them.
    let keys = store.tips().expect("the tips").into_iter().map(|(v, _)| v).collect();
    let who = af::replay::checkpoint_quorum::Countersigners::new(keys, None, "the bench's validators");
    let (folds, start) = af::audit::checkpoint_start::start_folds(&store, &who, "folds", &read).expect("started");
    let started_s = started.elapsed().as_secs_f64();
    assert!(start.chains.iter().all(|c| c.from.is_some()), "{start:?}");
    let snapshot = Some((Snapshot { replay_version: REPLAY_VERSION, folds }, FoldSource::Checkpoint));
    let checkpointed =
        af::replay::replay(&store, &registry, snapshot, &DEFAULT_RATIO_PARAMS, &mut |_, _, _| {}).expect("replayed");
    let from_checkpoint = started.elapsed().as_secs_f64();
    assert_eq!(checkpointed.state_hash, genesis.state_hash, "the same state from the checkpoint");
    let folds_mb = read_bytes.into_inner() as f64 / 1e6;
    Run {
        from_genesis,
        from_checkpoint,
        start: started_s,
        n_genesis: genesis.n_blocks_folded,
        n_checkpoint: checkpointed.n_blocks_folded,
        folds_mb,
    }
}

struct Run {
    from_genesis: f64,
    from_checkpoint: f64,
    /// Of `from_checkpoint`: reading the logs' ends and the folds.
    start: f64,
    n_genesis: u64,
    n_checkpoint: u64,
    folds_mb: f64,
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let n_validators = setting("AF_CKPT_VALIDATORS", 8, 2, bench) as usize;
    let small = setting("AF_CKPT_CHECKPOINTS", 4, 1, bench) * CHECKPOINT_EVERY;
    let tail = setting("AF_CKPT_TAIL", 120, 10, bench);
    let dir = std::env::var_os("AF_BENCH_DIR")
        .map_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data"), Into::into)
        .join("checkpoint");
    println!(
        "{n_validators} logs, blocks of two 2-8 kB transcripts; points recorded at each log's newest checkpoint, then a tail"
    );
    println!(
        "| history (blocks per log) | tail after the points | from genesis | from the checkpoint (of it: logs' ends and folds read) | genesis / checkpoint | blocks folded (genesis / checkpoint) | folds read |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for (history, tail) in [(small, tail), (2 * small, tail), (2 * small, 2 * tail)] {
        let r = run(&dir, n_validators, history, tail);
        println!(
            "| {history} | {tail} | {:.2} s | {:.2} s ({:.2} s) | {:.1}x | {} / {} | {:.2} MB |",
            r.from_genesis,
            r.from_checkpoint,
            r.start,
            r.from_genesis / r.from_checkpoint.max(1e-9),
            r.n_genesis,
            r.n_checkpoint,
            r.folds_mb
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
