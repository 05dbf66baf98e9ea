# shellcheck shell=bash disable=SC2034 # BIN, TMP, READY_*, ...: set here, read by the callers
# Plumbing shared by the interop tests (tests/interop/*.sh) and the benchmarks (benches/*/run.sh).
# Sourced, never run:
#
#   LOG_TAG=interop
#   source "$HERE/lib.sh" # benches/*/run.sh: "$HERE/../../tests/interop/lib.sh"
#
# Sets ROOT, the repository. Before sourcing: LOG_TAG (the prefix of log lines). Read when set:
# PY (the interpreter for the small Python helpers; default python3), PYTHON (the one that
# creates virtualenvs; default python3), READY_TIMEOUT (default 60), CLIENT_TIMEOUT (see tally).
#
# Every function here behaves the same whether or not it runs where `set -e` is in force (for
# example on the left of `||`): a step whose failure must end the script ends it explicitly.

LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$LIB_DIR/../.." && pwd)

# ---- log lines and check results ------------------------------------------------------------

log() { printf '[%s] %s\n' "$LOG_TAG" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

NPASS=0
NFAIL=0
NSKIP=0
pass() { NPASS=$((NPASS + 1)); echo "PASS $*"; }
fail() { NFAIL=$((NFAIL + 1)); echo "FAIL $*"; }
skip() { NSKIP=$((NSKIP + 1)); echo "SKIP $*"; }
note() { echo "NOTE $*"; }

# tally LABEL STATUS OUT [DETAIL]: add the PASS/FAIL/SKIP lines of a helper's output OUT to the
# counts; FAIL LABEL when the helper timed out (STATUS 124 or 137, after CLIENT_TIMEOUT s) or
# failed (STATUS not 0) without a FAIL line of its own (DETAIL is appended to that message)
tally() {
    local label=$1 status=$2 out=$3 detail=${4:-}
    NPASS=$((NPASS + $(grep -c '^PASS ' "$out" || true)))
    NFAIL=$((NFAIL + $(grep -c '^FAIL ' "$out" || true)))
    NSKIP=$((NSKIP + $(grep -c '^SKIP ' "$out" || true)))
    if ((status == 124 || status == 137)); then
        fail "$label: timed out after ${CLIENT_TIMEOUT}s"
    elif ((status != 0)) && ! grep -q '^FAIL ' "$out"; then
        fail "$label: exited with status $status$detail"
    fi
}

# show_tail FILE LABEL [LINES]: the last LINES (default 30) lines of FILE on stderr, if it has any
show_tail() {
    local n=${3:-30}
    [[ -s "$1" ]] || return 0
    log "---- $2 (last $n lines) ----"
    tail -n "$n" "$1" >&2 || true
}

# ---- background processes, temp dir, cleanup on exit ----------------------------------------

PIDS=()                 # the background processes to stop on exit, in start order
declare -A STOP_SECS=() # PID -> seconds it gets between TERM and KILL
STOP_DEFAULT=5

# track PID [SECS]: stop PID on exit, latest first: TERM, up to SECS seconds (default
# STOP_DEFAULT), then KILL
track() {
    PIDS+=("$1")
    STOP_SECS[$1]=${2:-$STOP_DEFAULT}
}

# stop_pid PID [SECS]: TERM, wait up to SECS seconds (default 5), then KILL; reaps PID
stop_pid() {
    local pid=$1 secs=${2:-5}
    [[ -n "$pid" ]] || return 0
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 $((secs * 10))); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# forget PID: drop a reaped process from PIDS (its id may be reused)
forget() {
    local p keep=()
    for p in "${PIDS[@]}"; do [[ "$p" == "$1" ]] || keep+=("$p"); done
    PIDS=("${keep[@]}")
    unset "STOP_SECS[$1]"
}

# stop PID [SECS]: stop_pid (SECS: as tracked), then forget; nothing when PID is empty
stop() {
    [[ -n "${1:-}" ]] || return 0
    stop_pid "$1" "${2:-${STOP_SECS[$1]:-5}}"
    forget "$1"
}

# make_tmp NAME [MODE]: TMP, a new temp dir (symlinks resolved; chmod MODE when given). On exit
# (INT: 130, TERM: 143) every tracked process is stopped, latest first, and TMP is removed;
# it is kept, with the log line TMP_KEEP, when TMP_KEEP is not empty.
TMP_KEEP=
make_tmp() {
    TMP=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
    TMP=$(cd "$TMP" && pwd -P)
    [[ -z "${2:-}" ]] || chmod "$2" "$TMP"
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}
cleanup() {
    local rc=$? i
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
        stop_pid "${PIDS[i]}" "${STOP_SECS[${PIDS[i]}]:-5}"
    done
    if [[ -n "$TMP_KEEP" ]]; then
        log "$TMP_KEEP"
    else
        rm -rf "$TMP"
    fi
    exit "$rc"
}

# bench_auth_limits LIMITS: the [auth] section of the benchmarks' policies (one principal,
# "bench", its token in BENCH_TOKEN) and a [limits] section holding the lines LIMITS
bench_auth_limits() {
    printf '\n[auth]\n[[auth.bearer]]\nprincipal = "bench"\ntoken_env = "BENCH_TOKEN"\n\n[limits]\n%s\n' "$1"
}

# wait_for_line FILE REGEX PID: the first match of REGEX in FILE, printed, within
# READY_TIMEOUT s (default 60); 1 with the end of FILE when PID exits first or time runs out
wait_for_line() {
    local file=$1 re=$2 pid=$3 deadline=$((SECONDS + ${READY_TIMEOUT:-60})) line
    while ((SECONDS < deadline)); do
        if line=$(grep -m1 -oE "$re" "$file" 2>/dev/null); then
            echo "$line"
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || { log "process $pid exited; log:"; tail -n 30 "$file" >&2; return 1; }
        sleep 0.1
    done
    log "timed out after ${READY_TIMEOUT:-60}s waiting for /$re/ in $file:"
    tail -n 30 "$file" >&2
    return 1
}

# ---- the a2a-edge binary and its policies ---------------------------------------------------

# edge_bin release|debug: BIN, A2A_EDGE_BIN or the binary of that cargo profile (built first; a
# failed build ends the script). The caller checks that BIN is executable.
edge_bin() {
    if [[ -n "${A2A_EDGE_BIN:-}" ]]; then
        BIN=$A2A_EDGE_BIN
    elif [[ "$1" == release ]]; then
        log "cargo build --release"
        (cd "$ROOT" && cargo build --release --quiet) || exit
        BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/a2a-edge"
    else
        log "cargo build"
        (cd "$ROOT" && cargo build --quiet) || exit
        BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/a2a-edge"
    fi
}

# start_edge POLICY READY LOG [VAR=VALUE...]: `$BIN serve` in the background, with VAR=VALUE...
# exported to it (not on a command line) and its output in LOG; EDGE_PID, tracked
start_edge() {
    local policy=$1 ready=$2 out=$3
    shift 3
    (
        for kv in "$@"; do export "${kv?}"; done
        exec "$BIN" serve --policy "$policy" --ready-file "$ready"
    ) >"$out" 2>&1 &
    EDGE_PID=$!
    track "$EDGE_PID"
}

# policy_head DEV_DIR NAME URL [LISTEN [PUBLIC_URL [SERVER_LINE...]]]: the [server] (LISTEN,
# default 127.0.0.1:0; PUBLIC_URL, default https://127.0.0.1:0/; then the SERVER_LINEs), [tls]
# (dev certificates in DEV_DIR) and [[upstreams]] (NAME at URL) sections of a policy; the
# upstream comes last, so that the caller can add keys to it
policy_head() {
    printf '[server]\nlisten = "%s"\npublic_url = "%s"\n' "${4:-127.0.0.1:0}" "${5:-https://127.0.0.1:0/}"
    (($# <= 5)) || printf '%s\n' "${@:6}"
    printf '\n[tls]\ndev = true\ndev_dir = "%s"\n\n[[upstreams]]\nname = "%s"\nurl = "%s"\n' "$1" "$2" "$3"
}

# wait_ready PID FILE: wait up to READY_TIMEOUT s for the ready file FILE of `a2a-edge serve`
# (PID). 0 with READY_URL = its public_url; else 1 with READY_WHY (exited: PID exited, reaped
# and forgotten, its status in READY_STATUS | unparseable: FILE has had no public_url for 3 s |
# timeout) and READY_ERR, a message that says so.
wait_ready() {
    local pid=$1 file=$2 bad=0 deadline=$((SECONDS + ${READY_TIMEOUT:-60}))
    READY_URL='' READY_WHY='' READY_ERR='' READY_STATUS=''
    while ((SECONDS < deadline)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid" && READY_STATUS=0 || READY_STATUS=$?
            forget "$pid"
            READY_WHY=exited
            READY_ERR="exited with status $READY_STATUS before becoming ready"
            return 1
        fi
        if [[ -s "$file" ]]; then
            READY_URL=$("${PY:-python3}" -c 'import json, sys; print(json.load(open(sys.argv[1]))["public_url"])' \
                "$file" 2>/dev/null) || READY_URL=''
            [[ -z "$READY_URL" ]] || return 0
            # present but not (yet) parseable: allow 3 s for the write to finish
            bad=$((bad + 1))
            if ((bad > 30)); then
                READY_WHY=unparseable
                READY_ERR="ready file has no public_url: $(head -c 300 "$file")"
                return 1
            fi
        fi
        sleep 0.1
    done
    READY_WHY=timeout
    READY_ERR="no usable ready file after ${READY_TIMEOUT:-60}s"
    return 1
}

# sigterm_check PID: SIGTERM the proxy PID, which must drain and exit 0 within 15 s: PASS or
# FAIL proxy-sigterm; 1 when it did not (a proxy still running stays tracked)
sigterm_check() {
    local pid=$1 prc=''
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 150); do
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid" && prc=0 || prc=$?
            break
        fi
        sleep 0.1
    done
    if [[ -z "$prc" ]]; then
        fail "proxy-sigterm: still running 15 s after SIGTERM"
        return 1
    fi
    forget "$pid"
    if ((prc != 0)); then
        fail "proxy-sigterm: exit status $prc"
        return 1
    fi
    pass "proxy-sigterm: exited 0"
}

# ---- Python: virtualenvs and small helpers ---------------------------------------------------

# venv_has VENV IMPORTS DIST==VERSION...: VENV's python has each DIST at exactly VERSION and runs
# IMPORTS (Python statements, may be empty) without an error
venv_has() {
    local venv=$1 imports=$2
    shift 2
    [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c '
import importlib.metadata as m, sys
for pin in sys.argv[2:]:
    name, _, version = pin.partition("==")
    if m.version(name) != version:
        sys.exit(1)
exec(sys.argv[1])' "$imports" "$@" >/dev/null 2>&1
}

# pip_install VENV SPEC...: pip-install into VENV (a failure ends the script)
pip_install() {
    local venv=$1
    shift
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@" || exit
}

# venv_create VENV SPEC...: a new virtualenv VENV (made by PYTHON) with SPEC... installed
venv_create() {
    local venv=$1
    shift
    log "creating virtualenv $venv with $*"
    rm -rf "$venv"
    "${PYTHON:-python3}" -m venv "$venv" || exit
    pip_install "$venv" "$@"
}

# ensure_venv OK VENV SPEC...: unless the command OK succeeds, venv_create VENV SPEC...; 1 when
# OK fails after that
ensure_venv() {
    local ok=$1
    shift
    "$ok" && return 0
    venv_create "$@"
    "$ok"
}

# The virtualenv of the a2a-sdk 1.3.0 clients (run.sh, card_sign.sh) is tests/interop/.venv;
# identity.sh verifies the edge's identity assertions in it with PyJWT, pinned here. Every
# script that creates that venv installs PYJWT_SPEC too; identity.sh adds it to an older one.
SDK_VENV="$LIB_DIR/.venv"
PYJWT_SPEC='PyJWT[crypto]==2.15.1'

# The virtualenv of the real iac-code (iac_code.sh, card_sign.sh part 3): iac-code 0.16.0 with
# a2a-sdk 1.2.0 (1.3.0 breaks iac-code 0.16.0: encode_page_token), and httpx for the clients.
IAC_VENV="$LIB_DIR/.venv-iac"
IAC_SPECS=('iac-code[a2a]==0.16.0' 'a2a-sdk[http-server,signing]==1.2.0' httpx)
iac_venv_ok() {
    [[ -x "$IAC_VENV/bin/iac-code" ]] &&
        venv_has "$IAC_VENV" 'import httpx' iac-code==0.16.0 a2a-sdk==1.2.0
}
# iac_venv: IAC_VENV as above, made when needed; 1 when it is not usable after that
iac_venv() { ensure_venv iac_venv_ok "$IAC_VENV" "${IAC_SPECS[@]}"; }

# iac_code CWD VAR=VALUE... [iac-code] ARG...: exec iac-code with no telemetry and no
# nonessential traffic, from CWD, with VAR=VALUE... in its environment (HOME, its config dir,
# the model: IAC_CODE_BASE_URL, IAC_CODE_API_KEY, IAC_CODE_MODEL). It replaces the shell that
# runs it: start it in the background (`iac_code ... &`), and $! is iac-code itself.
iac_code() {
    cd "$1" || exit
    shift
    exec env DISABLE_TELEMETRY=1 IAC_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
        IAC_CODE_PROVIDER="OpenAI Compatible" "$@"
}

# iac_health URL TIMEOUT PID TOKEN: poll iac-code's URL/health (Bearer TOKEN, no HTTP proxy)
# until it answers, for up to TIMEOUT s: prints "STATUS BODY"; or prints why not ("exited" when
# PID is gone, "timeout (LAST ERROR)") and returns 1
iac_health() {
    IAC_TOKEN=$4 "${PY:-python3}" - "$1" "$2" "$3" <<'EOF'
import os, sys, time, urllib.request, urllib.error
url, timeout, pid = sys.argv[1] + "health", float(sys.argv[2]), int(sys.argv[3])
req = urllib.request.Request(url, headers={"Authorization": "Bearer " + os.environ["IAC_TOKEN"]})
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
deadline, last = time.monotonic() + timeout, "no answer"
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        print("exited"); sys.exit(1)
    try:
        with opener.open(req, timeout=2) as r:
            print(f"{r.status} {r.read().decode()}"); sys.exit(0)
    except urllib.error.HTTPError as e:
        last = f"HTTP {e.code}"
    except OSError as e:
        last = str(e)
    time.sleep(0.2)
print(f"timeout ({last})"); sys.exit(1)
EOF
}

# sha12 FILE: the first 12 hex digits of FILE's sha256 (how the benchmarks name a binary).
sha12() { sha256sum "$1" | cut -c1-12; }

# rand_token: 32 random bytes, base64url
rand_token() { "${PY:-python3}" -c 'import secrets; print(secrets.token_urlsafe(32))'; }

# free_port: a TCP port on 127.0.0.1 that was free a moment ago
free_port() {
    "${PY:-python3}" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# no_proxies: everything talks to 127.0.0.1 only: no HTTP proxy for any child
no_proxies() {
    unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy
    export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost
}

# ---- the benchmarks ---------------------------------------------------------------------------

# require_uints VAR...: die unless every VAR holds a non-negative integer
require_uints() {
    local v
    for v in "$@"; do
        [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer (got '${!v}')"
    done
}

# apt_install PKG...: apt-get install PKG... (as root, or with sudo), with an apt-get update when
# the first try fails; nothing without PKG
apt_install() {
    (($#)) || return 0
    log "installing $*"
    local sudo=
    if ((EUID != 0)); then
        command -v sudo >/dev/null 2>&1 || die "need root or sudo to apt-get install $*"
        sudo=sudo
    fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y -q "$@" >/dev/null ||
        { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q "$@" >/dev/null; } ||
        die "apt-get install $* failed"
}

# bench_wait_edge PID DIR: wait_ready for `a2a-edge serve` (PID, DIR/ready.json, DIR/proxy.log),
# or die with the end of its log
bench_wait_edge() {
    wait_ready "$1" "$2/ready.json" && return 0
    case $READY_WHY in
    exited)
        tail -n 30 "$2/proxy.log" >&2
        die "a2a-edge exited early"
        ;;
    unparseable) die "a2a-edge $READY_ERR" ;;
    *)
        tail -n 30 "$2/proxy.log" >&2
        die "no ready file from a2a-edge after ${READY_TIMEOUT}s"
        ;;
    esac
}

# bench_results FILE: print the results table FILE, copy it to RESULTS
bench_results() {
    cat "$1"
    cp "$1" "$RESULTS"
    log "results written to $RESULTS"
}

# bench_header TOOL...: the first line of a results file: the time, the machine, its load before
# the run (LOAD_BEFORE), the TOOLs (their versions), a2a-edge, rustc and OpenSSL
bench_header() {
    local cpu edge_v rustc_v ossl_v line tool
    cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //' || true)
    [[ -n "$cpu" ]] || cpu=$(uname -m)
    edge_v=$(cd "$ROOT" && git describe --always --dirty 2>/dev/null || echo unknown)
    rustc_v=$(rustc --version 2>/dev/null | awk '{print $1, $2}' || echo "rustc ?")
    ossl_v=$(openssl version 2>/dev/null | awk '{print $1, $2}' || echo "openssl ?")
    line="$(date -u '+%Y-%m-%d %H:%M:%S UTC') · nproc $(nproc) · CPU: $cpu · load avg before $LOAD_BEFORE"
    for tool in "$@"; do line+=" · $tool"; done
    echo "$line · a2a-edge $edge_v ($rustc_v) · $ossl_v"
}
