//! Prefixed, time-ordered identifiers (`run_01H…`) and the check for ids supplied by callers.

/// A new id with `prefix` followed by a ULID (sortable by creation time).
pub fn new_id(prefix: &str) -> String {
    // Encoded in place: ids are minted for every event and record of every step.
    let mut buffer = [0u8; ulid::ULID_LEN];
    let encoded = ulid::Ulid::new().array_to_str(&mut buffer);
    encoded.make_ascii_lowercase();
    let mut id = String::with_capacity(prefix.len() + 1 + ulid::ULID_LEN);
    id.push_str(prefix);
    id.push('_');
    id.push_str(encoded);
    id
}

/// Prefixes used for the records the runtime creates.
pub mod prefix {
    pub const AGENT: &str = "agt";
    pub const RUN: &str = "run";
    pub const MESSAGE: &str = "msg";
    pub const ARTIFACT: &str = "art";
    pub const INTERACTION: &str = "int";
    pub const TOOL_CALL: &str = "tc";
    pub const EVENT: &str = "evt";
}

/// Longest id accepted from a caller.
pub const MAX_ID_LEN: usize = 200;

/// Checks an id supplied in a path or body: non-empty, bounded, printable, no separators.
/// Returns a message naming the problem.
pub fn validate_external_id(field: &str, value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err(format!("{field} is required"));
    }
    if value.len() > MAX_ID_LEN {
        return Err(format!("{field} is longer than {MAX_ID_LEN} characters"));
    }
    if value
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || c == '/' || c == '\\')
    {
        return Err(format!("{field} contains characters that are not allowed"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_and_ordered() {
        let first = new_id(prefix::RUN);
        let second = new_id(prefix::RUN);
        assert!(first.starts_with("run_"));
        assert_eq!(first.len(), 30);
        assert_ne!(first, second);
        let ulid = &first["run_".len()..];
        assert!(ulid
            .chars()
            .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase()));
        assert!(ulid::Ulid::from_string(&ulid.to_ascii_uppercase()).is_ok());
    }

    #[test]
    fn external_ids_reject_odd_characters() {
        assert!(validate_external_id("agent_id", "a\nb").is_err());
        assert!(validate_external_id("agent_id", "a/b").is_err());
        assert!(validate_external_id("agent_id", "").is_err());
        assert!(validate_external_id("agent_id", "agent-1.x:y").is_ok());
    }
}
