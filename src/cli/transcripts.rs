//! `af transcripts`: a miner's view of every challenge it was given, across every
//! validator's log we hold: the messages, its answer, its score and its opponent's, the
//! decision, and for each an inclusion proof (transcript -> block -> headers up to the
//! tip the validator committed, where it recorded a commitment covering that block).
//! `af transcripts verify PROOF.json` checks such a proof offline with nothing else.

use super::{one_line, print_json};
use crate::outln;
use af::audit::transcript_text::EntryCheck;
use af::ledger::entry::{verify_entry, TranscriptEntry};
use af::limits::MAX_JSON_INPUT_BYTES;
use anyhow::Context;
use clap::{Args, Subcommand};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct TranscriptsArgs {
    #[command(subcommand)]
    pub command: Option<TranscriptsCommand>,
    /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
    // Required, but by clap (a usage error, exit 2), and not with `verify`.
    #[arg(long, required = true)]
    pub data: Option<PathBuf>,
    /// The miner's hotkey.
    #[arg(long, required = true)]
    pub miner: Option<String>,
    /// Only this env's transcripts (one of `af env list`).
    #[arg(long)]
    pub env: Option<String>,
    /// Only the challenges this miner won, lost or drew.
    #[arg(long, value_parser = ["win", "loss", "draw"])]
    pub result: Option<String>,
    /// A match id: 64 hex digits, or a unique prefix of at least 16.
    #[arg(long = "match")]
    pub match_id: Option<String>,
    /// One JSON object per line, each with its proof (`--json`: one document of them all).
    #[arg(long, conflicts_with = "json")]
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
    },
}

pub fn run(args: TranscriptsArgs, json: bool) -> anyhow::Result<ExitCode> {
    if let Some(TranscriptsCommand::Verify { file, chain }) = args.command {
        return verify(&file, &chain, json);
    }
    let data = args.data.context("--data is required")?;
    let miner = args.miner.context("--miner HOTKEY is required")?;
    let (store, replayed) = super::http::replay_dir(&data)?;
    let match_filter = match args.match_id.as_deref() {
        Some(text) => Some(
            af::replay::transcript_entries::resolve_match_id(&replayed.folds, text)
                .map_err(|e| anyhow::anyhow!("--match: {e}"))?,
        ),
        None => None,
    };
    say_pruned(&store, "af transcripts")?;
    // The index's hits, each confirmed against its block as its entry is built.
    let locations = store.locate_miner(&miner)?;
    if locations.is_empty() {
        anyhow::bail!(
            "no log held in {} has a transcript of miner {miner:?}: check the hotkey, or fetch more logs (af mirror, af node)",
            data.display()
        );
    }
    if let Some(env) = &args.env {
        let names = af::validator::matchrun::env_names(&af::envs::registry());
        anyhow::ensure!(
            names.contains(env),
            "--env {:?} is not an env; the envs are {}",
            one_line(env),
            names.join(", ")
        );
    }
    let filter = af::replay::transcript_entries::Filter {
        env: args.env.clone(),
        match_id: match_filter,
        result: args.result.clone(),
    };
    // Each entry is written as it is built: a miner's entries in every log held can be
    // far more than memory, and their blocks are read one at a time.
    let mut text = af::audit::transcript_text::TranscriptText::default();
    let (mut written, mut failed) = (0usize, None);
    let found = af::replay::transcript_entries::Found::Miner(&miner);
    let how = (found, &filter, af::replay::transcript_entries::Reach::Tip);
    af::replay::transcript_entries::for_each_entry(&store, &replayed.folds, &locations, how, &mut |entry| {
        let done = if json {
            json_element(written, &entry)
        } else if args.jsonl {
            serde_json::to_string(&entry).map_err(Into::into).and_then(|line| {
                outln!("{line}");
                Ok(())
            })
        } else {
            text.lines(&entry).iter().try_for_each(|line| {
                outln!("{line}");
                Ok(())
            })
        };
        written += 1;
        done.map_err(|error| failed = Some(error)).is_ok()
    })?;
    if let Some(error) = failed {
        return Err(error);
    }
    if json {
        // The closing of the array `json_element` opened (serde_json's pretty layout).
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", if written == 0 { "[]" } else { "\n]" })?;
    } else if !args.jsonl {
        outln!(
            "{written} transcript(s) of {}; --json for the messages and proofs. Roles, rules, tallies and results are \
             replay's context, not proven by the entries",
            one_line(&miner)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Entry `n` of a JSON array written one element at a time, laid out as serde_json's
/// pretty printer lays out the whole array.
fn json_element(n: usize, entry: &TranscriptEntry) -> anyhow::Result<()> {
    let pretty = serde_json::to_string_pretty(entry)?;
    let mut out = std::io::stdout().lock();
    write!(out, "{}", if n == 0 { "[\n" } else { ",\n" })?;
    for (i, line) in pretty.lines().enumerate() {
        write!(out, "{}  {line}", if i == 0 { "" } else { "\n" })?;
    }
    Ok(())
}

fn verify(file: &Path, chain: &super::chain::ChainArgs, json: bool) -> anyhow::Result<ExitCode> {
    let text = af::input::read_text(file, MAX_JSON_INPUT_BYTES)?;
    // The file is what is being checked: one that is not a well-formed entry fails the
    // check (exit 3), as a changed byte inside one does.
    let entries = match af::ledger::entry::read_entries(&text) {
        Ok(entries) if !entries.is_empty() => entries,
        Ok(_) => anyhow::bail!("{} holds no transcript entry", file.display()),
        Err(error) => return super::report_parse_failure(json, "transcript entry", &error),
    };
    if let [entry] = &entries[..] {
        let checked = check(entry, chain)?;
        if json {
            print_json(&checked.json())?;
        } else {
            for line in checked.lines() {
                outln!("{line}");
            }
        }
        return Ok(if checked.ok() { ExitCode::SUCCESS } else { ExitCode::from(super::EXIT_CHECK_FAILED) });
    }
    // Several (as `--json` or `--jsonl` wrote them): each checked; ok only if all are.
    let checked = entries.iter().map(|entry| check(entry, chain)).collect::<anyhow::Result<Vec<_>>>()?;
    let n_ok = checked.iter().filter(|c| c.ok()).count();
    if json {
        let reports: Vec<_> = checked.iter().map(EntryCheck::json).collect();
        print_json(&serde_json::json!({ "ok": n_ok == entries.len(), "count": entries.len(), "entries": reports }))?;
    } else {
        for (i, c) in checked.iter().enumerate() {
            outln!("{}", c.line(i + 1));
        }
        outln!("{n_ok} of {} entries verified", entries.len());
    }
    Ok(if n_ok == entries.len() { ExitCode::SUCCESS } else { ExitCode::from(super::EXIT_CHECK_FAILED) })
}

/// An entry's proofs checked, and (with `--chain`) its tip against the chain.
fn check<'a>(entry: &'a TranscriptEntry, chain: &super::chain::ChainArgs) -> anyhow::Result<EntryCheck<'a>> {
    let verified = verify_entry(entry);
    let on_chain = match (&verified, chain.chain.is_some()) {
        (Ok(v), true) => Some(super::chain::check_commitment_on_chain(chain, &v.validator, &v.tip)?),
        _ => None,
    };
    Ok(EntryCheck { entry, verified, on_chain })
}

/// Pruned blocks leave the indexes: a read command that lists transcripts from them says
/// so (on stderr, so `--json` stays one document), with how many blocks and where their
/// bodies are.
pub(super) fn say_pruned(store: &af::ledger::Store, command: &str) -> anyhow::Result<()> {
    let pruned = store.pruned_summary()?;
    if pruned.logs > 0 {
        eprintln!(
            "{command}: {} block(s) of {} log(s) here are pruned to their headers, so their transcripts are not \
             listed; their bodies are in {} (`af mirror --from` it into another directory to read them whole)",
            pruned.blocks,
            pruned.logs,
            one_line(&pruned.archives.into_iter().collect::<Vec<_>>().join(", "))
        );
    }
    Ok(())
}
