//! `af transcripts`: a miner's view of every challenge it was given, across every
//! validator's log we hold: the messages, its answer, its score and its opponent's, the
//! decision, and for each an inclusion proof (transcript -> block -> headers up to the
//! tip the validator committed, where it recorded a commitment covering that block).
//! `af transcripts verify PROOF.json` checks such a proof offline with nothing else.

use super::{print_json, read_input};
use crate::outln;
use af::ledger::entry::{verify_entry, TranscriptEntry};
use af::ledger::event::Event;
use af::limits::MAX_JSON_INPUT_BYTES;
use anyhow::Context;
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct TranscriptsArgs {
    #[command(subcommand)]
    pub command: Option<TranscriptsCommand>,
    /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// The miner's hotkey.
    #[arg(long)]
    pub miner: Option<String>,
    #[arg(long)]
    pub env: Option<String>,
    /// A match id: 64 hex digits, or a unique prefix of at least 16.
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
    let (store, replayed) = super::http::replay_dir(&data)?;
    let match_filter = match args.match_id.as_deref() {
        Some(text) => Some(
            af::replay::entries::resolve_match_id(&replayed.folds, text)
                .map_err(|e| anyhow::anyhow!("--match: {e}"))?,
        ),
        None => None,
    };
    let locations = store.find_miner(&miner)?;
    if locations.is_empty() {
        anyhow::bail!(
            "no log held in {} has a transcript of miner {miner:?}: check the hotkey, or fetch more logs (af mirror, af node)",
            data.display()
        );
    }
    let filter = af::replay::entries::Filter { env: args.env.clone(), match_id: match_filter };
    let entries = af::replay::entries::entries_at(&store, &replayed.folds, &locations, Some(&miner), &filter)?;
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
