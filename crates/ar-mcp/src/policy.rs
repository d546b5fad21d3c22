//! Where run MCP servers may be: the deployment's policy ([`McpPolicy`]) and the checks it makes
//! of a server's URL and of the addresses its host resolves to.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use ar_core::mcp::McpError;
use url::{Host, Url};

/// The default bound on connecting and on the MCP handshake.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The default bound on one request (a tool call, a page of the tool list).
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// The default cap on one response body or SSE event (16 MiB).
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// The deployment's rules for run MCP servers, from `AGENT_RUNTIME_MCP_ALLOW_HTTP`,
/// `AGENT_RUNTIME_MCP_ALLOW_PRIVATE_NETWORKS` and `AGENT_RUNTIME_MCP_ALLOWED_HOSTS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpPolicy {
    /// Plain `http://` servers are allowed (otherwise only `https://`).
    pub allow_http: bool,
    /// Loopback, private, link-local, unique-local, unspecified, multicast and CGNAT
    /// destinations are allowed (otherwise refused, after DNS, at connect time).
    pub allow_private_networks: bool,
    /// When not empty, the only hosts allowed: exact names (case-insensitive) or `*.suffix`
    /// (any name under `suffix`, not `suffix` itself).
    pub allowed_hosts: Vec<String>,
    pub connect_timeout: Duration,
    pub call_timeout: Duration,
    pub max_response_bytes: usize,
}

impl Default for McpPolicy {
    /// The strict policy: https only, public destinations only, any host.
    fn default() -> Self {
        McpPolicy::new(false, false, Vec::new())
    }
}

impl McpPolicy {
    /// A policy with the given rules and the default timeouts and size cap.
    pub fn new(allow_http: bool, allow_private_networks: bool, allowed_hosts: Vec<String>) -> Self {
        McpPolicy {
            allow_http,
            allow_private_networks,
            allowed_hosts: allowed_hosts
                .into_iter()
                .map(|host| normalize_host(&host))
                .filter(|host| !host.is_empty())
                .collect(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }

    /// The host list of `AGENT_RUNTIME_MCP_ALLOWED_HOSTS`: comma separated, blanks ignored.
    pub fn parse_allowed_hosts(value: &str) -> Vec<String> {
        value
            .split(',')
            .map(normalize_host)
            .filter(|host| !host.is_empty())
            .collect()
    }

    /// Checks a server URL against every rule that does not need DNS. An IP literal is
    /// checked here too (it is never resolved); a name's addresses are checked when it is
    /// resolved for a connection ([`McpPolicy::check_address`]).
    pub fn check_url(&self, url: &str) -> Result<Url, McpError> {
        let parsed =
            ar_core::mcp::check_server_url(url, self.allow_http).map_err(McpError::Refused)?;
        let host = parsed
            .host()
            .ok_or_else(|| refused("the server URL has no host"))?;
        self.check_host_allowed(&host_name(&host))?;
        match host {
            Host::Ipv4(ip) => self.check_address(IpAddr::V4(ip))?,
            Host::Ipv6(ip) => self.check_address(IpAddr::V6(ip))?,
            Host::Domain(_) => {}
        }
        Ok(parsed)
    }

    /// Refuses a host that is not in a non-empty `allowed_hosts`.
    pub fn check_host_allowed(&self, host: &str) -> Result<(), McpError> {
        if self.allowed_hosts.is_empty() {
            return Ok(());
        }
        let host = normalize_host(host);
        if self
            .allowed_hosts
            .iter()
            .any(|rule| host_matches(rule, &host))
        {
            Ok(())
        } else {
            Err(refused(&format!(
                "the host {host} is not in AGENT_RUNTIME_MCP_ALLOWED_HOSTS"
            )))
        }
    }

    /// Refuses a non-public destination unless private networks are allowed.
    pub fn check_address(&self, ip: IpAddr) -> Result<(), McpError> {
        match non_public_kind(ip) {
            Some(kind) if !self.allow_private_networks => Err(refused(&format!(
                "{ip} is a {kind} address (AGENT_RUNTIME_MCP_ALLOW_PRIVATE_NETWORKS is off)"
            ))),
            _ => Ok(()),
        }
    }
}

fn refused(rule: &str) -> McpError {
    McpError::Refused(rule.to_string())
}

fn normalize_host(host: &str) -> String {
    host.trim().trim_end_matches('.').to_ascii_lowercase()
}

/// A URL host as the allow-list sees it: a name, or an address without brackets.
fn host_name(host: &Host<&str>) -> String {
    match host {
        Host::Domain(name) => name.to_string(),
        Host::Ipv4(ip) => ip.to_string(),
        Host::Ipv6(ip) => ip.to_string(),
    }
}

fn host_matches(rule: &str, host: &str) -> bool {
    match rule.strip_prefix("*.") {
        Some(suffix) => host
            .strip_suffix(suffix)
            .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
        None => rule == host,
    }
}

/// What kind of non-public address `ip` is, if it is one.
pub fn non_public_kind(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_kind(v4),
        IpAddr::V6(v6) => v6_kind(v6),
    }
}

fn v4_kind(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_unspecified() || a == 0 {
        Some("unspecified")
    } else if ip.is_private() {
        Some("private")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if a == 100 && (64..128).contains(&b) {
        Some("CGNAT (shared address space)")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if a >= 240 {
        Some("reserved or broadcast")
    } else {
        None
    }
}

fn v6_kind(ip: Ipv6Addr) -> Option<&'static str> {
    let segments = ip.segments();
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_unspecified() {
        Some("unspecified")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if segments[0] & 0xffc0 == 0xfe80 || segments[0] & 0xffc0 == 0xfec0 {
        Some("link-local")
    } else if segments[0] & 0xfe00 == 0xfc00 {
        Some("unique-local")
    } else if let Some(v4) = embedded_v4(ip) {
        v4_kind(v4)
    } else {
        None
    }
}

/// The IPv4 address inside an IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible or NAT64
/// (`64:ff9b::/96`) address: such an address reaches the IPv4 host.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4() {
        return Some(v4);
    }
    let segments = ip.segments();
    let nat64 = segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
    nat64.then(|| {
        let [.., hi, lo] = segments;
        Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(result: Result<Url, McpError>) -> String {
        match result {
            Err(McpError::Refused(reason)) => reason,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn https_is_required_unless_http_is_allowed() {
        let strict = McpPolicy::default();
        assert!(refusal(strict.check_url("http://mcp.example.com/mcp")).contains("plain http"));
        assert!(strict.check_url("https://mcp.example.com/mcp").is_ok());
        let relaxed = McpPolicy::new(true, false, Vec::new());
        assert!(relaxed.check_url("http://mcp.example.com/mcp").is_ok());
        assert!(refusal(relaxed.check_url("ftp://mcp.example.com/")).contains("scheme"));
    }

    #[test]
    fn userinfo_query_and_fragment_are_refused() {
        let policy = McpPolicy::default();
        assert!(refusal(policy.check_url("https://u:p@mcp.example.com/mcp")).contains("user info"));
        assert!(refusal(policy.check_url("https://u@mcp.example.com/mcp")).contains("user info"));
        assert!(refusal(policy.check_url("https://mcp.example.com/mcp?a=1")).contains("query"));
        assert!(refusal(policy.check_url("https://mcp.example.com/mcp#x")).contains("fragment"));
        assert!(refusal(policy.check_url("not a url")).contains("not valid"));
    }

    #[test]
    fn allowed_hosts_match_exactly_or_by_suffix() {
        let policy = McpPolicy::new(
            false,
            false,
            McpPolicy::parse_allowed_hosts(" MCP.example.com, *.tools.example.org ,,"),
        );
        assert_eq!(
            policy.allowed_hosts,
            ["mcp.example.com", "*.tools.example.org"]
        );
        assert!(policy.check_url("https://mcp.example.com/mcp").is_ok());
        assert!(policy.check_url("https://Mcp.Example.com./mcp").is_ok());
        assert!(policy.check_url("https://a.tools.example.org/mcp").is_ok());
        assert!(policy
            .check_url("https://a.b.tools.example.org/mcp")
            .is_ok());
        for url in [
            "https://tools.example.org/mcp",
            "https://evil-tools.example.org/mcp",
            "https://other.example.com/mcp",
            "https://mcp.example.com.evil.net/mcp",
        ] {
            assert!(
                refusal(policy.check_url(url)).contains("AGENT_RUNTIME_MCP_ALLOWED_HOSTS"),
                "{url}"
            );
        }
    }

    #[test]
    fn private_literals_are_refused_unless_allowed() {
        let strict = McpPolicy::default();
        for url in [
            "https://127.0.0.1/mcp",
            "https://10.1.2.3/mcp",
            "https://172.16.0.1/mcp",
            "https://192.168.1.1/mcp",
            "https://169.254.169.254/mcp",
            "https://100.64.0.1/mcp",
            "https://0.0.0.0/mcp",
            "https://224.0.0.1/mcp",
            "https://[::1]/mcp",
            "https://[fe80::1]/mcp",
            "https://[fd00::1]/mcp",
            "https://[::ffff:127.0.0.1]/mcp",
            "https://[64:ff9b::a00:1]/mcp",
        ] {
            assert!(
                refusal(strict.check_url(url)).contains("ALLOW_PRIVATE_NETWORKS"),
                "{url}"
            );
        }
        assert!(strict.check_url("https://93.184.216.34/mcp").is_ok());
        assert!(strict.check_url("https://[2606:4700::1]/mcp").is_ok());
        let relaxed = McpPolicy::new(false, true, Vec::new());
        assert!(relaxed.check_url("https://127.0.0.1/mcp").is_ok());
    }
}
