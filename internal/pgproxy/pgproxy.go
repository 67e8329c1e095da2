// Package pgproxy is a TCP proxy in front of PostgreSQL that counts round
// trips: the Sync and simple Query messages clients send, each of which
// ends one exchange with the server (pgx ends an extended-protocol
// statement, or a whole pipelined batch, with one Sync). Tests and the
// benchmark use it to tell what an operation costs in round trips, the way
// the acceptance scripts count them (issues 12 and 14).
package pgproxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
)

// Proxy is a running proxy.
type Proxy struct {
	// URL is the DSN it was started with, pointing at the proxy instead
	// (and with sslmode=disable: the proxy reads the protocol).
	URL string

	ln    net.Listener
	trips atomic.Int64
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

// Start starts a proxy on a loopback port to the server of dsn (a
// postgres:// URL without SSL). Close stops it.
func Start(dsn string) (*Proxy, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgproxy: %w", err)
	}
	target := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("pgproxy: %w", err)
	}
	u.Host = ln.Addr().String()
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	p := &Proxy{URL: u.String(), ln: ln}
	p.wg.Add(1)
	go p.accept(target)
	return p, nil
}

// RoundTrips returns how many round trips clients have started so far.
func (p *Proxy) RoundTrips() int64 { return p.trips.Load() }

// Close stops accepting, closes every proxied connection and waits for
// the copying to end.
func (p *Proxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) accept(target string) {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(c, s)
			c.Close()
		}()
		go func() {
			defer p.wg.Done()
			_ = p.count(s, c)
			s.Close()
		}()
	}
}

// count copies the client's messages to the server, counting Sync ('S')
// and Query ('Q') messages after the untyped startup message.
func (p *Proxy) count(dst io.Writer, src io.Reader) error {
	var head [5]byte
	if _, err := io.ReadFull(src, head[:4]); err != nil {
		return err
	}
	n := int64(binary.BigEndian.Uint32(head[:4])) - 4
	if _, err := dst.Write(head[:4]); err != nil {
		return err
	}
	if _, err := io.CopyN(dst, src, n); err != nil {
		return err
	}
	for {
		if _, err := io.ReadFull(src, head[:]); err != nil {
			return err
		}
		if head[0] == 'S' || head[0] == 'Q' {
			p.trips.Add(1)
		}
		n := int64(binary.BigEndian.Uint32(head[1:])) - 4
		if n < 0 {
			return errors.New("pgproxy: bad message length")
		}
		if _, err := dst.Write(head[:]); err != nil {
			return err
		}
		if _, err := io.CopyN(dst, src, n); err != nil {
			return err
		}
	}
}
