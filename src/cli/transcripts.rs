//! `af transcripts`: a miner's view of every challenge it was given, across every
//! validator's log we hold: the messages, its answer, its score and its opponent's, the
//! decision, and for each an inclusion proof (transcript -> block -> headers up to the
//! tip the validator committed, where it recorded a commitment covering that block).
//! `af transcripts verify PROOF.json` checks such a proof offline with nothing else.

use super::{print_json, read_input};
use crate::outln;
use af::ledger::entry::{outcome, verify_entry, EntryProof, Opponent, TranscriptEntry, Unproven};
use af::ledger::event::{ChainCommitment, Event};
use af::ledger::proof::{prove_in_block, signed_headers, InclusionProof, SignedHeader};
use af::limits::MAX_JSON_INPUT_BYTES;
use af::replay::fold::ChainFold;
use anyhow::Context;
use clap::{Args, Subcommand};
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
    /// Check a transcript entry (one object of `af transcripts --json` or `--jsonl`
    /// output) offline: every proof, and every shown field against the proven bytes.
    Verify {
        file: PathBuf,
        /// Also check, on this chain, that the validator's latest commitment names its
        /// ledger key and (at the same height) the proven tip.
        #[command(flatten)]
        chain: super::chain::ChainArgs,
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: TranscriptsArgs) -> anyhow::Result<ExitCode> {
    if let Some(TranscriptsCommand::Verify { file, chain, json }) = args.command {
        return verify(&file, &chain, json);
    }
    let data = args.data.context("--data is required")?;
    let miner = args.miner.context("--miner HOTKEY is required")?;
    let match_filter = args.match_id.as_deref().map(af::bytes::Hash32::from_hex).transpose().context("--match")?;
    let (store, replayed) = super::audit::replay_dir(&data)?;
    let folds: BTreeMap<_, &ChainFold> = replayed.folds.iter().map(|f| (f.validator, f)).collect();
    let mut blocks: BTreeMap<(af::bytes::ValidatorKey, u64), af::ledger::block::DecodedBlock> = BTreeMap::new();
    let mut headers: BTreeMap<af::bytes::ValidatorKey, BTreeMap<u64, SignedHeader>> = BTreeMap::new();
    let mut commitment_proofs: BTreeMap<(af::bytes::ValidatorKey, u64), Option<InclusionProof>> = BTreeMap::new();
    let mut entries = Vec::new();
    // Each location is confirmed against its block: the index never answers on its own.
    for location in store.find_miner(&miner)? {
        let key = (location.validator, location.height);
        if let std::collections::btree_map::Entry::Vacant(entry) = blocks.entry(key) {
            let block = store.block(&location.validator, location.height)?.context("an indexed block is missing")?;
            entry.insert(block);
        }
        let block = &blocks[&key];
        let Some(t) = block.block.events.get(location.event_idx as usize).and_then(|e| e.transcript()) else {
            continue;
        };
        if args.env.as_ref().is_some_and(|e| *e != t.env.name) || match_filter.is_some_and(|m| m != t.match_id) {
            continue;
        }
        // The opponent answered the same challenge; both transcripts share a block.
        let opponent_idx = block.block.events.iter().position(|e| {
            e.transcript().is_some_and(|o| o.challenge_id == t.challenge_id && o.miner.hotkey != t.miner.hotkey)
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
        let opponent_proof = opponent_idx
            .map(|idx| prove_in_block(block, idx as u32, vec![known[&location.height].clone()]))
            .transpose()?;
        let commitment_proof = match &commitment {
            Some(c) if c.committed_height == last => commitment_proofs
                .entry((location.validator, c.committed_height))
                .or_insert(prove_commitment(&store, &location.validator, c)?)
                .clone(),
            _ => None,
        };
        let opponent = opponent_proof
            .as_ref()
            .and_then(|p| p.event.transcript())
            .map(|o| Opponent { hotkey: o.miner.hotkey.clone(), reward_milli: o.reward_milli });
        entries.push(TranscriptEntry {
            validator: location.validator,
            height: location.height,
            event_idx: location.event_idx,
            outcome: opponent.as_ref().map(|o| outcome(t.reward_milli, o.reward_milli).to_string()),
            opponent,
            transcript: t.clone(),
            unproven: Unproven {
                role: role.to_string(),
                env_decision: played.and_then(|m| m.env_folds.get(&t.env.name)).and_then(|e| e.decision),
                match_contender_won: played.and_then(|m| m.decided.as_ref()).map(|d| d.contender_won),
            },
            proof: EntryProof { inclusion, opponent: opponent_proof, commitment: commitment_proof },
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
                e.unproven.role,
                t.challenge_index,
                &t.challenge_id.to_hex()[..16],
                t.reward_milli,
                e.opponent.as_ref().map_or("-".into(), |o| o.reward_milli.to_string()),
                e.outcome.as_deref().unwrap_or("-"),
                match &e.proof.commitment {
                    Some(p) => match &p.event {
                        Event::ChainCommitment(c) => format!("proof to commitment at chain block {}", c.chain_block),
                        _ => "proof to tip".into(),
                    },
                    None => "proof to tip (no commitment covers it yet)".into(),
                }
            );
        }
        outln!(
            "{} transcript(s) of {miner}; --json for messages, answers and proofs (the role and decisions are replay's, not proven by the entry)",
            entries.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The inclusion proof of the validator's own `ChainCommitment` event `c`, found in the
/// blocks after the one it commits (it is recorded once the chain accepted it).
fn prove_commitment(
    store: &af::ledger::Store,
    validator: &af::bytes::ValidatorKey,
    c: &ChainCommitment,
) -> anyhow::Result<Option<InclusionProof>> {
    let tip = store.tip(validator)?.context("the chain has no tip")?.height;
    for height in c.committed_height + 1..=tip {
        let block = store.block(validator, height)?.context("a block of a verified chain is missing")?;
        let found = block.block.events.iter().position(|e| matches!(e, Event::ChainCommitment(x) if x == c));
        if let Some(idx) = found {
            let headers = signed_headers(store, validator, height, height)?;
            return Ok(Some(prove_in_block(&block, idx as u32, headers)?));
        }
    }
    Ok(None)
}

fn verify(file: &Path, chain: &super::chain::ChainArgs, json: bool) -> anyhow::Result<ExitCode> {
    let text = read_input(file, MAX_JSON_INPUT_BYTES)?;
    // The file is what is being checked: one that is not a well-formed entry fails the
    // check (exit 3), as a changed byte inside one does.
    let entry: TranscriptEntry = match serde_json::from_str(&text) {
        Ok(entry) => entry,
        Err(error) => return super::report_parse_failure(json, "transcript entry", &error),
    };
    let verified = verify_entry(&entry);
    let on_chain = match (&verified, chain.chain.is_some()) {
        (Ok(v), true) => Some(super::chain::check_commitment_on_chain(chain, &v.validator, &v.tip)?),
        _ => None,
    };
    let ok = verified.is_ok() && on_chain.as_ref().is_none_or(|c| c.ok);
    if json {
        print_json(&serde_json::json!({
            "ok": ok,
            "verified": verified.as_ref().ok(),
            "error": verified.as_ref().err().map(|e| e.to_string()),
            "on_chain": on_chain,
            "unproven": entry.unproven,
        }))?;
    } else {
        match &verified {
            Ok(v) => {
                outln!(
                    "ok: transcript {} of block {} (validator {}), every shown field proven, chained to height {} hash {}",
                    v.event_idx,
                    v.height,
                    v.validator,
                    v.tip.height,
                    v.tip.hash
                );
                match &v.commitment {
                    Some(c) => outln!(
                        "proven from the validator's log: it committed that tip at chain block {} on netuid {}",
                        c.chain_block,
                        c.netuid
                    ),
                    None => outln!("unproven: no commitment covers this block yet; the proof reaches the validator's tip when it was made"),
                }
                match &on_chain {
                    Some(check) => outln!("{}on chain: {}", if check.ok { "" } else { "FAIL " }, check.detail),
                    None => outln!("not checked on chain (give --chain SPEC --netuid N to check it)"),
                }
                outln!(
                    "unproven (replay's context, not covered by the proofs): role {}, env decision {:?}, contender won {:?}",
                    entry.unproven.role,
                    entry.unproven.env_decision,
                    entry.unproven.match_contender_won
                );
            }
            Err(e) => outln!("FAIL: {e}"),
        }
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(super::EXIT_CHECK_FAILED) })
}
