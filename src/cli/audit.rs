//! `af audit`: an offline audit of every log in a store. Replays every chain (decode,
//! hashes, signatures, links), regenerates every challenge id, re-scores every answer,
//! checks every schedule and tally, recomputes vTrust, verdicts and the winner, checks
//! on-chain commitments when a chain is named, and lists each discrepancy with the
//! validator, height, event and an inclusion proof of the offending event.
//!
//! Exit codes (its own, for scripts): 0 clean, 1 discrepancies found, 2 could not run, 4
//! nothing found but a log holds blocks of a later protocol version (not judged: upgrade af).

use super::{print_json, ProgressLine};
use crate::outln;
use af::audit::AuditReport;
use af::replay::Replay;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

pub const EXIT_CLEAN: u8 = 0;
pub const EXIT_FOUND: u8 = 1;
pub const EXIT_COULD_NOT_RUN: u8 = 2;
/// A log holds blocks of a protocol version this build does not apply (ledger-spec/15):
/// they were not judged; upgrade af.
pub const EXIT_UPGRADE: u8 = 4;

#[derive(clap::Args, Debug)]
pub struct AuditArgs {
    /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
    #[arg(long)]
    pub data: PathBuf,
    /// Fold every log from genesis (the default; kept for scripts).
    #[arg(long, conflicts_with = "snapshot")]
    pub from_genesis: bool,
    /// Reuse DIR/replay-projection.redb for chains whose freshly verified tip matches it,
    /// and keep this replay there. Faster on long logs, but the file's re-scoring results
    /// are taken from it: use it only on a file you made and protect.
    #[arg(long, conflicts_with = "from_checkpoint")]
    pub snapshot: bool,
    /// Start each log from the newest fold checkpoint a quorum of validators countersigned
    /// in their logs, its fold read from SOURCE (a node's or site's http(s):// URL, an
    /// archive's s3://, gs://, az:// or file:// URL, or a folder such as a validator's
    /// DIR/folds) and taken only if it hashes to the agreed point; blocks below it are
    /// trusted, not checked (the report says which). Logs with no such point fold from
    /// genesis. Needs who may countersign: --chain (the validators it lists) or
    /// --countersigners.
    #[arg(long, value_name = "SOURCE", conflicts_with = "from_genesis")]
    pub from_checkpoint: Option<String>,
    /// The validators who may countersign a checkpoint, without a chain: ledger keys in
    /// hex, comma-separated, or a file of them, one per line (# starts a comment).
    #[arg(long, value_name = "KEYS|FILE", requires = "from_checkpoint")]
    pub countersigners: Option<String>,
    /// Countersigners a checkpoint needs, 1 to 4096 (default: a majority of the validators
    /// who may countersign).
    #[arg(long, requires = "from_checkpoint", value_parser = clap::value_parser!(u16).range(1..=4096))]
    pub quorum: Option<u16>,
    /// Write a self-contained HTML report to this file.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Threads for the parallel checks, 1 to 4096 (default, or 0: every core).
    #[arg(long, value_parser = clap::value_parser!(u16).range(0..=4096))]
    pub threads: Option<u16>,
    /// The protocol table to judge the logs by (ledger-spec/15): `af`, the network's, or a
    /// devnet's (`local`, `upgrade-test@BLOCK`), as its validators' [protocol] table says.
    #[arg(long, default_value = "af", value_parser = parse_table)]
    pub protocol: af::protocol::Protocol,
    #[command(flatten)]
    pub chain: super::chain::ChainArgs,
}

pub fn run(args: AuditArgs, json: bool) -> anyhow::Result<ExitCode> {
    match audit(&args) {
        // The replay stays until the report is drawn: the report reads its file.
        Ok((report, _replayed)) => {
            let claims = &report.checkpoint_claims;
            let code = match (
                report.clean,
                report.findings.is_empty() && claims.false_claims.is_empty() && claims.disputed.is_empty(),
            ) {
                (true, _) => EXIT_CLEAN,
                // Nothing found, but not every block judged: a later protocol version.
                (false, true) if !report.awaiting_upgrade.is_empty() => EXIT_UPGRADE,
                (false, _) => EXIT_FOUND,
            };
            // Drawn whole before anything is said: a read of the replay's file that
            // fails leaves no report passed off as whole.
            type Drawn = (Option<String>, Option<String>, Option<serde_json::Value>);
            let drawn = (|| -> anyhow::Result<Drawn> {
                let html = args.report.as_ref().map(|_| af::audit::report::html(&report)).transpose()?;
                let text = (!json).then(|| af::audit::text::text(&report)).transpose()?;
                let value = json.then(|| serde_json::to_value(&report)).transpose()?;
                Ok((html, text, value))
            })();
            let (html, text, value) = match drawn {
                Ok(drawn) => drawn,
                Err(error) => {
                    eprintln!("af audit: could not run: {error:#}");
                    return Ok(ExitCode::from(EXIT_COULD_NOT_RUN));
                }
            };
            match (value, text) {
                (Some(value), _) => print_json(&value)?,
                (None, Some(text)) => super::print_text(text.strip_suffix('\n').unwrap_or(&text))?,
                (None, None) => {}
            }
            if let (Some(path), Some(html)) = (&args.report, html) {
                std::fs::write(path, html).map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
                if !json {
                    outln!("report written to {}", path.display());
                }
            }
            Ok(ExitCode::from(code))
        }
        // A store whose bytes fail the storage engine's checks is a finding, not a
        // failure to run: the audit looked and found the log damaged.
        Err(error) if is_integrity_fault(&error) => {
            if json {
                print_json(
                    &serde_json::json!({ "clean": false, "store_corrupt": true, "error": format!("{error:#}") }),
                )?;
            } else {
                outln!("FOUND: the store is corrupt: {error:#}");
            }
            Ok(ExitCode::from(EXIT_FOUND))
        }
        Err(error) => {
            if json {
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

/// The report, and the replay it was drawn from (whose file the report still reads).
fn audit(args: &AuditArgs) -> anyhow::Result<(AuditReport, Replay)> {
    let started = Instant::now();
    let data = &args.data;
    if !data.join(af::ledger::store::STORE_FILE).is_file() {
        anyhow::bail!("no store at {}", data.join(af::ledger::store::STORE_FILE).display());
    }
    let pool = rayon::ThreadPoolBuilder::new().num_threads(args.threads.map_or(0, usize::from)).build()?;
    // redb's page-checksum pass runs beside the replay; nothing is reported before it
    // passes.
    let mut progress = ProgressLine::new();
    let mut start = None;
    let (store, replayed) = super::http::read_beside_page_check(data, |store| {
        let progress = &mut |validator: &af::bytes::ValidatorKey, height, bytes: u64| {
            progress.update(|| {
                format!(
                    "auditing {}…: height {height}, {:.1} MiB of its log folded",
                    &validator.to_hex()[..16],
                    bytes as f64 / 1048576.0
                )
            })
        };
        let registry = af::envs::registry().with_protocol(args.protocol.clone());
        pool.install(|| match &args.from_checkpoint {
            None => super::http::replay_store(store, data, args.snapshot, &registry, progress),
            Some(source) => {
                let site = af::http::folds::FoldSite::open(source)
                    .map_err(|e| anyhow::anyhow!("--from-checkpoint {source}: {e}"))?;
                let who = countersigners(args)?;
                let (folds, started) =
                    af::audit::checkpoint_start::start_folds(store, &who, source, &|point| site.read(point))?;
                start = Some(started);
                let snapshot = af::replay::Snapshot { replay_version: af::replay::REPLAY_VERSION, folds };
                let params = &af::evaluation::ratio::DEFAULT_RATIO_PARAMS;
                let source = Some((snapshot, af::replay::FoldSource::Checkpoint));
                Ok(af::replay::replay(store, &registry, source, params, progress)?)
            }
        })
    })?;
    progress.finish();
    let replayed: Replay = replayed?;
    let view = super::weights::read_chain_view(&args.chain, &af::audit::blocks::blocks_to_check(&replayed.folds)?)?;
    let report =
        af::audit::compose::audit_report(&store, &replayed, view.as_ref(), start, started.elapsed().as_secs_f64())?;
    Ok((report, replayed))
}

/// Who may countersign a checkpoint: the auditor's list, or the validators the chain
/// lists now (permit holders whose commitment names a ledger key). Never the logs the
/// store happens to hold: anyone can add a log signed by a key made for the purpose.
fn countersigners(args: &AuditArgs) -> anyhow::Result<af::replay::checkpoint_quorum::Countersigners> {
    use af::replay::checkpoint_quorum::Countersigners;
    let quorum = args.quorum.map(usize::from);
    if let Some(list) = &args.countersigners {
        let (keys, named) = read_key_list(list).map_err(|e| anyhow::anyhow!("--countersigners: {e}"))?;
        return Ok(Countersigners::new(keys, quorum, format!("listed by --countersigners {named}")));
    }
    let Some(spec) = args.chain.spec() else {
        anyhow::bail!(
            "--from-checkpoint needs to know who may countersign a checkpoint: --chain SPEC (the validators the \
             chain lists) or --countersigners KEYS|FILE (ledger keys you trust); the logs a store holds are no list, \
             since anyone can sign a log with a key made for the purpose"
        )
    };
    let (block, keys) = super::chain::runtime()?.block_on(af::audit::chain_view::listed_validators(&spec))?;
    Ok(Countersigners::new(keys, quorum, format!("the validators {} lists at block {block}", spec.endpoint)))
}

/// Most bytes of a `--countersigners` file: 4,096 keys of 64 hex digits fit many times over.
const MAX_KEY_LIST_BYTES: u64 = 1 << 20;

/// `--countersigners`: keys on the command line, or the file that lists them.
fn read_key_list(list: &str) -> anyhow::Result<(std::collections::BTreeSet<af::bytes::ValidatorKey>, String)> {
    let path = std::path::Path::new(list);
    let (text, named) = match path.is_file() {
        true => (af::input::read_text(path, MAX_KEY_LIST_BYTES)?, format!("in {}", path.display())),
        // On the command line, commas part the keys; a file has one a line.
        false => (list.replace(',', "\n"), "on the command line".to_string()),
    };
    let keys = af::replay::checkpoint_quorum::parse_key_list(&text).map_err(|e| anyhow::anyhow!("{named}: {e}"))?;
    Ok((keys, named))
}

/// A protocol table by its name (ledger-spec/15), or which names there are.
fn parse_table(name: &str) -> Result<af::protocol::Protocol, String> {
    af::protocol::Protocol::named(name)
        .ok_or_else(|| format!("{name:?} is no protocol table; known: af (the network's), local, upgrade-test@BLOCK"))
}
