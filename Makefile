# Makefile — build, run and test actionsledger.
#
# Every target that needs PostgreSQL gets its URL from scripts/pg.sh, which
# honours DATABASE_URL, else uses a server on 127.0.0.1:5432, else starts a
# private cluster in .pgdata/ (stop it with `make pg-stop`).
#
#   make build      build the web assets (npm) and bin/actionsledger
#   make run        serve on $ADDR (default 127.0.0.1:8080)
#   make migrate    apply the schema migrations
#   make test       the web checks (tsc, vitest), then go test -race against a
#                   real server (TEST_DATABASE_URL), the browser test and the
#                   TypeScript MCP client's test included
#   make fuzz       run every Fuzz* target of the module for FUZZTIME each
#                   (default 30s), one after the other, stopping at the first
#                   failure; prints each target's run time and corpus size
#   make demo       run the demo against a fresh database actionsledger_demo
#   make bench      throughput against a fresh database actionsledger_bench: the
#                   insert ceiling, writes, bulk writes, end to end, latency and
#                   the session query's round trips, as ratios to the ceiling
#                   (docs/throughput.md; BENCH_FLAGS='--runs 3')
#   make bench-live memory per idle subscriber (SSE, WebSocket) and the cost of
#                   one notification with 1 and 1,000 subscribers, for
#                   ledgerEvents, sessionUpdates and inboxUpdates, on a fresh
#                   database actionsledger_bench_live (docs/subscriptions.md)
#   make chaos      replicas, worker and a private PostgreSQL under kill -9 and
#                   crash restarts, then invariants (docs/chaos.md; CHAOS_SEED=N replays)
#   make generate   regenerate gqlgen code and the typed client (client/)
#   make web        build the web assets only (console/dist)
#   make screenshots PNGs of each console screen at 1280 px and at a phone
#                   width in console/test-results/screenshots/ (ignored by git)
#   make lint       gofmt + go vet
#   make pg-stop    stop the private cluster in .pgdata/, if any
#   make tzdata     refresh the embedded timezone database (schedule/tzdata)
#                   from the Go toolchain in use

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go

BIN := bin/actionsledger
FUZZTIME ?= 30s

.PHONY: build run migrate test fuzz demo bench bench-live chaos generate lint pg-stop web tzdata screenshots

# The web front ends (console/: GraphiQL and the console) are an npm project
# built by Vite into console/dist/graphiql and console/dist/console, which
# the binary embeds (console/embed.go). npm ci
# runs when console/node_modules is missing or older than the lock file;
# vite build when a source is newer than the last build. scripts/npm.sh
# checks Node.js and npm first.
WEB := console
WEB_INSTALLED := $(WEB)/node_modules/.installed
GRAPHIQL_BUILT := $(WEB)/dist/graphiql/index.html
CONSOLE_BUILT := $(WEB)/dist/console/index.html
WEB_BUILT := $(GRAPHIQL_BUILT) $(CONSOLE_BUILT)
WEB_COMMON := $(WEB)/package.json $(WEB)/tsconfig.json
GRAPHIQL_SOURCES := $(WEB_COMMON) $(wildcard examples/*.graphql) \
	$(shell find $(WEB)/graphiql -type f ! -name '*.test.ts')
CONSOLE_SOURCES := $(WEB_COMMON) $(shell find $(WEB)/app -type f ! -name '*.test.ts')

web: $(WEB_BUILT)

# The MCP tests run the official TypeScript MCP client (mcp/tsclient_test.go)
# from this npm project.
MCP_TS := mcp/testdata/tsclient
MCP_TS_INSTALLED := $(MCP_TS)/node_modules/.installed

$(MCP_TS_INSTALLED): $(MCP_TS)/package-lock.json $(MCP_TS)/package.json
	NPM_DIR=$(MCP_TS) scripts/npm.sh ci --no-audit --no-fund
	touch $@

$(WEB_INSTALLED): $(WEB)/package-lock.json $(WEB)/package.json
	scripts/npm.sh ci --no-audit --no-fund
	touch $@

$(GRAPHIQL_BUILT): $(WEB_INSTALLED) $(GRAPHIQL_SOURCES)
	scripts/npm.sh run build:graphiql

$(CONSOLE_BUILT): $(WEB_INSTALLED) $(CONSOLE_SOURCES)
	scripts/npm.sh run build:console

build: $(WEB_BUILT)
	$(GO) build -o $(BIN) ./cmd/actionsledger

run: build
	url=$$(scripts/pg.sh actionsledger); \
	DATABASE_URL="$$url" ADDR="$${ADDR:-127.0.0.1:8080}" exec $(BIN) serve

migrate: build
	url=$$(scripts/pg.sh actionsledger); \
	DATABASE_URL="$$url" exec $(BIN) migrate

# The assets are built first so that the Go tests serve the real page and
# the browser test (server/graphiql_test.go) runs it in Chromium.
# The longest packages are named first: go test starts packages in the
# order given, and two run at once, so the longest starting last would run
# on alone at the end (docs/development.md, "Test time").
TEST_FIRST := ./server ./cmd/actionsledger ./turns ./session ./starlarkrt
test: $(WEB_BUILT) $(MCP_TS_INSTALLED)
	scripts/npm.sh run check
	url=$${TEST_DATABASE_URL:-$$(scripts/pg.sh postgres)}; \
	TEST_DATABASE_URL="$$url" $(GO) test -race -count=1 -timeout 30m $(TEST_FIRST) ./...

# The console's browser test, leaving PNGs of each screen (1280 px and a
# phone width) in console/test-results/screenshots/ (docs/console.md).
SHOTS := $(CURDIR)/$(WEB)/test-results/screenshots
screenshots: $(WEB_BUILT)
	rm -rf $(SHOTS)
	url=$${TEST_DATABASE_URL:-$$(scripts/pg.sh postgres)}; \
	CI=1 CONSOLE_SCREENSHOTS="$(SHOTS)" TEST_DATABASE_URL="$$url" $(GO) test -count=1 -run '^TestConsoleInBrowser$$' ./server
	@echo "screenshots in $(SHOTS)"

# Some targets (server's) need PostgreSQL, so the URL comes as for test.
fuzz:
	url=$${TEST_DATABASE_URL:-$$(scripts/pg.sh postgres)}; \
	TEST_DATABASE_URL="$$url" FUZZTIME="$(FUZZTIME)" GO="$(GO)" scripts/fuzz.sh

# fresh_db NAME: drop and recreate database NAME on the server that pg.sh
# points at, then leave its URL in the shell variable `url`.
define fresh_db
admin=$$(scripts/pg.sh postgres); \
PGOPTIONS='-c client_min_messages=warning' psql "$$admin" -X -q -v ON_ERROR_STOP=1 \
	-c 'DROP DATABASE IF EXISTS "$(1)" WITH (FORCE)' \
	-c 'CREATE DATABASE "$(1)"' >&2; \
url=$$(printf '%s' "$$admin" | sed -E 's#^([a-zA-Z]+://[^/?]*)(/[^?]*)?#\1/$(1)#')
endef

demo: build
	$(call fresh_db,actionsledger_demo); \
	DATABASE_URL="$$url" exec $(BIN) demo

bench: build
	$(call fresh_db,actionsledger_bench); \
	DATABASE_URL="$$url" exec $(BIN) bench $(BENCH_FLAGS)

bench-live:
	$(GO) build -o bin/bench-live ./bench/live
	$(call fresh_db,actionsledger_bench_live); \
	DATABASE_URL="$$url" exec bin/bench-live $(BENCH_LIVE_FLAGS)

# chaos starts its own private cluster (it restarts PostgreSQL), so it does
# not use pg.sh. Options: CHAOS_* variables, or `bin/chaos --help`.
chaos: build
	$(GO) build -o bin/chaos ./cmd/chaos
	exec bin/chaos --bin $(BIN)

generate:
	$(GO) run ./graph/gen
	$(GO) generate ./client

lint:
	files=$$(find . \( -path ./.pgdata -o -path ./.git -o -path ./bin -o -path ./$(WEB)/node_modules \) -prune -o -name '*.go' -print); \
	unformatted=$$([[ -z $$files ]] || gofmt -l $$files); \
	if [[ -n $$unformatted ]]; then echo "gofmt -l: these files need gofmt -w:" >&2; echo "$$unformatted" >&2; exit 1; fi
	$(GO) vet ./...

pg-stop:
	scripts/pg.sh --stop

# The clocks read timezones only from schedule/tzdata (schedule/doc.go):
# copy the Go toolchain's database and record its release.
tzdata:
	root=$$($(GO) env GOROOT); \
	cp "$$root/lib/time/zoneinfo.zip" schedule/tzdata/zoneinfo.zip; \
	sed -n 's/^DATA=//p' "$$root/lib/time/update.bash" > schedule/tzdata/VERSION; \
	echo "schedule/tzdata: $$(cat schedule/tzdata/VERSION)"
