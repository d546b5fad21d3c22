//! [`MeteredModels`]: the model client, with each call timed and its tokens counted by
//! provider.

use std::sync::Arc;
use std::time::Instant;

use ar_core::model::{DeltaSink, ModelClient, ModelError, ModelRequest, ModelResponse, ModelRoute};
use async_trait::async_trait;

use super::{Metrics, ModelCallLabels, ProviderLabel, TokenLabels};

/// A [`ModelClient`] that records [`Metrics`] around the one it wraps.
pub struct MeteredModels {
    inner: Arc<dyn ModelClient>,
    metrics: Arc<Metrics>,
}

impl MeteredModels {
    pub fn wrap(inner: Arc<dyn ModelClient>, metrics: Arc<Metrics>) -> Arc<dyn ModelClient> {
        Arc::new(MeteredModels { inner, metrics })
    }
}

#[async_trait]
impl ModelClient for MeteredModels {
    async fn complete(
        &self,
        route: &ModelRoute,
        request: &ModelRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let started = Instant::now();
        let span = tracing::trace_span!(target: ar_core::trace::TARGET, "model_call",
            provider = %route.provider, model = %route.model,
            input_tokens = tracing::field::Empty, output_tokens = tracing::field::Empty);
        let call = self.inner.complete(route, request, on_delta);
        let answer = tracing::Instrument::instrument(call, span.clone()).await;
        if let Ok(response) = &answer {
            span.record("input_tokens", response.usage.input_tokens);
            span.record("output_tokens", response.usage.output_tokens);
        }
        let seconds = started.elapsed().as_secs_f64();
        let provider = route.provider.clone();
        let metrics = &self.metrics;
        let outcome = if answer.is_ok() { "ok" } else { "error" };
        metrics
            .model_calls
            .get_or_create(&ModelCallLabels {
                provider: provider.clone(),
                outcome,
            })
            .inc();
        metrics
            .model_seconds
            .get_or_create(&ProviderLabel {
                provider: provider.clone(),
            })
            .observe(seconds);
        if let Ok(response) = &answer {
            let usage = &response.usage;
            for (kind, tokens) in [
                ("input", usage.input_tokens),
                ("cached_input", usage.cached_input_tokens),
                ("output", usage.output_tokens),
                ("reasoning_output", usage.reasoning_output_tokens),
            ] {
                if tokens > 0 {
                    let labels = TokenLabels {
                        provider: provider.clone(),
                        kind,
                    };
                    metrics
                        .model_tokens
                        .get_or_create(&labels)
                        .inc_by(tokens as u64);
                }
            }
        }
        answer
    }
}
