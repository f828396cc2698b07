#!/usr/bin/env bash
# Provision Debian's chromium for the dashboard's browser test
# (server/dashboard_test.go). Idempotent: does nothing when a chromium is
# already there. Safe for CI, which runs as root without standard input.
#
# The test finds the browser at $CHROMIUM, else /usr/bin/chromium, else
# chromium on PATH; with CI=true a missing browser fails the test.
set -euo pipefail

if [ -n "${CHROMIUM:-}" ] && [ -x "${CHROMIUM}" ]; then
	exit 0
fi
if [ -x /usr/bin/chromium ] || command -v chromium >/dev/null 2>&1; then
	chromium --version 2>/dev/null || /usr/bin/chromium --version
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "provision-chromium: chromium is missing and installing it needs root" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# fonts: without them a headless page renders its text as boxes.
pkgs=(chromium fonts-dejavu-core fonts-liberation)
apt-get install -y --no-install-recommends "${pkgs[@]}" >/dev/null ||
	{ apt-get update >/dev/null && apt-get install -y --no-install-recommends "${pkgs[@]}" >/dev/null; }
/usr/bin/chromium --version
