package ledger

import (
	"errors"
	"sync"
	"sync/atomic"
)

// Feed fans out the notifications of the process's one LISTEN connection to
// in-process subscribers (issue 12: subscriptions). The wiring (server.App)
// calls Publish for every notification its listener receives and Resync
// each time the listener has (re)connected and listens on every channel.
//
// A notification is only a wake-up: PostgreSQL does not replay the ones
// sent while no connection listened, and a payload is under 8000 bytes. So
// subscribers read what changed from the database, and the feed never
// blocks on a subscriber: each has a buffer of Buffer notes, and a note
// that does not fit is dropped and recorded as lost (see Sub.Lost), so the
// subscriber knows to catch up from the database or to give up with a
// reason. Resync marks every subscriber's channels as lost.
//
// Publish holds the feed's lock while it hands a note to each subscriber
// of its channel and key; the cost is a non-blocking channel send per
// subscriber. Safe for concurrent use.
type Feed struct {
	buffer int

	mu     sync.Mutex
	routes map[string]RouteFunc
	subs   map[string]map[string]map[*Sub]struct{} // channel -> key -> subscribers; key "" takes every note
	closed bool
	drops  map[string]int64 // by channel

	published, dropped atomic.Int64
}

// DefaultFeedBuffer is how many notes a subscriber's buffer holds when
// NewFeed is given no size.
const DefaultFeedBuffer = 256

// RouteFunc extracts the keys a notification's payload is about (for
// example the sessions it changed); all reports that it concerns every key
// of its channel.
type RouteFunc func(payload string) (keys []string, all bool)

// Topic is what a subscriber listens to: a channel, and a key of it ("" for
// every note of the channel).
type Topic struct {
	Channel string
	Key     string
}

// Note is one notification as the feed delivers it. A Resync note carries
// no channel: the feed has (re)connected, and notes may have been missed.
type Note struct {
	Channel string
	Payload string
	Resync  bool
}

// ErrFeedClosed is what a subscriber of a closed feed is told: the server
// is shutting down.
var ErrFeedClosed = errors.New("ledger: the change feed is closed")

// NewFeed returns a feed whose subscribers each buffer up to buffer notes
// (DefaultFeedBuffer when buffer <= 0).
func NewFeed(buffer int) *Feed {
	if buffer <= 0 {
		buffer = DefaultFeedBuffer
	}
	return &Feed{buffer: buffer, routes: map[string]RouteFunc{}, subs: map[string]map[string]map[*Sub]struct{}{},
		drops: map[string]int64{}}
}

// Buffer returns how many notes each subscriber's buffer holds; the
// subscriptions' shared readers queue as many updates per subscriber.
func (f *Feed) Buffer() int { return f.buffer }

// Route sets how the payloads of channel name their keys. A channel without
// a route delivers every note to every subscriber of the channel.
func (f *Feed) Route(channel string, fn RouteFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routes[channel] = fn
}

// Stats returns how many notifications were published and how many notes
// were dropped because a subscriber's buffer was full.
func (f *Feed) Stats() (published, dropped int64) { return f.published.Load(), f.dropped.Load() }

// Dropped returns how many notes of channel were dropped because a
// subscriber's buffer was full.
func (f *Feed) Dropped(channel string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.drops[channel]
}

// Publish hands a notification to the subscribers of its channel and keys.
// It never blocks on a subscriber.
func (f *Feed) Publish(channel, payload string) {
	f.published.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	byKey := f.subs[channel]
	if len(byKey) == 0 {
		return
	}
	n := Note{Channel: channel, Payload: payload}
	route := f.routes[channel]
	if route == nil {
		for _, set := range byKey {
			f.deliver(set, n)
		}
		return
	}
	keys, all := route(payload)
	if all {
		for _, set := range byKey {
			f.deliver(set, n)
		}
		return
	}
	f.deliver(byKey[""], n)
	for _, k := range keys {
		if k != "" {
			f.deliver(byKey[k], n)
		}
	}
}

func (f *Feed) deliver(set map[*Sub]struct{}, n Note) {
	for s := range set {
		if !s.offer(n) {
			f.dropped.Add(1)
			f.drops[n.Channel]++
		}
	}
}

// Resync tells every subscriber that notifications may have been missed
// (the listener connected again): each of its channels is marked lost and
// it gets a Resync note when its buffer has room (otherwise it learns from
// Lost after the notes it holds).
func (f *Feed) Resync() {
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := map[*Sub]bool{}
	for _, byKey := range f.subs {
		for _, set := range byKey {
			for s := range set {
				if seen[s] {
					continue
				}
				seen[s] = true
				s.markAllLost()
				s.offer(Note{Resync: true})
			}
		}
	}
}

// Close ends the feed: every subscriber's channel is closed, and later
// subscribers get a closed channel at once.
func (f *Feed) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.closed = true
	seen := map[*Sub]bool{}
	for _, byKey := range f.subs {
		for _, set := range byKey {
			for s := range set {
				if !seen[s] {
					seen[s] = true
					close(s.c)
				}
			}
		}
	}
	f.subs = map[string]map[string]map[*Sub]struct{}{}
}

// Subscribe returns a subscriber of the given topics. Call Close when done.
func (f *Feed) Subscribe(topics ...Topic) *Sub {
	s := &Sub{f: f, c: make(chan Note, f.buffer), topics: topics}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		close(s.c)
		return s
	}
	for _, t := range topics {
		byKey := f.subs[t.Channel]
		if byKey == nil {
			byKey = map[string]map[*Sub]struct{}{}
			f.subs[t.Channel] = byKey
		}
		set := byKey[t.Key]
		if set == nil {
			set = map[*Sub]struct{}{}
			byKey[t.Key] = set
		}
		set[s] = struct{}{}
	}
	return s
}

// Subscribers returns how many subscriptions are open.
func (f *Feed) Subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := map[*Sub]bool{}
	for _, byKey := range f.subs {
		for _, set := range byKey {
			for s := range set {
				seen[s] = true
			}
		}
	}
	return len(seen)
}

// Sub is one subscriber of a Feed.
type Sub struct {
	f      *Feed
	c      chan Note
	topics []Topic

	mu   sync.Mutex
	lost map[string]bool
}

// C delivers the subscriber's notes in the order the listener received
// them. It is closed when the feed closes (ErrFeedClosed).
func (s *Sub) C() <-chan Note { return s.c }

// Lost returns the channels of which notes were dropped (the buffer was
// full, or the feed resynchronised) since the last call, and forgets them.
// A consumer calls it after each note it takes: a note is only dropped
// while the buffer is full, so the loss is seen before the buffer drains.
func (s *Sub) Lost() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.lost) == 0 {
		return nil
	}
	out := make([]string, 0, len(s.lost))
	for ch := range s.lost {
		out = append(out, ch)
	}
	s.lost = nil
	return out
}

// Close stops the subscriber's notes. Safe to call more than once.
func (s *Sub) Close() {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range s.topics {
		byKey := f.subs[t.Channel]
		if set := byKey[t.Key]; set != nil {
			delete(set, s)
			if len(set) == 0 {
				delete(byKey, t.Key)
			}
		}
		if len(byKey) == 0 {
			delete(f.subs, t.Channel)
		}
	}
}

// offer hands n to the subscriber without blocking; a full buffer drops it
// and marks its channel lost. Called with the feed's lock held.
func (s *Sub) offer(n Note) bool {
	select {
	case s.c <- n:
		return true
	default:
		if n.Channel != "" {
			s.mu.Lock()
			if s.lost == nil {
				s.lost = map[string]bool{}
			}
			s.lost[n.Channel] = true
			s.mu.Unlock()
		}
		return false
	}
}

func (s *Sub) markAllLost() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost == nil {
		s.lost = map[string]bool{}
	}
	for _, t := range s.topics {
		s.lost[t.Channel] = true
	}
}
