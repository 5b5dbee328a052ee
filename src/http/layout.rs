//! The HTTP layout of logs (ledger-spec/11-http.md), pure: the paths, the entry-bundle
//! bytes and their bounded incremental reader, and the JSON of the log list. The node's
//! server, `af ledger publish` and `af mirror` all go through here, so a published
//! site and a running node serve byte-identical files at identical paths.
//!
//! Following C2SP tlog-tiles, a chain's blocks are served in bundles of [`TILE_WIDTH`]
//! consecutive blocks at `tile/entries/<N>`, a partial bundle of the last `W < 16`
//! blocks at `tile/entries/<N>.p/<W>`, with `N` in tlog-tiles' `x001/x234/067` form.
//! A full bundle never changes, so it can be cached forever.
//!
//! The width is 16, not tlog-tiles' 256: an entry here is a whole block of up to 256
//! transcripts (typically 100 to 300 KB), and a reader following the tip re-fetches the
//! growing partial bundle; 256 such blocks would make that tens of megabytes.

use crate::bytes::{Hash32, ValidatorKey};
use crate::limits::MAX_BLOCK_BYTES;
use serde::{Deserialize, Serialize};

/// Blocks per full bundle (see the module comment for why not 256).
pub const TILE_WIDTH: u64 = 16;
/// Every path of the layout is below this one.
pub const ROOT: &str = "af/v1";
/// The log list's `format` field.
pub const LOG_LIST_FORMAT: &str = "af-logs/v1";
/// The most chains a log list may name, and its largest accepted size.
pub const MAX_LOGS: usize = 4096;
pub const MAX_LOG_LIST_BYTES: u64 = 1024 * 1024;
/// The largest signed-header document (`tip`) a reader accepts.
pub const MAX_TIP_BYTES: u64 = 16 * 1024;

#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum LayoutError {
    #[error("bundle record {record} claims {n_bytes} bytes, over the block limit of {MAX_BLOCK_BYTES}")]
    TooLarge { record: u64, n_bytes: u64 },
    #[error("bundle ends after {records} of its {width} blocks (truncated)")]
    Truncated { records: u64, width: u64 },
    #[error("bundle continues past its {width} blocks")]
    TooLong { width: u64 },
    #[error("bundle width {0} is not in 1..={TILE_WIDTH}")]
    Width(u64),
    #[error("not a tile index path: {0:?}")]
    TileIndex(String),
}

/// `N` as tlog-tiles encodes tile indexes: 3-digit path elements, all but the last
/// prefixed with `x` (1234067 is `x001/x234/067`).
pub fn tile_index_path(mut n: u64) -> String {
    let mut parts = vec![format!("{:03}", n % 1000)];
    n /= 1000;
    while n > 0 {
        parts.push(format!("x{:03}", n % 1000));
        n /= 1000;
    }
    parts.reverse();
    parts.join("/")
}

/// The inverse of [`tile_index_path`], refusing every other spelling (so one index has
/// one path, and a cache never holds two copies of a bundle).
pub fn parse_tile_index(path: &str) -> Result<u64, LayoutError> {
    let bad = || LayoutError::TileIndex(path.chars().take(64).collect());
    let parts: Vec<&str> = path.split('/').collect();
    if parts.len() > 7 {
        return Err(bad());
    }
    let mut n: u64 = 0;
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let digits = if last { *part } else { part.strip_prefix('x').ok_or_else(bad)? };
        if digits.len() != 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let value: u64 = digits.parse().map_err(|_| bad())?;
        n = n.checked_mul(1000).and_then(|n| n.checked_add(value)).ok_or_else(bad)?;
        // A leading element of zero would give the same index a second path.
        if i == 0 && !last && value == 0 {
            return Err(bad());
        }
    }
    Ok(n)
}

/// The path (below the site root) of a chain's directory.
pub fn log_dir(validator: &ValidatorKey) -> String {
    format!("{ROOT}/log/{validator}")
}

/// Transcript entries per page of a miner's pages (`miner_entries_path`).
pub const MINER_PAGE_ENTRIES: usize = 20;

/// Where page `page` (from 0) of a miner's transcript entries sits on a published site:
/// the hotkey by its blake3 hash in hex, since a hotkey (up to 256 bytes of any text) is
/// not a safe file name. The page is entries `page * MINER_PAGE_ENTRIES` onward, in the
/// node API's form (`{"entries": [...], "offset": O, "total": T}`).
pub fn miner_entries_path(hotkey: &str, page: usize) -> String {
    format!("{ROOT}/miner/{}/entries/{page}", blake3::hash(hotkey.as_bytes()).to_hex())
}

/// A published miner's matches and the pages of its entries holding each:
/// `{"matches": [{"validator", "match_id", "pages": [first, last]}, ...]}`, in page order.
pub fn miner_matches_path(hotkey: &str) -> String {
    format!("{ROOT}/miner/{}/matches", blake3::hash(hotkey.as_bytes()).to_hex())
}

pub fn log_list_path() -> String {
    format!("{ROOT}/logs")
}

pub fn tip_path(validator: &ValidatorKey) -> String {
    format!("{}/tip", log_dir(validator))
}

pub fn checkpoint_path(validator: &ValidatorKey) -> String {
    format!("{}/checkpoint", log_dir(validator))
}

/// The bundle of tile `n` with `width` blocks (`TILE_WIDTH` for a full one).
pub fn bundle_path(validator: &ValidatorKey, n: u64, width: u64) -> String {
    let base = format!("{}/tile/entries/{}", log_dir(validator), tile_index_path(n));
    if width == TILE_WIDTH {
        base
    } else {
        format!("{base}.p/{width}")
    }
}

/// The bundles that hold heights `from..size` of a chain of `size` blocks: every full
/// tile, then the partial one for the rest. Each is `(n, width)`.
pub fn bundles_for(from: u64, size: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut n = from / TILE_WIDTH;
    while n * TILE_WIDTH < size {
        out.push((n, (size - n * TILE_WIDTH).min(TILE_WIDTH)));
        n += 1;
    }
    out
}

/// One bundle record: the block's length (u32 LE) then its bytes, as in ledger-spec/08.
pub fn push_record(out: &mut Vec<u8>, block: &[u8]) {
    out.extend_from_slice(&(block.len() as u32).to_le_bytes());
    out.extend_from_slice(block);
}

/// Reads a bundle of `width` records as its bytes arrive in pieces of any size. It holds
/// at most one record (bounded by the block limit) and refuses a record over the limit,
/// a bundle that ends early, and any byte after the last record, as soon as it can.
pub struct BundleReader {
    width: u64,
    records: u64,
    buffer: Vec<u8>,
    /// What broke the body after records that were handed back whole: said by the next
    /// `push` or `finish`, so a reader keeps every good record before it.
    failed: Option<LayoutError>,
}

impl BundleReader {
    pub fn new(width: u64) -> Result<BundleReader, LayoutError> {
        if width == 0 || width > TILE_WIDTH {
            return Err(LayoutError::Width(width));
        }
        Ok(BundleReader { width, records: 0, buffer: Vec::new(), failed: None })
    }

    /// Adds bytes; returns the blocks completed by them, in order. Bytes that break the
    /// format after some of them completed blocks: those blocks are returned, and the
    /// error is the next call's.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<Vec<u8>>, LayoutError> {
        if let Some(failed) = &self.failed {
            return Err(failed.clone());
        }
        let mut blocks = Vec::new();
        match self.read(bytes, &mut blocks) {
            Ok(()) => Ok(blocks),
            Err(error) if blocks.is_empty() => Err(error),
            Err(error) => {
                self.failed = Some(error);
                Ok(blocks)
            }
        }
    }

    fn read(&mut self, mut bytes: &[u8], blocks: &mut Vec<Vec<u8>>) -> Result<(), LayoutError> {
        while !bytes.is_empty() {
            if self.records == self.width {
                return Err(LayoutError::TooLong { width: self.width });
            }
            if self.buffer.len() < 4 {
                let take = (4 - self.buffer.len()).min(bytes.len());
                self.buffer.extend_from_slice(&bytes[..take]);
                bytes = &bytes[take..];
                if self.buffer.len() < 4 {
                    break;
                }
            }
            let n_bytes = u64::from(u32::from_le_bytes(self.buffer[..4].try_into().expect("4 bytes")));
            if n_bytes > MAX_BLOCK_BYTES {
                return Err(LayoutError::TooLarge { record: self.records, n_bytes });
            }
            let have = (self.buffer.len() - 4) as u64;
            let take = ((n_bytes - have) as usize).min(bytes.len());
            self.buffer.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if (self.buffer.len() - 4) as u64 == n_bytes {
                let mut block = std::mem::take(&mut self.buffer);
                block.drain(..4);
                blocks.push(block);
                self.records += 1;
            }
        }
        Ok(())
    }

    /// The body ended: every record must be complete.
    pub fn finish(&self) -> Result<(), LayoutError> {
        if let Some(failed) = &self.failed {
            return Err(failed.clone());
        }
        if self.records == self.width && self.buffer.is_empty() {
            Ok(())
        } else {
            Err(LayoutError::Truncated { records: self.records, width: self.width })
        }
    }

    /// The most bytes a well-formed bundle of this width can have.
    pub fn max_bytes(&self) -> u64 {
        self.width * (4 + MAX_BLOCK_BYTES)
    }
}

/// `af/v1/logs`: the chains a server holds. Only a list of what to fetch: every size and
/// hash in it is checked against the chain's signed `tip` and its blocks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogList {
    pub format: String,
    /// The validator whose own log this server writes, if any.
    pub own: Option<ValidatorKey>,
    pub logs: Vec<LogSummary>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSummary {
    pub validator: ValidatorKey,
    /// Blocks held: the tip's height + 1.
    pub size: u64,
    pub tip_hash: Hash32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tile_indexes_follow_tlog_tiles_and_have_one_spelling() {
        assert_eq!(tile_index_path(0), "000");
        assert_eq!(tile_index_path(67), "067");
        assert_eq!(tile_index_path(1234067), "x001/x234/067");
        for n in [0, 1, 999, 1000, 1234067, u64::MAX] {
            assert_eq!(parse_tile_index(&tile_index_path(n)), Ok(n));
        }
        for bad in
            ["", "1", "0001", "x000/001", "001/002", "x1/002", "abc", "x001/x234/", "-01", "x18446744073709551/615"]
        {
            assert!(parse_tile_index(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bundles_cover_exactly_the_missing_heights() {
        assert_eq!(bundles_for(0, 1), vec![(0, 1)]);
        assert_eq!(bundles_for(0, 16), vec![(0, 16)]);
        assert_eq!(bundles_for(10, 40), vec![(0, 16), (1, 16), (2, 8)]);
        assert_eq!(bundles_for(17, 40), vec![(1, 16), (2, 8)]);
        assert_eq!(bundles_for(32, 32), vec![]);
    }

    #[test]
    fn the_reader_takes_any_split_and_refuses_bad_bodies() {
        let blocks: Vec<Vec<u8>> = (0..3u8).map(|i| vec![i; 5 + i as usize]).collect();
        let mut body = Vec::new();
        for b in &blocks {
            push_record(&mut body, b);
        }
        for piece in [1, 2, 3, 7, body.len()] {
            let mut reader = BundleReader::new(3).unwrap();
            let mut got = Vec::new();
            for chunk in body.chunks(piece) {
                got.extend(reader.push(chunk).unwrap());
            }
            reader.finish().unwrap();
            assert_eq!(got, blocks);
        }
        let mut reader = BundleReader::new(3).unwrap();
        reader.push(&body[..body.len() - 1]).unwrap();
        assert_eq!(reader.finish(), Err(LayoutError::Truncated { records: 2, width: 3 }));
        // Good records then more in one piece: the good records come back, the rest is
        // the next call's error (issue 73: the records before it were dropped with it).
        let mut reader = BundleReader::new(2).unwrap();
        assert_eq!(reader.push(&body).unwrap(), blocks[..2]);
        assert_eq!(reader.push(b""), Err(LayoutError::TooLong { width: 2 }));
        let mut reader = BundleReader::new(2).unwrap();
        let with_garbage = [&body[..], b"garbage"].concat();
        assert_eq!(reader.push(&with_garbage).unwrap().len(), 2);
        assert_eq!(reader.finish(), Err(LayoutError::TooLong { width: 2 }));
        let mut reader = BundleReader::new(1).unwrap();
        assert!(matches!(reader.push(&u32::MAX.to_le_bytes()), Err(LayoutError::TooLarge { .. })));
        assert_eq!(BundleReader::new(0).err(), Some(LayoutError::Width(0)));
        assert_eq!(BundleReader::new(17).err(), Some(LayoutError::Width(17)));
    }
}
