//! A string wrapper for secrets whose `Debug` and `Display` never show the value, and the one
//! bearer-token check every server uses (header parsing and a constant-time comparison), also
//! against a token known only by its digest (a run's tool-gateway token, kept by every
//! replica as its SHA-256).

use std::fmt;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// A secret value (API key, token). Formatting prints `[redacted]`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The raw value, for the one place that must send it (an HTTP header).
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `given` is exactly this secret, in constant time. Both sides are hashed first,
    /// so the time taken shows neither the secret's content nor its length.
    pub fn matches(&self, given: &str) -> bool {
        let want = Sha256::digest(self.0.as_bytes());
        let got = Sha256::digest(given.as_bytes());
        want.ct_eq(&got).into()
    }

    /// The SHA-256 of the value, hex: what may be stored to check the token later
    /// ([`digest_matches`]) without keeping the token itself.
    pub fn digest(&self) -> String {
        hex::encode(Sha256::digest(self.0.as_bytes()))
    }
}

/// Whether `given` is the token whose [`Secret::digest`] is `digest`, compared in constant
/// time (the hashes, so neither content nor length shows). False for a digest that is not 64
/// hex digits.
pub fn digest_matches(digest: &str, given: &str) -> bool {
    let mut want = [0u8; 32];
    if hex::decode_to_slice(digest, &mut want).is_err() {
        return false;
    }
    let got = Sha256::digest(given.as_bytes());
    want.ct_eq(got.as_slice()).into()
}

/// The token of an `Authorization` header value `Bearer <token>`: the scheme matched
/// case-insensitively, white space around the value and the token trimmed. `None` for any
/// other scheme or a value without a token.
pub fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_is_redacted() {
        let secret = Secret::new("sk-123");
        assert_eq!(format!("{secret:?} {secret}"), "[redacted] [redacted]");
        assert_eq!(secret.expose(), "sk-123");
    }

    #[test]
    fn tokens_compare_exactly() {
        let secret = Secret::new("abc");
        assert!(secret.matches("abc"));
        assert!(!secret.matches("abd"));
        assert!(!secret.matches("ab"));
        assert!(!secret.matches("abcd"));
        assert!(!secret.matches(""));
        assert!(!secret.matches("ABC"));
    }

    #[test]
    fn tokens_compare_against_their_digest() {
        let token = Secret::new("art_run_abc");
        let digest = token.digest();
        assert_eq!(digest.len(), 64);
        assert!(!digest.contains("art_run_abc"));
        assert!(digest_matches(&digest, "art_run_abc"));
        assert!(!digest_matches(&digest, "art_run_abd"));
        assert!(!digest_matches(&digest, ""));
        assert!(!digest_matches("", ""));
        assert!(!digest_matches("not hex", "art_run_abc"));
        assert!(!digest_matches(&digest[..62], "art_run_abc"));
    }

    #[test]
    fn bearer_header_values() {
        assert_eq!(bearer_token("Bearer tok"), Some("tok"));
        assert_eq!(bearer_token("bearer tok"), Some("tok"));
        assert_eq!(bearer_token("BEARER tok"), Some("tok"));
        assert_eq!(bearer_token("  Bearer   tok  "), Some("tok"));
        assert_eq!(bearer_token("Bearer a b"), Some("a b"));
        assert_eq!(bearer_token("Basic dXNlcjpwYXNz"), None);
        assert_eq!(bearer_token("Bearer"), None);
        assert_eq!(bearer_token("Bearer   "), None);
        assert_eq!(bearer_token("Bearertok"), None);
        assert_eq!(bearer_token(""), None);
    }
}
