package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// workerReadyLine is what `actionsledger worker` logs once it runs (the
// worker has no HTTP endpoint to ask).
const workerReadyLine = "worker running"

// restartPause is how long a supervisor waits before starting a process
// that exited on its own (typically at start-up while PostgreSQL is down).
const restartPause = 500 * time.Millisecond

// proc is one supervised actionsledger process. Its supervisor (supervise)
// starts it, restarts it after a kill or an exit, and stops it when its
// context ends. A process is ready once /healthz answers (serve) or it has
// logged workerReadyLine (worker); an exit after that is unexpected.
type proc struct {
	name, bin, logPath string
	args, env          []string
	health             string // serve: its /healthz URL; worker: ""
	killc              chan time.Duration
	ready              atomic.Bool

	mu           sync.Mutex
	starts       int
	kills        int
	failedStarts int      // exits before ready
	unexpected   []string // exits after ready: status and log tail
}

func newProc(name, bin, logPath string, env []string, health string, args ...string) *proc {
	return &proc{name: name, bin: bin, logPath: logPath, env: env, health: health, args: args, killc: make(chan time.Duration)}
}

// running is a started process: done is closed once it has exited, after
// err is set.
type running struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	off  int64 // the log's size when it started
}

// start starts the process with its output appended to its log. It gets
// its own process group (a Ctrl-C reaches only the runner, which stops it)
// and SIGKILL if the runner dies.
func (p *proc) start() (*running, error) {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "=== chaos: starting %s at %s\n", p.name, time.Now().Format(time.RFC3339Nano))
	off, _ := logf.Seek(0, io.SeekEnd)
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("start %s: %w", p.name, err)
	}
	r := &running{cmd: cmd, done: make(chan struct{}), off: off}
	go func() {
		r.err = cmd.Wait()
		_ = logf.Close()
		close(r.done)
	}()
	p.mu.Lock()
	p.starts++
	p.mu.Unlock()
	return r, nil
}

// supervise runs the process until ctx ends, then stops it (SIGTERM, then
// SIGKILL after 10s). It returns an error only when the binary cannot be
// started at all.
func (p *proc) supervise(ctx context.Context) error {
	for {
		r, err := p.start()
		if err != nil {
			return err
		}
		watch, stopWatch := context.WithCancel(ctx)
		go p.watchReady(watch, r)
		select {
		case <-ctx.Done():
			stopWatch()
			p.ready.Store(false)
			_ = syscall.Kill(r.cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-r.done:
			case <-time.After(10 * time.Second):
				_ = r.cmd.Process.Kill()
				<-r.done
			}
			return nil
		case down := <-p.killc:
			stopWatch()
			p.ready.Store(false)
			_ = r.cmd.Process.Kill()
			<-r.done
			p.mu.Lock()
			p.kills++
			p.mu.Unlock()
			if !sleep(ctx, down) {
				return nil
			}
		case <-r.done:
			stopWatch()
			wasReady := p.ready.Swap(false)
			p.mu.Lock()
			if wasReady {
				p.unexpected = append(p.unexpected, fmt.Sprintf("%s exited on its own (%v); log tail:\n%s", p.name, r.err, p.logTail(r.off)))
			} else {
				p.failedStarts++
			}
			p.mu.Unlock()
			if !sleep(ctx, restartPause) {
				return nil
			}
		}
	}
}

// kill asks the supervisor to SIGKILL the process and keep it down for
// down. It reports false when no process was running to be killed (the
// process is already down after an earlier fault).
func (p *proc) kill(down time.Duration) bool {
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case p.killc <- down:
		return true
	case <-t.C:
		return false
	}
}

// watchReady marks the process ready once it answers, polling every 50ms.
func (p *proc) watchReady(ctx context.Context, r *running) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	hc := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.done:
			return
		case <-t.C:
		}
		if p.up(ctx, hc, r.off) {
			p.ready.Store(true)
			return
		}
	}
}

func (p *proc) up(ctx context.Context, hc *http.Client, off int64) bool {
	if p.health == "" {
		b, err := os.ReadFile(p.logPath)
		return err == nil && int64(len(b)) > off && bytes.Contains(b[off:], []byte(workerReadyLine))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.health, nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// waitReady waits until the process is ready, for at most within.
func (p *proc) waitReady(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for !p.ready.Load() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s; log tail:\n%s", p.name, within, p.logTail(0))
		}
		if !sleep(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
	return nil
}

// logTail returns up to the last 3000 bytes of the log after off.
func (p *proc) logTail(off int64) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if off < int64(len(b)) {
		b = b[off:]
	}
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// procFigures are one process's counts at the end of a run.
type procFigures struct {
	Starts, Kills, FailedStarts int
	Unexpected                  []string
}

func (p *proc) figures() procFigures {
	p.mu.Lock()
	defer p.mu.Unlock()
	return procFigures{Starts: p.starts, Kills: p.kills, FailedStarts: p.failedStarts, Unexpected: append([]string(nil), p.unexpected...)}
}
