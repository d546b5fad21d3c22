//! A studio served on 127.0.0.1:0 for the benchmark, and a registration to give its runtimes.

use std::net::SocketAddr;
use std::time::Duration;

use crate::http::{router, PeerAddr, RouterOptions};
use crate::serve::DeadlineListener;
use crate::server::{ServerConfig, StudioServer};
use crate::wire::{AgentRegistration, Registration};

pub(crate) struct Rig {
    pub(crate) server: StudioServer,
    pub(crate) addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Rig {
    pub(crate) async fn start() -> std::io::Result<Rig> {
        let server = StudioServer::new(ServerConfig::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let app = router(server.clone(), RouterOptions::default());
        let listener = DeadlineListener::new(listener, Duration::from_secs(30));
        let task = tokio::spawn(async move {
            let _ = axum::serve(
                listener,
                app.into_make_service_with_connect_info::<PeerAddr>(),
            )
            .await;
        });
        Ok(Rig { server, addr, task })
    }

    pub(crate) async fn stop(self) {
        self.server.shutdown().await;
        self.task.abort();
    }
}

pub(crate) fn registration(id: &str) -> Registration {
    Registration {
        runtime_id: id.to_string(),
        service: "bench".into(),
        agents: vec![AgentRegistration {
            name: "agent".into(),
            manifest: r#"{"weft":1,"agents":[{"name":"agent","tools":[{"name":"echo"}]}]}"#.into(),
            ..AgentRegistration::default()
        }],
        ..Registration::default()
    }
}
