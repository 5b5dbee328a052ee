//! The signing record: beside the ledger key, the newest block of its own chain that the
//! key is known to have stored (height and hash). A store can be emptied, replaced or
//! restored from an older copy behind the validator's back (a failed copy, a restore, a
//! 0-byte file); a writer that then signed "the next block" on what the store holds would
//! sign a second block at a height its peers already hold from it: proof of equivocation,
//! and vTrust 0 for good. So a writer opens its chain only when the store holds the
//! recorded block, the way CometBFT's `priv_validator_state.json` keeps a signer from
//! signing below its last height after a data directory is lost.
//!
//! File (text, one JSON object, written whole: temporary file, fsync, rename, folder
//! fsync): `{"type":"af-signed-record","version":1,"validator":"<64 hex>",
//! "height":<u64>,"hash":"<64 hex>"}`. It lags the store by at most [`RECORD_EVERY`]
//! (written after a commit, never before), so it only ever understates what was signed.

use crate::bytes::{Hash32, ValidatorKey};
use crate::ledger::{Store, StoreError, Tip};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The record's file name, in the data directory beside [`super::keys::KEY_FILE`].
pub const SIGNED_FILE: &str = "validator.signed";
const RECORD_TYPE: &str = "af-signed-record";
/// The record is rewritten after a commit at most this often (and always after the first
/// block): one extra fsync a second at the most, against one per commit.
pub const RECORD_EVERY: std::time::Duration = std::time::Duration::from_secs(1);
const MAX_RECORD_BYTES: u64 = 4096;

#[derive(Debug, thiserror::Error)]
pub enum SignedError {
    #[error("cannot {doing} the signing record {path}: {source}")]
    Io {
        doing: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the signing record {path} is unreadable ({reason}); it says how far this key's chain went, so nothing will be signed until it is whole: restore it, or see docs/operator.md, \"A store that lost our chain is never signed on\"")]
    Invalid { path: PathBuf, reason: String },
    #[error("the signing record {path} belongs to validator {recorded}, not to this key ({key}): the key file was replaced; put back the key that signed this data directory's chain")]
    OtherKey { path: PathBuf, recorded: ValidatorKey, key: ValidatorKey },
    #[error("{0}")]
    Behind(Box<Behind>),
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// A store that does not hold the block the record names.
#[derive(Debug, thiserror::Error)]
#[error(
    "the store {store} {holds}, but this key ({validator}) stored its chain up to height {height} (block {hash}; the signing record {record} says so): the store was emptied, replaced or restored from an older copy. \
Signing now would put a second block at a height peers already hold from us, which is proof of equivocation (vTrust 0). Nothing was signed. \
Bring the chain back first: `af ledger import --data {data} --file EXPORT` (a block export of this chain), or `af mirror --from URL --data {data} --validator {validator}` (a peer or an archive that holds it); then start again. \
If no block of this key ever left this machine, remove {record} to start a new chain; otherwise use a new key (`af key generate`)"
)]
pub struct Behind {
    pub store: PathBuf,
    pub data: String,
    pub holds: String,
    pub validator: ValidatorKey,
    pub height: u64,
    pub hash: Hash32,
    pub record: PathBuf,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
struct RecordFile {
    #[serde(rename = "type")]
    kind: String,
    version: u32,
    validator: String,
    height: u64,
    hash: String,
}

/// What the record holds: one block of the key's own chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignedRecord {
    pub validator: ValidatorKey,
    pub height: u64,
    pub hash: Hash32,
}

impl SignedRecord {
    pub fn of(validator: ValidatorKey, tip: &Tip) -> SignedRecord {
        SignedRecord { validator, height: tip.height, hash: tip.hash }
    }
}

/// Reads the record at `path`: `None` if there is none; an error (never a guess) if it is
/// there but not whole.
pub fn read(path: &Path) -> Result<Option<SignedRecord>, SignedError> {
    let invalid = |reason: String| SignedError::Invalid { path: path.into(), reason };
    // A pipe or a device there would block the open or never end: only a regular file
    // is read (the key file is held to the same rule).
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() => return Err(invalid("not a regular file".into())),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(SignedError::Io { doing: "inspect", path: path.into(), source }),
    }
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(SignedError::Io { doing: "open", path: path.into(), source }),
    };
    let mut text = String::new();
    match file.take(MAX_RECORD_BYTES + 1).read_to_string(&mut text) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => return Err(invalid("not UTF-8 text".into())),
        Err(source) => return Err(SignedError::Io { doing: "read", path: path.into(), source }),
    }
    if text.len() as u64 > MAX_RECORD_BYTES {
        return Err(invalid(format!("larger than {MAX_RECORD_BYTES} bytes")));
    }
    if text.is_empty() {
        return Err(invalid("empty".into()));
    }
    let file: RecordFile = serde_json::from_str(&text).map_err(|e| invalid(format!("not the expected JSON: {e}")))?;
    if file.kind != RECORD_TYPE || file.version != 1 {
        return Err(invalid(format!(
            "type {:?} version {}, expected {RECORD_TYPE:?} version 1",
            file.kind, file.version
        )));
    }
    let validator = ValidatorKey::from_hex(&file.validator).map_err(|e| invalid(format!("validator: {e}")))?;
    let hash = Hash32::from_hex(&file.hash).map_err(|e| invalid(format!("hash: {e}")))?;
    Ok(Some(SignedRecord { validator, height: file.height, hash }))
}

/// Writes `record` to `path` whole: a crash leaves the old record or the new one.
pub fn write(path: &Path, record: &SignedRecord) -> Result<(), SignedError> {
    let io = |doing: &'static str| move |source| SignedError::Io { doing, path: path.into(), source };
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let temp = dir.join(format!(".{SIGNED_FILE}.tmp-{}", std::process::id()));
    let mut text = serde_json::to_string(&RecordFile {
        kind: RECORD_TYPE.into(),
        version: 1,
        validator: record.validator.to_hex(),
        height: record.height,
        hash: record.hash.to_hex(),
    })
    .expect("a record serializes");
    text.push('\n');
    std::fs::File::create(&temp)
        .and_then(|mut file| file.write_all(text.as_bytes()).and_then(|()| file.sync_all()))
        .map_err(io("write"))?;
    std::fs::rename(&temp, path).map_err(io("replace"))?;
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io("sync the folder of"))
}

/// Checks that `store` holds `validator`'s chain at least up to the record at `path`, the
/// same block at the recorded height; returns the store's tip of that chain (what a
/// writer signs on). With no record, the store is taken as it is (a new key, or a data
/// directory from before records) and a record of its tip, if any, is written now.
/// Before a store is opened for writing: a record of ours with no store file, or a
/// 0-byte one, is refused at once, so the refusal leaves no fresh empty store behind
/// (which a later `af ledger verify` would call whole).
pub fn check_store_file(path: &Path, store_file: &Path, validator: &ValidatorKey) -> Result<(), SignedError> {
    let holds = match std::fs::metadata(store_file) {
        Ok(meta) if meta.len() > 0 => return Ok(()),
        Ok(_) => "is 0 bytes",
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "is missing",
        Err(_) => return Ok(()), // opening it says what is wrong
    };
    let Some(record) = read(path)? else { return Ok(()) };
    Err(refusal(path, &record, store_file, validator, holds.to_string()))
}

/// Why a store that does not hold `record`'s block is not signed on: another key's
/// record, or a store behind it (`holds` says what the store holds instead).
fn refusal(path: &Path, record: &SignedRecord, store: &Path, validator: &ValidatorKey, holds: String) -> SignedError {
    if record.validator != *validator {
        return SignedError::OtherKey { path: path.into(), recorded: record.validator, key: *validator };
    }
    SignedError::Behind(Box::new(Behind {
        store: store.to_owned(),
        data: store.parent().map_or(".".into(), |d| d.display().to_string()),
        holds,
        validator: *validator,
        height: record.height,
        hash: record.hash,
        record: path.to_owned(),
    }))
}

pub fn check_store(path: &Path, store: &Store, validator: &ValidatorKey) -> Result<Option<Tip>, SignedError> {
    let tip = store.tip(validator)?;
    let Some(record) = read(path)? else {
        if let Some(tip) = tip {
            write(path, &SignedRecord::of(*validator, &tip))?;
        }
        return Ok(tip);
    };
    let behind = |holds: String| refusal(path, &record, store.path(), validator, holds);
    if record.validator != *validator {
        // A rotation that stopped between the new log's block 0 and the record
        // (ledger-spec/16): the old key's log ends in a rotation to this key, at or past the
        // record, and this key's log has begun; the record moves to this key.
        let rotated = store.rotation(&record.validator)?;
        if let (Some(at), Some(tip)) = (rotated, tip) {
            if at.new_key == *validator && at.height >= record.height {
                write(path, &SignedRecord::of(*validator, &tip))?;
                return Ok(Some(tip));
            }
        }
        return Err(behind(String::new())); // another key's record
    }
    let Some(stored) = tip else {
        return Err(behind("holds none of our chain".into()));
    };
    if stored.height < record.height {
        return Err(behind(format!("holds our chain only up to height {}", stored.height)));
    }
    let at_record = if stored.height == record.height {
        Some(stored.hash)
    } else {
        store.signed_headers(validator, record.height, record.height)?.first().map(|(header, _)| header.hash())
    };
    if at_record != Some(record.hash) {
        return Err(behind(format!(
            "holds another block at height {} ({})",
            record.height,
            at_record.map_or("missing".into(), |h| h.to_hex())
        )));
    }
    if stored.height > record.height {
        write(path, &SignedRecord::of(*validator, &stored))?;
    }
    Ok(Some(stored))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::{Event, LedgerKey, OwnLog};

    /// A chain of `blocks` blocks of the key [4; 32]; `time` tells two histories apart.
    fn chain(dir: &Path, time: u64, blocks: u64) -> OwnLog {
        let log = OwnLog::new(Store::create(dir).unwrap(), LedgerKey::from_seed([4; 32]));
        for height in 0..blocks {
            log.append(events(&log, height), time + height).unwrap();
        }
        log
    }

    fn events(log: &OwnLog, height: u64) -> Vec<Event> {
        crate::ledger::demo::demo_events(&log.validator(), height, 1, 64)
    }

    #[test]
    fn another_chain_at_the_recorded_height_is_refused_and_a_longer_one_moves_the_record() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let ours = chain(a.path(), 1_000, 3);
        let validator = ours.validator();
        let record = a.path().join(SIGNED_FILE);
        assert_eq!(check_store(&record, &ours.store, &validator).unwrap().unwrap().height, 2);
        assert_eq!(read(&record).unwrap().unwrap().height, 2, "no record: the store's tip is recorded");

        // The same key's other history, as long or longer: not the recorded block.
        let other = chain(b.path(), 5_000, 4);
        let refused = check_store(&record, &other.store, &validator).unwrap_err();
        assert!(matches!(&refused, SignedError::Behind(b) if b.height == 2), "{refused}");
        assert!(refused.to_string().contains("another block at height 2"), "{refused}");

        // Our own chain grown by one: accepted, and the record follows it.
        ours.append(events(&ours, 3), 9_000).unwrap();
        assert_eq!(check_store(&record, &ours.store, &validator).unwrap().unwrap().height, 3);
        assert_eq!(read(&record).unwrap().unwrap().height, 3);
    }

    /// What stands at the record's path is refused by name unless it is a whole record:
    /// a folder (or a pipe: never opened), bytes that are not text, an empty file.
    #[test]
    fn only_a_whole_record_in_a_regular_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SIGNED_FILE);
        assert!(read(&path).unwrap().is_none(), "none yet");
        std::fs::create_dir(&path).unwrap();
        assert!(read(&path).unwrap_err().to_string().contains("not a regular file"));
        std::fs::remove_dir(&path).unwrap();
        std::fs::write(&path, [0xff, 0xfe, 0x00]).unwrap();
        assert!(read(&path).unwrap_err().to_string().contains("not UTF-8"));
        std::fs::write(&path, b"").unwrap();
        assert!(read(&path).unwrap_err().to_string().contains("empty"));
    }
}
