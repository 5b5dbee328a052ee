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
    },
    /// Move this validator's log to a new ledger key (ledger-spec/16): the old key signs
    /// its log's last block naming the new key, the new key signs its first block naming
    /// that one, and the new key replaces the old in the data directory. A running
    /// `af validate` on DIR is asked to do it (it stops its run, rotates, and runs again
    /// under the new key); a stopped one is rotated here. The validator then commits the
    /// new key on chain, and peers count both logs as one validator. Run it again to
    /// finish a rotation that was cut short.
    Rotate {
        /// The validator's data directory.
        #[arg(long)]
        data: PathBuf,
        /// The validator's configuration (its protocol table decides when rotation is a rule;
        /// a stopped validator only: a running one uses its own).
        #[arg(long)]
        config: Option<PathBuf>,
        /// The chain block to record, at least the log's newest (default: the log's newest;
        /// a stopped validator only).
        #[arg(long, default_value_t = 0)]
        chain_block: u64,
        /// How long to wait for a running validator to answer, in seconds.
        #[arg(long, default_value_t = 300)]
        wait_s: u64,
    },
    /// Print the public key of a key file.
    Show {
        /// The key file to read.
        #[arg(long)]
        key: PathBuf,
    },
}

pub fn run(command: KeyCommand, json: bool) -> anyhow::Result<ExitCode> {
    let key = match command {
        KeyCommand::Generate { out } => {
            let key = LedgerKey::generate()?;
            key.write_new(&out).with_context(|| format!("writing {}", out.display()))?;
            key
        }
        KeyCommand::Show { key } => LedgerKey::load(&key)?,
        KeyCommand::Rotate { data, config, chain_block, wait_s } => {
            return rotate(&data, config.as_deref(), chain_block, wait_s, json)
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
    wait_s: u64,
    json: bool,
) -> anyhow::Result<ExitCode> {
    use af::validator::key_rotation;
    let running = data.join(af::ledger::store::STORE_FILE).exists() && af::ledger::Store::held_by_writer(data)?;
    let done = if running {
        // The validator holds the store: it rotates at its next safe point, by its own
        // configuration, and starts again under the new key.
        eprintln!(
            "af: the validator on {} is running; asking it to rotate (it stops its run, rotates and starts again)",
            data.display()
        );
        key_rotation::request(data, std::time::Duration::from_secs(wait_s)).map_err(anyhow::Error::msg)?
    } else {
        let protocol = super::validate::load_config(config)?.protocol();
        key_rotation::rotate(data, &protocol, chain_block, af::clock::unix_ms())?
    };
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
