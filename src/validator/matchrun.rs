//! Runs one match: every environment at once; in each, a window of challenges in
//! flight (both miners answer the same challenge id concurrently), with results applied
//! to the match state strictly in index order, so the recorded schedule is 0..n with
//! nothing skipped. Each challenge's two transcripts go to the ledger writer as one
//! group; env and match decisions follow as they happen.

use super::episode::{play_episode, PlayedEpisode};
use super::state::OpenMatch;
use crate::bytes::{Hash32, MatchId, ValidatorKey};
use crate::envs::{derive_challenge_id, Registry};
use crate::evaluation::matchplay::{EnvResult, GameOutcome, MatchState, MatchVerdict};
use crate::evaluation::plan::describe_plan;
use crate::evaluation::ratio::RatioParams;
use crate::evaluation::stopping::StoppingRule;
use crate::ledger::event::{
    ChatMessage, EnvDecision, EnvOutcome, EnvRef, EnvWinRate, MatchDecided, MatchStarted, MinerRef, Transcript,
};
use crate::ledger::Event;
use crate::metrics::Metrics;
use crate::miner::client::{Endpoint, MinerClient};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, watch};

#[derive(Clone, Debug)]
pub struct Contestant {
    pub miner: MinerRef,
    pub endpoint: Endpoint,
}

#[derive(Clone, Debug)]
pub struct MatchPlan {
    pub match_id: MatchId,
    pub contender: Contestant,
    pub champion: Contestant,
    pub envs: Vec<String>,
    pub rule: StoppingRule,
    /// The futility stop, if any (recorded with the rule in every decision).
    pub futility: Option<crate::evaluation::futility::Futility>,
    pub cap: u32,
    pub max_challenges: u64,
    pub ratio_to_beat_ppm: u32,
    /// Challenges in flight per environment.
    pub window: usize,
    /// The chain block (and hash) the match id derives from (ledger-spec/06).
    pub chain_block: u64,
    pub chain_block_hash: crate::bytes::Hash32,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct MatchReport {
    pub match_id: MatchId,
    /// The match's environments, in its plan's order (the state's tallies are in it).
    pub envs: Vec<String>,
    pub verdict: MatchVerdict,
    pub decided: MatchDecided,
    pub state: MatchState,
    /// Challenges this run could not get an answer for, by miner hotkey and why
    /// (the metrics' outcome classes): the operator's summary of failing miners.
    pub failures: BTreeMap<String, BTreeMap<&'static str, u64>>,
}

#[derive(Debug, thiserror::Error)]
pub enum MatchError {
    #[error("unknown environment {0:?}")]
    UnknownEnv(String),
    #[error("stopped before the match was decided")]
    Interrupted,
    #[error("the ledger writer stopped")]
    WriterGone,
}

/// What the runner shares between its environment tasks.
struct Shared {
    plan: MatchPlan,
    validator: ValidatorKey,
    registry: Arc<Registry>,
    client: Arc<MinerClient>,
    state: Mutex<MatchState>,
    /// Held from recording a pair into `state` until its events are sent: the log then
    /// holds events in the order their effects reached the state, so an env decision
    /// written by another env's task never precedes the transcripts its tally counts.
    send_order: tokio::sync::Mutex<()>,
    events: mpsc::Sender<Vec<Event>>,
    progress: Option<Arc<watch::Sender<MatchProgress>>>,
    metrics: Arc<Metrics>,
    failures: Mutex<BTreeMap<String, BTreeMap<&'static str, u64>>>,
}

/// A running match as a progress display reads it: its environments, in its plan's
/// order, and its state after the last recorded challenge (`None` before the first).
#[derive(Clone, Debug, Default)]
pub struct MatchProgress {
    pub envs: Vec<String>,
    pub state: Option<MatchState>,
}

/// What a match runs in: who we are, the environments, the miner client, where events
/// go, the ratio parameters and the current chain block, and the stop signal.
#[derive(Clone)]
pub struct MatchContext {
    pub validator: ValidatorKey,
    pub registry: Arc<Registry>,
    pub client: Arc<MinerClient>,
    pub events: mpsc::Sender<Vec<Event>>,
    pub ratio_params: RatioParams,
    pub chain_block: u64,
    pub stop: watch::Receiver<bool>,
    /// Receives the match state after every recorded challenge, for progress displays.
    pub progress: Option<Arc<watch::Sender<MatchProgress>>>,
    /// Where to ask the writer to make what was sent durable.
    pub flush: mpsc::Sender<super::writer::FlushRequest>,
    /// Counts matches and games for the operator.
    pub metrics: Arc<Metrics>,
}

/// Plays `plan` to a decision. `resume` holds what the log already recorded of this
/// match (after a restart); the `MatchStarted` event is written only when it is `None`.
/// Returns the report once `MatchDecided` is durable in our log: nothing is reported
/// decided that a crash could still lose.
pub async fn play_match(
    plan: MatchPlan,
    context: MatchContext,
    resume: Option<OpenMatch>,
) -> Result<MatchReport, MatchError> {
    let MatchContext {
        validator,
        registry,
        client,
        events,
        ratio_params,
        chain_block,
        mut stop,
        progress,
        flush,
        metrics,
    } = context;
    let mut env_refs = Vec::new();
    for name in &plan.envs {
        let env = registry.get(name).ok_or_else(|| MatchError::UnknownEnv(name.clone()))?;
        env_refs.push(EnvRef { name: name.clone(), version: env.spec().version });
    }
    let p0 = f64::from(plan.ratio_to_beat_ppm) / 1e6;
    let mut state =
        MatchState::new(plan.envs.len(), plan.rule, plan.cap, plan.max_challenges, p0).with_futility(plan.futility);
    match &resume {
        None => {
            let started = MatchStarted {
                match_id: plan.match_id,
                contender: plan.contender.miner.clone(),
                champion: plan.champion.miner.clone(),
                envs: env_refs.clone(),
                rule: describe_plan(&plan.rule, plan.futility.as_ref()),
                ratio_to_beat_ppm: plan.ratio_to_beat_ppm,
                chain_block: plan.chain_block,
                chain_block_hash: plan.chain_block_hash,
            };
            events.send(vec![Event::MatchStarted(started)]).await.map_err(|_| MatchError::WriterGone)?;
        }
        Some(open) => replay_recorded(&mut state, &plan.envs, open),
    }
    metrics.matches_started.inc();
    let shared = Arc::new(Shared {
        plan,
        validator,
        registry,
        client,
        state: Mutex::new(state),
        send_order: tokio::sync::Mutex::new(()),
        events,
        progress,
        metrics,
        failures: Mutex::default(),
    });
    let mut tasks = Vec::new();
    for (env_index, env_ref) in env_refs.iter().cloned().enumerate() {
        let shared = shared.clone();
        let stop = stop.clone();
        tasks.push(tokio::spawn(async move { run_env(shared, env_index, env_ref, stop).await }));
    }
    for task in tasks {
        task.await.map_err(|_| MatchError::Interrupted)??;
    }
    if *stop.borrow_and_update() {
        return Err(MatchError::Interrupted);
    }
    let state = shared.state.lock().expect("never poisoned").clone();
    let verdict = state.verdict();
    assert_ne!(verdict, MatchVerdict::Undecided, "every env task ends only when its env or the match is decided");
    let win_rates: Vec<EnvWinRate> = env_refs
        .iter()
        .zip(&state.envs)
        .map(|(env, t)| EnvWinRate {
            env: env.clone(),
            win_rate_ppm: shared.plan.rule.env_rate_ppm(t.wins, t.losses, t.draws),
        })
        .collect();
    let contender_won = verdict == MatchVerdict::ContenderWins;
    let new_ratio = if contender_won {
        let rates: Vec<u32> = win_rates.iter().map(|r| r.win_rate_ppm).collect();
        // By the plan's own arithmetic: a resumed match of an older plan keeps its own.
        shared.plan.rule.ratio_params(&ratio_params).after_win(&rates, chain_block).set_ppm
    } else {
        shared.plan.ratio_to_beat_ppm
    };
    let champion = if contender_won { &shared.plan.contender } else { &shared.plan.champion };
    let decided = MatchDecided {
        match_id: shared.plan.match_id,
        contender_won,
        champion_hotkey: champion.miner.hotkey.clone(),
        win_rates,
        new_ratio_to_beat_ppm: new_ratio,
    };
    shared.events.send(vec![Event::MatchDecided(decided.clone())]).await.map_err(|_| MatchError::WriterGone)?;
    super::writer::flush(&flush).await.map_err(|_| MatchError::WriterGone)?;
    shared.metrics.match_decided(match verdict {
        MatchVerdict::ContenderWins => "contender_wins",
        MatchVerdict::ChampionStays => "champion_stays",
        _ => "undecided",
    });
    let failures = std::mem::take(&mut *shared.failures.lock().expect("never poisoned"));
    Ok(MatchReport {
        match_id: shared.plan.match_id,
        envs: shared.plan.envs.clone(),
        verdict,
        decided,
        state,
        failures,
    })
}

/// Applies the pairs a previous run recorded, in index order, up to the first gap.
fn replay_recorded(state: &mut MatchState, env_names: &[String], open: &OpenMatch) {
    for (env_index, name) in env_names.iter().enumerate() {
        for index in 0u64.. {
            if !state.wants_more(env_index) {
                break;
            }
            match open.pairs.get(&(name.clone(), index)) {
                Some((Some(contender), Some(champion))) => {
                    state.record(env_index, GameOutcome::of_rewards(*contender, *champion));
                }
                _ => break,
            }
        }
    }
}

type Played = (u64, PlayedEpisode, PlayedEpisode);

async fn run_env(
    shared: Arc<Shared>,
    env_index: usize,
    env_ref: EnvRef,
    mut stop: watch::Receiver<bool>,
) -> Result<(), MatchError> {
    let mut next_index = shared.state.lock().expect("never poisoned").envs[env_index].n_challenges;
    let mut in_flight: VecDeque<tokio::task::JoinHandle<Played>> = VecDeque::new();
    loop {
        let wants_more = shared.state.lock().expect("never poisoned").wants_more(env_index);
        if !wants_more || *stop.borrow() {
            for task in in_flight {
                task.abort(); // results past the decision are not recorded
            }
            return Ok(());
        }
        let window = env_window(&shared);
        while in_flight.len() < window {
            in_flight.push_back(spawn_challenge(&shared, &env_ref, next_index));
            next_index += 1;
        }
        let front = in_flight.pop_front().expect("the window is not empty");
        let (index, contender, champion) = tokio::select! {
            joined = front => joined.map_err(|_| MatchError::Interrupted)?,
            _ = stop.changed() => continue,
        };
        let challenge_id =
            derive_challenge_id(&env_ref.name, env_ref.version, &shared.validator, &shared.plan.match_id, index);
        for (miner, played) in [(&shared.plan.contender.miner, &contender), (&shared.plan.champion.miner, &champion)] {
            if let Some(class) = played.error_class {
                let mut failures = shared.failures.lock().expect("never poisoned");
                *failures.entry(miner.hotkey.clone()).or_default().entry(class).or_default() += 1;
            }
        }
        let mut group = vec![
            transcript(&shared.plan, &env_ref, index, &challenge_id, &shared.plan.contender.miner, contender.clone()),
            transcript(&shared.plan, &env_ref, index, &challenge_id, &shared.plan.champion.miner, champion.clone()),
        ];
        let _in_order = shared.send_order.lock().await;
        let decision = {
            let mut state = shared.state.lock().expect("never poisoned");
            if !state.wants_more(env_index) {
                None // another env decided the match while this pair was in flight
            } else {
                let before: Vec<Option<EnvResult>> = state.envs.iter().map(|t| t.result).collect();
                let game = GameOutcome::of_rewards(contender.reward_milli, champion.reward_milli);
                state.record(env_index, game);
                shared.metrics.game(
                    &env_ref.name,
                    match game {
                        GameOutcome::Win => "win",
                        GameOutcome::Loss => "loss",
                        GameOutcome::Draw => "draw",
                    },
                );
                // This env, and any env abandoned because this result decided the match.
                let decided_now: Vec<(usize, EnvResult)> = state
                    .envs
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| before[*i].is_none())
                    .filter_map(|(i, tally)| tally.result.map(|r| (i, r)))
                    .collect();
                Some((state.clone(), decided_now))
            }
        };
        let Some((state, decided_now)) = decision else { continue };
        if let Some(progress) = &shared.progress {
            progress.send_replace(MatchProgress { envs: shared.plan.envs.clone(), state: Some(state.clone()) });
        }
        for (i, result) in decided_now {
            let tally = &state.envs[i];
            let env = EnvRef {
                name: shared.plan.envs[i].clone(),
                version: shared.registry.get(&shared.plan.envs[i]).map_or(0, |e| e.spec().version),
            };
            let outcome = match result {
                EnvResult::Better => EnvOutcome::ContenderBetter,
                EnvResult::NotBetter | EnvResult::Futile => EnvOutcome::ContenderNotBetter,
                EnvResult::Inconclusive | EnvResult::Abandoned => EnvOutcome::Inconclusive,
            };
            let plan = describe_plan(&shared.plan.rule, shared.plan.futility.as_ref());
            let rule = match result {
                EnvResult::Abandoned => format!("{plan} (stopped: match decided)"),
                EnvResult::Futile => format!("{plan} (stopped: futility)"),
                _ => plan,
            };
            group.push(Event::EnvDecision(EnvDecision {
                match_id: shared.plan.match_id,
                env,
                outcome,
                wins: tally.wins,
                losses: tally.losses,
                draws: tally.draws,
                n_challenges: tally.n_challenges,
                rule,
            }));
        }
        shared.events.send(group).await.map_err(|_| MatchError::WriterGone)?;
    }
}

/// This env's share of the match's challenges in flight: `window` per env in all, split
/// among the envs still undecided, so a decided env's share goes where answers can still
/// change the match (the same load on the miners, sooner decisions).
fn env_window(shared: &Shared) -> usize {
    let state = shared.state.lock().expect("never poisoned");
    let open = state.envs.iter().filter(|e| e.result.is_none()).count().max(1);
    let total = shared.plan.window.max(1) * state.envs.len();
    total.div_ceil(open)
}

fn spawn_challenge(shared: &Arc<Shared>, env_ref: &EnvRef, index: u64) -> tokio::task::JoinHandle<Played> {
    let shared = shared.clone();
    let env_ref = env_ref.clone();
    tokio::spawn(async move {
        let env = shared.registry.get(&env_ref.name).expect("checked at match start");
        let challenge_id =
            derive_challenge_id(&env_ref.name, env_ref.version, &shared.validator, &shared.plan.match_id, index);
        let (contender_key, champion_key) = (&shared.plan.contender.miner.hotkey, &shared.plan.champion.miner.hotkey);
        let (contender, champion) = tokio::join!(
            play_episode(&shared.client, contender_key, &shared.plan.contender.endpoint, env, &challenge_id),
            play_episode(&shared.client, champion_key, &shared.plan.champion.endpoint, env, &challenge_id),
        );
        (index, contender, champion)
    })
}

fn transcript(
    plan: &MatchPlan,
    env: &EnvRef,
    index: u64,
    challenge_id: &Hash32,
    miner: &MinerRef,
    played: PlayedEpisode,
) -> Event {
    let mut invocation = blake3::Hasher::new();
    invocation.update(&plan.match_id.0).update(&challenge_id.0).update(miner.hotkey.as_bytes());
    let cuts = played.cuts;
    let transcript = Transcript {
        match_id: plan.match_id,
        env: env.clone(),
        challenge_id: *challenge_id,
        challenge_index: index,
        invocation_id: Hash32(invocation.finalize().into()),
        miner: miner.clone(),
        messages: played.messages.into_iter().map(|m| ChatMessage { role: m.role, content: m.content }).collect(),
        answer: played.answer,
        reward_milli: played.reward_milli,
        latency_ms: played.latency_ms,
        error: played.error,
    };
    if cuts.is_empty() {
        Event::Transcript(transcript)
    } else {
        Event::TranscriptCut(crate::ledger::event::TranscriptCut { transcript, cuts })
    }
}

pub fn env_names(registry: &Registry) -> Vec<String> {
    registry.names().into_iter().map(String::from).collect()
}
