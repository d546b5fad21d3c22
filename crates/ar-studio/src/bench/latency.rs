//! Enqueue-to-frame latency: one runtime's stream read over loopback HTTP, one command at a time.

use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::mpsc;

use crate::wire::{Ack, Command};

use super::report::LatencyFigures;
use super::rig::{registration, Rig};

pub(crate) async fn measure(samples: usize) -> LatencyFigures {
    match run(samples).await {
        Ok(f) => f,
        Err(e) => LatencyFigures {
            error: Some(e),
            ..LatencyFigures::default()
        },
    }
}

async fn wait(
    rx: &mut mpsc::UnboundedReceiver<(String, Instant)>,
) -> Result<(String, Instant), String> {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .ok()
        .flatten()
        .ok_or_else(|| "no frame within 10 s".to_string())
}

async fn run(samples: usize) -> Result<LatencyFigures, String> {
    let rig = Rig::start().await.map_err(|e| e.to_string())?;
    rig.server
        .register(registration("lat"))
        .map_err(|e| e.to_string())?;
    let url = format!("http://{}/api/runtime/commands?runtime=lat", rig.addr);
    let resp = reqwest::get(url).await.map_err(|e| e.to_string())?;
    let (tx, mut rx) = mpsc::unbounded_channel::<(String, Instant)>();
    let reader = tokio::spawn(async move {
        let mut sse = ar_sse::Decoder::with_max_frame(1 << 20);
        let mut body = resp.bytes_stream();
        while let Some(Ok(chunk)) = body.next().await {
            let at = Instant::now();
            sse.push(&chunk);
            while let Some(ev) = sse.next_event() {
                if tx.send((ev.event, at)).is_err() {
                    return;
                }
            }
        }
    });
    // ping, breakpoints
    wait(&mut rx).await?;
    wait(&mut rx).await?;
    let mut times = Vec::with_capacity(samples);
    for i in 0..samples {
        let cmd = Command {
            command_id: format!("lat-{i}"),
            agent: "agent".into(),
            input: Some("x".into()),
            ..Command::default()
        };
        let start = Instant::now();
        rig.server.enqueue("lat", cmd).map_err(|e| e.to_string())?;
        let (event, at) = wait(&mut rx).await?;
        if event != "run" {
            return Err(format!("expected a run frame, got {event}"));
        }
        times.push(at.saturating_duration_since(start));
        let done = Ack {
            command_id: format!("lat-{i}"),
            state: "finished".into(),
            status: "succeeded".into(),
            ..Ack::default()
        };
        rig.server.ack(&done).map_err(|e| e.to_string())?;
    }
    reader.abort();
    rig.stop().await;
    times.sort();
    let pick = |q: f64| {
        let idx = ((times.len() as f64 - 1.0) * q).round() as usize;
        times.get(idx).copied().unwrap_or_default()
    };
    Ok(LatencyFigures {
        samples: times.len(),
        p50: pick(0.5),
        p99: pick(0.99),
        max: times.last().copied().unwrap_or_default(),
        error: None,
    })
}
