//! A miner's transcript entries (ledger-spec/09) built from a store and its replay: each
//! transcript with its inclusion proof, its opponent's, and the proof of the commitment
//! that covers it, plus replay's context under `unproven`. Shared by `af transcripts`
//! and the node's HTTP API, so both hand out the same documents.

use super::fold::ChainFold;
use crate::bytes::{ChallengeId, Hash32, ValidatorKey};
use crate::ledger::block::DecodedBlock;
use crate::ledger::entry::{outcome, EntryProof, EnvTallyShown, Opponent, TranscriptEntry, Unproven};
use crate::ledger::event::{ChainCommitment, Event};
use crate::ledger::proof::{prove_in_block, signed_headers, InclusionError, InclusionProof, SignedHeader};
use crate::ledger::store::{Location, Store, StoreError};
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

#[derive(Debug, thiserror::Error)]
pub enum EntriesError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Proof(#[from] InclusionError),
    #[error("validator {validator}: block {height} is indexed but missing")]
    Missing { validator: ValidatorKey, height: u64 },
    #[error("the {index} index points at {location}, which holds no such transcript (`af ledger verify` checks the indexes)")]
    WrongIndex { index: &'static str, location: Location },
    #[error("encoding an entry: {0}")]
    Encode(#[from] serde_json::Error),
    #[error("no room for the page's first entry in the memory budget")]
    NoRoom,
    #[error(transparent)]
    SpillFile(#[from] crate::replay::spill_file::SpillFileError),
}

/// What the locations were found by. Each must hold a transcript of it: one that does
/// not is a wrong index entry, and an error (an index never answers on its own).
#[derive(Clone, Copy, Debug)]
pub enum Found<'a> {
    Miner(&'a str),
    Challenge(ChallengeId),
}

/// Which transcripts to build entries for.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub env: Option<String>,
    pub match_id: Option<Hash32>,
    /// `win`, `loss` or `draw` for the miner (transcripts with no opponent answer in
    /// their block have no result and are left out by this filter).
    pub result: Option<String>,
}

/// The match whose id is `text`: 64 hex digits, or a prefix of at least 16 that names
/// exactly one match in `folds` (as `af transcripts` and the report print them).
pub fn resolve_match_id(folds: &[crate::replay::fold::ChainFold], text: &str) -> Result<Hash32, String> {
    let text = text.trim().to_ascii_lowercase();
    if !text.bytes().all(|b| b.is_ascii_hexdigit()) || text.len() > 64 {
        return Err(format!("{text:?} is not a match id (64 hex digits, or a prefix of at least 16)"));
    }
    if text.len() == 64 {
        return Hash32::from_hex(&text).map_err(|e| e.to_string());
    }
    if text.len() < 16 {
        return Err(format!("the match id prefix {text:?} is shorter than 16 hex digits"));
    }
    let mut found = std::collections::BTreeSet::new();
    for id in folds.iter().flat_map(|f| f.matches.ids()) {
        let id = id.map_err(|e| e.to_string())?;
        if id.to_hex().starts_with(&text) {
            found.insert(id);
        }
    }
    match found.len() {
        1 => Ok(*found.first().expect("one")),
        0 => Err(format!("no match id in the logs held starts with {text}")),
        n => Err(format!(
            "the prefix {text} is ambiguous: {n} matches start with it ({}); give more digits",
            found.iter().map(|id| id.to_hex()).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// The challenge whose id is `text`: 64 hex digits, or a prefix of at least 16 that names
/// exactly one challenge in the store's index.
pub fn resolve_challenge_id(store: &Store, text: &str) -> Result<Hash32, String> {
    let text = text.trim().to_ascii_lowercase();
    if !text.bytes().all(|b| b.is_ascii_hexdigit()) || text.len() > 64 {
        return Err(format!("{text:?} is not a challenge id (64 hex digits, or a prefix of at least 16)"));
    }
    if text.len() == 64 {
        return Hash32::from_hex(&text).map_err(|e| e.to_string());
    }
    if text.len() < 16 {
        return Err(format!("the challenge id prefix {text:?} is shorter than 16 hex digits"));
    }
    let pad = |digit: char| Hash32::from_hex(&format!("{text}{}", digit.to_string().repeat(64 - text.len())));
    let (low, high) = (pad('0').map_err(|e| e.to_string())?, pad('f').map_err(|e| e.to_string())?);
    let found = store.challenge_ids_between(&low, &high, 8).map_err(|e| e.to_string())?;
    match found.as_slice() {
        [one] => Ok(*one),
        [] => Err(format!("no challenge id in the logs held starts with {text}")),
        many => Err(format!(
            "the prefix {text} is ambiguous: {}{} challenges start with it ({}); give more digits",
            if many.len() >= 8 { "at least " } else { "" },
            many.len(),
            many.iter().map(|id| id.to_hex()).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// How far an entry's inclusion proof runs when no commitment covers its block (where one
/// does, it runs to the committed tip either way: ledger-spec/09).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// To the log's tip now: what a node and the CLI serve, as fresh as the store.
    Tip,
    /// To the entry's own block: what a published page holds, so that a page does not
    /// change, nor grow, as the log grows (a proof to the tip made every page's proofs
    /// grow with the log, and the pages with its square). The explorer chains it to
    /// the site's signed tip and says how far it reaches.
    OwnBlock,
}

/// Entries for the transcripts at `locations`, index hits of `found`, each confirmed
/// against its block here, with headers up to the validator's committed tip where a
/// commitment covers the block, else as `reach` says. Each entry goes to `emit` as it is built,
/// and none after `emit` says it has enough (returns false).
///
/// What it holds does not grow with `locations`: one block (the current one: locations
/// come in log order, and neighbours share a block), the current validator's headers
/// from the current height on, and the commitment proofs from there on.
pub fn for_each_entry(
    store: &Store,
    folds: &[ChainFold],
    locations: &[Location],
    (found, filter, reach): (Found<'_>, &Filter, Reach),
    emit: &mut dyn FnMut(TranscriptEntry) -> bool,
) -> Result<(), EntriesError> {
    let folds: BTreeMap<_, &ChainFold> = folds.iter().map(|f| (f.validator, f)).collect();
    let mut current: Option<((ValidatorKey, u64), DecodedBlock)> = None;
    let mut headers: Option<(ValidatorKey, BTreeMap<u64, SignedHeader>)> = None;
    let mut commitment_proofs: BTreeMap<(ValidatorKey, u64), Option<InclusionProof>> = BTreeMap::new();
    for location in locations {
        let key = (location.validator, location.height);
        if current.as_ref().map(|(at, _)| *at) != Some(key) {
            let missing = EntriesError::Missing { validator: location.validator, height: location.height };
            current = Some((key, store.block(&location.validator, location.height)?.ok_or(missing)?));
        }
        let block = &current.as_ref().expect("read just above").1;
        let t = block.block.events.get(location.event_idx as usize).and_then(|e| e.transcript());
        let (index, held) = match found {
            Found::Miner(miner) => ("miner", t.filter(|t| t.miner.hotkey == miner)),
            Found::Challenge(id) => ("challenge", t.filter(|t| t.challenge_id == id)),
        };
        let Some(t) = held else {
            return Err(EntriesError::WrongIndex { index, location: *location });
        };
        if filter.env.as_ref().is_some_and(|e| *e != t.env.name) || filter.match_id.is_some_and(|m| m != t.match_id) {
            continue;
        }
        // The opponent answered the same challenge; both transcripts share a block.
        let opponent_idx = block.block.events.iter().position(|e| {
            e.transcript().is_some_and(|o| o.challenge_id == t.challenge_id && o.miner.hotkey != t.miner.hotkey)
        });
        if let Some(wanted) = &filter.result {
            let theirs = opponent_idx.and_then(|idx| block.block.events[idx].transcript());
            if theirs.map(|o| outcome(t.reward_milli, o.reward_milli)) != Some(wanted.as_str()) {
                continue;
            }
        }
        let fold = folds.get(&location.validator);
        let played = fold.map(|f| f.matches.get(&t.match_id)).transpose()?.flatten();
        let played = played.as_deref();
        let role = match played {
            Some(m) if *m.contender.hotkey == *t.miner.hotkey => "contender",
            Some(m) if *m.champion.hotkey == *t.miner.hotkey => "champion",
            _ => "unknown",
        };
        let commitment = match fold {
            Some(f) => first_commitment_from(f, location.height)?,
            None => None,
        };
        // Headers up to the committed tip (else the current one), each read from the store
        // once however many transcripts it covers.
        let missing = EntriesError::Missing { validator: location.validator, height: location.height };
        let tip_height = store.tip(&location.validator)?.ok_or(missing)?.height;
        let uncommitted = match reach {
            Reach::Tip => tip_height,
            Reach::OwnBlock => location.height,
        };
        let last = commitment.as_ref().map_or(uncommitted, |c| c.committed_height.clamp(location.height, tip_height));
        // Headers below this block are for entries already built (a later location lower
        // down is read again, never wrong).
        if headers.as_ref().is_none_or(|(of, _)| *of != location.validator) {
            headers = Some((location.validator, BTreeMap::new()));
        }
        let known = &mut headers.as_mut().expect("set just above").1;
        if known.keys().next().is_some_and(|first| *first < location.height) {
            *known = known.split_off(&location.height);
        }
        commitment_proofs.retain(|(of, height), _| *of == location.validator && *height >= location.height);
        for height in location.height..=last {
            if let Entry::Vacant(slot) = known.entry(height) {
                slot.insert(signed_headers(store, &location.validator, height, height)?.remove(0));
            }
        }
        let inclusion = prove_in_block(
            block,
            location.event_idx,
            known.range(location.height..=last).map(|(_, h)| h.clone()).collect(),
        )?;
        let opponent_proof = opponent_idx
            .map(|idx| prove_in_block(block, idx as u32, vec![known[&location.height].clone()]))
            .transpose()?;
        let commitment_proof = match &commitment {
            Some(c) if c.committed_height == last => {
                match commitment_proofs.entry((location.validator, c.committed_height)) {
                    Entry::Occupied(found) => found.get().clone(),
                    Entry::Vacant(slot) => slot.insert(prove_commitment(store, &location.validator, c)?).clone(),
                }
            }
            _ => None,
        };
        let opponent = opponent_proof.as_ref().and_then(|p| p.event.transcript()).map(|o| Opponent {
            hotkey: o.miner.hotkey.clone(),
            reward_milli: o.reward_milli,
            answer: o.answer.clone(),
        });
        let env_fold = played.and_then(|m| m.env_folds.get(&t.env.name));
        let more = emit(TranscriptEntry {
            validator: location.validator,
            height: location.height,
            event_idx: location.event_idx,
            outcome: opponent.as_ref().map(|o| outcome(t.reward_milli, o.reward_milli).to_string()),
            opponent,
            transcript: t.clone(),
            unproven: Unproven {
                role: role.to_string(),
                env_decision: env_fold.and_then(|e| e.decision),
                match_contender_won: played.and_then(|m| m.decided.as_ref()).map(|d| d.contender_won),
                env_tally: env_fold.map(|e| EnvTallyShown {
                    wins: e.wins,
                    losses: e.losses,
                    draws: e.draws,
                    n_challenges: u64::from(e.wins) + u64::from(e.losses) + u64::from(e.draws),
                }),
                rule: played.map(|m| m.rule.to_string()),
                match_reason: played.and_then(|m| m.verdict_reason()),
            },
            proof: EntryProof { inclusion, opponent: opponent_proof, commitment: commitment_proof },
        });
        if !more {
            break;
        }
    }
    Ok(())
}

/// One page of the entries `found` names, as the node's API serves it (ledger-spec/11):
/// `{"entries":[...],"offset":n,"total":n}` with at most `limit` entries from `offset`
/// on, and the index's count of them all. The page stops before an entry that would take
/// it past `max_bytes` (it always holds its first entry, however long) or that `room`
/// refuses: `room` is asked for each entry's bytes before they are added (the node's
/// memory budget), and a page it refuses its first entry is `NoRoom`. Reads `offset +
/// limit` index entries and the page's blocks, one at a time, whatever the history.
pub fn entries_page(
    store: &Store,
    folds: &[ChainFold],
    (found, filter, reach): (Found<'_>, &Filter, Reach),
    (offset, limit): (usize, usize),
    max_bytes: usize,
    room: &mut dyn FnMut(usize) -> bool,
) -> Result<Vec<u8>, EntriesError> {
    let (total, page) = match found {
        Found::Miner(miner) => store.locate_miner_page(miner, offset, limit)?,
        Found::Challenge(id) => {
            let all = store.locate_challenge(&id)?;
            (all.len() as u64, all.into_iter().skip(offset).take(limit).collect())
        }
    };
    let mut body = b"{\"entries\":[".to_vec();
    let (mut written, mut failed, mut refused) = (0usize, None, false);
    for_each_entry(store, folds, &page, (found, filter, reach), &mut |entry| {
        let encoded = match serde_json::to_vec(&entry) {
            Ok(encoded) => encoded,
            Err(error) => {
                failed = Some(error);
                return false;
            }
        };
        let separator = usize::from(written > 0);
        if written > 0 && body.len() + separator + encoded.len() > max_bytes {
            return false;
        }
        if !room(separator + encoded.len()) {
            refused = written == 0;
            return false;
        }
        if written > 0 {
            body.push(b',');
        }
        body.extend_from_slice(&encoded);
        written += 1;
        true
    })?;
    if let Some(error) = failed {
        return Err(error.into());
    }
    if refused {
        return Err(EntriesError::NoRoom);
    }
    // A published page (proofs to their own blocks) counts the entries through itself,
    // so it stays the same bytes as the miner's later entries come (ledger-spec/11); the
    // miner's index on the site says the whole count.
    let total = match reach {
        Reach::Tip => total,
        Reach::OwnBlock => (offset + written) as u64,
    };
    body.extend_from_slice(format!("],\"offset\":{offset},\"total\":{total}}}").as_bytes());
    Ok(body)
}

/// The first commitment of `fold`'s log that covers `height`.
fn first_commitment_from(
    fold: &crate::replay::fold::ChainFold,
    height: u64,
) -> Result<Option<ChainCommitment>, crate::replay::spill_file::SpillFileError> {
    for c in fold.commitments.iter() {
        let c = c?;
        if c.committed_height >= height {
            return Ok(Some(c));
        }
    }
    Ok(None)
}

/// The inclusion proof of the validator's own `ChainCommitment` event `c`, found in the
/// blocks after the one it commits (it is recorded once the chain accepted it).
fn prove_commitment(
    store: &Store,
    validator: &ValidatorKey,
    c: &ChainCommitment,
) -> Result<Option<InclusionProof>, EntriesError> {
    let Some(tip) = store.tip(validator)? else { return Ok(None) };
    for height in c.committed_height + 1..=tip.height {
        let block = store.block(validator, height)?.ok_or(EntriesError::Missing { validator: *validator, height })?;
        let found = block.block.events.iter().position(|e| matches!(e, Event::ChainCommitment(x) if x == c));
        if let Some(idx) = found {
            let headers = signed_headers(store, validator, height, height)?;
            return Ok(Some(prove_in_block(&block, idx as u32, headers)?));
        }
    }
    Ok(None)
}

/// One challenge of a match as both players answered it, read from the validator's
/// signed block (not proven here: the entries of `af/v1/transcripts` carry the proofs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChallengePair {
    pub env: String,
    pub challenge_index: u64,
    pub challenge_id: Hash32,
    pub height: u64,
    /// (reward in thousandths, answer) of the contender, and of the champion when its
    /// answer is in the same block.
    pub contender: (i32, ShownAnswer),
    pub champion: Option<(i32, ShownAnswer)>,
}

/// The start of an answer, and the whole answer's length: a page shows the start, the
/// entries carry it whole (an answer can be 256 KiB, and a page has fifty pairs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShownAnswer {
    pub start: String,
    pub bytes: usize,
}

impl ShownAnswer {
    fn of(answer: &str, chars: usize) -> ShownAnswer {
        ShownAnswer { start: answer.chars().take(chars).collect(), bytes: answer.len() }
    }
}

/// The challenges of match `match_id` of `validator` (its fold `played`), in log order:
/// how many the index places in the match's blocks, and those from `offset` on, at most
/// `limit`, each confirmed against its block (an index hit of another match is left out),
/// with the first `chars` characters of each answer. Reads the contender's index entries
/// and the page's blocks, one at a time, not the contender's other transcripts.
pub fn match_pairs(
    store: &Store,
    validator: &ValidatorKey,
    match_id: &Hash32,
    played: &super::records::MatchFold,
    (offset, limit): (usize, usize),
    chars: usize,
) -> Result<(usize, Vec<ChallengePair>), EntriesError> {
    let last = played.decided.as_ref().map_or(u64::MAX, |d| d.height);
    let heights = played.started_height..=last;
    let (total, locations) = store.locate_miner_where(
        &played.contender.hotkey,
        &|l| l.validator == *validator && heights.contains(&l.height),
        offset,
        limit,
    )?;
    // Locations come in height order: one block in memory at a time.
    let mut current: Option<DecodedBlock> = None;
    let mut pairs = Vec::new();
    for location in &locations {
        if current.as_ref().is_none_or(|b| b.block.header.height != location.height) {
            let missing = EntriesError::Missing { validator: *validator, height: location.height };
            current = Some(store.block(validator, location.height)?.ok_or(missing)?);
        }
        let events = &current.as_ref().expect("read just above").block.events;
        let Some(t) = events.get(location.event_idx as usize).and_then(|e| e.transcript()) else { continue };
        if t.match_id != *match_id || *t.miner.hotkey != *played.contender.hotkey {
            continue;
        }
        let champion = events.iter().filter_map(|e| e.transcript()).find(|o| {
            o.match_id == *match_id && o.challenge_id == t.challenge_id && *o.miner.hotkey == *played.champion.hotkey
        });
        pairs.push(ChallengePair {
            env: t.env.name.clone(),
            challenge_index: t.challenge_index,
            challenge_id: t.challenge_id,
            height: location.height,
            contender: (t.reward_milli, ShownAnswer::of(&t.answer, chars)),
            champion: champion.map(|o| (o.reward_milli, ShownAnswer::of(&o.answer, chars))),
        });
    }
    Ok((total, pairs))
}
