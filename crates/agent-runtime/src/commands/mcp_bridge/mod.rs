//! `agent-runtime mcp-bridge`: a stdio MCP server exposing one run's effective tools through
//! the service's run tool gateway, so a CLI agent's calls pass the run's approval gate and are
//! recorded like native calls. Settings come from the environment (`settings`); messages are
//! read in either stdio framing and answered in the one they came in (`framing`), one JSON-RPC
//! method at a time (`protocol`) against the gateway over HTTP (`gateway`).

mod framing;
mod gateway;
mod protocol;
mod settings;

use std::sync::Arc;

use anyhow::Context as _;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use framing::{encode, next_message, Framing};
use gateway::{HttpGateway, RunTools};
use settings::BridgeSettings;

pub async fn run() -> anyhow::Result<()> {
    let settings = BridgeSettings::from_lookup(|name| std::env::var(name).ok())?;
    let gateway = HttpGateway::new(&settings).context("the gateway's HTTP client")?;
    // The origin only: a URL's user info may hold a credential.
    tracing::info!(
        service = %settings.base_url.origin().ascii_serialization(),
        app_id = %settings.app_id,
        run_id = %settings.run_id,
        "mcp bridge serving the run's tools on stdio"
    );
    serve(tokio::io::stdin(), tokio::io::stdout(), Arc::new(gateway))
        .await
        .context("the MCP stdio session")
}

/// Serves one MCP session until the input ends. Requests are answered concurrently (a long
/// tool call does not hold up a `ping`); one writer keeps answers whole.
async fn serve<R, W, T>(input: R, output: W, tools: Arc<T>) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
    T: RunTools,
{
    let (answers, outgoing) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer = tokio::spawn(write_answers(outgoing, output));
    let mut reader = BufReader::new(input);
    let mut requests = JoinSet::new();
    let read = loop {
        let message = match next_message(&mut reader).await {
            Ok(Some(message)) => message,
            Ok(None) => break Ok(()),
            Err(error) => break Err(error),
        };
        let answers = answers.clone();
        let tools = tools.clone();
        requests.spawn(async move {
            let answer = match &message.body {
                Ok(body) => protocol::answer(body, &*tools).await,
                Err(reason) => Some(protocol::parse_error(reason)),
            };
            if let Some(answer) = answer {
                let _ = answers.send(framed(message.framing, &answer));
            }
        });
        // Finished requests are reaped as the session goes, not only at its end.
        while requests.try_join_next().is_some() {}
    };
    while requests.join_next().await.is_some() {}
    drop(answers);
    let written = writer
        .await
        .unwrap_or_else(|error| Err(std::io::Error::other(error)));
    read.and(written)
}

fn framed(framing: Framing, answer: &serde_json::Value) -> Vec<u8> {
    // Serializing a `Value` cannot fail.
    let body = serde_json::to_vec(answer).unwrap_or_default();
    encode(framing, &body)
}

async fn write_answers<W: AsyncWrite + Unpin>(
    mut outgoing: mpsc::UnboundedReceiver<Vec<u8>>,
    mut output: W,
) -> std::io::Result<()> {
    while let Some(bytes) = outgoing.recv().await {
        output.write_all(&bytes).await?;
        output.flush().await?;
    }
    Ok(())
}
