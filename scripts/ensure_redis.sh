#!/usr/bin/env bash
# Make sure a Redis answers at 127.0.0.1:${1:-6379}; start a non-persistent one if not.
set -euo pipefail
port="${1:-6379}"
if redis-cli -p "$port" ping >/dev/null 2>&1; then
  exit 0
fi
mkdir -p .run
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --pidfile "$PWD/.run/redis-$port.pid" --logfile "$PWD/.run/redis-$port.log"
for _ in $(seq 50); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && exit 0
  sleep 0.1
done
echo "redis did not start on port $port (see .run/redis-$port.log)" >&2
exit 1
