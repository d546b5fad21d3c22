//! Tool catalog, host command tools and the context tool behind the domain ToolHost trait.
//!
//! - [`context`]: target context from the app's HTTP `context_endpoint` ([`HttpContextProvider`])
//!   and per-app routing with the static fallback ([`ContextRouter`]).
//! - [`host_tools`]: [`HostToolHost`], the [`ar_core::tool::ToolHost`] offering the built-in
//!   `get_context` tool and each app's declared host commands, executed through the app's
//!   command provider. An app's host tools are invisible to other apps.
//! - [`command_catalog`]: the original's host command catalogue (embedded JSON), offered by a
//!   command provider that declares no `commands`.
//! - [`fetch`]: `fetch_url`, the built-in web fetch (every hop's destination checked, size
//!   caps, an optional `output_path` written beneath the run's workspace root).
//! - [`control`]: definitions of the runtime-control tools the engine executes itself.
//! - [`skills`]: [`HttpSkillProviders`], the apps' skill providers (`by-id`, `active-by-key`)
//!   behind `ar-skills`' lookup port.
//! - [`mcp_providers`]: [`McpProviders`], each app's deployment-owned MCP providers: their
//!   catalogues (loaded, refreshed, health, readiness) and calls.
//! - [`workspaces`]: [`HttpWorkspaces`], each app's `host_prepared` workspace provider
//!   (`/prepare`, `/finalize`, `/cleanup`) behind the domain `WorkspaceProvider` port, and
//!   [`WorkspaceRouter`], which hands each call to the provider of its mode.
//! - [`repository`]: [`RepositoryWorkspaces`], the `repository` transport: the host's
//!   `/repository-spec`, a clone with the `git` CLI, delivery by finalize policy, `open_pr`.
//!
//! Host-callback JSON bodies come from `ar-wire`; this crate only moves them over HTTP.

pub mod command_catalog;
pub mod context;
pub mod control;
pub mod credential_refresh;
pub mod fetch;
pub mod host_tools;
mod http;
pub mod mcp_providers;
pub mod repository;
pub mod skills;
pub mod workspaces;

pub use context::{ContextRouter, HttpContextProvider};
pub use control::{get_context_tool, runtime_control_tools};
pub use credential_refresh::HttpCredentialRefresher;
pub use fetch::{FetchPolicy, FetchUrl};
pub use host_tools::HostToolHost;
pub use http::ToolsError;
pub use mcp_providers::McpProviders;
pub use repository::RepositoryWorkspaces;
pub use skills::HttpSkillProviders;
pub use workspaces::{HttpWorkspaces, WorkspaceRouter};
