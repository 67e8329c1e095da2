#!/usr/bin/env bash
# scripts/pg.sh — print a PostgreSQL URL for a database, making sure it exists.
#
# Usage:
#   scripts/pg.sh [DBNAME]   print (one line on stdout) a URL for DBNAME
#                            (default: actionsledger), creating it if missing
#   scripts/pg.sh --stop     stop the private cluster in .pgdata/, if running
#   scripts/pg.sh --status   exit 0 if the private cluster is running
#
# Where the server comes from, first match wins:
#   1. DATABASE_URL is set: it is printed unchanged. When it is a
#      postgres:// URL whose database is missing and psql can reach the
#      server (as the URL's user, connecting to database postgres), the
#      database is created; otherwise the server reports what is wrong.
#   2. Something answers on 127.0.0.1:5432: that server is used (user
#      postgres, no password) and DBNAME is created there with psql if missing.
#   3. Otherwise a private cluster in .pgdata/ at the repo root is used (and
#      initialised / started as needed): port 54329 on 127.0.0.1, its unix
#      socket inside .pgdata/, trust auth. PostgreSQL is installed with
#      apt-get if no initdb is found under /usr/lib/postgresql/*/bin.
#      Set PG_FORCE_PRIVATE=1 to skip step 2 and always use this cluster.
#
# All diagnostics go to stderr, so `url=$(scripts/pg.sh foo)` is safe.
# Running it again is harmless and fast when the server already runs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PGHOME="$ROOT/.pgdata"        # ignored by git
PGDATA_DIR="$PGHOME/data"     # the cluster itself
PGSOCK_DIR="$PGHOME/run"      # unix socket directory
PGLOG="$PGHOME/postgres.log"  # server log
PRIVATE_PORT=54329
SHARED_PORT=5432

log() { printf 'pg.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# is_up PORT: does a PostgreSQL server accept connections on 127.0.0.1:PORT?
is_up() {
	local port=$1
	if command -v pg_isready >/dev/null 2>&1; then
		pg_isready -q -h 127.0.0.1 -p "$port" >/dev/null 2>&1
	else
		# No client tools: a TCP connect is the best we can do.
		(exec 3<>"/dev/tcp/127.0.0.1/$port") >/dev/null 2>&1
	fi
}

# find_bindir: print the newest /usr/lib/postgresql/*/bin holding initdb + pg_ctl.
find_bindir() {
	local d best=""
	# shellcheck disable=SC2012 # version folders: plain numbers
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V); do
		[[ -x $d/initdb && -x $d/pg_ctl ]] && best=$d
	done
	[[ -n $best ]] && printf '%s\n' "$best"
}

# install_postgres: install the server packages from Debian, non-interactively.
install_postgres() {
	local sudo=()
	if [[ $(id -u) -ne 0 ]]; then
		command -v sudo >/dev/null 2>&1 || die "PostgreSQL is not installed and we are not root; install the 'postgresql' package"
		sudo=(sudo -n)
	fi
	log "installing PostgreSQL with apt-get (this takes a minute)"
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2
}

# as_owner CMD...: run CMD as the cluster owner. initdb and postgres refuse to
# run as root, so root runs them as the `postgres` system user.
as_owner() {
	if [[ $(id -u) -ne 0 ]]; then
		"$@"
	elif command -v runuser >/dev/null 2>&1; then
		runuser -u postgres -- "$@"
	else
		su postgres -s /bin/bash -c "$(printf '%q ' "$@")"
	fi
}

# psql_bin [BINDIR]: print the psql to use (PATH first, then BINDIR).
psql_bin() {
	if command -v psql >/dev/null 2>&1; then
		command -v psql
	elif [[ -n ${1:-} && -x $1/psql ]]; then
		printf '%s\n' "$1/psql"
	else
		local b
		b=$(find_bindir) && [[ -x $b/psql ]] && { printf '%s\n' "$b/psql"; return; }
		die "psql not found; install postgresql-client"
	fi
}

# ensure_db PSQL PORT DB: create database DB on 127.0.0.1:PORT if missing.
ensure_db() {
	local psql=$1 port=$2 db=$3
	local q=(env PGCONNECT_TIMEOUT=10 "$psql" -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1)
	local exists
	exists=$("${q[@]}" -tAc "select 1 from pg_database where datname = '$db'") ||
		die "cannot query the server on 127.0.0.1:$port as user postgres"
	[[ $exists == 1 ]] && return 0
	log "creating database $db on 127.0.0.1:$port"
	local out
	if ! out=$("${q[@]}" -c "create database \"$db\"" 2>&1); then
		# Lost a race with another pg.sh? Fine if it exists now.
		exists=$("${q[@]}" -tAc "select 1 from pg_database where datname = '$db'") || true
		[[ $exists == 1 ]] || die "could not create database $db: $out"
	fi
}

# ensure_url_db URL: create the database a postgres:// URL names if it is
# missing, when psql can ask the server. Anything unusual (no psql, a name
# that needs quoting, a server that cannot be asked) is left as it is.
ensure_url_db() {
	local url=$1
	[[ $url =~ ^postgres(ql)?://[^/?]*/([^/?]+) ]] || return 0
	local db=${BASH_REMATCH[2]}
	[[ $db =~ ^[A-Za-z_][A-Za-z0-9_]*$ && $db != postgres ]] || return 0
	command -v psql >/dev/null 2>&1 || return 0
	local admin exists out
	admin=$(printf '%s' "$url" | sed -E 's#^([a-zA-Z]+://[^/?]*)/[^?]*#\1/postgres#')
	local q=(env PGCONNECT_TIMEOUT=10 psql -X -q -v ON_ERROR_STOP=1 -d "$admin")
	exists=$("${q[@]}" -tAc "select 1 from pg_database where datname = '$db'" 2>/dev/null) || return 0
	[[ $exists == 1 ]] && return 0
	log "creating database $db"
	if ! out=$("${q[@]}" -c "create database \"$db\"" 2>&1); then
		exists=$("${q[@]}" -tAc "select 1 from pg_database where datname = '$db'" 2>/dev/null) || true
		[[ $exists == 1 ]] || log "could not create database $db: $out"
	fi
}

# own_home: when root, hand .pgdata/ to the postgres user that runs the server.
own_home() {
	if [[ $(id -u) -eq 0 ]]; then
		chown -R postgres: "$PGHOME"
	fi
}

# wait_up PORT: wait up to 30 s for the server on PORT to accept connections.
wait_up() {
	local i
	for ((i = 0; i < 60; i++)); do
		is_up "$1" && return 0
		sleep 0.5
	done
	die "the server on 127.0.0.1:$1 did not come up"
}

# ensure_private BINDIR: initialise (if needed) and start the .pgdata cluster.
ensure_private() {
	local bin=$1
	mkdir -p "$PGHOME"
	if [[ $(id -u) -eq 0 ]]; then
		if ! id postgres >/dev/null 2>&1; then
			log "creating system user postgres"
			useradd --system --user-group --no-create-home --home-dir /var/lib/postgresql --shell /bin/bash postgres
		fi
		# The postgres user must be able to reach the repo through its parents.
		runuser -u postgres -- test -x "$ROOT" 2>/dev/null ||
			die "user postgres cannot enter $ROOT; make its parent folders world-searchable (chmod o+x) or set DATABASE_URL"
	fi
	own_home

	if [[ ! -s $PGDATA_DIR/PG_VERSION ]]; then
		log "initialising a private cluster in $PGDATA_DIR"
		rm -rf "$PGDATA_DIR"
		mkdir -p "$PGDATA_DIR" "$PGSOCK_DIR"
		own_home
		chmod 700 "$PGDATA_DIR"
		as_owner "$bin/initdb" -D "$PGDATA_DIR" -U postgres --auth=trust \
			--encoding=UTF8 --locale=C.UTF-8 >&2 ||
			as_owner "$bin/initdb" -D "$PGDATA_DIR" -U postgres --auth=trust --encoding=UTF8 --no-locale >&2 ||
			die "initdb failed"
	fi
	mkdir -p "$PGSOCK_DIR"
	own_home

	if as_owner "$bin/pg_ctl" -D "$PGDATA_DIR" status >/dev/null 2>&1; then
		wait_up "$PRIVATE_PORT" # running, but maybe still starting up
		return 0
	fi
	log "starting the private cluster on 127.0.0.1:$PRIVATE_PORT (log: $PGLOG)"
	as_owner "$bin/pg_ctl" -D "$PGDATA_DIR" -l "$PGLOG" -w -t 60 \
		-o "-p $PRIVATE_PORT -c listen_addresses=127.0.0.1 -k '$PGSOCK_DIR'" start >&2 ||
		{ tail -n 20 "$PGLOG" >&2 2>/dev/null || true; die "pg_ctl start failed"; }
}

# stop_private: stop the .pgdata cluster if it is running.
stop_private() {
	[[ -s $PGDATA_DIR/PG_VERSION ]] || { log "no private cluster in $PGDATA_DIR"; return 0; }
	local bin
	bin=$(find_bindir) || die "pg_ctl not found"
	if as_owner "$bin/pg_ctl" -D "$PGDATA_DIR" status >/dev/null 2>&1; then
		log "stopping the private cluster"
		as_owner "$bin/pg_ctl" -D "$PGDATA_DIR" -m fast -w stop >&2
	else
		log "the private cluster is not running"
	fi
}

# with_lock CMD...: serialise private-cluster set-up between concurrent runs.
with_lock() {
	mkdir -p "$PGHOME"
	if command -v flock >/dev/null 2>&1; then
		# fd 9 is closed for the command itself, or the server that it
		# starts would inherit it and hold the lock for its whole life.
		(
			flock -w 120 9 || die "timed out waiting for $PGHOME/.lock"
			"$@" 9>&-
		) 9>"$PGHOME/.lock"
	else
		"$@"
	fi
}

main() {
	case "${1:-}" in
	--stop)
		with_lock stop_private
		return
		;;
	--status)
		local bin
		[[ -s $PGDATA_DIR/PG_VERSION ]] && bin=$(find_bindir) &&
			as_owner "$bin/pg_ctl" -D "$PGDATA_DIR" status >/dev/null 2>&1
		return
		;;
	-h | --help)
		sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
		return
		;;
	esac

	local db=${1:-actionsledger}
	[[ $db =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || die "invalid database name: $db (letters, digits, _)"

	# 1. An explicit URL wins.
	if [[ -n ${DATABASE_URL:-} ]]; then
		ensure_url_db "$DATABASE_URL"
		printf '%s\n' "$DATABASE_URL"
		return
	fi

	# 2. A server on the standard port.
	if [[ ${PG_FORCE_PRIVATE:-} != 1 ]] && is_up "$SHARED_PORT"; then
		ensure_db "$(psql_bin)" "$SHARED_PORT" "$db"
		printf 'postgres://postgres@127.0.0.1:%s/%s?sslmode=disable\n' "$SHARED_PORT" "$db"
		return
	fi

	# 3. The private cluster in .pgdata/.
	local bin
	if ! bin=$(find_bindir); then
		install_postgres
		bin=$(find_bindir) || die "no initdb under /usr/lib/postgresql/*/bin even after installing postgresql"
	fi
	if ! is_up "$PRIVATE_PORT"; then
		with_lock ensure_private "$bin"
	fi
	ensure_db "$(psql_bin "$bin")" "$PRIVATE_PORT" "$db"
	printf 'postgres://postgres@127.0.0.1:%s/%s?sslmode=disable\n' "$PRIVATE_PORT" "$db"
}

main "$@"
