// Package observe sets up what lets an operator watch the service (issue
// 12, Observability): the Prometheus metrics registry and its collectors,
// the OpenTelemetry tracer provider, and the slog logger. It holds no
// business rules and imports nothing of the domain; domain packages take a
// *Metrics (nil: record nothing) and start spans with Start or Child, and
// package server wires it all.
//
// # Metrics
//
// Counters and histograms count the work this process did (turns,
// dispatch batches, timer firings, GraphQL requests). Gauges that describe
// the database (sessions by status, pending inputs, open interrupts, due
// timers, dispatch lag) are read at scrape time through a DatabaseFunc, so
// every replica reports the same truth instead of counters that drift; the
// reading is cached for DatabaseTTL. Labels are bounded: action kinds,
// statuses, outcomes, error codes and at most MaxOperationNames GraphQL
// operation names, never session or action ids. docs/observability.md lists
// every metric.
//
// # Traces
//
// Tracing is off (a no-op provider, nothing recorded) unless
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set;
// see NewTracerProvider. Roots are a GraphQL operation, a dispatch batch and
// a turn; everything below them starts with Child, which takes the provider
// of the span in the context, so packages deep in the call tree need no
// provider of their own and record nothing when their caller was not traced.
package observe
