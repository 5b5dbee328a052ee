//! Opening a store file without trusting or changing it: a redb storage backend over a
//! file opened read-only, whose writes stay in memory, so that redb's full integrity check
//! (every page checksum of the committed trees) runs before anything in the file is
//! followed. A plain open trusts page pointers and lengths and can panic, hang or
//! allocate without bound on a changed byte; a checked open reports it as corruption.
//!
//! The backend takes shared locks where redb asks for exclusive ones: any number of
//! readers may check one file at once, and a running writer (which holds the file
//! exclusively) makes the open fail as "locked" instead of reading a moving file.

use redb::backends::FileBackend;
use redb::{BackendError, StorageBackend};
use std::fs::File;
use std::io;
use std::ops::Bound;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Most bytes redb may write into the in-memory overlay of a checked read-only open (its
/// integrity check commits once, and closing records the allocator state: both small).
const MAX_OVERLAY_BYTES: usize = 256 * 1024 * 1024;

#[derive(Debug)]
struct Overlay {
    /// Writes in the order they happened; a later write wins where two overlap.
    writes: Vec<(u64, Vec<u8>)>,
    n_bytes: usize,
    len: u64,
    /// The file's bytes are visible below this offset only: the smallest length ever set
    /// (bytes cut off and grown back read as zeros, as on a real file).
    file_visible: u64,
}

/// A read-only file as a redb backend: reads come from the file with the overlay's writes
/// laid on top; writes and length changes go to the overlay only; `sync_data` does nothing.
#[derive(Debug)]
pub struct ReadOnlyFile {
    inner: FileBackend,
    /// Read-locked by reads, so readers on several threads read the file side by side;
    /// write-locked only by the open's and close's writes into the overlay.
    overlay: RwLock<Overlay>,
}

impl ReadOnlyFile {
    pub fn new(file: File) -> io::Result<ReadOnlyFile> {
        let file_len = file.metadata()?.len();
        let inner = FileBackend::new(file).map_err(io::Error::other)?;
        let overlay = Overlay { writes: Vec::new(), n_bytes: 0, len: file_len, file_visible: file_len };
        Ok(ReadOnlyFile { inner, overlay: RwLock::new(overlay) })
    }

    fn overlay(&self) -> RwLockReadGuard<'_, Overlay> {
        // A poisoned overlay only means a reader panicked; its contents are still whole.
        self.overlay.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn overlay_mut(&self) -> RwLockWriteGuard<'_, Overlay> {
        self.overlay.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl StorageBackend for ReadOnlyFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.overlay().len)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let overlay = self.overlay();
        let end = offset.checked_add(out.len() as u64).ok_or_else(|| io::Error::other("read past 2^64"))?;
        if end > overlay.len {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end of the store file"));
        }
        // The part that lies inside the visible file comes from it; the rest is zero.
        let from_file = end.min(overlay.file_visible).saturating_sub(offset) as usize;
        if from_file > 0 {
            self.inner.read(offset, &mut out[..from_file])?;
        }
        out[from_file..].fill(0);
        for (at, data) in &overlay.writes {
            let write_end = at + data.len() as u64;
            if write_end <= offset || *at >= end {
                continue;
            }
            let lo = (*at).max(offset);
            let hi = write_end.min(end);
            out[(lo - offset) as usize..(hi - offset) as usize]
                .copy_from_slice(&data[(lo - at) as usize..(hi - at) as usize]);
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut overlay = self.overlay_mut();
        overlay.len = len;
        // Shrinking then growing again must read zeros, not the file's old bytes; writes
        // past the new end are cut off too.
        overlay.file_visible = overlay.file_visible.min(len);
        let mut freed = 0;
        for (at, data) in overlay.writes.iter_mut() {
            if *at >= len {
                freed += data.len();
                data.clear();
            } else if *at + data.len() as u64 > len {
                let keep = (len - *at) as usize;
                freed += data.len() - keep;
                data.truncate(keep);
            }
        }
        overlay.writes.retain(|(_, data)| !data.is_empty());
        overlay.n_bytes -= freed;
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut overlay = self.overlay_mut();
        if overlay.n_bytes + data.len() > MAX_OVERLAY_BYTES {
            return Err(io::Error::other("a read-only open wrote more than its in-memory limit"));
        }
        overlay.n_bytes += data.len();
        overlay.writes.push((offset, data.to_vec()));
        Ok(())
    }

    fn close(&self) -> io::Result<()> {
        self.inner.close()
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.try_lock_shared_range(start, end)
    }

    fn try_lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_shared_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.query_lock_range(start, end)
    }
}

/// redb's file header: a 9-byte magic, the "god byte" whose low bit names the primary
/// commit slot, then two 128-byte commit slots at offsets 64 and 192, each holding its
/// transaction id at byte 104 (redb 4.x, `tree_store/page_store/header.rs`).
const REDB_MAGIC: [u8; 9] = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];
pub const REDB_HEADER_BYTES: usize = 320;
const SLOT_OFFSETS: [usize; 2] = [64, 192];
/// Bits of redb's "god byte", the one after the magic.
const PRIMARY_BIT: u8 = 1;
const RECOVERY_REQUIRED: u8 = 2;
const TRANSACTION_ID_IN_SLOT: usize = 104;

/// Checks that the file is at least a redb header long and starts with redb's magic.
pub fn check_magic(header: &[u8]) -> Result<(), String> {
    if header.len() < REDB_HEADER_BYTES {
        return Err(format!("the file is {} bytes, shorter than a redb header", header.len()));
    }
    if header[..9] != REDB_MAGIC {
        return Err("the file does not start with redb's magic number".into());
    }
    Ok(())
}

/// Checks what redb's own checks cannot see: that the commit slot the header names as
/// current is the newer of the two. Both slots hold valid commits (the previous one is
/// kept for crash recovery), so a changed primary bit would silently show the log as it
/// was one commit earlier.
/// Checks the header's magic and reads its commit slots as redb's recovery reads them,
/// returning why the store needs recovery, if it does. A writer marks the file "recovery
/// required" while it has it open, so a file still marked was left by a writer that did
/// not close it (a crash, a kill, or a close that could not write). A header naming the older of its two commits as
/// current was left mid-commit (the slot written, the switch to it not yet): redb's
/// recovery then reads the newer one if its pages check out, else the older, and so does
/// this reader, in memory only. Neither is damage: nothing acknowledged is lost by a crash.
pub fn check_header(header: &[u8]) -> Result<Option<String>, String> {
    check_magic(header)?;
    let god = header[REDB_MAGIC.len()];
    let primary = usize::from(god & PRIMARY_BIT);
    let txn = |slot: usize| {
        let at = SLOT_OFFSETS[slot] + TRANSACTION_ID_IN_SLOT;
        u64::from_le_bytes(header[at..at + 8].try_into().expect("8 bytes"))
    };
    if txn(primary) < txn(1 - primary) {
        return Ok(Some(format!(
            "its writer stopped while switching from commit {} to commit {}",
            txn(primary),
            txn(1 - primary)
        )));
    }
    Ok((god & RECOVERY_REQUIRED != 0).then(|| {
        "its writer did not close it cleanly (a crash, a kill, or a close that could not write, as on a full disk)"
            .to_string()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlay_reads_writes_on_top_of_the_file_and_zeros_past_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, [1u8; 16]).unwrap();
        let backend = ReadOnlyFile::new(File::open(&path).unwrap()).unwrap();
        backend.write(4, &[9, 9]).unwrap();
        backend.set_len(20).unwrap();
        let mut out = [0u8; 20];
        backend.read(0, &mut out).unwrap();
        assert_eq!(out, [1, 1, 1, 1, 9, 9, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0]);
        assert!(backend.read(10, &mut [0u8; 11]).is_err(), "reads past the length fail");
        backend.set_len(8).unwrap();
        backend.set_len(12).unwrap();
        let mut out = [0u8; 12];
        backend.read(0, &mut out).unwrap();
        assert_eq!(out, [1, 1, 1, 1, 9, 9, 1, 1, 0, 0, 0, 0], "shrunk bytes read as zeros");
        assert_eq!(std::fs::read(&path).unwrap(), [1u8; 16], "the file is never written");
    }

    #[test]
    fn headers_left_by_a_crash_need_recovery_and_a_bad_magic_is_refused() {
        let mut header = vec![0u8; REDB_HEADER_BYTES];
        header[..9].copy_from_slice(&REDB_MAGIC);
        header[64 + 104..64 + 112].copy_from_slice(&7u64.to_le_bytes());
        header[192 + 104..192 + 112].copy_from_slice(&8u64.to_le_bytes());
        header[9] = 1;
        assert_eq!(check_header(&header), Ok(None));
        // Left mid-commit: the newer commit is one its writer was switching to.
        header[9] = 0;
        assert!(check_header(&header).unwrap().unwrap().contains("switching from commit 7 to commit 8"));
        header[9] = RECOVERY_REQUIRED | PRIMARY_BIT;
        assert!(check_header(&header).unwrap().unwrap().contains("did not close it"));
        header[0] = b'x';
        assert!(check_header(&header).unwrap_err().contains("magic"));
    }
}
