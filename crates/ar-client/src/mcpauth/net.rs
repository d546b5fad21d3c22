//! Where the OAuth flow may go: the URL rules, the allowed hosts, the resolver that hands the
//! connection public addresses only, and the redirect rule.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use reqwest::Url;

use super::MAX_URL;

/// An application's own check of a URL the flow would go to (an egress policy): `Err` with
/// why it is refused.
pub type UrlValidator = Arc<dyn Fn(&Url) -> Result<(), String> + Send + Sync>;

/// The flow's destinations.
#[derive(Clone)]
pub(crate) struct Policy {
    /// Exact hosts or `*.suffix` patterns, lower case; the resource's host first.
    pub allowed: Vec<String>,
    pub allow_local: bool,
    pub validator: Option<UrlValidator>,
}

impl Policy {
    /// `raw` when it is an allowed destination.
    pub fn check(&self, raw: &str) -> Option<Url> {
        let url = parse_url(raw, self.allow_local)?;
        let host = url.host_str()?.trim_end_matches('.').to_ascii_lowercase();
        if !host_allowed(&host, &self.allowed) {
            return None;
        }
        if let Some(ip) = literal_ip(&host) {
            let local = self.allow_local && ip.is_loopback();
            if !local && !is_public(ip) {
                return None;
            }
        }
        match &self.validator {
            Some(validator) => validator(&url).ok().map(|()| url),
            None => Some(url),
        }
    }
}

/// An absolute `https` URL with a host, without user info or fragment (plain `http` to a
/// loopback name only when local development is allowed).
pub(crate) fn parse_url(raw: &str, allow_local: bool) -> Option<Url> {
    let raw = raw.trim();
    if raw.len() > MAX_URL {
        return None;
    }
    let url = Url::parse(raw).ok()?;
    let host = url.host_str().filter(|host| !host.is_empty())?;
    if !url.username().is_empty() || url.password().is_some() || url.fragment().is_some() {
        return None;
    }
    let scheme_ok = url.scheme() == "https"
        || (allow_local && url.scheme() == "http" && is_local_hostname(host));
    scheme_ok.then_some(url)
}

fn literal_ip(host: &str) -> Option<IpAddr> {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// `localhost`, a name below `.localhost`, or a loopback address.
pub(crate) fn is_local_hostname(host: &str) -> bool {
    let host = host.to_ascii_lowercase();
    host == "localhost"
        || host.ends_with(".localhost")
        || literal_ip(&host).is_some_and(|ip| ip.is_loopback())
}

/// `host` is one of `allowed`, or below a `*.suffix` of it (not the bare suffix).
pub(crate) fn host_allowed(host: &str, allowed: &[String]) -> bool {
    allowed
        .iter()
        .any(|pattern| match pattern.strip_prefix("*.") {
            Some(suffix) => host.len() > suffix.len() + 1 && host.ends_with(&format!(".{suffix}")),
            None => host == pattern,
        })
}

/// A globally routable unicast address.
pub(crate) fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast()
                || a == 0
                || (a == 100 && (64..128).contains(&b)))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80)
        }
    }
}

/// Resolves names and keeps the addresses the flow may connect to: public ones, or loopback
/// ones for a loopback name when local development is allowed. A name rebound to a private
/// address between the check and the connection cannot slip past: the check is the lookup.
pub(crate) struct Resolver {
    pub allow_local: bool,
}

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        let local = self.allow_local && is_local_hostname(&host);
        Box::pin(async move {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|addr| {
                    if local {
                        addr.ip().is_loopback()
                    } else {
                        is_public(addr.ip())
                    }
                })
                .collect();
            if found.is_empty() {
                return Err("MCP OAuth host has no allowed address".into());
            }
            let addrs: reqwest::dns::Addrs = Box::new(found.into_iter());
            Ok(addrs)
        })
    }
}

/// Redirects: at most three, never to another host, each to an allowed destination.
pub(crate) fn redirect_policy(policy: Policy) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        let first_host = attempt.previous().first().and_then(|url| url.host_str());
        let same_host = first_host
            .zip(attempt.url().host_str())
            .is_some_and(|(first, next)| first.eq_ignore_ascii_case(next));
        if attempt.previous().len() > 3
            || !same_host
            || policy.check(attempt.url().as_str()).is_none()
        {
            attempt.stop()
        } else {
            attempt.follow()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allowed: &[&str], allow_local: bool) -> Policy {
        Policy {
            allowed: allowed.iter().map(|host| host.to_string()).collect(),
            allow_local,
            validator: None,
        }
    }

    #[test]
    fn destinations_follow_the_rules() {
        let p = policy(&["mcp.example.com", "*.auth.example"], false);
        assert!(p.check("https://mcp.example.com/mcp").is_some());
        assert!(p.check("https://login.auth.example/authorize").is_some());
        assert!(
            p.check("https://auth.example/authorize").is_none(),
            "bare suffix"
        );
        assert!(p.check("http://mcp.example.com/").is_none(), "plain http");
        assert!(
            p.check("https://user:pw@mcp.example.com/").is_none(),
            "user info"
        );
        assert!(
            p.check("https://mcp.example.com/#frag").is_none(),
            "fragment"
        );
        assert!(p.check("https://evil.example.org/").is_none(), "other host");
        let ips = policy(&["10.0.0.1", "127.0.0.1"], false);
        assert!(ips.check("https://10.0.0.1/").is_none(), "private literal");
        assert!(
            ips.check("http://127.0.0.1:8080/").is_none(),
            "no local development"
        );
        let local = policy(&["127.0.0.1"], true);
        assert!(local.check("http://127.0.0.1:8080/x").is_some());
    }

    #[test]
    fn public_addresses() {
        for ip in [
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "127.0.0.1",
            "169.254.1.1",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["8.8.8.8", "1.1.1.1", "2606:4700::1111"] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }
}
