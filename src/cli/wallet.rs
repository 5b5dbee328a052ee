//! `af wallet show`: a Bittensor wallet's addresses as btcli shows them, derived from the
//! key bytes in its files (src/chain/wallet.rs).

use super::print_json;
use crate::outln;
use af::chain::subtensor::ss58;
use af::chain::wallet::{self, Password, WalletError, WalletPaths};
use clap::Subcommand;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum WalletCommand {
    /// The hotkey's and coldkey's ss58 addresses (an encrypted hotkey is opened with
    /// AF_HOTKEY_PASSWORD or a prompt; without either, its public file is shown, marked).
    /// With AF_HOTKEY_PHRASE set, the hotkey shown is that phrase's, as every chain command
    /// signs with it before any wallet file.
    Show {
        /// The wallet name (btcli's --wallet.name; default "default").
        #[arg(long)]
        wallet: Option<String>,
        /// The hotkey name (btcli's --wallet.hotkey; default "default").
        #[arg(long)]
        hotkey: Option<String>,
        /// The wallets directory (default: ~/.bittensor/wallets).
        #[arg(long)]
        wallets_dir: Option<PathBuf>,
    },
}

pub fn run(command: WalletCommand, json: bool) -> anyhow::Result<ExitCode> {
    let WalletCommand::Show { wallet, hotkey, wallets_dir } = command;
    let paths = WalletPaths::new(wallets_dir, wallet.as_deref(), hotkey.as_deref());
    let (hotkey_address, hotkey_source) = match af::chain::subtensor::hotkey_from_env().transpose()? {
        // The phrase names no wallet file, so there is no public file to agree with.
        Some(from_phrase) => (ss58(&from_phrase.public_key()), "phrase_env"),
        None => hotkey_from_files(&paths)?,
    };
    let cold_file = paths.coldkeypub_file();
    let coldkey = ss58(&wallet::public_from_json(&cold_file, &wallet::read_keyfile(&cold_file)?)?);
    if json {
        print_json(&serde_json::json!({
            "wallet": paths.wallet,
            "hotkey_name": paths.hotkey,
            "hotkey": hotkey_address,
            "hotkey_source": hotkey_source,
            "coldkey": coldkey,
            "path": paths.dir.join(&paths.wallet),
        }))?;
    } else {
        outln!("wallet {} ({})", paths.wallet, paths.dir.join(&paths.wallet).display());
        outln!("  coldkey {coldkey}");
        let note = match hotkey_source {
            "public_file" => format!(
                "  (from {}pub.txt: the hotkey is encrypted; set {} to check it)",
                paths.hotkey,
                wallet::HOTKEY_PASSWORD_ENV
            ),
            "phrase_env" => format!(
                "  (from {}, which chain commands sign with instead of the wallet's hotkey file)",
                af::chain::subtensor::HOTKEY_PHRASE_ENV
            ),
            _ => String::new(),
        };
        outln!("  hotkey {} {hotkey_address}{note}", paths.hotkey);
    }
    Ok(ExitCode::SUCCESS)
}

/// The hotkey from its secret where it can be opened; else, for an encrypted one with no
/// password to hand, from its public file, said so.
fn hotkey_from_files(paths: &WalletPaths) -> anyhow::Result<(String, &'static str)> {
    match wallet::load_hotkey(paths, Password::EnvOrPrompt) {
        Ok(keypair) => {
            // A public file beside it must name the same key.
            let file = paths.hotkeypub_file();
            if file.exists() {
                let claimed = wallet::public_from_json(&file, &wallet::read_keyfile(&file)?)?;
                anyhow::ensure!(
                    claimed == keypair.public_key(),
                    "{} names {}, not the hotkey's own key {}",
                    file.display(),
                    ss58(&claimed),
                    ss58(&keypair.public_key())
                );
            }
            Ok((ss58(&keypair.public_key()), "secret"))
        }
        Err(WalletError::PasswordNeeded { .. }) => {
            let file = paths.hotkeypub_file();
            Ok((ss58(&wallet::public_from_json(&file, &wallet::read_keyfile(&file)?)?), "public_file"))
        }
        Err(error) => Err(error.into()),
    }
}
