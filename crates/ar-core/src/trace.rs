//! The trace context of the work in progress, as the W3C `traceparent` a request to a host
//! carries. The process that exports traces installs where it comes from (the binary's
//! OpenTelemetry layer); without that there is none and no header is sent. Spans of the run
//! loop use [`TARGET`], which only the trace exporter listens to.

use std::sync::OnceLock;

/// The `tracing` target of the spans exported as traces (run steps, model and tool calls,
/// commits); logs leave it out.
pub const TARGET: &str = "agent_runtime::trace";

/// The header name.
pub const TRACEPARENT: &str = "traceparent";

static SOURCE: OnceLock<fn() -> Option<String>> = OnceLock::new();

/// Installs the source of [`traceparent`] (once; later calls are ignored).
pub fn set_traceparent_source(source: fn() -> Option<String>) {
    let _ = SOURCE.set(source);
}

/// The `traceparent` of the current span, when traces are exported.
pub fn traceparent() -> Option<String> {
    SOURCE.get().and_then(|source| source())
}
