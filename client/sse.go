package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sync"

	"github.com/Khan/genqlient/graphql"
)

// sseSubscriber carries one subscription over server-sent events. It
// implements genqlient's graphql.WebSocketClient, so the generated
// subscription functions drive it: Start takes the stream's context,
// Subscribe sends the operation and starts a reader that hands each `next`
// event to the generated forward function, and Close (or Unsubscribe) ends
// it. The update channel is closed when the stream ends; when it ended by
// anything but the server's `complete`, the error is on the Start channel
// first.
type sseSubscriber struct {
	c      *Client
	ctx    context.Context
	cancel context.CancelFunc
	errs   chan error // at most one error: why the stream ended early

	mu      sync.Mutex
	ch      any           // the generated code's update channel, once subscribed
	done    chan struct{} // closed when the reader has returned
	closed  bool
	started bool
}

var _ graphql.WebSocketClient = (*sseSubscriber)(nil)

func newSSESubscriber(c *Client) *sseSubscriber {
	return &sseSubscriber{c: c, errs: make(chan error, 1)}
}

// Start records ctx, which bounds the stream; it sends nothing.
func (s *sseSubscriber) Start(ctx context.Context) (chan error, error) {
	s.ctx, s.cancel = context.WithCancel(ctx)
	return s.errs, nil
}

// Subscribe sends req and, once the server answers with an event stream,
// forwards its events to ch (forward; the generated forward function is
// not used). An answer that is not a stream is the
// server's refusal (a *ResponseError, e.g. NOT_IMPLEMENTED from a server
// without subscriptions) or a *TransportError; a JSON answer without
// errors is forwarded as the one update of a completed stream.
func (s *sseSubscriber) Subscribe(req *graphql.Request, ch any, fwd graphql.ForwardDataFunction) (string, error) {
	s.mu.Lock()
	if s.started || s.ctx == nil {
		s.mu.Unlock()
		return "", errors.New("client: one subscription per subscriber, after Start")
	}
	s.started = true
	s.mu.Unlock()
	hresp, err := s.c.post(s.ctx, req, "text/event-stream")
	if err != nil {
		return "", err
	}
	var body io.Reader = hresp.Body
	if mediaType(hresp.Header.Get("Content-Type")) != "text/event-stream" {
		defer hresp.Body.Close()
		raw, err := readAnswer(hresp.Body)
		if err != nil {
			return "", s.c.transport(hresp.StatusCode, "reading the answer", err)
		}
		if err := s.c.decodeAnswer(hresp, raw, &graphql.Response{}); err != nil {
			return "", err
		}
		body = bytes.NewReader(append(append([]byte("event: next\ndata: "), raw...), "\n\nevent: complete\n\n"...))
	} else if hresp.StatusCode != http.StatusOK {
		hresp.Body.Close()
		return "", s.c.transport(hresp.StatusCode, "an event stream with an error status", nil)
	}
	s.mu.Lock()
	s.ch, s.done = ch, make(chan struct{})
	s.mu.Unlock()
	go s.read(hresp.Body, body, ch, fwd)
	return "sse", nil
}

// read forwards the events of body until `complete`, the end of the
// stream or a failure, then closes ch (the reader is its only sender).
func (s *sseSubscriber) read(closer io.Closer, body io.Reader, ch any, fwd graphql.ForwardDataFunction) {
	defer close(s.done)
	defer reflect.ValueOf(ch).Close()
	defer closer.Close()
	completed := false
	err := readEvents(body, func(event string, data []byte) (bool, error) {
		switch event {
		case "complete":
			completed = true
			return true, nil
		case "next", "message", "":
			if len(bytes.TrimSpace(data)) == 0 {
				return false, nil
			}
			if err := forward(ch, data); err != nil {
				return false, fmt.Errorf("decoding an update: %w", err)
			}
		}
		return false, nil // other events (pings) carry nothing for us
	})
	if err := s.ctx.Err(); err != nil {
		if !s.isClosed() {
			s.errs <- err // the caller's context ended, not Close
		}
		return
	}
	if completed {
		return
	}
	if err == nil {
		err = errors.New("the server ended the stream without completing it")
	}
	s.errs <- s.c.transport(0, "stream", err)
}

// forward decodes one update into the element type of ch, the generated
// code's channel, and sends it; an update with errors is sent with its
// errors alone, as genqlient's forward functions do. Those first decode
// the whole update into untyped values, where a number beyond float64's
// range (which a JSON value may hold, and the server keeps exact) fails
// the stream; the generated types keep JSON values as raw bytes.
func forward(ch any, data []byte) error {
	cv := reflect.ValueOf(ch)
	v := reflect.New(cv.Type().Elem())
	if err := json.Unmarshal(data, v.Interface()); err != nil {
		return err
	}
	if errs := v.Elem().FieldByName("Errors"); errs.IsValid() && errs.Len() > 0 {
		if d := v.Elem().FieldByName("Data"); d.IsValid() {
			d.SetZero()
		}
	}
	cv.Send(v.Elem())
	return nil
}

// Unsubscribe ends the subscription; see Close.
func (s *sseSubscriber) Unsubscribe(string) error { return s.Close() }

// Close ends the stream: it cancels the request, discards updates the
// reader still holds, waits for the reader and closes the Start channel.
// It must not run while another goroutine receives from the update
// channel. Closing twice is harmless.
func (s *sseSubscriber) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ch, done := s.ch, s.done
	s.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
	}
	if ch != nil {
		v := reflect.ValueOf(ch)
		for {
			if _, ok := v.Recv(); !ok {
				break
			}
		}
		<-done
	}
	close(s.errs)
	return nil
}

// maxEventBytes bounds one line of an event stream.
const maxEventBytes = MaxAnswerBytes

// readEvents parses a text/event-stream (the WHATWG server-sent events
// format) and calls on with each event's name and data lines joined by
// newlines, until on reports stop, an error, or the end of r (nil).
func readEvents(r io.Reader, on func(event string, data []byte) (stop bool, err error)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventBytes)
	var event string
	var data []byte
	hasData := false
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			if hasData || event != "" {
				if stop, err := on(event, data); stop || err != nil {
					return err
				}
			}
			event, data, hasData = "", data[:0], false
			continue
		}
		if line[0] == ':' {
			continue // a comment: keep-alive
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(name) {
		case "event":
			event = string(value)
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, value...)
			hasData = true
		}
	}
	return sc.Err()
}
