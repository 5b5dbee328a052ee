//! Argument definitions (clap derive) and dispatch to the per-area command modules.

mod audit;
mod chain;
mod data_dir;
mod demo;
mod devnet;
mod env;
mod http;
mod key;
mod ledger;
mod mine;
mod miner;
mod node;
mod proofs;
mod transcripts;
mod validate;
mod wallet;
mod weights;

use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit code for "the check ran and found a problem".
pub const EXIT_CHECK_FAILED: u8 = 3;
/// Exit code after Ctrl-C: the last block was sealed; run again to resume.
pub use af::validator::launch::EXIT_INTERRUPTED;

#[derive(Parser, Debug)]
#[command(
    name = "af",
    version,
    about = "Validator node and audit toolkit: signed block logs, deterministic environments"
)]
pub struct Cli {
    /// Print JSON for scripts instead of lines (ledger-spec/10 for events); a server
    /// announces its address as one JSON line.
    #[arg(long, global = true, display_order = 50)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Write a small synthetic network's logs, verify them, prove and re-score one
    /// transcript, and replay them as the audit does (the first-run tour).
    Demo {
        /// Data directory (created; must not hold a ledger already unless --fresh).
        #[arg(long, default_value = "demo-data")]
        data: PathBuf,
        /// Validators in the synthetic network (1..=16).
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=16))]
        validators: u16,
        /// Remove an existing demo directory first; without it, a directory that holds a
        /// ledger is left as it is and the command says so (exit 1).
        #[arg(long)]
        fresh: bool,
    },
    /// Ledger keys.
    #[command(subcommand)]
    Key(key::KeyCommand),
    /// A miner's side of the subnet: commit the model served, see what validators see.
    #[command(subcommand)]
    Mine(mine::MineCommand),
    /// Bittensor wallets (btcli's files): addresses.
    #[command(subcommand)]
    Wallet(wallet::WalletCommand),
    /// The signed, hash-chained block log.
    #[command(subcommand)]
    Ledger(ledger::LedgerCommand),
    /// Deterministic environments.
    #[command(subcommand)]
    Env(env::EnvCommand),
    /// Reference miners.
    #[command(subcommand)]
    Miner(miner::MinerCommand),
    /// Run the validator: play contenders against the champion, record everything.
    Validate {
        /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
        #[arg(long, required_unless_present = "print_config")]
        data: Option<PathBuf>,
        /// TOML config; every field has a default and an AF_SECTION__KEY override.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Print the effective config (defaults, file, AF_* overrides) as TOML and exit.
        #[arg(long)]
        print_config: bool,
        /// Stop once our log holds this many decided matches (counted from the log, so a
        /// restart goes on toward the same total).
        #[arg(long)]
        max_matches: Option<u64>,
        /// With networking: once the queue is done, keep gossiping and syncing until Ctrl-C.
        #[arg(long)]
        serve: bool,
        #[command(flatten)]
        net: node::NetArgs,
        #[command(flatten)]
        chain: validate::ChainFlags,
    },
    /// The ratio to beat.
    #[command(subcommand)]
    Ratio(RatioCommand),
    /// Gossip and sync every validator's log, alone (an auditor's or mirror's node).
    Node {
        /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
        #[arg(long)]
        data: PathBuf,
        #[command(flatten)]
        net: node::NetArgs,
        /// A chain to read for the pages (validators' uids and hotkeys, the miners' queue
        /// and commitment blocks, the head); nothing is sent to it.
        #[command(flatten)]
        chain: chain::ChainArgs,
    },
    /// A local devnet on loopback: reference miners, N validators gossiping their logs;
    /// plays R rounds, waits until every validator holds every log, prints a summary.
    Devnet {
        /// Validators to run (each its own process, key and store).
        #[arg(long, default_value_t = 3)]
        validators: usize,
        /// Reference miners to run (one plays randomly, the others perfectly).
        #[arg(long, default_value_t = 3)]
        miners: usize,
        /// Rounds of matches: each round, every validator plays its queue.
        #[arg(long, default_value_t = 2)]
        rounds: u64,
        /// Directory for the chain, miners and validators (kept afterwards).
        #[arg(long, default_value = "devnet-data")]
        data: PathBuf,
        /// Remove DIR first if it exists.
        #[arg(long)]
        fresh: bool,
    },
    /// Copy logs from a running node (`--http`) or a published site (`af ledger publish`),
    /// over HTTP or from the object store it was published to, verifying every block
    /// before storing it; resumes from what DIR holds. Exit 0 done, 1 the server could not
    /// be read, 3 its bytes failed a check (refused, or equivocation evidence written to
    /// DIR/evidence/).
    Mirror {
        /// A node's `http://ADDR/`, a published site's URL, or its object store (s3://,
        /// gs://, az://, file://; credentials from AWS_*, GOOGLE_*, AZURE_* variables).
        #[arg(long)]
        from: String,
        /// Data directory of the copy (created if needed).
        #[arg(long)]
        data: PathBuf,
        /// Only this validator's chain (hex); default: every chain the server lists.
        #[arg(long)]
        validator: Option<String>,
        /// Give up after this many seconds in all (blocks verified by then are kept).
        #[arg(long, value_name = "SECS", default_value_t = 3600, value_parser = clap::value_parser!(u64).range(1..))]
        timeout: u64,
    },
    /// Known validators, their tips and lag, evidence against them, and peers.
    Peers {
        /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
        #[arg(long)]
        data: PathBuf,
    },
    /// Audit every log offline: verify, regenerate and re-score every challenge, check
    /// schedules, recompute vTrust and the winner, check on-chain commitments.
    /// Exit 0 clean, 1 discrepancies found, 2 could not run.
    Audit(audit::AuditArgs),
    /// A miner's transcripts across every log, with inclusion proofs; `verify` checks one.
    Transcripts(transcripts::TranscriptsArgs),
    /// The chain: the local stand-in's server, status, neurons, commitments, commit.
    #[command(subcommand)]
    Chain(chain::ChainCommand),
    /// Weights: what replay says they should be, next to what is on chain.
    #[command(subcommand)]
    Weights(WeightsCommand),
}

#[derive(Subcommand, Debug)]
pub enum WeightsCommand {
    /// Replay's winner-takes-all weights and, with --chain, the weights on chain.
    Show {
        /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
        #[arg(long)]
        data: PathBuf,
        #[command(flatten)]
        chain: chain::ChainArgs,
    },
}

#[derive(Subcommand, Debug)]
pub enum RatioCommand {
    /// The current ratio to beat, when and by which match it was set, and its decay.
    Show {
        /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
        #[arg(long)]
        data: PathBuf,
        /// Read "now" from this chain's head (default: the newest chain block the log names).
        #[command(flatten)]
        chain: chain::ChainArgs,
    },
}

/// Runs one command; `log_suppressed` counts the log lines the rate limit held back (a
/// metric of the nodes this process runs).
pub fn run(cli: Cli, log_suppressed: prometheus_client::metrics::counter::Counter) -> anyhow::Result<ExitCode> {
    let json = cli.json;
    match cli.command {
        Command::Demo { data, validators, fresh } => demo::run(&data, validators, fresh, json),
        Command::Key(command) => key::run(command, json),
        Command::Wallet(command) => wallet::run(command, json),
        Command::Mine(command) => mine::run(command, json),
        Command::Ledger(command) => ledger::run(command, json),
        Command::Env(command) => env::run(command, json),
        Command::Miner(command) => miner::run(command, json),
        Command::Validate { print_config: true, config, net, chain, .. } => {
            validate::print_config(config, &net, &chain)
        }
        Command::Validate { data, config, max_matches, serve, net, chain, .. } => {
            let data = data.expect("clap requires --data here");
            let flags = validate::RunFlags { max_matches, serve, json, log_suppressed };
            validate::validate(&data, config, net, chain, flags)
        }
        Command::Ratio(RatioCommand::Show { data, chain }) => validate::ratio_show(&data, &chain, json),
        Command::Node { data, net, chain } => node::node(&data, net, &chain, json, log_suppressed),
        Command::Mirror { from, data, validator, timeout } => {
            http::mirror_command(&from, &data, validator, std::time::Duration::from_secs(timeout), json)
        }
        Command::Peers { data } => node::peers(&data, json),
        Command::Devnet { validators, miners, rounds, data, fresh } => {
            devnet::run(&data, validators, miners, rounds, fresh, json)
        }
        Command::Audit(args) => audit::run(args, json),
        Command::Transcripts(args) => transcripts::run(args, json),
        Command::Chain(command) => chain::run(command, json),
        Command::Weights(WeightsCommand::Show { data, chain }) => weights::weights_show(&data, &chain, json),
    }
}

/// Writes JSON to stdout followed by a newline.
pub fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}

/// Writes one line to stdout, surfacing a closed pipe as an error `main` treats as
/// success. What it formats stays one line: a newline or control character from an
/// argument is shown escaped (`af::display::one_line`), so no outside string can add a
/// line of its own. Text meant to span lines goes through [`print_text`].
#[macro_export]
macro_rules! outln {
    ($format:literal $($arg:tt)*) => {{
        const _: () = assert!(!af::display::has_line_break($format), "outln! prints one line: split it");
        use std::io::Write as _;
        let line = format!($format $($arg)*);
        writeln!(std::io::stdout().lock(), "{}", $crate::cli::one_line(&line))?;
    }};
}

/// Writes text that spans lines (a model's answer, a report whose lines were each made
/// safe) to stdout, escaping every control character but newline and tab.
pub fn print_text(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    writeln!(std::io::stdout().lock(), "{}", terminal_safe(text))
}

pub use af::display::{one_line, terminal_safe};

/// A serving process's metrics: the log filter's suppressed-line counter and the
/// allocator's heap gauges.
pub fn node_metrics(log_suppressed: prometheus_client::metrics::counter::Counter) -> af::metrics::Metrics {
    af::metrics::Metrics::with_log_counter(log_suppressed).with_heap_probe(crate::heap_probe)
}

/// Runs `f` with panic messages kept off the terminal: for reads of a store whose pages
/// may be damaged (salvage, or a full read beside its page check), where the library
/// catches the store engine's panics and reports each as a finding. The process's hook is
/// put back afterwards.
pub fn with_quiet_panics<T>(f: impl FnOnce() -> T) -> T {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let out = f();
    std::panic::set_hook(hook);
    out
}

/// A document handed to a verify command that does not even parse as what it claims to
/// be: the check ran and failed (exit 3), with serde's reason (which names the field).
pub fn report_parse_failure(json: bool, what: &str, error: &serde_json::Error) -> anyhow::Result<ExitCode> {
    let message = format!("not a well-formed {what}: {error}");
    report_check(json, false, serde_json::json!({ "error": message }), &message)
}

/// A check's result: `value` with `ok` set (`--json`), or `ok: TEXT` / `FAIL: TEXT`; exit
/// 0 when it passed, 3 when it failed.
pub fn report_check(json: bool, ok: bool, value: serde_json::Value, text: &str) -> anyhow::Result<ExitCode> {
    if json {
        let mut value = value;
        value["ok"] = serde_json::json!(ok);
        print_json(&value)?;
    } else {
        outln!("{}{text}", if ok { "ok: " } else { "FAIL: " });
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(EXIT_CHECK_FAILED) })
}

/// Shows progress on stderr when it is a terminal, at most a few times a second.
pub struct ProgressLine {
    enabled: bool,
    last: std::time::Instant,
}

impl ProgressLine {
    pub fn new() -> ProgressLine {
        use std::io::IsTerminal;
        ProgressLine { enabled: std::io::stderr().is_terminal(), last: std::time::Instant::now() }
    }

    pub fn update(&mut self, text: impl FnOnce() -> String) {
        if self.enabled && self.last.elapsed().as_millis() >= 250 {
            self.last = std::time::Instant::now();
            eprint!("\r\x1b[2K{}", text());
        }
    }

    /// A mirror's progress: `held` of `size` blocks of `validator`'s log copied.
    pub fn mirroring(&mut self, validator: &af::bytes::ValidatorKey, held: u64, size: u64) {
        self.update(|| format!("mirroring {}…: {held}/{size} blocks", &validator.to_hex()[..16]));
    }

    pub fn finish(&mut self) {
        if self.enabled {
            eprint!("\r\x1b[2K");
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every leaf command with its path, e.g. "ledger prove".
    fn leaves(command: &clap::Command, path: String, out: &mut Vec<(String, clap::Command)>) {
        let subcommands: Vec<_> = command.get_subcommands().filter(|c| c.get_name() != "help").collect();
        if subcommands.is_empty() {
            out.push((path.clone(), command.clone()));
        }
        for sub in subcommands {
            let name = if path.is_empty() { sub.get_name().to_string() } else { format!("{path} {}", sub.get_name()) };
            leaves(sub, name, out);
        }
    }

    #[test]
    fn every_flag_has_help_and_every_command_takes_json() {
        // Built, so that the global `--json` is copied onto every subcommand as clap
        // does when it parses.
        let mut cli = super::Cli::command();
        cli.build();
        let mut all = Vec::new();
        leaves(&cli, String::new(), &mut all);
        assert!(all.len() > 30, "{} commands", all.len());
        let mut missing_help = Vec::new();
        let mut missing_json = Vec::new();
        for (path, command) in &all {
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if id != "help" && id != "version" && arg.get_help().is_none() {
                    missing_help.push(format!("{path} --{id}"));
                }
            }
            if !command.get_arguments().any(|a| a.get_id() == "json") {
                missing_json.push(path.clone());
            }
        }
        assert!(missing_help.is_empty(), "flags without help text: {missing_help:?}");
        assert!(missing_json.is_empty(), "commands without --json: {missing_json:?}");
    }
}
