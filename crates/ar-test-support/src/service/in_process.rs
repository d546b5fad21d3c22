//! The service in the test process: `Service::build` and `serve` on `127.0.0.1:0`, as the
//! binary does, with settings read from a given environment only.

use std::ops::Deref;
use std::time::Duration;

use ar_config::ServiceSettings;
use serde_json::json;
use tokio::task::JoinHandle;

use super::{app_config, Api, Env, CREDENTIAL_KEY, TOKEN};
use crate::mock_provider::MockProvider;

/// A service running in this process and a client for it (through `Deref`).
pub struct TestServer {
    api: Api,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    /// The directory of its SQLite file, when [`TestServer::start`] made one.
    pub dir: Option<tempfile::TempDir>,
}

impl Deref for TestServer {
    type Target = Api;

    fn deref(&self) -> &Api {
        &self.api
    }
}

/// Environment for a service on the SQLite file `store_dsn` whose [`super::APP`] approves
/// `mock` as an OpenAI-compatible endpoint (api key), and whose `v2_app` (event protocol v2)
/// approves it without credentials.
pub fn env_for(mock: &MockProvider, store_dsn: &str) -> Env {
    let mut apps = app_config(mock, json!({}));
    if let Some(list) = apps["apps"].as_array_mut() {
        list.push(json!({
            "app_id": "v2_app",
            "event_protocol": "v2",
            "model_endpoints": [{"id": "mock", "base_url": mock.base_url(), "auth_mode": "none", "allow_http": true}]
        }));
    }
    [
        ("AGENT_RUNTIME_SERVICE_TOKEN", TOKEN),
        ("AGENT_RUNTIME_STORE_DRIVER", "sqlite"),
        ("AGENT_RUNTIME_SQLITE_DSN", store_dsn),
        ("AGENT_RUNTIME_APP_CONFIG", &apps.to_string()),
        (
            "AGENT_RUNTIME_MODEL_CREDENTIAL_ENCRYPTION_KEY",
            CREDENTIAL_KEY,
        ),
        ("AGENT_RUNTIME_INSTANCE_ID", "inst_test"),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_string(), value.to_string()))
    .collect()
}

impl TestServer {
    /// Starts the service with exactly `env` (nothing read from the process environment).
    pub async fn start_with(env: Env) -> TestServer {
        // Logs help when a test fails; `AR_TEST_LOG=debug` turns them on.
        if let Ok(filter) = std::env::var("AR_TEST_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_test_writer()
                .try_init();
        }
        let settings = ServiceSettings::from_env(|name| env.get(name).cloned())
            .unwrap_or_else(|diagnostics| panic!("settings: {diagnostics:?}"));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let mut service = ar_server::Service::build(settings, addr)
            .await
            .expect("build service");
        service.shutdown_grace = Duration::from_millis(300);
        let token = service
            .service_token
            .as_ref()
            .map(|t| t.expose().to_string());
        let task = tokio::spawn(async move {
            let stopped = async move {
                let _ = stopped.await;
            };
            if let Err(error) = service.serve(listener, stopped).await {
                panic!("the service failed: {error:#}");
            }
        });
        TestServer {
            api: Api::new(addr, token),
            stop: Some(stop),
            task: Some(task),
            dir: None,
        }
    }

    /// A service on a fresh SQLite file, pointed at `mock` (see [`env_for`]).
    pub async fn start(mock: &MockProvider) -> TestServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let dsn = dir.path().join("runtime.db").display().to_string();
        let mut server = TestServer::start_with(env_for(mock, &dsn)).await;
        server.dir = Some(dir);
        server
    }

    /// Shuts the service down gracefully (bounded: 30 s).
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(30), task).await;
        }
    }
}
