//! The webhook's signature: HMAC-SHA256 with the shop's secret over `timestamp + "." + body`,
//! sent as `X-Waitroom-Signature: v1=<hex>` beside `X-Waitroom-Timestamp` (Unix seconds). The
//! timestamp is inside the signed bytes so a receiver that rejects old ones cannot be replayed
//! to; `v1=` leaves room for another scheme beside this one during a change.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

pub const TIMESTAMP_HEADER: &str = "X-Waitroom-Timestamp";
pub const SIGNATURE_HEADER: &str = "X-Waitroom-Signature";

/// The `X-Waitroom-Signature` value of `body` sent at `timestamp`.
pub fn sign(secret: &[u8], timestamp: u64, body: &[u8]) -> String {
    // HMAC takes a key of any length: this cannot fail.
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret)
        .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("v1={hex}")
}

/// Whether `signature` is `body`'s at `timestamp` (in constant time): what a receiver does.
pub fn verify(secret: &[u8], timestamp: u64, body: &[u8], signature: &str) -> bool {
    let Some(hex) = signature.strip_prefix("v1=") else {
        return false;
    };
    let Some(given) = decode_hex(hex) else {
        return false;
    };
    let Ok(mut mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(secret) else {
        return false;
    };
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.verify_slice(&given).is_ok()
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    #[test]
    fn signs_the_timestamp_a_dot_and_the_body() {
        // Computed apart, with Python's hmac: hmac.new(b"Jefe", b"1700000000.{}", sha256).
        assert_eq!(
            sign(b"Jefe", 1_700_000_000, b"{}"),
            "v1=d3793e2b4103edfbd98cc19591832f5fad701d413db9fcae0ae7dab8184ed207"
        );
    }

    #[test]
    fn the_hmac_is_sha256_as_rfc_4231_gives_it() {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(b"Jefe").unwrap();
        mac.update(b"what do ya want for nothing?");
        let hex: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn a_signature_verifies_only_for_its_secret_timestamp_and_body() {
        let body = br#"{"event_id":"e1"}"#;
        let signature = sign(SECRET, 1_700_000_000, body);
        assert!(verify(SECRET, 1_700_000_000, body, &signature));
        assert!(!verify(
            b"another secret, just as long....",
            1_700_000_000,
            body,
            &signature
        ));
        assert!(!verify(SECRET, 1_700_000_001, body, &signature));
        assert!(!verify(
            SECRET,
            1_700_000_000,
            br#"{"event_id":"e2"}"#,
            &signature
        ));
        assert!(!verify(SECRET, 1_700_000_000, body, &signature[3..]));
        assert!(!verify(SECRET, 1_700_000_000, body, "v1=zz"));
    }
}
