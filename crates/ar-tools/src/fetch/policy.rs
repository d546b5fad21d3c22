//! Where `fetch_url` may go: [`FetchPolicy`], the check of each hop's URL, and the resolver that
//! hands the connector only addresses the policy allows (so a name that rebinds to a private
//! address between hops, or between check and connect, still cannot be reached).

use std::net::{IpAddr, SocketAddr};

use ar_mcp::policy::non_public_kind;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::{Host, Url};

/// The destinations `fetch_url` may reach. The default is strict: `https` only, public
/// addresses only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FetchPolicy {
    /// Plain `http://` URLs are allowed (the service's `AGENT_RUNTIME_MCP_ALLOW_HTTP`).
    pub allow_http: bool,
    /// Every non-public destination is allowed (`AGENT_RUNTIME_MCP_ALLOW_PRIVATE_NETWORKS`).
    pub allow_private_networks: bool,
    /// Loopback alone is allowed: for tests and local development against servers on this
    /// machine, while private, link-local and the other non-public ranges stay refused.
    pub allow_loopback: bool,
}

/// Why a destination is refused.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct Refused(pub String);

impl FetchPolicy {
    /// Checks a hop's URL: scheme, no credentials, and an address literal's range (a literal is
    /// never resolved; names are checked by [`PolicyResolver`]).
    pub fn check_url(&self, url: &Url) -> Result<(), Refused> {
        match url.scheme() {
            "https" => {}
            "http" if self.allow_http => {}
            "http" => {
                return Err(Refused(format!(
                    "{url} is plain http (only https is allowed)"
                )))
            }
            other => return Err(Refused(format!("the {other}: scheme is not fetched"))),
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Refused("URLs with credentials are not fetched".into()));
        }
        match url.host() {
            Some(Host::Ipv4(ip)) => self.check_address(IpAddr::V4(ip)),
            Some(Host::Ipv6(ip)) => self.check_address(IpAddr::V6(ip)),
            Some(Host::Domain(_)) => Ok(()),
            None => Err(Refused(format!("{url} has no host"))),
        }
    }

    /// Refuses a non-public address unless the policy allows it.
    pub fn check_address(&self, ip: IpAddr) -> Result<(), Refused> {
        match non_public_kind(ip) {
            None => Ok(()),
            Some(_) if self.allow_private_networks => Ok(()),
            Some("loopback") if self.allow_loopback => Ok(()),
            Some(kind) => Err(Refused(format!(
                "{ip} is a {kind} address; only public destinations are fetched"
            ))),
        }
    }
}

/// The system resolver, keeping only the addresses the policy allows.
#[derive(Debug, Clone)]
pub(crate) struct PolicyResolver(pub(crate) FetchPolicy);

/// Every address of a name was refused; found in a connect error's source chain to tell a
/// refusal from a network failure.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct AddressRefused(pub(crate) String);

impl Resolve for PolicyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.0;
        Box::pin(async move {
            let host = name.as_str().to_string();
            // Port 0: the connector puts the URL's port on each address.
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut refusal = None;
            let allowed: Vec<SocketAddr> = resolved
                .into_iter()
                .filter(|addr| match policy.check_address(addr.ip()) {
                    Ok(()) => true,
                    Err(Refused(reason)) => {
                        refusal = Some(format!("{host} resolves to {reason}"));
                        false
                    }
                })
                .collect();
            if allowed.is_empty() {
                let reason = refusal.unwrap_or_else(|| format!("{host} resolves to no address"));
                return Err(Box::new(AddressRefused(reason)) as Box<_>);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// The refusal inside a request error, if the resolver refused the destination.
pub(crate) fn refusal_in(err: &reqwest::Error) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(current) = source {
        if let Some(refused) = current.downcast_ref::<AddressRefused>() {
            return Some(refused.0.clone());
        }
        source = current.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    #[test]
    fn the_default_policy_wants_public_https() {
        let strict = FetchPolicy::default();
        assert!(strict.check_url(&url("https://example.com/a")).is_ok());
        assert!(strict.check_url(&url("http://example.com/a")).is_err());
        assert!(strict.check_url(&url("ftp://example.com/a")).is_err());
        assert!(strict.check_url(&url("https://u:p@example.com/")).is_err());
        for literal in [
            "https://127.0.0.1/",
            "https://10.1.2.3/",
            "https://169.254.169.254/",
            "https://100.64.0.1/",
            "https://224.0.0.1/",
            "https://0.0.0.0/",
            "https://[::1]/",
            "https://[fd00::1]/",
            "https://[fe80::1]/",
            "https://[::ffff:10.0.0.1]/",
        ] {
            let err = strict.check_url(&url(literal)).unwrap_err();
            assert!(err.0.contains("address"), "{literal}: {err}");
        }
    }

    #[test]
    fn loopback_alone_can_be_allowed() {
        let local = FetchPolicy {
            allow_http: true,
            allow_loopback: true,
            ..FetchPolicy::default()
        };
        assert!(local.check_url(&url("http://127.0.0.1:8080/")).is_ok());
        assert!(local.check_url(&url("http://[::1]:8080/")).is_ok());
        assert!(local.check_url(&url("http://10.0.0.1/")).is_err());
        assert!(local.check_url(&url("http://169.254.169.254/")).is_err());
        let open = FetchPolicy {
            allow_private_networks: true,
            ..FetchPolicy::default()
        };
        assert!(open.check_url(&url("https://10.0.0.1/")).is_ok());
    }
}
