#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Memory benchmark: the RSS (and, for the cleaning phase, the CPU) of `a2a-edge serve` (release
# build, TLS, bearer auth) in front of a hostile Python agent (benches/memory/agent.py, plain
# HTTP on 127.0.0.1), under the attacks an external review found:
#
#   listtasks    10 tasks of ~12 MB each (the agent's GetTask), 10 concurrent ListTasks
#                (pageSize 100, includeArtifacts), a few rounds
#   listtasks_fit the same with tasks just under the 4 MiB page budget (4 texts of 1 MiB - 256
#                bytes): one per page, pages end with a nextPageToken, listings followed to the end
#   slowreaders  20 SubscribeToTask streams of ~12 MB whose clients never read
#   slowgets     64 concurrent GetTask of one ~12 MB task whose clients never read (what the
#                proxy holds of unary answers; not in the default PHASES)
#   cleaning     answers whose metadata holds one ~100k-segment dotted key over ~50k child keys:
#                proxy CPU per answer, /health latency during 2 concurrent answers
#   card         the agent's card is not JSON; 200 concurrent public GETs of the card
#   throttle     20,000 wrong-token requests from distinct X-Forwarded-For IPv4 addresses, then
#                300 from one IPv6 /64
#
# Each phase gets a fresh agent and a fresh proxy. A sampler reads the proxy's VmRSS every
# 50 ms; the driver (benches/memory/drive.py) reads it before and after its attack. Prints a
# Markdown table (also written to benches/memory/results.md).
#
# Env:
#   PHASES          phases to run, in order (default "listtasks listtasks_fit slowreaders cleaning
#                   card throttle values")
#   AFTER           seconds after a phase's attack before "after" is read (default 3)
#   SAMPLE_INTERVAL RSS sampling interval in seconds (default 0.05)
#   LIST_TASKS, LIST_TASK_MB, LIST_CONCURRENCY, LIST_ROUNDS
#                   listtasks: tasks, MB per task, concurrent ListTasks, rounds (10, 12, 10, 3)
#   LIST_FIT_TASK_MB  listtasks_fit: MB per task (4: just under limits.list_tasks_page_bytes)
#   LIST_FRESH_TIMESTAMPS  1: the agent's GetTask gives each task a new status timestamp (a task
#                   that changed since the proxy last saw it), 0: the one of its SendMessage answer
#   STREAMS, STREAM_EVENTS, STREAM_EVENT_KB, STALL_SECS, STALL_RCVBUF
#                   slowreaders: streams (20), events per stream (12) of KiB (1024), how long the
#                   stalled clients stay connected (12 s), their SO_RCVBUF (0: the default)
#   STREAM_IDLE_TIMEOUT_MS  the proxy's [limits] stream_idle_timeout_ms (5000)
#   SLOW_GETS       slowgets: concurrent GetTask (64); the task is LIST_TASK_MB, the wait STALL_SECS
#   META_SEGMENTS, META_CHILDREN, CLEAN_ANSWERS, CLEAN_SENDERS, HEALTH_SECS
#                   cleaning: dotted key segments (100000), child keys (50000), answers timed one
#                   after another (10), concurrent answer loops while /health is probed (2) and
#                   for how long (5 s)
#   CARD_REQUESTS, CARD_BURSTS   card: concurrent GETs per burst (200), bursts (1; 1.5 s apart)
#   VALUES_BODY_MB, VALUES_CONCURRENCY, VALUES_ROUNDS
#                   values: SendMessage bodies of that many MiB of small JSON values (`[0,0,...]`
#                   in a data part: 32), sent this many at once (4), rounds (3)
#   VALUES_SHAPE, VALUES_COUNT
#                   values: zeros (the above), or within the value bound VALUES_COUNT one-item
#                   arrays `[[0],...]` (nested) or object members `{"k0":0,...}` (keys) (500000)
#   THROTTLE_REQUESTS, THROTTLE_V6_REQUESTS, THROTTLE_SWEEP_REQUESTS, THROTTLE_WORKERS
#                   throttle: one-shot IPv4 failures (20000), /64 failures (300), failures from
#                   new addresses after the block so the limiters sweep (1100: a sweep runs every
#                   1024 checks), keep-alive connections (16)
#   A2A_EDGE_BIN    use this binary instead of `cargo build --release`
#   RESULTS         output file (default benches/memory/results.md)
#   READY_TIMEOUT   seconds to wait for the proxy to come up (default 60)
#   KEEP_TMP        1: keep the temp dir (proxy logs, samples, per-phase JSON) for a look
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=memory
# shellcheck source=../../tests/interop/lib.sh
source "$HERE/../../tests/interop/lib.sh"
PHASES=${PHASES:-listtasks listtasks_fit slowreaders cleaning card throttle values}
AFTER=${AFTER:-3}
SAMPLE_INTERVAL=${SAMPLE_INTERVAL:-0.05}
LIST_TASKS=${LIST_TASKS:-10}
LIST_TASK_MB=${LIST_TASK_MB:-12}
LIST_CONCURRENCY=${LIST_CONCURRENCY:-10}
LIST_ROUNDS=${LIST_ROUNDS:-3}
LIST_FRESH_TIMESTAMPS=${LIST_FRESH_TIMESTAMPS:-0}
LIST_FIT_TASK_MB=${LIST_FIT_TASK_MB:-4}
STREAMS=${STREAMS:-20}
SLOW_GETS=${SLOW_GETS:-64}
STREAM_EVENTS=${STREAM_EVENTS:-12}
STREAM_EVENT_KB=${STREAM_EVENT_KB:-1024}
STALL_SECS=${STALL_SECS:-12}
STALL_RCVBUF=${STALL_RCVBUF:-0}
STREAM_IDLE_TIMEOUT_MS=${STREAM_IDLE_TIMEOUT_MS:-5000}
META_SEGMENTS=${META_SEGMENTS:-100000}
META_CHILDREN=${META_CHILDREN:-50000}
CLEAN_ANSWERS=${CLEAN_ANSWERS:-10}
CLEAN_SENDERS=${CLEAN_SENDERS:-2}
HEALTH_SECS=${HEALTH_SECS:-5}
CARD_REQUESTS=${CARD_REQUESTS:-200}
CARD_BURSTS=${CARD_BURSTS:-1}
THROTTLE_REQUESTS=${THROTTLE_REQUESTS:-20000}
THROTTLE_V6_REQUESTS=${THROTTLE_V6_REQUESTS:-300}
THROTTLE_SWEEP_REQUESTS=${THROTTLE_SWEEP_REQUESTS:-1100}
THROTTLE_WORKERS=${THROTTLE_WORKERS:-16}
VALUES_BODY_MB=${VALUES_BODY_MB:-32}
VALUES_CONCURRENCY=${VALUES_CONCURRENCY:-4}
VALUES_ROUNDS=${VALUES_ROUNDS:-3}
VALUES_SHAPE=${VALUES_SHAPE:-zeros}
VALUES_COUNT=${VALUES_COUNT:-500000}
RESULTS=${RESULTS:-$HERE/results.md}
READY_TIMEOUT=${READY_TIMEOUT:-60}

require_uints LIST_TASKS LIST_CONCURRENCY LIST_ROUNDS STREAMS STREAM_EVENTS STREAM_EVENT_KB \
    STALL_RCVBUF STREAM_IDLE_TIMEOUT_MS META_SEGMENTS META_CHILDREN CLEAN_ANSWERS CLEAN_SENDERS \
    CARD_REQUESTS CARD_BURSTS THROTTLE_REQUESTS THROTTLE_V6_REQUESTS THROTTLE_SWEEP_REQUESTS \
    THROTTLE_WORKERS VALUES_CONCURRENCY VALUES_ROUNDS VALUES_COUNT READY_TIMEOUT
case $VALUES_SHAPE in zeros | nested | keys) ;; *) die "VALUES_SHAPE must be zeros, nested or keys (got '$VALUES_SHAPE')" ;; esac
for v in AFTER SAMPLE_INTERVAL LIST_TASK_MB LIST_FIT_TASK_MB STALL_SECS HEALTH_SECS VALUES_BODY_MB; do
    [[ ${!v} =~ ^[0-9]*\.?[0-9]+$ ]] || die "$v must be a number (got '${!v}')"
done
((LIST_TASKS > 0 && LIST_CONCURRENCY > 0 && LIST_ROUNDS > 0 && STREAMS > 0 && SLOW_GETS > 0 && CLEAN_ANSWERS > 0 &&
    CARD_REQUESTS > 0 && CARD_BURSTS > 0 && THROTTLE_WORKERS > 0 && STREAM_IDLE_TIMEOUT_MS > 0 &&
    VALUES_CONCURRENCY > 0 && VALUES_ROUNDS > 0 && VALUES_COUNT > 0)) ||
    die "counts must be > 0"
for p in $PHASES; do
    case $p in listtasks | listtasks_fit | slowreaders | slowgets | cleaning | card | throttle | values) ;;
    *) die "unknown phase '$p' in PHASES (listtasks listtasks_fit slowreaders slowgets cleaning card throttle values)" ;;
    esac
done

# ---- tools
need_apt=()
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
apt_install "${need_apt[@]}"
no_proxies
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# ---- binary
edge_bin release
[[ -x "$BIN" ]] || die "binary not found or not executable: $BIN"
HEAD_AT_START=$(cd "$ROOT" && git describe --always --dirty 2>/dev/null || echo unknown)

# ---- temp dir and cleanup
make_tmp a2a-memory
[[ ${KEEP_TMP:-0} != 1 ]] || TMP_KEEP="kept $TMP (KEEP_TMP=1)"
BENCH_TOKEN=$(rand_token)
export BENCH_TOKEN

# ---- policy: one principal; its rate far above the attacks so that 429s do not hide what the
# proxy holds (the per-address defaults stay: they are part of what is under test)
LIMITS="requests_per_second = 10000
burst = 10000
stream_idle_timeout_ms = $STREAM_IDLE_TIMEOUT_MS"
write_policy() { # phase agent_port file
    {
        policy_head "$TMP/certs" hostile "http://127.0.0.1:$2/" 127.0.0.1:0 https://127.0.0.1:0/ \
            "drain_timeout_ms = 2000"
        bench_auth_limits "$LIMITS"
        if [[ $1 == throttle ]]; then
            printf '\n[network]\ntrusted_proxies = ["127.0.0.1/32"]\n'
        fi
    } >"$3"
    "$BIN" check --policy "$3" >"${3%.toml}.check.txt" 2>&1 ||
        { cat "${3%.toml}.check.txt" >&2; die "a2a-edge check refused the $1 policy"; }
}

# ---- one phase: a fresh agent, a fresh proxy, the sampler, the driver
AGENT_PID=
list_task_mb() { if [[ $1 == listtasks_fit ]]; then echo "$LIST_FIT_TASK_MB"; else echo "$LIST_TASK_MB"; fi; }
start_agent() { # phase dir
    local -a knobs=()
    case $1 in
    listtasks | listtasks_fit | slowgets)
        knobs=(--task-mb "$(list_task_mb "$1")")
        [[ $LIST_FRESH_TIMESTAMPS != 1 ]] || knobs+=(--fresh-timestamps)
        ;;
    slowreaders) knobs=(--events "$STREAM_EVENTS" --event-kb "$STREAM_EVENT_KB") ;;
    cleaning) knobs=(--meta-segments "$META_SEGMENTS" --meta-children "$META_CHILDREN") ;;
    esac
    local mode=${1%_fit}
    [[ $mode != slowgets ]] || mode=listtasks
    python3 "$HERE/agent.py" --mode "$mode" --port-file "$2/agent.port" "${knobs[@]}" >"$2/agent.log" 2>&1 &
    AGENT_PID=$!
    track "$AGENT_PID" 2
    for _ in $(seq 1 300); do
        [[ -s "$2/agent.port" ]] && return 0
        kill -0 "$AGENT_PID" 2>/dev/null || { cat "$2/agent.log" >&2; die "the $1 agent exited"; }
        sleep 0.1
    done
    die "the $1 agent wrote no port file in 30 s"
}
smoke() { # dir url
    local out="$1/smoke.json" code
    code=$(curl -sS -o "$out" -w '%{http_code}' --max-time 10 --cacert "$TMP/certs/ca.pem" \
        -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' -H "Authorization: Bearer $BENCH_TOKEN" \
        --data '{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}' "$2") || code=curl-failed
    if [[ $code != 200 ]] || ! grep -q '"result"' "$out"; then
        die "smoke ListTasks failed: HTTP $code, body: $(head -c 300 "$out" 2>/dev/null)"
    fi
}
phase_args() { # phase
    case $1 in
    listtasks | listtasks_fit) echo "--tasks $LIST_TASKS --task-mb $(list_task_mb "$1") --concurrency $LIST_CONCURRENCY --rounds $LIST_ROUNDS" ;;
    slowreaders) echo "--streams $STREAMS --stall-secs $STALL_SECS --rcvbuf $STALL_RCVBUF --events $STREAM_EVENTS --event-kb $STREAM_EVENT_KB" ;;
    slowgets) echo "--streams $SLOW_GETS --stall-secs $STALL_SECS --rcvbuf $STALL_RCVBUF --task-mb $LIST_TASK_MB" ;;
    cleaning) echo "--answers $CLEAN_ANSWERS --senders $CLEAN_SENDERS --health-secs $HEALTH_SECS --meta-segments $META_SEGMENTS --meta-children $META_CHILDREN" ;;
    card) echo "--requests $CARD_REQUESTS --bursts $CARD_BURSTS" ;;
    values) echo "--body-mb $VALUES_BODY_MB --concurrency $VALUES_CONCURRENCY --rounds $VALUES_ROUNDS --values-shape $VALUES_SHAPE --values-count $VALUES_COUNT" ;;
    throttle) echo "--requests $THROTTLE_REQUESTS --v6-requests $THROTTLE_V6_REQUESTS --sweep-requests $THROTTLE_SWEEP_REQUESTS --workers $THROTTLE_WORKERS" ;;
    esac
}
run_phase() { # phase
    local phase=$1 dir="$TMP/$1" port sampler drv_rc=0
    mkdir -p "$dir"
    start_agent "$phase" "$dir"
    port=$(cat "$dir/agent.port")
    write_policy "$phase" "$port" "$dir/policy.toml"
    start_edge "$dir/policy.toml" "$dir/ready.json" "$dir/proxy.log"
    bench_wait_edge "$EDGE_PID" "$dir"
    [[ -s "$TMP/certs/ca.pem" ]] || die "dev CA $TMP/certs/ca.pem missing"
    smoke "$dir" "$READY_URL"
    python3 "$HERE/drive.py" sample --pid "$EDGE_PID" --out "$dir/samples.txt" --interval "$SAMPLE_INTERVAL" &
    sampler=$!
    track "$sampler" 1
    log "$phase: agent on 127.0.0.1:$port, proxy $READY_URL (pid $EDGE_PID)"
    local -a args
    read -r -a args <<<"$(phase_args "$phase")"
    python3 "$HERE/drive.py" "$phase" --url "$READY_URL" --cacert "$TMP/certs/ca.pem" --pid "$EDGE_PID" \
        --samples "$dir/samples.txt" --agent "http://127.0.0.1:$port/" --log "$dir/proxy.log" \
        --after "$AFTER" --out "$dir/result.json" "${args[@]}" || drv_rc=$?
    if ! kill -0 "$EDGE_PID" 2>/dev/null; then
        tail -n 20 "$dir/proxy.log" >&2
        die "a2a-edge died during the $phase phase; no results written"
    fi
    ((drv_rc == 0)) || { tail -n 20 "$dir/proxy.log" >&2; die "the $phase driver failed (status $drv_rc)"; }
    stop "$EDGE_PID"
    stop "$sampler"
    stop "$AGENT_PID"
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
START=$SECONDS
files=()
for p in $PHASES; do
    run_phase "$p"
    files+=("$TMP/$p/result.json")
done
RUNTIME=$((SECONDS - START))

# ---- header and table
header="$(bench_header "$(python3 --version 2>&1)") · binary $BIN (tree $HEAD_AT_START at the start) · run ${RUNTIME} s"
note="Each phase: a fresh hostile agent (benches/memory/agent.py) and a fresh \`a2a-edge serve\` (TLS, one bearer principal) in front of it, policy \`[limits]\` $(echo "$LIMITS" | sed 's/ = /=/' | paste -sd, - | sed 's/,/, /g'), everything else at its default; the throttle phase adds \`[network] trusted_proxies = [\"127.0.0.1/32\"]\`. Samples every ${SAMPLE_INTERVAL} s; after = ${AFTER} s after the attack."
python3 "$HERE/drive.py" report --header "$header" --policy-note "$note" "${files[@]}" >"$TMP/results.md"
bench_results "$TMP/results.md"
log "total runtime ${RUNTIME} s"
