package observe

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every metric name of the service.
const Namespace = "actionsledger"

// MaxOperationNames bounds the GraphQL operation names that become label
// values: the first MaxOperationNames distinct names a process sees keep
// their name, later ones count as OtherOperation (issue 12).
const MaxOperationNames = 100

// maxOperationNameLen bounds one operation name used as a label value;
// longer names count as OtherOperation.
const maxOperationNameLen = 64

// Operation label values that are not a client's operation name.
const (
	AnonymousOperation = "anonymous" // an operation without a name
	OtherOperation     = "other"     // past MaxOperationNames, or too long
)

// Metrics are one process's Prometheus metrics (issue 12), on a registry of
// their own so that tests may run several services in one process. Every
// recording method is safe on a nil *Metrics, which records nothing.
type Metrics struct {
	// Registry holds the collectors; Handler serves it.
	Registry *prometheus.Registry

	dispatchBatches  prometheus.Counter
	dispatchEvents   prometheus.Counter
	dispatchDuration prometheus.Histogram
	turns            *prometheus.CounterVec
	turnDuration     *prometheus.HistogramVec
	turnInputs       prometheus.Histogram
	claimWait        prometheus.Histogram
	handlerErrors    *prometheus.CounterVec
	interrupts       *prometheus.CounterVec
	firings          prometheus.Counter
	firingLag        prometheus.Histogram
	triggerFirings   prometheus.Counter
	triggerMissed    prometheus.Counter
	triggerLag       prometheus.Histogram
	gqlRequests      *prometheus.CounterVec
	gqlDuration      *prometheus.HistogramVec

	mu  sync.Mutex
	ops map[string]struct{}
}

// NewMetrics returns Metrics on a new registry that also carries the Go
// runtime and process collectors.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	f := func(c prometheus.Collector) prometheus.Collector { reg.MustRegister(c); return c }
	durations := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}
	waits := []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 60, 300, 3600}
	m := &Metrics{
		Registry: reg,
		dispatchBatches: f(prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "dispatch_batches_total",
			Help: "Dispatch batches this process committed (each one transaction over up to 500 events)."})).(prometheus.Counter),
		dispatchEvents: f(prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "dispatch_events_total",
			Help: "Events this process dispatched (matched against the triggers)."})).(prometheus.Counter),
		dispatchDuration: f(prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "dispatch_batch_duration_seconds",
			Help: "Time to dispatch one batch, commit included.", Buckets: durations})).(prometheus.Histogram),
		turns: f(prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "turns_total",
			Help: "Turns this process settled, by action kind and outcome (SUCCEEDED, FAILED, HELD, CANCELLED)."}, []string{"kind", "outcome"})).(*prometheus.CounterVec),
		turnDuration: f(prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "turn_duration_seconds",
			Help: "Time from claiming a turn to committing its outcome, by action kind and outcome.", Buckets: durations}, []string{"kind", "outcome"})).(*prometheus.HistogramVec),
		turnInputs: f(prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "turn_inputs",
			Help: "Inputs one turn took.", Buckets: []float64{0, 1, 2, 3, 5, 10, 20, 50, 100, 200, 500}})).(prometheus.Histogram),
		claimWait: f(prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "turn_claim_wait_seconds",
			Help: "How long a session was runnable before this process claimed its turn (service clock).", Buckets: waits})).(prometheus.Histogram),
		handlerErrors: f(prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "handler_errors_total",
			Help: "Attempts whose handler returned an error, by action kind and error code."}, []string{"kind", "code"})).(*prometheus.CounterVec),
		interrupts: f(prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "interrupts_total",
			Help: "Interrupts this process raised or answered, by kind (APPROVAL, HOLD) and event (raised, answered)."}, []string{"kind", "event"})).(*prometheus.CounterVec),
		firings: f(prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "timer_firings_total",
			Help: "Due session timers this process fired."})).(prometheus.Counter),
		firingLag: f(prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "timer_firing_lag_seconds",
			Help: "How late a session timer fired after it was due (service clock).", Buckets: waits})).(prometheus.Histogram),
		triggerFirings: f(prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "schedule_trigger_firings_total",
			Help: "Firings of schedule triggers this process appended (one schedule.fired event each)."})).(prometheus.Counter),
		triggerMissed: f(prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "schedule_trigger_missed_total",
			Help: "Firings of schedule triggers passed over (counted in a later firing's missed), such as while no process ran."})).(prometheus.Counter),
		triggerLag: f(prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "schedule_trigger_lag_seconds",
			Help: "How late a schedule trigger's firing was appended after its scheduled time (service clock).", Buckets: waits})).(prometheus.Histogram),
		gqlRequests: f(prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "graphql_requests_total",
			Help: "GraphQL requests, by operation name (bounded) and the code of the first error (ok for none)."}, []string{"operation", "code"})).(*prometheus.CounterVec),
		gqlDuration: f(prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "graphql_request_duration_seconds",
			Help: "Time to answer a GraphQL request, by operation name (bounded).", Buckets: prometheus.DefBuckets}, []string{"operation"})).(*prometheus.HistogramVec),
		ops: map[string]struct{}{},
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus text (or OpenMetrics)
// format. A collector that fails is reported in the response, not as an
// HTTP error, so the other metrics still arrive.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// DispatchBatch records one committed dispatch batch of n events that took d.
func (m *Metrics) DispatchBatch(n int, d time.Duration) {
	if m == nil {
		return
	}
	m.dispatchBatches.Inc()
	m.dispatchEvents.Add(float64(n))
	m.dispatchDuration.Observe(d.Seconds())
}

// Turn records a settled turn: its action kind, outcome (the execution's
// status), the number of inputs it took and its duration.
func (m *Metrics) Turn(kind, outcome string, inputs int, d time.Duration) {
	if m == nil {
		return
	}
	m.turns.WithLabelValues(kind, outcome).Inc()
	m.turnDuration.WithLabelValues(kind, outcome).Observe(d.Seconds())
	m.turnInputs.Observe(float64(inputs))
}

// ClaimWait records how long a claimed session had been runnable.
func (m *Metrics) ClaimWait(d time.Duration) {
	if m == nil {
		return
	}
	m.claimWait.Observe(max(d, 0).Seconds())
}

// HandlerError records an attempt whose handler failed with code (a small
// fixed vocabulary: see turns.ErrorCode).
func (m *Metrics) HandlerError(kind, code string) {
	if m == nil {
		return
	}
	m.handlerErrors.WithLabelValues(kind, code).Inc()
}

// Interrupt records an interrupt of kind (APPROVAL, HOLD) raised or
// answered (event "raised" or "answered").
func (m *Metrics) Interrupt(kind, event string) {
	if m == nil {
		return
	}
	m.interrupts.WithLabelValues(kind, event).Inc()
}

// Firing records a session timer fired lag after it was due.
func (m *Metrics) Firing(lag time.Duration) {
	if m == nil {
		return
	}
	m.firings.Inc()
	m.firingLag.Observe(max(lag, 0).Seconds())
}

// TriggerFiring records a schedule trigger's firing (A4), appended lag
// after its scheduled time, that passed over missed earlier ones.
func (m *Metrics) TriggerFiring(lag time.Duration, missed int) {
	if m == nil {
		return
	}
	m.triggerFirings.Inc()
	m.triggerMissed.Add(float64(missed))
	m.triggerLag.Observe(max(lag, 0).Seconds())
}

// GraphQLRequest records one GraphQL request: the operation's name as the
// client sent it (see Operation for the label), the code of its first error
// ("ok" for none) and how long it took.
func (m *Metrics) GraphQLRequest(operation, code string, d time.Duration) {
	if m == nil {
		return
	}
	op := m.Operation(operation)
	m.gqlRequests.WithLabelValues(op, code).Inc()
	m.gqlDuration.WithLabelValues(op).Observe(d.Seconds())
}

// Operation returns the label value for an operation name: "anonymous" for
// none, the name itself for the first MaxOperationNames names (of at most 64
// characters) this process sees, "other" for the rest.
func (m *Metrics) Operation(name string) string {
	switch {
	case name == "":
		return AnonymousOperation
	case len(name) > maxOperationNameLen:
		return OtherOperation
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.ops[name]; ok {
		return name
	}
	if len(m.ops) >= MaxOperationNames {
		return OtherOperation
	}
	m.ops[name] = struct{}{}
	return name
}

// Database is what the database says at one scrape (issue 12): gauges that
// every replica reads alike. Maps are keyed by status or kind.
type Database struct {
	// Head is the ledger head: the position of the newest event, which,
	// positions being gapless from 1, is how many events were ever appended.
	Head int64
	// DispatchPosition is the dispatcher's cursor: events up to it are dispatched.
	DispatchPosition int64
	// DispatchLag is how long the oldest event not yet dispatched has
	// waited since its commit time (0 when caught up).
	DispatchLag time.Duration
	// Sessions counts sessions by status (OPEN, WAITING, COMPLETED, ...).
	Sessions map[string]int64
	// PendingInputs counts inputs delivered and not yet taken by a turn.
	PendingInputs int64
	// OpenInterrupts counts unanswered interrupts by kind (APPROVAL, HOLD).
	OpenInterrupts map[string]int64
	// TimersDue counts session timers due and not yet fired; OldestTimerDue
	// is how late the oldest of them is (0 when none is due).
	TimersDue      int64
	OldestTimerDue time.Duration
}

// DatabaseFunc reads Database; it should be a few indexed statements.
type DatabaseFunc func(ctx context.Context) (Database, error)

// DatabaseTTL is how long a Database reading serves scrapes before it is
// read again, so that several scrapers cost one reading.
const DatabaseTTL = 5 * time.Second

// databaseTimeout bounds one reading.
const databaseTimeout = 2 * time.Second

// WatchDatabase registers the gauges f reads at scrape time, cached for
// ttl (DatabaseTTL when 0, no caching when negative). A failed reading
// reports actionsledger_metrics_database_up 0 and none of the gauges. Call
// it once.
func (m *Metrics) WatchDatabase(f DatabaseFunc, ttl time.Duration) {
	if ttl == 0 {
		ttl = DatabaseTTL
	}
	m.Registry.MustRegister(newDatabaseCollector(f, ttl))
}

// WatchPools registers the statistics of connection pools (pgxpool.Stat),
// labelled pool=name ("main", "tools"). Call it once.
func (m *Metrics) WatchPools(pools map[string]*pgxpool.Pool) {
	m.Registry.MustRegister(&poolCollector{pools: pools})
}
