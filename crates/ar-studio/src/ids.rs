//! Command ids: minting `cmd_` + a monotonic ULID, and validating caller-supplied ids.

use chrono::{DateTime, Utc};
use ulid::{Generator, Ulid};

/// The prefix of every id this studio mints.
pub const COMMAND_ID_PREFIX: &str = "cmd_";

/// The longest caller-supplied command id accepted.
pub const MAX_COMMAND_ID: usize = 128;

/// Whether `id` may be used as a command id: 1 to 128 characters of `[A-Za-z0-9._:-]`.
///
/// The id is written verbatim as an SSE `id:` line, so anything that could break a line (and
/// with it forge a frame on a runtime's stream) is refused.
pub fn valid_command_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_COMMAND_ID
        && id
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b':' | b'-'))
}

/// Mints monotonic command ids: within one millisecond the ULID's random part counts up.
#[derive(Default)]
pub(crate) struct IdMinter {
    generator: Generator,
}

impl std::fmt::Debug for IdMinter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdMinter").finish_non_exhaustive()
    }
}

impl IdMinter {
    pub(crate) fn new() -> Self {
        Self {
            generator: Generator::new(),
        }
    }

    /// A fresh `cmd_` id stamped at `now`.
    pub(crate) fn mint(&mut self, now: DateTime<Utc>) -> String {
        let at: std::time::SystemTime = now.into();
        // The generator only fails when the random part overflows inside one millisecond
        // (2^80 ids); a plain ULID is still unique then, just not ordered after its neighbour.
        let ulid = self
            .generator
            .generate_from_datetime(at)
            .unwrap_or_else(|_| Ulid::from_datetime(at));
        format!("{COMMAND_ID_PREFIX}{ulid}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_the_id_alphabet() {
        assert!(valid_command_id("cmd_01JABC"));
        assert!(valid_command_id("a.b_c:d-e"));
        assert!(!valid_command_id(""));
        assert!(!valid_command_id("a\nid: x"));
        assert!(!valid_command_id("a b"));
        assert!(!valid_command_id("é"));
        assert!(valid_command_id(&"x".repeat(128)));
        assert!(!valid_command_id(&"x".repeat(129)));
    }

    #[test]
    fn minted_ids_are_valid_and_increase() {
        let mut minter = IdMinter::new();
        let now = Utc::now();
        let a = minter.mint(now);
        let b = minter.mint(now);
        assert!(valid_command_id(&a));
        assert!(a.starts_with("cmd_") && a.len() == 30);
        assert!(b > a);
    }
}
