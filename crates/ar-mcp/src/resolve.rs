//! The DNS resolver of the MCP HTTP client: every name is resolved here, for every connection,
//! and only the addresses the policy allows are handed to the connector, so a name that
//! rebinds to a private address after an earlier check still cannot be reached.

use std::net::SocketAddr;

use ar_core::mcp::McpError;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::policy::McpPolicy;

/// Resolves with the system resolver and drops the addresses the policy refuses.
#[derive(Debug, Clone)]
pub(crate) struct PolicyResolver {
    policy: McpPolicy,
}

impl PolicyResolver {
    pub(crate) fn new(policy: McpPolicy) -> Self {
        PolicyResolver { policy }
    }
}

/// Every address of a name was refused; found again in a connect error's source chain so the
/// caller sees [`McpError::Refused`], not a transport failure.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct AddressRefused(pub(crate) String);

impl Resolve for PolicyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        Box::pin(async move {
            let host = name.as_str().to_string();
            // Port 0: the connector puts the URL's port on each address.
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let (allowed, refusal) = filter(&policy, &host, resolved);
            if allowed.is_empty() {
                let reason = refusal.unwrap_or_else(|| format!("{host} resolves to no address"));
                return Err(Box::new(AddressRefused(reason)) as Box<_>);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// The allowed addresses of `host`, and why the last refused one was refused.
fn filter(
    policy: &McpPolicy,
    host: &str,
    resolved: Vec<SocketAddr>,
) -> (Vec<SocketAddr>, Option<String>) {
    let mut refusal = None;
    let allowed = resolved
        .into_iter()
        .filter(|addr| match policy.check_address(addr.ip()) {
            Ok(()) => true,
            Err(McpError::Refused(reason)) => {
                refusal = Some(format!("{host} resolves to {reason}"));
                false
            }
            Err(_) => false,
        })
        .collect();
    (allowed, refusal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_addresses_are_dropped_and_public_ones_kept() {
        let strict = McpPolicy::default();
        let resolved: Vec<SocketAddr> = vec![
            "127.0.0.1:0".parse().unwrap(),
            "93.184.216.34:0".parse().unwrap(),
        ];
        let (allowed, _) = filter(&strict, "mixed.example", resolved.clone());
        assert_eq!(allowed, vec![resolved[1]]);
        let (allowed, refusal) = filter(&strict, "local.example", vec![resolved[0]]);
        assert!(allowed.is_empty());
        assert!(refusal
            .unwrap()
            .contains("local.example resolves to 127.0.0.1"));
        let relaxed = McpPolicy::new(false, true, Vec::new());
        assert_eq!(filter(&relaxed, "x", resolved.clone()).0, resolved);
    }
}
