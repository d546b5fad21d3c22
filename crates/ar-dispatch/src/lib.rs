//! Seed 000: the Runtime trait for CLI coding agents, the subscription lane, composites and remote nodes.
//!
//! # For the integrator
//! - Local CLI agents: [`LocalRuntime::standard`]`(`[`LocalConfig::new`]`(workspace_root))` serves
//!   `codex`, `claude`, `opencode` and `command`; add `command:NAME` agents with
//!   [`LocalRuntime::with_named_command`]; point CLIs at a model endpoint with the providers'
//!   `extra_args` ([`CodexProvider`], [`ClaudeProvider`], [`OpenCodeProvider`], registered with
//!   [`LocalRuntime::with_provider`]) and the spec's `Env`. Each agent's stdout is read by one
//!   [`stream`] parser into typed [`AgentEvent`]s; [`LocalRuntime::start`] hands them over
//!   ([`AgentOutput`]), `dispatch` their wire summary.
//! - Dispatch: [`Runtime::dispatch`]`(`[`RunSpec`]`) -> `[`Run`]; then [`Run::events`] (a stream
//!   ending after `exited`), [`Run::wait`], [`Run::cancel`], [`Run::signal`], [`Run::status`].
//!   Dropping a running `Run` cancels it.
//! - Subscription lane: [`SubscriptionRuntime`] over a [`CodexExecutable`]; keep it apart from
//!   the legacy lane with [`AuthorityMux`].
//! - Many machines: [`ClusterRouter`] over a local runtime and [`RemoteRuntime`] peers; a
//!   machine serves its runtime with [`serve_node`]`(`[`NodeConfig`]`, listener, shutdown)`
//!   ([`NodeConfig::local`] builds the standard node from `--command NAME=PROGRAM` flags).
//! - [`bench::run_bench`] measures dispatch overhead and streaming under load.

pub mod bench;
pub mod bench_remote;
pub mod cluster;
pub mod codex_login;
pub mod composite;
pub mod consts;
pub mod contracts;
pub mod egress;
pub mod event;
pub mod inventory;
pub mod local;
pub mod node;
pub mod providers;
pub mod remote;
pub mod run;
pub mod spec;
pub mod stream;
pub mod subscription;
pub mod turn;

pub use cluster::{ClusterRouter, NodeSpec, NodeStatus, PlaceError, Placement, Slot};
pub use composite::AuthorityMux;
pub use event::{EventType, ProviderUsage, ResponseMetadata, RunEvent, State, Status};
pub use local::{AgentOutput, LocalConfig, LocalRuntime};
pub use node::{serve_node, NodeConfig, NodeError, NodeOptions};
pub use providers::{
    ClaudeProvider, CodexProvider, CodexSandbox, CommandProvider, NamedCommandProvider,
    OpenCodeProvider, Provider,
};
pub use remote::{NodeCapabilities, RemoteRuntime};
pub use run::{DispatchError, Run, RunControl, RunError, RunEvents, RunSink, Runtime};
pub use spec::{AuthorityMode, RunSpec, SpecError, TextOnlyPolicy};
pub use stream::{AgentEvent, StreamParser};
pub use subscription::{CodexExecutable, SubscriptionConfig, SubscriptionRuntime};
pub use turn::{TurnBridge, TurnPermissions, TurnResources, TurnRoute, TurnSetup};
