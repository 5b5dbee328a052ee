//! `af transcripts`: a miner's view of every challenge it was given, across every
//! validator's log we hold: the messages, its answer, its score and its opponent's, the
//! decision, and for each an inclusion proof (transcript -> block -> headers up to the
//! tip the validator committed, where it recorded a commitment covering that block).
//! `af transcripts verify PROOF.json` checks such a proof offline with nothing else.

use super::{one_line, print_json, read_input};
use crate::outln;
use af::ledger::entry::{verify_entry, TranscriptEntry};
use af::ledger::event::Event;
use af::limits::MAX_JSON_INPUT_BYTES;
use anyhow::Context;
use clap::{Args, Subcommand};
use std::io::Write;
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
    /// Only this env's transcripts (one of `af env list`).
    #[arg(long)]
    pub env: Option<String>,
    /// Only the challenges this miner won, lost or drew.
    #[arg(long, value_parser = ["win", "loss", "draw"])]
    pub result: Option<String>,
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
    let filter =
        af::replay::entries::Filter { env: args.env.clone(), match_id: match_filter, result: args.result.clone() };
    // Each entry is written as it is built: a miner's entries in every log held can be
    // far more than memory, and their blocks are read one at a time.
    let mut text = Text::default();
    let (mut written, mut failed) = (0usize, None);
    let found = af::replay::entries::Found::Miner(&miner);
    af::replay::entries::for_each_entry(&store, &replayed.folds, &locations, found, &filter, &mut |entry| {
        let done = if args.json {
            json_element(written, &entry)
        } else if args.jsonl {
            serde_json::to_string(&entry).map_err(Into::into).and_then(|line| {
                outln!("{line}");
                Ok(())
            })
        } else {
            text.print(&entry)
        };
        written += 1;
        done.map_err(|error| failed = Some(error)).is_ok()
    })?;
    if let Some(error) = failed {
        return Err(error);
    }
    // The replay's context of each entry came from its file: a failed read is said, not
    // passed over as a match that is not there.
    replayed.check_whole()?;
    if args.json {
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

/// The most characters of one answer shown in text (`--json` has every byte).
const ANSWER_SHOWN: usize = 2_000;

/// The entries as text, grouped: a header per match (validator, roles, rule in words),
/// a line per env with its tally and decision, then each challenge with the result and
/// both answers in full (every turn of a multi-turn game), up to `ANSWER_SHOWN`. Fed one
/// entry at a time; it keeps the match and env it is in.
#[derive(Default)]
struct Text {
    current: Option<(af::bytes::ValidatorKey, af::bytes::Hash32)>,
    current_env: Option<String>,
}

impl Text {
    fn print(&mut self, e: &TranscriptEntry) -> anyhow::Result<()> {
        let short = |text: &str| text.chars().take(16).collect::<String>();
        let Text { current, current_env } = self;
        {
            let t = &e.transcript;
            if *current != Some((e.validator, t.match_id)) {
                if current.is_some() {
                    outln!("");
                }
                *current = Some((e.validator, t.match_id));
                *current_env = None;
                let against = match (e.unproven.role.as_str(), &e.opponent) {
                    ("contender", Some(o)) => format!(" against the champion {}", one_line(&o.hotkey)),
                    ("champion", Some(o)) => format!(" against the contender {}", one_line(&o.hotkey)),
                    (_, Some(o)) => format!(" against {}", one_line(&o.hotkey)),
                    (_, None) => String::new(),
                };
                outln!("match {}  in the log of validator {}", t.match_id, e.validator);
                outln!(
                    "  {} ({}) played as {}{against}",
                    one_line(&t.miner.hotkey),
                    one_line(&t.miner.model),
                    e.unproven.role
                );
                if let Some(rule) = &e.unproven.rule {
                    outln!("  rule: {}", af::evaluation::plan::plan_in_words(rule));
                }
                if let Some(reason) = &e.unproven.match_reason {
                    outln!("  result: {reason}");
                }
            }
            if current_env.as_deref() != Some(t.env.name.as_str()) {
                *current_env = Some(t.env.name.clone());
                let tally = match &e.unproven.env_tally {
                    Some(tally) => format!(
                        "the contender won {}, lost {}, drew {} of {} challenges",
                        tally.wins, tally.losses, tally.draws, tally.n_challenges
                    ),
                    None => "no tally (the match's start is not in the logs held)".into(),
                };
                let decision = e.unproven.env_decision.map_or("undecided".to_string(), env_decision_words);
                outln!("  env {} v{}: {tally}: {decision}", t.env.name, t.env.version);
            }
            let result = match (&e.outcome, &e.opponent) {
                (Some(outcome), Some(o)) => format!(
                    "{outcome:<4}  {} vs {}",
                    af::envs::reward_text(t.reward_milli),
                    af::envs::reward_text(o.reward_milli)
                ),
                _ => format!("      {}, no opponent answer in this block", af::envs::reward_text(t.reward_milli)),
            };
            let proof = match &e.proof.commitment {
                Some(p) => match &p.event {
                    Event::ChainCommitment(c) => {
                        format!("proven to the tip committed at chain block {}", c.chain_block)
                    }
                    _ => "proven to the tip".into(),
                },
                None => "proven to the tip; no commitment covers it yet".into(),
            };
            outln!(
                "    #{:<4} {result}  challenge {}  (block {} event {}, {proof})",
                t.challenge_index,
                short(&t.challenge_id.to_hex()),
                e.height,
                e.event_idx
            );
            let turns: Vec<&str> =
                t.messages.iter().filter(|m| m.role == "assistant").map(|m| m.content.as_str()).collect();
            if turns.len() > 1 {
                for (turn, content) in turns.iter().enumerate() {
                    print_answer(&format!("ours, turn {}", turn + 1), content)?;
                }
            } else {
                print_answer("ours", &t.answer)?;
            }
            if let Some(error) = &t.error {
                outln!("          error: {}", one_line(error));
            }
            if let Some(o) = &e.opponent {
                let label = if turns.len() > 1 { "theirs, last turn" } else { "theirs" };
                print_answer(label, &o.answer)?;
            }
        }
        Ok(())
    }
}

/// An env decision in words (the JSON keeps its snake_case name).
fn env_decision_words(decision: af::ledger::event::EnvOutcome) -> String {
    use af::ledger::event::EnvOutcome;
    match decision {
        EnvOutcome::ContenderBetter => "the contender is better".into(),
        EnvOutcome::ContenderNotBetter => "the contender is not better".into(),
        EnvOutcome::Inconclusive => "inconclusive (a cap was reached, or the match was decided first)".into(),
    }
}

/// One answer under its label, every line indented, cut at `ANSWER_SHOWN` characters.
fn print_answer(label: &str, answer: &str) -> anyhow::Result<()> {
    let total = answer.chars().count();
    let shown: String = answer.chars().take(ANSWER_SHOWN).collect();
    let mut lines = shown.lines();
    outln!("          {label}: {}", lines.next().unwrap_or("(empty)"));
    for line in lines {
        outln!("          {:width$}  {line}", "", width = label.len());
    }
    if total > ANSWER_SHOWN {
        outln!("          ({} more characters; --json has all of it)", total - ANSWER_SHOWN);
    }
    Ok(())
}

fn verify(file: &Path, chain: &super::chain::ChainArgs, json: bool) -> anyhow::Result<ExitCode> {
    let text = read_input(file, MAX_JSON_INPUT_BYTES)?;
    // The file is what is being checked: one that is not a well-formed entry fails the
    // check (exit 3), as a changed byte inside one does.
    let entries = match af::ledger::entry::read_entries(&text) {
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
                    "unproven (replay's context, not covered by the proofs): role {}, env: {}, match: {}",
                    entry.unproven.role,
                    entry.unproven.env_decision.map_or("undecided".to_string(), env_decision_words),
                    match entry.unproven.match_contender_won {
                        Some(true) => "the contender won",
                        Some(false) => "the champion kept the crown",
                        None => "not decided",
                    }
                );
            }
            Err(e) => outln!("FAIL: {e}"),
        }
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(super::EXIT_CHECK_FAILED) })
}
