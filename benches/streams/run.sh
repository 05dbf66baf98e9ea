#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Streams benchmark (issue #16, its stream targets): what `a2a-edge serve` (release build, TLS,
# one bearer principal) costs per open SSE stream, and what it adds to the first SSE event.
#
#   embedded     the edge with the embedded engine (`url = "embedded"`): idle VmRSS, then
#                STREAMS open SendStreamingMessage streams of `[[wait]]` turns (one TLS
#                connection each), VmRSS once all of them had their first event
#   upstream     the same with a standalone engine upstream (`a2a-edge engine`, plain HTTP on
#                127.0.0.1): the edge's own memory, and the engine's for reference
#   upstream_w1  the same as upstream with A2A_EDGE_WORKERS=1 (what the per-thread runtimes cost)
#   upstream_h2  the same as upstream with `http2 = true` on the upstream: the streams share a
#                few HTTP/2 (h2c) connections to the engine instead of one connection each
#   latency      time to the first SSE `data:` event, LATENCY_STREAMS streams per row: direct
#                (plain HTTP to the engine) vs through the edge (TLS + bearer, upstream = that
#                engine), on fresh connections (the timer starts after the handshake) and on
#                one keep-alive connection per target
#
# Each phase gets a fresh edge (and a fresh engine). The driver is benches/streams/drive.py
# (stdlib asyncio + ssl). Prints a Markdown report, also written to benches/streams/results.md.
#
# Env:
#   PHASES           phases, in order (default "embedded upstream upstream_h2 upstream_w1 latency")
#   STREAMS          open streams per memory phase (default 1000)
#   OPEN_CONCURRENCY streams being set up at once (TLS handshake to first event; default 64)
#   OPEN_TIMEOUT     seconds for every stream to have its first event, else the run fails (60)
#   IDLE_SAMPLES, IDLE_SECS  VmRSS samples per reading and over how long (5, 2); the max counts
#   SETTLE           seconds after the last first event before the RSS is read (1)
#   AFTER            seconds after the clients closed before the RSS is read again (2)
#   LATENCY_STREAMS  streams per target and connection mode (default 500)
#   LATENCY_WARMUP   more streams first, not counted (default 20)
#   LATENCY_MODES    comma-separated: fresh, keepalive (default "fresh,keepalive")
#   A2A_EDGE_WORKERS the edge's worker threads (default: unset, one per core) for every phase
#                    but upstream_w1 (always 1)
#   EDGE_ENV         VAR=VALUE... (space-separated) exported to every edge, for a diagnosis, e.g.
#                    EDGE_ENV=MIMALLOC_ARENA_EAGER_COMMIT=0 (default: none; named in the report)
#   A2A_EDGE_BIN     use this binary instead of `cargo build --release`
#   ENGINE_BIN       run the upstream engine (and so the direct rows) from this binary instead
#                    (default: the edge's), to compare two edges in front of one engine
#   RESULTS          output file (default benches/streams/results.md)
#   READY_TIMEOUT    seconds to wait for each server to come up (default 60)
#   KEEP_TMP         1: keep the temp dir (logs, policies, per-phase JSON)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=streams
# shellcheck source=../../tests/interop/lib.sh
source "$HERE/../../tests/interop/lib.sh"
case ${1:-} in
-h | --help)
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
    exit 0
    ;;
"") ;;
*) die "unknown argument: $1 (no arguments; see --help for the env knobs)" ;;
esac
PHASES=${PHASES:-embedded upstream upstream_h2 upstream_w1 latency}
STREAMS=${STREAMS:-1000}
OPEN_CONCURRENCY=${OPEN_CONCURRENCY:-64}
OPEN_TIMEOUT=${OPEN_TIMEOUT:-60}
IDLE_SAMPLES=${IDLE_SAMPLES:-5}
IDLE_SECS=${IDLE_SECS:-2}
SETTLE=${SETTLE:-1}
AFTER=${AFTER:-2}
LATENCY_STREAMS=${LATENCY_STREAMS:-500}
LATENCY_WARMUP=${LATENCY_WARMUP:-20}
LATENCY_MODES=${LATENCY_MODES:-fresh,keepalive}
EDGE_ENV=${EDGE_ENV:-}
for kv in $EDGE_ENV; do
    [[ $kv =~ ^[A-Za-z_][A-Za-z0-9_]*=.*$ ]] || die "EDGE_ENV: expected VAR=VALUE, got '$kv'"
    [[ ${kv%%=*} != A2A_EDGE_WORKERS ]] || die "EDGE_ENV: set A2A_EDGE_WORKERS itself, not in EDGE_ENV"
done
RESULTS=${RESULTS:-$HERE/results.md}
READY_TIMEOUT=${READY_TIMEOUT:-60}
# 1: the latency phase also measures nginx (TLS + proxy_pass to the same engine) when it is
# installed; 0: not.
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
LATENCY_NGINX=${LATENCY_NGINX:-1}
[[ -x "$NGINX" ]] || LATENCY_NGINX=0

require_uints STREAMS OPEN_CONCURRENCY OPEN_TIMEOUT IDLE_SAMPLES LATENCY_STREAMS LATENCY_WARMUP READY_TIMEOUT
for v in IDLE_SECS SETTLE AFTER; do
    [[ ${!v} =~ ^[0-9]*\.?[0-9]+$ ]] || die "$v must be a number (got '${!v}')"
done
((STREAMS > 0 && OPEN_CONCURRENCY > 0 && IDLE_SAMPLES > 0 && LATENCY_STREAMS > 1)) ||
    die "STREAMS, OPEN_CONCURRENCY, IDLE_SAMPLES must be > 0, LATENCY_STREAMS > 1"
for p in $PHASES; do
    case $p in embedded | upstream | upstream_h2 | upstream_w1 | latency) ;;
    *) die "unknown phase '$p' in PHASES (embedded upstream upstream_h2 upstream_w1 latency)" ;;
    esac
done
for m in ${LATENCY_MODES//,/ }; do
    [[ $m == fresh || $m == keepalive ]] || die "unknown mode '$m' in LATENCY_MODES (fresh, keepalive)"
done
WORKERS_ENV=${A2A_EDGE_WORKERS:-}
unset A2A_EDGE_WORKERS # set per edge below, never inherited by accident
if [[ -n "$WORKERS_ENV" ]]; then
    [[ $WORKERS_ENV =~ ^[0-9]+$ ]] && ((WORKERS_ENV >= 1 && WORKERS_ENV <= 256)) ||
        die "A2A_EDGE_WORKERS must be 1 to 256 (got '$WORKERS_ENV')"
    DEFAULT_WORKERS="$WORKERS_ENV (A2A_EDGE_WORKERS)"
else
    DEFAULT_WORKERS="$(nproc) (default: one per core)"
fi

# ---- tools, descriptors
command -v python3 >/dev/null 2>&1 || apt_install python3
command -v curl >/dev/null 2>&1 || apt_install curl
no_proxies
# One descriptor per stream at the client, two at the edge (the caller's and the engine's
# connection), one at the engine: the edge and the engine inherit this limit.
NEED_FDS=$((2 * STREAMS + 1024))
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
(($(ulimit -n) >= NEED_FDS)) || ulimit -n "$NEED_FDS" 2>/dev/null ||
    die "open-files limit $(ulimit -n) (hard $(ulimit -Hn)) is below the $NEED_FDS that $STREAMS streams need"

# ---- binary
edge_bin release
[[ -x "$BIN" ]] || die "binary not found or not executable: $BIN"
HEAD_AT_START=$(cd "$ROOT" && git describe --always --dirty 2>/dev/null || echo unknown)
BIN_SHA=$(sha12 "$BIN")
ENGINE_BIN=${ENGINE_BIN:-$BIN}
[[ -x "$ENGINE_BIN" ]] || die "engine binary not found or not executable: $ENGINE_BIN"
ENGINE_NOTE=
[[ "$ENGINE_BIN" == "$BIN" ]] || ENGINE_NOTE=" · engine $ENGINE_BIN (sha256 $(sha12 "$ENGINE_BIN"))"

# ---- temp dir and cleanup
make_tmp a2a-streams
[[ ${KEEP_TMP:-0} != 1 ]] || TMP_KEEP="kept $TMP (KEEP_TMP=1)"
BENCH_TOKEN=$(rand_token)
export BENCH_TOKEN

# ---- policy: one principal; every limit that counts connections, streams or requests well
# above what the benchmark opens, so that it measures memory, not limits
LIMIT=$((4 * STREAMS + 1000))
LIMITS="requests_per_second = 1000000
burst = 1000000
client_ip_requests_per_second = 1000000
client_ip_burst = 1000000
client_ip_connections_per_second = 1000000
client_ip_connection_burst = 1000000
max_connections = $LIMIT
max_connections_per_client = $LIMIT
max_in_flight_per_principal = $LIMIT
max_streams_per_principal = $LIMIT"
write_policy() { # file upstream_url [upstream_line...]
    {
        policy_head "$TMP/certs" agent "$2" 127.0.0.1:0 https://127.0.0.1:0/ 'admin_listen = "127.0.0.1:0"'
        (($# <= 2)) || printf '%s\n' "${@:3}"
        bench_auth_limits "$LIMITS"
    } >"$1"
    "$BIN" check --policy "$1" >"${1%.toml}.check.txt" 2>&1 ||
        { cat "${1%.toml}.check.txt" >&2; die "a2a-edge check refused the policy $1"; }
}

ENGINE_PID='' ENGINE_URL=''
start_engine() { # dir
    "$ENGINE_BIN" engine --listen 127.0.0.1:0 >"$1/engine.log" 2>&1 &
    ENGINE_PID=$!
    track "$ENGINE_PID"
    ENGINE_URL=$(wait_for_line "$1/engine.log" 'engine listening on http://127\.0\.0\.1:[0-9]+/' "$ENGINE_PID") ||
        die "the engine did not print 'engine listening on http://127.0.0.1:PORT/'"
    ENGINE_URL=${ENGINE_URL#engine listening on }
}

# start_phase_edge DIR UPSTREAM WORKERS [UPSTREAM_LINE...]: a fresh edge (WORKERS: empty = the
# binary's default; UPSTREAM_LINEs added to its [[upstreams]]); EDGE_PID, READY_URL, ADMIN
start_phase_edge() {
    local dir=$1 upstream=$2 workers=$3
    write_policy "$dir/policy.toml" "$upstream" "${@:4}"
    local env=() extra=()
    [[ -z "$workers" ]] || env+=("A2A_EDGE_WORKERS=$workers")
    if [[ -n "$EDGE_ENV" ]]; then
        read -r -a extra <<<"$EDGE_ENV"
        env+=("${extra[@]}")
    fi
    start_edge "$dir/policy.toml" "$dir/ready.json" "$dir/proxy.log" "${env[@]}"
    bench_wait_edge "$EDGE_PID" "$dir"
    ADMIN=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["admin"])' "$dir/ready.json") ||
        die "no admin address in $dir/ready.json"
    [[ -s "$TMP/certs/ca.pem" ]] || die "dev CA $TMP/certs/ca.pem missing"
}

# smoke DIR URL [CURL-ARGS...]: one short stream, HTTP 200 with a data event
smoke() {
    local dir=$1 url=$2 out="$1/smoke.txt" code
    shift 2
    code=$(curl -sS -N -o "$out" -w '%{http_code}' --max-time 10 "$@" \
        -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' -H 'Accept: text/event-stream' \
        --data '{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"smoke","role":"ROLE_USER","parts":[{"text":"[[complete]] smoke"}]}}}' \
        "$url") || code=curl-failed
    if [[ $code != 200 ]] || ! grep -q '^data: .*TASK_STATE_COMPLETED' "$out"; then
        die "smoke stream to $url failed: HTTP $code, body: $(head -c 300 "$out" 2>/dev/null)"
    fi
}

check_alive() { # name pid log
    kill -0 "$2" 2>/dev/null && return 0
    tail -n 20 "$3" >&2 2>/dev/null || true
    die "$1 (pid $2) died during the benchmark; no results written"
}

files=()
memory_phase() { # phase
    local phase=$1 dir="$TMP/$1" workers=$WORKERS_ENV label upstream engine_args=() rc=0 lines=()
    mkdir -p "$dir"
    [[ $phase != upstream_w1 ]] || workers=1
    [[ $phase != upstream_h2 ]] || lines=('http2 = true')
    ENGINE_PID=''
    if [[ $phase == embedded ]]; then
        upstream=embedded
        label='embedded engine (edge + engine in one process)'
    else
        start_engine "$dir"
        upstream=$ENGINE_URL
        engine_args=(--engine-pid "$ENGINE_PID")
        label='standalone engine upstream'
        [[ $phase != upstream_h2 ]] || label='standalone engine upstream over HTTP/2 (h2c, `http2 = true`)'
    fi
    start_phase_edge "$dir" "$upstream" "$workers" "${lines[@]}"
    # no smoke request here: the idle RSS is read before the edge has served anything (the
    # driver fails loudly when the streams do not open)
    log "$phase: edge $READY_URL (pid $EDGE_PID, admin $ADMIN, workers ${workers:-default})${ENGINE_PID:+, engine $ENGINE_URL (pid $ENGINE_PID)}"
    python3 "$HERE/drive.py" memory --name "$phase" --label "$label" \
        --workers "${workers:-$(nproc) (default)}" --url "$READY_URL" --cacert "$TMP/certs/ca.pem" \
        --edge-pid "$EDGE_PID" "${engine_args[@]}" --admin "$ADMIN" --streams "$STREAMS" \
        --open-concurrency "$OPEN_CONCURRENCY" --open-timeout "$OPEN_TIMEOUT" --idle-samples "$IDLE_SAMPLES" \
        --idle-secs "$IDLE_SECS" --settle "$SETTLE" --after "$AFTER" --out "$dir/result.json" || rc=$?
    check_alive a2a-edge "$EDGE_PID" "$dir/proxy.log"
    [[ -z "$ENGINE_PID" ]] || check_alive "the engine" "$ENGINE_PID" "$dir/engine.log"
    if ((rc != 0)); then
        tail -n 5 "$dir/proxy.log" >&2
        die "$phase: the driver failed (status $rc): not every stream opened; no results written"
    fi
    files+=("$dir/result.json")
    stop "$EDGE_PID"
    [[ -z "$ENGINE_PID" ]] || stop "$ENGINE_PID"
}

# start_latency_nginx DIR: nginx as a TLS reverse proxy to the engine (the dev certificate,
# upstream keepalive, no response buffering: as the load benchmark's), for a reference row of
# what TLS termination and one proxy hop cost without any check. Sets NGINX_URL, NGINX_PID.
start_latency_nginx() {
    local dir=$1/nginx port engine=${ENGINE_URL#http://}
    engine=${engine%/}
    mkdir -p "$dir/tmp"
    port=$(free_port)
    cat >"$dir/nginx.conf" <<CONF
worker_processes $(nproc);
pid $dir/nginx.pid;
error_log $dir/error.log warn;
daemon off;
events { worker_connections 1024; }
http {
    access_log $dir/access.log combined;
    client_body_temp_path $dir/tmp/client_body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    upstream engine { server $engine; keepalive 16; }
    server {
        listen 127.0.0.1:$port ssl;
        ssl_certificate $TMP/certs/server.pem;
        ssl_certificate_key $TMP/certs/server.key;
        location / {
            proxy_pass http://engine;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }
    }
}
CONF
    "$NGINX" -t -q -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" ||
        { cat "$dir/error.log" >&2 2>/dev/null; die "latency: nginx config test failed"; }
    "$NGINX" -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" >"$dir/stdout.log" 2>&1 &
    NGINX_PID=$!
    track "$NGINX_PID"
    NGINX_URL="https://127.0.0.1:$port/"
    for _ in $(seq 1 $((READY_TIMEOUT * 10))); do
        kill -0 "$NGINX_PID" 2>/dev/null || { cat "$dir/error.log" >&2; die "latency: nginx exited"; }
        curl -s -o /dev/null --max-time 2 --cacert "$TMP/certs/ca.pem" "${NGINX_URL}health" && return 0
        sleep 0.1
    done
    die "latency: nginx is not answering on $NGINX_URL"
}

latency_phase() {
    local dir="$TMP/latency" rc=0 nginx_args=()
    mkdir -p "$dir"
    start_engine "$dir"
    start_phase_edge "$dir" "$ENGINE_URL" "$WORKERS_ENV"
    smoke "$dir" "$ENGINE_URL"
    smoke "$dir" "$READY_URL" --cacert "$TMP/certs/ca.pem" -H "Authorization: Bearer $BENCH_TOKEN"
    NGINX_PID=
    if [[ $LATENCY_NGINX == 1 ]]; then
        start_latency_nginx "$dir"
        nginx_args=(--nginx "$NGINX_URL")
    fi
    log "latency: direct $ENGINE_URL, edge $READY_URL${NGINX_PID:+, nginx $NGINX_URL}; $LATENCY_STREAMS streams per target and mode ($LATENCY_MODES)"
    python3 "$HERE/drive.py" latency --direct "$ENGINE_URL" --edge "$READY_URL" "${nginx_args[@]}" \
        --cacert "$TMP/certs/ca.pem" --n "$LATENCY_STREAMS" --warmup "$LATENCY_WARMUP" \
        --modes "$LATENCY_MODES" --out "$dir/result.json" || rc=$?
    check_alive a2a-edge "$EDGE_PID" "$dir/proxy.log"
    check_alive "the engine" "$ENGINE_PID" "$dir/engine.log"
    ((rc == 0)) || { tail -n 5 "$dir/proxy.log" >&2; die "latency: the driver failed (status $rc)"; }
    files+=("$dir/result.json")
    stop "$EDGE_PID"
    [[ -z "$NGINX_PID" ]] || stop "$NGINX_PID"
    stop "$ENGINE_PID"
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
START=$SECONDS
for p in $PHASES; do
    if [[ $p == latency ]]; then latency_phase; else memory_phase "$p"; fi
done
RUNTIME=$((SECONDS - START))

# ---- header and report
header="$(bench_header "$(python3 --version 2>&1)") · binary $BIN (sha256 $BIN_SHA; tree $HEAD_AT_START at the start)$ENGINE_NOTE · edge worker threads $DEFAULT_WORKERS${EDGE_ENV:+ · edge env $EDGE_ENV} · run ${RUNTIME} s"
note="Each phase: a fresh \`a2a-edge serve\` (TLS with the dev CA, one bearer principal, the admin listener on) and, but for the embedded phase, a fresh \`a2a-edge engine\`; policy \`[limits]\` $(echo "$LIMITS" | sed 's/ = /=/' | paste -sd, - | sed 's/,/, /g') (everything else at its default). Client: benches/streams/drive.py on the same 2 cores (the edge, the engine and the client share them); open-files limit $(ulimit -n)."
python3 "$HERE/drive.py" report --header "$header" --note "$note" --idle-secs "$IDLE_SECS" \
    --settle "$SETTLE" --after "$AFTER" "${files[@]}" >"$TMP/results.md"
bench_results "$TMP/results.md"
log "total runtime ${RUNTIME} s"
