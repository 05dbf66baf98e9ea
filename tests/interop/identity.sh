#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Interop test: a2a-edge's identity assertion ([auth.identity_assertion]), verified the way an
# agent would, with PyJWT and the edge's /.well-known/jwks.json (verify_identity.py).
#
#   identity_client.py --TLS, Bearer ANA|BEN|CAROL|RITA--> a2a-edge --http, X-A2A-Edge-Identity--> recording_agent.py
#
# Env:
#   A2A_EDGE_BIN    use this binary instead of `cargo build` (debug)
#   READY_TIMEOUT   seconds to wait for the proxy's ready file (default 60)
#   CLIENT_TIMEOUT  seconds the Python client may run (default 60)
#   PYTHON          interpreter used to create the venv (default python3)
#   INTEROP_DEBUG   non-empty: client tracebacks; keep the temp dir
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=identity
# shellcheck source=lib.sh
source "$HERE/lib.sh"
VENV=$SDK_VENV # shared with run.sh and card_sign.sh
SDK_SPEC='a2a-sdk==1.3.0'
READY_TIMEOUT=${READY_TIMEOUT:-60}
CLIENT_TIMEOUT=${CLIENT_TIMEOUT:-60}
PYTHON=${PYTHON:-python3}
AGENT=agent-1
KID=edge-id
TTL=2
T_START=$SECONDS

summary() { echo "identity interop: $NPASS passed, $NFAIL failed ($((SECONDS - T_START)) s)"; }

# ---- virtualenv: the shared one (a2a-sdk 1.3.0), with PYJWT_SPEC (lib.sh) added when missing
jwt_ok() {
    venv_has "$VENV" 'import jwt, cryptography, httpx' "${PYJWT_SPEC/\[crypto\]/}"
}
if ! jwt_ok; then
    if venv_has "$VENV" '' a2a-sdk==1.3.0; then
        log "adding $PYJWT_SPEC to $VENV"
        pip_install "$VENV" "$PYJWT_SPEC"
    else
        venv_create "$VENV" "$SDK_SPEC" "$PYJWT_SPEC"
    fi
    jwt_ok || { log "$PYJWT_SPEC not importable after install"; exit 1; }
fi
PY="$VENV/bin/python"
no_proxies

# ---- the binary
edge_bin debug
[[ -x "$BIN" ]] || { log "binary not found or not executable: $BIN"; exit 1; }

# ---- temp dir, processes, cleanup
make_tmp a2a-identity 700
[[ -z "${INTEROP_DEBUG:-}" ]] || TMP_KEEP="INTEROP_DEBUG: kept $TMP"

show_logs() {
    show_tail "$TMP/proxy.log" "proxy log"
    show_tail "$TMP/agent.out" "recording agent"
}
abort() { # abort CHECK MESSAGE: FAIL CHECK, the logs, the summary, exit 1
    fail "$1: $2"
    show_logs
    summary
    exit 1
}

# the callers' tokens: known to the proxy and the client only
ANA_TOKEN=ana-$(rand_token)
BEN_TOKEN=ben-$(rand_token)
CAROL_TOKEN=carol-$(rand_token)
RITA_TOKEN=rita-$(rand_token)

# ---- 1. the recording agent
"$PY" -u "$HERE/recording_agent.py" --log "$TMP/agent.jsonl" --port-file "$TMP/agent.port" --name "$AGENT" \
    >"$TMP/agent.out" 2>&1 &
AGENT_PID=$!
track "$AGENT_PID" 3
for _ in $(seq 1 100); do
    [[ -s "$TMP/agent.port" ]] && break
    kill -0 "$AGENT_PID" 2>/dev/null || break
    sleep 0.1
done
[[ -s "$TMP/agent.port" ]] || abort agent-start "the recording agent did not start"
AGENT_URL="http://127.0.0.1:$(cat "$TMP/agent.port")/"

# ---- 2. the proxy: three principals (two tenants, one without) that may call every method, a
# fourth (rita) that may only read ([authz]), an ES256 card key that signs the identity
# assertions too (generated on first start), ttl_secs = TTL
{
    policy_head "$TMP/certs" "$AGENT" "$AGENT_URL"
    cat <<EOF

[auth]
[[auth.bearer]]
principal = "ana"
tenant = "team-a"
groups = ["deployers"]
token_env = "ANA_TOKEN"

[[auth.bearer]]
principal = "ben"
tenant = "team-b"
groups = ["deployers", "ops"]
token_env = "BEN_TOKEN"

[[auth.bearer]]
principal = "carol"
token_env = "CAROL_TOKEN"

[[auth.bearer]]
principal = "rita"
token_env = "RITA_TOKEN"

[auth.identity_assertion]
kid = "$KID"
ttl_secs = $TTL

[card]
[[card.signing_keys]]
kid = "$KID"
alg = "ES256"
private_key_file = "$TMP/edge-id-es256.pem"
generate_if_missing = true

# rita may read, not write; require_workspace off: no rule has workspace_roots (the recording
# agent has no workspace), and with it on every SendMessage would be refused workspace.required
[authz]
default = "deny"
require_workspace = false
[[authz.rules]]
name = "writers"
principals = ["ana", "ben", "carol"]
methods = ["*"]
[[authz.rules]]
name = "readers"
principals = ["rita"]
methods = ["read"]
EOF
} >"$TMP/policy.toml"

start_edge "$TMP/policy.toml" "$TMP/ready.json" "$TMP/proxy.log" \
    ANA_TOKEN="$ANA_TOKEN" BEN_TOKEN="$BEN_TOKEN" CAROL_TOKEN="$CAROL_TOKEN" RITA_TOKEN="$RITA_TOKEN"
PROXY_PID=$EDGE_PID
wait_ready "$PROXY_PID" "$TMP/ready.json" || abort proxy-start "$READY_ERR"
PUBLIC_URL=$READY_URL
CA="$TMP/certs/ca.pem"
[[ -s "$CA" ]] || abort proxy-start "dev CA $CA missing"
pass "proxy-start: ready at $PUBLIC_URL, agent $AGENT at $AGENT_URL"
key_mode=$(stat -c %a "$TMP/edge-id-es256.pem" 2>/dev/null || echo missing)
if [[ "$key_mode" == 600 || "$key_mode" == 400 ]]; then
    pass "identity-key-generated: $TMP/edge-id-es256.pem (mode $key_mode)"
else
    fail "identity-key-generated: private_key_file mode $key_mode, expected 600"
fi

# ---- 3. the checks (in the background + wait, so that INT/TERM run the cleanup at once)
status=0
ANA_TOKEN="$ANA_TOKEN" BEN_TOKEN="$BEN_TOKEN" CAROL_TOKEN="$CAROL_TOKEN" RITA_TOKEN="$RITA_TOKEN" \
    timeout --kill-after=5 "$CLIENT_TIMEOUT" "$PY" -u "$HERE/identity_client.py" \
    --url "$PUBLIC_URL" --ca "$CA" --agent-log "$TMP/agent.jsonl" --agent "$AGENT" \
    --kid "$KID" --ttl "$TTL" >"$TMP/client.out" &
CLIENT_PID=$!
track "$CLIENT_PID" 3
wait "$CLIENT_PID" || status=$?
forget "$CLIENT_PID"
cat "$TMP/client.out"
tally identity-client "$status" "$TMP/client.out"

# ---- 4. shutdown: the proxy drains and exits 0
sigterm_check "$PROXY_PID" || true
stop "$AGENT_PID"

# the callers' tokens reached neither the proxy log nor the agent
leaks=()
for who in ANA BEN CAROL RITA; do
    var=${who}_TOKEN
    grep -qF -- "${!var}" "$TMP/proxy.log" "$TMP/agent.jsonl" 2>/dev/null && leaks+=("$var")
done
if ((${#leaks[@]} == 0)); then
    pass "tokens-at-rest: no caller token in the proxy log or in what the agent received"
else
    fail "tokens-at-rest: ${leaks[*]} found in the proxy log or at the agent"
fi

summary
if ((NFAIL != 0)); then
    show_logs
    log "identity interop: FAILED"
    exit 1
fi
log "identity interop: all checks passed"
