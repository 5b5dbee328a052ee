//! blake3 of many short inputs at once. Verification hashes every event as its own
//! Merkle leaf, `blake3(0x00 || event)`, every tree node and every index entry: inputs of
//! one blake3 chunk (up to 1,024 bytes), each up to 16 compressions that depend on each
//! other, which no SIMD width speeds up for one input (blake3's own SIMD works across the
//! chunks of one long input, and its many-input function is not public API). Eight
//! inputs side by side in the eight 32-bit lanes of AVX2 registers do speed up: this
//! module runs the BLAKE3 compression function (the BLAKE3 paper, §2.2) on eight
//! single-chunk inputs at once. Longer inputs, and machines without AVX2, use the
//! `blake3` crate one at a time. The tests check the output against that crate.

/// blake3's chunk: an input (prefix included) this long or shorter is one chunk.
const CHUNK_LEN: usize = 1024;

/// `blake3(prefix || input)` of each input (keyed with `key` when given), in order. The
/// inputs that fit one chunk with the prefix go eight at a time through AVX2 when the
/// CPU has it; the rest through the `blake3` crate.
pub fn hash_many(key: Option<&[u8; 32]>, prefix: &[u8], inputs: &[&[u8]]) -> Vec<[u8; 32]> {
    let one = |input: &[u8]| {
        let mut hasher = key.map_or_else(blake3::Hasher::new, blake3::Hasher::new_keyed);
        hasher.update(prefix);
        hasher.update(input);
        *hasher.finalize().as_bytes()
    };
    let mut out = vec![[0u8; 32]; inputs.len()];
    let short_max = CHUNK_LEN.saturating_sub(prefix.len());
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && prefix.len() < CHUNK_LEN {
        let mut short: Vec<usize> = (0..inputs.len()).filter(|&i| inputs[i].len() <= short_max).collect();
        // Lanes of one group then need about as many compressions as each other.
        short.sort_by_key(|&i| std::cmp::Reverse(inputs[i].len()));
        let key_words = key.map_or(avx2::IV, |k| {
            std::array::from_fn(|i| u32::from_le_bytes(k[4 * i..4 * i + 4].try_into().expect("4 bytes")))
        });
        for group in short.chunks(8) {
            let lanes: [&[u8]; 8] = std::array::from_fn(|lane| group.get(lane).map_or(&[][..], |&i| inputs[i]));
            // SAFETY: AVX2 was detected at run time just above.
            let hashes = unsafe { avx2::eight(&key_words, key.is_some(), prefix, &lanes, group.len()) };
            for (lane, &i) in group.iter().enumerate() {
                out[i] = hashes[lane];
            }
        }
        for (slot, input) in out.iter_mut().zip(inputs) {
            if input.len() > short_max {
                *slot = one(input);
            }
        }
        return out;
    }
    for (slot, input) in out.iter_mut().zip(inputs) {
        *slot = one(input);
    }
    out
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::CHUNK_LEN;
    use std::arch::x86_64::*;

    pub const IV: [u32; 8] =
        [0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19];
    const CHUNK_START: u32 = 1;
    const CHUNK_END: u32 = 2;
    const ROOT: u32 = 8;
    const KEYED_HASH: u32 = 16;
    /// The message word order of each of the seven rounds: the identity, then the
    /// BLAKE3 permutation applied once more per round.
    const SCHEDULE: [[usize; 16]; 7] = schedule();

    const fn schedule() -> [[usize; 16]; 7] {
        const PERMUTATION: [usize; 16] = [2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8];
        let mut rounds = [[0usize; 16]; 7];
        let mut i = 0;
        while i < 16 {
            rounds[0][i] = i;
            i += 1;
        }
        let mut r = 1;
        while r < 7 {
            let mut i = 0;
            while i < 16 {
                rounds[r][i] = rounds[r - 1][PERMUTATION[i]];
                i += 1;
            }
            r += 1;
        }
        rounds
    }

    /// `blake3(prefix || input)` of up to eight inputs that fit one chunk with the prefix,
    /// from the chaining value `key` (blake3's IV, or a key with `keyed` set). Lanes from
    /// `used` on are ignored and their output is meaningless.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn eight(key: &[u32; 8], keyed: bool, prefix: &[u8], inputs: &[&[u8]; 8], used: usize) -> [[u8; 32]; 8] {
        // Each lane's input, prefix || input, zero-padded to whole 64-byte blocks.
        let mut buffers = [[0u8; CHUNK_LEN]; 8];
        let mut n_blocks = [0usize; 8];
        let mut last_len = [0u32; 8];
        let mode = if keyed { KEYED_HASH } else { 0 };
        for lane in 0..used {
            let len = prefix.len() + inputs[lane].len();
            assert!(len <= CHUNK_LEN, "an input of one chunk");
            buffers[lane][..prefix.len()].copy_from_slice(prefix);
            buffers[lane][prefix.len()..len].copy_from_slice(inputs[lane]);
            // An empty input is still one (empty) block.
            n_blocks[lane] = len.div_ceil(64).max(1);
            last_len[lane] = (len - (n_blocks[lane] - 1) * 64) as u32;
        }
        let most = n_blocks.iter().copied().max().unwrap_or(0);
        let mut cv: [__m256i; 8] = std::array::from_fn(|i| _mm256_set1_epi32(key[i] as i32));
        for block in 0..most {
            let mut flags = [mode as i32; 8];
            let mut block_len = [64i32; 8];
            let mut active = [0i32; 8];
            for lane in 0..used {
                if block >= n_blocks[lane] {
                    continue;
                }
                active[lane] = -1;
                let mut f = mode | if block == 0 { CHUNK_START } else { 0 };
                if block + 1 == n_blocks[lane] {
                    f |= CHUNK_END | ROOT;
                    block_len[lane] = last_len[lane] as i32;
                }
                flags[lane] = f as i32;
            }
            let words = transposed_block(&buffers, block * 64);
            let out = compress(&cv, &words, load8(&block_len), load8(&flags));
            let mask = load8(&active);
            for i in 0..8 {
                cv[i] = _mm256_blendv_epi8(cv[i], out[i], mask);
            }
        }
        // Rows back to lanes: lane l's eight hash words, little-endian as blake3 outputs.
        let rows = transpose(cv);
        let mut hashes = [[0u8; 32]; 8];
        for (hash, row) in hashes.iter_mut().zip(rows) {
            _mm256_storeu_si256(hash.as_mut_ptr().cast(), row);
        }
        hashes
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn load8(values: &[i32; 8]) -> __m256i {
        _mm256_loadu_si256(values.as_ptr().cast())
    }

    /// Word `w` of the block at `offset` of every lane, as vector `w`.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn transposed_block(buffers: &[[u8; CHUNK_LEN]; 8], offset: usize) -> [__m256i; 16] {
        let low: [__m256i; 8] = std::array::from_fn(|lane| _mm256_loadu_si256(buffers[lane][offset..].as_ptr().cast()));
        let high: [__m256i; 8] =
            std::array::from_fn(|lane| _mm256_loadu_si256(buffers[lane][offset + 32..].as_ptr().cast()));
        let (low, high) = (transpose(low), transpose(high));
        std::array::from_fn(|w| if w < 8 { low[w] } else { high[w - 8] })
    }

    /// An 8x8 transpose of 32-bit words: row `r`, element `c` goes to row `c`, element `r`.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn transpose(rows: [__m256i; 8]) -> [__m256i; 8] {
        let t0 = _mm256_unpacklo_epi32(rows[0], rows[1]);
        let t1 = _mm256_unpackhi_epi32(rows[0], rows[1]);
        let t2 = _mm256_unpacklo_epi32(rows[2], rows[3]);
        let t3 = _mm256_unpackhi_epi32(rows[2], rows[3]);
        let t4 = _mm256_unpacklo_epi32(rows[4], rows[5]);
        let t5 = _mm256_unpackhi_epi32(rows[4], rows[5]);
        let t6 = _mm256_unpacklo_epi32(rows[6], rows[7]);
        let t7 = _mm256_unpackhi_epi32(rows[6], rows[7]);
        let u0 = _mm256_unpacklo_epi64(t0, t2);
        let u1 = _mm256_unpackhi_epi64(t0, t2);
        let u2 = _mm256_unpacklo_epi64(t1, t3);
        let u3 = _mm256_unpackhi_epi64(t1, t3);
        let u4 = _mm256_unpacklo_epi64(t4, t6);
        let u5 = _mm256_unpackhi_epi64(t4, t6);
        let u6 = _mm256_unpacklo_epi64(t5, t7);
        let u7 = _mm256_unpackhi_epi64(t5, t7);
        [
            _mm256_permute2x128_si256(u0, u4, 0x20),
            _mm256_permute2x128_si256(u1, u5, 0x20),
            _mm256_permute2x128_si256(u2, u6, 0x20),
            _mm256_permute2x128_si256(u3, u7, 0x20),
            _mm256_permute2x128_si256(u0, u4, 0x31),
            _mm256_permute2x128_si256(u1, u5, 0x31),
            _mm256_permute2x128_si256(u2, u6, 0x31),
            _mm256_permute2x128_si256(u3, u7, 0x31),
        ]
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn rotate_right<const BITS: i32, const LEFT: i32>(x: __m256i) -> __m256i {
        _mm256_or_si256(_mm256_srli_epi32::<BITS>(x), _mm256_slli_epi32::<LEFT>(x))
    }

    /// One round's quarter function G on columns or diagonals `(a, b, c, d)`.
    #[inline]
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn g(v: &mut [__m256i; 16], a: usize, b: usize, c: usize, d: usize, x: __m256i, y: __m256i) {
        v[a] = _mm256_add_epi32(_mm256_add_epi32(v[a], v[b]), x);
        v[d] = rotate_right::<16, 16>(_mm256_xor_si256(v[d], v[a]));
        v[c] = _mm256_add_epi32(v[c], v[d]);
        v[b] = rotate_right::<12, 20>(_mm256_xor_si256(v[b], v[c]));
        v[a] = _mm256_add_epi32(_mm256_add_epi32(v[a], v[b]), y);
        v[d] = rotate_right::<8, 24>(_mm256_xor_si256(v[d], v[a]));
        v[c] = _mm256_add_epi32(v[c], v[d]);
        v[b] = rotate_right::<7, 25>(_mm256_xor_si256(v[b], v[c]));
    }

    /// The compression function on eight lanes, chunk counter 0, returning the eight
    /// chaining-value words (`v[i] ^ v[i + 8]`).
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn compress(cv: &[__m256i; 8], m: &[__m256i; 16], block_len: __m256i, flags: __m256i) -> [__m256i; 8] {
        let zero = _mm256_setzero_si256();
        let mut v = [
            cv[0],
            cv[1],
            cv[2],
            cv[3],
            cv[4],
            cv[5],
            cv[6],
            cv[7],
            _mm256_set1_epi32(IV[0] as i32),
            _mm256_set1_epi32(IV[1] as i32),
            _mm256_set1_epi32(IV[2] as i32),
            _mm256_set1_epi32(IV[3] as i32),
            zero,
            zero,
            block_len,
            flags,
        ];
        for s in &SCHEDULE {
            g(&mut v, 0, 4, 8, 12, m[s[0]], m[s[1]]);
            g(&mut v, 1, 5, 9, 13, m[s[2]], m[s[3]]);
            g(&mut v, 2, 6, 10, 14, m[s[4]], m[s[5]]);
            g(&mut v, 3, 7, 11, 15, m[s[6]], m[s[7]]);
            g(&mut v, 0, 5, 10, 15, m[s[8]], m[s[9]]);
            g(&mut v, 1, 6, 11, 12, m[s[10]], m[s[11]]);
            g(&mut v, 2, 7, 8, 13, m[s[12]], m[s[13]]);
            g(&mut v, 3, 4, 9, 14, m[s[14]], m[s[15]]);
        }
        std::array::from_fn(|i| _mm256_xor_si256(v[i], v[i + 8]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::Hash32;
    use crate::ledger::merkle::{self, leaf_hashes, node_hashes};

    fn sample() -> Vec<u8> {
        (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect()
    }

    /// Every length from empty to two chunks, in groups that mix lengths (lanes with
    /// different block counts), in groups of fewer than eight, and in random orders.
    #[test]
    fn eight_lanes_give_exactly_the_one_at_a_time_leaf_hash() {
        let bytes = sample();
        let events: Vec<&[u8]> = (0..=2100).map(|len| &bytes[len % 97..len % 97 + len]).collect();
        let expected: Vec<Hash32> = events.iter().map(|e| merkle::leaf_hash(e)).collect();
        assert_eq!(leaf_hashes(&events), expected);
        for n in 0..20 {
            let few: Vec<&[u8]> = events.iter().rev().step_by(37).take(n).copied().collect();
            let want: Vec<Hash32> = few.iter().map(|e| merkle::leaf_hash(e)).collect();
            assert_eq!(leaf_hashes(&few), want, "{n} events");
        }
        let mut shuffled = events.clone();
        let mut state = 7u64;
        for i in (1..shuffled.len()).rev() {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            shuffled.swap(i, (state >> 33) as usize % (i + 1));
        }
        let want: Vec<Hash32> = shuffled.iter().map(|e| merkle::leaf_hash(e)).collect();
        assert_eq!(leaf_hashes(&shuffled), want);
    }

    #[test]
    fn keyed_hashes_nodes_and_any_prefix_match_the_blake3_crate() {
        let bytes = sample();
        let key: [u8; 32] = std::array::from_fn(|i| (i * 7 + 3) as u8);
        let inputs: Vec<&[u8]> = (0..=1100).step_by(3).map(|len| &bytes[len..2 * len]).collect();
        for prefix in [&b""[..], b"\x01", &bytes[..63], &bytes[..64], &bytes[..1000]] {
            for keyed in [None, Some(&key)] {
                let want: Vec<[u8; 32]> = inputs
                    .iter()
                    .map(|input| {
                        let mut hasher = keyed.map_or_else(blake3::Hasher::new, blake3::Hasher::new_keyed);
                        hasher.update(prefix).update(input);
                        *hasher.finalize().as_bytes()
                    })
                    .collect();
                assert_eq!(
                    hash_many(keyed, prefix, &inputs),
                    want,
                    "prefix of {} bytes, keyed {}",
                    prefix.len(),
                    keyed.is_some()
                );
            }
        }
        let pairs: Vec<[u8; 64]> = (0..19).map(|i| std::array::from_fn(|j| bytes[i * 64 + j])).collect();
        let want: Vec<Hash32> = pairs
            .iter()
            .map(|p| merkle::node_hash(&Hash32(p[..32].try_into().unwrap()), &Hash32(p[32..].try_into().unwrap())))
            .collect();
        assert_eq!(node_hashes(&pairs), want);
    }
}
