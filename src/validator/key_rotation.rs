//! `af key rotate` on a validator's data directory (ledger-spec/16): the old key signs the
//! last block of its log, naming the new key; the new key signs block 0 of its own log,
//! naming that block; the new key replaces the old in the key file, and the signing record
//! follows it. Each step is durable before the next, and each is skipped when already
//! done, so a crash between any two is finished by running the command again. The old
//! key's secret is gone once the key file is replaced: it can sign nothing more here, and
//! what a thief signs with it past the rotation is a forgery every store refuses.

use crate::bytes::ValidatorKey;
use crate::ledger::block::{self, Tip};
use crate::ledger::keys::{KeyError, KEY_FILE};
use crate::ledger::rotation::{KeyRotated, KeySucceeded, RotatedAt};
use crate::ledger::signed::{self, SignedRecord, SIGNED_FILE};
use crate::ledger::{AppendError, Event, LedgerKey, OpenLogError, OwnLog, StoreError};
use crate::protocol::Protocol;
use std::path::{Path, PathBuf};

/// The new key, written before the old key signs anything naming it: a rotation that
/// stopped half way finds it here (ledger-spec/16).
pub const NEXT_KEY_FILE: &str = "validator.key.next";

/// The tag of `KeyRotated`: a protocol version has it from its activation on.
const KEY_ROTATED_TAG: u32 = 11;

#[derive(Debug, thiserror::Error)]
pub enum RotateError {
    #[error("{0}")]
    Open(#[from] OpenLogError),
    #[error("{0}")]
    Key(#[from] KeyError),
    #[error("{0}")]
    Append(#[from] AppendError),
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Signed(#[from] signed::SignedError),
    #[error("{0}")]
    Block(#[from] block::BlockError),
    #[error("no ledger key in {0}: there is no log to rotate (a validator's first start makes its key)")]
    NoKey(PathBuf),
    #[error(
        "key rotation is a rule of protocol version 3 (ledger-spec/15), which {table} activates at chain block {activation}; this log's newest chain block is {seen}. Nothing was signed; rotate once the log has recorded a block at or past it (or give --chain-block)"
    )]
    NotYet { table: String, activation: u64, seen: u64 },
    #[error("{0}")]
    OtherKey(Box<OtherKey>),
    #[error("cannot {doing} {path}: {source}")]
    Io {
        doing: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A rotation to another key than the one this directory holds next.
#[derive(Debug, thiserror::Error)]
#[error(
    "the log of {old} already rotated to {named} at height {height}, but {next} holds {held}: this directory's rotation went to another key; put back {named}'s key file as {key_file}"
)]
pub struct OtherKey {
    pub old: ValidatorKey,
    pub named: ValidatorKey,
    pub height: u64,
    pub next: PathBuf,
    pub held: ValidatorKey,
    pub key_file: PathBuf,
}

/// What a rotation did.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Rotation {
    pub old_key: ValidatorKey,
    pub new_key: ValidatorKey,
    /// The old log's rotation block: its last.
    pub rotated_at: u64,
    pub rotation_hash: crate::bytes::Hash32,
    /// The chain block the rotation records.
    pub chain_block: u64,
    /// The new log's block 0.
    pub first_hash: crate::bytes::Hash32,
    /// Whether an earlier run had done part of it.
    pub resumed: bool,
}

/// Rotates the ledger key of the data directory `data`, whose validator is stopped.
/// `chain_block` is the least chain block to record (0: the log's newest); `protocol` is
/// the table the validator plays by, which must have key rotation at that block.
pub fn rotate(data: &Path, protocol: &Protocol, chain_block: u64, now_ms: u64) -> Result<Rotation, RotateError> {
    let (key_path, next_path) = (data.join(KEY_FILE), data.join(NEXT_KEY_FILE));
    if !key_path.exists() {
        return Err(RotateError::NoKey(data.to_owned()));
    }
    let log = OwnLog::open(data)?;
    let old = log.validator();
    let (new, resumed) = if next_path.exists() {
        (LedgerKey::load(&next_path)?, true)
    } else {
        let key = LedgerKey::generate()?;
        key.write_new(&next_path)?;
        (key, false)
    };
    let at = match log.store.rotation(&old)? {
        Some(at) if at.new_key == new.validator() => at,
        Some(at) => {
            return Err(RotateError::OtherKey(Box::new(OtherKey {
                old,
                named: at.new_key,
                height: at.height,
                next: next_path,
                held: new.validator(),
                key_file: key_path,
            })))
        }
        None => {
            let seen = super::state::load(&log.store, &old, &crate::evaluation::ratio::DEFAULT_RATIO_PARAMS)?
                .latest_chain_block;
            let chain_block = chain_block.max(seen);
            if protocol.version_at(chain_block).refuses_kind(KEY_ROTATED_TAG).is_some() {
                let activation = protocol
                    .versions()
                    .iter()
                    .find(|v| v.refuses_kind(KEY_ROTATED_TAG).is_none())
                    .map_or(u64::MAX, |v| v.activation_block);
                let _ = std::fs::remove_file(&next_path); // nothing names it yet
                return Err(RotateError::NotYet { table: protocol.network.clone(), activation, seen: chain_block });
            }
            let rotated = Event::KeyRotated(KeyRotated { new_key: new.validator(), chain_block });
            log.append(vec![rotated], now_ms)?;
            log.store.rotation(&old)?.expect("the store records the rotation block it stored")
        }
    };
    let first = match log.store.tip(&new.validator())? {
        Some(tip) => tip,
        None => {
            let succeeded = Event::KeySucceeded(KeySucceeded {
                old_key: old,
                old_height: at.height,
                old_hash: at.hash,
                chain_block: at.chain_block,
            });
            let sealed = block::seal(new.signing_key(), None, now_ms, vec![succeeded])?;
            log.store.append(&sealed)?;
            sealed.tip()
        }
    };
    drop(log);
    // The new key takes the key file's place in one rename; the old secret goes with it.
    let io = |doing: &'static str, path: &Path| {
        let path = path.to_owned();
        move |source| RotateError::Io { doing, path, source }
    };
    std::fs::rename(&next_path, &key_path).map_err(io("replace the key file with", &next_path))?;
    let dir = key_path.parent().unwrap_or(Path::new("."));
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io("sync", dir))?;
    signed::write(&data.join(SIGNED_FILE), &SignedRecord::of(new.validator(), &first))?;
    Ok(done(old, new.validator(), &at, first, resumed))
}

fn done(old: ValidatorKey, new: ValidatorKey, at: &RotatedAt, first: Tip, resumed: bool) -> Rotation {
    Rotation {
        old_key: old,
        new_key: new,
        rotated_at: at.height,
        rotation_hash: at.hash,
        chain_block: at.chain_block,
        first_hash: first.hash,
        resumed,
    }
}

/// Where `af key rotate` asks a running validator to rotate: the validator stops its run
/// at the next safe point (its writer sealed and durable), rotates, answers in
/// [`ANSWER_FILE`] and starts again under the new key.
pub const REQUEST_FILE: &str = "validator.rotate";
/// The running validator's answer to a [`REQUEST_FILE`]: `{"rotated": Rotation}` or
/// `{"error": "..."}`.
pub const ANSWER_FILE: &str = "validator.rotate.answer";

/// Completes once `data` holds a rotation request: a stop reason for a running validator.
pub async fn requested(data: PathBuf) -> &'static str {
    loop {
        if data.join(REQUEST_FILE).exists() {
            return "a key rotation request";
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// Whether `data` holds a rotation request.
pub fn is_requested(data: &Path) -> bool {
    data.join(REQUEST_FILE).exists()
}

/// Rotates on a request, the validator stopped, and answers it: the answer is written
/// whole before the request goes, so the asker never reads half of one. The outcome is
/// logged: the validator starts again under the new key, or the same one if it failed.
pub fn answer(data: &Path, protocol: &Protocol, now_ms: u64) -> Result<Rotation, String> {
    let result = rotate(data, protocol, 0, now_ms).map_err(|e| e.to_string());
    match &result {
        Ok(done) => tracing::info!(
            event = "key_rotated",
            old_key = %done.old_key,
            new_key = %done.new_key,
            rotated_at = done.rotated_at,
            "the ledger key was rotated at block {} of the old log; starting again under {}",
            done.rotated_at,
            done.new_key
        ),
        Err(error) => tracing::warn!(
            event = "key_not_rotated",
            error = %error,
            "the key rotation asked for failed; starting again under the same key"
        ),
    }
    let body = match &result {
        Ok(done) => serde_json::json!({ "rotated": done }),
        Err(error) => serde_json::json!({ "error": error }),
    };
    let temp = data.join(format!(".{ANSWER_FILE}.tmp"));
    let written = std::fs::write(&temp, body.to_string()).and_then(|()| std::fs::rename(&temp, data.join(ANSWER_FILE)));
    if let Err(error) = written {
        tracing::warn!(event = "rotation_unanswered", error = %error, "could not answer the rotation request");
    }
    let _ = std::fs::remove_file(data.join(REQUEST_FILE));
    result
}

/// Asks the validator running on `data` to rotate, and waits up to `wait` for its answer.
pub fn request(data: &Path, wait: std::time::Duration) -> Result<Rotation, String> {
    let (request, answer) = (data.join(REQUEST_FILE), data.join(ANSWER_FILE));
    let _ = std::fs::remove_file(&answer);
    std::fs::write(&request, format!("{}\n", std::process::id()))
        .map_err(|e| format!("cannot write the request {}: {e}", request.display()))?;
    let deadline = std::time::Instant::now() + wait;
    while std::time::Instant::now() < deadline {
        if let Ok(text) = std::fs::read_to_string(&answer) {
            let _ = std::fs::remove_file(&answer);
            let value: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| format!("the validator's answer is not JSON: {e}"))?;
            if let Some(error) = value.get("error").and_then(|e| e.as_str()) {
                return Err(error.to_string());
            }
            return serde_json::from_value::<Rotation>(value["rotated"].clone())
                .map_err(|e| format!("the validator's answer is not a rotation: {e}"));
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let _ = std::fs::remove_file(&request);
    Err(format!(
        "the validator on {} did not answer within {} s (is it running? a match's last challenge can take a while): nothing was asked of it any more",
        data.display(),
        wait.as_secs()
    ))
}
