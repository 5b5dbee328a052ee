//! The validator loop: resume the match our log left open, then play each contender
//! against the current champion, recording everything in our own log. Contenders come
//! from `[[miners]]` in order (the run ends when all have played) or, with no
//! `[[miners]]`, from the chain (`discovery`: read before each match and polled while
//! idle, so the run goes on until stopped). A match limit or a stop ends it; the events
//! already handed over are then sealed into a last block.

use super::config::{Config, ConfigError};
use super::discovery::{self, Discovery};
use super::matchrun::{self, Contestant, MatchContext, MatchError, MatchPlan, MatchReport};
use super::queue_reader::{
    self, candidate_contestant, discover_champion, discover_successor, discover_until_contender, from_chain,
    wait_or_stop,
};
use super::state;
use super::writer::{spawn_writer, WriterError};
use crate::evaluation::matchplay::MatchVerdict;
use crate::evaluation::plan::{describe_plan, parse_plan};
use crate::ledger::event::Evidence;
use crate::ledger::event::MinerRef;
use crate::ledger::{Event, ValidatorKey};
use crate::ledger::{OwnLog, StoreError, Tip};
use crate::metrics::Metrics;
use crate::miner::client::{ClientError, MinerClient};
use crate::miner::stats::{RequestStats, StatsSnapshot};
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Writer(#[from] WriterError),
    #[error("{0}")]
    Client(#[from] ClientError),
    #[error("match: {0}")]
    Match(#[from] MatchError),
    #[error("chain: {0}")]
    Anchor(#[from] super::anchor::AnchorError),
    #[error("appending to our log: {0}")]
    Append(#[from] crate::ledger::AppendError),
    #[error("no miners configured: add [[miners]] entries (hotkey, uid, base_url, model) to the config")]
    NoMiners,
    #[error("the log names miner {0}, which is not in the config's [[miners]]")]
    UnknownMiner(String),
    #[error("match {match_id} was started with rule {recorded:?}, which this af does not know (the config says {configured:?}): finish it with the af that started it")]
    RuleChanged { match_id: String, recorded: String, configured: String },
}

#[derive(Debug, serde::Serialize)]
pub struct RunSummary {
    /// Matches this run decided.
    pub n_matches: u64,
    /// The reports of the last [`SUMMARY_MATCHES`] of them, oldest first (the log holds
    /// every one: `af audit`, the pages).
    pub matches: VecDeque<MatchReport>,
    pub champion: String,
    pub ratio_to_beat_ppm: u32,
    pub interrupted: bool,
    pub tip: Option<Tip>,
    /// HTTP attempts to miners during this run, with latency and overhead percentiles.
    pub requests: StatsSnapshot,
    /// The evidence channel given in the options, for whoever writes our log next.
    #[serde(skip)]
    pub evidence: Option<mpsc::UnboundedReceiver<Evidence>>,
}

impl RunSummary {
    /// The run in words: what it decided and where it left the log, and its requests.
    pub fn lines(&self) -> [String; 2] {
        let r = &self.requests;
        [
            format!(
                "{} matches; champion {}; ratio to beat {:.4}; tip {}",
                self.n_matches,
                self.champion,
                f64::from(self.ratio_to_beat_ppm) / 1e6,
                self.tip.map_or("(empty)".into(), |t| format!("height {} hash {}", t.height, t.hash))
            ),
            format!(
                "{} requests to miners ({} failed); latency p50 {:.1} ms, p99 {:.1} ms",
                r.attempts,
                r.failed,
                r.latency_p50_us as f64 / 1e3,
                r.latency_p99_us as f64 / 1e3
            ),
        ]
    }
}

/// Match reports a run keeps for its summary: a validator runs for weeks, and its memory
/// must not grow with the matches it plays (docs/design/invariants.md).
pub const SUMMARY_MATCHES: usize = 256;

/// Told of each decided match: its report, the contender, the champion it played.
pub type MatchCallback = Box<dyn Fn(&MatchReport, &Contestant, &Contestant) + Send>;

pub struct RunOptions {
    /// Stop once our log holds this many decided matches (counted from the log).
    pub max_matches: Option<u64>,
    pub now_ms: fn() -> u64,
    pub progress: Option<Arc<watch::Sender<super::matchrun::MatchProgress>>>,
    /// Called with each decided match, for log lines.
    pub on_match: MatchCallback,
    /// Where the miner client records every HTTP attempt (shared, so a caller can watch
    /// throughput and latency while the run goes on).
    pub request_stats: Arc<RequestStats>,
    /// Told of each block appended to our log (the network announces it).
    pub own_blocks: Option<mpsc::UnboundedSender<(ValidatorKey, u64)>>,
    /// Evidence found by the network, recorded in our log through the writer; handed
    /// back in the summary when the run ends.
    pub evidence: Option<mpsc::UnboundedReceiver<Evidence>>,
    /// The chain to read miners from and anchor our log on (commitments, weights), if any.
    pub chain: Option<Arc<dyn crate::chain::Chain>>,
    /// Whether to anchor on it: false for a validator run as an observer (`--watch-only`:
    /// no hotkey of ours, nothing committed or set).
    pub anchor: bool,
    /// How often the anchoring task looks at the chain.
    pub anchor_check_ms: u64,
    /// Our weights sends still in the pool: shared with whatever anchors after the run.
    pub sent_weights: Arc<crate::chain::weights::SentWeights>,
    /// What the run counts for the operator (`GET /metrics`) and its health.
    pub metrics: Arc<Metrics>,
    /// The process's one replay of our store, shared by the anchoring and the HTTP API.
    pub replays: Arc<crate::replay::latest_replay::LatestReplay>,
}

pub async fn run(
    log: Arc<OwnLog>,
    config: &Config,
    stop: watch::Receiver<bool>,
    mut options: RunOptions,
) -> Result<RunSummary, RunError> {
    // No `[[miners]]` but a chain: contenders come from the chain (ledger-spec/13).
    let discovering = config.miners.is_empty().then(|| options.chain.clone()).flatten();
    if config.miners.is_empty() && discovering.is_none() {
        return Err(RunError::NoMiners);
    }
    let params = config.evaluation.ratio_params();
    let rule = config.evaluation.stopping_rule()?;
    let futility = config.evaluation.futility();
    let validator = log.validator();
    let mut loaded = {
        let log = log.clone();
        let fresh = state::ValidatorState::spilling_to(&params, options.replays.sets_file());
        tokio::task::spawn_blocking(move || state::load_into(fresh, &log.store, &log.validator()))
            .await
            .expect("no panic")?
    };
    // `max_matches` counts the matches our log holds decided, so a restarted validator
    // goes on toward the same total rather than starting over (and waiting for a
    // contender it will never need).
    let decided_before = loaded.n_decided;
    if options.max_matches.is_some_and(|max| decided_before >= max) {
        return no_match_played(&log, &loaded, &params, &mut options, false);
    }
    // The latest read of the chain's miners, in discovery mode.
    let mut found: Option<Discovery> = None;
    // A champion that left the crown while we were stopped (ledger-spec/13): recorded once
    // the writer runs, and the match it defended, if open, is abandoned (undecided).
    let mut left_event: Option<Event> = None;
    let mut successor: Option<Contestant> = None;
    if let Some(chain) = &discovering {
        let ctx = (&stop, config, options.metrics.as_ref());
        let protocol = config.protocol();
        let mut read = match &loaded.champion {
            Some(champion) => discover_champion(chain.as_ref(), champion, &loaded.played, &protocol, ctx).await,
            // No champion yet: wait for the first valid commitment, the first champion.
            None => discover_until_contender(chain.as_ref(), None, &loaded.played, ctx).await,
        };
        if let (Some(champion), Some(now)) = (loaded.champion.take(), read.as_ref()) {
            match queue_reader::leaving(&champion, now) {
                Some(left) => {
                    left_event = Some(Event::ChampionLeft(left));
                    loaded.open = loaded.open.take().filter(|o| o.started.champion.hotkey != champion.hotkey);
                    let next = discover_successor(chain.as_ref(), &champion.hotkey, &loaded.played, ctx).await;
                    (read, successor) = next.map_or((None, None), |(read, next)| (Some(read), Some(next)));
                }
                None => loaded.champion = Some(champion),
            }
        }
        let Some(read) = read.filter(|_| !*stop.borrow()) else {
            return no_match_played(&log, &loaded, &params, &mut options, true);
        };
        found = Some(read);
    }
    let contestant = |miner: &MinerRef, found: &Option<Discovery>| -> Result<Contestant, RunError> {
        if let Some(found) = found {
            return from_chain(found, miner)
                .ok_or_else(|| RunError::UnknownMiner(format!("{} (no valid commitment on chain now)", miner.hotkey)));
        }
        let entry = config
            .miners
            .iter()
            .find(|m| m.hotkey == miner.hotkey)
            .ok_or_else(|| RunError::UnknownMiner(miner.hotkey.clone()))?;
        Ok(Contestant {
            miner: MinerRef { hotkey: entry.hotkey.clone(), uid: entry.uid, model: entry.model.clone() },
            endpoint: entry.endpoint(),
        })
    };
    let from_config = |i: usize| {
        let m = &config.miners[i];
        Contestant {
            miner: MinerRef { hotkey: m.hotkey.clone(), uid: m.uid, model: m.model.clone() },
            endpoint: m.endpoint(),
        }
    };
    let mut champion = match (&loaded.champion, &found) {
        _ if successor.is_some() => successor.take().expect("checked"),
        (Some(miner), _) => contestant(miner, &found)?,
        // The oldest valid commitment holds the crown until a match says otherwise.
        (None, Some(found)) => candidate_contestant(&found.queue[0]),
        (None, None) => from_config(0),
    };
    let mut ratio = loaded.ratio;
    // Taken, not copied: the sets grow with every match for as long as the run lasts.
    let mut played = std::mem::take(&mut loaded.played);
    // Match ids count the current log's decided matches (a rotated validator's new log
    // starts at 0, ledger-spec/16).
    let mut n_decided = loaded.log_decided;
    let restart_open = loaded.open_from_predecessor;

    let writer = spawn_writer(
        log.clone(),
        config.ledger.block_max_events,
        config.ledger.block_max_ms,
        options.now_ms,
        options.own_blocks.clone(),
        options.metrics.clone(),
    );
    if let Some(left) = left_event.take() {
        let _ = writer.sender.send(vec![left]).await;
    }
    // Each duplicate or copy of the champion discovery finds goes into our log once
    // (`played` holds the skips recorded).
    let netuid = options.chain.as_ref().map_or(0, |c| c.netuid());
    let skip_events = |found: &Discovery, recorded: &mut state::Played| -> Vec<Event> {
        discovery::skip_events(found, netuid, found.read_at_block, recorded)
            .into_iter()
            .map(Event::MinerSkipped)
            .collect()
    };
    if let Some(found) = &found {
        let events = skip_events(found, &mut played);
        if !events.is_empty() {
            let _ = writer.sender.send(events).await;
        }
    }
    // Evidence goes through the writer: it is the only writer of our log.
    let (evidence_done, mut evidence_stop) = watch::channel(false);
    let evidence_task = options.evidence.take().map(|mut evidence| {
        let sender = writer.sender.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    found = evidence.recv() => match found {
                        Some(found) => {
                            if sender.send(vec![Event::Evidence(Box::new(found))]).await.is_err() {
                                break;
                            }
                        }
                        None => break,
                    },
                    _ = evidence_stop.changed() => break,
                }
            }
            evidence
        })
    });
    let (anchor_stop_sender, anchor_stop) = watch::channel(false);
    let anchor_task = options.chain.clone().filter(|_| options.anchor).map(|chain| {
        tokio::spawn(super::anchor::anchor_loop(
            log.clone(),
            super::anchor::ChainSender { chain, sent: options.sent_weights.clone(), replays: options.replays.clone() },
            writer.sender.clone(),
            params,
            super::anchor::AnchorClock { check_ms: options.anchor_check_ms, now_ms: options.now_ms },
            anchor_stop,
            options.metrics.clone(),
        ))
    });
    let registry = Arc::new(config.registry());
    let upgrade = super::upgrade::UpgradeWatch::new(registry.protocol(), log.clone(), options.metrics.clone());
    // A match in flight ends as at a stop once signing stops (ledger-spec/15): nothing
    // of it could be recorded, so no miner is asked more.
    let match_stop = {
        let (sender, receiver) = watch::channel(*stop.borrow());
        let (mut outer, log) = (stop.clone(), log.clone());
        tokio::spawn(async move {
            loop {
                if *outer.borrow_and_update() || log.signing_halted().is_some() {
                    let _ = sender.send(true);
                    return;
                }
                tokio::select! {
                    changed = outer.changed() => if changed.is_err() { return },
                    _ = tokio::time::sleep(std::time::Duration::from_millis(250)) => {}
                    _ = sender.closed() => return,
                }
            }
        });
        receiver
    };
    let client = Arc::new(
        MinerClient::with_stats(config.client.clone(), options.request_stats.clone())?
            .with_metrics(options.metrics.clone()),
    );
    let context = |chain_block: u64| MatchContext {
        validator,
        registry: registry.clone(),
        client: client.clone(),
        events: writer.sender.clone(),
        ratio_params: params,
        chain_block,
        stop: match_stop.clone(),
        progress: options.progress.clone(),
        flush: writer.flush.clone(),
        metrics: options.metrics.clone(),
    };

    let mut reports = VecDeque::new();
    let mut n_reports = 0u64;
    let mut interrupted = false;
    // Set when the writer stopped under a match: its own error, read below, is the cause.
    let mut writer_gone = false;
    let mut pending = loaded.open.take();
    let mut latest_chain_block = loaded.latest_chain_block;
    loop {
        if options.max_matches.is_some_and(|max| decided_before + n_reports >= max) || *stop.borrow() {
            interrupted = *stop.borrow();
            break;
        }
        if log.signing_halted().is_some() {
            interrupted = true;
            break;
        }
        let (plan, resume) = match pending.take() {
            Some(open) => {
                // An open match ends under the plan it started with, which the log
                // recorded (an upgrade or a config change applies from the next match).
                let Some((recorded_rule, recorded_futility)) = parse_plan(&open.started.rule) else {
                    return Err(RunError::RuleChanged {
                        match_id: open.started.match_id.to_hex(),
                        recorded: open.started.rule.clone(),
                        configured: describe_plan(&rule, futility.as_ref()),
                    });
                };
                // A match the log this one succeeds started is started again here, under
                // this key, on the same chain block: the old log holds it undecided.
                let match_id = if restart_open {
                    crate::envs::derive_match_id(
                        &validator,
                        &open.started.contender.hotkey,
                        &open.started.champion.hotkey,
                        n_decided,
                        open.started.chain_block,
                        &open.started.chain_block_hash,
                    )
                } else {
                    open.started.match_id
                };
                let plan = MatchPlan {
                    match_id,
                    contender: contestant(&open.started.contender, &found)?,
                    champion: contestant(&open.started.champion, &found)?,
                    envs: open.started.envs.iter().map(|e| e.name.clone()).collect(),
                    rule: recorded_rule,
                    futility: recorded_futility,
                    cap: config.evaluation.cap,
                    max_challenges: recorded_rule.max_challenges().unwrap_or(config.evaluation.max_challenges),
                    ratio_to_beat_ppm: open.started.ratio_to_beat_ppm,
                    window: config.evaluation.window,
                    chain_block: open.started.chain_block,
                    chain_block_hash: open.started.chain_block_hash,
                };
                (plan, (!restart_open).then_some(open))
            }
            None => {
                let contender = match &discovering {
                    Some(chain) => {
                        // Read the chain again before each match: new commitments join the
                        // queue, and the champion's endpoint is its current commitment's.
                        let now = discover_until_contender(
                            chain.as_ref(),
                            Some(&champion.miner),
                            &played,
                            (&stop, config, &options.metrics),
                        )
                        .await;
                        let Some(now) = now else {
                            interrupted = true;
                            break;
                        };
                        // The champion left without a match (ledger-spec/13), where its
                        // version records it: said in our log, and the queue's first
                        // miner holds the crown until a match says otherwise.
                        let recordable = queue_reader::records_leaving(registry.protocol(), now.read_at_block);
                        if let Some(left) = queue_reader::leaving(&champion.miner, &now).filter(|_| recordable) {
                            let _ = writer.sender.send(vec![Event::ChampionLeft(left)]).await;
                            let ctx = (&stop, config, options.metrics.as_ref());
                            let next = discover_successor(chain.as_ref(), &champion.miner.hotkey, &played, ctx).await;
                            let Some((fresh, next)) = next else {
                                interrupted = true;
                                break;
                            };
                            champion = next;
                            found = Some(fresh);
                            continue;
                        }
                        if let Some(current) = from_chain(&now, &champion.miner) {
                            champion = current;
                        }
                        let events = skip_events(&now, &mut played);
                        if !events.is_empty() {
                            let _ = writer.sender.send(events).await;
                        }
                        let next = candidate_contestant(&now.queue[0]);
                        found = Some(now);
                        next
                    }
                    None => {
                        let next = config
                            .miners
                            .iter()
                            .position(|m| m.hotkey != champion.miner.hotkey && !played.contender(&m.hotkey));
                        let Some(next) = next else {
                            tracing::info!(event = "queue_done", decided = n_decided, "every contender has played");
                            break;
                        };
                        from_config(next)
                    }
                };
                // The chain's head now: the match id, and so every task, derives from a
                // block hash nobody knew before this block (ledger-spec/06).
                let (chain_block, chain_block_hash) = match &options.chain {
                    Some(chain) => match chain_head(chain.as_ref(), &stop).await {
                        Some(head) => head,
                        None => {
                            interrupted = true;
                            break;
                        }
                    },
                    None => (0, crate::bytes::Hash32([0; 32])),
                };
                if upgrade.observe(chain_block) {
                    interrupted = true;
                    break;
                }
                // The environments of the protocol version active at the match's start.
                let rules = registry.protocol().version_at(chain_block);
                let envs: Vec<String> = config
                    .evaluation
                    .envs
                    .iter()
                    .filter(|name| {
                        registry
                            .get(name)
                            .is_some_and(|env| rules.envs.contains(&(env.spec().name, env.spec().version)))
                    })
                    .cloned()
                    .collect();
                // And its plan (ledger-spec/02, "The network's plan"): the config names only
                // numbers every version's plan shares, checked at load.
                let (rule, futility) = crate::evaluation::plan::parse_plan(rules.plan)
                    .expect("every protocol version's plan is one this build parses (protocol tests)");
                let plan = MatchPlan {
                    match_id: crate::envs::derive_match_id(
                        &validator,
                        &contender.miner.hotkey,
                        &champion.miner.hotkey,
                        n_decided,
                        chain_block,
                        &chain_block_hash,
                    ),
                    chain_block,
                    chain_block_hash,
                    contender,
                    champion: champion.clone(),
                    envs,
                    rule,
                    futility,
                    cap: config.evaluation.cap,
                    max_challenges: rule.max_challenges().unwrap_or(config.evaluation.max_challenges),
                    ratio_to_beat_ppm: params.current_ppm(&ratio, chain_block),
                    window: config.evaluation.window,
                };
                (plan, None)
            }
        };
        played.add_match(&plan.contender.miner, &plan.champion.miner);
        tracing::info!(
            event = "match_started",
            match_id = %plan.match_id,
            contender = %plan.contender.miner.hotkey,
            champion = %plan.champion.miner.hotkey,
            envs = %plan.envs.join(","),
            ratio_to_beat = f64::from(plan.ratio_to_beat_ppm) / 1e6,
            chain_block = plan.chain_block,
            resumed = resume.is_some(),
            "playing {} against champion {}",
            plan.contender.miner.hotkey,
            plan.champion.miner.hotkey
        );
        let (contender, defender) = (plan.contender.clone(), plan.champion.clone());
        let chain_block = plan.chain_block;
        latest_chain_block = latest_chain_block.max(chain_block);
        match matchrun::play_match(plan, context(chain_block), resume).await {
            Ok(report) => {
                if report.verdict == MatchVerdict::ContenderWins {
                    champion = contender.clone();
                    // Dated by the match's start block, as the fold of our log dates it.
                    ratio = crate::evaluation::ratio::RatioToBeat {
                        set_ppm: report.decided.new_ratio_to_beat_ppm,
                        set_at_block: chain_block,
                    };
                }
                n_decided += 1;
                (options.on_match)(&report, &contender, &defender);
                if reports.len() == SUMMARY_MATCHES {
                    reports.pop_front();
                }
                reports.push_back(report);
                n_reports += 1;
            }
            Err(MatchError::Interrupted) => {
                interrupted = true;
                break;
            }
            Err(MatchError::WriterGone) => {
                writer_gone = true;
                break;
            }
            Err(other) => return Err(other.into()),
        }
    }
    let _ = evidence_done.send(true);
    let _ = anchor_stop_sender.send(true);
    if let Some(task) = anchor_task {
        task.await.map_err(|_| WriterError::Panicked)?;
    }
    let evidence = match evidence_task {
        Some(task) => Some(task.await.map_err(|_| WriterError::Panicked)?),
        None => None,
    };
    // Closing the channel makes the writer seal what it holds and finish.
    let super::writer::WriterHandle { sender, task, flush } = writer;
    drop((sender, flush));
    let tip = task.await.map_err(|_| WriterError::Panicked)??;
    if writer_gone {
        return Err(MatchError::WriterGone.into());
    }
    let mut tip = match tip {
        Some(tip) => Some(tip),
        None => log.tip()?,
    };
    // The writer is done: we are the single writer now. Commit the final tip and set
    // weights once more, and record both in one last block (none once signing stopped at
    // a protocol version this build does not apply: nothing more goes out).
    if let Some(chain) = options.chain.as_ref().filter(|_| log.signing_halted().is_none()) {
        let mut anchored = Vec::new();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(super::anchor::STOP_CHAIN_MS);
        let announce = registry.protocol().newest();
        match tokio::time::timeout_at(deadline, super::anchor::commit_tip(&log, chain.as_ref(), announce)).await {
            Ok(Ok(Some(commitment))) => {
                options.metrics.chain_send("commitment", "sent", "");
                anchored.push(Event::ChainCommitment(commitment))
            }
            Ok(Ok(None)) => {}
            Ok(Err(error)) => {
                error.count(&options.metrics, "commitment");
                tracing::warn!(event = "commit_failed", error = %error, "committing our final tip failed");
            }
            Err(_) => {
                options.metrics.chain_send("commitment", "failed", "stop_deadline");
                tracing::warn!(
                    event = "commit_cut",
                    deadline_ms = super::anchor::STOP_CHAIN_MS,
                    "committing our final tip took past the stop's deadline; cut: the next start commits it"
                );
            }
        }
        let sent = &options.sent_weights;
        let weights = if tokio::time::Instant::now() >= deadline {
            tracing::warn!(
                event = "weights_skipped",
                deadline_ms = super::anchor::STOP_CHAIN_MS,
                "no final weights: the stop's chain deadline has passed; the next start sends them when due"
            );
            Ok(None)
        } else {
            super::anchor::set_weights(&log, chain.as_ref(), sent, params, &mut Default::default(), (options.now_ms)())
                .await
        };
        match weights {
            Ok(Some(event)) => {
                options.metrics.chain_send("weights", "sent", "");
                let (chain_block, what) = super::anchor::describe_weights(&event);
                tracing::info!(event = event.kind_name(), chain_block, "{what}");
                anchored.push(event)
            }
            Ok(None) => {}
            Err(error) => {
                error.count(&options.metrics, "weights");
                tracing::warn!(event = "set_weights_failed", error = %error, "setting weights failed");
            }
        }
        latest_chain_block = anchored.iter().filter_map(Event::chain_block).fold(latest_chain_block, u64::max);
        if !anchored.is_empty() {
            let receipt = {
                let log = log.clone();
                let now = (options.now_ms)();
                tokio::task::spawn_blocking(move || log.append(anchored, now))
                    .await
                    .map_err(|_| WriterError::Panicked)??
            };
            if let Some(own_blocks) = &options.own_blocks {
                let _ = own_blocks.send((validator, receipt.tip.height));
            }
            tip = Some(receipt.tip);
        }
    }
    // "Now" is the newest chain block this run saw: the summary's ratio is in chain time.
    let ratio_now = params.current_ppm(&ratio, latest_chain_block);
    Ok(RunSummary {
        n_matches: n_reports,
        matches: reports,
        champion: champion.miner.hotkey,
        ratio_to_beat_ppm: ratio_now,
        interrupted,
        tip,
        requests: options.request_stats.snapshot(),
        evidence,
    })
}

/// The summary of a run that ended before playing: the log's champion and ratio as loaded.
fn no_match_played(
    log: &OwnLog,
    loaded: &state::ValidatorState,
    params: &crate::evaluation::ratio::RatioParams,
    options: &mut RunOptions,
    interrupted: bool,
) -> Result<RunSummary, RunError> {
    Ok(RunSummary {
        n_matches: 0,
        matches: VecDeque::new(),
        champion: loaded.champion.as_ref().map(|c| c.hotkey.clone()).unwrap_or_default(),
        ratio_to_beat_ppm: params.current_ppm(&loaded.ratio, loaded.latest_chain_block),
        interrupted,
        tip: log.tip()?,
        requests: options.request_stats.snapshot(),
        evidence: options.evidence.take(),
    })
}

/// The chain's head block and its hash, retried with backoff until read (`None` on a
/// stop): a chain that is down delays the next match, it does not end the run.
async fn chain_head(
    chain: &dyn crate::chain::Chain,
    stop: &watch::Receiver<bool>,
) -> Option<(u64, crate::bytes::Hash32)> {
    let mut wait_ms = 250u64;
    loop {
        let read = async {
            let block = chain.current_block().await?;
            let hash = chain.block_hash(block).await?;
            Ok::<_, crate::chain::ChainError>(hash.map(|h| (block, h)))
        };
        match read.await {
            Ok(Some(head)) => return Some(head),
            Ok(None) => {
                tracing::warn!(event = "chain_head_unknown", "the chain has no hash for its own head yet; retrying")
            }
            Err(error) => {
                tracing::warn!(event = "chain_head_failed", error = %error, retry_ms = wait_ms, "reading the chain's head failed; retrying")
            }
        }
        if wait_or_stop(stop, wait_ms).await {
            return None;
        }
        wait_ms = (wait_ms * 2).min(10_000);
    }
}
