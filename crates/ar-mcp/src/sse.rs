//! An SSE answer as rmcp's transport reads it: events decoded by the workspace's bounded
//! decoder, each message checked to be JSON-RPC. A bad event (over the cap, or not JSON-RPC)
//! would otherwise be skipped by rmcp and leave the call waiting until its timeout, so it is
//! turned into an error answer to the request (marked as a protocol fault, see
//! [`FAULT_KEY`]) and the stream ends.

use ar_core::mcp::McpError;
use ar_sse::Decoder;
use bytes::Bytes;
use futures::stream::{self, BoxStream, Stream, StreamExt};
use rmcp::model::{ErrorCode, ErrorData, RequestId, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::SseError;
use sse_stream::Sse;

use crate::http::send_error;

/// The key in an error answer's `data` that marks it as made here from a protocol fault of the
/// server's stream, not sent by the server.
pub(crate) const FAULT_KEY: &str = "agent-runtime/mcpProtocolFault";

/// The events of an SSE body. `request` is the request the body answers (none for a resumed
/// stream, whose faults end it with an error instead).
pub(crate) fn events<S>(
    body: S,
    max_event_bytes: usize,
    request: Option<RequestId>,
) -> BoxStream<'static, Result<Sse, SseError>>
where
    S: Stream<Item = Result<Bytes, reqwest::Error>> + Send + 'static,
{
    let state = State {
        body: body.boxed(),
        decoder: Decoder::with_max_frame(max_event_bytes),
        max_event_bytes,
        request,
        done: false,
    };
    stream::unfold(state, |mut state| async move {
        let item = state.next().await?;
        Some((item, state))
    })
    .boxed()
}

struct State {
    body: BoxStream<'static, Result<Bytes, reqwest::Error>>,
    decoder: Decoder,
    max_event_bytes: usize,
    request: Option<RequestId>,
    done: bool,
}

impl State {
    async fn next(&mut self) -> Option<Result<Sse, SseError>> {
        while !self.done {
            if let Some(event) = self.decoder.next_event() {
                return Some(self.check(event));
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self.decoder.push(&chunk),
                Some(Err(err)) => {
                    self.done = true;
                    return Some(Err(SseError::Body(Box::new(send_error(&err)))));
                }
                None => self.done = true,
            }
        }
        None
    }

    fn check(&mut self, event: ar_sse::Event) -> Result<Sse, SseError> {
        if event.oversized {
            let cap = self.max_event_bytes;
            return self.fault(format!(
                "an SSE event of the answer is over the {cap} byte cap"
            ));
        }
        let is_message = matches!(event.event.as_str(), "" | "message");
        if is_message && !event.data.trim().is_empty() {
            if let Err(err) = serde_json::from_str::<ServerJsonRpcMessage>(&event.data) {
                return self.fault(format!(
                    "an SSE event of the answer is not a JSON-RPC message ({err})"
                ));
            }
        }
        Ok(Sse {
            event: (!event.event.is_empty()).then_some(event.event),
            data: (!event.data.is_empty()).then_some(event.data),
            id: event.id,
            retry: None,
        })
    }

    /// Ends the stream with an error answer to the request, or with an error.
    fn fault(&mut self, message: String) -> Result<Sse, SseError> {
        self.done = true;
        let Some(id) = self.request.take() else {
            return Err(SseError::Body(Box::new(McpError::Protocol(message))));
        };
        let data = serde_json::json!({ FAULT_KEY: true });
        let answer = ServerJsonRpcMessage::error(
            ErrorData::new(ErrorCode::INTERNAL_ERROR, message, Some(data)),
            Some(id),
        );
        let data = serde_json::to_string(&answer).map_err(|err| SseError::Body(Box::new(err)))?;
        Ok(Sse {
            data: Some(data),
            ..Sse::default()
        })
    }
}

/// The protocol fault an error answer stands for, if it was made by [`events`].
pub(crate) fn fault_of(error: &ErrorData) -> Option<McpError> {
    let marked = error
        .data
        .as_ref()
        .and_then(|data| data.get(FAULT_KEY))
        .is_some();
    marked.then(|| McpError::Protocol(error.message.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::NumberOrString;

    async fn collect(body: &'static str, cap: usize) -> Vec<Result<Sse, String>> {
        let chunks = vec![Ok(Bytes::from_static(body.as_bytes()))];
        events(stream::iter(chunks), cap, Some(NumberOrString::Number(7)))
            .map(|item| item.map_err(|err| err.to_string()))
            .collect()
            .await
    }

    #[tokio::test]
    async fn messages_pass_and_garbage_becomes_an_error_answer() {
        let ok = r#"{"jsonrpc":"2.0","id":7,"result":{}}"#;
        let body = Box::leak(
            format!("id: 1\ndata:\n\nevent: message\ndata: {ok}\n\ndata: nope\n\ndata: {ok}\n\n")
                .into_boxed_str(),
        );
        let items = collect(body, 1024).await;
        assert_eq!(items.len(), 3, "{items:?}");
        assert_eq!(items[0].as_ref().unwrap().id.as_deref(), Some("1"));
        assert_eq!(items[1].as_ref().unwrap().data.as_deref(), Some(ok));
        let fault = items[2].as_ref().unwrap().data.clone().unwrap();
        let answer: ServerJsonRpcMessage = serde_json::from_str(&fault).unwrap();
        let ServerJsonRpcMessage::Error(error) = answer else {
            panic!("not an error answer: {fault}");
        };
        assert_eq!(error.id, Some(NumberOrString::Number(7)));
        let kind = fault_of(&error.error).expect("marked as a fault");
        assert!(matches!(kind, McpError::Protocol(message) if message.contains("not a JSON-RPC")));
    }

    #[tokio::test]
    async fn an_event_over_the_cap_ends_the_stream() {
        let body = "data: 0123456789012345678901234567890123456789\n\ndata: {}\n\n";
        let items = collect(body, 16).await;
        assert_eq!(items.len(), 1, "{items:?}");
        let fault = items[0].as_ref().unwrap().data.clone().unwrap();
        assert!(fault.contains("over the 16 byte cap"), "{fault}");
    }
}
