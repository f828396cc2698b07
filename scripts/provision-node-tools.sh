#!/usr/bin/env bash
# Provision the Node tools that check api/openapi.yaml for generated clients
# (SPEC 10): redocly, openapi-typescript and tsc, at the exact versions of
# api/clienttest/package.json and package-lock.json. They go into a cache
# outside the work tree, one directory per lock file, installed once and
# reused by every later run; the directory is printed on standard output
# for AGGREGATOR_NODE_TOOLS (api/nodetools_test.go). Safe for CI, which runs
# without standard input.
#
#   scripts/provision-node-tools.sh        install if needed, print the directory
#
# The cache is $AGGREGATOR_NODE_CACHE, else $XDG_CACHE_HOME/aggregator/node-tools,
# else ~/.cache/aggregator/node-tools. Without npm, under CI=true this
# fails; elsewhere it prints nothing and the tests that need the tools skip.
set -euo pipefail

cd "$(dirname "$0")/.."
src=api/clienttest

if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
	if [ "${CI:-}" = "true" ]; then
		echo "provision-node-tools: node and npm are needed (CI=true: the client checks are never skipped)" >&2
		exit 1
	fi
	echo "provision-node-tools: node or npm missing; the OpenAPI client checks will skip" >&2
	exit 0
fi

cache=${AGGREGATOR_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aggregator/node-tools}
key=$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -c1-16)
dir=$cache/$key

installed() {
	local tool
	for tool in redocly openapi-typescript tsc; do
		[ -x "$1/node_modules/.bin/$tool" ] || return 1
	done
}

if ! installed "$dir"; then
	mkdir -p "$cache"
	tmp=$(mktemp -d "$cache/.install.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	cp "$src/package.json" "$src/package-lock.json" "$tmp/"
	# npm ci installs exactly what the lock file says, and fails if it
	# disagrees with package.json. None of these packages needs an install
	# script.
	if ! (cd "$tmp" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2); then
		echo "provision-node-tools: npm ci failed" >&2
		exit 1
	fi
	installed "$tmp" || { echo "provision-node-tools: npm ci did not install every tool" >&2; exit 1; }
	# Another run may have finished first: then its directory is used.
	if [ -e "$dir" ] && ! installed "$dir"; then
		rm -rf "$dir"
	fi
	mv -T "$tmp" "$dir" 2>/dev/null || true
	installed "$dir" || { echo "provision-node-tools: $dir is incomplete" >&2; exit 1; }
fi
echo "$dir"
