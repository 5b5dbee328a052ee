//! `af key`: create and inspect ledger keys. Secrets are written to files only.

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
    };
    if json {
        super::print_json(&serde_json::json!({ "public_key": key.validator() }))?;
    } else {
        outln!("{}", key.validator());
    }
    Ok(ExitCode::SUCCESS)
}
