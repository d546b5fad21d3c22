//! Logs and traces of the process: the log lines on stderr (`AGENT_RUNTIME_LOG`), and, when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set, the run loop's spans (target
//! [`ar_core::trace::TARGET`]: one trace per run step, with its model call, tool calls and
//! commits) exported over OTLP/HTTP (protobuf) to `{endpoint}/v1/traces`, and their context
//! handed to host callbacks as `traceparent`.

use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::Layer as _;

/// The standard variable naming the OTLP endpoint (`http://collector:4318`).
pub const OTLP_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

/// Flushes the exporter when dropped (at exit).
pub struct Telemetry(Option<SdkTracerProvider>);

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.0.take() {
            if let Err(error) = provider.shutdown() {
                eprintln!("warning: flushing traces failed: {error}");
            }
        }
    }
}

/// Installs the subscriber: logs filtered by `log_filter`, traces when the endpoint is set.
pub fn init(log_filter: tracing_subscriber::EnvFilter) -> Telemetry {
    let log_filter = log_filter.add_directive(quiet_trace_target());
    // Colours only on a terminal: piped or collected logs stay plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let endpoint = std::env::var(OTLP_ENDPOINT)
        .ok()
        .filter(|endpoint| !endpoint.trim().is_empty());
    let Some(endpoint) = endpoint else {
        // Logs alone, with the filter global: the run loop's spans cost nothing.
        tracing_subscriber::fmt()
            .with_env_filter(log_filter)
            .with_ansi(ansi)
            .with_writer(std::io::stderr)
            .init();
        return Telemetry(None);
    };
    let logs = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .with_filter(log_filter);
    match tracer_provider(&endpoint) {
        Ok(provider) => {
            let tracer = provider.tracer("agent-runtime");
            let traces = tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_filter(
                    tracing_subscriber::filter::Targets::new()
                        .with_target(ar_core::trace::TARGET, tracing::Level::TRACE),
                );
            tracing_subscriber::registry()
                .with(logs)
                .with(traces)
                .init();
            ar_core::trace::set_traceparent_source(current_traceparent);
            tracing::info!(%endpoint, "exporting traces over OTLP");
            Telemetry(Some(provider))
        }
        Err(error) => {
            tracing_subscriber::registry().with(logs).init();
            tracing::error!(%endpoint, %error, "traces are not exported: the OTLP exporter failed");
            Telemetry(None)
        }
    }
}

/// Logs leave the trace spans out whatever the log level.
fn quiet_trace_target() -> tracing_subscriber::filter::Directive {
    format!("{}=off", ar_core::trace::TARGET)
        .parse()
        .unwrap_or_else(|_| tracing::Level::INFO.into())
}

fn tracer_provider(endpoint: &str) -> anyhow::Result<SdkTracerProvider> {
    let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(url)
        .build()?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(
            std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "agent-runtime".into()),
        )
        .build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build())
}

/// The W3C `traceparent` of the current span (`00-{trace}-{span}-{flags}`).
fn current_traceparent() -> Option<String> {
    let context = tracing::Span::current().context();
    let span = context.span();
    let span = span.span_context();
    span.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            span.trace_id(),
            span.span_id(),
            span.trace_flags().to_u8()
        )
    })
}
