//! The keys every mapping of the app configuration accepts, declared once, each with its [`Support`].
//!
//! The walker over the decoded document reports keys a [`Section`] does not declare, and refuses
//! the declared keys of capabilities this version does not have yet when they are set. The
//! sections of those capabilities are still declared so their contents are validated too.

use crate::support::{Capability, Support};

/// One key of a mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub name: &'static str,
    pub support: Support,
}

const fn key(name: &'static str) -> Key {
    Key {
        name,
        support: Support::Supported,
    }
}

const fn not_yet(name: &'static str, capability: Capability) -> Key {
    Key {
        name,
        support: Support::NotYet(capability),
    }
}

/// The keys one kind of mapping accepts. `path` names where it occurs, `[]` standing for any
/// list index (`apps[].event_callbacks[]`).
#[derive(Debug, PartialEq, Eq)]
pub struct Section {
    pub path: &'static str,
    pub keys: &'static [Key],
}

impl Section {
    pub fn key(&self, name: &str) -> Option<&'static Key> {
        self.keys.iter().find(|key| key.name == name)
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.keys.iter().map(|key| key.name).collect()
    }
}

pub const ROOT: Section = Section {
    path: "",
    keys: &[key("apps")],
};

pub const APP: Section = Section {
    path: "apps[]",
    keys: &[
        key("app_id"),
        key("event_protocol"),
        key("context_endpoint"),
        key("context_token"),
        key("context_token_env"),
        key("event_callbacks"),
        key("mcp_providers"),
        key("command_provider"),
        key("workspace_provider"),
        key("skill_provider"),
        not_yet("browser", Capability::Browser),
        key("model_endpoints"),
        key("require_run_model_credentials"),
        key("model_credential_callback"),
    ],
};

pub const EVENT_CALLBACK: Section = Section {
    path: "apps[].event_callbacks[]",
    keys: &[
        key("url"),
        key("token"),
        key("token_env"),
        key("event_types"),
    ],
};

pub const COMMAND_PROVIDER: Section = Section {
    path: "apps[].command_provider",
    keys: &[
        key("transport"),
        key("base_url"),
        key("token"),
        key("token_env"),
        key("commands"),
    ],
};

pub const HOST_COMMAND: Section = Section {
    path: "apps[].command_provider.commands[]",
    keys: &[
        key("name"),
        key("description"),
        key("category"),
        key("input_schema"),
        key("mutating"),
        key("risk_level"),
        key("supported_target_types"),
    ],
};

pub const MODEL_ENDPOINT: Section = Section {
    path: "apps[].model_endpoints[]",
    keys: &[
        key("id"),
        key("base_url"),
        key("auth_mode"),
        key("allow_http"),
    ],
};

// Sections below belong to keys of `APP` that are refused; their keys are validated so an
// operator sees every problem at once, and take effect when the capability arrives.

pub const MCP_PROVIDER: Section = Section {
    path: "apps[].mcp_providers[]",
    keys: &[
        key("name"),
        key("transport"),
        key("url"),
        key("token"),
        key("token_env"),
        key("command"),
        key("args"),
        key("env"),
        key("tool_prefix"),
        key("allowed_tools"),
        key("tool_namespace"),
        key("refresh_interval"),
        key("startup_policy"),
        key("unknown_refresh_cooldown"),
    ],
};

pub const WORKSPACE_PROVIDER: Section = Section {
    path: "apps[].workspace_provider",
    keys: &[
        key("transport"),
        key("base_url"),
        key("token"),
        key("token_env"),
        key("root_dir"),
    ],
};

pub const SKILL_PROVIDER: Section = Section {
    path: "apps[].skill_provider",
    keys: &[
        key("transport"),
        key("base_url"),
        key("token"),
        key("token_env"),
        key("package_base_url"),
        key("package_token"),
        key("package_token_env"),
    ],
};

pub const BROWSER: Section = Section {
    path: "apps[].browser",
    keys: &[
        key("enabled"),
        key("allowed_domains"),
        key("artifact_provider"),
    ],
};

pub const ARTIFACT_PROVIDER: Section = Section {
    path: "apps[].browser.artifact_provider",
    keys: &[
        key("transport"),
        key("upload_endpoint"),
        key("token"),
        key("token_env"),
    ],
};

pub const MODEL_CREDENTIAL_CALLBACK: Section = Section {
    path: "apps[].model_credential_callback",
    keys: &[key("url"), key("token"), key("token_env")],
};

/// Every section the parser reads.
pub const SECTIONS: &[&Section] = &[
    &ROOT,
    &APP,
    &EVENT_CALLBACK,
    &COMMAND_PROVIDER,
    &HOST_COMMAND,
    &MODEL_ENDPOINT,
    &MCP_PROVIDER,
    &WORKSPACE_PROVIDER,
    &SKILL_PROVIDER,
    &BROWSER,
    &ARTIFACT_PROVIDER,
    &MODEL_CREDENTIAL_CALLBACK,
];
