#!/usr/bin/env bash
# scripts/npm.sh — run npm in console/ (the web front ends' npm project),
# or in the project directory NPM_DIR names (relative to the repository, e.g.
# mcp/testdata/tsclient, the MCP tests' TypeScript client), after checking
# that Node.js and npm are there and new enough.
#
# Usage: scripts/npm.sh ARGS...   e.g. scripts/npm.sh ci, scripts/npm.sh run build
#        NPM_DIR=mcp/testdata/tsclient scripts/npm.sh ci
#
# The Makefile builds the web assets with it (`make build`, `make run`,
# `make test`). Vite 7 needs Node.js 20.19 or newer (22.12 on the 22 line).
# Without them it stops with what to install, and how to build the server
# without the web assets.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../${NPM_DIR:-console}"

fail() {
	cat >&2 <<MSG
scripts/npm.sh: $1
The web assets (GraphiQL at /graphiql) are built with Node.js >= 20.19 and npm:
  Debian 13:  apt-get install nodejs npm
  Debian 12:  its nodejs is 18, too old: install Node.js 20 or 22 (e.g. NodeSource's nodejs package)
To build only the server: go build -o bin/actionsledger ./cmd/actionsledger
(its /graphiql then answers "assets not built: run make build").
MSG
	exit 1
}

command -v node >/dev/null 2>&1 || fail "node is not installed"
command -v npm >/dev/null 2>&1 || fail "npm is not installed"
version=$(node -p 'process.versions.node')
IFS=. read -r major minor _ <<<"$version"
if ((major < 20 || (major == 20 && minor < 19) || (major == 22 && minor < 12) || major == 21)); then
	fail "node $version is too old"
fi
exec npm "$@"
