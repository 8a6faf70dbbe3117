//! Proof of work: what a newcomer computes before it gets a place, so that each place costs a
//! farm real computing time. The interface is public (native apps and Cloudflare-mode pages
//! solve it): a nonce solves a seed at `bits` when SHA-256 of the bytes of the seed and then the
//! nonce (a decimal string) starts with at least `bits` zero bits. A solver tries 2^bits nonces
//! on average; the proxy checks an answer with one hash.
//!
//! An address that keeps asking for seeds pays more for each: past its free seeds a minute,
//! every doubling of what it asked adds a bit, which doubles the work of each seed. A person
//! asks for a seed or two; a farm on one address asking 64 times its share pays 2^6 = 64 times
//! a person's work for each of its places past the first doublings.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use crate::clock::Millis;

/// A nonce is a decimal number of at most this many digits (every `u64` fits).
pub const MAX_NONCE_DIGITS: usize = 20;

/// The first `bits` bits of SHA-256 of `seed` then `nonce` are zero, and the nonce is a decimal
/// string (digits only, no sign, at most [`MAX_NONCE_DIGITS`]).
pub fn solves(seed: &str, nonce: &str, bits: u8) -> bool {
    let decimal = !nonce.is_empty()
        && nonce.len() <= MAX_NONCE_DIGITS
        && nonce.bytes().all(|b| b.is_ascii_digit());
    decimal && leading_zero_bits(&digest(seed, nonce)) >= u32::from(bits)
}

fn digest(seed: &str, nonce: &str) -> [u8; 32] {
    Sha256::new()
        .chain_update(seed.as_bytes())
        .chain_update(nonce.as_bytes())
        .finalize()
        .into()
}

pub fn leading_zero_bits(hash: &[u8]) -> u32 {
    let mut zeros = 0;
    for &byte in hash {
        if byte != 0 {
            return zeros + byte.leading_zeros();
        }
        zeros += 8;
    }
    zeros
}

/// The first nonce (counting from `from`) that solves `seed` at `bits`: what a client does; here
/// for tests, the load scripts' farm and the cost measurements.
pub fn solve(seed: &str, bits: u8, from: u64) -> u64 {
    let mut nonce = from;
    let mut text = String::with_capacity(MAX_NONCE_DIGITS);
    loop {
        text.clear();
        text.push_str(&nonce.to_string());
        if solves(seed, &text, bits) {
            return nonce;
        }
        nonce = nonce.wrapping_add(1);
    }
}

/// How the difficulty rises for an address that keeps asking for seeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Escalation {
    /// `proof_of_work.difficulty_bits`: what a person pays.
    pub base_bits: u8,
    /// `proof_of_work.free_seeds_per_minute`: seeds an address gets at the base a minute; 0 =
    /// never rises.
    pub free_per_minute: u32,
    /// `proof_of_work.max_difficulty_bits`: the ceiling.
    pub max_bits: u8,
}

impl Escalation {
    /// The difficulty of the `asked`-th seed an address asked for this minute (1-based).
    pub fn bits(&self, asked: u32) -> u8 {
        if self.free_per_minute == 0 || asked <= self.free_per_minute {
            return self.base_bits;
        }
        // ceil(log2(asked / free)): +1 once over the free share, +2 past twice it, ...
        let ratio = asked.div_ceil(self.free_per_minute);
        let extra = u32::BITS - (ratio - 1).leading_zeros();
        let bits = u32::from(self.base_bits).saturating_add(extra);
        u8::try_from(bits)
            .unwrap_or(u8::MAX)
            .min(self.max_bits.max(self.base_bits))
    }
}

/// Addresses tracked at most; a flood of addresses starts the count over rather than growing.
const TRACKED_ADDRESSES: usize = 100_000;
const MINUTE_MS: Millis = 60_000;

/// Seeds asked per address in the current minute (a fixed window, on this instance).
#[derive(Debug, Default)]
pub struct SeedCounts {
    minute: Millis,
    asked: HashMap<String, u32>,
}

impl SeedCounts {
    /// Counts one more seed for `address` at `now`; how many it asked this minute, this one
    /// included.
    pub fn ask(&mut self, address: &str, now: Millis) -> u32 {
        let minute = now.div_euclid(MINUTE_MS);
        if minute != self.minute || self.asked.len() >= TRACKED_ADDRESSES {
            self.minute = minute;
            self.asked.clear();
        }
        let asked = self.asked.entry(address.to_owned()).or_insert(0);
        *asked = asked.saturating_add(1);
        *asked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_zero_bits_count_across_bytes() {
        assert_eq!(leading_zero_bits(&[0xff]), 0);
        assert_eq!(leading_zero_bits(&[0x01]), 7);
        assert_eq!(leading_zero_bits(&[0x00, 0x00, 0x10]), 19);
        assert_eq!(leading_zero_bits(&[0x00; 32]), 256);
    }

    #[test]
    fn a_solution_holds_for_its_seed_and_bits_only() {
        let nonce = solve("seed-a", 12, 0).to_string();
        assert!(solves("seed-a", &nonce, 12));
        assert!(solves("seed-a", &nonce, 0));
        let hash = digest("seed-a", &nonce);
        let exact = leading_zero_bits(&hash);
        assert!(!solves("seed-a", &nonce, u8::try_from(exact + 1).unwrap()));
        // The same nonce is no solution for another seed (fixed inputs: this holds or fails
        // the same every run).
        assert!(!solves("seed-b", &nonce, 12));
    }

    #[test]
    fn the_hash_is_of_the_seed_then_the_nonce_as_text() {
        // SHA-256("abc"): the interface's bytes are the two strings concatenated.
        let hash = digest("ab", "c");
        assert_eq!(hash[..4], [0xba, 0x78, 0x16, 0xbf]);
    }

    #[test]
    fn only_decimal_nonces_count() {
        let nonce = solve("s", 4, 0).to_string();
        assert!(solves("s", &nonce, 4));
        for bad in ["", "-1", "+1", "1e3", " 1", "0x1f", &"1".repeat(21)] {
            assert!(!solves("s", bad, 0), "{bad:?}");
        }
    }

    #[test]
    fn difficulty_rises_a_bit_per_doubling_past_the_free_share() {
        let rule = Escalation {
            base_bits: 16,
            free_per_minute: 4,
            max_bits: 24,
        };
        let bits: Vec<u8> = [1, 4, 5, 8, 9, 16, 17, 32, 64, 1024, u32::MAX]
            .iter()
            .map(|&n| rule.bits(n))
            .collect();
        assert_eq!(bits, [16, 16, 17, 17, 18, 18, 19, 19, 20, 24, 24]);
        let flat = Escalation {
            free_per_minute: 0,
            ..rule
        };
        assert_eq!(flat.bits(1_000_000), 16);
    }

    #[test]
    fn seeds_are_counted_per_address_and_minute() {
        let mut counts = SeedCounts::default();
        assert_eq!(counts.ask("a", 1_000), 1);
        assert_eq!(counts.ask("a", 59_999), 2);
        assert_eq!(counts.ask("b", 59_999), 1);
        assert_eq!(counts.ask("a", 60_000), 1, "a new minute");
    }
}
