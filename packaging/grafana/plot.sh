#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Renders the Grafana dashboard (a2a-edge.json) as a PNG from a real run, without Grafana:
#
#   bash packaging/grafana/plot.sh [OUT.png]      # default: packaging/grafana/dashboard.png
#
# It starts the edge (dev TLS, the embedded echo agent, an admin listener on a free port) and a
# real Prometheus (/usr/bin/prometheus, Debian's `prometheus` package) scraping the edge's
# /metrics every second, drives a mix of traffic through the edge for DRIVE_SECONDS (plot.py
# drive: accepted, streamed, refused, unauthenticated, rate-limited and unauthorized requests,
# card GETs, connection churn, with a ramp and a spike), then evaluates the dashboard's own
# PromQL queries with Prometheus's query_range API and plots them in a grid (plot.py plot).
# A picked query that returns no series fails the run. About two minutes; the first run also
# creates packaging/grafana/.venv with matplotlib.
#
# Env:
#   A2A_EDGE_BIN   the a2a-edge binary (default: target/release/a2a-edge; never built here)
#   PROMETHEUS     the prometheus binary (default: prometheus on PATH)
#   DRIVE_SECONDS  how long the traffic runs (default 90)
#   PYTHON         the interpreter that creates the virtualenv (default python3)
#   READY_TIMEOUT  seconds to wait for the edge and for Prometheus (default 60)
#   TMP_KEEP       non-empty: keep the temp dir (policy, logs, TSDB) and say where
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KEEP=${TMP_KEEP:-} # lib.sh resets TMP_KEEP
LOG_TAG=grafana-plot
# shellcheck source=../../tests/interop/lib.sh
source "$HERE/../../tests/interop/lib.sh"

OUT=${1:-$HERE/dashboard.png}
[[ "$OUT" == /* ]] || OUT="$PWD/$OUT"
DRIVE_SECONDS=${DRIVE_SECONDS:-90}
READY_TIMEOUT=${READY_TIMEOUT:-60}
require_uints DRIVE_SECONDS READY_TIMEOUT
((DRIVE_SECONDS >= 20)) || die "DRIVE_SECONDS must be at least 20 (got $DRIVE_SECONDS)"
JOB=a2a-edge # the job name the README and the alerts use
no_proxies

# ---- the binaries
BIN=${A2A_EDGE_BIN:-$ROOT/target/release/a2a-edge}
[[ -x "$BIN" ]] || die "a2a-edge binary not found or not executable: $BIN (build it: cargo build --release; or set A2A_EDGE_BIN)"
PROM=${PROMETHEUS:-$(command -v prometheus || true)}
[[ -n "$PROM" && -x "$PROM" ]] || die "prometheus not found (apt-get install prometheus; or set PROMETHEUS)"

# ---- the virtualenv with matplotlib (reused when it has the pinned version)
VENV="$HERE/.venv"
MPL_SPEC='matplotlib==3.10.9'
mpl_ok() { venv_has "$VENV" 'import matplotlib' "$MPL_SPEC"; }
ensure_venv mpl_ok "$VENV" "$MPL_SPEC" || die "matplotlib not importable in $VENV after install"
PY="$VENV/bin/python"

# ---- temp dir; on exit every process started here is stopped and the dir removed
make_tmp a2a-grafana-plot 0700
[[ -z "$KEEP" ]] || TMP_KEEP="kept $TMP (policy, logs, Prometheus TSDB)"
mkdir -p "$TMP/certs" "$TMP/tsdb"

# ---- the edge's policy. Principals: load (the steady traffic; its own high rate), bursty (the
# default per-principal rate, which its bursts exceed: rate.principal), reader (may only read:
# its SendMessage is authz.method). The failure throttle and the client-address rate are raised
# so that the wrong and missing credentials stay 401 and only the bursts get 429.
PLOT_TOKEN_LOAD=$(rand_token)
PLOT_TOKEN_BURSTY=$(rand_token)
PLOT_TOKEN_READER=$(rand_token)
export PLOT_TOKEN_LOAD PLOT_TOKEN_BURSTY PLOT_TOKEN_READER
{
    policy_head "$TMP/certs" engine embedded 127.0.0.1:0 https://127.0.0.1:0/ \
        'admin_listen = "127.0.0.1:0"' 'drain_timeout_ms = 2000'
    cat <<'EOF'

[auth]
failures_per_minute = 60000
failures_burst = 10000
[[auth.bearer]]
principal = "load"
token_env = "PLOT_TOKEN_LOAD"
[[auth.bearer]]
principal = "bursty"
token_env = "PLOT_TOKEN_BURSTY"
[[auth.bearer]]
principal = "reader"
token_env = "PLOT_TOKEN_READER"

[authz]
default = "deny"
[[authz.rules]]
name = "everything"
principals = ["load", "bursty"]
methods = ["*"]
[[authz.rules]]
name = "read-only"
principals = ["reader"]
methods = ["read"]

[limits]
client_ip_requests_per_second = 5000
client_ip_burst = 10000
requests_per_second = 10
burst = 20
header_read_timeout_ms = 2000
[limits.principals]
load = { requests_per_second = 2000, burst = 4000 }
EOF
} >"$TMP/policy.toml"
"$BIN" check --policy "$TMP/policy.toml" >"$TMP/check.out" 2>&1 || {
    cat "$TMP/check.out" >&2
    die "a2a-edge check refused the policy"
}

# ---- the edge
log "starting $BIN serve"
start_edge "$TMP/policy.toml" "$TMP/ready.json" "$TMP/edge.log" \
    PLOT_TOKEN_LOAD="$PLOT_TOKEN_LOAD" PLOT_TOKEN_BURSTY="$PLOT_TOKEN_BURSTY" PLOT_TOKEN_READER="$PLOT_TOKEN_READER"
if ! wait_ready "$EDGE_PID" "$TMP/ready.json"; then
    show_tail "$TMP/edge.log" "edge log" 40
    die "a2a-edge $READY_ERR"
fi
ADMIN=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["admin"])' "$TMP/ready.json") ||
    die "no admin address in the ready file: $(cat "$TMP/ready.json")"
CA="$TMP/certs/ca.pem"
[[ -s "$CA" ]] || die "dev CA $CA missing"
log "edge ready: $READY_URL, admin http://$ADMIN/"

# ---- Prometheus, scraping the admin listener every second
PROM_PORT=$(free_port)
PROM_URL="http://127.0.0.1:$PROM_PORT"
cat >"$TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: $JOB
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: ["$ADMIN"]
EOF
log "starting $PROM on 127.0.0.1:$PROM_PORT"
"$PROM" --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/tsdb" \
    --web.listen-address="127.0.0.1:$PROM_PORT" >"$TMP/prometheus.log" 2>&1 &
PROM_PID=$!
track "$PROM_PID"

# ---- traffic, then the plot (each in the background, so that a signal ends the script at once)
run_py() {
    "$PY" -u "$HERE/plot.py" "$@" &
    local pid=$! status=0
    track "$pid"
    wait "$pid" || status=$?
    forget "$pid"
    return "$status"
}
START=$SECONDS
log "driving traffic for ${DRIVE_SECONDS}s"
if ! run_py drive --url "$READY_URL" --ca "$CA" --prometheus "$PROM_URL" --job "$JOB" \
    --seconds "$DRIVE_SECONDS" --ready-timeout "$READY_TIMEOUT" --window "$TMP/window.json"; then
    show_tail "$TMP/prometheus.log" "prometheus log" 20
    show_tail "$TMP/edge.log" "edge log" 20
    die "the traffic driver failed"
fi
log "plotting the dashboard's queries"
if ! run_py plot --dashboard "$HERE/a2a-edge.json" --prometheus "$PROM_URL" --job "$JOB" \
    --window "$TMP/window.json" --out "$OUT"; then
    show_tail "$TMP/prometheus.log" "prometheus log" 20
    die "the plot failed"
fi
log "done in $((SECONDS - START))s of traffic and plotting"
echo "dashboard written to $OUT"
