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
        /// The entry file (one object of `af transcripts --json` or `--jsonl`), or - for stdin.
        file: PathBuf,
        /// Also check, on this chain, that the validator's latest commitment names its
        /// ledger key and (at the same height) the proven tip.
        #[command(flatten)]
        chain: super::chain::ChainArgs,
        /// Print JSON for scripts (ledger-spec/10 for events).
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
            print_entry(e)?;
        }
        outln!(
            "{} transcript(s) of {miner}; --json for the messages and proofs. Roles, tallies and verdicts are replay's context, not proven by the entry",
            entries.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// One entry as a block of text: the two answers side by side with their rewards, then
/// the env's tally and decision, the match's verdict and why, and what the proof reaches.
fn print_entry(e: &TranscriptEntry) -> anyhow::Result<()> {
    const COLUMN: usize = 44;
    let t = &e.transcript;
    let fit = |text: String| -> String {
        let one_line: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        let mut cut: String = one_line.chars().take(COLUMN).collect();
        if one_line.chars().count() > COLUMN {
            cut.pop();
            cut.push('…');
        }
        cut
    };
    let column = |text: String| format!("{:<COLUMN$}", fit(text));
    let short = |hotkey: &str| hotkey.chars().take(16).collect::<String>();
    let their_role = match e.unproven.role.as_str() {
        "contender" => "champion",
        "champion" => "contender",
        _ => "opponent",
    };
    outln!(
        "match {}  {} v{} #{}  challenge {}  validator {} h{} e{}",
        &t.match_id.to_hex()[..16],
        t.env.name,
        t.env.version,
        t.challenge_index,
        &t.challenge_id.to_hex()[..16],
        &e.validator.to_hex()[..16],
        e.height,
        e.event_idx
    );
    let theirs = e.opponent.as_ref();
    outln!(
        "  {} | {}",
        column(format!("{} {}", e.unproven.role, short(&t.miner.hotkey))),
        theirs.map_or("no opponent answer in this block".into(), |o| format!("{their_role} {}", short(&o.hotkey)))
    );
    outln!(
        "  {} | {}",
        column(format!(
            "reward {}{}",
            af::envs::reward_text(t.reward_milli),
            t.error.as_ref().map_or(String::new(), |err| format!(" (error: {err})"))
        )),
        theirs.map_or(String::new(), |o| format!(
            "reward {}  => {}",
            af::envs::reward_text(o.reward_milli),
            e.outcome.as_deref().unwrap_or("-")
        ))
    );
    outln!(
        "  {} | {}",
        column(format!("answer {:?}", t.answer)),
        theirs.map_or(String::new(), |o| fit(format!("answer {:?}", o.answer)))
    );
    match &e.unproven.env_tally {
        Some(tally) => outln!(
            "  env {}: {} W, {} L, {} D in {} challenges: {}{}",
            t.env.name,
            tally.wins,
            tally.losses,
            tally.draws,
            tally.n_challenges,
            match e.unproven.env_decision {
                Some(d) => serde_json::to_value(d)?.as_str().unwrap_or("?").to_string(),
                None => "undecided".to_string(),
            },
            e.unproven.rule.as_ref().map_or(String::new(), |rule| format!(" (rule {rule})"))
        ),
        None => outln!("  env {}: no tally (the match's start is not in the logs held)", t.env.name),
    }
    outln!("  match: {}", e.unproven.match_reason.as_deref().unwrap_or("not decided yet"));
    outln!(
        "  proof: {}\n",
        match &e.proof.commitment {
            Some(p) => match &p.event {
                Event::ChainCommitment(c) => format!("to the tip committed at chain block {}", c.chain_block),
                _ => "to the tip".into(),
            },
            None => "to the tip (no commitment covers it yet)".into(),
        }
    );
    Ok(())
}

/// The entries of a file as `af transcripts` writes them: one entry object, a JSON array
/// of them (`--json`), or one per line (`--jsonl`).
fn read_entries(text: &str) -> Result<Vec<TranscriptEntry>, serde_json::Error> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') {
        return serde_json::from_str(text);
    }
    let mut entries = Vec::new();
    for item in serde_json::Deserializer::from_str(text).into_iter::<TranscriptEntry>() {
        entries.push(item?);
    }
    Ok(entries)
}

fn verify(file: &Path, chain: &super::chain::ChainArgs, json: bool) -> anyhow::Result<ExitCode> {
    let text = read_input(file, MAX_JSON_INPUT_BYTES)?;
    // The file is what is being checked: one that is not a well-formed entry fails the
    // check (exit 3), as a changed byte inside one does.
    let entries = match read_entries(&text) {
        Ok(entries) if !entries.is_empty() => entries,
        Ok(_) => anyhow::bail!("{} holds no transcript entry", file.display()),
        Err(error) => return super::report_parse_failure(json, "transcript entry", &error),
    };
    if entries.len() == 1 {
        return verify_one(&entries[0], chain, json);
    }
    // Several (as `--json` or `--jsonl` wrote them): each checked; ok only if all are.
    let (mut all_ok, mut n_ok) = (true, 0);
    let mut reports = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let (verified, on_chain, ok) = check(entry, chain)?;
        all_ok &= ok;
        n_ok += usize::from(ok);
        if json {
            reports.push(serde_json::json!({
                "ok": ok,
                "verified": verified.as_ref().ok(),
                "error": verified.as_ref().err().map(|e| e.to_string()),
                "on_chain": on_chain,
                "unproven": entry.unproven,
            }));
        } else {
            match &verified {
                Ok(v) => outln!(
                    "{}entry {}: transcript {} of block {} (validator {}), proven to height {}{}",
                    if ok { "ok   " } else { "FAIL " },
                    i + 1,
                    v.event_idx,
                    v.height,
                    v.validator,
                    v.tip.height,
                    on_chain.as_ref().map_or(String::new(), |c| format!("; on chain: {}", c.detail))
                ),
                Err(e) => outln!("FAIL entry {}: {e}", i + 1),
            }
        }
    }
    if json {
        print_json(&serde_json::json!({ "ok": all_ok, "count": entries.len(), "entries": reports }))?;
    } else {
        outln!("{n_ok} of {} entries verified", entries.len());
    }
    Ok(if all_ok { ExitCode::SUCCESS } else { ExitCode::from(super::EXIT_CHECK_FAILED) })
}

/// An entry's proofs checked, and (with `--chain`) its tip against the chain.
type Checked =
    (Result<af::ledger::entry::VerifiedEntry, af::ledger::entry::EntryError>, Option<af::chain::OnChainCheck>, bool);

fn check(entry: &TranscriptEntry, chain: &super::chain::ChainArgs) -> anyhow::Result<Checked> {
    let verified = verify_entry(entry);
    let on_chain = match (&verified, chain.chain.is_some()) {
        (Ok(v), true) => Some(super::chain::check_commitment_on_chain(chain, &v.validator, &v.tip)?),
        _ => None,
    };
    let ok = verified.is_ok() && on_chain.as_ref().is_none_or(|c| c.ok);
    Ok((verified, on_chain, ok))
}

fn verify_one(entry: &TranscriptEntry, chain: &super::chain::ChainArgs, json: bool) -> anyhow::Result<ExitCode> {
    let (verified, on_chain, ok) = check(entry, chain)?;
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
