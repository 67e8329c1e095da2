package observe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actionsledger/actionsledger/internal/observe"
)

// Issue 12: GraphQL operation names become label values only up to
// MaxOperationNames distinct names of at most 64 characters; later names
// are "other", an operation without a name "anonymous".
func TestIssue12OperationNamesAreBounded(t *testing.T) {
	t.Parallel()
	m := observe.NewMetrics()
	require.Equal(t, observe.AnonymousOperation, m.Operation(""))
	require.Equal(t, observe.OtherOperation, m.Operation(strings.Repeat("a", 65)))
	for i := range observe.MaxOperationNames {
		name := fmt.Sprintf("Op%d", i)
		require.Equal(t, name, m.Operation(name))
	}
	require.Equal(t, observe.OtherOperation, m.Operation("OneTooMany"))
	require.Equal(t, "Op7", m.Operation("Op7"), "names seen before keep their label")
}

// Issue 12: LOG_FORMAT text (default) or json, LOG_LEVEL; anything else is
// refused.
func TestIssue12LoggerFormats(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log, err := observe.NewLogger(&buf, "json", "debug")
	require.NoError(t, err)
	log.Debug("hello", "n", 1)
	var m map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &m))
	require.Equal(t, "hello", m["msg"])

	buf.Reset()
	log, err = observe.NewLogger(&buf, "", "")
	require.NoError(t, err)
	log.Debug("hidden")
	log.Info("shown", "n", 1)
	require.Equal(t, "shown n=1", strings.TrimSpace(buf.String()[strings.Index(buf.String(), "msg=")+4:]))

	_, err = observe.NewLogger(&buf, "yaml", "")
	require.Error(t, err)
	_, err = observe.NewLogger(&buf, "text", "loud")
	require.Error(t, err)
}

// Issue 12: tracing is off (a no-op provider) unless an OTLP endpoint is
// set, and OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none turn it off.
func TestIssue12TracingFromEnv(t *testing.T) {
	t.Parallel()
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for name, kv := range map[string]map[string]string{
		"nothing set":   {},
		"disabled":      {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"},
		"exporter none": {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"},
	} {
		tp, stop, err := observe.NewTracerProvider(context.Background(), env(kv))
		require.NoError(t, err, name)
		require.False(t, observe.Tracing(tp), name)
		require.NoError(t, stop(context.Background()))
	}
	for _, protocol := range []string{"", "http/protobuf", "grpc"} {
		tp, stop, err := observe.NewTracerProvider(context.Background(), env(map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": protocol}))
		require.NoError(t, err, protocol)
		require.True(t, observe.Tracing(tp), protocol)
		require.NoError(t, stop(context.Background()), "nothing to flush")
	}
	_, _, err := observe.NewTracerProvider(context.Background(), env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}))
	require.Error(t, err)
}
