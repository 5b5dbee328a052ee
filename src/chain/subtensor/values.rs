//! Values read from subtensor's storage: bounded before they are decoded (a node that
//! lies must not size our memory), then read by shape, never by unwrapping one-element
//! lists; a commitment's `Data` fields each by their variant.

use crate::chain::{ChainError, CommitmentRecord};
use subxt::dynamic::Value;
use subxt::ext::scale_value::{Composite, Primitive, ValueDef};

/// Most uids a subnet holds on subtensor (`MaxAllowedUids`'s ceiling).
pub(super) const MAX_UIDS: usize = 4096;

/// The most bytes a value of `entry` holds on subtensor: per uid vectors by `MAX_UIDS`,
/// a commitment by its three fields (`MaxFields`) with room to spare, anything else 4 KiB.
/// A value over it is refused by name before it is decoded.
pub(super) fn max_value_bytes(entry: &str) -> usize {
    match entry {
        "Keys" => 32,
        "ValidatorPermit" => 5 + MAX_UIDS,
        "LastUpdate" => 5 + 8 * MAX_UIDS,
        "Weights" => 5 + 6 * MAX_UIDS,
        "CommitmentOf" => 64 * 1024,
        _ => 4 * 1024,
    }
}

pub(super) fn pallet_of(entry: &str) -> &'static str {
    if entry == "CommitmentOf" {
        "Commitments"
    } else {
        "SubtensorModule"
    }
}

pub(super) fn decode(what: &str, e: impl std::fmt::Display) -> ChainError {
    ChainError::Decode { what: what.into(), message: e.to_string() }
}

pub(super) fn netuid_key(netuid: u16) -> Value {
    Value::u128(u128::from(netuid))
}

/// Unwraps single-field composites (newtypes such as `NetUid`, `Compact<T>`).
pub(super) fn unwrap_newtype(value: &Value) -> &Value {
    match &value.value {
        ValueDef::Composite(Composite::Unnamed(v)) if v.len() == 1 => unwrap_newtype(&v[0]),
        ValueDef::Composite(Composite::Named(v)) if v.len() == 1 => unwrap_newtype(&v[0].1),
        _ => value,
    }
}

pub(super) fn as_u128(value: &Value) -> Option<u128> {
    match &unwrap_newtype(value).value {
        ValueDef::Primitive(Primitive::U128(n)) => Some(*n),
        ValueDef::Primitive(Primitive::Bool(b)) => Some(u128::from(*b)),
        _ => None,
    }
}

pub(super) fn items(value: &Value) -> Vec<&Value> {
    match &value.value {
        ValueDef::Composite(c) => c.values().collect(),
        _ => Vec::new(),
    }
}

pub(super) fn field<'a>(value: &'a Value, name: &str) -> Option<&'a Value> {
    match &value.value {
        ValueDef::Composite(Composite::Named(fields)) => fields.iter().find(|(n, _)| n == name).map(|(_, v)| v),
        _ => None,
    }
}

/// The items of a list however many newtypes wrap it. `BoundedVec<T>` decodes as a
/// one-field composite around the list, and a list of one item is also a one-field
/// composite: only the item's own shape (`is_item`) tells the two apart, so a wrapper is
/// unwrapped only when its one value is not itself an item.
pub(super) fn sequence(value: &Value, is_item: fn(&Value) -> bool) -> Option<Vec<&Value>> {
    let ValueDef::Composite(composite) = &value.value else { return None };
    let values: Vec<&Value> = composite.values().collect();
    if values.iter().all(|v| is_item(v)) {
        return Some(values);
    }
    match values.as_slice() {
        [inner] => sequence(inner, is_item),
        _ => None,
    }
}

pub(super) fn is_variant(value: &Value) -> bool {
    matches!(value.value, ValueDef::Variant(_))
}

pub(super) fn is_byte(value: &Value) -> bool {
    matches!(value.value, ValueDef::Primitive(Primitive::U128(n)) if n <= 255)
}

/// A `[u8; N]`, `Vec<u8>` or `BoundedVec<u8>` as bytes, whatever its length.
pub(super) fn byte_sequence(value: &Value) -> Option<Vec<u8>> {
    sequence(value, is_byte)?.into_iter().map(|v| as_u128(v).and_then(|n| u8::try_from(n).ok())).collect()
}

/// Most bytes a `BigRaw` field holds (`MAX_BIGRAW_COMMITMENT_SIZE_BYTES`).
pub const MAX_BIGRAW_BYTES: usize = 512;

/// The bytes one `Data` field holds (`Raw0`..`Raw128`, `BigRaw`), or why it holds none,
/// with the variant named: a hash, a timelocked blob, a flag or `None` is not data.
pub(super) fn data_bytes(data: &Value) -> Result<Vec<u8>, String> {
    let ValueDef::Variant(variant) = &data.value else { return Err("not a Data variant".into()) };
    let name = variant.name.as_str();
    let inner: Vec<&Value> = variant.values.values().collect();
    let raw_len = name.strip_prefix("Raw").and_then(|n| n.parse::<usize>().ok()).filter(|&n| n <= 128);
    let (max, exact) = match (name, raw_len) {
        (_, Some(n)) => (n, true),
        ("BigRaw", None) => (MAX_BIGRAW_BYTES, false),
        ("None", None) => return Err("None (an empty field)".into()),
        ("BlakeTwo256" | "Sha256" | "Keccak256" | "ShaThree256", None) => {
            return Err(format!("{name} (only a hash of the data is on chain)"))
        }
        ("TimelockEncrypted", None) => {
            return Err("TimelockEncrypted (encrypted until the chain reveals it in RevealedCommitments)".into())
        }
        ("ResetBondsFlag", None) => return Err("ResetBondsFlag (a flag, no data)".into()),
        (other, None) => return Err(format!("{other} (a Data variant af does not know)")),
    };
    let bytes = match inner.as_slice() {
        [one] => byte_sequence(one),
        _ => None,
    }
    .ok_or_else(|| format!("{name} does not hold bytes"))?;
    if (exact && bytes.len() != max) || bytes.len() > max {
        return Err(format!("{name} holds {} bytes", bytes.len()));
    }
    Ok(bytes)
}

/// `Registration { deposit, block, info: CommitmentInfo { fields: [Data] } }` into a
/// record: every field's bytes, or, if any field holds no bytes, none and the reason.
pub(super) fn commitment_record(hotkey: String, value: &Value) -> Option<CommitmentRecord> {
    let block = as_u128(field(value, "block")?)? as u64;
    let fields = field(field(value, "info")?, "fields")?;
    let read: Result<Vec<Vec<u8>>, String> = match sequence(fields, is_variant) {
        Some(list) => list
            .iter()
            .enumerate()
            .map(|(i, data)| {
                data_bytes(data).map_err(|reason| format!("field {} of {} is {reason}", i + 1, list.len()))
            })
            .collect(),
        None => Err("its fields are not a list of Data".into()),
    };
    Some(match read {
        Ok(fields) => CommitmentRecord::new(hotkey, block, fields),
        Err(reason) => {
            CommitmentRecord { unreadable: Some(reason), ..CommitmentRecord::new(hotkey, block, Vec::new()) }
        }
    })
}

pub(super) fn number_or_zero(value: &Value) -> u64 {
    as_u128(value).unwrap_or(0) as u64
}
