#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Load benchmark: wrk (HTTP/1.1 keep-alive, ~1 KB SendMessage) against
#   direct   plain HTTP to `a2a-edge engine` (the embedded echo agent)
#   a2a-edge TLS + bearer auth, proxying to that engine over HTTP
#   nginx    TLS termination + proxy_pass (upstream keepalive) to that engine
# and prints a Markdown table (also written to benches/load/results.md).
#
# Env:
#   DURATION     seconds per measured run (default 15)
#   CONNECTIONS  wrk connections (default 32)
#   THREADS      wrk threads (default 2)
#   WARMUP       seconds of unmeasured warm-up per target (default 2; 0 = none)
#   H2LOAD       1 (default): also measure HTTP/2 with h2load (nghttp2-client); 0: skip
#   H2_STREAMS   h2load concurrent streams per connection (default 8)
#   STATE_REDIS  1 (default): also a2a-edge with `[state] backend = "redis"` (a local
#                redis-server: the rates are then one Redis round trip each); 0: skip
#   HA           1: also two such replicas (one Redis) behind haproxy in TCP mode, wrk
#                against haproxy (needs STATE_REDIS=1; haproxy installed when missing);
#                0 (default): skip
#   A2A_EDGE_BIN use this binary instead of `cargo build --release`
#   NGINX_WORKERS nginx worker_processes (default: nproc)
#   NGINX_ACCESS_LOG 1 (default): nginx logs every request to a file, as
#                a2a-edge does (one JSON line per request on stderr); 0: off
#   RESULTS      output file (default benches/load/results.md)
#   READY_TIMEOUT seconds to wait for each server to come up (default 60)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=bench
# shellcheck source=../../tests/interop/lib.sh
source "$HERE/../../tests/interop/lib.sh"
DURATION=${DURATION:-15}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-2}
WARMUP=${WARMUP:-2}
NGINX_WORKERS=${NGINX_WORKERS:-$(nproc)}
NGINX_ACCESS_LOG=${NGINX_ACCESS_LOG:-1}
H2LOAD=${H2LOAD:-1}
H2_STREAMS=${H2_STREAMS:-8}
STATE_REDIS=${STATE_REDIS:-1}
HA=${HA:-0}
RESULTS=${RESULTS:-$HERE/results.md}
READY_TIMEOUT=${READY_TIMEOUT:-60}

require_uints DURATION CONNECTIONS THREADS WARMUP NGINX_WORKERS NGINX_ACCESS_LOG READY_TIMEOUT H2LOAD H2_STREAMS STATE_REDIS HA
((HA == 0 || STATE_REDIS)) || die "HA=1 needs STATE_REDIS=1 (the replicas share Redis)"
((DURATION > 0 && CONNECTIONS > 0 && THREADS > 0)) || die "DURATION, CONNECTIONS, THREADS must be > 0"
((CONNECTIONS >= THREADS)) || die "CONNECTIONS must be >= THREADS"

# ---- tools
need_apt=()
command -v nginx >/dev/null 2>&1 || [[ -x /usr/sbin/nginx ]] || need_apt+=(nginx)
command -v wrk >/dev/null 2>&1 || need_apt+=(wrk)
((H2LOAD)) && { command -v h2load >/dev/null 2>&1 || need_apt+=(nghttp2-client); }
((STATE_REDIS)) && { command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server); }
((HA)) && { command -v haproxy >/dev/null 2>&1 || need_apt+=(haproxy); }
apt_install "${need_apt[@]}"
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
command -v python3 >/dev/null 2>&1 || die "python3 is needed (port picking, parsing)"
command -v curl >/dev/null 2>&1 || die "curl is needed (smoke requests)"

# ---- binary
edge_bin release
[[ -x "$BIN" ]] || die "binary not found or not executable: $BIN"

# ---- temp dir and cleanup
make_tmp a2a-bench 711 # nginx workers (nobody when run as root) may traverse it

# wait_for_line FILE REGEX PID -> prints first capture group
wait_for_line() {
    local file=$1 re=$2 pid=$3 deadline=$((SECONDS + READY_TIMEOUT)) line
    while ((SECONDS < deadline)); do
        if line=$(grep -m1 -oE "$re" "$file" 2>/dev/null); then
            echo "$line"
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || { log "process $pid exited; log:"; tail -n 30 "$file" >&2; return 1; }
        sleep 0.1
    done
    log "timed out after ${READY_TIMEOUT}s waiting for /$re/ in $file:"
    tail -n 30 "$file" >&2
    return 1
}

# smoke FILE CURL-ARGS...: one request like wrk's, must be HTTP 200 with a result
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

BENCH_TOKEN=$(rand_token)
export BENCH_TOKEN
BODY="$HERE/sendmessage.json" # the body wrk sends (read by sendmessage.lua)
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$BODY" || die "$BODY is not valid JSON"

# ---- (a) engine, plain HTTP
log "starting engine"
"$BIN" engine --listen 127.0.0.1:0 >"$TMP/engine.log" 2>&1 &
track $!
ENGINE_URL=$(wait_for_line "$TMP/engine.log" 'engine listening on http://127\.0\.0\.1:[0-9]+/' "${PIDS[-1]}") ||
    die "engine did not print 'engine listening on http://127.0.0.1:PORT/'"
ENGINE_URL=${ENGINE_URL#engine listening on }
ENGINE_PORT=${ENGINE_URL##*:}
ENGINE_PORT=${ENGINE_PORT%/}
log "engine at $ENGINE_URL"

# ---- (b) a2a-edge in front of the engine
mkdir -p "$TMP/edge"
{
    policy_head "$TMP/edge/certs" engine "$ENGINE_URL"
    cat <<EOF

[auth]
[[auth.bearer]]
principal = "bench"
token_env = "BENCH_TOKEN"

# The benchmark measures the proxy's work, not its rate limits (wrk is one client, one
# principal): limits far above what the load can reach.
[limits]
requests_per_second = 1000000
burst = 1000000
client_ip_requests_per_second = 1000000
client_ip_burst = 1000000
max_in_flight_per_principal = 100000
EOF
} >"$TMP/edge/policy.toml"
log "starting a2a-edge serve"
start_edge "$TMP/edge/policy.toml" "$TMP/edge/ready.json" "$TMP/edge/proxy.log"
bench_wait_edge "$EDGE_PID" "$TMP/edge"
EDGE_URL=$READY_URL
CERTS="$TMP/edge/certs"
for f in ca.pem server.pem server.key; do
    [[ -s "$CERTS/$f" ]] || die "dev cert file $CERTS/$f missing"
done
log "a2a-edge at $EDGE_URL"

# ---- (c) nginx with the same certificate
NGX="$TMP/nginx"
mkdir -p "$NGX/tmp"
NGINX_PORT=$(free_port)
if ((NGINX_ACCESS_LOG)); then
    access_log="access_log $NGX/access.log combined;"
else
    access_log="access_log off;"
fi
sed -e "s|@PREFIX@|$NGX|g" -e "s|@WORKERS@|$NGINX_WORKERS|g" -e "s|@ACCESS_LOG@|$access_log|g" \
    -e "s|@ENGINE_PORT@|$ENGINE_PORT|g" -e "s|@NGINX_PORT@|$NGINX_PORT|g" \
    -e "s|@CERT@|$CERTS/server.pem|g" -e "s|@KEY@|$CERTS/server.key|g" \
    "$HERE/nginx.conf.tmpl" >"$NGX/nginx.conf"
"$NGINX" -t -q -p "$NGX" -e "$NGX/error.log" -c "$NGX/nginx.conf" ||
    { cat "$NGX/error.log" >&2 2>/dev/null; die "nginx config test failed"; }
log "starting nginx on 127.0.0.1:$NGINX_PORT"
"$NGINX" -p "$NGX" -e "$NGX/error.log" -c "$NGX/nginx.conf" >"$NGX/stdout.log" 2>&1 &
track $!
NGINX_URL="https://127.0.0.1:$NGINX_PORT/"
ok=
for _ in $(seq 1 $((READY_TIMEOUT * 10))); do
    kill -0 "${PIDS[-1]}" 2>/dev/null || { cat "$NGX/error.log" >&2 2>/dev/null; die "nginx exited early"; }
    if curl -s -o /dev/null --max-time 2 --cacert "$CERTS/ca.pem" "$NGINX_URL"health 2>/dev/null; then
        ok=1
        break
    fi
    sleep 0.1
done
[[ -n "$ok" ]] || die "nginx not answering on $NGINX_URL"

# ---- (d) a2a-edge with the state in a local redis-server
if ((STATE_REDIS)); then
    REDIS_PORT=$(free_port)
    mkdir -p "$TMP/redis" "$TMP/edge-redis"
    redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
        --dir "$TMP/redis" >"$TMP/redis/redis.log" 2>&1 &
    track $!
    for _ in $(seq 1 100); do
        python3 -c 'import socket,sys; s=socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1); s.sendall(b"PING\r\n"); sys.exit(0 if s.recv(7) == b"+PONG\r\n" else 1)' \
            "$REDIS_PORT" 2>/dev/null && break
        sleep 0.1
    done
    {
        cat "$TMP/edge/policy.toml"
        printf '\n[state]\nbackend = "redis"\nredis_url = "redis://127.0.0.1:%s/0"\npage_token_secret_env = "BENCH_PAGE_SECRET"\n' "$REDIS_PORT"
    } >"$TMP/edge-redis/policy.toml"
    log "starting a2a-edge serve (state in redis on 127.0.0.1:$REDIS_PORT)"
    PAGE_SECRET=$(head -c 24 /dev/urandom | base64)
    start_edge "$TMP/edge-redis/policy.toml" "$TMP/edge-redis/ready.json" "$TMP/edge-redis/proxy.log" \
        "BENCH_PAGE_SECRET=$PAGE_SECRET"
    bench_wait_edge "$EDGE_PID" "$TMP/edge-redis"
    EDGE_REDIS_URL=$READY_URL
    EDGE_REDIS_PID=$EDGE_PID
    log "a2a-edge (redis) at $EDGE_REDIS_URL"
fi

# ---- (e) a second such replica, and haproxy (TCP) in front of both
if ((HA)); then
    mkdir -p "$TMP/edge-redis-2" "$TMP/haproxy"
    log "starting a second a2a-edge replica (the same policy and Redis)"
    start_edge "$TMP/edge-redis/policy.toml" "$TMP/edge-redis-2/ready.json" "$TMP/edge-redis-2/proxy.log" \
        "BENCH_PAGE_SECRET=$PAGE_SECRET"
    bench_wait_edge "$EDGE_PID" "$TMP/edge-redis-2"
    EDGE2_URL=$READY_URL
    port_of() { local p=${1##*:}; echo "${p%/}"; }
    HA_PORT=$(free_port)
    sed -e "s|@HA_PORT@|$HA_PORT|g" -e "s|@EDGE1_PORT@|$(port_of "$EDGE_REDIS_URL")|g" \
        -e "s|@EDGE2_PORT@|$(port_of "$EDGE2_URL")|g" "$HERE/haproxy.cfg.tmpl" >"$TMP/haproxy/haproxy.cfg"
    haproxy -c -q -f "$TMP/haproxy/haproxy.cfg" || die "haproxy config check failed"
    haproxy -db -f "$TMP/haproxy/haproxy.cfg" >"$TMP/haproxy/haproxy.log" 2>&1 &
    track $!
    HA_URL="https://127.0.0.1:$HA_PORT/"
    ok=
    for _ in $(seq 1 100); do
        kill -0 "${PIDS[-1]}" 2>/dev/null || { cat "$TMP/haproxy/haproxy.log" >&2; die "haproxy exited early"; }
        if curl -s -o /dev/null --max-time 2 --cacert "$CERTS/ca.pem" "${HA_URL}health"; then
            ok=1
            break
        fi
        sleep 0.1
    done
    [[ -n "$ok" ]] || { cat "$TMP/haproxy/haproxy.log" >&2; die "haproxy not answering on $HA_URL"; }
    log "haproxy at $HA_URL (replicas $EDGE_REDIS_URL, $EDGE2_URL)"
fi

# ---- smoke: every target answers the benchmark request correctly
smoke direct "$ENGINE_URL"
smoke a2a-edge --cacert "$CERTS/ca.pem" "$EDGE_URL"
smoke nginx --cacert "$CERTS/ca.pem" "$NGINX_URL"
((STATE_REDIS)) && smoke a2a-edge-redis --cacert "$CERTS/ca.pem" "$EDGE_REDIS_URL"
((HA)) && smoke haproxy-2-replicas --cacert "$CERTS/ca.pem" "$HA_URL"

# ---- measure
# names and logs of the servers, to check after every run that none died
# (a crash under load, or a Ctrl-C that wrk survived but the servers did not)
SERVER_NAMES=(engine a2a-edge nginx)
SERVER_LOGS=("$TMP/engine.log" "$TMP/edge/proxy.log" "$NGX/error.log")
if ((STATE_REDIS)); then
    SERVER_NAMES+=(redis-server a2a-edge-redis)
    SERVER_LOGS+=("$TMP/redis/redis.log" "$TMP/edge-redis/proxy.log")
fi
if ((HA)); then
    SERVER_NAMES+=(a2a-edge-redis-2 haproxy)
    SERVER_LOGS+=("$TMP/edge-redis-2/proxy.log" "$TMP/haproxy/haproxy.log")
fi
check_servers() {
    local i
    for i in "${!SERVER_NAMES[@]}"; do
        if ! kill -0 "${PIDS[i]}" 2>/dev/null; then
            log "${SERVER_NAMES[i]} (pid ${PIDS[i]}) is no longer running; last log lines:"
            tail -n 20 "${SERVER_LOGS[i]}" >&2 2>/dev/null || true
            die "${SERVER_NAMES[i]} died during the benchmark ($1); no results written"
        fi
    done
}
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
declare -A OUT
run_wrk() { # name url
    local name=$1 url=$2
    if ((WARMUP > 0)); then
        log "$name: warm-up ${WARMUP}s"
        wrk -t"$THREADS" -c"$CONNECTIONS" -d"${WARMUP}s" --timeout 10s \
            -s "$HERE/sendmessage.lua" "$url" >"$TMP/warmup.$name.txt" 2>&1 || true
    fi
    log "$name: wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s --latency $url"
    timeout --foreground --kill-after=10 $((DURATION + 60)) \
        wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --timeout 10s --latency \
        -s "$HERE/sendmessage.lua" "$url" >"$TMP/wrk.$name.txt" 2>&1 ||
        log "$name: wrk exited with status $?"
    sed 's/^/    /' "$TMP/wrk.$name.txt" >&2
    OUT[$name]="$TMP/wrk.$name.txt"
    check_servers "after the $name run"
}
run_wrk direct "$ENGINE_URL"
run_wrk a2a-edge "$EDGE_URL"
run_wrk nginx "$NGINX_URL"
((STATE_REDIS)) && run_wrk a2a-edge-redis "$EDGE_REDIS_URL"
((HA)) && run_wrk haproxy-2-replicas "$HA_URL"

# ---- HTTP/2 (h2load): the same request, CONNECTIONS connections with H2_STREAMS streams each,
# against a2a-edge and nginx over TLS + h2, and the engine over HTTP/1.1 for reference
declare -A H2OUT
run_h2load() { # name url [extra h2load args]
    local name=$1 url=$2
    shift 2
    log "$name: h2load -c$CONNECTIONS -m$H2_STREAMS -D$DURATION $*"
    timeout --foreground --kill-after=10 $((DURATION + WARMUP + 60)) \
        h2load -c"$CONNECTIONS" -m"$H2_STREAMS" -t"$THREADS" -D"$DURATION" --warm-up-time="$WARMUP" \
        -d "$BODY" -H 'content-type: application/json' -H 'a2a-version: 1.0' \
        -H "authorization: Bearer $BENCH_TOKEN" "$@" "$url" >"$TMP/h2load.$name.txt" 2>&1 ||
        log "$name: h2load exited with status $?"
    sed 's/^/    /' "$TMP/h2load.$name.txt" >&2
    H2OUT[$name]="$TMP/h2load.$name.txt"
    check_servers "after the $name h2load run"
}
if ((H2LOAD)); then
    run_h2load direct-h1 "$ENGINE_URL" --h1
    run_h2load a2a-edge-h2 "$EDGE_URL"
    run_h2load nginx-h2 "$NGINX_URL"
fi

# ---- header and table
wrk_v=$(wrk -v 2>&1 | head -n1 | awk '{print $1, $2}' || true)
nginx_v=$("$NGINX" -v 2>&1 | sed 's/.*version: //' || true)
header=$(bench_header "$wrk_v" "$nginx_v")
settings="wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s (warm-up ${WARMUP}s), HTTP/1.1 keep-alive, $(wc -c <"$BODY")-byte SendMessage body, A2A-Version: 1.0; nginx worker_processes $NGINX_WORKERS, access log $( ((NGINX_ACCESS_LOG)) && echo "on (file)" || echo off) (a2a-edge logs every request to stderr, a file here); all on one machine (wrk shares the cores)"

redis_row=()
((STATE_REDIS)) && redis_row=(a2a-edge-redis "${OUT[a2a-edge-redis]}")
((HA)) && redis_row+=(haproxy-2-replicas "${OUT[haproxy-2-replicas]}")
python3 - "$header" "$settings" \
    direct "${OUT[direct]}" a2a-edge "${OUT[a2a-edge]}" nginx "${OUT[nginx]}" "${redis_row[@]}" >"$TMP/results.md" <<'EOF'
import json, re, sys

header, settings = sys.argv[1:3]
rows = []
args = sys.argv[3:]
for name, path in zip(args[0::2], args[1::2]):
    text = open(path, errors="replace").read()
    m = re.search(r"^BENCHJSON (\{.*\})$", text, re.M)
    if not m:
        rows.append((name, None, text.strip().splitlines()[-1:] or ["no output"]))
        continue
    rows.append((name, json.loads(m.group(1)), None))

def ms(us):
    return f"{us / 1000:.2f} ms"

base = next((d for n, d, _ in rows if n == "direct" and d and d["requests"]), None)
lines = [
    f"# a2a-edge load benchmark",
    "",
    header,
    "",
    settings,
    "",
    "| target | req/s | p50 | p99 | errors | req/s ratio vs direct | p99 ratio vs direct |",
    "|---|---:|---:|---:|---:|---:|---:|",
]
for name, d, err in rows:
    if d is None:
        lines.append(f"| {name} | – | – | – | run failed: {err[0][:60]} | – | – |")
        continue
    rps = d["requests"] / (d["duration_us"] / 1e6) if d["duration_us"] else 0.0
    sock = d["err_connect"] + d["err_read"] + d["err_write"] + d["err_timeout"]
    errs = sock + d["non2xx"] + d["rpc_errors"]
    detail = []
    if sock:
        detail.append(f"socket {sock}")
    if d["non2xx"]:
        detail.append(f"non-2xx {d['non2xx']}")
    if d["rpc_errors"]:
        detail.append(f"JSON-RPC error {d['rpc_errors']}")
    errs_s = f"{errs}" + (f" ({', '.join(detail)})" if detail else "")
    if base:
        brps = base["requests"] / (base["duration_us"] / 1e6)
        r_rps = f"{rps / brps:.2f}" if brps else "–"
        r_p99 = f"{d['p99_us'] / base['p99_us']:.2f}" if base["p99_us"] else "–"
    else:
        r_rps = r_p99 = "–"
    lines.append(
        f"| {name} | {rps:,.0f} | {ms(d['p50_us'])} | {ms(d['p99_us'])} | {errs_s} | {r_rps} | {r_p99} |"
    )
lines.append("")
lines.append("errors = socket errors (connect/read/write/timeout) + non-2xx responses + 2xx bodies holding a JSON-RPC error.")
sys.stdout.write("\n".join(lines) + "\n")
EOF
if ((H2LOAD)); then
    python3 - "$CONNECTIONS" "$H2_STREAMS" "$DURATION" \
        direct-h1 "${H2OUT[direct-h1]}" a2a-edge-h2 "${H2OUT[a2a-edge-h2]}" nginx-h2 "${H2OUT[nginx-h2]}" \
        >>"$TMP/results.md" <<'EOF'
import re, sys

conns, streams, duration = sys.argv[1:4]
args = sys.argv[4:]
rows = []
for name, path in zip(args[0::2], args[1::2]):
    t = open(path, errors="replace").read()
    fin = re.search(r"finished in [\d.]+s, ([\d.]+) req/s", t)
    req = re.search(r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", t)
    st = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", t)
    lat = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)", t)
    if not (fin and req and st and lat):
        rows.append((name, None))
        continue
    rows.append((name, dict(rps=float(fin.group(1)), done=int(req.group(2)),
                            failed=int(req.group(4)) + int(req.group(5)) + int(req.group(6)),
                            non2xx=sum(int(st.group(i)) for i in (2, 3, 4)),
                            max=lat.group(2), mean=lat.group(3))))
base = next((d for n, d in rows if n == "direct-h1" and d), None)
out = ["", f"HTTP/2: h2load -c{conns} -m{streams} -D{duration} (warm-up as above), the same request; "
       f"a2a-edge and nginx over TLS + h2, the engine over HTTP/1.1 (`--h1`, {conns} connections, "
       "one request in flight on each) for reference. h2load reports mean and max latency, not "
       "percentiles, and does not read the bodies (errors = failed + errored + timeouts + non-2xx).",
       "", "| target | req/s | mean | max | errors | req/s ratio vs direct |", "|---|---:|---:|---:|---:|---:|"]
for name, d in rows:
    if d is None:
        out.append(f"| {name} | – | – | – | run failed | – |")
        continue
    errs = d["failed"] + d["non2xx"]
    ratio = f"{d['rps'] / base['rps']:.2f}" if base and base["rps"] else "–"
    out.append(f"| {name} | {d['rps']:,.0f} | {d['mean']} | {d['max']} | {errs} | {ratio} |")
sys.stdout.write("\n".join(out) + "\n")
EOF
fi
bench_results "$TMP/results.md"
