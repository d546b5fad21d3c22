//! One provider's catalogue as the model sees it: the tools it advertises, filtered by
//! `allowed_tools`, named `<prefix>__<tool>` (or canonically with `tool_namespace: none`),
//! checked for duplicates and for names that would shadow the runtime's or another
//! provider's tools.

use std::collections::{HashMap, HashSet};

use ar_config::app::McpProvider;
use ar_core::mcp::sanitize_name_part;
use ar_core::tool::ToolDefinition;
use ar_core::RiskLevel;
use ar_mcp::provider::ProviderTool;

/// The longest tool name model APIs take (OpenAI's function names are at most 64 chars).
pub const MAX_TOOL_NAME: usize = 64;
/// Prefix reserved for run-scoped MCP aliases (`mcp__{server}__{tool}`).
const RUN_MCP_PREFIX: &str = "mcp__";
/// Category given to provider tools that name none.
const DEFAULT_CATEGORY: &str = "mcp";

/// One exposed tool and the name the provider knows it by.
#[derive(Debug, Clone)]
pub(crate) struct CatalogEntry {
    pub(crate) definition: ToolDefinition,
    pub(crate) original: String,
}

/// An accepted catalogue of one provider.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProviderCatalog {
    pub(crate) entries: Vec<CatalogEntry>,
    /// Tools left out (not allowed names), for the provider's health.
    pub(crate) left_out: Vec<String>,
}

/// Why a listing was not accepted (the previous catalogue stays).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CatalogError {
    #[error("the provider lists the tool {0:?} twice")]
    Duplicate(String),
    #[error("the tool {name:?} would shadow {owner}")]
    Collision { name: String, owner: String },
}

/// The names an exposed tool may not take in one app: the runtime's own tools, the app's
/// host commands, and whatever another provider already exposes.
pub(crate) struct TakenNames<'a> {
    pub(crate) reserved: &'a HashSet<String>,
    pub(crate) others: HashMap<&'a str, &'a str>,
}

impl TakenNames<'_> {
    fn owner_of(&self, name: &str) -> Option<String> {
        if self.reserved.contains(name) {
            return Some("a runtime tool or host command".to_string());
        }
        if name.starts_with(RUN_MCP_PREFIX) {
            return Some("the names of run-scoped MCP tools (mcp__…)".to_string());
        }
        self.others
            .get(name)
            .map(|provider| format!("a tool of the MCP provider {provider:?}"))
    }
}

/// `<prefix>__<tool>` (the prefix without surrounding `_`), or the tool's own name when the
/// prefix is empty; characters other than ASCII letters, digits, `_` and `-` become `_`.
pub(crate) fn exposed_name(prefix: &str, tool: &str) -> String {
    let prefix = prefix.trim().trim_matches('_');
    let tool = sanitize_name_part(tool.trim());
    if prefix.is_empty() {
        tool
    } else {
        format!("{}__{tool}", sanitize_name_part(prefix))
    }
}

impl ProviderCatalog {
    /// Builds the catalogue of `listed`: tools not in a non-empty `allowed_tools` are dropped,
    /// tools whose exposed name is empty or too long are left out (and named in health).
    pub(crate) fn build(
        provider: &McpProvider,
        listed: Vec<ProviderTool>,
        taken: &TakenNames<'_>,
    ) -> Result<ProviderCatalog, CatalogError> {
        let prefix = provider.effective_prefix();
        let mut catalog = ProviderCatalog::default();
        let mut seen = HashSet::new();
        for tool in listed {
            let allowed = provider.allowed_tools.is_empty()
                || provider.allowed_tools.iter().any(|name| name == &tool.name);
            if !allowed {
                continue;
            }
            let name = exposed_name(&prefix, &tool.name);
            if name.is_empty() || name.len() > MAX_TOOL_NAME {
                catalog.left_out.push(tool.name);
                continue;
            }
            if !seen.insert(name.clone()) {
                return Err(CatalogError::Duplicate(name));
            }
            if let Some(owner) = taken.owner_of(&name) {
                return Err(CatalogError::Collision { name, owner });
            }
            catalog.entries.push(entry(name, tool));
        }
        Ok(catalog)
    }
}

fn entry(name: String, tool: ProviderTool) -> CatalogEntry {
    let risk_level = tool
        .risk_level
        .as_deref()
        .and_then(|level| RiskLevel::parse(level.trim()).ok());
    CatalogEntry {
        definition: ToolDefinition {
            name,
            description: tool.description,
            category: if tool.category.is_empty() {
                DEFAULT_CATEGORY.to_string()
            } else {
                tool.category
            },
            input_schema: tool.input_schema,
            mutating: tool.mutating,
            risk_level,
            supported_target_types: tool.supported_target_types,
        },
        original: tool.name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ar_config::AppConfig;
    use serde_json::json;

    fn provider(yaml: &str) -> McpProvider {
        let config = AppConfig::parse(
            &format!("apps: [{{app_id: a, mcp_providers: [{yaml}]}}]"),
            &|_| None,
        )
        .expect("config");
        config.apps["a"].mcp_providers[0].clone()
    }

    fn tool(name: &str, mutating: bool) -> ProviderTool {
        ProviderTool {
            name: name.into(),
            description: format!("does {name}"),
            category: String::new(),
            input_schema: json!({"type": "object"}),
            mutating,
            risk_level: None,
            supported_target_types: Vec::new(),
        }
    }

    #[test]
    fn names_are_prefixed_filtered_and_sanitised() {
        let reserved = HashSet::new();
        let taken = TakenNames {
            reserved: &reserved,
            others: HashMap::new(),
        };
        let crm = provider("{name: crm, url: 'https://h.example/mcp', allowed_tools: [search, get.page, hidden_not]}");
        let catalog = ProviderCatalog::build(
            &crm,
            vec![
                tool("search", false),
                tool("get.page", true),
                tool("other", false),
            ],
            &taken,
        )
        .expect("catalog");
        let names: Vec<_> = catalog
            .entries
            .iter()
            .map(|e| e.definition.name.as_str())
            .collect();
        assert_eq!(names, ["crm__search", "crm__get_page"]);
        assert_eq!(catalog.entries[1].original, "get.page");
        assert!(catalog.entries[1].definition.mutating);
        assert_eq!(catalog.entries[0].definition.category, "mcp");
        let bare = provider("{name: crm, url: 'https://h.example/mcp', tool_namespace: none}");
        let catalog = ProviderCatalog::build(&bare, vec![tool("search", false)], &taken).unwrap();
        assert_eq!(catalog.entries[0].definition.name, "search");
        let custom = provider("{name: crm, url: 'https://h.example/mcp', tool_prefix: _x_}");
        let catalog = ProviderCatalog::build(&custom, vec![tool("a", false)], &taken).unwrap();
        assert_eq!(catalog.entries[0].definition.name, "x__a");
    }

    #[test]
    fn duplicates_collisions_and_long_names() {
        let reserved: HashSet<String> = ["get_context".to_string()].into();
        let bare = provider("{name: crm, url: 'https://h.example/mcp', tool_namespace: none}");
        let taken = TakenNames {
            reserved: &reserved,
            others: HashMap::from([("taken", "docs")]),
        };
        let build = |tools| ProviderCatalog::build(&bare, tools, &taken);
        assert_eq!(
            build(vec![tool("a", false), tool("a", true)]).unwrap_err(),
            CatalogError::Duplicate("a".into())
        );
        for (name, owner) in [
            ("get_context", "runtime tool"),
            ("taken", "\"docs\""),
            ("mcp__x__y", "run-scoped"),
        ] {
            let err = build(vec![tool(name, false)]).unwrap_err().to_string();
            assert!(err.contains(owner), "{name}: {err}");
        }
        let long = "x".repeat(MAX_TOOL_NAME + 1);
        let catalog = build(vec![tool(&long, false), tool("ok", false)]).unwrap();
        assert_eq!(catalog.left_out, [long]);
        assert_eq!(catalog.entries.len(), 1);
    }
}
