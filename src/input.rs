//! Reading input from outside within a bound: a file, or stdin for `-`, never more than
//! the bound and one byte, so a huge or endless input is refused by name, not read; and
//! hex from the command line, its length checked before it is decoded.

use std::io::{Error, ErrorKind, Read};
use std::path::Path;

/// `path` opened for reading, or stdin for `-`; an error names the path.
pub fn open(path: &Path) -> Result<Box<dyn Read>, Error> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(std::io::stdin().lock()));
    }
    let file =
        std::fs::File::open(path).map_err(|e| Error::new(e.kind(), format!("reading {}: {e}", path.display())))?;
    Ok(Box::new(file))
}

/// The bytes of `path` (stdin for `-`), at most `limit`.
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, Error> {
    let named = |e: Error| Error::new(e.kind(), format!("reading {}: {e}", path.display()));
    let mut bytes = Vec::new();
    open(path)?.take(limit + 1).read_to_end(&mut bytes).map_err(named)?;
    if bytes.len() as u64 > limit {
        return Err(Error::new(ErrorKind::InvalidData, format!("{} is larger than {limit} bytes", path.display())));
    }
    Ok(bytes)
}

/// The UTF-8 text of `path` (stdin for `-`), at most `limit` bytes.
pub fn read_text(path: &Path, limit: u64) -> Result<String, Error> {
    String::from_utf8(read_bounded(path, limit)?)
        .map_err(|_| Error::new(ErrorKind::InvalidData, format!("{} is not UTF-8 text", path.display())))
}

/// Bytes given in hex (an optional `0x` first) on the command line, at most `max_bytes`;
/// `name` (the flag) is named in the error.
pub fn hex(name: &str, text: &str, max_bytes: usize) -> Result<Vec<u8>, Error> {
    let invalid = |why: String| Error::new(ErrorKind::InvalidInput, format!("{name}: {why}"));
    let digits = text.strip_prefix("0x").unwrap_or(text);
    if digits.len() > max_bytes * 2 {
        return Err(invalid(format!("{} hex digits, over the {} allowed", digits.len(), max_bytes * 2)));
    }
    hex::decode(digits).map_err(|e| invalid(format!("not hex ({e})")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_file_over_the_bound_or_not_text_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("doc");
        std::fs::write(&path, b"12345").unwrap();
        assert_eq!(super::read_text(&path, 5).unwrap(), "12345");
        assert!(super::read_text(&path, 4).unwrap_err().to_string().contains("larger than 4 bytes"));
        std::fs::write(&path, [0xff, 0xfe]).unwrap();
        assert!(super::read_text(&path, 5).unwrap_err().to_string().contains("not UTF-8"));
        let missing = super::read_bounded(&dir.path().join("none"), 5).unwrap_err().to_string();
        assert!(missing.contains("reading") && missing.contains("none"), "{missing}");
    }

    #[test]
    fn hex_is_bounded_in_digits_and_refused_by_its_flags_name() {
        assert_eq!(super::hex("--x", "0x0aff", 2).unwrap(), vec![0x0a, 0xff]);
        assert_eq!(super::hex("--x", "0aff", 2).unwrap(), vec![0x0a, 0xff]);
        let long = super::hex("--x", "0aff00", 2).unwrap_err().to_string();
        assert!(long.starts_with("--x: 6 hex digits, over the 4 allowed"), "{long}");
        assert!(super::hex("--x", "zz", 2).unwrap_err().to_string().starts_with("--x: not hex"));
    }
}
