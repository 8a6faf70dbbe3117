//! `[proof_of_work]`: a self-hosted proof of work before a newcomer gets a place.

use std::time::Duration;

use super::values::duration;
use super::{ConfigError, invalid};
use crate::config::file::ProofOfWorkSection;
use crate::core::proof::Escalation;

/// A solver's work doubles with each bit: past 32, a phone would need hours.
const MOST_BITS: u8 = 32;
const SHORTEST_LIFETIME: Duration = Duration::from_secs(10);
const LONGEST_LIFETIME: Duration = Duration::from_secs(30 * 60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProofOfWorkConfig {
    /// On for the room outside events (an event may say otherwise while it governs).
    pub enabled: bool,
    pub escalation: Escalation,
    pub seed_lifetime: Duration,
}

pub(crate) fn proof_of_work(
    section: &ProofOfWorkSection,
) -> Result<ProofOfWorkConfig, ConfigError> {
    let bits = section.difficulty_bits;
    if !(1..=MOST_BITS).contains(&bits) {
        return Err(invalid(
            "proof_of_work.difficulty_bits",
            format!("must be from 1 to {MOST_BITS}, got {bits}"),
        ));
    }
    let most = section.max_difficulty_bits;
    if most < bits || most > MOST_BITS {
        return Err(invalid(
            "proof_of_work.max_difficulty_bits",
            format!("must be from difficulty_bits ({bits}) to {MOST_BITS}, got {most}"),
        ));
    }
    let seed_lifetime = duration("proof_of_work.seed_lifetime", &section.seed_lifetime)?;
    if !(SHORTEST_LIFETIME..=LONGEST_LIFETIME).contains(&seed_lifetime) {
        return Err(invalid(
            "proof_of_work.seed_lifetime",
            "must be from 10s to 30m: long enough to solve on a slow phone, short enough that \
             a farm cannot stock solved seeds for the drop",
        ));
    }
    Ok(ProofOfWorkConfig {
        enabled: section.enabled,
        escalation: Escalation {
            base_bits: bits,
            free_per_minute: section.free_seeds_per_minute,
            max_bits: most,
        },
        seed_lifetime,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid_and_off() {
        let config = proof_of_work(&ProofOfWorkSection::default()).unwrap();
        assert!(!config.enabled);
        assert_eq!(config.escalation.base_bits, 16);
        assert_eq!(config.seed_lifetime, Duration::from_secs(300));
    }

    #[test]
    fn out_of_range_values_are_named() {
        let with = |f: &dyn Fn(&mut ProofOfWorkSection)| {
            let mut section = ProofOfWorkSection::default();
            f(&mut section);
            proof_of_work(&section).unwrap_err().to_string()
        };
        assert!(with(&|s| s.difficulty_bits = 0).contains("proof_of_work.difficulty_bits"));
        assert!(with(&|s| s.difficulty_bits = 33).contains("proof_of_work.difficulty_bits"));
        assert!(with(&|s| s.max_difficulty_bits = 10).contains("max_difficulty_bits"));
        assert!(with(&|s| s.seed_lifetime = "2s".into()).contains("seed_lifetime"));
        assert!(with(&|s| s.seed_lifetime = "2h".into()).contains("seed_lifetime"));
    }
}
