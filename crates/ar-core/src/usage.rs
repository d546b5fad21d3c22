//! Token usage and its cumulative-per-run accounting.

use serde::{Deserialize, Serialize};

/// Token counts. Cached input is part of input; reasoning output is part of output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub input_tokens: i64,
    #[serde(default)]
    pub cached_input_tokens: i64,
    #[serde(default)]
    pub output_tokens: i64,
    #[serde(default)]
    pub reasoning_output_tokens: i64,
    #[serde(default)]
    pub total_tokens: i64,
}

impl Usage {
    pub fn is_zero(&self) -> bool {
        *self == Usage::default()
    }

    /// Adds another request's usage. A missing total is input + output.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.output_tokens += other.output_tokens;
        self.reasoning_output_tokens += other.reasoning_output_tokens;
        let other_total = if other.total_tokens > 0 {
            other.total_tokens
        } else {
            other.input_tokens + other.output_tokens
        };
        self.total_tokens += other_total;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_total_is_input_plus_output() {
        let mut usage = Usage::default();
        usage.add(&Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Usage::default()
        });
        usage.add(&Usage {
            input_tokens: 1,
            output_tokens: 1,
            total_tokens: 3,
            ..Usage::default()
        });
        assert_eq!(usage.total_tokens, 18);
        assert_eq!(usage.input_tokens, 11);
    }
}
