//! The environments' one source of randomness: the RFC 8439 ChaCha20 keystream keyed by
//! the challenge id (nonce = 12 zero bytes, block counter from 0), read as little-endian
//! u64 words. Sampling methods are defined here, not borrowed from `rand`, so the same id
//! gives the same task on every machine and every version of every crate; any change
//! here changes tasks and so needs new env versions (the golden fixtures catch it).

use crate::bytes::ChallengeId;
use chacha20::cipher::{KeyIvInit, StreamCipher};
use chacha20::ChaCha20;

const BUFFER_BYTES: usize = 256;

pub struct Prng {
    cipher: ChaCha20,
    buffer: [u8; BUFFER_BYTES],
    position: usize,
}

impl Prng {
    pub fn new(challenge_id: &ChallengeId) -> Prng {
        Prng {
            cipher: ChaCha20::new(&challenge_id.0.into(), &[0u8; 12].into()),
            buffer: [0; BUFFER_BYTES],
            position: BUFFER_BYTES,
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        if self.position == BUFFER_BYTES {
            self.buffer = [0; BUFFER_BYTES];
            self.cipher.apply_keystream(&mut self.buffer);
            self.position = 0;
        }
        let word = u64::from_le_bytes(self.buffer[self.position..self.position + 8].try_into().expect("8 bytes"));
        self.position += 8;
        word
    }

    /// Uniform in `0..n`, without bias, by Lemire's multiply-shift method
    /// ("Fast Random Integer Generation in an Interval", 2019): `m = word * n` as a
    /// 128-bit product; if its low 64 bits are below `2^64 mod n` the word is drawn
    /// again; the answer is the high 64 bits. Divides only on that rare path.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0) has no values");
        let mut product = u128::from(self.next_u64()) * u128::from(n);
        if (product as u64) < n {
            let threshold = n.wrapping_neg() % n;
            while (product as u64) < threshold {
                product = u128::from(self.next_u64()) * u128::from(n);
            }
        }
        (product >> 64) as u64
    }

    /// Uniform in `low..=high`.
    pub fn range_inclusive(&mut self, low: u64, high: u64) -> u64 {
        assert!(low <= high);
        low + self.below(high - low + 1)
    }

    /// True with probability `numerator / denominator`.
    pub fn chance(&mut self, numerator: u64, denominator: u64) -> bool {
        self.below(denominator) < numerator
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::Hash32;

    #[test]
    fn keystream_matches_rfc8439_zero_key_vector() {
        // RFC 8439 §2.3.2-style check: key 0, nonce 0, counter 0, first 8 bytes of
        // the keystream are 76 b8 e0 ad a0 f1 3d 90 (the classic ChaCha20 test vector).
        let mut prng = Prng::new(&Hash32([0; 32]));
        assert_eq!(prng.next_u64().to_le_bytes(), [0x76, 0xb8, 0xe0, 0xad, 0xa0, 0xf1, 0x3d, 0x90]);
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut prng = Prng::new(&Hash32([7; 32]));
        let mut seen = [false; 7];
        for _ in 0..1000 {
            let x = prng.below(7);
            assert!(x < 7);
            seen[x as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }
}
