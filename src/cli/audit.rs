//! `af audit`: an offline audit of every log in a store. Replays every chain (decode,
//! hashes, signatures, links), regenerates every challenge id, re-scores every answer,
//! checks every schedule and tally, recomputes vTrust, verdicts and the winner, checks
//! on-chain commitments when a chain is named, and lists each discrepancy with the
//! validator, height, event and an inclusion proof of the offending event.
//!
//! Exit codes (its own, for scripts): 0 clean, 1 discrepancies found, 2 could not run.

use super::{print_json, ProgressLine};
use crate::outln;
use af::bytes::Hash32;
use af::evaluation::ratio::DEFAULT_RATIO_PARAMS;
use af::ledger::proof::{prove, InclusionProof};
use af::ledger::Store;
use af::replay::fold::Discrepancy;
use af::replay::network::NetworkState;
use af::replay::{self, Replay};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

pub const EXIT_CLEAN: u8 = 0;
pub const EXIT_FOUND: u8 = 1;
pub const EXIT_COULD_NOT_RUN: u8 = 2;
/// Discrepancies that get an inclusion proof in the JSON output; the rest are listed.
const MAX_PROOFS: usize = 1000;

#[derive(clap::Args, Debug)]
pub struct AuditArgs {
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

#[derive(Serialize)]
pub struct Finding {
    #[serde(flatten)]
    pub discrepancy: Discrepancy,
    /// Inclusion proof of the offending event in the offender's own log, where it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proof: Option<InclusionProof>,
}

#[derive(Serialize)]
pub struct AuditReport {
    pub clean: bool,
    pub state_hash: Hash32,
    pub from_genesis: bool,
    pub n_chains: usize,
    pub n_chains_from_snapshot: usize,
    pub n_blocks_folded: u64,
    pub n_bytes_folded: u64,
    pub seconds: f64,
    pub state: NetworkState,
    pub chain: super::chain::CommitmentAudit,
    pub findings: Vec<Finding>,
}

pub fn run(args: AuditArgs) -> anyhow::Result<ExitCode> {
    match audit(&args) {
        Ok(report) => {
            let code = if report.clean { EXIT_CLEAN } else { EXIT_FOUND };
            print_report(&report, args.json)?;
            if let Some(path) = &args.report {
                std::fs::write(path, html_report(&report))
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
        replay_store(&store, data, args.snapshot, &mut |validator, height, bytes| {
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
    // The tip each chain's record names must be the end of what verified.
    let mut discrepancies = replayed.state.discrepancies.clone();
    for (validator, recorded) in store.tips()? {
        let fold = replayed.folds.iter().find(|f| f.validator == validator);
        let folded = fold.and_then(|f| f.tip);
        if fold.is_some_and(|f| f.invalid_at.is_none()) && folded != Some(recorded) {
            discrepancies.push(Discrepancy {
                validator,
                kind: af::replay::fold::DiscrepancyKind::InvalidBlock,
                height: recorded.height,
                event_idx: None,
                detail: format!(
                    "the store's tip record (height {}, hash {}) is not the end of the verified chain",
                    recorded.height, recorded.hash
                ),
            });
        }
    }
    let chain = super::chain::audit_commitments(&args.chain, &replayed.folds, &store)?;
    let mut findings: Vec<Finding> = Vec::new();
    for discrepancy in discrepancies.into_iter().chain(chain.discrepancies.iter().cloned()) {
        let proof = match discrepancy.event_idx {
            Some(event_idx) if findings.len() < MAX_PROOFS => {
                prove(&store, &discrepancy.validator, discrepancy.height, event_idx).ok()
            }
            _ => None,
        };
        findings.push(Finding { discrepancy, proof });
    }
    Ok(AuditReport {
        clean: findings.is_empty(),
        state_hash: replayed.state_hash,
        from_genesis: replayed.n_chains_from_snapshot == 0,
        n_chains: replayed.folds.len(),
        n_chains_from_snapshot: replayed.n_chains_from_snapshot,
        n_blocks_folded: replayed.n_blocks_folded,
        n_bytes_folded: replayed.n_bytes_folded,
        seconds: started.elapsed().as_secs_f64(),
        state: replayed.state,
        chain,
        findings,
    })
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
        "champion {} (uid {}), ratio to beat {} set at chain block {}, weights {:?}",
        state.champion.as_ref().map_or("(none)", |c| c.hotkey.as_str()),
        state.champion.as_ref().map_or("-".into(), |c| c.uid.to_string()),
        ppm(state.ratio_set_ppm),
        state.ratio_set_at_block,
        state.weights
    );
    outln!("chain commitments: {}", report.chain.note);
    outln!("");
    if report.findings.is_empty() {
        outln!("clean: no discrepancy");
    } else {
        outln!("{} discrepanc{}:", report.findings.len(), if report.findings.len() == 1 { "y" } else { "ies" });
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

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// One self-contained page: summary, validators, matches, discrepancies, and two SVG
/// charts (vTrust per validator, the champion's reign over time). No scripts, no fetches.
pub fn html_report(report: &AuditReport) -> String {
    let state = &report.state;
    let mut html = String::new();
    html.push_str(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>af audit report</title><style>",
    );
    html.push_str(
        "body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}",
    );
    html.push_str("td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;font-size:14px}th{background:#f3f3f3}");
    html.push_str(".bad{color:#b00020;font-weight:bold}.ok{color:#0a7d32;font-weight:bold}code{font-size:12px}");
    html.push_str("</style></head><body><h1>af audit report</h1>");
    html.push_str(&format!(
        "<p>Result: {}</p><p>State hash <code>{}</code>; {} chain(s), {} blocks folded ({:.1} MiB) in {:.2} s.</p>",
        if report.clean {
            "<span class=\"ok\">clean</span>".to_string()
        } else {
            format!("<span class=\"bad\">{} discrepancies</span>", report.findings.len())
        },
        report.state_hash,
        report.n_chains,
        report.n_blocks_folded,
        report.n_bytes_folded as f64 / 1048576.0,
        report.seconds
    ));
    html.push_str(&format!(
        "<p>Champion: <b>{}</b>; ratio to beat {} (set at chain block {}); weights {}. Chain commitments: {}</p>",
        escape(state.champion.as_ref().map_or("(none)", |c| c.hotkey.as_str())),
        ppm(state.ratio_set_ppm),
        state.ratio_set_at_block,
        escape(&format!("{:?}", state.weights)),
        escape(&report.chain.note)
    ));
    html.push_str("<h2>Validators</h2><table><tr><th>validator</th><th>height</th><th>events</th><th>transcripts</th><th>matches</th><th>false reports</th><th>disagreements</th><th>status</th><th>vTrust</th></tr>");
    for v in &state.validators {
        html.push_str(&format!(
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}/{}</td><td>{}</td><td>{}</td></tr>",
            v.validator,
            v.tip_height.map_or("-".into(), |h| h.to_string()),
            v.n_events,
            v.n_transcripts,
            v.n_matches,
            v.n_false_reports,
            v.n_disagreements,
            v.n_compared,
            if v.equivocated { "equivocated" } else if v.invalid_at.is_some() { "invalid block" } else { "ok" },
            ppm(v.vtrust_ppm)
        ));
    }
    html.push_str("</table><h3>vTrust</h3>");
    html.push_str(&vtrust_chart(state));
    html.push_str("<h2>Matches</h2><table><tr><th>contender</th><th>champion</th><th>votes</th><th>for (vTrust)</th><th>against (vTrust)</th><th>verdict</th></tr>");
    for m in &state.matches {
        html.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.4}</td><td>{:.4}</td><td>{}</td></tr>",
            escape(&m.contender.hotkey),
            escape(&m.champion.hotkey),
            m.votes.len(),
            m.for_ppm as f64 / 1e6,
            m.against_ppm as f64 / 1e6,
            match m.verdict {
                Some(af::replay::network::NetworkVerdict::ContenderWon) => "contender won",
                Some(af::replay::network::NetworkVerdict::ChampionStays) => "champion stays",
                None => "undecided",
            }
        ));
    }
    html.push_str("</table><h3>Champion over time</h3>");
    html.push_str(&champion_chart(state));
    html.push_str("<h2>Discrepancies</h2>");
    if report.findings.is_empty() {
        html.push_str("<p class=\"ok\">None.</p>");
    } else {
        html.push_str("<table><tr><th>kind</th><th>validator</th><th>height</th><th>event</th><th>detail</th></tr>");
        for f in &report.findings {
            let d = &f.discrepancy;
            html.push_str(&format!(
                "<tr><td class=\"bad\">{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
                d.kind.name(),
                d.validator,
                d.height,
                d.event_idx.map_or("-".into(), |e| e.to_string()),
                escape(&d.detail)
            ));
        }
        html.push_str("</table>");
    }
    html.push_str("</body></html>\n");
    html
}

fn vtrust_chart(state: &NetworkState) -> String {
    let (bar_h, width) = (22.0, 600.0);
    let height = bar_h * state.validators.len().max(1) as f64 + 10.0;
    let mut svg = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\">", width + 180.0);
    for (i, v) in state.validators.iter().enumerate() {
        let y = i as f64 * bar_h + 5.0;
        let w = width * f64::from(v.vtrust_ppm) / 1e6;
        let color = if v.vtrust_ppm >= 900_000 {
            "#2e7d32"
        } else if v.vtrust_ppm > 0 {
            "#f9a825"
        } else {
            "#b00020"
        };
        svg.push_str(&format!(
            "<text x=\"0\" y=\"{}\" font-size=\"12\" font-family=\"monospace\">{}</text><rect x=\"170\" y=\"{y}\" width=\"{w:.1}\" height=\"{}\" fill=\"{color}\"/><text x=\"{:.1}\" y=\"{}\" font-size=\"12\">{}</text>",
            y + 14.0,
            short(&v.validator),
            bar_h - 6.0,
            175.0 + w,
            y + 14.0,
            ppm(v.vtrust_ppm)
        ));
    }
    svg.push_str("</svg>");
    svg
}

fn champion_chart(state: &NetworkState) -> String {
    let history = &state.champion_history;
    if history.is_empty() {
        return "<p>No match yet.</p>".into();
    }
    let (row_h, width) = (26.0, 600.0);
    let t0 = history.first().map_or(0, |c| c.at_time_ms);
    let t1 = state
        .matches
        .iter()
        .map(|m| m.first_started_ms)
        .chain(history.iter().map(|c| c.at_time_ms))
        .max()
        .unwrap_or(t0);
    let span = (t1.saturating_sub(t0)).max(1) as f64;
    let height = row_h * history.len() as f64 + 30.0;
    let mut svg = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\">", width + 200.0);
    for (i, change) in history.iter().enumerate() {
        let start = 190.0 + width * (change.at_time_ms - t0) as f64 / span;
        let end = history.get(i + 1).map_or(190.0 + width, |next| 190.0 + width * (next.at_time_ms - t0) as f64 / span);
        let y = i as f64 * row_h + 5.0;
        svg.push_str(&format!(
            "<text x=\"0\" y=\"{}\" font-size=\"12\">{} (uid {})</text><rect x=\"{start:.1}\" y=\"{y}\" width=\"{:.1}\" height=\"{}\" fill=\"#1565c0\"/>",
            y + 15.0,
            escape(&change.champion.hotkey.chars().take(22).collect::<String>()),
            change.champion.uid,
            (end - start).max(2.0),
            row_h - 8.0
        ));
    }
    svg.push_str(&format!(
        "<text x=\"190\" y=\"{}\" font-size=\"11\">time →  ({:.0} s shown)</text></svg>",
        height - 5.0,
        span / 1000.0
    ));
    svg
}

/// Replays the store in `data` from genesis, re-verifying, re-scoring and re-deriving
/// everything. With `use_snapshot`, a chain's fold from `DIR/replay-snapshot.bin` is reused
/// when the freshly verified chain reaches exactly its recorded tip (a snapshot that
/// cannot be used is reported, then ignored), and the new folds are saved. The one replay
/// behind `af audit`, `af transcripts` and `af weights show` (the last two never use a
/// snapshot: a cache never stands in for a check).
pub fn replay_store(
    store: &Store,
    data: &Path,
    use_snapshot: bool,
    progress: af::replay::Progress<'_>,
) -> anyhow::Result<Replay> {
    let snapshot = if use_snapshot {
        replay::load_snapshot(data).unwrap_or_else(|error| {
            eprintln!("af: {error}; replaying from genesis");
            None
        })
    } else {
        None
    };
    let snapshot = snapshot.map(|s| (s, replay::FoldSource::Untrusted));
    let replayed = replay::replay(store, &af::envs::registry(), snapshot, &DEFAULT_RATIO_PARAMS, progress)?;
    if use_snapshot {
        // A read-only copy has nowhere to keep a snapshot: the next run replays from genesis.
        if let Err(error) = replay::save_snapshot(data, &replayed.folds) {
            eprintln!("af: could not save the replay snapshot (the next run replays from genesis): {error}");
        }
    }
    Ok(replayed)
}

/// Opens the store in `data` and replays it (see [`replay_store`]).
pub fn replay_dir(data: &Path) -> anyhow::Result<(super::http::ReadStore, Replay)> {
    let store = super::http::open_for_read(data)?;
    let replayed = replay_store(&store, data, false, &mut |_, _, _| {})?;
    Ok((store, replayed))
}
