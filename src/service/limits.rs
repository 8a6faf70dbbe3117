//! The open-file limit: raised from its soft value to the hard one at start, because every
//! waiting page holds a connection (a file descriptor) for minutes and container runtimes often
//! hand out a soft limit of 1024.

/// The process's open-file limit after the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct OpenFiles {
    pub soft: u64,
    pub hard: u64,
}

/// Raises the soft limit to the hard one; the limits as they are afterwards (unchanged when the
/// system refuses: logged).
pub fn raise_open_files() -> nix::Result<OpenFiles> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if soft < hard {
        match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => return Ok(OpenFiles { soft: hard, hard }),
            Err(e) => log::warn!("cannot raise the open-file limit from {soft} to {hard}: {e}"),
        }
    }
    Ok(OpenFiles { soft, hard })
}

impl OpenFiles {
    /// Descriptors kept back from connections: the store's, the origin's, logs, the listeners.
    const RESERVE: u64 = 256;

    /// Connections the limit leaves room for: every visitor's connection and the origin
    /// connection it may need while forwarded.
    pub fn connections(&self) -> u64 {
        self.soft.saturating_sub(Self::RESERVE) / 2
    }

    /// The open-file limit `connections` visitor connections need: the inverse of
    /// [`Self::connections`].
    pub fn needed_for(connections: u64) -> u64 {
        connections.saturating_mul(2).saturating_add(Self::RESERVE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_ends_at_the_hard_one() {
        let limits = raise_open_files().unwrap();
        assert_eq!(limits.soft, limits.hard);
    }

    #[test]
    fn connections_leave_a_reserve_and_room_for_the_origin() {
        let limits = OpenFiles {
            soft: 1024,
            hard: 1024,
        };
        assert_eq!(limits.connections(), 384);
        assert_eq!(OpenFiles { soft: 10, hard: 10 }.connections(), 0);
        assert_eq!(OpenFiles::needed_for(384), 1024);
    }
}
