package observe

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
}

// databaseCollector reads Database at scrape time, at most once per ttl.
type databaseCollector struct {
	f   DatabaseFunc
	ttl time.Duration

	mu   sync.Mutex
	at   time.Time // when last was read (real time)
	last Database
	err  error

	up, events, dispatchPos, lagPositions, lagSeconds, sessions, pending, interrupts, timersDue, timersLate *prometheus.Desc
}

func newDatabaseCollector(f DatabaseFunc, ttl time.Duration) *databaseCollector {
	return &databaseCollector{f: f, ttl: ttl,
		up:           desc("metrics_database_up", "1 when the database gauges below could be read at this scrape, 0 when not (they are then absent)."),
		events:       desc("events_appended_total", "Events ever appended to the ledger (the ledger head; all replicas report the same value)."),
		dispatchPos:  desc("dispatch_position", "Position of the newest event the dispatcher has handled."),
		lagPositions: desc("dispatch_lag_positions", "Events committed but not yet dispatched (ledger head minus the dispatch position)."),
		lagSeconds:   desc("dispatch_lag_seconds", "Age of the oldest event not yet dispatched, from its commit time (0 when caught up)."),
		sessions:     desc("sessions", "Sessions by status.", "status"),
		pending:      desc("session_inputs_pending", "Inputs delivered to sessions and not yet taken by a turn."),
		interrupts:   desc("interrupts_open", "Interrupts not yet answered, by kind (APPROVAL, HOLD).", "kind"),
		timersDue:    desc("timers_due", "Session timers due and not yet fired."),
		timersLate:   desc("timers_due_lag_seconds", "How late the oldest due session timer is (0 when none is due)."),
	}
}

func (c *databaseCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.events, c.dispatchPos, c.lagPositions, c.lagSeconds, c.sessions, c.pending, c.interrupts, c.timersDue, c.timersLate} {
		ch <- d
	}
}

func (c *databaseCollector) read() (Database, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ttl < 0 || c.at.IsZero() || time.Since(c.at) >= c.ttl {
		ctx, cancel := context.WithTimeout(context.Background(), databaseTimeout)
		c.last, c.err = c.f(ctx)
		cancel()
		c.at = time.Now()
	}
	return c.last, c.err
}

func (c *databaseCollector) Collect(ch chan<- prometheus.Metric) {
	db, err := c.read()
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	g(c.up, 1)
	ch <- prometheus.MustNewConstMetric(c.events, prometheus.CounterValue, float64(db.Head))
	g(c.dispatchPos, float64(db.DispatchPosition))
	g(c.lagPositions, float64(max(db.Head-db.DispatchPosition, 0)))
	g(c.lagSeconds, max(db.DispatchLag, 0).Seconds())
	for _, k := range sortedKeys(db.Sessions) {
		g(c.sessions, float64(db.Sessions[k]), k)
	}
	g(c.pending, float64(db.PendingInputs))
	for _, k := range sortedKeys(db.OpenInterrupts) {
		g(c.interrupts, float64(db.OpenInterrupts[k]), k)
	}
	g(c.timersDue, float64(db.TimersDue))
	g(c.timersLate, max(db.OldestTimerDue, 0).Seconds())
}

func sortedKeys(m map[string]int64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// poolCollector reports pgxpool.Stat of each pool.
type poolCollector struct {
	pools map[string]*pgxpool.Pool
}

var (
	poolConns     = desc("db_pool_connections", "Connections of the pool by state (acquired, idle, constructing).", "pool", "state")
	poolMax       = desc("db_pool_max_connections", "The pool's maximum size.", "pool")
	poolAcquires  = desc("db_pool_acquires_total", "Successful acquisitions of a connection from the pool.", "pool")
	poolWait      = desc("db_pool_acquire_wait_seconds_total", "Total time spent acquiring connections from the pool.", "pool")
	poolEmpty     = desc("db_pool_empty_acquires_total", "Acquisitions that had to wait because the pool had no idle connection.", "pool")
	poolCancelled = desc("db_pool_canceled_acquires_total", "Acquisitions cancelled (by their context) before they got a connection.", "pool")
)

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolConns, poolMax, poolAcquires, poolWait, poolEmpty, poolCancelled} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	for name, p := range c.pools {
		s := p.Stat()
		g := func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, t, v, append([]string{name}, labels...)...)
		}
		g(poolConns, prometheus.GaugeValue, float64(s.AcquiredConns()), "acquired")
		g(poolConns, prometheus.GaugeValue, float64(s.IdleConns()), "idle")
		g(poolConns, prometheus.GaugeValue, float64(s.ConstructingConns()), "constructing")
		g(poolMax, prometheus.GaugeValue, float64(s.MaxConns()))
		g(poolAcquires, prometheus.CounterValue, float64(s.AcquireCount()))
		g(poolWait, prometheus.CounterValue, s.AcquireDuration().Seconds())
		g(poolEmpty, prometheus.CounterValue, float64(s.EmptyAcquireCount()))
		g(poolCancelled, prometheus.CounterValue, float64(s.CanceledAcquireCount()))
	}
}
