#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Interop test: a2a-edge in front of the REAL iac-code A2A server (0.16.0),
# offline: iac-code talks to a fake OpenAI-compatible model (fake_openai.py),
# everything on 127.0.0.1.
#
#   client --TLS, Bearer ALICE_TOKEN--> a2a-edge --http, Bearer IAC token--> iac-code --> fake LLM
#          (and BOB_TOKEN: a second principal, who must not see alice's tasks;
#          TENANT_A_TOKEN, TENANT_B_TOKEN: tenants team-a and team-b, each confined by
#          [authz] to its own directory <workspace>/team-a, <workspace>/team-b)
#
# Env:
#   A2A_EDGE_BIN    use this binary instead of `cargo build --release`
#   IAC_VALIDATION  on (default) | auto | off: are the edge's request
#                   rejections (workspace, metadata, ids) required? auto =
#                   required only when a probe shows the edge validates
#                   requests (for binaries older than 05c9d10, which wired
#                   validation into the gate), otherwise SKIP; off = SKIP
#   READY_TIMEOUT   seconds to wait for the proxy's ready file (default 60)
#   IAC_TIMEOUT     seconds to wait for iac-code's /health (default 60)
#   CLIENT_TIMEOUT  seconds the Python client may run (default 150)
#   PYTHON          interpreter used to create the venv (default python3)
#   INTEROP_DEBUG   non-empty: client tracebacks; keep the temp dir
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=iac-interop
# shellcheck source=lib.sh
source "$HERE/lib.sh"
READY_TIMEOUT=${READY_TIMEOUT:-60}
IAC_TIMEOUT=${IAC_TIMEOUT:-60}
CLIENT_TIMEOUT=${CLIENT_TIMEOUT:-150}
PYTHON=${PYTHON:-python3}
IAC_VALIDATION=${IAC_VALIDATION:-on}
export FAKE_REPLY=${FAKE_REPLY:-Hello from the fake LLM.}
export FAKE_SLOW_SECONDS=${FAKE_SLOW_SECONDS:-5}
T_START=$SECONDS

summary() { echo "iac-code interop: $NPASS passed, $NFAIL failed, $NSKIP skipped ($((SECONDS - T_START)) s)"; }

case "$IAC_VALIDATION" in auto | on | off) ;; *)
    log "IAC_VALIDATION must be auto, on or off"
    exit 2
    ;;
esac

# ---- virtualenv with iac-code and the pinned SDK (IAC_VENV, lib.sh; reused when versions match)
iac_venv || { log "iac-code 0.16.0 / a2a-sdk 1.2.0 not importable after install"; exit 1; }
PY="$IAC_VENV/bin/python"
no_proxies

# ---- the binary
edge_bin release
[[ -x "$BIN" ]] || { log "binary not found or not executable: $BIN"; exit 1; }

# ---- temp dir, processes, cleanup
make_tmp a2a-iac
[[ -z "${INTEROP_DEBUG:-}" ]] || TMP_KEEP="INTEROP_DEBUG: kept $TMP"
mkdir -p "$TMP/home" "$TMP/iac-config" "$TMP/workspace/team-a" "$TMP/workspace/team-b" "$TMP/certs"
WS="$TMP/workspace"

show_logs() {
    show_tail "$TMP/proxy.log" "proxy log"
    show_tail "$TMP/iac.stderr" "iac-code stderr"
    show_tail "$TMP/fake.out" "fake LLM"
}
abort() { # abort CHECK MESSAGE: FAIL CHECK, the logs, the summary, exit 1
    fail "$1: $2"
    show_logs
    summary
    exit 1
}

# Tokens: the callers' (ALICE_TOKEN, BOB_TOKEN, TENANT_A_TOKEN, TENANT_B_TOKEN) are
# known to the proxy and the client only; iac-code's own (IAC_TOKEN) to the proxy and iac-code only. None
# is exported. ALICE_LLM_KEY is an LLM key alice may send as
# metadata.iac_code.iac_code_api_key ([a2a.metadata.allowed_for]): the fake LLM
# accepts it (and iac-code's configured key), so it must reach the model, and
# never come back to alice.
ALICE_TOKEN=alice-$(rand_token)
BOB_TOKEN=bob-$(rand_token)
TENANT_A_TOKEN=tenant-a-$(rand_token)
TENANT_B_TOKEN=tenant-b-$(rand_token)
IAC_TOKEN=iac-$(rand_token)
ALICE_LLM_KEY=$("$PY" -c 'import secrets; print("sk-alice-" + secrets.token_hex(16))')

# ---- 1. the fake LLM
FAKE_LOG="$TMP/fake-llm.jsonl" FAKE_API_KEYS="sk-fake-offline-key,$ALICE_LLM_KEY" "$PY" -u "$HERE/fake_openai.py" --port 0 --port-file "$TMP/fake.port" \
    >"$TMP/fake.out" 2>&1 &
FAKE_PID=$!
track "$FAKE_PID" 3
for _ in $(seq 1 100); do
    [[ -s "$TMP/fake.port" ]] && break
    kill -0 "$FAKE_PID" 2>/dev/null || break
    sleep 0.1
done
[[ -s "$TMP/fake.port" ]] || abort fake-llm "did not start"
FAKE_PORT=$(cat "$TMP/fake.port")
pass "fake-llm: listening on 127.0.0.1:$FAKE_PORT"

# ---- 2. iac-code (its own bearer token required on every route)
IAC_PORT=$(free_port)
IAC_URL="http://127.0.0.1:$IAC_PORT/"
t_iac=$SECONDS
iac_code "$WS" HOME="$TMP/home" IAC_CODE_CONFIG_DIR="$TMP/iac-config" \
    IAC_CODE_BASE_URL="http://127.0.0.1:$FAKE_PORT/v1" IAC_CODE_API_KEY=sk-fake-offline-key IAC_CODE_MODEL=fake-model \
    IACCODE_A2A_HTTP_TOKEN="$IAC_TOKEN" IACCODE_A2A_ALLOWED_CWDS="$WS" \
    "$IAC_VENV/bin/iac-code" a2a --host 127.0.0.1 --port "$IAC_PORT" \
    >"$TMP/iac.stdout" 2>"$TMP/iac.stderr" &
IAC_PID=$!
track "$IAC_PID" 10
health=$(iac_health "$IAC_URL" "$IAC_TIMEOUT" "$IAC_PID" "$IAC_TOKEN") || abort iac-code-start "GET /health: $health"
pass "iac-code-start: $IAC_URL /health -> $health after $((SECONDS - t_iac)) s"

# ---- 3. the proxy
{
    policy_head "$TMP/certs" iac-code "$IAC_URL"
    cat <<EOF
token_env = "IAC_UPSTREAM_TOKEN"
response_timeout_ms = 120000

[auth]
[[auth.bearer]]
principal = "alice"
token_env = "ALICE_TOKEN"

[[auth.bearer]]
principal = "bob"
token_env = "BOB_TOKEN"

# alice may set the agent's LLM key per request (denied by default, so bob may not)
[a2a.metadata.allowed_for]
alice = ["iac_code.iac_code_api_key"]
EOF
} >"$TMP/policy.toml"
cp "$TMP/policy.toml" "$TMP/policy-base.toml"
cat >>"$TMP/policy.toml" <<EOF

[workspace]
allowed_roots = ["$WS"]
EOF
cp "$TMP/policy.toml" "$TMP/policy-workspace.toml"
# two tenants, each confined to its own directory; alice and bob keep the whole workspace
cat >>"$TMP/policy.toml" <<EOF

[[auth.bearer]]
principal = "tenant-a-user"
tenant = "team-a"
groups = ["deployers"]
token_env = "TENANT_A_TOKEN"

[[auth.bearer]]
principal = "tenant-b-user"
tenant = "team-b"
groups = ["deployers"]
token_env = "TENANT_B_TOKEN"

[authz]
default = "deny"

[[authz.rules]]
name = "the first two callers"
principals = ["alice", "bob"]
methods = ["*"]
workspace_roots = ["$WS"]

[[authz.rules]]
name = "tenant members"
groups = ["deployers"]
methods = ["read", "write"]
workspace_roots = ["$WS/{tenant}"]
EOF
edge() {
    ALICE_TOKEN="$ALICE_TOKEN" BOB_TOKEN="$BOB_TOKEN" TENANT_A_TOKEN="$TENANT_A_TOKEN" \
        TENANT_B_TOKEN="$TENANT_B_TOKEN" IAC_UPSTREAM_TOKEN="$IAC_TOKEN" "$BIN" "$@"
}
TENANTS=on
if edge check --policy "$TMP/policy.toml" >"$TMP/check.out" 2>&1; then
    pass "policy-check: [workspace], tenant principals and [authz] accepted"
else
    # an older binary: without tenants (FAIL when IAC_VALIDATION=on, else the checks SKIP)
    TENANTS=off
    why="this binary refuses the tenants or [authz]: $(head -n1 "$TMP/check.out")"
    if [[ "$IAC_VALIDATION" == on ]]; then fail "policy-check-tenants: $why"; else note "policy-check: $why; tenant checks SKIP"; fi
    cp "$TMP/policy-workspace.toml" "$TMP/policy.toml"
    if edge check --policy "$TMP/policy.toml" >"$TMP/check.out" 2>&1; then
        pass "policy-check: [workspace] accepted"
    else
        note "policy-check: this binary refuses [workspace] ($(grep -m1 -i workspace "$TMP/check.out" || head -n1 "$TMP/check.out")); running without it"
        cp "$TMP/policy-base.toml" "$TMP/policy.toml"
        edge check --policy "$TMP/policy.toml" >"$TMP/check.out" 2>&1 ||
            abort policy-check "$(cat "$TMP/check.out")"
    fi
fi

start_edge "$TMP/policy.toml" "$TMP/ready.json" "$TMP/proxy.log" \
    ALICE_TOKEN="$ALICE_TOKEN" BOB_TOKEN="$BOB_TOKEN" TENANT_A_TOKEN="$TENANT_A_TOKEN" \
    TENANT_B_TOKEN="$TENANT_B_TOKEN" IAC_UPSTREAM_TOKEN="$IAC_TOKEN"
PROXY_PID=$EDGE_PID
wait_ready "$PROXY_PID" "$TMP/ready.json" || abort proxy-start "$READY_ERR"
PUBLIC_URL=$READY_URL
CA="$TMP/certs/ca.pem"
[[ -s "$CA" ]] || abort proxy-start "dev CA $CA missing"
pass "proxy-start: ready at $PUBLIC_URL"

# ---- 4. the checks through the proxy
# (in the background + wait, so that INT/TERM run the cleanup at once)
status=0
ALICE_TOKEN="$ALICE_TOKEN" BOB_TOKEN="$BOB_TOKEN" ALICE_LLM_KEY="$ALICE_LLM_KEY" \
    TENANT_A_TOKEN="$TENANT_A_TOKEN" TENANT_B_TOKEN="$TENANT_B_TOKEN" \
    IAC_UPSTREAM_TOKEN="$IAC_TOKEN" timeout --kill-after=5 "$CLIENT_TIMEOUT" \
    "$PY" -u "$HERE/iac_code_client.py" --url "$PUBLIC_URL" --ca "$CA" \
    --iac-url "$IAC_URL" --workspace "$WS" --fake-log "$TMP/fake-llm.jsonl" \
    --iac-access-log "$TMP/iac.stdout" --iac-tasks-dir "$TMP/iac-config/a2a/tasks" \
    --validation "$IAC_VALIDATION" --tenants "$TENANTS" --tee "$TMP/client.out" &
CLIENT_PID=$!
track "$CLIENT_PID" 3
wait "$CLIENT_PID" || status=$?
forget "$CLIENT_PID"
tally iac-code-client "$status" "$TMP/client.out"

# ---- 5. shutdown: the proxy drains and exits 0; then iac-code and the fake
sigterm_check "$PROXY_PID" || true
stop "$IAC_PID"
stop "$FAKE_PID"

# ---- 6. credentials at rest: the caller's token is nowhere but in memory
# (fake LLM log, iac-code's config dir and logs, its stdout/stderr, the proxy
# log, the client output: every file of the run)
nfiles=$(find "$TMP" -type f | wc -l)
for who in ALICE BOB TENANT_A TENANT_B; do
    var=${who}_TOKEN
    leaks=$(grep -rlF -- "${!var}" "$TMP" 2>/dev/null | sed "s|^$TMP/||" || true)
    lc=${who,,}
    lc=${lc//_/-}
    if [[ -z "$leaks" ]]; then
        pass "$lc-token-at-rest: absent from all $nfiles files (iac-config, iac stdout/stderr, fake LLM log, proxy log)"
    else
        fail "$lc-token-at-rest: $var found in: ${leaks//$'\n'/ }"
    fi
done
# alice's LLM key went to iac-code (which stores the echoed request metadata in
# its task files) and to the model; it must be nowhere on the proxy's side of
# the run: not in the proxy log, not in anything the client received
key_files=$(grep -rlF -- "$ALICE_LLM_KEY" "$TMP" 2>/dev/null | sed "s|^$TMP/||" | sort || true)
key_bad=$(echo "$key_files" | grep -v -e '^fake-llm.jsonl$' -e '^iac-config/' -e '^$' || true)
if ! echo "$key_files" | grep -qx 'fake-llm.jsonl'; then
    fail "alice-llm-key-at-rest: the key is not in the fake LLM log (did it reach the model?)"
elif [[ -n "$key_bad" ]]; then
    fail "alice-llm-key-at-rest: ALICE_LLM_KEY found outside iac-code's config and the LLM log: ${key_bad//$'\n'/ }"
else
    pass "alice-llm-key-at-rest: found only in $(cut -c1-200 <<<"${key_files//$'\n'/ }") (allowed: the fake LLM log, iac-code's config dir); absent from the proxy log and the client output"
fi
if grep -qF -- "$IAC_TOKEN" "$TMP/fake-llm.jsonl" 2>/dev/null; then
    fail "iac-token-to-llm: iac-code's A2A token reached the fake LLM"
else
    pass "iac-token-to-llm: iac-code's A2A token never reached the fake LLM"
fi
nposts=$(grep -c '"POST / ' "$TMP/iac.stdout" || true)
note "iac-code access log: $nposts JSON-RPC POSTs; LLM requests: $(grep -c chat/completions "$TMP/fake-llm.jsonl" || true)"

summary
if ((NFAIL != 0)); then
    show_logs
    log "iac-code interop: FAILED"
    exit 1
fi
log "iac-code interop: all checks passed"
