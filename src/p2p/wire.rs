//! The bytes validators exchange: a gossip announcement of a new tip (a signed header,
//! so it can be checked before it is forwarded), and requests for tips and for ranges
//! of a validator's blocks. Encoded with the ledger's canonical codec and bounded, so a
//! hostile peer cannot make us allocate more than the limits below. Block bytes travel
//! exactly as stored; the receiver checks them as if read from a file.

use crate::bytes::{Hash32, SignatureBytes, ValidatorKey};
use crate::ledger::block::{check_header_rules, check_signature, BlockError, BlockHeader, HEADER_BYTES};
use crate::ledger::codec::{self, CodecError};
use crate::limits::MAX_BLOCK_BYTES;
use serde::{Deserialize, Serialize};

/// Largest gossip message (an announcement is ~190 bytes).
pub const MAX_GOSSIP_BYTES: u64 = 1024;
/// Largest request.
pub const MAX_REQUEST_BYTES: u64 = 1024;
/// Largest response: room for one block of the largest size, or many smaller ones.
pub const MAX_RESPONSE_BYTES: u64 = MAX_BLOCK_BYTES + 1024 * 1024;
/// Most tips in one response.
pub const MAX_TIPS: usize = 4096;
/// A signed header on the wire: the 118 header bytes and a 64-byte signature.
pub const SIGNED_HEADER_BYTES: u64 = HEADER_BYTES as u64 + 64;
/// Largest tips response: its kind (4 bytes), count (8) and `MAX_TIPS` signed headers.
pub const MAX_TIPS_RESPONSE_BYTES: u64 = 12 + MAX_TIPS as u64 * SIGNED_HEADER_BYTES;
/// Most blocks one request may ask for.
pub const MAX_BLOCKS_PER_REQUEST: u32 = 1024;

/// A header with its signature: enough to check who signed which block at which height.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedHeader {
    pub header: BlockHeader,
    pub signature: SignatureBytes,
}

impl SignedHeader {
    pub fn hash(&self) -> Hash32 {
        self.header.hash()
    }

    pub fn validator(&self) -> ValidatorKey {
        self.header.validator
    }

    /// Every header rule (format version, event count, genesis link), then strict
    /// ed25519 over the header hash under the header's own validator key: a header
    /// that no block could carry is refused before anything is fetched for it.
    pub fn check(&self) -> Result<Hash32, BlockError> {
        check_header_rules(&self.header)?;
        let hash = self.hash();
        check_signature(&self.header, &hash, &self.signature)?;
        Ok(hash)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Gossip {
    /// "This validator's chain now reaches this header."
    Announce(SignedHeader),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Every tip the peer stores.
    Tips,
    /// Blocks `from_height..` of `validator`, at most `max_blocks`, in height order.
    Blocks { validator: ValidatorKey, from_height: u64, max_blocks: u32 },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// At most `MAX_TIPS`, refused as soon as the count says more (nothing decoded).
    Tips(#[serde(deserialize_with = "bounded_tips")] Vec<SignedHeader>),
    /// Consecutive blocks starting at the requested height; fewer than asked (or none)
    /// when the peer has no more, or the response would be too large.
    Blocks(#[serde(with = "serde_bytes_vec")] Vec<Vec<u8>>),
}

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("{0}")]
    Codec(#[from] CodecError),
    #[error("{what} lists {count} items, more than {limit}")]
    TooMany { what: &'static str, count: usize, limit: usize },
}

impl WireError {
    /// Whether the bytes were cut off (a stream that ended early, as a dropped connection
    /// leaves it) rather than wrong: no proof that the peer misbehaved.
    pub fn is_truncated(&self) -> bool {
        matches!(self, WireError::Codec(CodecError::Truncated { .. }))
    }
}

pub fn encode_gossip(message: &Gossip) -> Vec<u8> {
    codec::encode(message, "gossip message", MAX_GOSSIP_BYTES).expect("an announcement fits the gossip limit")
}

pub fn decode_gossip(bytes: &[u8]) -> Result<Gossip, WireError> {
    Ok(codec::decode_canonical(bytes, "gossip message", MAX_GOSSIP_BYTES)?)
}

pub fn encode_request(request: &Request) -> Vec<u8> {
    codec::encode(request, "request", MAX_REQUEST_BYTES).expect("a request fits the request limit")
}

pub fn decode_request(bytes: &[u8]) -> Result<Request, WireError> {
    let request: Request = codec::decode_canonical(bytes, "request", MAX_REQUEST_BYTES)?;
    Ok(request)
}

pub fn encode_response(response: &Response) -> Result<Vec<u8>, WireError> {
    Ok(codec::encode(response, "response", MAX_RESPONSE_BYTES)?)
}

pub fn decode_response(bytes: &[u8]) -> Result<Response, WireError> {
    if let Some(count) = tips_count(bytes) {
        if count > MAX_TIPS as u64 {
            return Err(WireError::TooMany { what: "tips response", count: count as usize, limit: MAX_TIPS });
        }
    }
    Ok(codec::decode_canonical(bytes, "response", MAX_RESPONSE_BYTES)?)
}

/// The kind of a response from its first 4 bytes, and the most bytes that kind may take.
pub fn response_limit(kind: [u8; 4]) -> Option<(&'static str, u64)> {
    match u32::from_le_bytes(kind) {
        0 => Some(("tips response", MAX_TIPS_RESPONSE_BYTES)),
        1 => Some(("blocks response", MAX_RESPONSE_BYTES)),
        _ => None,
    }
}

/// The count a tips response claims (its kind tag 0, then a u64), read from its first 12
/// bytes, so that a response claiming too many is refused before it is read further.
pub fn tips_count(prefix: &[u8]) -> Option<u64> {
    let kind: [u8; 4] = prefix.get(..4)?.try_into().ok()?;
    let count: [u8; 8] = prefix.get(4..12)?.try_into().ok()?;
    (u32::from_le_bytes(kind) == 0).then_some(u64::from_le_bytes(count))
}

/// Tips, refused past `MAX_TIPS` whatever the count prefix says.
fn bounded_tips<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<SignedHeader>, D::Error> {
    struct Tips;
    impl<'de> serde::de::Visitor<'de> for Tips {
        type Value = Vec<SignedHeader>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "at most {MAX_TIPS} signed headers")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut tips = Vec::new();
            while let Some(tip) = seq.next_element::<SignedHeader>()? {
                if tips.len() == MAX_TIPS {
                    return Err(serde::de::Error::custom(format!("more than {MAX_TIPS} tips")));
                }
                tips.push(tip);
            }
            Ok(tips)
        }
    }
    deserializer.deserialize_seq(Tips)
}

/// `Vec<Vec<u8>>` as a sequence of byte strings (length + bytes each), not of
/// one-byte integers: the same bytes on the wire, copied in one piece.
mod serde_bytes_vec {
    use serde::de::{SeqAccess, Visitor};
    use serde::ser::SerializeSeq;
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(blocks: &[Vec<u8>], serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(blocks.len()))?;
        for block in blocks {
            seq.serialize_element(serde_bytes::Bytes::new(block))?;
        }
        seq.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Vec<u8>>, D::Error> {
        struct Blocks;
        impl<'de> Visitor<'de> for Blocks {
            type Value = Vec<Vec<u8>>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of byte strings")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                // No capacity from the untrusted length: grow as elements really arrive.
                let mut blocks = Vec::new();
                while let Some(block) = seq.next_element::<serde_bytes::ByteBuf>()? {
                    blocks.push(block.into_vec());
                }
                Ok(blocks)
            }
        }
        deserializer.deserialize_seq(Blocks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_garbage_is_refused() {
        let request = Request::Blocks { validator: ValidatorKey([7; 32]), from_height: 9, max_blocks: 3 };
        assert_eq!(decode_request(&encode_request(&request)).unwrap(), request);
        let response = Response::Blocks(vec![vec![1, 2, 3], vec![], vec![9; 1000]]);
        let bytes = encode_response(&response).unwrap();
        assert_eq!(decode_response(&bytes).unwrap(), response);
        // A byte string is its length and its bytes, as documented.
        assert_eq!(&bytes[..4], &1u32.to_le_bytes(), "variant tag");
        assert_eq!(&bytes[4..12], &3u64.to_le_bytes(), "count");
        assert_eq!(&bytes[12..20], &3u64.to_le_bytes(), "first length");
        assert!(decode_request(&[9, 9, 9]).is_err());
        assert!(decode_gossip(&[0; 2000]).is_err());
        let mut trailing = encode_request(&Request::Tips);
        trailing.push(0);
        assert!(decode_request(&trailing).is_err(), "trailing bytes are not canonical");
        // A length claiming more bytes than remain is an error, not an allocation.
        let mut lying = 1u32.to_le_bytes().to_vec();
        lying.extend_from_slice(&1u64.to_le_bytes());
        lying.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode_response(&lying).is_err());
    }
}

#[cfg(test)]
mod size_tests {
    use super::*;

    #[test]
    fn a_signed_header_is_as_long_as_the_tips_limit_assumes() {
        let key = crate::ledger::LedgerKey::from_seed([1; 32]);
        let validator = key.validator();
        let block = crate::ledger::block::seal(
            key.signing_key(),
            None,
            1,
            crate::ledger::demo::demo_events(&validator, 0, 1, 16),
        )
        .unwrap();
        let signed =
            SignedHeader { header: block.decoded().block.header.clone(), signature: block.decoded().block.signature };
        let one = codec::encode(&signed, "tip", 1024).unwrap();
        assert_eq!(one.len() as u64, SIGNED_HEADER_BYTES);
        // The largest honest tips answer fits the limit exactly.
        let full = encode_response(&Response::Tips(vec![signed; MAX_TIPS])).unwrap();
        assert_eq!(full.len() as u64, MAX_TIPS_RESPONSE_BYTES);
        assert!(decode_response(&full).is_ok());
    }
}
