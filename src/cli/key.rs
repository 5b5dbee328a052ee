//! `af key`: create, inspect and rotate ledger keys. Secrets are written to files only.

use crate::outln;
use af::ledger::LedgerKey;
use anyhow::Context;
use clap::Subcommand;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum KeyCommand {
    /// Create a new ed25519 ledger key in a new file with mode 0600; prints the public key.
    Generate {
        /// Where to write the new key file (refused if it exists).
        #[arg(long)]
        out: PathBuf,
        /// Print JSON for scripts (ledger-spec/10 for events).
        #[arg(long)]
        json: bool,
    },
    /// Move this validator's log to a new ledger key (ledger-spec/16), with the validator
    /// stopped: the old key signs its log's last block naming the new key, the new key
    /// signs its first block naming that one, and the new key replaces the old in the data
    /// directory. Start the validator again: it commits the new key on chain, and peers
    /// count both logs as one validator. Run it again to finish one that was cut short.
    Rotate {
        /// The validator's data directory.
        #[arg(long)]
        data: PathBuf,
        /// The validator's configuration (its protocol table decides when rotation is a rule).
        #[arg(long)]
        config: Option<PathBuf>,
        /// The chain block to record, at least the log's newest (default: the log's newest).
        #[arg(long, default_value_t = 0)]
        chain_block: u64,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Print the public key of a key file.
    Show {
        /// The key file to read.
        #[arg(long)]
        key: PathBuf,
        /// Print JSON for scripts (ledger-spec/10 for events).
        #[arg(long)]
        json: bool,
    },
}

pub fn run(command: KeyCommand) -> anyhow::Result<ExitCode> {
    let (key, json) = match command {
        KeyCommand::Generate { out, json } => {
            let key = LedgerKey::generate()?;
            key.write_new(&out).with_context(|| format!("writing {}", out.display()))?;
            (key, json)
        }
        KeyCommand::Show { key, json } => (LedgerKey::load(&key)?, json),
        KeyCommand::Rotate { data, config, chain_block, json } => {
            return rotate(&data, config.as_deref(), chain_block, json)
        }
    };
    if json {
        super::print_json(&serde_json::json!({ "public_key": key.validator() }))?;
    } else {
        outln!("{}", key.validator());
    }
    Ok(ExitCode::SUCCESS)
}

fn rotate(
    data: &std::path::Path,
    config: Option<&std::path::Path>,
    chain_block: u64,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let protocol = super::validate::load_config(config)?.protocol();
    let done = af::validator::key_rotation::rotate(data, &protocol, chain_block, af::clock::unix_ms())?;
    if json {
        super::print_json(&done)?;
        return Ok(ExitCode::SUCCESS);
    }
    if done.resumed {
        outln!("finished a rotation an earlier run began");
    }
    outln!(
        "old key {} signed its last block, {} ({}), naming the new key",
        done.old_key,
        done.rotated_at,
        done.rotation_hash
    );
    outln!("new key {} signed block 0 of its log ({}), naming that block", done.new_key, done.first_hash);
    outln!("the data directory now signs with the new key; the old key's secret is gone from it");
    outln!("next: start the validator; it commits the new key on chain (check: af chain commitments shows it for your hotkey)");
    Ok(ExitCode::SUCCESS)
}
