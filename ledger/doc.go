// Package ledger is the event ledger: append-only events with a type, JSON
// data, a commit time and a position, and key-value records whose every write
// appends an event (SPEC L1-L4).
//
// # Commit order without skips (L1, HARD-PARTS 1)
//
// Appends are serialised on a single ledger-head row. An appending transaction
// updates that row to take the next positions and a commit time, and keeps
// the row locked until it commits or rolls back. Because PostgreSQL makes a
// transaction visible before it releases its locks, the next appender can
// only take a position after the previous one is visible. So:
//
//   - positions are gapless and follow commit order (a rolled-back append
//     gives its positions back);
//   - commit times never decrease with position (strictly increase between
//     transactions; events of one transaction share one);
//   - a reader that has seen position P has seen every event at or below P,
//     so paging by position never skips an event that commits late.
//
// The price is one appending transaction at a time. Callers take the head as
// late as possible in their transaction (Append is the last write before
// commit) so the lock is held only for the commit itself.
//
// The commit time is read from the injected clock when the head is taken,
// which is within the committing transaction's last statements; it is UTC
// with microsecond precision.
//
// # The change feed (issue 12)
//
// Subscriptions are driven by LISTEN/NOTIFY through one connection per
// process: Feed fans its notifications out in memory, by channel and key,
// without ever waiting on a subscriber (a note that does not fit a
// subscriber's buffer is dropped and reported to it as lost). Notifications
// are wake-ups only; subscribers read what changed from the tables. The
// busy committers hand theirs to a Notifier, which sends them after the
// commit, many to a statement (notifier.go, issue 14). Tail
// follows the ledger for ledgerEvents: one reader per process, the newest
// events kept in memory, followers further behind reading by position from
// the database, which the commit-ordered positions above make exact.
package ledger
