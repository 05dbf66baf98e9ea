#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Two a2a-edge replicas sharing their state through one Redis, behind haproxy in TCP mode
# with each replica's admin /ready as its health check (haproxy.cfg here, on free ports), in
# front of the embedded engine of a standalone `a2a-edge engine`. Everything on 127.0.0.1;
# redis-server and haproxy are installed with apt-get when missing; stopped and removed on exit.
#
#   caller --TLS--> haproxy (TCP, leastconn) --> replica 1 | replica 2 --> engine
#                                                    \________ Redis ________/
#
# Usage: run.sh [--smoke]
#   (none)   start everything, print a curl line for the balancer, wait for Ctrl-C
#   --smoke  a task created through one replica is read, continued and listed through the
#            other, and through haproxy; both replicas ready; then stop (exit 0 when all passed)
# Env: A2A_EDGE_BIN (else `cargo build --release`), READY_TIMEOUT (default 60)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=ha
# shellcheck source=../../tests/interop/lib.sh
source "$HERE/../../tests/interop/lib.sh"
READY_TIMEOUT=${READY_TIMEOUT:-60}
SMOKE=0
case "${1:-}" in
"") ;;
--smoke) SMOKE=1 ;;
*) die "usage: run.sh [--smoke]" ;;
esac

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v haproxy >/dev/null 2>&1 || need+=(haproxy)
apt_install "${need[@]}"
edge_bin release
[[ -x "$BIN" ]] || die "binary not found or not executable: $BIN"
no_proxies
make_tmp a2a-ha
[[ -z "${HA_DEBUG:-}" ]] || TMP_KEEP="HA_DEBUG: kept $TMP"

# ---- Redis (AOF on, as the README recommends) and the engine
REDIS_PORT=$(free_port)
mkdir -p "$TMP/redis"
redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --appendonly yes --appendfsync everysec \
    --maxmemory-policy noeviction --save "" --dir "$TMP/redis" >"$TMP/redis/redis.log" 2>&1 &
track $!
for _ in $(seq 1 100); do
    python3 -c 'import socket,sys; s=socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1); s.sendall(b"PING\r\n"); sys.exit(0 if s.recv(7) == b"+PONG\r\n" else 1)' \
        "$REDIS_PORT" 2>/dev/null && break
    sleep 0.1
done
"$BIN" engine --listen 127.0.0.1:0 >"$TMP/engine.log" 2>&1 &
track $!
ENGINE_URL=$(wait_for_line "$TMP/engine.log" 'http://127\.0\.0\.1:[0-9]+/' "${PIDS[-1]}") || die "the engine did not start"
log "redis on 127.0.0.1:$REDIS_PORT, engine on $ENGINE_URL"

# ---- two replicas: the same policy and [state], their own ports; one CA for both
TOKEN=demo-$(rand_token)
PAGE_SECRET=$(head -c 24 /dev/urandom | base64)
EDGE_PORTS=() ADMIN_PORTS=()
for i in 1 2; do
    EDGE_PORTS+=("$(free_port)")
    ADMIN_PORTS+=("$(free_port)")
    {
        policy_head "$TMP/certs" engine "$ENGINE_URL" "127.0.0.1:${EDGE_PORTS[-1]}" \
            "https://localhost:${EDGE_PORTS[-1]}/" "admin_listen = \"127.0.0.1:${ADMIN_PORTS[-1]}\""
        cat <<EOF

[auth]
[[auth.bearer]]
principal = "demo"
token_env = "DEMO_TOKEN"

[state]
backend = "redis"
redis_url = "redis://127.0.0.1:$REDIS_PORT/0"
page_token_secret_env = "A2A_EDGE_PAGE_TOKEN_SECRET"
EOF
    } >"$TMP/replica-$i.toml"
    start_edge "$TMP/replica-$i.toml" "$TMP/ready-$i.json" "$TMP/replica-$i.log" \
        "DEMO_TOKEN=$TOKEN" "A2A_EDGE_PAGE_TOKEN_SECRET=$PAGE_SECRET"
    wait_ready "$EDGE_PID" "$TMP/ready-$i.json" || { tail -n 20 "$TMP/replica-$i.log" >&2; die "replica $i: $READY_ERR"; }
    log "replica $i on https://127.0.0.1:${EDGE_PORTS[-1]}/ (admin :${ADMIN_PORTS[-1]})"
done

# ---- haproxy: haproxy.cfg with this run's ports
HA_PORT=$(free_port)
# (maxconn lowered: haproxy raises its descriptor limit to twice maxconn, beyond what a shell
# here may have)
sed -e "s|bind 0.0.0.0:443|bind 127.0.0.1:$HA_PORT|" -e "s|maxconn 20000|maxconn 1000|" \
    -e "s|127.0.0.1:8443 check port 9901|127.0.0.1:${EDGE_PORTS[0]} check port ${ADMIN_PORTS[0]}|" \
    -e "s|127.0.0.1:8444 check port 9902|127.0.0.1:${EDGE_PORTS[1]} check port ${ADMIN_PORTS[1]}|" \
    "$HERE/haproxy.cfg" >"$TMP/haproxy.cfg"
grep -q "127.0.0.1:${EDGE_PORTS[1]}" "$TMP/haproxy.cfg" || die "haproxy.cfg did not take this run's ports"
haproxy -c -q -f "$TMP/haproxy.cfg" || die "haproxy config check failed"
haproxy -db -f "$TMP/haproxy.cfg" >"$TMP/haproxy.log" 2>&1 &
track $!
sleep 0.5
kill -0 "${PIDS[-1]}" 2>/dev/null || { cat "$TMP/haproxy.log" >&2; die "haproxy exited"; }
HA_URL="https://localhost:$HA_PORT/"
log "haproxy on $HA_URL"

if ((SMOKE == 0)); then
    cat <<EOF

Two replicas behind haproxy. Try (this run's token):
  curl --cacert $TMP/certs/ca.pem -H 'Authorization: Bearer $TOKEN' -H 'A2A-Version: 1.0' \\
    -H 'Content-Type: application/json' \\
    -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hello"}]}}}' \\
    $HA_URL
  curl http://127.0.0.1:${ADMIN_PORTS[0]}/ready http://127.0.0.1:${ADMIN_PORTS[1]}/ready

Ctrl-C stops everything.
EOF
    while kill -0 "$EDGE_PID" 2>/dev/null; do sleep 1; done
    exit 0
fi

DEMO_TOKEN=$TOKEN python3 - "$TMP/certs/ca.pem" "https://localhost:${EDGE_PORTS[0]}/" \
    "https://localhost:${EDGE_PORTS[1]}/" "$HA_URL" "${ADMIN_PORTS[0]}" "${ADMIN_PORTS[1]}" <<'EOF'
import json, os, ssl, sys, time, urllib.request

ca, one, two, ha, admin1, admin2 = sys.argv[1:7]
ctx = ssl.create_default_context(cafile=ca)
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx))
failed = 0

def check(ok, what):
    global failed
    print(("PASS " if ok else "FAIL ") + what)
    failed += 0 if ok else 1

def rpc(url, method, params, i=1):
    body = json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}).encode()
    req = urllib.request.Request(url, data=body, headers={
        "Authorization": "Bearer " + os.environ["DEMO_TOKEN"], "A2A-Version": "1.0",
        "Content-Type": "application/json"})
    with opener.open(req, timeout=30) as r:
        return json.load(r)

def ready(port):
    deadline = time.monotonic() + 10
    while True:
        try:
            with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
                    f"http://127.0.0.1:{port}/ready", timeout=5) as r:
                return r.status
        except OSError:  # a 503 (HTTPError) too: ask again
            if time.monotonic() > deadline:
                return None
            time.sleep(0.2)

check(ready(admin1) == 200 and ready(admin2) == 200, "both replicas ready (Redis reachable, the engine healthy)")
task = rpc(one, "SendMessage", {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hello"}]}})["result"]["task"]
check(bool(task.get("id")), f"replica 1 created task {task.get('id')}")
got = rpc(two, "GetTask", {"id": task["id"]}).get("result", {})
check(got.get("id") == task["id"], "replica 2 knows the task (ownership in Redis)")
follow = rpc(two, "SendMessage", {"message": {"messageId": "m2", "role": "ROLE_USER", "taskId": task["id"],
                                              "contextId": task["contextId"], "parts": [{"text": "again"}]}})
check(follow.get("result", {}).get("task", {}).get("id") == task["id"], "replica 2 continues the task")
listed = rpc(one, "ListTasks", {}).get("result", {}).get("tasks", [])
check(any(t.get("id") == task["id"] for t in listed), "replica 1 lists it")
# haproxy takes a replica once two of its /ready checks (2 s apart) passed.
deadline, via = time.monotonic() + 20, {}
while time.monotonic() < deadline:
    try:
        via = rpc(ha, "GetTask", {"id": task["id"]}).get("result", {})
        break
    except OSError:
        time.sleep(0.5)
check(via.get("id") == task["id"], "through haproxy too")
sys.exit(1 if failed else 0)
EOF
log "smoke passed: two replicas share one caller's task through Redis, behind haproxy"
