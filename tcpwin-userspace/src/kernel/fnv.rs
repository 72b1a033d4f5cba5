//! A fast 64-bit hash of bytes (FNV-1a over 8-byte words, then the tail): telling one build's
//! object or one kernel's BTF from another for the iterator cache, not resisting an adversary
//! (the files are root's). Std only: `build.rs` includes this file to hash the object it embeds.

#[derive(Clone, Copy)]
pub struct Fnv(pub u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    /// Adds `bytes`; a stream fed in pieces hashes as one when every piece but the last is a
    /// multiple of 8 bytes long.
    pub fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let v = u64::from_le_bytes(w.try_into().expect("8 bytes"));
            self.0 = (self.0 ^ v).wrapping_mul(0x0000_0100_0000_01b3);
        }
        for b in words.remainder() {
            self.0 = (self.0 ^ *b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// The hash of `bytes` at once.
pub fn hash(bytes: &[u8]) -> u64 {
    let mut h = Fnv::default();
    h.write(bytes);
    h.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_tells_contents_apart_wherever_they_differ() {
        let a = vec![7u8; 1000];
        for i in [0, 7, 8, 999] {
            let mut b = a.clone();
            b[i] ^= 1;
            assert_ne!(hash(&a), hash(&b), "byte {i}");
        }
        assert_ne!(hash(&a[..999]), hash(&a));
        assert_eq!(hash(&a), hash(&a.clone()));
    }

    /// Fed in pieces of whole words, the stream hashes as one (the BTF is read 64 KiB at a time).
    #[test]
    fn pieces_of_whole_words_hash_as_one() {
        let a: Vec<u8> = (0..1003u32).map(|i| (i * 7) as u8).collect();
        let mut h = Fnv::default();
        for piece in a.chunks(64) {
            h.write(piece);
        }
        assert_eq!(h.0, hash(&a));
    }
}
