//! blake3 of many short inputs at once. Verification hashes every event as its own
//! Merkle leaf, `blake3(0x00 || event)`, every tree node and every index entry: inputs of
//! one blake3 chunk (up to 1,024 bytes), each up to 16 compressions that depend on each
//! other, which no SIMD width speeds up for one input (blake3's own SIMD works across the
//! chunks of one long input, and its many-input function is not public API). Inputs side
//! by side in the 32-bit lanes of vector registers do speed up: this module runs the
//! BLAKE3 compression function (the BLAKE3 paper, §2.2) on sixteen single-chunk inputs at
//! once with AVX-512, or eight with AVX2. Longer inputs, and machines with neither, use
//! the `blake3` crate one at a time. The tests check every width against that crate.

// The lanes' layout and constants serve the x86-64 paths only; elsewhere every input goes
// through the `blake3` crate.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

/// blake3's chunk: an input (prefix included) this long or shorter is one chunk.
const CHUNK_LEN: usize = 1024;
/// blake3's block: the compression function's input.
const BLOCK_LEN: usize = 64;
/// How many blocks ahead of the one being compressed each lane's input is prefetched.
const PREFETCH_BLOCKS: usize = 2;

/// How many inputs go through the compression function side by side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Width {
    One,
    #[cfg(target_arch = "x86_64")]
    Eight,
    #[cfg(target_arch = "x86_64")]
    Sixteen,
}

impl Width {
    /// The widest this CPU runs.
    fn best() -> Width {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512bw") {
                return Width::Sixteen;
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                return Width::Eight;
            }
        }
        Width::One
    }
}

/// `blake3(prefix || input)` of each input (keyed with `key` when given), in order. The
/// inputs that fit one chunk with the prefix go sixteen (AVX-512) or eight (AVX2) at a
/// time when the CPU has it; the rest through the `blake3` crate.
pub fn hash_many(key: Option<&[u8; 32]>, prefix: &[u8], inputs: &[&[u8]]) -> Vec<[u8; 32]> {
    hash_many_at(Width::best(), key, prefix, inputs)
}

fn hash_many_at(width: Width, key: Option<&[u8; 32]>, prefix: &[u8], inputs: &[&[u8]]) -> Vec<[u8; 32]> {
    let one = |input: &[u8]| {
        let mut hasher = key.map_or_else(blake3::Hasher::new, blake3::Hasher::new_keyed);
        hasher.update(prefix);
        hasher.update(input);
        *hasher.finalize().as_bytes()
    };
    let mut out = vec![[0u8; 32]; inputs.len()];
    let short_max = CHUNK_LEN.saturating_sub(prefix.len());
    #[cfg(target_arch = "x86_64")]
    if width != Width::One && prefix.len() < CHUNK_LEN {
        let mut short: Vec<usize> = (0..inputs.len()).filter(|&i| inputs[i].len() <= short_max).collect();
        // Lanes of one group then need about as many compressions as each other.
        short.sort_by_key(|&i| std::cmp::Reverse(inputs[i].len()));
        let key_words: [u32; 8] = key.map_or(IV, |k| {
            std::array::from_fn(|i| u32::from_le_bytes(k[4 * i..4 * i + 4].try_into().expect("4 bytes")))
        });
        let lanes = if width == Width::Sixteen { 16 } else { 8 };
        for group in short.chunks(lanes) {
            let mut hashes = [[0u8; 32]; 16];
            let mut group_inputs: [&[u8]; 16] = [&[]; 16];
            for (slot, &i) in group_inputs.iter_mut().zip(group) {
                *slot = inputs[i];
            }
            let job = Lanes::new(key.is_some(), prefix, &group_inputs[..group.len()]);
            match width {
                // SAFETY: AVX-512F and AVX-512BW were detected at run time (`Width::best`, or the tests).
                Width::Sixteen => unsafe { avx512::sixteen(&key_words, &job, &mut hashes) },
                // SAFETY: AVX2 was detected at run time (`Width::best`, or the tests).
                _ => unsafe { avx2::eight(&key_words, &job, (&mut hashes[..8]).try_into().expect("8")) },
            }
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
    let _ = width;
    for (slot, input) in out.iter_mut().zip(inputs) {
        *slot = one(input);
    }
    out
}

const IV: [u32; 8] = [0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19];
const CHUNK_START: u32 = 1;
const CHUNK_END: u32 = 2;
const ROOT: u32 = 8;
const KEYED_HASH: u32 = 16;
/// The message word order of each of the seven rounds: the identity, then the BLAKE3
/// permutation applied once more per round.
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

/// Up to sixteen single-chunk inputs, each `prefix || input`, laid out for the lanes:
/// how many 64-byte blocks each needs, and each block's bytes read in place from the
/// input where the block lies wholly inside it (no copy), else from a zero-padded copy.
struct Lanes<'a> {
    prefix: &'a [u8],
    inputs: &'a [&'a [u8]],
    mode: u32,
    n_blocks: [usize; 16],
    last_len: [u32; 16],
    most: usize,
}

impl<'a> Lanes<'a> {
    fn new(keyed: bool, prefix: &'a [u8], inputs: &'a [&'a [u8]]) -> Lanes<'a> {
        assert!(inputs.len() <= 16, "at most sixteen lanes");
        let mut n_blocks = [0usize; 16];
        let mut last_len = [0u32; 16];
        for (lane, input) in inputs.iter().enumerate() {
            let len = prefix.len() + input.len();
            assert!(len <= CHUNK_LEN, "an input of one chunk");
            // An empty input is still one (empty) block.
            n_blocks[lane] = len.div_ceil(BLOCK_LEN).max(1);
            last_len[lane] = (len - (n_blocks[lane] - 1) * BLOCK_LEN) as u32;
        }
        let most = n_blocks.iter().copied().max().unwrap_or(0);
        Lanes { prefix, inputs, mode: if keyed { KEYED_HASH } else { 0 }, n_blocks, last_len, most }
    }

    /// The 64 bytes of block `block` of `lane`: in place when the block lies wholly in
    /// the input, else copied with zero padding into `scratch`. A lane past its input
    /// (or unused) reads zeros; its result is masked off.
    fn block<'s>(&self, lane: usize, block: usize, scratch: &'s mut [u8; BLOCK_LEN]) -> &'s [u8; BLOCK_LEN]
    where
        'a: 's,
    {
        let Some(input) = self.inputs.get(lane).filter(|_| block < self.n_blocks[lane]) else {
            *scratch = [0; BLOCK_LEN];
            return scratch;
        };
        let (p, start) = (self.prefix.len(), block * BLOCK_LEN);
        if start >= p && start - p + BLOCK_LEN <= input.len() {
            return input[start - p..start - p + BLOCK_LEN].try_into().expect("64 bytes");
        }
        *scratch = [0; BLOCK_LEN];
        let from_prefix = p.saturating_sub(start).min(BLOCK_LEN);
        if from_prefix > 0 {
            scratch[..from_prefix].copy_from_slice(&self.prefix[start..start + from_prefix]);
        }
        if from_prefix < BLOCK_LEN {
            let at = start + from_prefix - p;
            let n = (BLOCK_LEN - from_prefix).min(input.len().saturating_sub(at));
            scratch[from_prefix..from_prefix + n].copy_from_slice(&input[at..at + n]);
        }
        scratch
    }

    /// Each lane's flags for block `block`, its length, and whether the lane still has
    /// that block (its chaining value moves only then).
    fn flags(&self, block: usize) -> ([i32; 16], [i32; 16], [i32; 16]) {
        let mut flags = [self.mode as i32; 16];
        let mut block_len = [BLOCK_LEN as i32; 16];
        let mut active = [0i32; 16];
        for lane in 0..self.inputs.len() {
            if block >= self.n_blocks[lane] {
                continue;
            }
            active[lane] = -1;
            let mut f = self.mode | if block == 0 { CHUNK_START } else { 0 };
            if block + 1 == self.n_blocks[lane] {
                f |= CHUNK_END | ROOT;
                block_len[lane] = self.last_len[lane] as i32;
            }
            flags[lane] = f as i32;
        }
        (flags, block_len, active)
    }
}

/// The BLAKE3 round function G and the compression function (chunk counter 0) over one
/// vector type: one text for AVX2's eight lanes and AVX-512's sixteen, written with that
/// instruction set's add, xor, broadcast and zero, and the invoking module's `rotr16`,
/// `rotr12`, `rotr8` and `rotr7` (AVX-512 rotates in one instruction, AVX2 in three). A
/// macro, not a generic over a trait: trait methods cannot carry `target_feature`, so
/// they would not inline into the SIMD loop.
#[cfg(target_arch = "x86_64")]
macro_rules! compression {
    ($feature:literal, $vec:ty, $add:ident, $xor:ident, $set1:ident, $zero:ident) => {
        /// One round's quarter function G on columns or diagonals `(a, b, c, d)`.
        #[inline]
        #[target_feature(enable = $feature)]
        #[allow(clippy::too_many_arguments)]
        unsafe fn g(v: &mut [$vec; 16], a: usize, b: usize, c: usize, d: usize, x: $vec, y: $vec) {
            v[a] = $add($add(v[a], v[b]), x);
            v[d] = rotr16($xor(v[d], v[a]));
            v[c] = $add(v[c], v[d]);
            v[b] = rotr12($xor(v[b], v[c]));
            v[a] = $add($add(v[a], v[b]), y);
            v[d] = rotr8($xor(v[d], v[a]));
            v[c] = $add(v[c], v[d]);
            v[b] = rotr7($xor(v[b], v[c]));
        }

        /// The compression function on every lane, chunk counter 0, returning the eight
        /// chaining-value words (`v[i] ^ v[i + 8]`).
        #[inline]
        #[target_feature(enable = $feature)]
        unsafe fn compress(cv: &[$vec; 8], m: &[$vec; 16], block_len: $vec, flags: $vec) -> [$vec; 8] {
            let zero = $zero();
            let mut v = [
                cv[0],
                cv[1],
                cv[2],
                cv[3],
                cv[4],
                cv[5],
                cv[6],
                cv[7],
                $set1(IV[0] as i32),
                $set1(IV[1] as i32),
                $set1(IV[2] as i32),
                $set1(IV[3] as i32),
                zero,
                zero,
                block_len,
                flags,
            ];
            // Seven rounds written out, so each message word's index is a constant.
            round::<0>(&mut v, m);
            round::<1>(&mut v, m);
            round::<2>(&mut v, m);
            round::<3>(&mut v, m);
            round::<4>(&mut v, m);
            round::<5>(&mut v, m);
            round::<6>(&mut v, m);
            std::array::from_fn(|i| $xor(v[i], v[i + 8]))
        }

        /// Round `R`: G on the four columns, then on the four diagonals.
        #[inline]
        #[target_feature(enable = $feature)]
        unsafe fn round<const R: usize>(v: &mut [$vec; 16], m: &[$vec; 16]) {
            let s = &SCHEDULE[R];
            g(v, 0, 4, 8, 12, m[s[0]], m[s[1]]);
            g(v, 1, 5, 9, 13, m[s[2]], m[s[3]]);
            g(v, 2, 6, 10, 14, m[s[4]], m[s[5]]);
            g(v, 3, 7, 11, 15, m[s[6]], m[s[7]]);
            g(v, 0, 5, 10, 15, m[s[8]], m[s[9]]);
            g(v, 1, 6, 11, 12, m[s[10]], m[s[11]]);
            g(v, 2, 7, 8, 13, m[s[12]], m[s[13]]);
            g(v, 3, 4, 9, 14, m[s[14]], m[s[15]]);
        }
    };
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{Lanes, BLOCK_LEN, IV, SCHEDULE};
    use std::arch::x86_64::*;

    /// The hashes of `job`'s first eight lanes from the chaining value `key` (blake3's
    /// IV, or a key), into `out`. Lanes past the job's inputs come out meaningless.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn eight(key: &[u32; 8], job: &Lanes<'_>, out: &mut [[u8; 32]; 8]) {
        let mut cv: [__m256i; 8] = std::array::from_fn(|i| _mm256_set1_epi32(key[i] as i32));
        let mut scratch = [[0u8; BLOCK_LEN]; 8];
        for block in 0..job.most {
            let (flags, block_len, active) = job.flags(block);
            let mut rows = [std::ptr::null::<u8>(); 8];
            for (lane, (row, scratch)) in rows.iter_mut().zip(scratch.iter_mut()).enumerate() {
                *row = job.block(lane, block, scratch).as_ptr();
            }
            let words = transposed_block(&rows);
            let out = compress(&cv, &words, load8(&block_len), load8(&flags));
            let mask = load8(&active);
            for i in 0..8 {
                cv[i] = _mm256_blendv_epi8(cv[i], out[i], mask);
            }
        }
        // Rows back to lanes: lane l's eight hash words, little-endian as blake3 outputs.
        let rows = transpose(cv);
        for (hash, row) in out.iter_mut().zip(rows) {
            _mm256_storeu_si256(hash.as_mut_ptr().cast(), row);
        }
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn load8(values: &[i32; 16]) -> __m256i {
        _mm256_loadu_si256(values.as_ptr().cast())
    }

    /// Word `w` of every lane's 64-byte block (at `rows[lane]`), as vector `w`.
    ///
    /// # Safety
    /// Each pointer must point at 64 readable bytes.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn transposed_block(rows: &[*const u8; 8]) -> [__m256i; 16] {
        let low: [__m256i; 8] = std::array::from_fn(|lane| _mm256_loadu_si256(rows[lane].cast()));
        let high: [__m256i; 8] = std::array::from_fn(|lane| _mm256_loadu_si256(rows[lane].add(32).cast()));
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

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn rotr16(x: __m256i) -> __m256i {
        rotate_right::<16, 16>(x)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn rotr12(x: __m256i) -> __m256i {
        rotate_right::<12, 20>(x)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn rotr8(x: __m256i) -> __m256i {
        rotate_right::<8, 24>(x)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn rotr7(x: __m256i) -> __m256i {
        rotate_right::<7, 25>(x)
    }

    compression!("avx2", __m256i, _mm256_add_epi32, _mm256_xor_si256, _mm256_set1_epi32, _mm256_setzero_si256);
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{Lanes, BLOCK_LEN, CHUNK_END, CHUNK_START, IV, PREFETCH_BLOCKS, ROOT, SCHEDULE};
    use std::arch::x86_64::*;

    /// The hashes of `job`'s sixteen lanes from the chaining value `key` (blake3's IV,
    /// or a key), into `out`. Lanes past the job's inputs come out meaningless.
    ///
    /// # Safety
    /// The CPU must support AVX-512F and AVX-512BW.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub unsafe fn sixteen(key: &[u32; 8], job: &Lanes<'_>, out: &mut [[u8; 32]; 16]) {
        let mut cv: [__m512i; 8] = std::array::from_fn(|i| _mm512_set1_epi32(key[i] as i32));
        let load = |values: &[i32; 16]| _mm512_loadu_si512(values.as_ptr().cast());
        // Each lane's block count (0 past the inputs) and last block's length, as vectors:
        // the flags of every block come from them without a store and reload per block.
        let n_blocks = load(&std::array::from_fn(|l| if l < job.inputs.len() { job.n_blocks[l] as i32 } else { 0 }));
        let last_len = load(&std::array::from_fn(|l| job.last_len[l] as i32));
        let end_flags = _mm512_set1_epi32((CHUNK_END | ROOT) as i32);
        for block in 0..job.most {
            let active = _mm512_cmpgt_epi32_mask(n_blocks, _mm512_set1_epi32(block as i32));
            let last = _mm512_cmpeq_epi32_mask(n_blocks, _mm512_set1_epi32(block as i32 + 1));
            let start = if block == 0 { CHUNK_START } else { 0 };
            let first_flags = _mm512_set1_epi32((job.mode | start) as i32);
            let flags = _mm512_mask_or_epi32(first_flags, last, first_flags, end_flags);
            let block_len = _mm512_mask_blend_epi32(last, _mm512_set1_epi32(BLOCK_LEN as i32), last_len);
            // Lane l's block as row l, then transposed: vector w holds word w of every lane.
            let mut rows = [_mm512_setzero_si512(); 16];
            for (lane, row) in rows.iter_mut().enumerate() {
                *row = masked_block(job, lane, block);
                if let Some(input) = job.inputs.get(lane) {
                    _mm_prefetch::<_MM_HINT_T0>(
                        input.as_ptr().wrapping_add((block + PREFETCH_BLOCKS) * BLOCK_LEN).cast(),
                    );
                }
            }
            let words = transpose(rows);
            let compressed = compress(&cv, &words, block_len, flags);
            for i in 0..8 {
                cv[i] = _mm512_mask_blend_epi32(active, cv[i], compressed[i]);
            }
        }
        // Rows back to lanes: word vectors 0-7 (8-15 zero), transposed, give each lane its
        // eight hash words in the low half of its row, little-endian as blake3 outputs.
        let rows = transpose(std::array::from_fn(|i| if i < 8 { cv[i] } else { _mm512_setzero_si512() }));
        for (hash, row) in out.iter_mut().zip(rows) {
            _mm256_storeu_si256(hash.as_mut_ptr().cast(), _mm512_castsi512_si256(row));
        }
    }

    /// Block `block` of lane `lane` of `job` (prefix, then input), loaded straight from
    /// the prefix and the input under byte masks, with no copy into scratch (whose small
    /// stores a wide load would wait on). A lane past the inputs is all zero.
    ///
    /// # Safety
    /// The CPU must support AVX-512F and AVX-512BW.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn masked_block(job: &Lanes<'_>, lane: usize, block: usize) -> __m512i {
        let Some(input) = job.inputs.get(lane) else { return _mm512_setzero_si512() };
        let (at, prefix_len) = ((block * BLOCK_LEN) as i64, job.prefix.len() as i64);
        let row = block_part(input, at - prefix_len);
        match at < prefix_len {
            true => _mm512_or_si512(row, block_part(job.prefix, at)),
            false => row,
        }
    }

    /// The 64 bytes of `bytes` from offset `start` (which may lie before or past them),
    /// bytes outside `bytes` zero and never read.
    ///
    /// # Safety
    /// The CPU must support AVX-512F and AVX-512BW.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn block_part(bytes: &[u8], start: i64) -> __m512i {
        let lo = (-start).clamp(0, BLOCK_LEN as i64);
        let hi = (bytes.len() as i64 - start).clamp(0, BLOCK_LEN as i64);
        let mask = match hi > lo {
            true => (u64::MAX >> (BLOCK_LEN as i64 - (hi - lo))) << lo,
            false => 0,
        };
        // Masked-off bytes are not read, so the address may lie outside `bytes`.
        _mm512_maskz_loadu_epi8(mask, bytes.as_ptr().wrapping_offset(start as isize).cast())
    }

    /// A 16x16 transpose of 32-bit words: row `r`, element `c` goes to row `c`, element
    /// `r`. Pairs and quads within each 128-bit quarter, then the quarters across rows.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn transpose(r: [__m512i; 16]) -> [__m512i; 16] {
        let mut a = [_mm512_setzero_si512(); 16];
        for i in 0..8 {
            a[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
            a[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
        }
        // b[4i + j], quarter q: column 4q + j of rows 4i .. 4i + 3.
        let mut b = [_mm512_setzero_si512(); 16];
        for i in 0..4 {
            b[4 * i] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
            b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
            b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
            b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
        }
        // Column 4q + j gathers quarter q of b[j], b[4 + j], b[8 + j], b[12 + j].
        let mut out = [_mm512_setzero_si512(); 16];
        for j in 0..4 {
            let even01 = _mm512_shuffle_i32x4::<0x88>(b[j], b[4 + j]);
            let odd01 = _mm512_shuffle_i32x4::<0xDD>(b[j], b[4 + j]);
            let even23 = _mm512_shuffle_i32x4::<0x88>(b[8 + j], b[12 + j]);
            let odd23 = _mm512_shuffle_i32x4::<0xDD>(b[8 + j], b[12 + j]);
            out[j] = _mm512_shuffle_i32x4::<0x88>(even01, even23);
            out[4 + j] = _mm512_shuffle_i32x4::<0x88>(odd01, odd23);
            out[8 + j] = _mm512_shuffle_i32x4::<0xDD>(even01, even23);
            out[12 + j] = _mm512_shuffle_i32x4::<0xDD>(odd01, odd23);
        }
        out
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn rotr16(x: __m512i) -> __m512i {
        _mm512_ror_epi32::<16>(x)
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn rotr12(x: __m512i) -> __m512i {
        _mm512_ror_epi32::<12>(x)
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn rotr8(x: __m512i) -> __m512i {
        _mm512_ror_epi32::<8>(x)
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn rotr7(x: __m512i) -> __m512i {
        _mm512_ror_epi32::<7>(x)
    }

    compression!("avx512f", __m512i, _mm512_add_epi32, _mm512_xor_si512, _mm512_set1_epi32, _mm512_setzero_si512);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::Hash32;
    use crate::ledger::merkle::{self, leaf_hashes, node_hashes};

    /// Every width this CPU runs, so each SIMD path is checked where it can run.
    fn widths() -> Vec<Width> {
        let mut out = vec![Width::One];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                out.push(Width::Eight);
            }
            if std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512bw") {
                out.push(Width::Sixteen);
            }
        }
        out
    }

    /// Every length from empty to past one chunk, under every width, with the leaf and
    /// node prefixes and a long one, keyed and not, in groups that mix lengths.
    #[test]
    fn every_width_gives_exactly_the_blake3_crate_hash() {
        let bytes = sample();
        let inputs: Vec<&[u8]> = (0..=1030).map(|len| &bytes[len % 89..len % 89 + len]).collect();
        let key: [u8; 32] = std::array::from_fn(|i| (i * 11 + 5) as u8);
        for prefix in [&b""[..], b"\x00", &bytes[..63], &bytes[..64], &bytes[..65], &bytes[..130]] {
            for keyed in [None, Some(&key)] {
                let want: Vec<[u8; 32]> = inputs
                    .iter()
                    .map(|input| {
                        let mut hasher = keyed.map_or_else(blake3::Hasher::new, blake3::Hasher::new_keyed);
                        hasher.update(prefix).update(input);
                        *hasher.finalize().as_bytes()
                    })
                    .collect();
                for width in widths() {
                    let got = hash_many_at(width, keyed, prefix, &inputs);
                    assert_eq!(got, want, "{width:?}, prefix of {} bytes, keyed {}", prefix.len(), keyed.is_some());
                    // Groups of every size below a full one.
                    for n in 1..17 {
                        assert_eq!(hash_many_at(width, keyed, prefix, &inputs[500..500 + n]), want[500..500 + n]);
                    }
                }
            }
        }
    }

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
