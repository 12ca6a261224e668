//! Traces: W3C Trace Context in and out, and OTLP export of Helix's own spans.
//!
//! Export is on only when `OTEL_EXPORTER_OTLP_ENDPOINT` (or the traces-only
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set and `OTEL_SDK_DISABLED` is not `true`;
//! then the SDK reads the other standard variables itself (`OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_TRACES_SAMPLER`,
//! `OTEL_BSP_*`, ...). Unset: no provider, no OpenTelemetry layer, no header parsing.
//!
//! What a span may carry: operation names, the route group, status codes, table names,
//! outcome codes. Never a header, a path, a query, a body, a key value, a tool
//! argument or a credential: the layer sees Helix's own spans and events only (see
//! [`layer`]), and those follow the logging rule (`wiring::log_ceiling`).

use std::sync::OnceLock;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;

/// The provider of this process, once [`install`] has set it; `None` while export is off.
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// Helix's own crates (targets): they follow `RUST_LOG` to `trace` (the ceiling in
/// `wiring`), and only their spans are exported as traces.
pub const OWN_CRATES: [&str; 9] = [
    "helix",
    "helix_core",
    "helix_agent_runs",
    "helix_rooms",
    "helix_ingress",
    "helix_discovery",
    "helix_mcp",
    "helix_account",
    "helix_solver",
];

/// Whether the environment asks for OTLP export (`lookup` reads one variable).
pub fn export_requested(lookup: impl Fn(&str) -> Option<String>) -> bool {
    let set = |name: &str| lookup(name).is_some_and(|v| !v.trim().is_empty());
    let disabled = lookup("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    !disabled && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

/// The tracer provider the process environment asks for: `None` when export is off, or
/// when the exporter cannot be built (logged to stderr: the subscriber is not up yet).
pub fn provider_from_env(default_service_name: &str) -> Option<SdkTracerProvider> {
    if !export_requested(|name| std::env::var(name).ok()) {
        return None;
    }
    let exporter = match opentelemetry_otlp::SpanExporter::builder().with_http().build() {
        Ok(exporter) => exporter,
        Err(error) => {
            eprintln!("OTLP trace export off: the exporter cannot be built: {error}");
            return None;
        }
    };
    let mut resource = opentelemetry_sdk::Resource::builder();
    if std::env::var("OTEL_SERVICE_NAME").map_or(true, |v| v.trim().is_empty()) {
        resource = resource.with_service_name(default_service_name.to_owned());
    }
    Some(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource.build()).build())
}

/// Keeps `provider` as this process's (for [`flush`] and [`shutdown`]) and marks export on.
pub fn install(provider: SdkTracerProvider) {
    let _ = PROVIDER.set(provider);
}

/// Whether spans are exported (a provider is installed).
pub fn enabled() -> bool {
    PROVIDER.get().is_some()
}

/// The OpenTelemetry layer over `provider`: it sees the spans and events of Helix's own
/// crates at `info` and above, nothing of a dependency (an SDK's or a transport's spans
/// may name request data).
pub fn layer<S>(provider: &SdkTracerProvider) -> impl Layer<S> + Send + Sync + 'static
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a> + Send + Sync,
{
    use tracing_subscriber::filter::LevelFilter;
    let own = OWN_CRATES
        .iter()
        .fold(tracing_subscriber::filter::Targets::new(), |t, name| t.with_target(*name, LevelFilter::INFO));
    tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("helix"))
        .with_location(false)
        .with_threads(false)
        .with_filter(own)
}

/// Exports every ended span now (the end of a Lambda invocation: the environment may be
/// frozen before the batch timer fires). Blocks until the exporter answers or times out.
pub fn flush() {
    if let Some(provider) = PROVIDER.get() {
        let _ = provider.force_flush();
    }
}

/// Flushes and stops the exporter (`helix serve` on shutdown).
pub fn shutdown() {
    if let Some(provider) = PROVIDER.get() {
        let _ = provider.shutdown();
    }
}

/// Continues the caller's trace: the `traceparent` (and `tracestate`) of `headers`
/// becomes the parent of `span`. A missing or malformed header leaves `span` a root.
pub fn continue_trace(span: &tracing::Span, headers: &http::HeaderMap) {
    if !enabled() {
        return;
    }
    let parent = TraceContextPropagator::new().extract(&opentelemetry_http::HeaderExtractor(headers));
    let _ = span.set_parent(parent);
}

/// Propagates the current span's trace to an outgoing request (`traceparent`, and
/// `tracestate` when the trace has one). Nothing is written while export is off.
pub fn inject_current(headers: &mut http::HeaderMap) {
    if !enabled() {
        return;
    }
    let cx = tracing::Span::current().context();
    TraceContextPropagator::new().inject_context(&cx, &mut opentelemetry_http::HeaderInjector(headers));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_is_on_only_when_an_endpoint_is_set_and_the_sdk_is_not_disabled() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
        };
        assert!(!export_requested(env(&[])));
        assert!(!export_requested(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])));
        assert!(!export_requested(env(&[("OTEL_SERVICE_NAME", "helix")])));
        assert!(export_requested(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318")])));
        assert!(export_requested(env(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/v1/traces")])));
        assert!(!export_requested(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318"),
            ("OTEL_SDK_DISABLED", "TRUE")
        ])));
    }
}
