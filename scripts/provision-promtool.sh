#!/usr/bin/env bash
# Provision promtool (Debian's prometheus package ships it) and check the
# alerting rules with it. Idempotent: does nothing to the system when
# promtool is already on PATH. Safe for CI, which runs as root without
# standard input.
#
#   scripts/provision-promtool.sh           install if missing, then check and test the rules
#                                           and check deploy/compose/prometheus.yml
#   scripts/provision-promtool.sh --install-only
#
# The package's maintainer scripts would start a prometheus daemon; a
# policy-rc.d that answers 101 ("action forbidden") keeps them from doing
# so, and any daemon that still got started is stopped by its pid file.
set -euo pipefail

cd "$(dirname "$0")/.."

install_promtool() {
	if command -v promtool >/dev/null 2>&1; then
		return 0
	fi
	if [ "$(id -u)" -ne 0 ]; then
		echo "provision-promtool: promtool is missing and installing it needs root" >&2
		exit 1
	fi
	local policy=/usr/sbin/policy-rc.d own_policy=
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy"
		chmod 0755 "$policy"
		own_policy=1
	fi
	export DEBIAN_FRONTEND=noninteractive
	local rc=0
	{
		apt-get install -y --no-install-recommends prometheus >/dev/null ||
			{ apt-get update >/dev/null && apt-get install -y --no-install-recommends prometheus >/dev/null; }
	} || rc=$?
	if [ -n "$own_policy" ]; then
		rm -f "$policy"
	fi
	# Should a daemon have been started anyway, stop that one daemon.
	local pidfile
	for pidfile in /run/prometheus/prometheus.pid /run/prometheus.pid; do
		if [ -s "$pidfile" ]; then
			local pid
			pid=$(cat "$pidfile")
			if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = prometheus ]; then
				kill "$pid" 2>/dev/null || true
			fi
		fi
	done
	if [ "$rc" -ne 0 ] || ! command -v promtool >/dev/null 2>&1; then
		echo "provision-promtool: could not install promtool (apt-get exit $rc)" >&2
		exit 1
	fi
}

install_promtool
promtool --version 2>&1 | head -n 1
if [ "${1:-}" = "--install-only" ]; then
	exit 0
fi
promtool check rules deploy/prometheus/alerts.yml
promtool test rules deploy/prometheus/alerts_test.yml
# The compose fleet's Prometheus configuration (its rule file is mounted at
# run time; deploy/compose_test.go checks that path).
promtool check config --syntax-only deploy/compose/prometheus.yml
