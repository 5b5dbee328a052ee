//! The Merkle tree over a block's events: RFC 6962's tree shape and proofs, with blake3
//! in place of SHA-256, so that one event can be proven part of a block without the rest.
//!
//! `leaf = blake3(0x00 || event bytes)`, `node = blake3(0x01 || left || right)`,
//! empty tree `= blake3("")`; the split point is the largest power of two below `n`
//! (RFC 6962 §2.1). Proof verification follows RFC 9162 §2.1.3.2.

use crate::bytes::Hash32;

pub const LEAF_PREFIX: u8 = 0x00;
pub const NODE_PREFIX: u8 = 0x01;

pub fn leaf_hash(event_bytes: &[u8]) -> Hash32 {
    let mut hasher = blake3::Hasher::new();
    hasher.update(&[LEAF_PREFIX]);
    hasher.update(event_bytes);
    Hash32(*hasher.finalize().as_bytes())
}

pub fn node_hash(left: &Hash32, right: &Hash32) -> Hash32 {
    let mut buf = [0u8; 65];
    buf[0] = NODE_PREFIX;
    buf[1..33].copy_from_slice(&left.0);
    buf[33..].copy_from_slice(&right.0);
    Hash32(*blake3::hash(&buf).as_bytes())
}

/// The leaf hash of every event, in order, eight at a time where the CPU allows
/// (`hash_many`): `out[i] = leaf_hash(events[i])`.
pub fn leaf_hashes(events: &[&[u8]]) -> Vec<Hash32> {
    super::hash_many::hash_many(None, &[LEAF_PREFIX], events).into_iter().map(Hash32).collect()
}

/// The parent of each pair of nodes (left || right), in order: `node_hash(left, right)`.
pub fn node_hashes(pairs: &[[u8; 64]]) -> Vec<Hash32> {
    let inputs: Vec<&[u8]> = pairs.iter().map(|p| &p[..]).collect();
    super::hash_many::hash_many(None, &[NODE_PREFIX], &inputs).into_iter().map(Hash32).collect()
}

pub fn empty_root() -> Hash32 {
    Hash32(*blake3::hash(b"").as_bytes())
}

/// Root over leaf hashes. Pairing left to right level by level and promoting an
/// unpaired last node unchanged builds exactly RFC 6962's tree.
pub fn root(leaves: &[Hash32]) -> Hash32 {
    if leaves.is_empty() {
        return empty_root();
    }
    let mut level: Vec<Hash32> = leaves.to_vec();
    while level.len() > 1 {
        let pairs: Vec<[u8; 64]> = level
            .chunks_exact(2)
            .map(|pair| std::array::from_fn(|i| if i < 32 { pair[0].0[i] } else { pair[1].0[i - 32] }))
            .collect();
        let mut next = node_hashes(&pairs);
        if let [.., single] = level[..] {
            if level.len() % 2 == 1 {
                next.push(single);
            }
        }
        level = next;
    }
    level[0]
}

/// The audit path of leaf `index` (RFC 6962 §2.1.1 `PATH(m, D[n])`), bottom first.
/// Panics if `index` is out of range: callers check against the event count first.
pub fn inclusion_path(leaves: &[Hash32], index: usize) -> Vec<Hash32> {
    assert!(index < leaves.len(), "leaf {index} out of {}", leaves.len());
    let mut path = Vec::new();
    subtree_path(leaves, index, &mut path);
    path
}

fn subtree_path(leaves: &[Hash32], index: usize, path: &mut Vec<Hash32>) {
    let n = leaves.len();
    if n <= 1 {
        return;
    }
    let k = split_point(n);
    if index < k {
        subtree_path(&leaves[..k], index, path);
        path.push(root(&leaves[k..]));
    } else {
        subtree_path(&leaves[k..], index - k, path);
        path.push(root(&leaves[..k]));
    }
}

/// Largest power of two strictly less than `n` (n >= 2).
fn split_point(n: usize) -> usize {
    debug_assert!(n >= 2);
    1 << (usize::BITS - 1 - (n - 1).leading_zeros())
}

/// Why an inclusion proof did not verify.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProofError {
    #[error("leaf index {index} is not below tree size {size}")]
    IndexOutOfRange { index: u64, size: u64 },
    #[error("proof has {actual} hashes, the tree shape needs {expected}")]
    WrongLength { expected: usize, actual: usize },
    #[error("proof leads to root {computed}, expected {expected}")]
    RootMismatch { computed: Hash32, expected: Hash32 },
}

/// Checks that `leaf` sits at `index` of a tree of `size` leaves with root `root`.
/// Pure: anyone holding a block header can run it.
pub fn verify_inclusion(
    leaf: &Hash32,
    index: u64,
    size: u64,
    path: &[Hash32],
    root: &Hash32,
) -> Result<(), ProofError> {
    if index >= size {
        return Err(ProofError::IndexOutOfRange { index, size });
    }
    let expected_len = path_len(index, size);
    if path.len() != expected_len {
        return Err(ProofError::WrongLength { expected: expected_len, actual: path.len() });
    }
    let (mut fn_, mut sn) = (index, size - 1);
    let mut r = *leaf;
    for p in path {
        if fn_ & 1 == 1 || fn_ == sn {
            r = node_hash(p, &r);
            while fn_ & 1 == 0 && fn_ != 0 {
                fn_ >>= 1;
                sn >>= 1;
            }
        } else {
            r = node_hash(&r, p);
        }
        fn_ >>= 1;
        sn >>= 1;
    }
    if sn != 0 || r != *root {
        return Err(ProofError::RootMismatch { computed: r, expected: *root });
    }
    Ok(())
}

/// Length of RFC 6962's audit path for `index` in a tree of `size` leaves.
fn path_len(index: u64, size: u64) -> usize {
    let (mut index, mut size, mut len) = (index, size, 0usize);
    while size > 1 {
        let k = 1u64 << (63 - (size - 1).leading_zeros());
        len += 1;
        if index < k {
            size = k;
        } else {
            index -= k;
            size -= k;
        }
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaves(n: usize) -> Vec<Hash32> {
        (0..n).map(|i| leaf_hash(&(i as u64).to_le_bytes())).collect()
    }

    /// RFC 6962's recursive definition, written out literally, as the reference.
    fn reference_root(leaves: &[Hash32]) -> Hash32 {
        match leaves.len() {
            0 => empty_root(),
            1 => leaves[0],
            n => {
                let k = split_point(n);
                node_hash(&reference_root(&leaves[..k]), &reference_root(&leaves[k..]))
            }
        }
    }

    #[test]
    fn iterative_root_matches_rfc_recursion() {
        for n in 0..70 {
            let l = leaves(n);
            assert_eq!(root(&l), reference_root(&l), "n = {n}");
        }
    }

    #[test]
    fn every_proof_verifies_and_tampering_fails() {
        for n in 1..40usize {
            let l = leaves(n);
            let r = root(&l);
            for i in 0..n {
                let path = inclusion_path(&l, i);
                assert_eq!(path.len(), path_len(i as u64, n as u64));
                verify_inclusion(&l[i], i as u64, n as u64, &path, &r).unwrap();
                let other = (i + 1) % n;
                if other != i {
                    assert!(verify_inclusion(&l[other], i as u64, n as u64, &path, &r).is_err());
                }
                if let Some(first) = path.first() {
                    let mut bad = path.clone();
                    bad[0] = Hash32([first.0[0] ^ 1; 32]);
                    assert!(verify_inclusion(&l[i], i as u64, n as u64, &bad, &r).is_err());
                }
                // The size is not checked against the root here: it comes from the
                // signed header, as RFC 9162 has it come from a signed tree head.
            }
            assert_eq!(
                verify_inclusion(&l[0], n as u64, n as u64, &[], &r),
                Err(ProofError::IndexOutOfRange { index: n as u64, size: n as u64 })
            );
        }
    }
}
