// Package chaos is the chaos run behind `make chaos` (issue 10): it starts a
// private PostgreSQL cluster, two `actionsledger serve` replicas and one
// `actionsledger worker` on one database, drives a bounded load of keyed
// writes through the replicas while it kills processes with SIGKILL and
// crash-restarts PostgreSQL, waits for the system to settle, and then
// checks invariants over the database.
//
// # The workload
//
// Two copies of the example monitor action (agent.echo; a session per
// account started by account.inserted, resumed by entry.inserted, turns on
// entries): the example as written, and one whose turns sleep 50ms so kills
// often land inside a turn. Clients write accounts and entries with
// putValue, each write under an idempotency key of its own, round-robin
// over the replicas; a write cut off by a kill, a connection loss or an
// INTERNAL/UNAVAILABLE/TIMEOUT answer is retried with the same key on the
// next replica until it is acknowledged (or its retry budget runs out,
// which is a violation). A tenth of the writes update an earlier entry
// (entry.updated matches no trigger, so it must reach no session). An
// account's entries are written only after its account write was
// acknowledged.
//
// # Reproducibility
//
// One seed (Config.Seed) drives everything the run decides: the account
// ids, each client's sequence of writes, and the fault schedule (when each
// kill happens, which process it hits, how long the process stays down,
// when PostgreSQL restarts). Replaying a seed repeats those decisions;
// the interleaving with the service's own timing is not repeatable.
//
// # Invariants
//
// Check runs the database-side invariants (Invariant* constants); Run adds
// the run-side ones (every write acknowledged, convergence within the
// limit, no process exiting on its own). docs/chaos.md explains each.
//
// # Clean-up
//
// Everything lives in one folder under os.TempDir() (actionsledger-chaos-*)
// that Run removes when it ends, however it ends; when a run finds a
// violation it keeps that folder's logs (and a pg_dump of the database)
// and prints where. A run killed outright cannot clean up: the next run
// stops the PostgreSQL cluster of any such orphaned folder and removes it.
// Child processes get SIGKILL when the runner dies (Pdeathsig).
package chaos
