//! Our hotkey swapped on chain (subtensor's `swap_hotkey`; ledger-spec/13, "Hotkey
//! swaps"): the uid, registration block and permit our hotkey held now belong to another
//! hotkey. The anchoring notices it (our hotkey holds no uid, and the uid it held is
//! another hotkey's with the same registration), records the swap in the data directory,
//! and `af validate` stops its run and starts again under the new hotkey, keeping its log
//! and ledger key; it commits the ledger key under the new hotkey, so peers follow it
//! there. A later start configured with the old hotkey takes the new one, and says so.

use crate::chain::{ChainSpec, Neuron};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The record of the last swap of this data directory's hotkey.
pub const SWAP_FILE: &str = "validator.hotkey-swap";

/// A swap as the chain showed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Swap {
    pub old: String,
    pub new: String,
    pub uid: u16,
    /// The registration block the uid kept through the swap.
    pub registration_block: u64,
}

/// The swap `neurons` show, if the uid `ours` (our neuron, as last seen registered) is
/// now another hotkey's with the same registration block: a new registration of the uid
/// would have a later one (a deregistration, not a swap).
pub fn detect(neurons: &[Neuron], ours: &Neuron) -> Option<Swap> {
    let now = neurons.iter().find(|n| n.uid == ours.uid)?;
    (now.hotkey != ours.hotkey && now.registration_block == ours.registration_block).then(|| Swap {
        old: ours.hotkey.clone(),
        new: now.hotkey.clone(),
        uid: ours.uid,
        registration_block: ours.registration_block,
    })
}

/// Our hotkey's swap as the chain shows it now, if the uid `before` held is another
/// hotkey's with the same registration (a read that fails is no swap: the anchoring
/// then says the deregistration as such).
pub async fn seen(chain: &dyn crate::chain::Chain, before: &Neuron) -> Option<Swap> {
    let neurons = chain.neurons().await.ok()?;
    detect(&neurons, before)
}

/// Writes the swap whole beside the store (temporary file, rename).
pub fn record(data: &Path, swap: &Swap) -> std::io::Result<()> {
    let temp = data.join(format!(".{SWAP_FILE}.tmp"));
    std::fs::write(&temp, serde_json::to_vec(swap).expect("a swap serializes"))?;
    std::fs::rename(&temp, data.join(SWAP_FILE))
}

/// The recorded swap, if any (an unreadable record is none: it only ever helps a start).
pub fn read(data: &Path) -> Option<Swap> {
    let bytes = std::fs::read(data.join(SWAP_FILE)).ok().filter(|b| b.len() <= 4096)?;
    serde_json::from_slice(&bytes).ok()
}

/// Completes once the data directory records a swap other than `known`: a stop reason.
pub async fn recorded(data: PathBuf, known: Option<Swap>) -> &'static str {
    loop {
        if read(&data).is_some_and(|swap| Some(&swap) != known.as_ref()) {
            return "our hotkey's swap on chain";
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// Why a recorded swap cannot be followed.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error(
        "our hotkey {old} was swapped to {new} on chain ({record}), but no hotkey of wallet {wallet} in {dir} is {new}: put the new hotkey's key file there (btcli wallet regen-hotkey), or set [chain] hotkey to it"
    )]
    NoKey { old: String, new: String, record: PathBuf, wallet: String, dir: PathBuf },
}

/// `spec` with the hotkey a recorded swap moved it to, when it names the swapped-away
/// hotkey: on a local chain the new hotkey itself; with a wallet, the wallet's hotkey
/// whose public key is the new one. Returns the swap it followed, and logs it: the
/// operator's config still names the old hotkey.
pub fn follow(data: &Path, spec: &mut ChainSpec) -> Result<Option<Swap>, FollowError> {
    let followed = follow_quietly(data, spec)?;
    if let Some(swap) = &followed {
        tracing::warn!(
            event = "hotkey_followed",
            old = %swap.old,
            new = %swap.new,
            "our hotkey {} was swapped to {} on chain ({}): running as {}; set [chain] hotkey to it",
            swap.old,
            swap.new,
            data.join(SWAP_FILE).display(),
            spec.hotkey.as_deref().unwrap_or_default()
        );
    }
    Ok(followed)
}

fn follow_quietly(data: &Path, spec: &mut ChainSpec) -> Result<Option<Swap>, FollowError> {
    let Some(swap) = read(data) else { return Ok(None) };
    let wallet = spec.wallet.is_some() || spec.wallets_dir.is_some();
    if !wallet {
        if spec.hotkey.as_deref() != Some(swap.old.as_str()) {
            return Ok(None);
        }
        spec.hotkey = Some(swap.new.clone());
        return Ok(Some(swap));
    }
    // A wallet's hotkey is a name: ours is the swapped one when its key is the old hotkey.
    let ours = crate::chain::local_hotkey(spec).ok().flatten();
    if ours.as_deref() != Some(swap.old.as_str()) {
        return Ok(None);
    }
    let paths = crate::chain::wallet::WalletPaths::new(spec.wallets_dir.clone(), spec.wallet.as_deref(), None);
    match crate::chain::wallet::hotkey_named(&paths, &swap.new) {
        Some(name) => {
            spec.hotkey = Some(name);
            Ok(Some(swap))
        }
        None => Err(FollowError::NoKey {
            old: swap.old,
            new: swap.new,
            record: data.join(SWAP_FILE),
            wallet: paths.wallet,
            dir: paths.dir,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn neuron(uid: u16, hotkey: &str, registration_block: u64) -> Neuron {
        Neuron { uid, hotkey: hotkey.into(), registration_block, validator_permit: true }
    }

    #[test]
    fn a_swap_keeps_the_uid_and_its_registration_and_a_new_registration_is_no_swap() {
        let ours = neuron(3, "old", 40);
        assert_eq!(
            detect(&[neuron(3, "new", 40)], &ours),
            Some(Swap { old: "old".into(), new: "new".into(), uid: 3, registration_block: 40 })
        );
        assert_eq!(detect(&[neuron(3, "newcomer", 90)], &ours), None, "deregistered: the uid was registered anew");
        assert_eq!(detect(&[neuron(3, "old", 40)], &ours), None);
        assert_eq!(detect(&[], &ours), None);
    }

    #[test]
    fn a_recorded_swap_moves_a_local_hotkey_once_and_leaves_others_alone() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = ChainSpec { hotkey: Some("old".into()), ..ChainSpec::default() };
        assert_eq!(follow(dir.path(), &mut spec).unwrap(), None, "no record");
        record(dir.path(), &Swap { old: "old".into(), new: "new".into(), uid: 3, registration_block: 40 }).unwrap();
        assert!(follow(dir.path(), &mut spec).unwrap().is_some());
        assert_eq!(spec.hotkey.as_deref(), Some("new"));
        assert_eq!(follow(dir.path(), &mut spec).unwrap(), None, "the new hotkey is not the swapped one");
        let mut other = ChainSpec { hotkey: Some("else".into()), ..ChainSpec::default() };
        assert_eq!(follow(dir.path(), &mut other).unwrap(), None);
        assert_eq!(other.hotkey.as_deref(), Some("else"));
    }
}
