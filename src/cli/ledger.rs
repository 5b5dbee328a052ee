//! `af ledger`: create, inspect, verify, export, checkpoint and prove block logs.

use super::data_dir::{key_path, open_own_log, parse_validator, validator_or_own};
use super::proofs::{checkpoint, prove, prove_consistency, verify_checkpoint, verify_consistency, verify_proof};
use super::{print_json, report_check, ProgressLine, EXIT_CHECK_FAILED};
use crate::outln;
use af::bytes::ValidatorKey;
use af::ledger::verify::{self, StoreReport};
use af::ledger::Store;
use anyhow::{anyhow, bail, Context};
use clap::{Subcommand, ValueEnum};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Subcommand, Debug)]
pub enum LedgerCommand {
    /// Create the store (DIR/ledger.redb) and, if absent, a ledger key (DIR/validator.key).
    Init {
        /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
        #[arg(long)]
        data: PathBuf,
    },
    /// List chains; with --validator, a chain's blocks; with --height, one block.
    Show {
        /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
        #[arg(long)]
        data: PathBuf,
        /// Validator public key (hex); defaults to our own when --height is given.
        #[arg(long)]
        validator: Option<String>,
        /// One block: its header, events and hash.
        #[arg(long)]
        height: Option<u64>,
    },
    /// Verify every chain from genesis: bytes, hashes, Merkle roots, signatures, links.
    /// Exits 3 naming the validator, first bad height and fault if anything is wrong.
    Verify {
        /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
        #[arg(long)]
        data: PathBuf,
        /// Threads for the parallel checks, 1 to 4096 (default, or 0: every core).
        #[arg(long, value_parser = clap::value_parser!(u16).range(0..=4096))]
        threads: Option<u16>,
    },
    /// Export every chain (or one): `jsonl` writes one JSON object per event with its
    /// location; `blocks` writes the exact block bytes, framed as ledger-spec/08 says.
    Export {
        /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
        #[arg(long)]
        data: PathBuf,
        /// `jsonl`: one JSON object per event; `blocks`: the exact bytes (ledger-spec/08).
        #[arg(long, value_enum, default_value_t = ExportFormat::Jsonl)]
        format: ExportFormat,
        /// Only this validator's chain (hex); default: every chain held.
        #[arg(long)]
        validator: Option<String>,
    },
    /// Save what a damaged store still holds: every block that checks out (canonical
    /// bytes, Merkle root, signature, link), each chain from height 0 up to its first
    /// block that is missing, unreadable or fails, written as a block export for
    /// `af ledger import` into a fresh store. Exit 3 if any chain stops short.
    Salvage {
        /// The data directory holding the damaged store (read only, never written).
        #[arg(long)]
        data: PathBuf,
        /// Where to write the block export (a new file; refused if it exists).
        #[arg(long)]
        out: PathBuf,
    },
    /// Read a block export (`export --format blocks`), verify every block and link, and
    /// store the blocks (creating the store if needed). Nothing unverified is stored.
    Import {
        /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
        #[arg(long)]
        data: PathBuf,
        /// The export file, or - for stdin.
        #[arg(long)]
        file: PathBuf,
    },
    /// Rebuild the challenge and miner indexes from the blocks (after `verify` reports an
    /// index fault). Every chain must verify first.
    Reindex {
        /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
        #[arg(long)]
        data: PathBuf,
    },
    /// Shrink a stopped validator's store file to its data (redb's compaction): the file
    /// grows in doubling steps and keeps freed pages for reuse. Pages are checked first.
    Compact {
        /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
        #[arg(long)]
        data: PathBuf,
    },
    /// Print a signed checkpoint (C2SP signed note) of our own chain's tip; `--json`:
    /// `{"validator", "height", "hash", "note"}`.
    Checkpoint {
        /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
        #[arg(long)]
        data: PathBuf,
    },
    /// Verify a checkpoint note; with --data, also that the store holds that tip.
    VerifyCheckpoint {
        /// Checkpoint file, or - for stdin.
        #[arg(long)]
        file: PathBuf,
        /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
        #[arg(long)]
        data: Option<PathBuf>,
    },
    /// Print an inclusion proof of one event, always JSON (ledger-spec/03): Merkle path
    /// plus headers to the tip.
    Prove {
        /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
        #[arg(long)]
        data: PathBuf,
        /// Height of the block holding the event.
        #[arg(long)]
        height: u64,
        /// Index of the event in its block.
        #[arg(long)]
        event: u32,
        /// The chain's validator key (hex); default: our own.
        #[arg(long)]
        validator: Option<String>,
    },
    /// Verify an inclusion proof file on its own; with --checkpoint, that it reaches it.
    VerifyProof {
        /// The proof file (`af ledger prove` output), or - for stdin.
        #[arg(long)]
        file: PathBuf,
        /// A checkpoint note the proof must reach (same validator, size and tip hash).
        #[arg(long)]
        checkpoint: Option<PathBuf>,
    },
    /// Write every chain as the static HTTP layout of ledger-spec/11 (bundles of blocks,
    /// signed tips, the log list, our checkpoint) under OUT, a folder for any static web
    /// server or an object store (s3://, gs://, az://); `af mirror --from URL` reads it.
    /// Publishing again writes only the new blocks' bundles, the tips last.
    Publish {
        /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
        #[arg(long)]
        data: PathBuf,
        /// The site's root: a folder (created if needed), or s3://BUCKET/PREFIX,
        /// gs://BUCKET/PREFIX, az://CONTAINER/PREFIX, file:///PATH (credentials and
        /// endpoint from AWS_*, GOOGLE_*, AZURE_* variables).
        #[arg(long)]
        out: String,
        /// With `--chain`: the pages name each validator by the uid and hotkey whose
        /// commitment names its ledger key, as the chain says now.
        #[command(flatten)]
        chain: super::chain::ChainArgs,
        /// Read back every bundle, those already published too, and write again each
        /// that does not hold exactly the store's blocks (a damaged or deleted bundle).
        #[arg(long)]
        repair: bool,
    },
    /// Prune old bodies of other validators' logs (ledger-spec/05): blocks older than
    /// --keep-days that the archive at --archive already holds in full bundles become
    /// their header, signature and leaf hashes; our own log and each chain's last block
    /// are kept whole. Readers fetch a pruned body back from that archive when they need
    /// it, and take it only if it is the kept block. Stop the validator first.
    Prune {
        /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
        #[arg(long)]
        data: PathBuf,
        /// The archive that holds the logs (`af ledger publish --out` of this store, or
        /// `[archive] url`): a folder or s3://, gs://, az://, file:// URL.
        #[arg(long)]
        archive: String,
        /// Days of every log to keep whole, by the blocks' times (at least 1).
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=36500))]
        keep_days: u32,
    },
    /// Print a consistency proof (JSON, ledger-spec/11): the signed headers showing that
    /// the chain at size NEW extends the chain at size OLD.
    ProveConsistency {
        /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
        #[arg(long)]
        data: PathBuf,
        /// Validator key (hex); default: our own.
        #[arg(long)]
        validator: Option<String>,
        /// The older checkpoint's size (number of blocks).
        #[arg(long)]
        old: u64,
        /// The newer size; default: the tip.
        #[arg(long)]
        new: Option<u64>,
    },
    /// Verify a consistency proof on its own; with --old and --new (checkpoint notes),
    /// also that they are validly signed and name the proof's sizes and hashes.
    VerifyConsistency {
        /// The proof file (`af ledger prove-consistency` output), or - for stdin.
        #[arg(long)]
        proof: PathBuf,
        /// The older checkpoint note the proof must start from.
        #[arg(long, requires = "new")]
        old: Option<PathBuf>,
        /// The newer checkpoint note the proof must reach.
        #[arg(long, requires = "old")]
        new: Option<PathBuf>,
    },
    /// Find transcripts by challenge id or miner hotkey (through the store's indexes).
    Find {
        /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
        #[arg(long)]
        data: PathBuf,
        /// A challenge id (64 hex digits, or a unique prefix of at least 16).
        #[arg(long, required_unless_present = "miner")]
        challenge_id: Option<String>,
        /// A miner hotkey.
        #[arg(long)]
        miner: Option<String>,
    },
    /// Append a synthetic but well-formed log to our own chain (benchmarks, tests).
    Demo {
        /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
        #[arg(long)]
        data: PathBuf,
        /// Blocks to write.
        #[arg(long)]
        blocks: u64,
        /// Events per block.
        #[arg(long)]
        events_per_block: u32,
        /// Approximate encoded size of each event.
        #[arg(long, default_value_t = 1024)]
        event_bytes: usize,
        /// Print `appended HEIGHT` after each block is durable (for crash tests).
        #[arg(long)]
        ack: bool,
        /// Blocks written per durable transaction (group commit, as the validator's
        /// writer does when blocks queue up).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=256))]
        blocks_per_commit: u64,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum ExportFormat {
    Jsonl,
    Blocks,
}

pub fn run(command: LedgerCommand, json: bool) -> anyhow::Result<ExitCode> {
    match command {
        LedgerCommand::Init { data } => init(&data, json),
        LedgerCommand::Show { data, validator, height } => show(&data, validator, height, json),
        LedgerCommand::Verify { data, threads } => verify(&data, threads, json),
        LedgerCommand::Export { data, format, validator } => {
            // `--json` asks for the JSON lines, the default: with `--format blocks` it is a contradiction.
            anyhow::ensure!(
                !json || matches!(format, ExportFormat::Jsonl),
                "--json writes JSON lines; --format blocks writes the block bytes: give one"
            );
            export(&data, format, validator)
        }
        LedgerCommand::Salvage { data, out } => salvage(&data, &out, json),
        LedgerCommand::Import { data, file } => import(&data, &file, json),
        LedgerCommand::Reindex { data } => reindex(&data, json),
        LedgerCommand::Compact { data } => {
            let (before, after, upgraded) = Store::compact(&data)?;
            if json {
                print_json(&serde_json::json!({
                    "ok": true, "bytes_before": before, "bytes_after": after, "blocks_upgraded": upgraded
                }))?;
            } else {
                if upgraded > 0 {
                    outln!("upgraded the store to schema 2: {upgraded} blocks moved into pieces");
                }
                outln!("compacted the store: {before} bytes before, {after} after");
            }
            Ok(ExitCode::SUCCESS)
        }
        LedgerCommand::Publish { data, out, chain, repair } => {
            super::http::publish_command(&data, &out, &chain, repair, json)
        }
        LedgerCommand::Prune { data, archive, keep_days } => {
            let archive = af::http::archive::absolute(&archive)?;
            let site = af::http::archive::Site::open(&archive)?;
            let store = Store::open(&data)?;
            let own = super::data_dir::own_key(&data)?.map(|key| key.validator());
            let mut line = ProgressLine::new();
            let report =
                af::http::prune::prune_to_archive(&store, &site, own, keep_days, af::clock::unix_ms(), &mut |p| {
                    line.update(|| format!("pruning {}…: below height {}", &p.validator.to_hex()[..16], p.below));
                })?;
            line.finish();
            if json {
                print_json(&report)?;
            } else {
                for l in report.lines() {
                    outln!("{l}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        LedgerCommand::ProveConsistency { data, validator, old, new } => prove_consistency(&data, validator, old, new),
        LedgerCommand::VerifyConsistency { proof, old, new } => {
            verify_consistency(&proof, old.as_deref(), new.as_deref(), json)
        }
        LedgerCommand::Checkpoint { data } => checkpoint(&data, json),
        LedgerCommand::VerifyCheckpoint { file, data } => verify_checkpoint(&file, data.as_deref(), json),
        LedgerCommand::Prove { data, height, event, validator } => prove(&data, height, event, validator),
        LedgerCommand::VerifyProof { file, checkpoint } => verify_proof(&file, checkpoint.as_deref(), json),
        LedgerCommand::Find { data, challenge_id, miner } => find(&data, challenge_id, miner, json),
        LedgerCommand::Demo { data, blocks, events_per_block, event_bytes, ack, blocks_per_commit } => {
            let shape = af::ledger::demo::DemoShape { blocks, events_per_block, event_bytes, blocks_per_commit };
            shape.check()?;
            let log = open_own_log(&data)?;
            let mut progress = ProgressLine::new();
            let summary = af::ledger::demo::write_demo(&log, shape, &mut |done, tip_height| {
                if ack {
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "appended {tip_height}")?;
                    out.flush()?;
                }
                progress.update(|| format!("appended block {done} of {blocks}"));
                Ok(())
            })?;
            progress.finish();
            if json {
                print_json(&summary)?;
            } else if !ack {
                outln!(
                    "appended {} blocks of {} events ({:.1} MiB) in {:.2} s: {:.0} events/s durable; tip height {}",
                    summary.blocks,
                    summary.events_per_block,
                    summary.bytes as f64 / 1048576.0,
                    summary.seconds,
                    summary.events_per_second,
                    summary.tip_height
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn init(data: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let created_key = !key_path(data).exists();
    let log = open_own_log(data)?;
    let tip = log.tip()?;
    if json {
        print_json(&serde_json::json!({
            "data": data, "store": log.store.path(), "key_file": key_path(data),
            "created_key": created_key, "validator": log.validator(), "tip": tip,
        }))?;
    } else {
        outln!("store     {}", log.store.path().display());
        outln!(
            "key       {} ({})",
            key_path(data).display(),
            if created_key { "created, mode 0600" } else { "existing" }
        );
        outln!("validator {}", log.validator());
        outln!("tip       {}", tip.map_or("(empty chain)".into(), |t| format!("height {} hash {}", t.height, t.hash)));
    }
    Ok(ExitCode::SUCCESS)
}

fn show(data: &Path, validator: Option<String>, height: Option<u64>, json: bool) -> anyhow::Result<ExitCode> {
    let store = super::http::open_for_read(data)?;
    match (validator, height) {
        (None, None) => {
            let tips = store.tips()?;
            if json {
                let chains: Vec<_> = tips
                    .iter()
                    .map(|(v, t)| serde_json::json!({ "validator": v, "n_blocks": t.height + 1, "tip": t }))
                    .collect();
                print_json(&chains)?;
            } else {
                outln!("{:<64}  {:>8}  tip hash", "validator", "blocks");
                for (validator, tip) in tips {
                    outln!("{validator}  {:>8}  {}", tip.height + 1, tip.hash);
                }
            }
        }
        (validator, None) => {
            let validator = validator_or_own(data, validator)?;
            let tip = store.tip(&validator)?.ok_or_else(|| anyhow!("no chain for validator {validator}"))?;
            let signed = store.signed_headers(&validator, 0, tip.height)?;
            anyhow::ensure!(
                signed.len() as u64 > tip.height,
                "block {} is missing; run `af ledger verify`",
                signed.len()
            );
            // A pruned block (ledger-spec/05) keeps its header; its bytes are the archive's.
            let sized = signed
                .into_iter()
                .map(|(header, _)| Ok((header.hash(), store.block_len(&validator, header.height)?, header)));
            let headers = sized.collect::<anyhow::Result<Vec<_>>>()?;
            if json {
                let list: Vec<_> = headers
                    .iter()
                    .map(|(hash, n, header)| {
                        serde_json::json!({ "hash": hash, "header": header, "n_bytes": n, "pruned": n.is_none() })
                    })
                    .collect();
                print_json(&list)?;
            } else {
                outln!("validator {validator}");
                outln!("{:>8}  {:<64}  {:>13}  {:>7}  {:>9}", "height", "hash", "time_ms", "events", "bytes");
                for (hash, n, header) in headers {
                    let n = n.map_or("pruned".to_string(), |n| n.to_string());
                    outln!("{:>8}  {hash}  {:>13}  {:>7}  {:>9}", header.height, header.time_ms, header.n_events, n);
                }
            }
        }
        (validator, Some(height)) => {
            let validator = validator_or_own(data, validator)?;
            let block = store
                .block(&validator, height)?
                .ok_or_else(|| anyhow!("validator {validator} has no block at height {height}"))?;
            if json {
                print_json(&serde_json::json!({ "hash": block.hash, "n_bytes": block.n_bytes, "block": block.block }))?;
            } else {
                for line in af::audit::text::block_lines(&block) {
                    outln!("{line}");
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn verify(data: &Path, threads: Option<u16>, json: bool) -> anyhow::Result<ExitCode> {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads.map_or(0, usize::from)).build()?;
    let started = Instant::now();
    let progress = std::sync::Mutex::new(ProgressLine::new());
    // A store that failed its checks is a finding; any other failure to open is not.
    let read = super::http::read_beside_page_check(data, |store| {
        pool.install(|| {
            verify::verify_store(store, &|blocks, bytes| {
                // Workers report after every block; one of them draws the line at a time.
                if let Ok(mut line) = progress.try_lock() {
                    line.update(|| format!("verifying: {blocks} blocks, {:.1} MiB", bytes as f64 / 1048576.0));
                }
            })
        })
    });
    let (recovery_needed, report) = match read {
        Ok((store, report)) => (store.recovery_needed().map(String::from), report),
        Err(af::http::read_store::ReadError::Store(error)) => (None, Err(error)),
        Err(error) => return Err(error.into()),
    };
    let mut progress = progress.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
    progress.finish();
    let report: StoreReport = match report {
        Ok(report) => report,
        // Bytes that failed a check are a verification failure; a store that could not
        // be opened (missing, locked, no permission) is not, and says why.
        Err(error) if error.is_integrity_fault() => {
            return report_check(json, false, serde_json::json!({ "error": error.to_string() }), &error.to_string())
        }
        Err(error) => return Err(error.into()),
    };
    let seconds = started.elapsed().as_secs_f64();
    if json {
        // What was verified is the store as its writer's recovery will leave it.
        print_json(&report.json(seconds, recovery_needed)?)?;
    } else {
        for line in report.lines(seconds) {
            outln!("{line}");
        }
    }
    Ok(if report.ok { ExitCode::SUCCESS } else { ExitCode::from(EXIT_CHECK_FAILED) })
}

fn export(data: &Path, format: ExportFormat, validator: Option<String>) -> anyhow::Result<ExitCode> {
    let store = super::http::open_for_read(data)?;
    let validators: Vec<ValidatorKey> = match validator {
        Some(hex) => vec![parse_validator(&hex)?],
        None => store.tips()?.into_iter().map(|(v, _)| v).collect(),
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if let ExportFormat::Blocks = format {
        use std::io::IsTerminal;
        if std::io::stdout().is_terminal() {
            bail!("the block export is binary: redirect it to a file (`> log.afblocks`)");
        }
        af::ledger::export::write_blocks(&store, &validators, &mut out)?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    af::ledger::export::write_events_jsonl(&store, &validators, &mut out)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn salvage(data: &Path, out: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(out)
        .with_context(|| format!("creating {} (salvage never overwrites a file)", out.display()))?;
    let mut writer = std::io::BufWriter::new(&mut file);
    let mut progress = ProgressLine::new();
    // A damaged page can make the storage engine panic; each is caught and reported as a
    // reason, so its message is kept off the terminal while salvage runs.
    let report = super::with_quiet_panics(|| {
        af::ledger::salvage::salvage(data, &mut writer, &mut |n| progress.update(|| format!("salvaged {n} blocks")))
    });
    progress.finish();
    drop(writer);
    let report = match report {
        Ok(report) => report,
        Err(error) => {
            // Nothing could be read: no half export is left behind.
            let _ = std::fs::remove_file(out);
            anyhow::bail!(
                "{error}: the storage engine's own pages are damaged, so no block can be reached through it; fetch the logs again from a peer or an archive (af mirror) or import an export"
            );
        }
    };
    file.sync_all().with_context(|| format!("syncing {}", out.display()))?;
    let lines = report.lines(out);
    if json {
        return report_check(json, report.complete(), serde_json::to_value(&report)?, "");
    }
    outln!("{}{}", if report.complete() { "ok: " } else { "FAIL: " }, lines[0]);
    for line in &lines[1..] {
        outln!("{line}");
    }
    Ok(if report.complete() { ExitCode::SUCCESS } else { ExitCode::from(super::EXIT_CHECK_FAILED) })
}

fn import(data: &Path, file: &Path, json: bool) -> anyhow::Result<ExitCode> {
    // The magic first: a file that is not an export creates no store.
    let mut reader = af::ledger::export::BlockReader::new(std::io::BufReader::new(af::input::open(file)?))?;
    let store = Store::create(data)?;
    let mut progress = ProgressLine::new();
    let done =
        af::ledger::export::import(&store, &mut reader, &mut |n| progress.update(|| format!("imported {n} blocks")))?;
    progress.finish();
    let (n_new, n_known, summary) = (done.n_new, done.n_known, &done.summary);
    let value = serde_json::json!({
        "blocks_new": n_new, "blocks_already_stored": n_known, "chains": summary.tips, "error": done.error,
    });
    let text = format!(
        "{} blocks of {} chain(s) verified: {n_new} stored, {n_known} already stored",
        summary.n_blocks,
        summary.tips.len()
    );
    match &done.error {
        None => report_check(json, true, value, &text),
        Some(why) => report_check(json, false, value, &format!("{why} (kept the {n_new} verified blocks before it)")),
    }
}

fn reindex(data: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let store = Store::open(data)?;
    let report = verify::verify_store(&store, &|_, _| {})?;
    if let Some(chain) = report.chains.iter().find(|c| c.fault.is_some()) {
        bail!(
            "validator {} fails verification ({}); the indexes are rebuilt only from chains that verify",
            chain.validator,
            chain.fault.as_ref().map_or("", |f| f.kind)
        );
    }
    let n_entries = store.rebuild_indexes()?;
    if json {
        print_json(&serde_json::json!({ "ok": true, "entries": n_entries }))?;
    } else {
        outln!("rebuilt the challenge and miner indexes from the blocks: {n_entries} transcripts");
    }
    Ok(ExitCode::SUCCESS)
}

fn find(data: &Path, challenge_id: Option<String>, miner: Option<String>, json: bool) -> anyhow::Result<ExitCode> {
    let store = super::http::open_for_read(data)?;
    super::transcripts::say_pruned(&store, "af ledger find")?;
    let locations = match (challenge_id, miner) {
        (Some(hex), _) => store.find_challenge(
            &af::replay::transcript_entries::resolve_challenge_id(&store, &hex)
                .map_err(|e| anyhow!("--challenge-id: {e}"))?,
        )?,
        (None, Some(hotkey)) => store.find_miner(&hotkey)?,
        (None, None) => bail!("give --challenge-id HEX or --miner HOTKEY"),
    };
    if json {
        print_json(&locations)?;
    } else {
        for location in locations {
            outln!("validator {} height {} event {}", location.validator, location.height, location.event_idx);
        }
    }
    Ok(ExitCode::SUCCESS)
}
