//! The bounds of ledger-spec/02 ("Bounds") that every decoded event is held to: lengths
//! and counts refused by name, and bounded lists refused at their length prefix, before
//! any item is read.

use crate::limits::{MAX_NAME_BYTES, MAX_TEXT_BYTES};
use serde::Deserialize;

/// A field of a decoded event that is over its bound, or breaks a rule of ledger-spec/02.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BoundError {
    #[error("event field `{field}` has {actual} {unit}, more than the limit of {limit}")]
    Over { field: &'static str, actual: usize, limit: usize, unit: &'static str },
    #[error("event field `{field}` (at {at}) breaks a rule of ledger-spec/02: {rule}")]
    Rule { field: &'static str, at: usize, rule: &'static str },
}

pub(super) fn name(field: &'static str, value: &impl AsRef<str>) -> Result<(), BoundError> {
    bound(field, value.as_ref().len(), MAX_NAME_BYTES, "bytes")
}

pub(super) fn text(field: &'static str, value: &impl AsRef<str>) -> Result<(), BoundError> {
    bound(field, value.as_ref().len(), MAX_TEXT_BYTES, "bytes")
}

pub(super) fn bound(field: &'static str, actual: usize, limit: usize, unit: &'static str) -> Result<(), BoundError> {
    if actual > limit {
        return Err(BoundError::Over { field, actual, limit, unit });
    }
    Ok(())
}

/// A bounded list, refused when its length prefix is read, before any item is: a count
/// over the bound costs nothing to reject (ledger-spec/02, Bounds). Readers without a
/// length prefix (JSON) are refused at the first item past the bound.
pub(crate) fn at_most<'de, D, T, const N: usize>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Bounded<T, const N: usize>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>, const N: usize> serde::de::Visitor<'de> for Bounded<T, N> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "a list of at most {N} items")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let over = |n: usize| serde::de::Error::invalid_length(n, &self);
            if let Some(n) = seq.size_hint().filter(|n| *n > N) {
                return Err(over(n));
            }
            let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(N).min(4096));
            while let Some(item) = seq.next_element()? {
                if items.len() == N {
                    return Err(over(N + 1));
                }
                items.push(item);
            }
            Ok(items)
        }
    }
    deserializer.deserialize_seq(Bounded::<T, N>(std::marker::PhantomData))
}

pub(super) fn cut_error(field: &'static str, at: usize, rule: &'static str) -> BoundError {
    BoundError::Rule { field, at, rule }
}
