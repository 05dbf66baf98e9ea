#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Load benchmark: wrk (HTTP/1.1 keep-alive, a ~1 KB SendMessage) and h2load (HTTP/2) against
# two upstream shapes, each reached
#   direct   plain HTTP to the upstream
#   a2a-edge TLS + bearer auth, every check on, proxying to that upstream over HTTP
#   nginx    TLS termination + proxy_pass (upstream keepalive) to that upstream
#   a2a-edge-redis  a2a-edge with `[state] backend = "redis"` (a local redis-server)
# The shapes: `engine` (the embedded echo agent, `a2a-edge engine`) and `static` (an nginx of its own,
# `return 200` with a fixed 1.3 KB Task, static-task.json: what a proxy costs when the agent
# costs nothing), and `conversation` (the engine again, every request a follow-up: a message in a
# context of the caller's that exists, so that the edge checks the context and, with Redis, takes
# and releases its busy lease on every request; HTTP/1.1 only). The targets run interleaved for ROUNDS rounds; the tables give the medians and
# the ratios edge / nginx (also written to benches/load/results.md).
#
# Usage: run.sh [--rounds N]
# Env:
#   ROUNDS       rounds of every target, interleaved (default 2; --rounds wins)
#   SHAPES       the upstream shapes, space-separated: engine, static, conversation (default
#                "engine static")
#   CONTEXTS     the conversation shape's contexts per target, made before the rounds and named
#                in turn (default 4 x CONNECTIONS)
#   DURATION     seconds per measured run (default 8)
#   CONNECTIONS  wrk connections (default 32)
#   THREADS      wrk threads (default 1)
#   WARMUP       seconds of unmeasured warm-up per run (default 2; 0 = none)
#   H2LOAD       1 (default): also measure HTTP/2 with h2load (nghttp2-client); 0: skip
#   H2_STREAMS   h2load concurrent streams per connection (default 8)
#   STATE_REDIS  1 (default): also a2a-edge with the state in Redis; 0: skip
#   HA           1: also two such replicas (one Redis) behind haproxy in TCP mode, engine
#                shape only (needs STATE_REDIS=1; haproxy installed when missing); 0 (default)
#   A2A_EDGE_BIN use this binary instead of `cargo build --release`
#   BASELINE_BIN a second a2a-edge binary (e.g. the previous commit's) measured in the same
#                rounds as `a2a-edge-base`, memory state (and, with STATE_REDIS, as
#                `a2a-edge-base-redis` beside `a2a-edge-redis`, its own Redis database):
#                the A/B of one change in one run
#   UPSTREAM_HTTP2 1: the edge under test speaks HTTP/2 (h2c) to the engine (`http2 = true`;
#                engine and conversation shapes; the baseline and Redis edges keep HTTP/1.1), so that
#                A2A_EDGE_BIN=X BASELINE_BIN=X is the A/B of the two; 0 (default)
#   REDIS_UNIX   1: the edge under test reaches Redis through its Unix socket (`unix://`
#                redis_url) instead of loopback TCP; the baseline's Redis edges keep TCP, so
#                that A2A_EDGE_BIN=X BASELINE_BIN=X REDIS_UNIX=1 is the A/B of the two; 0 (default)
#   OTLP_RATIO   a number from 0 to 1: the edge under test (memory state) exports its spans
#                (`[telemetry] otlp_endpoint`, `otlp_sample_ratio` = this) to a collector
#                that takes every batch (the static upstream's nginx answers 200 at
#                /otlp/v1/traces); the baseline does not, so that A2A_EDGE_BIN=X
#                BASELINE_BIN=X OTLP_RATIO=1 is what tracing costs; unset (default): no traces
#   FLOOR        1: also the stack's floor per shape, as `floor-SHAPE`: benches/load/floor.rs,
#                a blind TLS proxy on the edge's own crates and settings (rustls, hyper,
#                thread per core, mimalloc) doing none of its work, so that edge / nginx
#                reads as floor / nginx (what the stack costs) times edge / floor (what the
#                edge's checks cost); 0 (default)
#   FLOOR_BIN    the floor-proxy binary (default: `cargo build --release --example floor-proxy`)
#   OTLP_BASE    1: the baseline exports too, at OTLP_RATIO (A/B of a change to tracing); 0
#                (default)
#   NGINX_WORKERS nginx worker_processes (default: nproc)
#   STATIC_WORKERS worker_processes of the static upstream's own nginx (default: NGINX_WORKERS)
#   NGINX_ACCESS_LOG 1 (default): nginx logs every request to a file, as
#                a2a-edge does (one JSON line per request on stderr); 0: off
#   ONLY         measure only the targets matching this extended regex (whole name, e.g.
#                'a2a-edge-(base-)?redis-engine'): a quick A/B; the servers all start
#   RESULTS      output file (default benches/load/results.md)
#   READY_TIMEOUT seconds to wait for each server to come up (default 60)
#   PERF_TARGET  a target name (e.g. a2a-edge-static, floor-static, or a2a-edge-static-h2
#                for its h2load run): `perf record -g` on that edge during its first measured run, the
#                report in PERF_OUT (default $TMP/perf.data; the binary should be built
#                with -C force-frame-pointers=yes)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=bench
# shellcheck source=../../tests/interop/lib.sh
source "$HERE/../../tests/interop/lib.sh"
ROUNDS=${ROUNDS:-2}
while (($#)); do
    case $1 in
    --rounds)
        (($# >= 2)) || die "--rounds needs a number"
        ROUNDS=$2
        shift 2
        ;;
    --rounds=*)
        ROUNDS=${1#--rounds=}
        shift
        ;;
    -h | --help)
        sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
        exit 0
        ;;
    *) die "unknown argument: $1 (usage: run.sh [--rounds N])" ;;
    esac
done
SHAPES=${SHAPES:-engine static}
DURATION=${DURATION:-8}
CONNECTIONS=${CONNECTIONS:-32}
CONTEXTS=${CONTEXTS:-$((CONNECTIONS * 4))}
THREADS=${THREADS:-1}
WARMUP=${WARMUP:-2}
NGINX_WORKERS=${NGINX_WORKERS:-$(nproc)}
STATIC_WORKERS=${STATIC_WORKERS:-$NGINX_WORKERS}
NGINX_ACCESS_LOG=${NGINX_ACCESS_LOG:-1}
H2LOAD=${H2LOAD:-1}
H2_STREAMS=${H2_STREAMS:-8}
STATE_REDIS=${STATE_REDIS:-1}
HA=${HA:-0}
RESULTS=${RESULTS:-$HERE/results.md}
READY_TIMEOUT=${READY_TIMEOUT:-60}
PERF_TARGET=${PERF_TARGET:-}
ONLY=${ONLY:-}
BASELINE_BIN=${BASELINE_BIN:-}
UPSTREAM_HTTP2=${UPSTREAM_HTTP2:-0}
REDIS_UNIX=${REDIS_UNIX:-0}
OTLP_RATIO=${OTLP_RATIO:-}
OTLP_BASE=${OTLP_BASE:-0}
FLOOR=${FLOOR:-0}
FLOOR_BIN=${FLOOR_BIN:-}
[[ -z "$OTLP_RATIO" || "$OTLP_RATIO" =~ ^(0|1|0?\.[0-9]+|1\.0*)$ ]] || die "OTLP_RATIO must be a number from 0 to 1"
[[ -z "$BASELINE_BIN" || -x "$BASELINE_BIN" ]] || die "BASELINE_BIN is not an executable: $BASELINE_BIN"

require_uints ROUNDS DURATION CONNECTIONS CONTEXTS THREADS WARMUP NGINX_WORKERS STATIC_WORKERS NGINX_ACCESS_LOG READY_TIMEOUT H2LOAD H2_STREAMS STATE_REDIS HA REDIS_UNIX OTLP_BASE FLOOR
((REDIS_UNIX == 0 || STATE_REDIS)) || die "REDIS_UNIX=1 needs STATE_REDIS=1"
((OTLP_BASE == 0)) || [[ -n "$OTLP_RATIO" ]] || die "OTLP_BASE=1 needs OTLP_RATIO"
((ROUNDS > 0)) || die "ROUNDS must be > 0"
((HA == 0 || STATE_REDIS)) || die "HA=1 needs STATE_REDIS=1 (the replicas share Redis)"
((DURATION > 0 && CONNECTIONS > 0 && THREADS > 0)) || die "DURATION, CONNECTIONS, THREADS must be > 0"
((CONNECTIONS >= THREADS)) || die "CONNECTIONS must be >= THREADS"
if [[ " $SHAPES " == *" conversation "* ]]; then
    # (each wrk thread names the contexts in turn from the first one)
    ((THREADS == 1)) || die "the conversation shape needs THREADS=1"
    ((CONTEXTS > CONNECTIONS)) || die "CONTEXTS must be more than CONNECTIONS (no two requests in flight on one context)"
fi
for shape in $SHAPES; do
    [[ $shape =~ ^(engine|static|conversation)$ ]] ||
        die "unknown shape in SHAPES: $shape (engine, static, conversation)"
done

# ---- tools
need_apt=()
command -v nginx >/dev/null 2>&1 || [[ -x /usr/sbin/nginx ]] || need_apt+=(nginx)
command -v wrk >/dev/null 2>&1 || need_apt+=(wrk)
((H2LOAD)) && { command -v h2load >/dev/null 2>&1 || need_apt+=(nghttp2-client); }
((STATE_REDIS)) && { command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server); }
((HA)) && { command -v haproxy >/dev/null 2>&1 || need_apt+=(haproxy); }
[[ -z "$PERF_TARGET" ]] || command -v perf >/dev/null 2>&1 || need_apt+=(linux-perf)
apt_install "${need_apt[@]}"
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
command -v python3 >/dev/null 2>&1 || die "python3 is needed (port picking, parsing)"
command -v curl >/dev/null 2>&1 || die "curl is needed (smoke requests)"

# ---- binary
edge_bin release
[[ -x "$BIN" ]] || die "binary not found or not executable: $BIN"
# Named in the report with their digests (an A/B run says what it compared).
binaries="a2a-edge: $BIN (sha256 $(sha12 "$BIN"))"
[[ -z "$BASELINE_BIN" ]] || binaries+="; a2a-edge-base: $BASELINE_BIN (sha256 $(sha12 "$BASELINE_BIN"))"
if ((FLOOR)); then
    if [[ -z "$FLOOR_BIN" ]]; then
        log "cargo build --release --example floor-proxy"
        (cd "$ROOT" && cargo build --release --quiet --example floor-proxy) || exit
        FLOOR_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/floor-proxy"
    fi
    [[ -x "$FLOOR_BIN" ]] || die "FLOOR_BIN is not an executable: $FLOOR_BIN"
    binaries+="; floor: $FLOOR_BIN (sha256 $(sha12 "$FLOOR_BIN"))"
fi
((REDIS_UNIX)) && binaries+=". a2a-edge-redis reaches Redis through its Unix socket (REDIS_UNIX=1), a2a-edge-base-redis over loopback TCP"
if [[ -n "$OTLP_RATIO" ]]; then
    binaries+=". a2a-edge (memory state) exports spans, otlp_sample_ratio = $OTLP_RATIO (OTLP_RATIO), to a collector answering 200"
    if ((OTLP_BASE)); then binaries+=", as does a2a-edge-base (OTLP_BASE=1)"; else binaries+="; a2a-edge-base exports none"; fi
fi

# ---- temp dir and cleanup
make_tmp a2a-bench 711 # nginx workers (nobody when run as root) may traverse it
PERF_OUT=${PERF_OUT:-$TMP/perf.data}

# smoke NAME CURL-ARGS...: one request like wrk's, must be HTTP 200 with a result
smoke() {
    local name=$1
    shift
    local code
    code=$(curl -sS -o "$TMP/smoke.$name" -w '%{http_code}' --max-time 10 \
        -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' \
        -H "Authorization: Bearer $BENCH_TOKEN" \
        --data-binary @"$BODY" "$@") || code="curl-failed"
    if [[ $code != 200 ]] || ! grep -q '"result"' "$TMP/smoke.$name"; then
        log "smoke request to $name failed: HTTP $code, body: $(head -c 400 "$TMP/smoke.$name" 2>/dev/null)"
        return 1
    fi
    log "smoke $name: HTTP 200, $(wc -c <"$TMP/smoke.$name") bytes"
}

# render TEMPLATE OUT KEY=VALUE...: TEMPLATE with every @KEY@ replaced by VALUE
render() {
    python3 - "$@" <<'EOF' || die "could not render $1"
import re, sys
tmpl, out, *pairs = sys.argv[1:]
text = open(tmpl).read()
for kv in pairs:
    k, v = kv.split("=", 1)
    text = text.replace(f"@{k}@", v)
left = sorted(set(re.findall(r"@[A-Z0-9_]+@", text)))
if left:
    sys.exit(f"{tmpl}: not filled in: {' '.join(left)}")
open(out, "w").write(text)
EOF
}

BENCH_TOKEN=$(rand_token)
export BENCH_TOKEN
BODY="$HERE/sendmessage.json" # the body wrk sends (read by sendmessage.lua)
STATIC_BODY_FILE="$HERE/static-task.json"
python3 -c 'import json,sys; [json.load(open(f)) for f in sys.argv[1:]]' "$BODY" "$STATIC_BODY_FILE" ||
    die "$BODY or $STATIC_BODY_FILE is not valid JSON"

# Target names, in the order every round runs them; their URLs, and the servers to watch.
TARGETS=()
declare -A URL=() CACERT=()
SERVER_NAMES=()
SERVER_PIDS=()
SERVER_LOGS=()
watch_server() { SERVER_NAMES+=("$1"); SERVER_PIDS+=("$2"); SERVER_LOGS+=("$3"); }

# start_nginx NAME DIR WHAT HEALTH_URL...: tests DIR/nginx.conf, starts nginx with it (tracked and
# watched as NAME), and waits until every HEALTH_URL answers (https ones with the dev CA).
start_nginx() {
    local name=$1 dir=$2 what=$3
    shift 3
    "$NGINX" -t -q -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" ||
        { cat "$dir/error.log" >&2 2>/dev/null; die "$name: nginx config test failed"; }
    log "starting $what"
    "$NGINX" -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" >"$dir/stdout.log" 2>&1 &
    track $!
    watch_server "$name" "$!" "$dir/error.log"
    local url up
    for _ in $(seq 1 $((READY_TIMEOUT * 10))); do
        kill -0 "${PIDS[-1]}" 2>/dev/null || { cat "$dir/error.log" >&2 2>/dev/null; die "$name exited early"; }
        up=1
        for url in "$@"; do
            local ca=()
            [[ $url == https://* ]] && ca=(--cacert "$CERTS/ca.pem")
            curl -s -o /dev/null --max-time 2 "${ca[@]}" "$url" 2>/dev/null || { up=; break; }
        done
        [[ -n "$up" ]] && return 0
        sleep 0.1
    done
    die "$name is not answering on $*"
}

# ---- the engine (plain HTTP), and the static upstream (an nginx of its own)
log "starting engine"
"$BIN" engine --listen 127.0.0.1:0 >"$TMP/engine.log" 2>&1 &
track $!
watch_server engine "$!" "$TMP/engine.log"
ENGINE_URL=$(wait_for_line "$TMP/engine.log" 'engine listening on http://127\.0\.0\.1:[0-9]+/' "${PIDS[-1]}") ||
    die "engine did not print 'engine listening on http://127.0.0.1:PORT/'"
ENGINE_URL=${ENGINE_URL#engine listening on }
ENGINE_PORT=${ENGINE_URL##*:}
ENGINE_PORT=${ENGINE_PORT%/}
log "engine at $ENGINE_URL"
STATIC_PORT=$(free_port)
STATIC_URL="http://127.0.0.1:$STATIC_PORT/"
declare -A UPSTREAM=([engine]=$ENGINE_URL [static]=$STATIC_URL [conversation]=$ENGINE_URL)
SNG="$TMP/static"
mkdir -p "$SNG/tmp"
render "$HERE/static-upstream.conf.tmpl" "$SNG/nginx.conf" "PREFIX=$SNG" "WORKERS=$STATIC_WORKERS" \
    "ENGINE_PORT=$ENGINE_PORT" "STATIC_PORT=$STATIC_PORT" "STATIC_BODY=$(cat "$STATIC_BODY_FILE")"
start_nginx static "$SNG" "the static upstream (nginx, $STATIC_WORKERS workers) on 127.0.0.1:$STATIC_PORT" \
    "${STATIC_URL}health"

# edge_policy DIR UPSTREAM_URL [EXTRA...]: a policy for the benchmark in DIR/policy.toml
edge_policy() {
    local dir=$1 url=$2
    shift 2
    mkdir -p "$dir"
    {
        policy_head "$dir/certs" agent "$url"
        ((!${EDGE_HTTP2:-0})) || echo 'http2 = true'
        # The benchmark measures the proxy's work, not its rate limits (wrk is one client, one
        # principal): limits far above what the load can reach.
        bench_auth_limits "requests_per_second = 1000000
burst = 1000000
client_ip_requests_per_second = 1000000
client_ip_burst = 1000000
client_ip_connections_per_second = 1000000
client_ip_connection_burst = 1000000
max_in_flight_per_principal = 100000"
        (($# == 0)) || printf '%s\n' "$@"
    } >"$dir/policy.toml"
}

# ---- a redis-server for the edges with shared state (one database per shape)
if ((STATE_REDIS)); then
    REDIS_PORT=$(free_port)
    mkdir -p "$TMP/redis"
    REDIS_SOCKET="$TMP/redis/redis.sock"
    redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
        --unixsocket "$REDIS_SOCKET" --unixsocketperm 700 \
        --dir "$TMP/redis" >"$TMP/redis/redis.log" 2>&1 &
    track $!
    watch_server redis-server "$!" "$TMP/redis/redis.log"
    for _ in $(seq 1 100); do
        python3 -c 'import socket,sys; s=socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1); s.sendall(b"PING\r\n"); sys.exit(0 if s.recv(7) == b"+PONG\r\n" else 1)' \
            "$REDIS_PORT" 2>/dev/null && break
        sleep 0.1
    done
    PAGE_SECRET=$(head -c 24 /dev/urandom | base64)
fi

# ---- the edges: per shape, one with the state in memory and (STATE_REDIS) one in Redis
declare -A EDGE_PID_OF=()
CERTS=
db=0
for shape in $SHAPES; do
    dir="$TMP/edge-$shape"
    h2=0
    [[ $shape == static ]] || h2=$UPSTREAM_HTTP2
    otlp=()
    [[ -z "$OTLP_RATIO" ]] || otlp=("[telemetry]" "otlp_endpoint = \"${STATIC_URL}otlp/\"" "otlp_sample_ratio = $OTLP_RATIO")
    EDGE_HTTP2=$h2 edge_policy "$dir" "${UPSTREAM[$shape]}" "${otlp[@]}"
    log "starting a2a-edge serve ($shape upstream)"
    start_edge "$dir/policy.toml" "$dir/ready.json" "$dir/proxy.log"
    bench_wait_edge "$EDGE_PID" "$dir"
    URL[a2a-edge-$shape]=$READY_URL
    CACERT[a2a-edge-$shape]="$dir/certs/ca.pem"
    EDGE_PID_OF[a2a-edge-$shape]=$EDGE_PID
    watch_server "a2a-edge-$shape" "$EDGE_PID" "$dir/proxy.log"
    [[ -n "$CERTS" ]] || CERTS="$dir/certs" # nginx serves the first edge's dev certificate
    if [[ -n "$BASELINE_BIN" ]]; then
        bdir="$TMP/edge-base-$shape"
        if ((OTLP_BASE)); then
            edge_policy "$bdir" "${UPSTREAM[$shape]}" "${otlp[@]}"
        else
            edge_policy "$bdir" "${UPSTREAM[$shape]}"
        fi
        log "starting the baseline a2a-edge serve ($shape upstream): $BASELINE_BIN"
        BIN_SAVED=$BIN
        BIN=$BASELINE_BIN
        start_edge "$bdir/policy.toml" "$bdir/ready.json" "$bdir/proxy.log"
        BIN=$BIN_SAVED
        bench_wait_edge "$EDGE_PID" "$bdir"
        URL[a2a-edge-base-$shape]=$READY_URL
        CACERT[a2a-edge-base-$shape]="$bdir/certs/ca.pem"
        EDGE_PID_OF[a2a-edge-base-$shape]=$EDGE_PID
        watch_server "a2a-edge-base-$shape" "$EDGE_PID" "$bdir/proxy.log"
    fi
    if ((STATE_REDIS)); then
        rdir="$TMP/edge-redis-$shape"
        redis_url="redis://127.0.0.1:$REDIS_PORT/$db"
        ((REDIS_UNIX)) && redis_url="unix://$REDIS_SOCKET?db=$db"
        edge_policy "$rdir" "${UPSTREAM[$shape]}" "" "[state]" 'backend = "redis"' \
            "redis_url = \"$redis_url\"" 'page_token_secret_env = "BENCH_PAGE_SECRET"'
        db=$((db + 1))
        log "starting a2a-edge serve ($shape upstream, state in redis at $redis_url)"
        start_edge "$rdir/policy.toml" "$rdir/ready.json" "$rdir/proxy.log" "BENCH_PAGE_SECRET=$PAGE_SECRET"
        bench_wait_edge "$EDGE_PID" "$rdir"
        URL[a2a-edge-redis-$shape]=$READY_URL
        CACERT[a2a-edge-redis-$shape]="$rdir/certs/ca.pem"
        EDGE_PID_OF[a2a-edge-redis-$shape]=$EDGE_PID
        watch_server "a2a-edge-redis-$shape" "$EDGE_PID" "$rdir/proxy.log"
        if [[ -n "$BASELINE_BIN" ]]; then
            bdir="$TMP/edge-base-redis-$shape"
            edge_policy "$bdir" "${UPSTREAM[$shape]}" "" "[state]" 'backend = "redis"' \
                "redis_url = \"redis://127.0.0.1:$REDIS_PORT/$db\"" 'page_token_secret_env = "BENCH_PAGE_SECRET"'
            db=$((db + 1))
            log "starting the baseline a2a-edge serve ($shape upstream, state in redis): $BASELINE_BIN"
            BIN_SAVED=$BIN
            BIN=$BASELINE_BIN
            start_edge "$bdir/policy.toml" "$bdir/ready.json" "$bdir/proxy.log" "BENCH_PAGE_SECRET=$PAGE_SECRET"
            BIN=$BIN_SAVED
            bench_wait_edge "$EDGE_PID" "$bdir"
            URL[a2a-edge-base-redis-$shape]=$READY_URL
            CACERT[a2a-edge-base-redis-$shape]="$bdir/certs/ca.pem"
            EDGE_PID_OF[a2a-edge-base-redis-$shape]=$EDGE_PID
            watch_server "a2a-edge-base-redis-$shape" "$EDGE_PID" "$bdir/proxy.log"
        fi
    fi
done
for f in ca.pem server.pem server.key; do
    [[ -s "$CERTS/$f" ]] || die "dev cert file $CERTS/$f missing"
done

# ---- nginx: the TLS proxies (same certificate as the first edge)
NGX="$TMP/nginx"
mkdir -p "$NGX/tmp"
NGINX_PORT=$(free_port)
NGINX_STATIC_PORT=$(free_port)
if ((NGINX_ACCESS_LOG)); then
    access_log="access_log $NGX/access.log combined;"
else
    access_log="access_log off;"
fi
render "$HERE/nginx.conf.tmpl" "$NGX/nginx.conf" "PREFIX=$NGX" "WORKERS=$NGINX_WORKERS" \
    "ACCESS_LOG=$access_log" "ENGINE_PORT=$ENGINE_PORT" "NGINX_PORT=$NGINX_PORT" \
    "STATIC_PORT=$STATIC_PORT" "NGINX_STATIC_PORT=$NGINX_STATIC_PORT" \
    "CERT=$CERTS/server.pem" "KEY=$CERTS/server.key"
URL[nginx-engine]="https://127.0.0.1:$NGINX_PORT/"
URL[nginx-static]="https://127.0.0.1:$NGINX_STATIC_PORT/"
CACERT[nginx-engine]="$CERTS/ca.pem"
CACERT[nginx-static]="$CERTS/ca.pem"
URL[direct-engine]=$ENGINE_URL
URL[direct-static]=$STATIC_URL
# The conversation shape's nginx and direct targets are the engine shape's.
URL[nginx-conversation]=${URL[nginx-engine]}
CACERT[nginx-conversation]=$CERTS/ca.pem
URL[direct-conversation]=$ENGINE_URL
start_nginx nginx "$NGX" "nginx on 127.0.0.1:$NGINX_PORT (engine), :$NGINX_STATIC_PORT (static)" \
    "${URL[nginx-engine]}health" "${URL[nginx-static]}health"

# ---- (FLOOR) the stack's floor in front of each upstream (the same certificate)
if ((FLOOR)); then
    for shape in $SHAPES; do
        dir="$TMP/floor-$shape"
        mkdir -p "$dir"
        log "starting floor-proxy ($shape upstream)"
        "$FLOOR_BIN" --upstream "${UPSTREAM[$shape]}" --cert "$CERTS/server.pem" --key "$CERTS/server.key" \
            --ready-file "$dir/ready.json" >"$dir/proxy.log" 2>&1 &
        pid=$!
        track "$pid"
        wait_ready "$pid" "$dir/ready.json" ||
            { tail -n 20 "$dir/proxy.log" >&2; die "floor-proxy ($shape) did not start: $READY_ERR"; }
        URL[floor-$shape]=$READY_URL
        CACERT[floor-$shape]="$CERTS/ca.pem"
        EDGE_PID_OF[floor-$shape]=$pid # PERF_TARGET=floor-SHAPE profiles it
        watch_server "floor-$shape" "$pid" "$dir/proxy.log"
    done
fi

# ---- (HA) a second replica of the engine shape's redis edge, and haproxy (TCP) in front
if ((HA)); then
    mkdir -p "$TMP/edge-redis-engine-2" "$TMP/haproxy"
    log "starting a second a2a-edge replica (the same policy and Redis)"
    start_edge "$TMP/edge-redis-engine/policy.toml" "$TMP/edge-redis-engine-2/ready.json" \
        "$TMP/edge-redis-engine-2/proxy.log" "BENCH_PAGE_SECRET=$PAGE_SECRET"
    bench_wait_edge "$EDGE_PID" "$TMP/edge-redis-engine-2"
    watch_server a2a-edge-redis-engine-2 "$EDGE_PID" "$TMP/edge-redis-engine-2/proxy.log"
    port_of() { local p=${1##*:}; echo "${p%/}"; }
    HA_PORT=$(free_port)
    render "$HERE/haproxy.cfg.tmpl" "$TMP/haproxy/haproxy.cfg" "HA_PORT=$HA_PORT" \
        "EDGE1_PORT=$(port_of "${URL[a2a-edge-redis-engine]}")" "EDGE2_PORT=$(port_of "$READY_URL")"
    haproxy -c -q -f "$TMP/haproxy/haproxy.cfg" || die "haproxy config check failed"
    haproxy -db -f "$TMP/haproxy/haproxy.cfg" >"$TMP/haproxy/haproxy.log" 2>&1 &
    track $!
    watch_server haproxy "$!" "$TMP/haproxy/haproxy.log"
    URL[haproxy-2-replicas-engine]="https://127.0.0.1:$HA_PORT/"
    CACERT[haproxy-2-replicas-engine]="$TMP/edge-redis-engine/certs/ca.pem"
    ok=
    for _ in $(seq 1 100); do
        kill -0 "${PIDS[-1]}" 2>/dev/null || { cat "$TMP/haproxy/haproxy.log" >&2; die "haproxy exited early"; }
        if curl -s -o /dev/null --max-time 2 --cacert "${CACERT[haproxy-2-replicas-engine]}" \
            "${URL[haproxy-2-replicas-engine]}health"; then
            ok=1
            break
        fi
        sleep 0.1
    done
    [[ -n "$ok" ]] || { cat "$TMP/haproxy/haproxy.log" >&2; die "haproxy not answering"; }
fi

# ---- the targets of every round, and a smoke request to each
for shape in $SHAPES; do
    TARGETS+=("direct-$shape" "a2a-edge-$shape")
    [[ -z "$BASELINE_BIN" ]] || TARGETS+=("a2a-edge-base-$shape")
    TARGETS+=("nginx-$shape")
    ((FLOOR)) && TARGETS+=("floor-$shape")
    ((STATE_REDIS)) && TARGETS+=("a2a-edge-redis-$shape")
    ((STATE_REDIS)) && [[ -n "$BASELINE_BIN" ]] && TARGETS+=("a2a-edge-base-redis-$shape")
    [[ $shape == engine ]] && ((HA)) && TARGETS+=("haproxy-2-replicas-engine")
done
# only NAME...: the names ONLY matches (all of them without ONLY), one per line
only() {
    local t
    for t in "$@"; do [[ -n "$ONLY" && ! $t =~ ^($ONLY)$ ]] || echo "$t"; done
}
mapfile -t kept < <(only "${TARGETS[@]}")
((${#kept[@]})) || die "ONLY='$ONLY' matches none of: ${TARGETS[*]}"
TARGETS=("${kept[@]}")
for t in "${TARGETS[@]}"; do
    if [[ -n "${CACERT[$t]:-}" ]]; then
        smoke "$t" --cacert "${CACERT[$t]}" "${URL[$t]}" || die "smoke request to $t failed"
    else
        smoke "$t" "${URL[$t]}" || die "smoke request to $t failed"
    fi
done

# ---- the conversation shape's contexts: CONTEXTS new ones per target, made through it (each
# edge's caller owns its own), one id per line in $TMP/contexts.TARGET
for t in "${TARGETS[@]}"; do
    [[ $t == *-conversation ]] || continue
    ca=()
    [[ -z "${CACERT[$t]:-}" ]] || ca=(--cacert "${CACERT[$t]}")
    for _ in $(seq 1 "$CONTEXTS"); do
        curl -sS --max-time 10 "${ca[@]}" -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' \
            -H "Authorization: Bearer $BENCH_TOKEN" --data-binary @"$BODY" "${URL[$t]}" |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["task"]["contextId"])' ||
            die "could not make a context through $t"
    done >"$TMP/contexts.$t"
    log "$t: $(wc -l <"$TMP/contexts.$t") contexts made"
done

# ---- measure
check_servers() {
    local i
    for i in "${!SERVER_NAMES[@]}"; do
        if ! kill -0 "${SERVER_PIDS[i]}" 2>/dev/null; then
            log "${SERVER_NAMES[i]} (pid ${SERVER_PIDS[i]}) is no longer running; last log lines:"
            tail -n 20 "${SERVER_LOGS[i]}" >&2 2>/dev/null || true
            die "${SERVER_NAMES[i]} died during the benchmark ($1); no results written"
        fi
    done
}

# perf_start NAME: when NAME is PERF_TARGET and this is its first run, `perf record -g` on it
PERF_PID=
perf_start() { # NAME [EDGE]: NAME is the run's name (an h2load run's is EDGE-h2), EDGE its edge
    local edge=${2:-$1}
    [[ "$1" == "$PERF_TARGET" && ! -e "$PERF_OUT" && -n "${EDGE_PID_OF[$edge]:-}" ]] || return 0
    perf record -g -F 999 -p "${EDGE_PID_OF[$edge]}" -o "$PERF_OUT" >"$TMP/perf.log" 2>&1 &
    PERF_PID=$!
    log "perf record on $1 (pid ${EDGE_PID_OF[$edge]}) -> $PERF_OUT"
}
perf_stop() {
    [[ -n "$PERF_PID" ]] || return 0
    kill -INT "$PERF_PID" 2>/dev/null || true
    wait "$PERF_PID" 2>/dev/null || true
    PERF_PID=
}

# CPU time per server during each measured run (utime + stime of the process, its threads and
# its child processes: nginx's workers), so that the report can give each one's CPU per request:
# a measure the machine's noise moves much less than requests per second.
CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)
cpu_ticks() { # pid: clock ticks
    local total=0 p stat f
    for p in "$1" $(pgrep -P "$1" 2>/dev/null); do
        stat=$(cat "/proc/$p/stat" 2>/dev/null) || continue
        read -r -a f <<<"${stat##*) }"
        total=$((total + f[11] + f[12]))
    done
    echo "$total"
}
cpu_snapshot() { # out file: "server ticks" per line
    local i
    for i in "${!SERVER_NAMES[@]}"; do echo "${SERVER_NAMES[i]} $(cpu_ticks "${SERVER_PIDS[i]}")"; done >"$1"
}
cpu_start() { cpu_snapshot "$TMP/cpu.before"; }
cpu_stop() { # out file: "server ticks used since cpu_start" per line
    cpu_snapshot "$TMP/cpu.after"
    awk 'NR == FNR { before[$1] = $2; next } { print $1, $2 - before[$1] }' \
        "$TMP/cpu.before" "$TMP/cpu.after" >"$1"
}

# What Redis did during a run of an edge with its state there: `INFO commandstats` before and
# after (commands a script calls are counted apart, and in the script's time too).
redis_stats() { # out name [before]: the snapshot, or (with before) the difference
    [[ $2 == a2a-edge-redis-* || $2 == a2a-edge-base-redis-* || $2 == haproxy-* ]] && ((STATE_REDIS)) || return 0
    redis-cli -p "$REDIS_PORT" INFO commandstats 2>/dev/null | tr -d '\r' |
        sed -nE 's/^cmdstat_([a-z|]+):calls=([0-9]+),usec=([0-9]+),.*/\1 \2 \3/p' >"$1.now" || true
    if [[ -n "${3:-}" ]]; then
        awk 'NR == FNR { c[$1] = $2; u[$1] = $3; next } { print $1, $2 - c[$1], $3 - u[$1] }' \
            "$3" "$1.now" >"$1"
        rm -f "$1.now"
    else
        mv "$1.now" "$1"
    fi
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
run_wrk() { # name url round
    local name=$1 url=$2 round=$3 out="$TMP/wrk.$1.$3.txt"
    # (the conversation shape's requests name its contexts in turn)
    BENCH_CONTEXTS=
    [[ $name != *-conversation ]] || BENCH_CONTEXTS="$TMP/contexts.$name"
    export BENCH_CONTEXTS
    if ((WARMUP > 0)); then
        wrk -t"$THREADS" -c"$CONNECTIONS" -d"${WARMUP}s" --timeout 10s \
            -s "$HERE/sendmessage.lua" "$url" >"$TMP/warmup.txt" 2>&1 || true
    fi
    log "round $round, $name: wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s --latency $url"
    perf_start "$name"
    redis_stats "$TMP/redis-before.txt" "$name"
    cpu_start
    timeout --foreground --kill-after=10 $((DURATION + 60)) \
        wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --timeout 10s --latency \
        -s "$HERE/sendmessage.lua" "$url" >"$out" 2>&1 ||
        log "$name: wrk exited with status $?"
    cpu_stop "$TMP/cpu.$name.$round.txt"
    redis_stats "$TMP/redis.$name.$round.txt" "$name" "$TMP/redis-before.txt"
    perf_stop
    grep -E '^(Requests/sec|  Latency|BENCHJSON)' "$out" | sed 's/^/    /' >&2 || true
    check_servers "after the $name run"
}

# HTTP/2 (h2load): the same request, CONNECTIONS connections with H2_STREAMS streams each,
# against a2a-edge and nginx over TLS + h2, and the upstream over HTTP/1.1 for reference
H2TARGETS=()
for shape in $SHAPES; do
    # (h2load sends one body: every stream would name one context)
    [[ $shape != conversation ]] || continue
    H2TARGETS+=("direct-$shape" "a2a-edge-$shape")
    [[ -z "$BASELINE_BIN" ]] || H2TARGETS+=("a2a-edge-base-$shape")
    H2TARGETS+=("nginx-$shape")
    ((FLOOR)) && H2TARGETS+=("floor-$shape")
done
mapfile -t H2TARGETS < <(only "${H2TARGETS[@]}")
run_h2load() { # name url round
    local name=$1 url=$2 round=$3 extra=()
    [[ $name == direct-* ]] && extra=(--h1)
    log "round $round, $name: h2load -c$CONNECTIONS -m$H2_STREAMS -D$DURATION ${extra[*]}"
    # the CPU count starts when h2load's warm-up ends (its statistics start then too)
    rm -f "$TMP/cpu.before"
    (
        sleep "$WARMUP"
        cpu_start
    ) &
    local cpu_pid=$!
    perf_start "$name-h2" "$name"
    timeout --foreground --kill-after=10 $((DURATION + WARMUP + 60)) \
        h2load -c"$CONNECTIONS" -m"$H2_STREAMS" -t"$THREADS" -D"$DURATION" --warm-up-time="$WARMUP" \
        -d "$BODY" -H 'content-type: application/json' -H 'a2a-version: 1.0' \
        -H "authorization: Bearer $BENCH_TOKEN" "${extra[@]}" "$url" >"$TMP/h2load.$name.$round.txt" 2>&1 ||
        log "$name: h2load exited with status $?"
    perf_stop
    wait "$cpu_pid" 2>/dev/null || true
    [[ ! -s "$TMP/cpu.before" ]] || cpu_stop "$TMP/cpu-h2.$name.$round.txt"
    grep -E '^(finished in|requests:|status codes:)' "$TMP/h2load.$name.$round.txt" | sed 's/^/    /' >&2 || true
    check_servers "after the $name h2load run"
}

for round in $(seq 1 "$ROUNDS"); do
    for t in "${TARGETS[@]}"; do run_wrk "$t" "${URL[$t]}" "$round"; done
    if ((H2LOAD)); then
        for t in "${H2TARGETS[@]}"; do run_h2load "$t" "${URL[$t]}" "$round"; done
    fi
done

# ---- header and tables
wrk_v=$(wrk -v 2>&1 | head -n1 | awk '{print $1, $2}' || true)
nginx_v=$("$NGINX" -v 2>&1 | sed 's/.*version: //' || true)
header=$(bench_header "$wrk_v" "$nginx_v")
settings="$ROUNDS round(s), interleaved: every target in turn, then again; medians over the rounds. wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s (warm-up ${WARMUP}s), HTTP/1.1 keep-alive, $(wc -c <"$BODY")-byte SendMessage body, A2A-Version: 1.0; nginx worker_processes $NGINX_WORKERS, access log $( ((NGINX_ACCESS_LOG)) && echo "on (file)" || echo off) (a2a-edge logs every request to stderr, a file here); all on one machine (the load tools share the cores). Binaries: $binaries"

python3 - "$TMP" "$header" "$settings" "$ROUNDS" "$H2LOAD" "$CONNECTIONS" "$H2_STREAMS" "$DURATION" \
    "$SHAPES" "${TARGETS[*]}" "${H2TARGETS[*]}" "$CLK_TCK" >"$TMP/results.md" <<'EOF'
import json, os, re, statistics, sys

tmp, header, settings, rounds, h2, conns, streams, duration, shapes, targets, h2targets, clk = sys.argv[1:]
clk = int(clk)
rounds = int(rounds)
shapes, targets, h2targets = shapes.split(), targets.split(), h2targets.split()
median = statistics.median

def wrk_runs(name):
    runs = []
    for r in range(1, rounds + 1):
        path = os.path.join(tmp, f"wrk.{name}.{r}.txt")
        text = open(path, errors="replace").read() if os.path.exists(path) else ""
        m = re.search(r"^BENCHJSON (\{.*\})$", text, re.M)
        if m:
            d = json.loads(m.group(1))
            d["rps"] = d["requests"] / (d["duration_us"] / 1e6) if d["duration_us"] else 0.0
            d["errors"] = (d["err_connect"] + d["err_read"] + d["err_write"] + d["err_timeout"]
                           + d["non2xx"] + d["rpc_errors"])
            d["round"] = r
            runs.append(d)
    return runs

def h2_runs(name):
    runs = []
    for r in range(1, rounds + 1):
        path = os.path.join(tmp, f"h2load.{name}.{r}.txt")
        t = open(path, errors="replace").read() if os.path.exists(path) else ""
        fin = re.search(r"finished in [\d.]+s, ([\d.]+) req/s", t)
        req = re.search(r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", t)
        st = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", t)
        lat = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)", t)
        if fin and req and st and lat:
            runs.append(dict(rps=float(fin.group(1)), round=r, requests=int(req.group(3)),
                             errors=int(req.group(4)) + int(req.group(5)) + int(req.group(6))
                             + sum(int(st.group(i)) for i in (2, 3, 4)),
                             mean=lat.group(3), max=lat.group(2)))
    return runs

def cpu_per_request(name, h2=False):
    """{server: CPU µs per request} of the runs of `name` (wrk, or h2load), over its rounds
    (None: not measured)."""
    ticks, requests = {}, 0
    for r in range(1, rounds + 1):
        path = os.path.join(tmp, f"cpu{'-h2' if h2 else ''}.{name}.{r}.txt")
        runs = [d for d in (h2_runs(name) if h2 else wrk_runs(name)) if d.get("round") == r]
        if not os.path.exists(path) or not runs:
            continue
        requests += runs[0]["requests"]
        for line in open(path):
            server, n = line.split()
            ticks[server] = ticks.get(server, 0) + int(n)
    if not requests:
        return None
    return {s: n * 1e6 / clk / requests for s, n in ticks.items()}

def cpu_table(shape, rows, h2):
    """The CPU-per-request table of one shape's runs (wrk, or h2load): each server's CPU time
    during the runs over the requests served. The upstream (the engine, or the static
    upstream's own nginx) is a process of its own, apart from every proxy."""
    cpu = {t: cpu_per_request(t, h2) for t in rows}
    upstream = "static" if shape == "static" else "engine"
    cpu_rows = []
    for t in rows:
        c = cpu.get(t)
        if not c or t.startswith("direct"):
            continue
        if t.startswith("nginx"):
            proxy, up = c.get("nginx"), c.get(upstream)
        else:  # the edge's own process (and, with HA, its second replica)
            proxy, up = sum(v for s, v in c.items() if s == t or s.startswith(t + "-")), c.get(upstream)
        cpu_rows.append((t, proxy, up, c.get("redis-server")))
    if not cpu_rows:
        return []
    ng = next((p for t, p, _, _ in cpu_rows if t == f"nginx-{shape}"), None)
    fmt = lambda v: f"{v:.1f}" if v is not None else "–"
    lines = ["", f"CPU per request ({'HTTP/2' if h2 else 'HTTP/1.1'}): µs of CPU time each server used "
             "during the measured runs (all rounds) per request served; the upstream is a process of "
             "its own (the static one an nginx apart from the one under test).", "",
             "| target | proxy | upstream | redis-server | proxy / nginx's |", "|---|---:|---:|---:|---:|"]
    for t, proxy, up, rs in cpu_rows:
        lines.append(f"| {t.removesuffix('-' + shape)} | {fmt(proxy)} | {fmt(up)} | {fmt(rs)} | "
                     f"{ratio(proxy, ng)} |")
    proto = "HTTP/2 (h2load)" if h2 else "HTTP/1.1 (wrk)"
    for t, proxy, _, _ in cpu_rows:
        if (t.startswith("a2a-edge") or t.startswith("floor")) and proxy and ng:
            summary_cpu.append(f"| {shape} | {proto} | {t.removesuffix('-' + shape)} | {fmt(proxy)} µs | "
                               f"{fmt(ng)} µs | {ratio(proxy, ng)} |")
    return lines

def redis_table(shape, rows):
    """What redis-server did per request served during the Redis edge's runs (INFO
    commandstats): calls and µs per command. A script's own row counts its whole run, the
    commands it calls again in theirs."""
    lines = []
    for t in rows:
        calls, usec, requests = {}, {}, 0
        for r in range(1, rounds + 1):
            path = os.path.join(tmp, f"redis.{t}.{r}.txt")
            runs = [d for d in wrk_runs(t) if d.get("round") == r]
            if not os.path.exists(path) or not runs:
                continue
            requests += runs[0]["requests"]
            for line in open(path):
                cmd, n, us = line.split()
                calls[cmd] = calls.get(cmd, 0) + int(n)
                usec[cmd] = usec.get(cmd, 0) + int(us)
        if not requests or not calls:
            continue
        used = sorted((c for c in calls if calls[c] > 0), key=lambda c: -usec[c])
        scripts = [c for c in used if c in ("evalsha", "eval", "fcall")]
        inner = [c for c in used if c not in scripts]
        lines += ["", f"Redis per request ({t.removesuffix('-' + shape)}, HTTP/1.1): INFO commandstats over "
                  "the measured runs; a script's row is its whole run, the commands it calls are "
                  "counted again in their own rows.", "",
                  "| command | calls per request | µs per request (Redis's own count) |", "|---|---:|---:|"]
        for c in scripts + inner:
            lines.append(f"| {c} | {calls[c] / requests:.2f} | {usec[c] / requests:.1f} |")
        lines.append(f"| every command above but the scripts, summed | {sum(calls[c] for c in inner) / requests:.2f} | "
                     f"{sum(usec[c] for c in inner) / requests:.1f} |")
    return lines

def ms(us):
    return f"{us / 1000:.2f} ms"

def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "–"

out = ["# a2a-edge load benchmark", "", header, "", settings, ""]
summary = []
summary_cpu = []
for shape in shapes:
    rows = [t for t in targets if t.endswith("-" + shape)]
    med = {}
    described = {
        "engine": " (`a2a-edge engine`, the embedded echo agent)",
        "static": " (nginx `return 200` with a fixed 1.3 KB Task)",
        "conversation": " (the engine; every request a follow-up in one of the caller's contexts, "
        "named in turn: a context checked and, with Redis, its busy lease taken and released per request)",
    }
    out += [f"## Upstream: {shape}" + described.get(shape, ""), "",
            "| target | req/s | p50 | p99 | errors | rounds' req/s | vs direct | p99 vs direct |",
            "|---|---:|---:|---:|---:|---|---:|---:|"]
    for t in rows:
        runs = wrk_runs(t)
        if not runs:
            out.append(f"| {t} | – | – | – | run failed | – | – | – |")
            continue
        med[t] = dict(rps=median(r["rps"] for r in runs), p50=median(r["p50_us"] for r in runs),
                      p99=median(r["p99_us"] for r in runs), errors=sum(r["errors"] for r in runs),
                      each=" / ".join(f"{r['rps']:,.0f}" for r in runs))
    base = med.get(f"direct-{shape}")
    for t in rows:
        if t not in med:
            continue
        d = med[t]
        out.append(f"| {t.removesuffix('-' + shape)} | {d['rps']:,.0f} | {ms(d['p50'])} | {ms(d['p99'])} | "
                   f"{d['errors']} | {d['each']} | {ratio(d['rps'], base and base['rps'])} | "
                   f"{ratio(d['p99'], base and base['p99'])} |")
    out += cpu_table(shape, rows, False)
    out += redis_table(shape, rows)
    e, n, rd = med.get(f"a2a-edge-{shape}"), med.get(f"nginx-{shape}"), med.get(f"a2a-edge-redis-{shape}")
    b = med.get(f"a2a-edge-base-{shape}")
    brd = med.get(f"a2a-edge-base-redis-{shape}")
    if rd and brd:
        summary.append(f"| {shape} | HTTP/1.1 (wrk) | A/B: a2a-edge-redis / a2a-edge-base-redis = "
                       f"{ratio(rd['rps'], brd['rps'])} | {ms(rd['p99'])} vs {ms(brd['p99'])} | "
                       f"{ratio(brd['rps'], b['rps']) if b else '–'} (base) |")
    if e and b:
        summary.append(f"| {shape} | HTTP/1.1 (wrk) | A/B: a2a-edge / a2a-edge-base = {ratio(e['rps'], b['rps'])} | "
                       f"{ms(e['p99'])} vs {ms(b['p99'])} | – |")
    if e and n:
        summary.append(f"| {shape} | HTTP/1.1 (wrk) | {ratio(e['rps'], n['rps'])} | "
                       f"{ms(e['p99'])} vs {ms(n['p99'])} | {ratio(rd['rps'], e['rps']) if rd else '–'} |")
    f = med.get(f"floor-{shape}")
    if f and n:
        summary.append(f"| {shape} | HTTP/1.1 (wrk) | the stack's floor: floor / nginx = {ratio(f['rps'], n['rps'])}"
                       f"{f', a2a-edge / floor = ' + ratio(e['rps'], f['rps']) if e else ''} | "
                       f"{ms(f['p99'])} vs {ms(n['p99'])} | – |")
    if h2 == "1" and shape != "conversation":
        h2rows = [t for t in h2targets if t.endswith("-" + shape)]
        hm = {}
        out += ["", f"HTTP/2, upstream {shape}: h2load -c{conns} -m{streams} -D{duration}; a2a-edge and nginx "
                "over TLS + h2, the upstream over HTTP/1.1 (`--h1`) for reference; h2load reports mean "
                "and max latency, not percentiles (errors = failed + errored + timeouts + non-2xx).", "",
                "| target | req/s | mean | max | errors | rounds' req/s | vs direct |", "|---|---:|---:|---:|---:|---|---:|"]
        for t in h2rows:
            runs = h2_runs(t)
            if runs:
                hm[t] = dict(rps=median(r["rps"] for r in runs), errors=sum(r["errors"] for r in runs),
                             mean=runs[-1]["mean"], max=runs[-1]["max"],
                             each=" / ".join(f"{r['rps']:,.0f}" for r in runs))
        hb = hm.get(f"direct-{shape}")
        for t in h2rows:
            if t not in hm:
                out.append(f"| {t} | – | – | – | run failed | – | – |")
                continue
            d = hm[t]
            label = t.removesuffix("-" + shape) + (" (h1)" if t.startswith("direct") else " (h2)")
            out.append(f"| {label} | {d['rps']:,.0f} | {d['mean']} | {d['max']} | {d['errors']} | {d['each']} | "
                       f"{ratio(d['rps'], hb and hb['rps'])} |")
        out += cpu_table(shape, h2rows, True)
        e2, n2 = hm.get(f"a2a-edge-{shape}"), hm.get(f"nginx-{shape}")
        b2 = hm.get(f"a2a-edge-base-{shape}")
        if e2 and b2:
            summary.append(f"| {shape} | HTTP/2 (h2load) | A/B: a2a-edge / a2a-edge-base = {ratio(e2['rps'], b2['rps'])} | "
                           f"mean {e2['mean']} vs {b2['mean']} | – |")
        if e2 and n2:
            summary.append(f"| {shape} | HTTP/2 (h2load) | {ratio(e2['rps'], n2['rps'])} | "
                           f"mean {e2['mean']} vs {n2['mean']} | – |")
        f2 = hm.get(f"floor-{shape}")
        if f2 and n2:
            summary.append(f"| {shape} | HTTP/2 (h2load) | the stack's floor: floor / nginx = {ratio(f2['rps'], n2['rps'])}"
                           f"{f', a2a-edge / floor = ' + ratio(e2['rps'], f2['rps']) if e2 else ''} | "
                           f"mean {f2['mean']} vs {n2['mean']} | – |")
    out.append("")
out += ["## Summary", "", "| upstream | protocol | edge / nginx (req/s) | edge vs nginx latency | redis / memory |",
        "|---|---|---:|---|---:|"] + summary
if summary_cpu:
    out += ["", "| upstream | protocol | edge | its CPU per request | nginx's | edge / nginx |",
            "|---|---|---|---:|---:|---:|"] + summary_cpu
out += ["", "errors = socket errors (connect/read/write/timeout) + non-2xx responses + 2xx bodies "
        "holding a JSON-RPC error, summed over the rounds."]
sys.stdout.write("\n".join(out) + "\n")
EOF
bench_results "$TMP/results.md"
if [[ -n "$PERF_TARGET" && -e "$PERF_OUT" ]]; then
    log "perf data of $PERF_TARGET: $PERF_OUT (perf report -i $PERF_OUT --no-children)"
    TMP_KEEP="kept $TMP (perf data)"
fi
