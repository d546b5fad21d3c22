//! The fleet: `AGENT_RUNTIME_NODES`, the machines (`agent-runtime node`) that run this service's
//! agent-CLI runs, parsed and validated with every problem reported at once.
//!
//! The value is JSON or YAML inline, or `@/path/to/file`: a list of nodes, or a mapping with
//! `nodes` and the fleet's settings:
//!
//! ```yaml
//! service_url: https://runtime.internal:8090   # how the nodes' MCP bridges reach this service
//! health_interval_seconds: 5
//! nodes:
//!   - name: gpu-1                  # [A-Za-z0-9._-], unique, not `local`
//!     url: https://10.0.0.5:8091   # plain http only on loopback or with allow_http: true
//!     token_env: NODE_GPU1_TOKEN   # or token: ...
//!     labels: {gpu: a100, region: eu}
//!     max_concurrent_runs: 4       # this service's runs on it at once (default 4)
//! ```

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use ar_core::secret::Secret;
use serde::Deserialize;
use serde_json::Value;
use url::Url;

use crate::Diagnostic;

/// Default of `max_concurrent_runs`.
pub const DEFAULT_NODE_CONCURRENCY: usize = 4;
/// Default of `health_interval_seconds`.
pub const DEFAULT_HEALTH_INTERVAL: Duration = Duration::from_secs(5);

/// The fleet's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodesConfig {
    /// The URL nodes' MCP bridges reach this service at; `None`: this service's loopback
    /// address (nodes on this machine).
    pub service_url: Option<Url>,
    /// How often the nodes' health is checked.
    pub health_interval: Duration,
    pub nodes: Vec<NodeSettings>,
}

/// One node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSettings {
    pub name: String,
    pub url: Url,
    pub token: Secret,
    pub labels: BTreeMap<String, String>,
    pub max_concurrent_runs: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FleetDoc {
    #[serde(default)]
    service_url: Option<String>,
    #[serde(default)]
    health_interval_seconds: Option<u64>,
    #[serde(default)]
    nodes: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeDoc {
    #[serde(default)]
    name: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    token_env: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    max_concurrent_runs: Option<usize>,
    #[serde(default)]
    allow_http: bool,
}

impl NodesConfig {
    /// Reads `AGENT_RUNTIME_NODES` (`source`: inline text or `@path`); `var` names it in
    /// diagnostics, `lookup` resolves `token_env`.
    pub fn load(
        var: &str,
        source: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<NodesConfig, Vec<Diagnostic>> {
        let fail = |message: String| Err(vec![Diagnostic::new(var, message)]);
        let trimmed = source.trim();
        let text = match trimmed.strip_prefix('@') {
            Some(path) => match std::fs::read_to_string(path.trim()) {
                Ok(text) => text,
                Err(error) => return fail(format!("cannot read {}: {error}", path.trim())),
            },
            None => trimmed.to_string(),
        };
        let value: Value = match serde_json::from_str(&text) {
            Ok(value) => value,
            Err(json) => match serde_yaml::from_str(&text) {
                Ok(value) => value,
                Err(yaml) if text.trim_start().starts_with(['{', '[']) => {
                    let _ = yaml;
                    return fail(format!("invalid JSON: {json}"));
                }
                Err(yaml) => return fail(format!("invalid YAML: {yaml}")),
            },
        };
        let doc = match value {
            Value::Array(nodes) => FleetDoc {
                service_url: None,
                health_interval_seconds: None,
                nodes,
            },
            other => match serde_json::from_value::<FleetDoc>(other) {
                Ok(doc) => doc,
                Err(error) => {
                    return fail(format!(
                        "expected a list of nodes or a mapping with `nodes`: {error}"
                    ))
                }
            },
        };
        let mut diagnostics = Vec::new();
        let config = read_fleet(var, doc, lookup, &mut diagnostics);
        if diagnostics.is_empty() {
            Ok(config)
        } else {
            Err(diagnostics)
        }
    }
}

fn read_fleet(
    var: &str,
    doc: FleetDoc,
    lookup: &dyn Fn(&str) -> Option<String>,
    diagnostics: &mut Vec<Diagnostic>,
) -> NodesConfig {
    let service_url = doc
        .service_url
        .and_then(|raw| match Url::parse(raw.trim()) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {
                Some(url)
            }
            _ => {
                diagnostics.push(Diagnostic::new(
                    var,
                    format!("service_url {raw:?} must be an http(s) URL"),
                ));
                None
            }
        });
    let health_interval = match doc.health_interval_seconds {
        None => DEFAULT_HEALTH_INTERVAL,
        Some(seconds @ 1..=3600) => Duration::from_secs(seconds),
        Some(other) => {
            diagnostics.push(Diagnostic::new(
                var,
                format!("health_interval_seconds {other} must be 1 to 3600"),
            ));
            DEFAULT_HEALTH_INTERVAL
        }
    };
    let mut names = HashSet::new();
    let mut nodes = Vec::new();
    for (index, raw) in doc.nodes.into_iter().enumerate() {
        let path = format!("{var}: nodes[{index}]");
        match serde_json::from_value::<NodeDoc>(raw) {
            Ok(node) => {
                if let Some(node) = read_node(&path, node, lookup, diagnostics) {
                    if names.insert(node.name.clone()) {
                        nodes.push(node);
                    } else {
                        diagnostics.push(Diagnostic::new(
                            format!("{path}.name"),
                            format!("duplicate node name {:?}", node.name),
                        ));
                    }
                }
            }
            Err(error) => diagnostics.push(Diagnostic::new(path, error.to_string())),
        }
    }
    NodesConfig {
        service_url,
        health_interval,
        nodes,
    }
}

/// A name of letters, digits, `.`, `_`, `-` (what placements and `Machine` name).
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn read_node(
    path: &str,
    node: NodeDoc,
    lookup: &dyn Fn(&str) -> Option<String>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<NodeSettings> {
    let before = diagnostics.len();
    let mut report = |field: &str, message: String| {
        diagnostics.push(Diagnostic::new(format!("{path}.{field}"), message));
    };
    if !valid_name(&node.name) {
        report(
            "name",
            format!(
                "{:?} must be 1-64 letters, digits, '.', '_' or '-'",
                node.name
            ),
        );
    } else if node.name == "local" {
        report(
            "name",
            "\"local\" names this machine; choose another name".into(),
        );
    }
    let url = match Url::parse(node.url.trim()) {
        Ok(url) if !matches!(url.scheme(), "http" | "https") || url.host().is_none() => {
            report(
                "url",
                format!("{:?} must be an http(s) URL with a host", node.url),
            );
            None
        }
        Ok(url) if url.scheme() == "http" && !node.allow_http && !is_loopback(&url) => {
            report("url", format!("{:?} is plain HTTP to another machine: runs carry model keys to the node; use https or set allow_http: true", node.url));
            None
        }
        Ok(url)
            if !url.username().is_empty() || url.password().is_some() || url.query().is_some() =>
        {
            report(
                "url",
                "must not carry credentials or a query (use token / token_env)".into(),
            );
            None
        }
        Ok(url) => Some(url),
        Err(error) => {
            report("url", format!("{:?} is not a URL: {error}", node.url));
            None
        }
    };
    let token = match (node.token, node.token_env) {
        (Some(_), Some(_)) => {
            report("token", "set token or token_env, not both".into());
            None
        }
        (Some(token), None) if !token.trim().is_empty() => Some(Secret::new(token.trim())),
        (None, Some(name)) => match lookup(&name).filter(|v| !v.trim().is_empty()) {
            Some(token) => Some(Secret::new(token.trim())),
            None => {
                report("token_env", format!("{name} is not set"));
                None
            }
        },
        _ => {
            report(
                "token",
                "a node needs token or token_env (its AGENT_RUNTIME_NODE_TOKEN)".into(),
            );
            None
        }
    };
    for (key, value) in &node.labels {
        if !valid_name(key) || value.trim().is_empty() {
            report("labels", format!("label {key:?}={value:?}: keys are letters, digits, '.', '_', '-'; values are non-empty"));
        }
    }
    let max_concurrent_runs = node.max_concurrent_runs.unwrap_or(DEFAULT_NODE_CONCURRENCY);
    if !(1..=1024).contains(&max_concurrent_runs) {
        report(
            "max_concurrent_runs",
            format!("{max_concurrent_runs} must be 1 to 1024"),
        );
    }
    if diagnostics.len() > before {
        return None;
    }
    Some(NodeSettings {
        name: node.name,
        url: url?,
        token: token?,
        labels: node.labels,
        max_concurrent_runs,
    })
}

fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(name: &str) -> Option<String> {
        (name == "GPU_TOKEN").then(|| "tok-gpu".to_string())
    }

    #[test]
    fn a_list_or_a_mapping_of_nodes() {
        let list = r#"[{"name":"n1","url":"http://127.0.0.1:8091","token":"t1"}]"#;
        let config = NodesConfig::load("AGENT_RUNTIME_NODES", list, &lookup).unwrap();
        assert_eq!(config.nodes[0].name, "n1");
        assert_eq!(
            config.nodes[0].max_concurrent_runs,
            DEFAULT_NODE_CONCURRENCY
        );
        assert_eq!(config.health_interval, DEFAULT_HEALTH_INTERVAL);
        let yaml = "service_url: https://rt.internal:8090\nhealth_interval_seconds: 2\nnodes:\n  - name: gpu-1\n    url: https://10.0.0.5:8091\n    token_env: GPU_TOKEN\n    labels: {gpu: a100}\n    max_concurrent_runs: 2\n";
        let config = NodesConfig::load("AGENT_RUNTIME_NODES", yaml, &lookup).unwrap();
        assert_eq!(
            config.service_url.unwrap().as_str(),
            "https://rt.internal:8090/"
        );
        let node = &config.nodes[0];
        assert_eq!(
            (
                node.token.expose(),
                node.labels["gpu"].as_str(),
                node.max_concurrent_runs
            ),
            ("tok-gpu", "a100", 2)
        );
    }

    #[test]
    fn every_problem_is_reported_with_its_place() {
        let bad = r#"{"nodes":[
            {"name":"local","url":"http://10.0.0.5:8091","token":"t"},
            {"name":"a b","url":"ftp://x","token_env":"MISSING"},
            {"name":"ok","url":"https://x:1","token":"t","max_concurrent_runs":0,"labels":{"":"v"}},
            {"name":"ok","url":"https://y:1","token":"t"},
            {"name":"n","url":"https://y:1","tokn":"t"}
        ],"health_interval_seconds":0}"#;
        let problems = NodesConfig::load("AGENT_RUNTIME_NODES", bad, &lookup).unwrap_err();
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        let all = text.join("\n");
        for expected in [
            "health_interval_seconds 0",
            "nodes[0].name: \"local\" names this machine",
            "nodes[0].url: \"http://10.0.0.5:8091\" is plain HTTP",
            "nodes[1].name: \"a b\"",
            "nodes[1].url: \"ftp://x\"",
            "nodes[1].token_env: MISSING is not set",
            "nodes[2].max_concurrent_runs: 0 must be 1 to 1024",
            "nodes[2].labels",
            "nodes[4]: unknown field `tokn`",
        ] {
            assert!(all.contains(expected), "{expected:?} missing from:\n{all}");
        }
        assert!(!all.contains("tok-gpu"));
        let dup = r#"[{"name":"a","url":"https://x","token":"t"},{"name":"a","url":"https://y","token":"t"}]"#;
        let problems = NodesConfig::load("V", dup, &lookup).unwrap_err();
        assert!(
            problems[0]
                .to_string()
                .contains("duplicate node name \"a\""),
            "{problems:?}"
        );
        assert!(NodesConfig::load("V", "{nope", &lookup).unwrap_err()[0]
            .message
            .starts_with("invalid JSON"));
        assert!(
            NodesConfig::load("V", "@/no/such/file", &lookup).unwrap_err()[0]
                .message
                .contains("cannot read")
        );
    }
}
