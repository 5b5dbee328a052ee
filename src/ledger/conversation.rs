//! A conversation to re-score, read from whatever file a user has at hand: an entry of
//! `af transcripts` (one, a JSON list, or JSON lines), a transcript line of `af ledger
//! export --format jsonl` (other events' lines are passed over), a bare transcript, or a
//! bare JSON list of `{role, content}` messages. Told apart by shape, so `af env score`
//! takes any of them and says which it could not.

use super::entry::TranscriptEntry;
use super::event::Transcript;
use crate::bytes::Hash32;
use crate::envs::Message;

/// A conversation, with what the file recorded about it when it is a recorded one.
#[derive(Clone, Debug, PartialEq)]
pub struct Conversation {
    pub messages: Vec<Message>,
    pub env: Option<String>,
    pub challenge_id: Option<Hash32>,
    /// The miner that answered (its hotkey), when recorded.
    pub miner: Option<String>,
    pub reward_milli: Option<i32>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConversationError {
    #[error("the file is neither JSON nor JSON lines: {0}")]
    NotJson(String),
    #[error("{what} is not well formed: {reason}")]
    Malformed { what: String, reason: String },
    #[error("the file holds no transcript{}", challenge.map(|c| format!(" of challenge {c}")).unwrap_or_default())]
    NoneFound { challenge: Option<Hash32> },
    #[error("the file holds {0} transcripts: pass --challenge-id (and --miner) to pick one")]
    Several(usize),
    #[error("the file holds {n} transcripts of challenge {challenge} (both miners' answers, or several logs'): pass --miner HOTKEY to pick one")]
    SeveralOf { n: usize, challenge: Hash32 },
    #[error("the file must hold transcript entries (`af transcripts`), exported transcript lines (`af ledger export --format jsonl`), or a JSON list of {{\"role\", \"content\"}} objects: {0}")]
    Unknown(String),
}

/// The one conversation `text` holds, or, when it holds several recorded ones, the one of
/// `challenge` answered by `miner` (`NoneFound` if none is).
pub fn read_conversation(
    text: &str,
    challenge: Option<&Hash32>,
    miner: Option<&str>,
) -> Result<Conversation, ConversationError> {
    let values: Vec<serde_json::Value> = match serde_json::from_str::<serde_json::Value>(text) {
        // A list of entries (`af transcripts --json`) is several; a list of messages is one.
        Ok(serde_json::Value::Array(list)) if list.first().is_some_and(is_recorded) => list,
        Ok(value) => vec![value],
        Err(whole) => serde_json::Deserializer::from_str(text)
            .into_iter::<serde_json::Value>()
            .collect::<Result<_, _>>()
            .map_err(|line| ConversationError::NotJson(if whole.is_syntax() { line } else { whole }.to_string()))?,
    };
    if let [value] = values.as_slice() {
        if !is_recorded(value) {
            let messages =
                serde_json::from_value(value.clone()).map_err(|e| ConversationError::Unknown(e.to_string()))?;
            return Ok(Conversation { messages, env: None, challenge_id: None, miner: None, reward_milli: None });
        }
    }
    let mut found = Vec::new();
    for value in values {
        found.extend(recorded(value)?);
    }
    // One is the one meant (the caller compares its challenge with the flag's); of
    // several, the challenge picks.
    if found.len() > 1 {
        if let Some(challenge) = challenge {
            found.retain(|c| c.challenge_id.as_ref() == Some(challenge));
        }
        if let Some(miner) = miner {
            found.retain(|c| c.miner.as_deref() == Some(miner));
        }
    }
    match found.len() {
        0 => Err(ConversationError::NoneFound { challenge: challenge.copied() }),
        1 => Ok(found.pop().expect("one")),
        n => Err(match challenge {
            Some(challenge) => ConversationError::SeveralOf { n, challenge: *challenge },
            None => ConversationError::Several(n),
        }),
    }
}

/// Whether `value` has the shape of a recorded transcript (entry, export line or bare).
fn is_recorded(value: &serde_json::Value) -> bool {
    value.get("proof").is_some() || value.get("event").is_some() || value.get("messages").is_some()
}

/// The conversation of a recorded value; `None` for an export line of another event.
fn recorded(value: serde_json::Value) -> Result<Option<Conversation>, ConversationError> {
    let malformed = |what: &str| {
        let what = what.to_owned();
        move |e: serde_json::Error| ConversationError::Malformed { what, reason: e.to_string() }
    };
    let transcript: Transcript = if value.get("proof").is_some() {
        serde_json::from_value::<TranscriptEntry>(value).map_err(malformed("a transcript entry"))?.transcript
    } else if let Some(event) = value.get("event") {
        let Some(inner) = event.get("transcript") else { return Ok(None) };
        serde_json::from_value(inner.clone()).map_err(malformed("an exported transcript"))?
    } else if value.get("messages").is_some() {
        serde_json::from_value(value).map_err(malformed("a transcript"))?
    } else {
        return Err(ConversationError::Unknown("a line is not a transcript".into()));
    };
    Ok(Some(Conversation {
        env: Some(transcript.env.name),
        challenge_id: Some(transcript.challenge_id),
        miner: Some(transcript.miner.hotkey.clone()),
        reward_milli: Some(transcript.reward_milli),
        messages: transcript.messages.into_iter().map(|m| Message { role: m.role, content: m.content }).collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::event::Event;

    /// `af ledger export --format jsonl` lines of the demo's events: transcripts and others.
    fn export_lines() -> (Vec<String>, Vec<Hash32>) {
        let validator = crate::ledger::LedgerKey::from_seed([1; 32]).validator();
        // Both miners answer each challenge: events 0 and 2 are the contender's answers to
        // two challenges, 1 and 3 the champion's to the same two.
        let events = crate::ledger::demo::demo_events(&validator, 0, 4, 64);
        let challenges = events
            .iter()
            .filter_map(|e| match e {
                Event::Transcript(t) => Some(t.challenge_id),
                _ => None,
            })
            .collect();
        let lines = events
            .iter()
            .enumerate()
            .map(|(i, event)| {
                serde_json::json!({"validator": validator, "height": 0, "event_idx": i, "event": event}).to_string()
            })
            .chain([r#"{"validator":"v","height":1,"event_idx":0,"event":{"ratio_updated":{}}}"#.to_string()])
            .collect();
        (lines, challenges)
    }

    #[test]
    fn json_lines_are_read_other_events_passed_over_and_the_challenge_picks_one() {
        let (lines, challenges) = export_lines();
        assert_eq!(challenges.len(), 4);
        let all = lines.join("\n");
        let Err(e) = read_conversation(&all, None, None) else { panic!("several transcripts, none picked") };
        assert!(matches!(e, ConversationError::Several(4)), "{e}");
        let Err(e) = read_conversation(&all, Some(&challenges[2]), None) else {
            panic!("two answers to one challenge")
        };
        assert!(matches!(e, ConversationError::SeveralOf { n: 2, .. }), "{e}");
        // The contender's lines and the other event's.
        let text = [&lines[0], &lines[2], &lines[4]].map(|l| l.as_str()).join("\n");
        let picked = read_conversation(&text, Some(&challenges[2]), None).unwrap();
        assert_eq!(picked.challenge_id, Some(challenges[2]));
        // Of both miners' answers to one challenge, --miner picks one.
        let champion = crate::ledger::demo::DEMO_CHAMPION;
        let theirs = read_conversation(&all, Some(&challenges[2]), Some(champion)).unwrap();
        assert_eq!((theirs.challenge_id, theirs.miner.as_deref()), (Some(challenges[2]), Some(champion)));
        assert!(!picked.messages.is_empty() && picked.env.is_some() && picked.reward_milli.is_some());
        let absent = Hash32([0xee; 32]);
        assert!(matches!(read_conversation(&text, Some(&absent), None), Err(ConversationError::NoneFound { .. })));
        // One line alone is the one meant, whatever the flag (the caller compares).
        assert_eq!(read_conversation(&lines[0], None, None).unwrap().challenge_id, Some(challenges[0]));
    }

    #[test]
    fn a_bare_message_list_and_garbage_are_told_apart() {
        let bare = r#"[{"role":"user","content":"q"},{"role":"assistant","content":"a"}]"#;
        let c = read_conversation(bare, None, None).unwrap();
        assert_eq!((c.messages.len(), c.env), (2, None));
        assert!(matches!(read_conversation("{\"a\": 1} x", None, None), Err(ConversationError::NotJson(_))));
        assert!(matches!(read_conversation(r#"{"a": 1}"#, None, None), Err(ConversationError::Unknown(_))));
    }
}

/// What `af env score` was told on its command line, beside the file it read.
#[derive(Clone, Debug, Default)]
pub struct ScoreFlags<'a> {
    pub env: Option<&'a str>,
    pub challenge_id: Option<Hash32>,
    pub miner: Option<&'a str>,
    /// One answer to score (single-turn envs); else the file's conversation is scored.
    pub answer: Option<&'a str>,
}

/// A conversation or answer scored again.
#[derive(Clone, Debug)]
pub struct Rescored {
    pub env: String,
    pub challenge_id: Hash32,
    pub reward_milli: i32,
    /// The reward the file recorded, if it recorded one.
    pub recorded_reward_milli: Option<i32>,
    /// The parsed action (an answer), or the whole scoring (a conversation).
    pub detail: serde_json::Value,
}

impl Rescored {
    /// Whether the reward equals the one recorded (true when none was).
    pub fn agrees(&self) -> bool {
        self.recorded_reward_milli.is_none_or(|r| r == self.reward_milli)
    }
}

/// Why a score could not be computed: the flags and the file disagree, or say too little.
#[derive(Debug, thiserror::Error)]
pub enum RescoreError {
    #[error("--{flag} {given} but the transcript is {recorded}")]
    Disagree { flag: &'static str, given: String, recorded: String },
    #[error("give --{flag}: the transcript file does not say which {what} it is")]
    Missing { flag: &'static str, what: &'static str },
    #[error(transparent)]
    UnknownEnv(#[from] crate::envs::UnknownEnv),
    #[error("{0} is multi-turn: score a whole conversation with --transcript FILE")]
    MultiTurn(String),
    #[error("the transcript is not one this environment produces: {0}")]
    NotProduced(#[from] crate::envs::TranscriptError),
    #[error("give --answer TEXT or --transcript FILE")]
    Nothing,
}

/// Scores `flags.answer`, or else `recorded`'s conversation, on the env and challenge that
/// the flags and the file name; where both name one they must agree, since scoring one
/// challenge's conversation as another's would print a meaningless reward.
pub fn rescore(
    registry: &crate::envs::Registry,
    flags: &ScoreFlags<'_>,
    recorded: Option<&Conversation>,
) -> Result<Rescored, RescoreError> {
    /// The value the flag and the file name (they must agree where both do).
    fn agree<T: PartialEq + ToString>(
        flag: &'static str,
        given: Option<T>,
        recorded: Option<T>,
        describe: impl Fn(&T) -> String,
    ) -> Result<Option<T>, RescoreError> {
        match (given, recorded) {
            (Some(g), Some(r)) if g != r => {
                Err(RescoreError::Disagree { flag, given: g.to_string(), recorded: describe(&r) })
            }
            (Some(v), _) | (None, Some(v)) => Ok(Some(v)),
            (None, None) => Ok(None),
        }
    }
    let file_miner = recorded.and_then(|r| r.miner.clone());
    agree("miner", flags.miner.map(String::from), file_miner, |m| format!("{m}'s answer"))?;
    let file_env = recorded.and_then(|r| r.env.clone());
    let env_name = agree("env", flags.env.map(String::from), file_env, |e| format!("of env {e}"))?
        .ok_or(RescoreError::Missing { flag: "env", what: "environment" })?;
    let file_id = recorded.and_then(|r| r.challenge_id);
    let id = agree("challenge-id", flags.challenge_id, file_id, |c| format!("of challenge {c}"))?
        .ok_or(RescoreError::Missing { flag: "challenge-id", what: "challenge" })?;
    let env = registry.named(&env_name)?;
    let (reward_milli, detail) = match (flags.answer, recorded) {
        (Some(answer), _) => {
            if env.spec().turns != crate::envs::Turns::Single {
                return Err(RescoreError::MultiTurn(env.spec().name.to_string()));
            }
            let (action, reward) = crate::envs::score_answer(env, &id, answer);
            (reward, serde_json::json!({ "action": action }))
        }
        (None, Some(recorded)) => {
            let scored = crate::envs::score_transcript(env, &id, &recorded.messages)?;
            (scored.reward_milli, serde_json::to_value(&scored).unwrap_or_default())
        }
        (None, None) => return Err(RescoreError::Nothing),
    };
    Ok(Rescored {
        env: env.spec().name.to_string(),
        challenge_id: id,
        reward_milli,
        recorded_reward_milli: recorded.and_then(|r| r.reward_milli),
        detail,
    })
}
