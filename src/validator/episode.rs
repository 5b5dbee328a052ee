//! Plays one challenge against one miner over HTTP: the environment's prompts go out,
//! the miner's answers come back, until the episode ends or the miner fails. The reward
//! is then computed by `score_transcript` on the recorded conversation, the same call
//! replay makes, so live and replayed rewards cannot differ.

use crate::bytes::{ChallengeId, Hash32};
use crate::envs::{self, Environment, Message, MAX_TURNS};
use crate::ledger::event::TextCut;
use crate::limits::{MAX_ERROR_TEXT_BYTES, MAX_RECORDED_TEXT_BYTES, MAX_TRANSCRIPT_TEXT_BYTES};
use crate::miner::client::{Completion, Endpoint, MinerClient};

/// One miner's finished challenge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlayedEpisode {
    pub messages: Vec<Message>,
    /// The last answer text (empty if the miner never answered).
    pub answer: String,
    pub reward_milli: i32,
    /// Sum of the completions' latencies.
    pub latency_ms: u64,
    /// The first failure, if the miner failed; the episode stopped there.
    pub error: Option<String>,
    /// That failure's class (the metrics' request outcome, e.g. `timeout`).
    pub error_class: Option<&'static str>,
    pub n_requests: u32,
    /// Answers recorded only in part (see [`record_text`]); empty for almost every episode.
    pub cuts: Vec<TextCut>,
}

/// The longest prefix of `text` of at most `cap` bytes that ends on a character boundary.
pub fn prefix_at_boundary(text: &str, cap: usize) -> &str {
    if text.len() <= cap {
        return text;
    }
    let mut end = cap;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// What of a miner's text is recorded: all of it up to `cap` bytes; beyond, its prefix
/// at a character boundary, with the full text's length and blake3 hash.
pub fn record_text(text: String, cap: usize) -> (String, Option<(u64, Hash32)>) {
    if text.len() <= cap {
        return (text, None);
    }
    let full = (text.len() as u64, Hash32(*blake3::hash(text.as_bytes()).as_bytes()));
    (prefix_at_boundary(&text, cap).to_string(), Some(full))
}

/// Plays one challenge with the miner `miner` (its hotkey, for the metrics) at `endpoint`.
pub async fn play_episode(
    client: &MinerClient,
    miner: &str,
    endpoint: &Endpoint,
    env: &dyn Environment,
    challenge_id: &ChallengeId,
) -> PlayedEpisode {
    // The episode is not Send (it borrows the env), so drive it between awaits only
    // through the messages: rebuild it from the transcript after each answer.
    let (_, observation, _) = env.reset(challenge_id);
    let mut messages = envs::opening_messages(env.spec(), &observation);
    let (mut latency_ms, mut error, mut answer, mut n_requests) = (0u64, None, String::new(), 0u32);
    let mut error_class = None;
    let (mut cuts, mut answer_cut) = (Vec::new(), None);
    // Each answer is cut to the recording cap, and to what remains of the transcript's
    // budget, before anything uses it: the env sees, scores and records the same text.
    let mut budget = MAX_TRANSCRIPT_TEXT_BYTES;
    for _ in 0..MAX_TURNS {
        let completion = client.complete_for(miner, endpoint, &messages).await;
        let outcome = completion.outcome();
        let Completion { answer: reply, latency_ms: took, .. } = completion;
        latency_ms += took;
        n_requests += 1;
        match reply {
            Err(failure) => {
                error = Some(prefix_at_boundary(&failure, MAX_ERROR_TEXT_BYTES).to_string());
                error_class = Some(outcome);
                break;
            }
            Ok(text) => {
                let (text, cut) = record_text(text, MAX_RECORDED_TEXT_BYTES.min(budget));
                budget -= text.len();
                answer_cut = cut;
                if let Some((full_bytes, full_blake3)) = cut {
                    cuts.push(TextCut { message_idx: Some(messages.len() as u32), full_bytes, full_blake3 });
                }
                answer = text.clone();
                messages.push(Message::new("assistant", text));
                match next_prompt(env, challenge_id, &messages) {
                    Some(prompt) => messages.push(Message::new("user", prompt)),
                    None => break,
                }
            }
        }
    }
    if let Some((full_bytes, full_blake3)) = answer_cut {
        cuts.push(TextCut { message_idx: None, full_bytes, full_blake3 });
    }
    let scored = envs::score_transcript(env, challenge_id, &messages).expect("the env produced every prompt itself");
    PlayedEpisode {
        messages,
        answer,
        reward_milli: scored.reward_milli,
        latency_ms,
        error,
        error_class,
        n_requests,
        cuts,
    }
}

/// The next observation after the conversation so far, or `None` if the episode ended.
fn next_prompt(env: &dyn Environment, challenge_id: &ChallengeId, messages: &[Message]) -> Option<String> {
    let (mut episode, _, _) = env.reset(challenge_id);
    let mut last = None;
    for answer in messages.iter().filter(|m| m.role == "assistant") {
        let step = episode.step(&episode.parse_action(&answer.content));
        if step.terminated || step.truncated {
            return None;
        }
        last = Some(step.observation.text);
    }
    last
}
