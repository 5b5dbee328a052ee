//! `af transcripts`: a miner's view of every challenge it was given, across every
//! validator's log we hold: the messages, its answer, its score and its opponent's, the
//! decision, and for each an inclusion proof (transcript -> block -> headers up to the
//! tip the validator committed, where it recorded a commitment covering that block).
//! `af transcripts verify PROOF.json` checks such a proof offline with nothing else.

use super::{print_json, read_input};
use crate::outln;
use af::ledger::event::{ChainCommitment, Event, Transcript};
use af::ledger::proof::{prove_in_block, signed_headers, verify_inclusion_proof, InclusionProof, SignedHeader};
use af::limits::MAX_JSON_INPUT_BYTES;
use af::replay::fold::ChainFold;
use anyhow::Context;
use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct TranscriptsArgs {
    #[command(subcommand)]
    pub command: Option<TranscriptsCommand>,
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// The miner's hotkey.
    #[arg(long)]
    pub miner: Option<String>,
    #[arg(long)]
    pub env: Option<String>,
    /// A match id (hex).
    #[arg(long = "match")]
    pub match_id: Option<String>,
    /// One JSON document with every transcript and its proof.
    #[arg(long, conflicts_with = "jsonl")]
    pub json: bool,
    /// One JSON object per line, each with its proof.
    #[arg(long)]
    pub jsonl: bool,
}

#[derive(Subcommand, Debug)]
pub enum TranscriptsCommand {
    /// Check a transcript proof (one object of `af transcripts --json` output, or its
    /// `proof` field) offline.
    Verify {
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

/// A transcript's proof: its inclusion in a block and the headers up to a committed tip.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TranscriptProof {
    pub inclusion: InclusionProof,
    /// The validator's recorded commitment whose tip the headers reach, if one covers it.
    pub commitment: Option<ChainCommitment>,
}

#[derive(Serialize)]
struct Entry {
    validator: af::bytes::ValidatorKey,
    height: u64,
    event_idx: u32,
    role: &'static str,
    transcript: Transcript,
    opponent: Option<Opponent>,
    /// win, loss or draw for this miner; none when the pair is incomplete.
    outcome: Option<&'static str>,
    env_decision: Option<af::ledger::event::EnvOutcome>,
    /// Whether the contender won the match, once decided.
    match_contender_won: Option<bool>,
    proof: TranscriptProof,
}

#[derive(Serialize)]
struct Opponent {
    hotkey: String,
    reward_milli: i32,
}

pub fn run(args: TranscriptsArgs) -> anyhow::Result<ExitCode> {
    if let Some(TranscriptsCommand::Verify { file, json }) = args.command {
        return verify(&file, json);
    }
    let data = args.data.context("--data is required")?;
    let miner = args.miner.context("--miner HOTKEY is required")?;
    let match_filter = args.match_id.as_deref().map(af::bytes::Hash32::from_hex).transpose().context("--match")?;
    let (store, replayed) = super::audit::replay_dir(&data)?;
    let folds: BTreeMap<_, &ChainFold> = replayed.folds.iter().map(|f| (f.validator, f)).collect();
    let mut blocks: BTreeMap<(af::bytes::ValidatorKey, u64), af::ledger::block::DecodedBlock> = BTreeMap::new();
    let mut headers: BTreeMap<af::bytes::ValidatorKey, BTreeMap<u64, SignedHeader>> = BTreeMap::new();
    let mut entries = Vec::new();
    for location in store.locate_miner(&miner)? {
        let key = (location.validator, location.height);
        let block = match blocks.entry(key) {
            std::collections::btree_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::btree_map::Entry::Vacant(entry) => {
                entry.insert(store.block(&location.validator, location.height)?.context("an indexed block is missing")?)
            }
        };
        let Some(Event::Transcript(t)) = block.block.events.get(location.event_idx as usize) else { continue };
        if args.env.as_ref().is_some_and(|e| *e != t.env.name) || match_filter.is_some_and(|m| m != t.match_id) {
            continue;
        }
        // The opponent answered the same challenge; both transcripts share a block.
        let opponent = block.block.events.iter().find_map(|e| match e {
            Event::Transcript(o) if o.challenge_id == t.challenge_id && o.miner.hotkey != t.miner.hotkey => {
                Some(Opponent { hotkey: o.miner.hotkey.clone(), reward_milli: o.reward_milli })
            }
            _ => None,
        });
        let fold = folds.get(&location.validator);
        let played = fold.and_then(|f| f.matches.get(&t.match_id));
        let role = match played {
            Some(m) if m.contender.hotkey == miner => "contender",
            Some(m) if m.champion.hotkey == miner => "champion",
            _ => "unknown",
        };
        let commitment =
            fold.and_then(|f| f.commitments.iter().find(|c| c.committed_height >= location.height)).cloned();
        // Headers up to the committed tip (else the current one), each read from the store
        // once however many of this miner's transcripts it covers.
        let tip_height = store.tip(&location.validator)?.context("an indexed chain has no tip")?.height;
        let last = commitment.as_ref().map_or(tip_height, |c| c.committed_height.clamp(location.height, tip_height));
        let known = headers.entry(location.validator).or_default();
        for height in location.height..=last {
            if let std::collections::btree_map::Entry::Vacant(slot) = known.entry(height) {
                slot.insert(signed_headers(&store, &location.validator, height, height)?.remove(0));
            }
        }
        let inclusion = prove_in_block(
            block,
            location.event_idx,
            known.range(location.height..=last).map(|(_, h)| h.clone()).collect(),
        )?;
        entries.push(Entry {
            validator: location.validator,
            height: location.height,
            event_idx: location.event_idx,
            role,
            outcome: opponent.as_ref().map(|o| match t.reward_milli.cmp(&o.reward_milli) {
                std::cmp::Ordering::Greater => "win",
                std::cmp::Ordering::Less => "loss",
                std::cmp::Ordering::Equal => "draw",
            }),
            opponent,
            env_decision: played.and_then(|m| m.env_folds.get(&t.env.name)).and_then(|e| e.decision),
            match_contender_won: played.and_then(|m| m.decided.as_ref()).map(|d| d.contender_won),
            transcript: t.clone(),
            proof: TranscriptProof { inclusion, commitment },
        });
    }
    if args.json {
        print_json(&entries)?;
    } else if args.jsonl {
        for entry in &entries {
            outln!("{}", serde_json::to_string(entry)?);
        }
    } else {
        for e in &entries {
            let t = &e.transcript;
            outln!(
                "{} h{} e{}  {:<9} {:<10} #{:<4} {}  score {:>5} vs {:>5}  {:<4}  {}",
                &e.validator.to_hex()[..12],
                e.height,
                e.event_idx,
                t.env.name,
                e.role,
                t.challenge_index,
                &t.challenge_id.to_hex()[..16],
                t.reward_milli,
                e.opponent.as_ref().map_or("-".into(), |o| o.reward_milli.to_string()),
                e.outcome.unwrap_or("-"),
                e.proof
                    .commitment
                    .as_ref()
                    .map_or("proof to tip".into(), |c| format!("proof to commitment at chain block {}", c.chain_block))
            );
        }
        outln!("{} transcript(s) of {miner}; --json for messages, answers and proofs", entries.len());
    }
    Ok(ExitCode::SUCCESS)
}

fn verify(file: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let text = read_input(file, MAX_JSON_INPUT_BYTES)?;
    let value: serde_json::Value = serde_json::from_str(&text).context("the proof is not JSON")?;
    // Accept a whole entry (with a `proof` field) or the proof itself.
    let proof: TranscriptProof =
        serde_json::from_value(value.get("proof").cloned().unwrap_or(value)).context("not a transcript proof")?;
    let result =
        verify_inclusion_proof(&proof.inclusion).map_err(|e| e.to_string()).and_then(|tip| match &proof.commitment {
            Some(c) if c.committed_height != tip.height || c.committed_hash != tip.hash => Err(format!(
                "the headers reach height {} hash {}, not the committed height {} hash {}",
                tip.height, tip.hash, c.committed_height, c.committed_hash
            )),
            _ => Ok(tip),
        });
    let is_transcript = matches!(proof.inclusion.event, Event::Transcript(_));
    let ok = result.is_ok() && is_transcript;
    if json {
        print_json(&serde_json::json!({
            "ok": ok,
            "validator": proof.inclusion.validator,
            "height": proof.inclusion.height,
            "event_idx": proof.inclusion.event_idx,
            "tip": result.as_ref().ok(),
            "commitment": proof.commitment,
            "error": result.as_ref().err().cloned().or((!is_transcript).then(|| "the event is not a transcript".to_string())),
        }))?;
    } else {
        match (&result, is_transcript) {
            (Ok(tip), true) => {
                outln!(
                    "ok: transcript in block {} of validator {}, chained to height {} hash {}",
                    proof.inclusion.height,
                    proof.inclusion.validator,
                    tip.height,
                    tip.hash
                );
                match &proof.commitment {
                    Some(c) => outln!(
                        "which the validator committed at chain block {} (netuid {}); check it on chain with `af chain commitments`",
                        c.chain_block, c.netuid
                    ),
                    None => outln!("no commitment covers this block yet: the proof reaches the validator's tip when it was made"),
                }
            }
            (Ok(_), false) => outln!("FAIL: the proven event is not a transcript"),
            (Err(e), _) => outln!("FAIL: {e}"),
        }
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(super::EXIT_CHECK_FAILED) })
}
