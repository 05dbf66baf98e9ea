#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# An iac-code fleet of two servers behind a2a-edge, offline: both iac-code A2A servers
# (0.16.0) talk to a fake OpenAI-compatible model (tests/interop/fake_openai.py), the edge
# fronts them with TLS (dev certificates) and a bearer token, and spreads new contexts over
# the two. Everything on 127.0.0.1, on free ports; stopped and removed on exit.
#
#   caller --TLS, Bearer DEMO--> a2a-edge --http, Bearer IAC--> iac-code #1 | iac-code #2 --> fake model
#
# Usage: run.sh [--smoke]
#   (none)   start everything, print the curl line and the card URL, wait for Ctrl-C
#   --smoke  start everything, send two SendMessage turns through the edge, check that each
#            completes with the fake model's text, that /ready and /metrics see both agents
#            healthy, then stop (exit 0 when every check passed)
# Env: A2A_EDGE_BIN (else `cargo build --release`), PYTHON (creates the virtualenv with
#      iac-code, reused from tests/interop/), READY_TIMEOUT (default 60), IAC_TIMEOUT (60)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=iac-fleet
# shellcheck source=../../tests/interop/lib.sh
source "$HERE/../../tests/interop/lib.sh"
READY_TIMEOUT=${READY_TIMEOUT:-60}
IAC_TIMEOUT=${IAC_TIMEOUT:-60}
PYTHON=${PYTHON:-python3}
SMOKE=0
case "${1:-}" in
"") ;;
--smoke) SMOKE=1 ;;
*) die "usage: run.sh [--smoke]" ;;
esac
export FAKE_REPLY="Plan ready: two vSwitches and one security group."

iac_venv || die "iac-code 0.16.0 / a2a-sdk 1.2.0 not importable after install"
PY="$IAC_VENV/bin/python"
no_proxies
edge_bin release
[[ -x "$BIN" ]] || die "binary not found or not executable: $BIN"

make_tmp a2a-iac-fleet
WS="$TMP/workspace"
mkdir -p "$WS" "$TMP/home" "$TMP/certs"
IAC_TOKEN=iac-$(rand_token)
DEMO_TOKEN=demo-$(rand_token)

# ---- the fake model
FAKE_LOG="$TMP/fake-llm.jsonl" FAKE_API_KEYS="sk-fake-offline-key" "$PY" -u \
    "$ROOT/tests/interop/fake_openai.py" --port 0 --port-file "$TMP/fake.port" >"$TMP/fake.out" 2>&1 &
track $! 3
for _ in $(seq 1 100); do
    [[ -s "$TMP/fake.port" ]] && break
    sleep 0.1
done
[[ -s "$TMP/fake.port" ]] || die "the fake model did not start: $(tail -n 5 "$TMP/fake.out")"
FAKE_PORT=$(cat "$TMP/fake.port")
log "fake model on 127.0.0.1:$FAKE_PORT"

# ---- two iac-code servers, each with its own home and config, the same upstream token
IAC_URLS=()
for i in 1 2; do
    port=$(free_port)
    mkdir -p "$TMP/home-$i" "$TMP/config-$i"
    iac_code "$WS" HOME="$TMP/home-$i" IAC_CODE_CONFIG_DIR="$TMP/config-$i" \
        IAC_CODE_BASE_URL="http://127.0.0.1:$FAKE_PORT/v1" IAC_CODE_API_KEY=sk-fake-offline-key \
        IAC_CODE_MODEL=fake-model IACCODE_A2A_HTTP_TOKEN="$IAC_TOKEN" IACCODE_A2A_ALLOWED_CWDS="$WS" \
        "$IAC_VENV/bin/iac-code" a2a --host 127.0.0.1 --port "$port" \
        >"$TMP/iac-$i.stdout" 2>"$TMP/iac-$i.stderr" &
    pid=$!
    track "$pid" 10
    url="http://127.0.0.1:$port/"
    health=$(iac_health "$url" "$IAC_TIMEOUT" "$pid" "$IAC_TOKEN") ||
        { tail -n 20 "$TMP/iac-$i.stderr" >&2; die "iac-code #$i did not come up: $health"; }
    log "iac-code #$i on $url ($health)"
    IAC_URLS+=("$url")
done

# ---- the edge: both servers as one fleet
{
    policy_head "$TMP/certs" iac-1 "${IAC_URLS[0]}" 127.0.0.1:0 https://127.0.0.1:0/ 'admin_listen = "127.0.0.1:0"'
    cat <<EOF
token_env = "IAC_TOKEN"
response_timeout_ms = 120000

[[upstreams]]
name = "iac-2"
url = "${IAC_URLS[1]}"
token_env = "IAC_TOKEN"
response_timeout_ms = 120000

[auth]
[[auth.bearer]]
principal = "demo"
token_env = "DEMO_TOKEN"

[workspace]
allowed_roots = ["$WS"]
EOF
} >"$TMP/policy.toml"
IAC_TOKEN=$IAC_TOKEN DEMO_TOKEN=$DEMO_TOKEN "$BIN" check --policy "$TMP/policy.toml" >"$TMP/check.txt" 2>&1 ||
    { cat "$TMP/check.txt" >&2; die "the policy does not check"; }
start_edge "$TMP/policy.toml" "$TMP/ready.json" "$TMP/proxy.log" "IAC_TOKEN=$IAC_TOKEN" "DEMO_TOKEN=$DEMO_TOKEN"
wait_ready "$EDGE_PID" "$TMP/ready.json" || { tail -n 30 "$TMP/proxy.log" >&2; die "a2a-edge: $READY_ERR"; }
ADMIN=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["admin"])' "$TMP/ready.json")
log "a2a-edge on $READY_URL (admin http://$ADMIN/), in front of ${IAC_URLS[*]}"

if ((SMOKE == 0)); then
    cat <<EOF

The fleet is up. Try (the token is this run's):
  curl --cacert $TMP/certs/ca.pem $READY_URL.well-known/agent-card.json
  curl --cacert $TMP/certs/ca.pem -H 'Authorization: Bearer $DEMO_TOKEN' -H 'A2A-Version: 1.0' \\
    -H 'Content-Type: application/json' \\
    -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"plan a VPC"}]}}}' \\
    $READY_URL
  curl http://$ADMIN/ready

Ctrl-C stops everything.
EOF
    while kill -0 "$EDGE_PID" 2>/dev/null; do sleep 1; done
    exit 0
fi

# ---- smoke: two turns through the edge, both agents healthy
DEMO_TOKEN=$DEMO_TOKEN "$PY" - "$READY_URL" "$TMP/certs/ca.pem" "$ADMIN" "$FAKE_REPLY" <<'EOF'
import json, os, ssl, sys, time, urllib.request

url, ca, admin, reply = sys.argv[1:5]
ctx = ssl.create_default_context(cafile=ca)
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx))
failed = 0

def check(ok, what):
    global failed
    print(("PASS " if ok else "FAIL ") + what)
    failed += 0 if ok else 1

def rpc(method, params, i):
    body = json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}).encode()
    req = urllib.request.Request(url, data=body, headers={
        "Authorization": "Bearer " + os.environ["DEMO_TOKEN"], "A2A-Version": "1.0",
        "Content-Type": "application/json"})
    with opener.open(req, timeout=120) as r:
        return json.load(r)

def text_of(task):
    parts = []
    for m in [task.get("status", {}).get("message")] + task.get("history", []):
        for p in (m or {}).get("parts", []):
            parts.append(p.get("text", ""))
    for a in task.get("artifacts", []):
        for p in a.get("parts", []):
            parts.append(p.get("text", ""))
    return " ".join(parts)

for turn in (1, 2):
    answer = rpc("SendMessage", {"message": {"messageId": f"m{turn}", "role": "ROLE_USER",
                                             "parts": [{"text": f"plan a VPC, turn {turn}"}]}}, turn)
    task = answer.get("result", {}).get("task")
    if not task:
        check(False, f"turn {turn}: SendMessage answered {json.dumps(answer)[:300]}")
        continue
    deadline = time.monotonic() + 90
    while task["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING") and time.monotonic() < deadline:
        time.sleep(0.5)
        task = rpc("GetTask", {"id": task["id"]}, 100 + turn)["result"]
    check(task["status"]["state"] in ("TASK_STATE_COMPLETED", "TASK_STATE_INPUT_REQUIRED")
          and reply in text_of(task),
          f"turn {turn}: task {task['id']} {task['status']['state']}, the model's answer relayed")

with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(f"http://{admin}/ready", timeout=5) as r:
    check(r.status == 200, f"/ready: {r.status} {r.read().decode()[:200]}")
with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(f"http://{admin}/metrics", timeout=5) as r:
    metrics = r.read().decode()
for name in ("iac-1", "iac-2"):
    check(f'a2a_edge_upstream_healthy{{upstream="{name}"}} 1' in metrics, f"{name} healthy in /metrics")
sys.exit(1 if failed else 0)
EOF
log "smoke passed: two turns through the edge in front of two iac-code servers"
