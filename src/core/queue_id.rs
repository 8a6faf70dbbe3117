//! The queue id: what a visitor reads out to support, and what the operator looks up
//! (`GET /admin/visitors/{id}`). Derived from the visitor id by a one-way hash, so it names a
//! visitor without being one: every action (poll, leave, claim a pass) needs the sealed cookie,
//! and the visitor id inside it (128 random bits) cannot be recovered from 60 bits of its hash.
//!
//! The hash is SHA-1 because Redis scripts have it (`redis.sha1hex`): the Redis store keys its
//! index by the same 15 hex digits (`QueueId::key`) the Rust side computes.

use std::fmt;

/// Put in front of the visitor id before hashing, so the queue id is no SHA-1 found elsewhere.
/// The Redis scripts use the same (src/store/lua/common.lua, `queue_key`).
pub const DOMAIN: &str = "waitroom queue id:";

/// Crockford's base 32: no I, L, O or U, so it reads aloud and copies without doubt.
const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// 60 bits: 12 characters of base 32, shown as three groups of four.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QueueId(u64);

impl QueueId {
    pub fn of(visitor_id: &str) -> Self {
        let mut hash = sha1_smol::Sha1::new();
        hash.update(DOMAIN.as_bytes());
        hash.update(visitor_id.as_bytes());
        let digest = hash.digest().bytes();
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        QueueId(u64::from_be_bytes(first) >> 4)
    }

    /// The store's key for it: the first 15 hex digits of the hash.
    pub fn key(self) -> String {
        format!("{:015x}", self.0)
    }

    /// What a visitor or an operator typed: case, dashes and spaces do not matter, and the
    /// letters Crockford's alphabet leaves out read as the digits they look like (O as 0, I and
    /// L as 1). None unless exactly 12 characters remain.
    pub fn parse(text: &str) -> Option<Self> {
        let mut value: u64 = 0;
        let mut digits = 0;
        for c in text.chars() {
            let c = match c.to_ascii_uppercase() {
                '-' | ' ' => continue,
                'O' => '0',
                'I' | 'L' => '1',
                other => other,
            };
            let digit = ALPHABET.iter().position(|&a| char::from(a) == c)?;
            digits += 1;
            if digits > 12 {
                return None;
            }
            value = value << 5 | digit as u64;
        }
        (digits == 12).then_some(QueueId(value))
    }
}

impl fmt::Display for QueueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for i in 0..12 {
            if i == 4 || i == 8 {
                f.write_str("-")?;
            }
            let digit = (self.0 >> (55 - 5 * i)) & 31;
            write!(f, "{}", char::from(ALPHABET[digit as usize]))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_back_what_it_writes_however_it_is_typed() {
        let id = QueueId::of("xK3v9mQ2LpW7aZ1cT8bR0e");
        let shown = id.to_string();
        assert_eq!(shown.len(), 14);
        assert_eq!(shown.matches('-').count(), 2);
        assert_eq!(QueueId::parse(&shown), Some(id));
        assert_eq!(
            QueueId::parse(&shown.to_lowercase().replace('-', " ")),
            Some(id)
        );
        assert_eq!(QueueId::parse(&shown.replace('-', "")), Some(id));
        let look_alikes = shown.replace('0', "o").replace('1', "l");
        assert_eq!(QueueId::parse(&look_alikes), Some(id));
    }

    #[test]
    fn refuses_what_is_not_twelve_characters_of_the_alphabet() {
        assert_eq!(QueueId::parse(""), None);
        assert_eq!(QueueId::parse("ABCD-EFGH-JKM"), None);
        assert_eq!(QueueId::parse("ABCD-EFGH-JKMNP"), None);
        assert_eq!(
            QueueId::parse("ABCD-EFGH-JKMU"),
            None,
            "U is not in the alphabet"
        );
        assert_eq!(QueueId::parse("ABCD/EFGH/JKMN"), None);
    }

    #[test]
    fn its_key_is_the_first_fifteen_hex_digits_of_the_hash_as_redis_computes_it() {
        let visitor = "visitor-1";
        let mut hash = sha1_smol::Sha1::new();
        hash.update(format!("{DOMAIN}{visitor}").as_bytes());
        let hex = hash.digest().to_string();
        assert_eq!(QueueId::of(visitor).key(), hex[..15]);
        assert_ne!(QueueId::of("visitor-2"), QueueId::of(visitor));
    }
}
