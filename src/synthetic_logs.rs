//! Synthetic but real networks of validator logs, for replay and audit tests, golden
//! state hashes and benchmarks: every validator plays the same matches with the real
//! match state machine and stopping rule, miners answer with the reference policies
//! (seeded per challenge), every reward comes from the environment's own scorer, and
//! every block is sealed and stored as a validator would. Faults can be injected to
//! check that replay and audit find them. Deterministic in its spec: same spec, same bytes.

use crate::bytes::{Hash32, ValidatorKey};
use crate::envs::derive_match_id;
use crate::envs::{self, Registry};
use crate::evaluation::futility::Futility;
use crate::evaluation::matchplay::{EnvResult, GameOutcome, MatchState, MatchVerdict};
use crate::evaluation::plan::describe_plan;
use crate::evaluation::ratio::RatioParams;
use crate::evaluation::stopping::StoppingRule;
use crate::ledger::block::seal;
use crate::ledger::event::{
    ChatMessage, EnvDecision, EnvOutcome, EnvRef, EnvWinRate, Event, Evidence, MatchDecided, MatchStarted, MinerRef,
    Transcript,
};
use crate::ledger::{LedgerKey, Store, StoreError, Tip};
use crate::miner::policy::{Policy, Solver};

/// A miner of the synthetic network.
#[derive(Clone, Debug)]
pub struct SynthMiner {
    pub hotkey: String,
    pub uid: u16,
    pub policy: Policy,
}

/// Misbehaviour to inject, by validator index.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// This validator records a wrong reward for its Nth transcript (N counted from 0).
    pub forge_score: Option<(usize, u64)>,
    /// This validator skips challenge index 3 in the first env of its first match.
    pub skip_index: Option<usize>,
    /// This validator records the opposite verdict on every match.
    pub flip_decisions: Option<usize>,
    /// This validator plays every match at the floor ratio, whatever the last win set (a
    /// validator lowering the bar for a contender it favours).
    pub low_bar: Option<usize>,
    /// Every miner answers this validator at random (a miner serving one validator
    /// worse): its log is honest and self-consistent, its verdicts differ.
    pub sandbagged: Option<usize>,
    /// (equivocator, reporter): the equivocator signs a second block at height 1 and the
    /// reporter records both headers as evidence.
    pub equivocate: Option<(usize, usize)>,
    /// This validator picks its first match's id instead of deriving it from the chain
    /// block (a validator grinding for favourable tasks).
    pub pick_match_id: Option<usize>,
    /// Every validator starts each match and plays none of it: a log of started matches
    /// alone, the cheapest log per match a permitted validator can make its peers fold.
    pub abandon_matches: bool,
    /// This validator plays every match under a lenient plan of its own ([`lenient_plan`]):
    /// alpha 0.5, epsilon 0, no futility stop (a validator crowning a friend cheaply).
    pub lenient_plan: Option<usize>,
    /// (validator, N): this validator rotates its ledger key after its first N matches
    /// (ledger-spec/16): its log ends with the rotation, and a log of [`successor_key`]
    /// plays the rest. Its events need a protocol table with version 3 at their chain
    /// blocks (`Protocol::local`).
    pub rotate: Option<(usize, usize)>,
    /// (match M, miner, validators): before match M, these validators record that the
    /// miner, their champion, left the crown (`ChampionLeft`, ledger-spec/13; version 3).
    pub champion_leaves: Option<(usize, usize, Vec<usize>)>,
}

/// The plan of [`Faults::lenient_plan`]: a score plan that crowns on a likelihood ratio
/// of 2 and never gives up early.
pub fn lenient_plan() -> (StoppingRule, Option<Futility>) {
    let rule = StoppingRule::Score {
        alpha_ppm: 500_000,
        prior_a: 4,
        prior_b: 4,
        max_challenges: 4_000,
        epsilon_ppm: 0,
        half_life_blocks: 7_200,
        dominance: None,
    };
    (rule, None)
}

#[derive(Clone, Debug)]
pub struct NetworkSpec {
    pub n_validators: usize,
    pub miners: Vec<SynthMiner>,
    /// (contender, champion) miner indexes, played in order by every validator.
    pub matches: Vec<(usize, usize)>,
    pub envs: Vec<String>,
    pub rule: StoppingRule,
    /// The plan's futility stop (with `rule`, what every `MatchStarted` records).
    pub futility: Option<Futility>,
    pub cap: u32,
    pub max_challenges: u64,
    pub ratio_params: RatioParams,
    pub events_per_block: usize,
    /// Time of each validator's first block; later blocks are 2 s apart.
    pub start_ms: u64,
    pub faults: Faults,
}

impl NetworkSpec {
    /// Three miners (perfect, noisy 0.3, random), two matches: perfect dethrones noisy,
    /// then random fails against perfect; played under the network's plan.
    pub fn small(n_validators: usize) -> NetworkSpec {
        let miner = |hotkey: &str, uid, policy| SynthMiner { hotkey: hotkey.into(), uid, policy };
        NetworkSpec {
            n_validators,
            miners: vec![
                miner("5SynthNoisy", 0, Policy::Noisy { p: 0.3 }),
                miner("5SynthPerfect", 1, Policy::Perfect),
                miner("5SynthRandom", 2, Policy::Random),
            ],
            matches: vec![(1, 0), (2, 1)],
            envs: vec!["mult".into(), "sat".into(), "coin".into()],
            // The network's plan (ledger-spec/02): every synthetic log decides by it.
            rule: crate::evaluation::network_plan::NETWORK_RULE,
            futility: Some(crate::evaluation::network_plan::NETWORK_FUTILITY),
            cap: 200,
            max_challenges: crate::evaluation::network_plan::NETWORK_RULE.max_challenges().unwrap_or(4_000),
            ratio_params: crate::evaluation::ratio::DEFAULT_RATIO_PARAMS,
            events_per_block: 64,
            start_ms: 1_790_000_000_000,
            faults: Faults::default(),
        }
    }

    /// The same network played under the plan `text` (a protocol version's: a network
    /// replayed by the `local` table plays the newest version's plan, ledger-spec/15).
    pub fn with_plan(self, text: &str) -> NetworkSpec {
        let (rule, futility) = crate::evaluation::plan::parse_plan(text).expect("a plan af knows");
        NetworkSpec { rule, futility, max_challenges: rule.max_challenges().unwrap_or(self.max_challenges), ..self }
    }
}

/// The ledger key of synthetic validator `i`.
pub fn validator_key(i: usize) -> LedgerKey {
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&(i as u64 + 1).to_le_bytes());
    seed[8..16].copy_from_slice(b"af-synth");
    LedgerKey::from_seed(seed)
}

/// The key synthetic validator `i` rotates to ([`Faults::rotate`]).
pub fn successor_key(i: usize) -> LedgerKey {
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&(i as u64 + 1).to_le_bytes());
    seed[8..24].copy_from_slice(b"af-synth-rotated");
    LedgerKey::from_seed(seed)
}

/// Writes every validator's log into `store` (a node that holds all logs); returns the
/// validators' keys in index order.
pub fn write_network(store: &Store, spec: &NetworkSpec) -> Result<Vec<ValidatorKey>, StoreError> {
    let registry = envs::registry();
    let solver = Solver::new();
    let keys: Vec<LedgerKey> = (0..spec.n_validators).map(validator_key).collect();
    let mut chains: Vec<Vec<Vec<Event>>> = Vec::new();
    // The rotating validator's matches after its rotation, for its new log.
    let mut successor: Option<(usize, Vec<Event>)> = None;
    for (i, key) in keys.iter().enumerate() {
        let (old, new) = (key.validator(), successor_key(i).validator());
        let rotate_after = spec.faults.rotate.filter(|(v, _)| *v == i).map(|(_, n)| n);
        let key_at = |m: usize| match rotate_after {
            Some(n) if m >= n => (new, (m - n) as u64),
            _ => (old, m as u64),
        };
        let matches = validator_events(spec, &registry, &solver, i, &key_at);
        let split = rotate_after.unwrap_or(matches.len()).min(matches.len());
        let mut events: Vec<Event> = matches[..split].concat();
        let mut blocks: Vec<Vec<Event>> = events.chunks(spec.events_per_block.max(1)).map(<[Event]>::to_vec).collect();
        if let Some(n) = rotate_after {
            // The rotation records the chain block of the last match its log started.
            let chain_block = 1_000 + n.saturating_sub(1) as u64;
            blocks.push(vec![Event::KeyRotated(crate::ledger::rotation::KeyRotated { new_key: new, chain_block })]);
            events = matches[split..].concat();
            successor = Some((i, events));
        }
        chains.push(blocks);
    }
    // Equivocation: the equivocator's second block at height 1, signed but never stored,
    // goes into the reporter's log as evidence next to the stored one.
    if let Some((equivocator, reporter)) = spec.faults.equivocate {
        let key = &keys[equivocator];
        let genesis = seal(key.signing_key(), None, spec.start_ms, chains[equivocator][0].clone())
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let real = seal(key.signing_key(), Some(&genesis.tip()), spec.start_ms + 2_000, chains[equivocator][1].clone())
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let fork = seal(key.signing_key(), Some(&genesis.tip()), spec.start_ms + 2_001, vec![])
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let (a, b) = (&real.decoded().block, &fork.decoded().block);
        let evidence = Evidence {
            validator: key.validator(),
            height: 1,
            header_a: a.header.clone(),
            signature_a: a.signature,
            header_b: b.header.clone(),
            signature_b: b.signature,
        };
        chains[reporter].push(vec![Event::Evidence(Box::new(evidence))]);
    }
    for (key, blocks) in keys.iter().zip(chains) {
        let mut prev: Option<Tip> = None;
        for (height, events) in blocks.into_iter().enumerate() {
            let time_ms = spec.start_ms + 2_000 * height as u64;
            let sealed = seal(key.signing_key(), prev.as_ref(), time_ms, events)
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            store.append(&sealed)?;
            prev = Some(sealed.tip());
        }
    }
    if let Some((i, events)) = successor {
        let (old, new) = (keys[i].validator(), successor_key(i));
        let at = store.rotation(&old)?.ok_or_else(|| StoreError::Corrupt("the rotation was not stored".into()))?;
        let first = Event::KeySucceeded(crate::ledger::rotation::KeySucceeded {
            old_key: old,
            old_height: at.height,
            old_hash: at.hash,
            chain_block: at.chain_block,
        });
        let mut blocks = vec![vec![first]];
        blocks.extend(events.chunks(spec.events_per_block.max(1)).map(<[Event]>::to_vec));
        let mut prev: Option<Tip> = None;
        for (height, events) in blocks.into_iter().enumerate() {
            let time_ms = spec.start_ms + 1_000_000 + 2_000 * height as u64;
            let sealed = seal(new.signing_key(), prev.as_ref(), time_ms, events)
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            store.append(&sealed)?;
            prev = Some(sealed.tip());
        }
    }
    Ok(keys.iter().map(LedgerKey::validator).collect())
}

fn miner_ref(miner: &SynthMiner) -> MinerRef {
    MinerRef { hotkey: miner.hotkey.clone(), uid: miner.uid, model: format!("synth/{}", miner.hotkey) }
}

/// Every event one validator records for the spec's matches, a list per match; `key_at`
/// gives the key of the log that plays match M and the match's number in that log.
fn validator_events(
    spec: &NetworkSpec,
    registry: &Registry,
    solver: &Solver,
    index: usize,
    key_at: &dyn Fn(usize) -> (ValidatorKey, u64),
) -> Vec<Vec<Event>> {
    let mut matches = Vec::new();
    let (rule, futility) = match spec.faults.lenient_plan == Some(index) {
        true => lenient_plan(),
        false => (spec.rule, spec.futility),
    };
    let plan = describe_plan(&rule, futility.as_ref());
    // A score plan names its own ratio parameters; replay reads them from the plan.
    let ratio_params = crate::replay::combine::plan_ratio_params(&plan, &spec.ratio_params);
    let mut ratio = ratio_params.initial();
    let mut n_transcripts = 0u64;
    for (match_number, &(contender_idx, champion_idx)) in spec.matches.iter().enumerate() {
        let mut events = Vec::new();
        if let Some((_, miner, _)) =
            spec.faults.champion_leaves.as_ref().filter(|(m, _, who)| *m == match_number && who.contains(&index))
        {
            events.push(Event::ChampionLeft(crate::ledger::event::ChampionLeft {
                champion: miner_ref(&spec.miners[*miner]),
                reason: crate::ledger::event::LeaveReason::Deregistered,
                chain_block: 1_000 + match_number as u64,
            }));
        }
        let (validator, number_in_log) = key_at(match_number);
        let validator = &validator;
        let (contender, champion) = (&spec.miners[contender_idx], &spec.miners[champion_idx]);
        // A synthetic chain block per match, its hash derived from the match's place.
        let chain_block = 1_000 + match_number as u64;
        let chain_block_hash = crate::bytes::Hash32(*blake3::hash(&chain_block.to_le_bytes()).as_bytes());
        let mut match_id = derive_match_id(
            validator,
            &contender.hotkey,
            &champion.hotkey,
            number_in_log,
            chain_block,
            &chain_block_hash,
        );
        if spec.faults.pick_match_id == Some(index) && match_number == 0 {
            match_id = crate::bytes::Hash32([0x42; 32]);
        }
        let env_refs: Vec<EnvRef> = spec
            .envs
            .iter()
            .map(|name| EnvRef { name: name.clone(), version: registry.get(name).expect("known env").spec().version })
            .collect();
        let mut ratio_ppm = ratio_params.current_ppm(&ratio, chain_block);
        if spec.faults.low_bar == Some(index) {
            ratio_ppm = ratio_params.floor_ppm();
        }
        events.push(Event::MatchStarted(MatchStarted {
            match_id,
            contender: miner_ref(contender),
            champion: miner_ref(champion),
            envs: env_refs.clone(),
            rule: plan.clone(),
            ratio_to_beat_ppm: ratio_ppm,
            chain_block,
            chain_block_hash,
        }));
        if spec.faults.abandon_matches {
            matches.push(events);
            continue;
        }
        let max_challenges = rule.max_challenges().unwrap_or(spec.max_challenges);
        let mut state = MatchState::new(env_refs.len(), rule, spec.cap, max_challenges, f64::from(ratio_ppm) / 1e6)
            .with_futility(futility);
        let mut next_index = vec![0u64; env_refs.len()];
        // Round-robin over the envs, one challenge each, as a window of one would.
        while state.verdict() == MatchVerdict::Undecided {
            for (e, env_ref) in env_refs.iter().enumerate() {
                if !state.wants_more(e) {
                    continue;
                }
                let mut challenge_index = next_index[e];
                if spec.faults.skip_index == Some(index) && match_number == 0 && e == 0 && challenge_index == 3 {
                    challenge_index = 4; // index 3 never played
                }
                next_index[e] = challenge_index + 1;
                let env = registry.get(&env_ref.name).expect("known env");
                let challenge_id =
                    envs::derive_challenge_id(&env_ref.name, env_ref.version, validator, &match_id, challenge_index);
                let mut rewards = [0i32; 2];
                for (side, miner) in [contender, champion].into_iter().enumerate() {
                    let mut turn = 0u32;
                    let record = envs::run_episode(env, &challenge_id, &mut |messages| {
                        let seed = Hash32(blake3::derive_key(
                            "af synth miner seed v1",
                            &[challenge_id.0.as_slice(), miner.hotkey.as_bytes(), &turn.to_le_bytes()].concat(),
                        ));
                        turn += 1;
                        let policy = if spec.faults.sandbagged == Some(index) { Policy::Random } else { miner.policy };
                        solver.answer(policy, messages, &seed)
                    });
                    let mut reward = record.reward_milli;
                    if spec.faults.forge_score == Some((index, n_transcripts)) {
                        reward = if reward > 0 { reward - 1000 } else { reward + 1000 };
                    }
                    n_transcripts += 1;
                    rewards[side] = reward;
                    let mut invocation = blake3::Hasher::new();
                    invocation.update(&match_id.0).update(&challenge_id.0).update(miner.hotkey.as_bytes());
                    events.push(Event::Transcript(Transcript {
                        match_id,
                        env: env_ref.clone(),
                        challenge_id,
                        challenge_index,
                        invocation_id: Hash32(invocation.finalize().into()),
                        miner: miner_ref(miner),
                        answer: record.messages.last().map(|m| m.content.clone()).unwrap_or_default(),
                        messages: record
                            .messages
                            .into_iter()
                            .map(|m| ChatMessage { role: m.role, content: m.content })
                            .collect(),
                        reward_milli: reward,
                        latency_ms: 100 + (challenge_id.0[0] as u64),
                        error: None,
                    }));
                }
                let before: Vec<Option<EnvResult>> = state.envs.iter().map(|t| t.result).collect();
                state.record(e, GameOutcome::of_rewards(rewards[0], rewards[1]));
                for (i, tally) in state.envs.iter().enumerate() {
                    let Some(result) = tally.result.filter(|_| before[i].is_none()) else { continue };
                    let outcome = match result {
                        EnvResult::Better => EnvOutcome::ContenderBetter,
                        EnvResult::NotBetter | EnvResult::Futile => EnvOutcome::ContenderNotBetter,
                        EnvResult::Inconclusive | EnvResult::Abandoned => EnvOutcome::Inconclusive,
                    };
                    events.push(Event::EnvDecision(EnvDecision {
                        match_id,
                        env: env_refs[i].clone(),
                        outcome,
                        wins: tally.wins,
                        losses: tally.losses,
                        draws: tally.draws,
                        n_challenges: tally.n_challenges,
                        rule: match result {
                            EnvResult::Abandoned => format!("{plan} (stopped: match decided)"),
                            EnvResult::Futile => format!("{plan} (stopped: futility)"),
                            _ => plan.clone(),
                        },
                    }));
                }
                if state.verdict() != MatchVerdict::Undecided {
                    break;
                }
            }
        }
        let win_rates: Vec<EnvWinRate> = env_refs
            .iter()
            .zip(&state.envs)
            .map(|(env, t)| EnvWinRate { env: env.clone(), win_rate_ppm: rule.env_rate_ppm(t.wins, t.losses, t.draws) })
            .collect();
        let mut contender_won = state.verdict() == MatchVerdict::ContenderWins;
        if spec.faults.flip_decisions == Some(index) {
            contender_won = !contender_won;
        }
        let new_ratio = if contender_won {
            let rates: Vec<u32> = win_rates.iter().map(|r| r.win_rate_ppm).collect();
            ratio = ratio_params.after_win(&rates, chain_block);
            ratio.set_ppm
        } else {
            ratio_ppm
        };
        events.push(Event::MatchDecided(MatchDecided {
            match_id,
            contender_won,
            champion_hotkey: if contender_won { contender.hotkey.clone() } else { champion.hotkey.clone() },
            win_rates,
            new_ratio_to_beat_ppm: new_ratio,
        }));
        matches.push(events);
    }
    matches
}
