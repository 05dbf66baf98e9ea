#!/usr/bin/env bash
# The load benchmark's floor (floor.rs, cargo example floor-proxy) still does what its
# numbers claim, checked in CI in a few seconds: in front of `a2a-edge engine` it forwards an
# authorized SendMessage over HTTP/1.1 and over HTTP/2 (the engine's answer comes back), and
# refuses a missing or wrong bearer token with 401 before anything reaches the engine.
#
#   bash benches/load/floor-smoke.sh
#
# Env: A2A_EDGE_BIN (default: cargo build), FLOOR_BIN (default: cargo build --example
# floor-proxy, debug).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=floor-smoke
# shellcheck source=../../tests/interop/lib.sh
source "$HERE/../../tests/interop/lib.sh"

edge_bin debug
if [[ -z "${FLOOR_BIN:-}" ]]; then
    log "cargo build --example floor-proxy"
    (cd "$ROOT" && cargo build --quiet --example floor-proxy) || exit
    FLOOR_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/examples/floor-proxy"
fi
command -v openssl >/dev/null 2>&1 || die "openssl is needed (a certificate for the floor)"
make_tmp a2a-floor-smoke

"$BIN" engine --listen 127.0.0.1:0 >"$TMP/engine.log" 2>&1 &
track $!
ENGINE_URL=$(wait_for_line "$TMP/engine.log" 'engine listening on http://127\.0\.0\.1:[0-9]+/' "${PIDS[-1]}") ||
    die "engine did not print 'engine listening on http://127.0.0.1:PORT/'"
ENGINE_URL=${ENGINE_URL#engine listening on }

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$TMP/key.pem" -out "$TMP/cert.pem" 2>/dev/null ||
    die "openssl could not make a certificate"
BENCH_TOKEN=$(rand_token)
export BENCH_TOKEN
"$FLOOR_BIN" --upstream "$ENGINE_URL" --cert "$TMP/cert.pem" --key "$TMP/key.pem" \
    --ready-file "$TMP/ready.json" >"$TMP/floor.log" 2>&1 &
track $!
wait_ready "$!" "$TMP/ready.json" || { cat "$TMP/floor.log" >&2; die "floor-proxy: $READY_ERR"; }
log "floor-proxy at $READY_URL in front of $ENGINE_URL"

# send NAME EXPECTED_STATUS CURL-ARGS...: one SendMessage as the benchmark sends it
send() {
    local name=$1 want=$2 got
    shift 2
    got=$(curl -sS -o "$TMP/body.$name" -w '%{http_code} HTTP/%{http_version}' --max-time 10 \
        --cacert "$TMP/cert.pem" -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' \
        --data-binary @"$HERE/sendmessage.json" "$@" "$READY_URL") || got="curl failed"
    [[ $got == "$want" ]] || die "$name: expected $want, got $got: $(head -c 300 "$TMP/body.$name")"
    log "$name: $got"
}

# tasks: how many tasks the engine holds (asked directly): what reached it
tasks() {
    curl -sS --max-time 10 -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' \
        -d '{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}' "$ENGINE_URL" |
        "${PY:-python3}" -c 'import json, sys; print(len(json.load(sys.stdin)["result"]["tasks"]))'
}

send h1 "200 HTTP/1.1" --http1.1 -H "Authorization: Bearer $BENCH_TOKEN"
grep -q '"result"' "$TMP/body.h1" || die "h1: no JSON-RPC result: $(head -c 300 "$TMP/body.h1")"
send h2 "200 HTTP/2" --http2 -H "Authorization: Bearer $BENCH_TOKEN"
grep -q '"result"' "$TMP/body.h2" || die "h2: no JSON-RPC result: $(head -c 300 "$TMP/body.h2")"
n=$(tasks)
((n == 2)) || die "the engine holds $n tasks after two forwarded SendMessages, not 2"
# Refused: nothing reaches the engine.
send no-token "401 HTTP/1.1" --http1.1
send wrong-token "401 HTTP/2" --http2 -H "Authorization: Bearer x$BENCH_TOKEN"
send token-prefix "401 HTTP/1.1" --http1.1 -H "Authorization: Bearer ${BENCH_TOKEN:0:10}"
n=$(tasks)
((n == 2)) || die "a refused request reached the engine: it holds $n tasks, not 2"
log "ok"
