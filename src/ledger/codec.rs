//! The canonical byte encoding: bincode 1.3.3 with one fixed configuration, and a
//! decoder that accepts only bytes it would itself have written.
//!
//! Config: fixed-width little-endian integers, u32 enum tags, u64 length prefixes,
//! trailing bytes rejected, total size limited. Every byte is described in
//! ledger-spec/01-encoding.md.

use bincode::Options;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Why bytes were refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CodecError {
    #[error("{what} is {len} bytes, over the limit of {limit}")]
    TooLarge { what: &'static str, len: u64, limit: u64 },
    #[error("malformed {what}: {message}")]
    Malformed { what: &'static str, message: String },
    /// The bytes end before the value does: a cut-off message rather than a wrong one.
    #[error("{what} ends early: the bytes stop before the value is complete")]
    Truncated { what: &'static str },
    #[error("{what} is not canonical: re-encoding differs from byte {offset} on")]
    NotCanonical { what: &'static str, offset: u64 },
}

fn options(limit: u64) -> impl Options {
    bincode::DefaultOptions::new().with_fixint_encoding().with_little_endian().reject_trailing_bytes().with_limit(limit)
}

/// Encodes `value` canonically. Only fails if `value` is larger than `limit`.
pub fn encode<T: Serialize>(value: &T, what: &'static str, limit: u64) -> Result<Vec<u8>, CodecError> {
    options(limit).serialize(value).map_err(|e| size_error(what, limit, &e))
}

/// The length of `value`'s canonical encoding, counted without writing it.
pub fn encoded_len<T: Serialize>(value: &T) -> u64 {
    options(u64::MAX).serialized_size(value).unwrap_or(u64::MAX)
}

/// Appends the canonical encoding of `value` to `out`.
pub fn encode_into<T: Serialize>(
    value: &T,
    out: &mut Vec<u8>,
    what: &'static str,
    limit: u64,
) -> Result<(), CodecError> {
    options(limit).serialize_into(out, value).map_err(|e| size_error(what, limit, &e))
}

/// Writes the canonical encoding of `value` to `out` as it is made: a value of n bytes
/// costs no n-byte buffer. Fails where `out` or the value's own parts (read from a file
/// as it is encoded) do.
pub fn encode_to<W: std::io::Write, T: Serialize>(value: &T, out: W, what: &'static str) -> Result<(), CodecError> {
    options(u64::MAX).serialize_into(out, value).map_err(|e| CodecError::Malformed { what, message: e.to_string() })
}

/// blake3 of the canonical encoding of `value`, streamed into the hasher: a value of n
/// bytes costs no n-byte buffer (the network state's grows with its matches).
pub fn hash_encoding<T: Serialize>(value: &T) -> blake3::Hash {
    let mut hasher = blake3::Hasher::new();
    // Writing to a hasher cannot fail, and there is no limit to exceed.
    options(u64::MAX).serialize_into(&mut hasher, value).expect("a hasher takes every byte");
    hasher.finalize()
}

/// [`hash_encoding`] of a value whose encoding may fail: one that reads its parts from
/// a file as it is encoded.
pub fn try_hash_encoding<T: Serialize>(value: &T, what: &'static str) -> Result<blake3::Hash, CodecError> {
    let mut hasher = blake3::Hasher::new();
    options(u64::MAX)
        .serialize_into(&mut hasher, value)
        .map_err(|e| CodecError::Malformed { what, message: e.to_string() })?;
    Ok(hasher.finalize())
}

fn decode_error(what: &'static str, e: &bincode::Error) -> CodecError {
    match &**e {
        bincode::ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => CodecError::Truncated { what },
        _ => CodecError::Malformed { what, message: e.to_string() },
    }
}

fn size_error(what: &'static str, limit: u64, e: &bincode::Error) -> CodecError {
    match **e {
        bincode::ErrorKind::SizeLimit => CodecError::TooLarge { what, len: limit + 1, limit },
        _ => CodecError::Malformed { what, message: e.to_string() },
    }
}

/// Decodes `bytes` and checks that re-encoding gives the same bytes.
///
/// Allocation is bounded: bincode checks every length prefix against the bytes that
/// remain under `limit` before reading, and serde caps pre-allocation of sequences.
pub fn decode_canonical<T: DeserializeOwned + Serialize>(
    bytes: &[u8],
    what: &'static str,
    limit: u64,
) -> Result<T, CodecError> {
    if bytes.len() as u64 > limit {
        return Err(CodecError::TooLarge { what, len: bytes.len() as u64, limit });
    }
    let value: T = options(limit).deserialize(bytes).map_err(|e| decode_error(what, &e))?;
    let again = encode(&value, what, limit)?;
    if again != bytes {
        return Err(CodecError::NotCanonical { what, offset: first_difference(&again, bytes) });
    }
    Ok(value)
}

/// Decodes a canonical value from the front of `bytes`, for values laid end to end
/// (the events of a block). Returns the value and how many bytes it used; `scratch`
/// is a reusable buffer for the re-encoding.
pub fn decode_canonical_prefix<'a, T: Deserialize<'a> + Serialize>(
    bytes: &'a [u8],
    what: &'static str,
    limit: u64,
    scratch: &mut Vec<u8>,
) -> Result<(T, usize), CodecError> {
    let value: T = bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_little_endian()
        .allow_trailing_bytes()
        .with_limit(limit)
        .deserialize(bytes)
        .map_err(|e| decode_error(what, &e))?;
    scratch.clear();
    encode_into(&value, scratch, what, limit)?;
    let used = scratch.len();
    if bytes.len() < used || bytes[..used] != scratch[..] {
        return Err(CodecError::NotCanonical { what, offset: first_difference(scratch, bytes) });
    }
    Ok((value, used))
}

pub fn first_difference(a: &[u8], b: &[u8]) -> u64 {
    a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len())) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counted_length_is_the_written_length() {
        let validator = crate::bytes::ValidatorKey([9; 32]);
        for (i, event) in crate::ledger::demo::demo_events(&validator, 3, 4, 700).iter().enumerate() {
            let written = encode(event, "event", u64::MAX).unwrap();
            assert_eq!(encoded_len(event), written.len() as u64, "event {i}");
        }
        assert_eq!(encoded_len(&(1u8, "abc".to_string(), vec![7u16; 5])), 1 + 8 + 3 + 8 + 10);
    }

    #[test]
    fn the_streamed_hash_is_the_hash_of_the_encoding() {
        let validator = crate::bytes::ValidatorKey([9; 32]);
        let events = crate::ledger::demo::demo_events(&validator, 3, 40, 700);
        let written = encode(&events, "events", u64::MAX).unwrap();
        assert!(written.len() > 16 * 1024, "past a buffer's worth of bytes: {}", written.len());
        assert_eq!(hash_encoding(&events), blake3::hash(&written));
    }
}
