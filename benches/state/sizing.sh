#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Redis sizing for `[state] backend = "redis"`: what one task and one context cost in Redis
# memory, measured. a2a-edge (embedded engine, state in a local redis-server) is sent
#   A: N SendMessage turns, each in a new context (a task and a context each), then
#   B: N more turns, all in one context (a task each),
# and Redis's `used_memory` is read before and after each phase. Bytes per task = B / N;
# bytes per context = A / N - bytes per task. Prints a Markdown table (also written to
# benches/state/results.md).
#
# Env:
#   N             turns per phase (default 2000)
#   A2A_EDGE_BIN  use this binary instead of `cargo build`
#   RESULTS       output file (default benches/state/results.md)
#   READY_TIMEOUT seconds to wait for each server (default 60)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=sizing
# shellcheck source=../../tests/interop/lib.sh
source "$HERE/../../tests/interop/lib.sh"
N=${N:-2000}
RESULTS=${RESULTS:-$HERE/results.md}
READY_TIMEOUT=${READY_TIMEOUT:-60}
require_uints N READY_TIMEOUT
((N > 0)) || die "N must be > 0"

command -v redis-server >/dev/null 2>&1 || apt_install redis-server
command -v redis-cli >/dev/null 2>&1 || apt_install redis-tools
edge_bin debug
make_tmp a2a-sizing

REDIS_PORT=$(free_port)
mkdir -p "$TMP/redis" "$TMP/edge"
redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
    --dir "$TMP/redis" >"$TMP/redis/redis.log" 2>&1 &
track $!
for _ in $(seq 1 100); do
    redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break
    sleep 0.1
done
redis-cli -p "$REDIS_PORT" ping >/dev/null || die "redis-server did not come up"

TOKEN=$(rand_token)
{
    policy_head "$TMP/edge/certs" engine embedded
    cat <<POLICY

[auth]
[[auth.bearer]]
principal = "sizing"
token_env = "SIZING_TOKEN"

[limits]
requests_per_second = 1000000
burst = 1000000
client_ip_requests_per_second = 1000000
client_ip_burst = 1000000
client_ip_connections_per_second = 1000000
client_ip_connection_burst = 1000000

[state]
backend = "redis"
redis_url = "redis://127.0.0.1:$REDIS_PORT/0"
page_token_secret_env = "SIZING_PAGE_SECRET"
POLICY
} >"$TMP/edge/policy.toml"
start_edge "$TMP/edge/policy.toml" "$TMP/edge/ready.json" "$TMP/edge/proxy.log" \
    "SIZING_TOKEN=$TOKEN" "SIZING_PAGE_SECRET=$(rand_token)"
bench_wait_edge "$EDGE_PID" "$TMP/edge"
log "a2a-edge at $READY_URL, redis on $REDIS_PORT, N=$N"

used() { redis-cli -p "$REDIS_PORT" info memory | tr -d '\r' | sed -n 's/^used_memory://p'; }
keys() { redis-cli -p "$REDIS_PORT" dbsize | tr -d '\r'; }
# the sum of MEMORY USAGE over the edge's keys (exact per-key accounting, no allocator noise)
key_bytes() {
    redis-cli -p "$REDIS_PORT" --scan --pattern 'a2a-edge:*' | sed 's/^/MEMORY USAGE /' |
        redis-cli -p "$REDIS_PORT" | awk '{s += $1} END {print s + 0}'
}

turns() { # phase: "new" (a context each) | "one" (all in one context)
    python3 - "$READY_URL" "$TMP/edge/certs/ca.pem" "$TOKEN" "$N" "$1" <<'PY'
import http.client, json, ssl, sys, urllib.parse, uuid
url, ca, token, n, phase = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
u = urllib.parse.urlsplit(url)
ctx = ssl.create_default_context(cafile=ca)
conn = http.client.HTTPSConnection(u.hostname, u.port, context=ctx)
headers = {"authorization": f"Bearer {token}", "content-type": "application/json", "a2a-version": "1.0"}
for i in range(n):
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": f"[[input]] sizing {i}"}]}
    if phase == "one":
        message["contextId"] = "sizing-one-context"
    body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "SendMessage", "params": {"message": message}})
    conn.request("POST", u.path or "/", body, headers)
    r = conn.getresponse()
    answer = json.loads(r.read())
    if "result" not in answer:
        sys.exit(f"turn {i}: {answer}")
PY
}

before=$(used)
turns new
after_a=$(used)
bytes_a=$(key_bytes)
turns one
after_b=$(used)
bytes_b=$(key_bytes)
nkeys=$(keys)
sample_task=$(redis-cli -p "$REDIS_PORT" --scan --pattern 'a2a-edge:t:*' | sed -n 1p)
sample_ctx=$(redis-cli -p "$REDIS_PORT" --scan --pattern 'a2a-edge:c:*' | sed -n 1p)
task_key=$(redis-cli -p "$REDIS_PORT" memory usage "$sample_task" | tr -d '\r')
ctx_key=$(redis-cli -p "$REDIS_PORT" memory usage "$sample_ctx" | tr -d '\r')
redis_v=$(redis-server --version | awk '{print $3}')
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
header=$(bench_header "redis-server $redis_v")

python3 - "$header" "$N" "$before" "$after_a" "$after_b" "$bytes_a" "$bytes_b" "$nkeys" "$task_key" "$ctx_key" >"$TMP/results.md" <<'PY'
import sys
header = sys.argv[1]
n, before, a, b, bytes_a, bytes_b, nkeys, task_key, ctx_key = (int(x) for x in sys.argv[2:])
# Per-key accounting (MEMORY USAGE summed over the edge's keys); used_memory beside it.
per_task = (bytes_b - bytes_a) / n
per_pair = bytes_a / n
per_ctx = per_pair - per_task
print("# Redis sizing of the shared state")
print()
print(header)
print()
print(f"{n} turns a phase through one a2a-edge (embedded engine), one principal; the sum of `MEMORY USAGE` over the edge's keys after each phase.")
print()
print("| what | bytes in Redis |")
print("|---|---:|")
print(f"| one task (its hash and its entries in the owner's, the state's, the context's and the context-and-state's index) | {per_task:.0f} |")
print(f"| one context (its hash; its busy lease is gone once the turn ends) | {per_ctx:.0f} |")
print(f"| a task in a context of its own | {per_pair:.0f} |")
print(f"| `MEMORY USAGE` of one task hash / one context hash | {task_key} / {ctx_key} |")
print(f"| keys after both phases | {nkeys} |")
print(f"| `used_memory` growth per turn, phase A / phase B (allocator included) | {(a - before) / n:.0f} / {(b - a) / n:.0f} |")
print()
print(f"So 1 million tasks, each in its own context, take about {per_pair * 1e6 / 2**20:.0f} MiB of keys, {(a - before) * 1e6 / n / 2**20:.0f} MiB of Redis `used_memory`;")
print("size `maxmemory` for the tasks kept for `task_retention_ms` (with `maxmemory-policy noeviction`:")
print("an evicted ownership key would make its task unknown, which fails closed but loses it).")
PY
bench_results "$TMP/results.md"
