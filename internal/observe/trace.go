package observe

import (
	"context"
	"fmt"
	"strings"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Scope is the instrumentation scope of the service's own spans.
const Scope = "github.com/actionsledger/actionsledger"

// ServiceName is the service.name of the trace resource unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES says otherwise.
const ServiceName = "actionsledger"

// NewTracerProvider returns the tracer provider the environment asks for
// (issue 12) and a function that flushes and stops it.
//
// Tracing is on when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT is set, and neither OTEL_SDK_DISABLED=true nor
// OTEL_TRACES_EXPORTER=none says otherwise; spans then go in batches to that
// OTLP endpoint over HTTP (protobuf) or, when
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL is
// "grpc", over gRPC. The SDK reads the rest of the standard variables
// itself: headers, timeouts, TLS and compression (OTEL_EXPORTER_OTLP_*),
// the sampler (OTEL_TRACES_SAMPLER, default parentbased_always_on), batching
// (OTEL_BSP_*) and the resource (OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES). Off, the provider is a no-op: spans cost a
// context lookup and nothing is recorded.
//
// Errors: an unknown protocol, or an exporter that cannot be built.
func NewTracerProvider(ctx context.Context, getenv func(string) string) (trace.TracerProvider, func(context.Context) error, error) {
	off := func(context.Context) error { return nil }
	endpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		endpoint = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	if endpoint == "" || strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return noop.NewTracerProvider(), off, nil
	}
	protocol := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exp sdktrace.SpanExporter
	var err error
	switch protocol {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: want http/protobuf or grpc", protocol)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(Resource(ctx)))
	return tp, tp.Shutdown, nil
}

// Resource describes this process: service.name actionsledger, the SDK,
// and what OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES add or override.
func Resource(ctx context.Context) *resource.Resource {
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(ServiceName)),
		resource.WithTelemetrySDK(), resource.WithFromEnv(), resource.WithHost())
	if err != nil {
		// A malformed OTEL_RESOURCE_ATTRIBUTES leaves what could be read.
		return res
	}
	return res
}

// Tracer returns the service's tracer of tp (a no-op one for nil).
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(Scope)
}

// Root starts a span that is the root of a trace of its own (a dispatch
// batch, a turn: issue 12), whatever span ctx carries.
func Root(ctx context.Context, t trace.Tracer, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if t == nil {
		t = Tracer(nil)
	}
	return t.Start(ctx, name, trace.WithNewRoot(), trace.WithAttributes(attrs...))
}

// Child starts a span under the span in ctx, with that span's provider: a
// caller that is not traced gets a no-op span and nothing is recorded.
func Child(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return trace.SpanFromContext(ctx).TracerProvider().Tracer(Scope).Start(ctx, name, trace.WithAttributes(attrs...))
}

// End ends span, marking it failed with err when err is not nil.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// TraceID returns the hex trace id of the span in ctx; "" when ctx is not
// traced (or sampled out).
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}

// PgxTracer returns the pgx tracer that records a span for each query,
// batch, COPY, prepare and connect made under a traced context (issue 12;
// github.com/exaring/otelpgx). Spans carry the SQL text, never its
// arguments. Queries outside a traced context (the executor's and
// dispatcher's polls) record nothing.
func PgxTracer(tp trace.TracerProvider) pgx.QueryTracer {
	return otelpgx.NewTracer(otelpgx.WithTracerProvider(tp), otelpgx.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelpgx.WithDisableConnectionDetailsInAttributes())
}

// Tracing reports whether tp records spans (it is not a no-op provider).
func Tracing(tp trace.TracerProvider) bool {
	switch tp.(type) {
	case nil, noop.TracerProvider, *noop.TracerProvider:
		return false
	}
	return true
}
