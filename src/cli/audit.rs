//! `af audit`: an offline audit of every log in a store. Replays every chain (decode,
//! hashes, signatures, links), regenerates every challenge id, re-scores every answer,
//! checks every schedule and tally, recomputes vTrust, verdicts and the winner, checks
//! on-chain commitments when a chain is named, and lists each discrepancy with the
//! validator, height, event and an inclusion proof of the offending event.
//!
//! Exit codes (its own, for scripts): 0 clean, 1 discrepancies found, 2 could not run.

use super::{print_json, ProgressLine};
use crate::outln;
use af::audit::report::{DISCREPANCIES_OMITTED, RATIO_NEVER_SET_ON_CHAIN};
use af::audit::AuditReport;
use af::replay::Replay;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

pub const EXIT_CLEAN: u8 = 0;
pub const EXIT_FOUND: u8 = 1;
pub const EXIT_COULD_NOT_RUN: u8 = 2;

#[derive(clap::Args, Debug)]
pub struct AuditArgs {
    /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
    #[arg(long)]
    pub data: PathBuf,
    /// Fold every log from genesis (the default; kept for scripts).
    #[arg(long, conflicts_with = "snapshot")]
    pub from_genesis: bool,
    /// Reuse DIR/replay-snapshot.bin for chains whose freshly verified tip matches it, and
    /// save a new one. Faster on long logs, but the snapshot's re-scoring results are
    /// taken from the file: use it only on a snapshot you made and protect.
    #[arg(long)]
    pub snapshot: bool,
    /// Print JSON for scripts (ledger-spec/10 for events).
    #[arg(long)]
    pub json: bool,
    /// Write a self-contained HTML report to this file.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Threads for the parallel checks (default: every core).
    #[arg(long)]
    pub threads: Option<usize>,
    #[command(flatten)]
    pub chain: super::chain::ChainArgs,
}

pub fn run(args: AuditArgs) -> anyhow::Result<ExitCode> {
    match audit(&args) {
        Ok(report) => {
            let code = if report.clean { EXIT_CLEAN } else { EXIT_FOUND };
            print_report(&report, args.json)?;
            if let Some(path) = &args.report {
                std::fs::write(path, af::audit::report::html(&report))
                    .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
                if !args.json {
                    outln!("report written to {}", path.display());
                }
            }
            Ok(ExitCode::from(code))
        }
        // A store whose bytes fail the storage engine's checks is a finding, not a
        // failure to run: the audit looked and found the log damaged.
        Err(error) if is_integrity_fault(&error) => {
            if args.json {
                print_json(
                    &serde_json::json!({ "clean": false, "store_corrupt": true, "error": format!("{error:#}") }),
                )?;
            } else {
                outln!("FOUND: the store is corrupt: {error:#}");
            }
            Ok(ExitCode::from(EXIT_FOUND))
        }
        Err(error) => {
            if args.json {
                print_json(&serde_json::json!({ "clean": false, "error": format!("{error:#}") }))?;
            }
            eprintln!("af audit: could not run: {error:#}");
            Ok(ExitCode::from(EXIT_COULD_NOT_RUN))
        }
    }
}

fn is_integrity_fault(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| cause.downcast_ref::<af::ledger::StoreError>().is_some_and(|e| e.is_integrity_fault()))
}

fn audit(args: &AuditArgs) -> anyhow::Result<AuditReport> {
    let started = Instant::now();
    let data = &args.data;
    if !data.join(af::ledger::store::STORE_FILE).is_file() {
        anyhow::bail!("no store at {}", data.join(af::ledger::store::STORE_FILE).display());
    }
    let pool = rayon::ThreadPoolBuilder::new().num_threads(args.threads.unwrap_or(0)).build()?;
    let store = super::http::open_for_read(data)?;
    let mut progress = ProgressLine::new();
    let replayed: Replay = pool.install(|| {
        super::http::replay_store(&store, data, args.snapshot, &mut |validator, height, bytes| {
            progress.update(|| {
                format!(
                    "auditing {}…: height {height}, {:.1} MiB folded",
                    &validator.to_hex()[..16],
                    bytes as f64 / 1048576.0
                )
            })
        })
    })?;
    progress.finish();
    let view = super::weights::read_chain_view(&args.chain, &af::audit::blocks::blocks_to_check(&replayed.folds))?;
    let chain = af::audit::audit_commitments(
        &replayed.folds,
        &store,
        view.as_ref().map(|v| af::audit::commitments::OnChain { endpoint: &v.endpoint, records: v.records.clone() }),
    )?;
    let weights = super::weights::weights_audit(&replayed, &chain, view.as_ref());
    let blocks =
        af::audit::blocks::audit_blocks(&replayed.folds, view.as_ref().map(|v| (v.endpoint.as_str(), &v.block_hashes)));
    let on_chain: Vec<_> =
        chain.discrepancies.iter().chain(&weights.discrepancies).chain(&blocks.discrepancies).cloned().collect();
    let findings = af::audit::findings(&store, &replayed, &on_chain)?;
    let skipped = af::audit::skip_rows(&replayed);
    Ok(AuditReport {
        clean: findings.is_empty(),
        af_version: env!("CARGO_PKG_VERSION").to_string(),
        generated_at_ms: af::clock::unix_ms(),
        state_hash: replayed.state_hash,
        from_genesis: replayed.n_chains_from_snapshot == 0,
        n_chains: replayed.folds.len(),
        n_chains_from_snapshot: replayed.n_chains_from_snapshot,
        n_blocks_folded: replayed.n_blocks_folded,
        n_bytes_folded: replayed.n_bytes_folded,
        seconds: started.elapsed().as_secs_f64(),
        matches: af::audit::match_rows(&replayed),
        state: replayed.state,
        chain,
        weights,
        blocks,
        skipped,
        findings,
    })
}

/// One log's record of not playing a miner, in words (`af audit`, `af mine status`).
pub fn skip_line(row: &af::audit::SkipRow) -> String {
    let s = &row.skip;
    format!(
        "{} skips {} (uid {}) {}@{} of block {}: {} {} (block {})",
        short(&row.validator),
        s.hotkey,
        s.uid,
        s.model,
        s.revision,
        s.commit_block,
        match s.reason {
            af::ledger::event::SkipReason::Duplicate => "a duplicate of",
            af::ledger::event::SkipReason::SameAsChampion => "the model of champion",
        },
        s.kept_by,
        s.kept_block
    )
}

fn short(key: &impl std::fmt::Display) -> String {
    let text = key.to_string();
    text.chars().take(16).collect::<String>() + "…"
}

fn ppm(value: u32) -> String {
    format!("{:.4}", f64::from(value) / 1e6)
}

fn print_report(report: &AuditReport, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(report);
    }
    let state = &report.state;
    outln!(
        "audited {} chain(s): {} blocks, {:.1} MiB folded in {:.2} s ({} from a snapshot)",
        report.n_chains,
        report.n_blocks_folded,
        report.n_bytes_folded as f64 / 1048576.0,
        report.seconds,
        report.n_chains_from_snapshot
    );
    outln!("state hash {}", report.state_hash);
    outln!("");
    outln!(
        "{:<18} {:>8} {:>9} {:>8} {:>6} {:>9} {:>8}",
        "validator",
        "height",
        "events",
        "matches",
        "false",
        "disagree",
        "vtrust"
    );
    for v in &state.validators {
        outln!(
            "{:<18} {:>8} {:>9} {:>8} {:>6} {:>9} {:>8}{}",
            short(&v.validator),
            v.tip_height.map_or("-".into(), |h| h.to_string()),
            v.n_events,
            v.n_matches,
            v.n_false_reports,
            format!("{}/{}", v.n_disagreements, v.n_compared),
            ppm(v.vtrust_ppm),
            if v.equivocated {
                "  EQUIVOCATED"
            } else if v.invalid_at.is_some() {
                "  INVALID"
            } else {
                ""
            }
        );
    }
    outln!("");
    for m in &state.matches {
        outln!(
            "match {} vs {}: {} ({} votes, {} for / {} against)",
            m.contender.hotkey,
            m.champion.hotkey,
            match m.verdict {
                Some(af::replay::network::NetworkVerdict::ContenderWon) => "contender won",
                Some(af::replay::network::NetworkVerdict::ChampionStays) => "champion stays",
                None => "undecided",
            },
            m.votes.len(),
            ppm(m.for_ppm.min(u64::from(u32::MAX)) as u32),
            ppm(m.against_ppm.min(u64::from(u32::MAX)) as u32)
        );
    }
    outln!(
        "champion {} (uid {}), ratio to beat {} {}, weights {}",
        state.champion.as_ref().map_or("(none)", |c| c.hotkey.as_str()),
        state.champion.as_ref().map_or("-".into(), |c| c.uid.to_string()),
        ppm(state.ratio_set_ppm),
        match state.ratio_set_at_block {
            0 => RATIO_NEVER_SET_ON_CHAIN.to_string(),
            block => format!("(set at chain block {block})"),
        },
        af::chain::weight_shares(state.weights.iter().copied())
    );
    outln!("chain commitments: {}", report.chain.note);
    outln!("match blocks: {}", report.blocks.note);
    if !report.skipped.is_empty() {
        outln!("miners not played ({} record(s)):", report.skipped.len());
        for row in &report.skipped {
            outln!("  {}", skip_line(row));
        }
    }
    outln!("weights: {}", report.weights.note);
    for row in report.weights.rows.iter().filter(|r| r.status != "not_checked") {
        outln!(
            "  {} {:<16} {}{}",
            short(&row.validator),
            row.status,
            row.detail,
            super::weights::replay_note(row.agrees_with_replay)
        );
    }
    outln!("");
    if report.findings.is_empty() {
        outln!("clean: no discrepancy");
    } else {
        outln!("{} discrepanc{}:", report.findings.len(), if report.findings.len() == 1 { "y" } else { "ies" });
        if report.state.n_discrepancies_omitted > 0 {
            outln!("  (and {} more not listed: {})", report.state.n_discrepancies_omitted, DISCREPANCIES_OMITTED);
        }
        for finding in &report.findings {
            let d = &finding.discrepancy;
            outln!(
                "  {:<16} validator {} height {}{}: {}",
                d.kind.name(),
                d.validator,
                d.height,
                d.event_idx.map_or(String::new(), |e| format!(" event {e}")),
                d.detail
            );
        }
    }
    Ok(())
}
