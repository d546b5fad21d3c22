//! Durable execution on Temporal (`execution_mode: durable`), on Temporal's official Rust SDK:
//! the `AgentRunWorkflow` and its activities ([`workflow`], [`activities`]), the API side that
//! starts, signals, cancels and describes workflows ([`TemporalScheduler`]), and the worker that
//! polls the task queues ([`worker`]); the workflow's pure state is [`state`]'s.
//!
//! The engine stays the one executor: the workflow decides when a run's turn executes, an
//! activity asks the engine (through `ar_core::durable::DurableTurns`) to execute it, and every
//! payload is a reference to the store's data.

pub mod activities;
mod connect_error;
pub mod scheduler;
pub mod state;
pub mod worker;
pub mod workflow;

use ar_core::durable::{DurableError, DurableQueue, TemporalTls};
use ar_core::secret::Secret;
use temporalio_client::{
    Client, ClientOptions, ClientTlsOptions, Connection, ConnectionOptions, TlsOptions,
};

pub use scheduler::TemporalScheduler;

/// Where Temporal is and how to reach it (from `TEMPORAL_*`).
#[derive(Debug, Clone)]
pub struct TemporalSettings {
    /// `host:port` or an `http(s)://` URL.
    pub address: String,
    pub namespace: String,
    pub task_queue_prefix: String,
    pub api_key: Option<Secret>,
    /// `None`: plain HTTP/2.
    pub tls: Option<TemporalTls>,
    /// Turns a workflow run executes before it continues as new (0: the workflow's default).
    pub turns_per_workflow_run: u64,
}

impl TemporalSettings {
    /// A queue's full name, with the deployment's prefix.
    pub fn queue_name(&self, queue: DurableQueue) -> String {
        format!("{}{}", self.task_queue_prefix, queue.name())
    }

    fn url(&self) -> Result<url::Url, DurableError> {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let text = if self.address.contains("://") {
            self.address.clone()
        } else {
            format!("{scheme}://{}", self.address)
        };
        url::Url::parse(&text)
            .map_err(|error| DurableError(format!("TEMPORAL_ADDRESS {:?}: {error}", self.address)))
    }
}

/// The SDK's TLS options: the operator's roots (else the system's), client certificate and
/// server name.
fn tls_options(tls: &TemporalTls) -> TlsOptions {
    let client = tls.client_cert.as_ref().map(|client| {
        ClientTlsOptions::builder()
            .client_cert(client.cert_pem.clone())
            .client_private_key(client.key_pem.expose().as_bytes().to_vec())
            .build()
    });
    TlsOptions::builder()
        .maybe_server_root_ca_cert(tls.ca_pem.clone())
        .maybe_domain(tls.server_name.clone())
        .maybe_client_tls_options(client)
        .build()
}

/// A client of the namespace, connected to the frontend.
pub(crate) async fn connect(
    settings: &TemporalSettings,
    identity: &str,
) -> Result<Client, DurableError> {
    let identity = format!("{identity}@{}", std::process::id());
    let options = ConnectionOptions::new(settings.url()?)
        .identity(identity)
        .maybe_api_key(
            settings
                .api_key
                .as_ref()
                .map(|key| key.expose().to_string()),
        )
        .maybe_tls_options(settings.tls.as_ref().map(tls_options))
        .build();
    let connection = Connection::connect(options)
        .await
        .map_err(|error| DurableError(connect_error::explain(settings, &error)))?;
    Client::new(
        connection,
        ClientOptions::new(settings.namespace.clone()).build(),
    )
    .map_err(|error| DurableError(error.to_string()))
}
