//! Synthetic but well-formed logs, for benchmarks, tests and the first-run demo: real
//! multiplication challenges with derived ids, answered by two made-up miners, padded
//! to a chosen event size. Deterministic in (validator, height, index).

use super::event::{ChatMessage, EnvRef, Event, MinerRef, Transcript};
use super::{AppendError, OwnLog};
use crate::bytes::{Hash32, MatchId, ValidatorKey};
use crate::envs::{self, mult, Environment};

pub const DEMO_CONTENDER: &str = "5DemoContenderHotkey1111111111111111111111111111";
pub const DEMO_CHAMPION: &str = "5DemoChampionHotkey11111111111111111111111111111";

/// The demo match's id, derived as a validator with no chain derives one (ledger-spec/06:
/// block 0, the zero hash, nothing decided before).
pub fn demo_match_id(validator: &ValidatorKey) -> MatchId {
    envs::derive_match_id(validator, DEMO_CONTENDER, DEMO_CHAMPION, 0, 0, &Hash32([0; 32]))
}

/// The events of block `height`: `n_events` transcripts of about `event_bytes` each.
pub fn demo_events(validator: &ValidatorKey, height: u64, n_events: u32, event_bytes: usize) -> Vec<Event> {
    let env = mult::Multiplication::new();
    let match_id = demo_match_id(validator);
    (0..n_events)
        .map(|i| {
            let global = height * u64::from(n_events) + u64::from(i);
            // Both miners answer each challenge: even events the contender, odd the champion.
            let index = global / 2;
            let (hotkey, uid) = if global.is_multiple_of(2) { (DEMO_CONTENDER, 1) } else { (DEMO_CHAMPION, 0) };
            let challenge_id = envs::derive_challenge_id(mult::NAME, mult::VERSION, validator, &match_id, index);
            let (mut episode, observation, _) = env.reset(&challenge_id);
            // The champion errs on every seventh challenge so scores differ.
            let answer = if hotkey == DEMO_CHAMPION && index % 7 == 3 {
                "Answer: 42".to_string()
            } else {
                episode.expert_action().to_answer_text()
            };
            let reward_milli = episode.step(&episode.parse_action(&answer)).reward_milli;
            let mut messages: Vec<ChatMessage> = envs::opening_messages(env.spec(), &observation)
                .into_iter()
                .map(|m| ChatMessage { role: m.role, content: m.content })
                .collect();
            let fixed = 420 + messages.iter().map(|m| m.content.len()).sum::<usize>() + answer.len();
            let padding = event_bytes.saturating_sub(fixed);
            let reasoning = "Multiplying digit by digit and carrying. ".repeat(padding / 41 + 1);
            let content = format!("{}\n{answer}", &reasoning[..padding]);
            messages.push(ChatMessage { role: "assistant".into(), content });
            Event::Transcript(Transcript {
                match_id,
                env: EnvRef { name: mult::NAME.into(), version: mult::VERSION },
                challenge_id,
                challenge_index: index,
                invocation_id: Hash32(
                    *blake3::hash(&[challenge_id.0.as_slice(), hotkey.as_bytes()].concat()).as_bytes(),
                ),
                miner: MinerRef {
                    hotkey: hotkey.into(),
                    uid,
                    model: format!("demo/{}", if uid == 1 { "contender" } else { "champion" }),
                },
                messages,
                answer,
                reward_milli,
                latency_ms: 200 + global % 300,
                error: None,
            })
        })
        .collect()
}

/// The shape of a demo log to append.
pub struct DemoShape {
    pub blocks: u64,
    pub events_per_block: u32,
    /// About how large each transcript is (its padding is one miner text).
    pub event_bytes: usize,
    /// Blocks appended per commit (each commit one fsync).
    pub blocks_per_commit: u64,
}

impl DemoShape {
    /// Refuses a shape no log may hold, before anything is opened or written.
    pub fn check(&self) -> Result<(), DemoError> {
        if self.event_bytes > crate::limits::MAX_RECORDED_TEXT_BYTES {
            return Err(DemoError::EventTooLarge(self.event_bytes));
        }
        Ok(())
    }
}

/// What appending a demo log did, and how fast.
#[derive(serde::Serialize)]
pub struct DemoSummary {
    pub validator: ValidatorKey,
    pub blocks: u64,
    pub events_per_block: u32,
    pub bytes: u64,
    pub seconds: f64,
    pub events_per_second: f64,
    pub tip_height: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("{0}")]
    Append(#[from] AppendError),
    #[error("{0}")]
    Store(#[from] super::StoreError),
    /// `each_block` failed (its output closed, say).
    #[error("{0}")]
    Told(#[from] std::io::Error),
    /// The padding is one miner text, which ledger-spec/02 caps.
    #[error("--event-bytes {0} is over {max}: a demo transcript pads one miner text, which a log records up to that size", max = crate::limits::MAX_RECORDED_TEXT_BYTES)]
    EventTooLarge(usize),
}

/// Appends `shape.blocks` demo blocks to `log` after its tip; `each_block` hears of each
/// block once it is durable (blocks appended so far, the new tip's height).
pub fn write_demo(
    log: &OwnLog,
    shape: DemoShape,
    each_block: &mut dyn FnMut(u64, u64) -> std::io::Result<()>,
) -> Result<DemoSummary, DemoError> {
    shape.check()?;
    let DemoShape { blocks, events_per_block, event_bytes, blocks_per_commit } = shape;
    let validator = log.validator();
    let start_height = log.tip()?.map_or(0, |t| t.height + 1);
    let started = std::time::Instant::now();
    let mut bytes = 0u64;
    let mut tip_height = start_height.saturating_sub(1);
    let end = start_height + blocks;
    for first in (start_height..end).step_by(blocks_per_commit.max(1) as usize) {
        let group = (first..end.min(first + blocks_per_commit))
            .map(|height| (demo_events(&validator, height, events_per_block, event_bytes), crate::clock::unix_ms()))
            .collect();
        for receipt in log.append_many(group)? {
            tip_height = receipt.tip.height;
            bytes += receipt.n_bytes as u64;
            each_block(tip_height - start_height + 1, tip_height)?;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(DemoSummary {
        validator,
        blocks,
        events_per_block,
        bytes,
        seconds,
        events_per_second: (blocks * u64::from(events_per_block)) as f64 / seconds,
        tip_height,
    })
}
