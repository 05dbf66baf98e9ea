#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Slow-client benchmark: slowhttptest attacks against `a2a-edge serve` (TLS, embedded upstream)
# while honest clients send one JSON-RPC ListTasks every 50 ms, plus a baseline without attack.
#
#   baseline   honest clients alone
#   slowloris  slowhttptest -H: request heads that never end (a header line every -i s)
#   slowbody   slowhttptest -B: authenticated JSON POSTs whose body trickles in (R-U-Dead-Yet)
#   slowread   slowhttptest -X: pipelined GETs of the Agent Card, read a few bytes at a time
#
# Two honest clients run during every phase (benches/slow/honest.py): `keepalive` (one reused
# connection, like a pooling SDK client) and `new` (a new TCP + TLS connection per request).
# Each phase gets a fresh proxy with the same policy. Prints a Markdown table (also written to
# benches/slow/results.md).
#
# Env:
#   LENGTH        seconds per phase: attack length and honest-client duration (default 30)
#   RATE          slowhttptest connections per second, -r (default 200)
#   CONNECTIONS   slowhttptest target connections, -c (default RATE * LENGTH, so the attack
#                 keeps opening connections for the whole phase)
#   INTERVAL      honest request interval in seconds (default 0.05)
#   HONEST_TIMEOUT honest per-request timeout in seconds (default 5)
#   PROBE_TIMEOUT slowhttptest -p: its own probe's answer deadline in seconds (default 3)
#   MIN_SUCCESS   honest success percentage for "service available: yes" (default 99)
#   ATTACKS       phases after the baseline (default "slowloris slowbody slowread")
#   MAX_CONNECTIONS, HEADER_READ_TIMEOUT_MS, BODY_READ_TIMEOUT_MS, MIN_BODY_BYTES_PER_SECOND
#                 the proxy's [limits] under test (default: the proxy's defaults, 10000, 10000,
#                 60000, 4096)
#   HONEST_SOURCE local address of the honest clients (default 127.0.0.2: another client than
#                 the attacker on 127.0.0.1, as in reality; empty: the attacker's address, where
#                 the per-client connection cap refuses the honest new-connection client too)
#   A2A_EDGE_BIN  use this binary instead of `cargo build --release`
#   RESULTS       output file (default benches/slow/results.md)
#   READY_TIMEOUT seconds to wait for the proxy to come up (default 60)
#   KEEP_TMP      1: keep the temp dir (logs, slowhttptest CSV/HTML, proxy samples) for a look
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=slow
# shellcheck source=../../tests/interop/lib.sh
source "$HERE/../../tests/interop/lib.sh"
LENGTH=${LENGTH:-30}
RATE=${RATE:-200}
CONNECTIONS=${CONNECTIONS:-$((RATE * LENGTH))}
INTERVAL=${INTERVAL:-0.05}
HONEST_TIMEOUT=${HONEST_TIMEOUT:-5}
HONEST_SOURCE=${HONEST_SOURCE-127.0.0.2}
PROBE_TIMEOUT=${PROBE_TIMEOUT:-3}
MIN_SUCCESS=${MIN_SUCCESS:-99}
ATTACKS=${ATTACKS:-slowloris slowbody slowread}
MAX_CONNECTIONS=${MAX_CONNECTIONS:-10000}
HEADER_READ_TIMEOUT_MS=${HEADER_READ_TIMEOUT_MS:-10000}
BODY_READ_TIMEOUT_MS=${BODY_READ_TIMEOUT_MS:-60000}
MIN_BODY_BYTES_PER_SECOND=${MIN_BODY_BYTES_PER_SECOND:-4096}
RESULTS=${RESULTS:-$HERE/results.md}
READY_TIMEOUT=${READY_TIMEOUT:-60}

require_uints LENGTH RATE CONNECTIONS HONEST_TIMEOUT PROBE_TIMEOUT MIN_SUCCESS MAX_CONNECTIONS \
    HEADER_READ_TIMEOUT_MS BODY_READ_TIMEOUT_MS MIN_BODY_BYTES_PER_SECOND READY_TIMEOUT
[[ $INTERVAL =~ ^[0-9]*\.?[0-9]+$ ]] || die "INTERVAL must be a number of seconds (got '$INTERVAL')"
((LENGTH >= 5)) || die "LENGTH must be at least 5 (slowhttptest measures in whole seconds)"
((RATE > 0 && CONNECTIONS > 0 && PROBE_TIMEOUT > 0 && MAX_CONNECTIONS > 0)) ||
    die "RATE, CONNECTIONS, PROBE_TIMEOUT, MAX_CONNECTIONS must be > 0"
for a in $ATTACKS; do
    case $a in slowloris | slowbody | slowread) ;; *) die "unknown attack '$a' in ATTACKS (slowloris slowbody slowread)" ;; esac
done

# ---- tools
need_apt=()
command -v slowhttptest >/dev/null 2>&1 || need_apt+=(slowhttptest)
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
apt_install "${need_apt[@]}"

# slowhttptest raises its own descriptor limit to -c + 6, up to the hard limit
hard_nofile=$(ulimit -Hn)
if [[ $hard_nofile != unlimited ]] && ((CONNECTIONS + 16 > hard_nofile)); then
    die "CONNECTIONS=$CONNECTIONS needs more descriptors than the hard limit ($hard_nofile)"
fi
ulimit -n "$hard_nofile" 2>/dev/null || true # the proxy too: its limit, not the shell's, is tested

# ---- binary
edge_bin release
[[ -x "$BIN" ]] || die "binary not found or not executable: $BIN"

# ---- temp dir and cleanup
make_tmp a2a-slow
[[ ${KEEP_TMP:-0} != 1 ]] || TMP_KEEP="kept $TMP (KEEP_TMP=1)"

HONEST_TOKEN=$(rand_token)
ATTACK_TOKEN=$(rand_token)
export HONEST_TOKEN ATTACK_TOKEN

# ---- policy: two principals (the attacker has its own token, so the slow-body attack reaches
# the body read); rate limits far above the attack so that only the slow-client defenses act
# (a per-address rate limit would otherwise also throttle the honest clients when they share the
# attacker's address, HONEST_SOURCE=)
LIMITS="max_connections = $MAX_CONNECTIONS
header_read_timeout_ms = $HEADER_READ_TIMEOUT_MS
body_read_timeout_ms = $BODY_READ_TIMEOUT_MS
min_body_bytes_per_second = $MIN_BODY_BYTES_PER_SECOND
client_ip_requests_per_second = 100000
client_ip_burst = 100000
client_ip_connections_per_second = 100000
client_ip_connection_burst = 100000
requests_per_second = 100000
burst = 100000"
{
    policy_head "$TMP/certs" embedded embedded 127.0.0.1:0 https://127.0.0.1:0/ "drain_timeout_ms = 2000"
    cat <<EOF

[auth]
[[auth.bearer]]
principal = "honest"
token_env = "HONEST_TOKEN"

[[auth.bearer]]
principal = "attacker"
token_env = "ATTACK_TOKEN"

[limits]
$LIMITS
EOF
} >"$TMP/policy.toml"
"$BIN" check --policy "$TMP/policy.toml" >"$TMP/check.txt" 2>&1 ||
    { cat "$TMP/check.txt" >&2; die "a2a-edge check refused the policy"; }

# ---- proxy per phase
EDGE_PID=
EDGE_URL=
start_proxy() { # phase
    local dir="$TMP/$1"
    mkdir -p "$dir"
    start_edge "$TMP/policy.toml" "$dir/ready.json" "$dir/proxy.log"
    bench_wait_edge "$EDGE_PID" "$dir"
    EDGE_URL=$READY_URL
    [[ -s "$TMP/certs/ca.pem" ]] || die "dev CA $TMP/certs/ca.pem missing"
    # both principals must get a JSON-RPC result: the attacker's token is valid on purpose
    smoke "$1" honest "$HONEST_TOKEN"
    smoke "$1" attacker "$ATTACK_TOKEN"
}
smoke() { # phase name token
    local out="$TMP/$1/smoke.$2" code
    code=$(curl -sS -o "$out" -w '%{http_code}' --max-time 10 --cacert "$TMP/certs/ca.pem" \
        -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' -H "Authorization: Bearer $3" \
        --data '{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}' "$EDGE_URL") || code=curl-failed
    if [[ $code != 200 ]] || ! grep -q '"result"' "$out"; then
        die "smoke ListTasks as $2 failed: HTTP $code, body: $(head -c 300 "$out" 2>/dev/null)"
    fi
}
stop_proxy() { # phase
    kill -0 "$EDGE_PID" 2>/dev/null ||
        { tail -n 20 "$TMP/$1/proxy.log" >&2; die "a2a-edge died during the $1 phase; no results written"; }
    stop "$EDGE_PID"
}

# samples the proxy every 0.5 s: seconds, open descriptors, RSS kB, its CPU ticks (user +
# system), and the machine's busy and total CPU ticks (/proc/stat; busy = all but idle, iowait)
monitor() { # pid file
    local pid=$1 out=$2 t0=$SECONDS fds rss ticks machine
    while kill -0 "$pid" 2>/dev/null; do
        fds=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l) || break
        rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null) || break
        ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null) || break
        machine=$(awk '/^cpu / {t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t; exit}' /proc/stat)
        echo "$((SECONDS - t0)) $fds ${rss:-0} ${ticks:-0} ${machine:-0 0}" >>"$out"
        sleep 0.5
    done
}

attack_args() { # attack -> slowhttptest arguments (without -c -r -l -p -g -o)
    case $1 in
    slowloris) # a random header line every 5 s, never the blank line
        echo "-H -i 5 -x 24 -u $EDGE_URL" ;;
    slowbody) # Content-Length 65536, then <= ~10 bytes every second; -f is written verbatim
        # into the head, which is how the attacker's bearer token gets in (slowhttptest has no
        # header option): without it the proxy answers 401 before reading any body
        echo "-B -i 1 -x 10 -s 65536 -t POST -u $EDGE_URL" ;;
    slowread) # 10 pipelined GETs of the card (~1.2 KB each), receive window 512-1024 bytes,
        # 32 bytes read every second
        echo "-X -k 10 -w 512 -y 1024 -n 1 -z 32 -u ${EDGE_URL}.well-known/agent-card.json" ;;
    esac
}

run_phase() { # phase (baseline or an attack)
    local phase=$1 dir="$TMP/$1" mon_pid att_pid=
    start_proxy "$phase"
    wc -l <"$dir/proxy.log" >"$dir/log.offset" # the attack's log lines start after the smoke requests
    : >"$dir/monitor.txt"
    monitor "$EDGE_PID" "$dir/monitor.txt" &
    mon_pid=$!
    track "$mon_pid"
    sleep 1 # an idle sample first
    if [[ $phase != baseline ]]; then
        local -a args
        read -r -a args <<<"$(attack_args "$phase")"
        local shown="slowhttptest -c $CONNECTIONS -r $RATE -l $LENGTH -p $PROBE_TIMEOUT ${args[*]}"
        shown=${shown//$EDGE_URL/https://127.0.0.1:PORT/}
        if [[ $phase == slowbody ]]; then
            args+=(-f $'application/json\r\nAuthorization: Bearer '"$ATTACK_TOKEN")
            shown+=" -f \$'application/json\\r\\nAuthorization: Bearer '\"\$ATTACK_TOKEN\""
        fi
        echo "$shown" >"$dir/attack.cmd"
        log "$phase: $(cat "$dir/attack.cmd")"
        timeout --kill-after=5 $((LENGTH + 30)) slowhttptest -c "$CONNECTIONS" -r "$RATE" -l "$LENGTH" \
            -p "$PROBE_TIMEOUT" -g -o "$dir/slowhttptest" "${args[@]}" \
            >"$dir/slowhttptest.out" 2>&1 &
        att_pid=$!
        track "$att_pid"
    else
        log "baseline: honest clients alone for ${LENGTH}s"
    fi
    local -a hon=()
    for mode in keepalive new; do
        python3 "$HERE/honest.py" --url "$EDGE_URL" --cacert "$TMP/certs/ca.pem" --mode "$mode" \
            --interval "$INTERVAL" --duration "$LENGTH" --timeout "$HONEST_TIMEOUT" \
            ${HONEST_SOURCE:+--source "$HONEST_SOURCE"} \
            --out "$dir/honest.$mode.json" 2>>"$dir/honest.log" &
        hon+=($!)
        track "${hon[-1]}"
    done
    for pid in "${hon[@]}"; do
        wait "$pid" || log "$phase: an honest client exited with status $?"
        forget "$pid"
    done
    sed "s/^/    $phase /" "$dir/honest.log" >&2
    if [[ -n $att_pid ]]; then
        wait "$att_pid" || log "$phase: slowhttptest exited with status $?"
        forget "$att_pid"
        sed 's/\x1b\[[0-9;]*[A-Za-z]//g' "$dir/slowhttptest.out" | grep -E 'Test ended|Exit status' |
            sed "s/^/    $phase slowhttptest: /" >&2 || true
    fi
    sleep 1 # the proxy sees the attack's sockets close
    stop_proxy "$phase"
    stop "$mon_pid"
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
run_phase baseline
for a in $ATTACKS; do
    run_phase "$a"
done

# ---- header and table
sht_v=$(dpkg-query -W -f='${Version}' slowhttptest 2>/dev/null || slowhttptest -h 2>&1 | grep -o 'version [0-9.]*' | head -n1)
py_v=$(python3 --version 2>&1)
header=$(bench_header "slowhttptest $sht_v" "$py_v")
limits_line="$(echo "$LIMITS" | sed 's/ = /=/' | paste -sd, - | sed 's/,/, /g')"

# shellcheck disable=SC2086 # $ATTACKS: one argument per phase
HONEST_SOURCE="$HONEST_SOURCE" python3 - "$header" "$limits_line" "$TMP" "$LENGTH" "$RATE" "$CONNECTIONS" "$INTERVAL" \
    "$HONEST_TIMEOUT" "$PROBE_TIMEOUT" "$MIN_SUCCESS" "$(getconf CLK_TCK)" baseline $ATTACKS >"$TMP/results.md" <<'EOF'
import collections, csv, json, os, re, sys

(header, limits_line, tmp, length, rate, conns, interval, honest_timeout,
 probe_timeout, min_success, clk_tck) = sys.argv[1:12]
phases = sys.argv[12:]
min_success = float(min_success)
clk_tck = float(clk_tck)
MODES = ("keepalive", "new")
MODE_NAME = {"keepalive": "keep-alive", "new": "new conn/request"}
NAMES = {"baseline": "none (baseline)", "slowloris": "slowloris (-H)",
         "slowbody": "slow body (-B)", "slowread": "slow read (-X)"}


def load(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def ms(v):
    return "–" if v is None else (f"{v:.1f} ms" if v >= 10 else f"{v:.2f} ms")


def attack_stats(d):
    """slowhttptest's own view: CSV (Seconds,Closed,Pending,Connected,Service Available)
    and the last status block and exit status of its stdout."""
    s = {}
    try:
        rows = list(csv.reader(open(os.path.join(d, "slowhttptest.csv"))))[1:]
        rows = [[int(x) for x in r] for r in rows if len(r) >= 5 and all(x.strip().lstrip("-").isdigit() for x in r)]
    except OSError:
        rows = []
    if rows:
        last = rows[-1]
        s.update(seconds=last[0], closed=last[1], pending=last[2], connected=last[3],
                 max_connected=max(r[3] for r in rows),
                 probe_up=sum(1 for r in rows if r[4] > 0), probe_total=len(rows))
    try:
        out = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", open(os.path.join(d, "slowhttptest.out"), errors="replace").read())
    except OSError:
        out = ""
    blocks = re.findall(r"status on (\d+)th second:\s*initializing:\s*(\d+)\s*pending:\s*(\d+)\s*"
                        r"connected:\s*(\d+)\s*error:\s*(\d+)\s*closed:\s*(\d+)", out)
    if blocks:
        b = [int(x) for x in blocks[-1]]
        s["error"] = b[4]
        if not rows:
            s.update(seconds=b[0], pending=b[2], connected=b[3], closed=b[5], max_connected=b[3])
    m = re.search(r"Test ended on (\d+)th second\s*Exit status:\s*(.+)", out)
    if m:
        s["ended"] = int(m.group(1))
        s["exit"] = m.group(2).strip()
    if s:
        s["opened"] = s.get("closed", 0) + s.get("pending", 0) + s.get("connected", 0) + s.get("error", 0)
    try:
        s["cmd"] = open(os.path.join(d, "attack.cmd")).read().strip()
    except OSError:
        pass
    return s


def proxy_stats(d):
    s = {}
    samples = []
    try:
        for line in open(os.path.join(d, "monitor.txt")):
            p = line.split()
            if len(p) == 6:
                samples.append([int(x) for x in p])
    except OSError:
        pass
    if samples:
        idle_fds = samples[0][1]
        s["conn_peak"] = max(0, max(x[1] for x in samples) - idle_fds)
        s["rss_idle_mb"] = samples[0][2] / 1024
        s["rss_peak_mb"] = max(x[2] for x in samples) / 1024
        s["cpu_s"] = (samples[-1][3] - samples[0][3]) / clk_tck
        s["wall_s"] = samples[-1][0] - samples[0][0]
        total = samples[-1][5] - samples[0][5]
        s["machine_busy_pct"] = 100.0 * (samples[-1][4] - samples[0][4]) / total if total else None
    events = collections.Counter()
    try:
        skip = int(open(os.path.join(d, "log.offset")).read().strip() or 0)
    except (OSError, ValueError):
        skip = 0
    try:
        for n, line in enumerate(open(os.path.join(d, "proxy.log"), errors="replace")):
            if n < skip:
                continue
            try:
                e = json.loads(line)
            except ValueError:
                continue
            ev = e.get("event")
            if ev == "request":
                if e.get("principal") == "honest":
                    continue
                key = f"{e.get('status')} {e.get('reason') or e.get('route')}"
            elif ev == "connection_refused":
                key = f"refused {e.get('reason')}"
            elif ev in ("draining", "drained", "drain_timeout"):
                continue  # the script's own stop
            else:
                key = ev
            events[key] += 1
    except OSError:
        pass
    s["events"] = events
    return s


H = {p: {m: load(os.path.join(tmp, p, f"honest.{m}.json")) for m in MODES} for p in phases}
A = {p: attack_stats(os.path.join(tmp, p)) for p in phases if p != "baseline"}
P = {p: proxy_stats(os.path.join(tmp, p)) for p in phases}

lines = [
    "# a2a-edge under slow-client attacks (slowhttptest)",
    "",
    header,
    "",
    f"Proxy `[limits]`: {limits_line} (rate limits far above the attack on purpose: the point "
    f"is the slow-client defenses). The attacker connects from 127.0.0.1, the honest clients "
    f"from {os.environ.get('HONEST_SOURCE') or 'the same address'}. Each phase: a fresh "
    f"`a2a-edge serve` (TLS, embedded upstream), {length} s; slowhttptest "
    f"-c {conns} -r {rate} -l {length} -p {probe_timeout}; two honest clients at once "
    f"(JSON-RPC `ListTasks` every {float(interval) * 1000:.0f} ms, {honest_timeout} s timeout): "
    f"**keep-alive** (one reused HTTP/1.1 connection, like a pooling SDK client) and "
    f"**new conn/request** (TCP + TLS handshake each time).",
    "",
    "| attack | honest client | sent | honest success | p50 | p99 | baseline p50 / p99 "
    "| attack conns at end: closed / open / pending (opened) | service available |",
    "|---|---|---:|---:|---:|---:|---:|---:|---|",
]
verdicts = []
for p in phases:
    a = A.get(p)
    if a:
        att = (f"{a.get('closed', '?')} / {a.get('connected', '?')} / {a.get('pending', '?')} "
               f"({a.get('opened', '?')})")
    else:
        att = "–"
    for m in MODES:
        h = H[p][m]
        b = H["baseline"][m]
        base = f"{ms(b['p50_ms'])} / {ms(b['p99_ms'])}" if b else "–"
        if not h:
            lines.append(f"| {NAMES[p]} | {MODE_NAME[m]} | – | client failed | – | – | {base} | {att} | ? |")
            verdicts.append((p, m, None))
            continue
        succ = h["success_pct"]
        fails = sum(h["failures"].values())
        succ_s = f"{succ:.2f} %" + (f" ({fails} failed)" if fails else "")
        if succ >= min_success:
            verdict = "yes"
            if b and b["p99_ms"] and h["p99_ms"] and h["p99_ms"] > 3 * b["p99_ms"] and h["p99_ms"] - b["p99_ms"] > 10:
                verdict = f"yes, slower (p99 ×{h['p99_ms'] / b['p99_ms']:.1f})"
        else:
            verdict = f"**no** ({100 - succ:.1f} % failed)"
        verdicts.append((p, m, verdict))
        lines.append(f"| {NAMES[p]} | {MODE_NAME[m]} | {h['sent']} | {succ_s} | {ms(h['p50_ms'])} "
                     f"| {ms(h['p99_ms'])} | {base} | {att} | {verdict} |")

lines += [
    "",
    "Details per phase: honest failures by kind, longest time without a successful answer, "
    "and max latency; the attack as slowhttptest saw it (its end, most connections it held "
    "open at once, seconds its own probe got an answer within "
    f"{probe_timeout} s); the proxy as the script saw it (peak connections = open descriptors "
    "above idle, peak RSS, CPU seconds used, and how busy the whole machine was, attacker "
    "included; what it logged during the attack, honest requests "
    "left out: status and reason per request, refused connections, failed TLS handshakes; "
    "slowhttptest's probe is a GET answered 405 or 200).",
    "",
    "| phase | honest: failures · longest gap · max (keep-alive ; new conn) | slowhttptest: end · rate · max open · probe up | proxy: peak conns · RSS idle→peak · CPU | proxy log (attacker) |",
    "|---|---|---|---|---|",
]
for p in phases:
    hs = []
    for m in MODES:
        h = H[p][m]
        if not h:
            hs.append("–")
            continue
        f = ", ".join(f"{k} {v}" for k, v in sorted(h["failures"].items())) or "none"
        hs.append(f"{f} · {h['max_gap_s']:.2f} s · {ms(h['max_ms'])}")
    a = A.get(p)
    if a:
        rate_s = ""
        if a.get("opened") and a.get("ended"):
            rate_s = f" · {a['opened'] / a['ended']:.0f} conn/s opened"
        att = (f"{a.get('exit', '?')} at {a.get('ended', '?')} s{rate_s} · {a.get('max_connected', '?')} · "
               f"{a.get('probe_up', '?')}/{a.get('probe_total', '?')} s")
    else:
        att = "–"
    s = P[p]
    if "conn_peak" in s:
        busy = s.get("machine_busy_pct")
        px = (f"{s['conn_peak']} · {s['rss_idle_mb']:.0f}→{s['rss_peak_mb']:.0f} MB · "
              f"{s['cpu_s']:.1f} s in {s['wall_s']} s"
              + (f" (machine {busy:.0f} % busy)" if busy is not None else ""))
    else:
        px = "–"
    ev = ", ".join(f"{k}: {v}" for k, v in s["events"].most_common(6)) or "–"
    lines.append(f"| {NAMES[p]} | {' ; '.join(hs)} | {att} | {px} | {ev} |")
cmds = [f"- {NAMES[p]}: `{A[p]['cmd']}`" for p in phases if p in A and A[p].get("cmd")]
if cmds:
    lines += ["", "Attack commands:", ""] + cmds
lines += [
    "",
    "closed = connections the proxy closed (slowhttptest saw the close); open = still open when "
    "slowhttptest stopped (slow read: as slowhttptest sees it, which lags the proxy: the close "
    "waits behind the unread response bytes); pending = still connecting. "
    f"Service available = at least {min_success:g} % of honest requests got HTTP 200 with a "
    "JSON-RPC result; \"slower\" when p99 is over 3× the baseline's and more than 10 ms above it. "
    "Latency percentiles are "
    "over successful requests.",
]
sys.stdout.write("\n".join(lines) + "\n")
EOF
bench_results "$TMP/results.md"
