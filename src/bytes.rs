//! Fixed-size byte strings (hashes, keys, signatures) that encode as raw bytes on the
//! wire and as lowercase hex in JSON, so the canonical format has no length prefixes
//! for them and humans never see arrays of integers.

use serde::de::{self, SeqAccess, Visitor};
use serde::ser::SerializeTuple;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A hex string that was not the right length or not hex.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("expected {expected_len} bytes as {} hex digits, got {input:?}", expected_len * 2)]
pub struct HexError {
    pub expected_len: usize,
    pub input: String,
}

/// Decodes lowercase hex (no prefix, no spaces, an even number of digits `0-9a-f`).
pub fn decode_lower_hex(input: &str) -> Option<Vec<u8>> {
    if !input.len().is_multiple_of(2) || !input.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return None;
    }
    hex::decode(input).ok()
}

/// At most a short prefix of untrusted text, for error messages: a bad 50 MB input must
/// not come back as a 50 MB message.
pub fn quote_prefix(input: &str) -> String {
    const MAX_CHARS: usize = 72;
    let mut out: String = input.chars().take(MAX_CHARS).collect::<String>().escape_debug().to_string();
    if input.chars().nth(MAX_CHARS).is_some() {
        out.push_str(&format!("… ({} bytes in all)", input.len()));
    }
    out
}

macro_rules! byte_array {
    ($(#[$meta:meta])* $name:ident, $len:expr) => {
        const _: () = assert!($len % 8 == 0, "encoded as u64 words");
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub [u8; $len]);

        impl $name {
            pub const LEN: usize = $len;

            pub fn to_hex(&self) -> String {
                hex::encode(self.0)
            }

            /// Parses exactly `2 * LEN` lowercase hex digits: the one spelling ledger-spec
            /// allows, so that a value has one text form as it has one byte form.
            pub fn from_hex(input: &str) -> Result<Self, HexError> {
                let err = || HexError { expected_len: $len, input: quote_prefix(input) };
                let bytes = decode_lower_hex(input).ok_or_else(err)?;
                Ok(Self(bytes.try_into().map_err(|_| err())?))
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.to_hex())
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.to_hex())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                if serializer.is_human_readable() {
                    serializer.serialize_str(&self.to_hex())
                } else {
                    // A tuple, not `serialize_bytes`, so bincode writes the raw bytes with
                    // no length prefix. Elements are little-endian u64 words: on the wire
                    // that is exactly the bytes in order, with 8x fewer serde calls.
                    let mut tuple = serializer.serialize_tuple($len / 8)?;
                    for word in self.0.chunks_exact(8) {
                        tuple.serialize_element(&u64::from_le_bytes(word.try_into().expect("8 bytes")))?;
                    }
                    tuple.end()
                }
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct ArrayVisitor;
                impl<'de> Visitor<'de> for ArrayVisitor {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        write!(f, "{} bytes", $len)
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$name, E> {
                        $name::from_hex(v).map_err(E::custom)
                    }
                    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<$name, A::Error> {
                        let mut out = [0u8; $len];
                        for (i, slot) in out.chunks_exact_mut(8).enumerate() {
                            let word: u64 = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(i, &self))?;
                            slot.copy_from_slice(&word.to_le_bytes());
                        }
                        Ok($name(out))
                    }
                }
                if deserializer.is_human_readable() {
                    deserializer.deserialize_str(ArrayVisitor)
                } else {
                    deserializer.deserialize_tuple($len / 8, ArrayVisitor)
                }
            }
        }
    };
}

byte_array!(
    /// A blake3 digest: block hashes, Merkle nodes, challenge ids.
    Hash32,
    32
);
byte_array!(
    /// A validator's ed25519 public key: the identity of its block log.
    ValidatorKey,
    32
);
byte_array!(
    /// An ed25519 signature (R || S).
    SignatureBytes,
    64
);

/// A challenge id is a 32-byte digest; the alias names the role.
pub type ChallengeId = Hash32;
/// Match ids are 32 bytes too.
pub type MatchId = Hash32;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_and_errors() {
        let h = Hash32([0xab; 32]);
        assert_eq!(Hash32::from_hex(&h.to_hex()).unwrap(), h);
        assert!(Hash32::from_hex("abcd").is_err());
        assert!(Hash32::from_hex(&"zz".repeat(32)).is_err());
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(json, format!("\"{}\"", "ab".repeat(32)));
        assert_eq!(serde_json::from_str::<Hash32>(&json).unwrap(), h);
    }
}
