//! A keyed hash for the reassembler's connection maps, looked up twice per segment:
//! std's SipHash-1-3 cost ~4k instructions an exchange of a cluster's many small
//! messages. Each word is mixed by a folded 64x64->128-bit multiply (ahash's fallback,
//! foldhash) with keys drawn once per process from std's `RandomState`, so a hostile
//! capture cannot choose addresses that collide (lookups stay O(1), time linear).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

const PI: [u64; 2] = [0x243f_6a88_85a3_08d3, 0x1319_8a2e_0370_7344];

/// The high and low halves of the 128-bit product, xored.
#[inline]
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// Builds `Mix` hashers with this map's keys (random per process).
#[derive(Clone, Copy)]
pub struct Keyed {
    keys: [u64; 2],
}

impl Default for Keyed {
    fn default() -> Self {
        let random = RandomState::new();
        Keyed {
            keys: [random.hash_one(PI[0]) ^ PI[1], random.hash_one(PI[1]) | 1],
        }
    }
}

impl BuildHasher for Keyed {
    type Hasher = Mix;
    #[inline]
    fn build_hasher(&self) -> Mix {
        Mix {
            h: self.keys[0],
            key: self.keys[1],
        }
    }
}

pub struct Mix {
    h: u64,
    key: u64,
}

impl Hasher for Mix {
    #[inline]
    fn write_u64(&mut self, word: u64) {
        self.h = fold(self.h ^ word, self.key);
    }

    #[inline]
    fn write_u32(&mut self, word: u32) {
        self.write_u64(u64::from(word));
    }

    #[inline]
    fn write_usize(&mut self, word: usize) {
        self.write_u64(word as u64);
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.write_u64(u64::from_le_bytes(c.try_into().unwrap_or_default()));
        }
        let rest = chunks.remainder();
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        // (the length: "ab" and "ab\0" differ)
        self.write_u64(u64::from_le_bytes(last) ^ ((bytes.len() as u64) << 56));
    }

    #[inline]
    fn finish(&self) -> u64 {
        fold(self.h, self.key ^ PI[0])
    }
}

/// A `HashMap` hashed by `Mix`.
pub type Map<K, V> = std::collections::HashMap<K, V, Keyed>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hash;

    fn hash<T: Hash>(b: &Keyed, v: &T) -> u64 {
        b.hash_one(v)
    }

    #[test]
    fn same_keys_same_hash_and_words_matter() {
        let b = Keyed::default();
        assert_eq!(hash(&b, &(1u64, 2u64)), hash(&b, &(1u64, 2u64)));
        assert_ne!(hash(&b, &(1u64, 2u64)), hash(&b, &(2u64, 1u64)));
        assert_ne!(hash(&b, &b"ab".to_vec()), hash(&b, &b"ab\0".to_vec()));
        // (keys differ per builder: another process, another table)
        assert_ne!(hash(&b, &7u64), hash(&Keyed::default(), &7u64));
    }

    #[test]
    fn a_map_works() {
        let mut m: Map<u64, usize> = Map::default();
        for i in 0..10_000u64 {
            m.insert(i.wrapping_mul(0x1_0000_0000), i as usize);
        }
        for i in 0..10_000u64 {
            assert_eq!(m.get(&i.wrapping_mul(0x1_0000_0000)), Some(&(i as usize)));
        }
    }
}
