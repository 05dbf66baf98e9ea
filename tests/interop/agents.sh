#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Interop test: two agents behind one a2a-edge ([[agents]]), discovered by the official Python
# A2A SDK (a2a-sdk 1.3.0) client from their own card URLs (agents_client.py).
#
#   agents_client.py --TLS, Bearer--> a2a-edge  localhost:PORT/agents/tf/  --http--> engine "terraform agent"
#                                               localhost:PORT/agents/ros/ --http--> engine "ros review agent"
#
# Env:
#   A2A_EDGE_BIN   use this binary instead of `cargo build` (debug)
#   READY_TIMEOUT  seconds to wait for the engines and the proxy (default 60)
#   CLIENT_TIMEOUT seconds the Python client may run (default 90)
#   PYTHON         interpreter used to create the venv (default python3)
#   INTEROP_DEBUG  non-empty: client tracebacks; keep the temp dir
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=agents
# shellcheck source=lib.sh
source "$HERE/lib.sh"
VENV=$SDK_VENV # shared with run.sh, card_sign.sh and identity.sh
SDK_SPEC='a2a-sdk==1.3.0'
READY_TIMEOUT=${READY_TIMEOUT:-60}
CLIENT_TIMEOUT=${CLIENT_TIMEOUT:-90}
PYTHON=${PYTHON:-python3}
T_START=$SECONDS

summary() { echo "agents interop: $NPASS passed, $NFAIL failed ($((SECONDS - T_START)) s)"; }

# ---- virtualenv: the shared one (a2a-sdk 1.3.0), with PYJWT_SPEC (lib.sh) added when missing
# (the SDK's card signature verifier needs PyJWT)
jwt_ok() {
    venv_has "$VENV" 'import a2a.client, jwt, cryptography, httpx' a2a-sdk==1.3.0 "${PYJWT_SPEC/\[crypto\]/}"
}
if ! jwt_ok; then
    if venv_has "$VENV" '' a2a-sdk==1.3.0; then
        log "adding $PYJWT_SPEC to $VENV"
        pip_install "$VENV" "$PYJWT_SPEC"
    else
        venv_create "$VENV" "$SDK_SPEC" "$PYJWT_SPEC"
    fi
    jwt_ok || { log "a2a-sdk 1.3.0 with $PYJWT_SPEC not importable after install"; exit 1; }
fi
PY="$VENV/bin/python"
no_proxies

# ---- the binary
edge_bin debug
[[ -x "$BIN" ]] || { log "binary not found or not executable: $BIN"; exit 1; }

# ---- temp dir, processes, cleanup
make_tmp a2a-agents 700
[[ -z "${INTEROP_DEBUG:-}" ]] || TMP_KEEP="INTEROP_DEBUG: kept $TMP"

show_logs() {
    show_tail "$TMP/proxy.log" "proxy log" 40
    show_tail "$TMP/engine-tf.log" "engine tf"
    show_tail "$TMP/engine-ros.log" "engine ros"
}
abort() { # abort CHECK MESSAGE: FAIL CHECK, the logs, the summary, exit 1
    fail "$1: $2"
    show_logs
    summary
    exit 1
}

INTEROP_TOKEN=$(rand_token)
export INTEROP_TOKEN

# ---- 1. two standalone engines (plain HTTP), each with the name its card carries
declare -A ENGINE_NAME=([tf]="terraform agent" [ros]="ros review agent")
declare -A ENGINE_URL=() ENGINE_PID=()
for agent in tf ros; do
    port=$(free_port)
    log "starting engine $agent (${ENGINE_NAME[$agent]}) on 127.0.0.1:$port"
    "$BIN" engine --listen "127.0.0.1:$port" --name "${ENGINE_NAME[$agent]}" >"$TMP/engine-$agent.log" 2>&1 &
    ENGINE_PID[$agent]=$!
    track "${ENGINE_PID[$agent]}"
    line=$(wait_for_line "$TMP/engine-$agent.log" "engine listening on http://127\\.0\\.0\\.1:$port/" \
        "${ENGINE_PID[$agent]}") || abort "engine-start-$agent" "no 'engine listening on' line for 127.0.0.1:$port"
    ENGINE_URL[$agent]=${line#engine listening on }
    pass "engine-start-$agent: ${ENGINE_NAME[$agent]} at ${ENGINE_URL[$agent]}"
done

# ---- 2. the proxy: dev TLS, one bearer principal, an ES256 card key (generated on first start),
# two agents under two path prefixes of localhost, each served by its own engine upstream
{
    policy_head "$TMP/certs" up-tf "${ENGINE_URL[tf]}"
    cat <<EOF

[[upstreams]]
name = "up-ros"
url = "${ENGINE_URL[ros]}"

[[agents]]
name = "tf"
public_url = "https://localhost:0/agents/tf/"
upstreams = ["up-tf"]

[[agents]]
name = "ros"
public_url = "https://localhost:0/agents/ros/"
upstreams = ["up-ros"]

[auth]
[[auth.bearer]]
principal = "interop"
token_env = "INTEROP_TOKEN"

[card]
active_kid = "edge-agents"
[[card.signing_keys]]
kid = "edge-agents"
alg = "ES256"
private_key_file = "$TMP/edge-agents-es256.pem"
generate_if_missing = true
EOF
} >"$TMP/policy.toml"

log "starting $BIN serve"
start_edge "$TMP/policy.toml" "$TMP/ready.json" "$TMP/proxy.log"
PROXY_PID=$EDGE_PID
wait_ready "$PROXY_PID" "$TMP/ready.json" || abort proxy-start "$READY_ERR"
CA="$TMP/certs/ca.pem"
[[ -s "$CA" ]] || abort proxy-start "dev CA $CA missing"
# the agents' public URLs carry port 0: the listener's port, the one in the ready file's
# public_url (https://127.0.0.1:PORT/)
PORT=$("$PY" -c 'import sys, urllib.parse; print(urllib.parse.urlsplit(sys.argv[1]).port or "")' "$READY_URL")
[[ "$PORT" =~ ^[0-9]+$ ]] || abort proxy-start "no port in the ready file's public_url $READY_URL"
pass "proxy-start: ready at $READY_URL, agents at https://localhost:$PORT/agents/{tf,ros}/"

# ---- 3. the SDK client (in the background + wait, so that INT/TERM run the cleanup at once)
status=0
timeout --kill-after=5 "$CLIENT_TIMEOUT" "$PY" -u "$HERE/agents_client.py" --ca "$CA" \
    --catalog "https://localhost:$PORT/.well-known/agents.json" \
    --agent tf "https://localhost:$PORT/agents/tf/" "${ENGINE_NAME[tf]}" \
    --agent ros "https://localhost:$PORT/agents/ros/" "${ENGINE_NAME[ros]}" >"$TMP/client.out" &
CLIENT_PID=$!
track "$CLIENT_PID" 3
wait "$CLIENT_PID" || status=$?
forget "$CLIENT_PID"
cat "$TMP/client.out"
tally agents-client "$status" "$TMP/client.out"

# ---- 4. shutdown: the proxy drains and exits 0, then the engines
sigterm_check "$PROXY_PID" || true
for agent in ros tf; do stop "${ENGINE_PID[$agent]}"; done

# the -32001 for another agent's task came from the edge (its task registry: reason
# TASK_NOT_FOUND in its request log), not only from an engine that never saw the task
denied=$("$PY" - "$TMP/proxy.log" <<'EOF'
import json, sys
seen = set()
for line in open(sys.argv[1], encoding='utf-8', errors='replace'):
    try:
        ev = json.loads(line)
    except ValueError:
        continue
    if isinstance(ev, dict) and ev.get('event') == 'request' and ev.get('method') == 'GetTask' \
            and ev.get('reason') == 'TASK_NOT_FOUND':
        seen.add(ev.get('agent'))
print(' '.join(sorted(a for a in seen if a)))
EOF
) || denied=''
if [[ "$denied" == "ros tf" ]]; then
    pass "edge-task-isolation: the edge itself refused the other agent's task at ros and at tf (TASK_NOT_FOUND)"
else
    fail "edge-task-isolation: GetTask refused by the edge with TASK_NOT_FOUND at agents '$denied', expected 'ros tf'"
fi

summary
if ((NFAIL != 0)); then
    show_logs
    log "agents interop: FAILED"
    exit 1
fi
log "agents interop: all checks passed"
