#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Interop test: Agent Card signatures between the a2a-sdk (1.3.0, the
# reference signer/verifier, `a2a[signing]`) and a2a-edge.
#
#   1. offline: cards signed by the SDK signer (HS256, ES256, the iac-code
#      worked example) -> `a2a-edge card verify`; cards signed by
#      `a2a-edge card sign` -> the SDK verifier
#   2. served:  `a2a-edge serve` (embedded engine) signing with (a) an HS256
#      secret from the environment, (b) an ES256 key file; the SDK verifier
#      accepts the card, ES256 with the key from the proxy's
#      /.well-known/jwks.json over TLS; ETag / Cache-Control / Last-Modified, 304
#   3. iac-code: the REAL iac-code 0.16.0 signs its card (HS256, kid "default",
#      `signing-secret` in its YAML config); the proxy verifies it
#      ([card.upstream_keys]), rewrites it and re-signs it with its own ES256
#      key; the SDK verifies it through the proxy's JWKS. A proxy with the wrong
#      upstream secret serves no card (503).
#
# Env:
#   A2A_EDGE_BIN    use this binary instead of `cargo build` (debug)
#   CARD_IAC        on (default) | off: part 3 (needs tests/interop/.venv-iac)
#   READY_TIMEOUT   seconds to wait for a proxy's ready file (default 60)
#   IAC_TIMEOUT     seconds to wait for iac-code's /health (default 60)
#   CLIENT_TIMEOUT  seconds one Python helper may run (default 60)
#   PYTHON          interpreter used to create venvs (default python3)
#   INTEROP_DEBUG   non-empty: Python tracebacks; keep the temp dir
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=card-sign
# shellcheck source=lib.sh
source "$HERE/lib.sh"
VENV="$HERE/.venv" # shared with run.sh: a2a-sdk 1.3.0 (+ the signing extra)
# IAC_VENV (lib.sh) is shared with iac_code.sh: iac-code 0.16.0 + a2a-sdk 1.2.0
SDK_SPEC='a2a-sdk[signing]==1.3.0'
READY_TIMEOUT=${READY_TIMEOUT:-60}
IAC_TIMEOUT=${IAC_TIMEOUT:-60}
CLIENT_TIMEOUT=${CLIENT_TIMEOUT:-60}
PYTHON=${PYTHON:-python3}
CARD_IAC=${CARD_IAC:-on}
T_START=$SECONDS

summary() { echo "card-sign interop: $NPASS passed, $NFAIL failed, $NSKIP skipped ($((SECONDS - T_START)) s)"; }

case "$CARD_IAC" in on | off) ;; *)
    log "CARD_IAC must be on or off"
    exit 2
    ;;
esac

# ---- virtualenv with the SDK 1.3.0 and its signing extra (PyJWT, cryptography)
sdk_ok() {
    venv_has "$VENV" 'import jwt, cryptography, httpx
from a2a.utils.signing import create_agent_card_signer, create_signature_verifier' a2a-sdk==1.3.0
}
if ! sdk_ok; then
    if venv_has "$VENV" '' a2a-sdk==1.3.0; then
        log "adding the signing extra to $VENV ($SDK_SPEC)"
        pip_install "$VENV" "$SDK_SPEC"
    else
        venv_create "$VENV" "$SDK_SPEC" "$PYJWT_SPEC"
    fi
    sdk_ok || { log "a2a-sdk 1.3.0 with signing not importable after install"; exit 1; }
fi
PY="$VENV/bin/python"
no_proxies

# ---- the binary
edge_bin debug
[[ -x "$BIN" ]] || { log "binary not found or not executable: $BIN"; exit 1; }

# ---- temp dir, processes (stopped on exit, 10 s each), cleanup
make_tmp a2a-card 700
STOP_DEFAULT=10
[[ -z "${INTEROP_DEBUG:-}" ]] || TMP_KEEP="INTEROP_DEBUG: kept $TMP"

# helper: run card_sign.py (under timeout, in the background so that INT/TERM
# run the cleanup at once), count its PASS/FAIL/SKIP lines
helper() { # helper LABEL ARGS...
    local label=$1 status=0 pid
    shift
    timeout --kill-after=5 "$CLIENT_TIMEOUT" "$PY" -u "$HERE/card_sign.py" "$@" >"$TMP/helper.out" 2>"$TMP/helper.err" &
    pid=$!
    track "$pid"
    wait "$pid" || status=$?
    forget "$pid"
    cat "$TMP/helper.out"
    tally "$label" "$status" "$TMP/helper.out" ": $(tail -n 3 "$TMP/helper.err" | tr '\n' ' ')"
    if [[ -n "${INTEROP_DEBUG:-}" && -s "$TMP/helper.err" ]]; then cat "$TMP/helper.err" >&2; fi
}

verdict() { # verdict NAME WANT OUT RC [DETAIL]: PASS when the CLI printed WANT (exit 0 iff valid)
    local want_rc=1
    [[ "$2" == valid ]] && want_rc=0
    if [[ "$3" == "$2" && "$4" -eq $want_rc ]]; then
        pass "$1: $5 -> $3 (exit $4)"
    else
        fail "$1: $5 -> $3 (exit $4), expected $2 (exit $want_rc); stderr: $(head -c 300 "$TMP/verify.err" 2>/dev/null)"
    fi
}

# Secrets: random per run, exported only to the processes that need them
# (env VAR=... on the command line), never written into a policy.
EDGE_HS_SECRET=$(rand_token) # the proxy's HS256 card key (part 2a)
BEARER=$(rand_token)         # callers' token for the proxies
export K_SECRET=k           # the worked example's secret (iac-code-upstream.md §4)
export HS_SECRET=$EDGE_HS_SECRET
export EDGE_HS_SECRET

# =====================================================================
# 1. offline: SDK-signed cards -> `a2a-edge card verify`, and back
# =====================================================================
log "1. offline signatures"
mkdir -p "$TMP/offline"
OFF="$TMP/offline"
helper prepare prepare "$OFF" --hs-secret-env HS_SECRET --k-env K_SECRET
if [[ -s "$OFF/cases.tsv" ]]; then
    while IFS=$'\t' read -r file want args; do
        rc=0
        # shellcheck disable=SC2086  # args are space-separated options
        out=$("$BIN" card verify --in "$OFF/$file" $args 2>"$TMP/verify.err") || rc=$?
        verdict edge-verify-sdk-signed "$want" "$out" "$rc" "a2a-edge card verify --in $file ${args//$OFF\//}"
    done <"$OFF/cases.tsv"
else
    fail "prepare: no cases written"
fi

# a2a-edge signs the worked example byte-identically (iac-code's "jku":null header)
rc=0
"$BIN" card sign --in "$OFF/tiny.json" --kid k1 --secret-env K_SECRET --jku-null \
    --out "$OFF/edge-tiny.json" 2>"$TMP/sign.err" || rc=$?
if ((rc == 0)) && grep -q '"protected":"eyJhbGciOiJIUzI1NiIsImprdSI6bnVsbCwia2lkIjoiazEiLCJ0eXAiOiJKT1NFIn0","signature":"hTbnUvSkAFFQ2NTkMszqR_H7E8iwhpybvt5_P4NaTAg"' "$OFF/edge-tiny.json"; then
    pass "edge-sign-worked-example: a2a-edge card sign --kid k1 --jku-null reproduces the SDK's signature hTbnUvSk…TAg"
else
    fail "edge-sign-worked-example: exit $rc, $(head -c 400 "$OFF/edge-tiny.json" 2>/dev/null) $(head -c 200 "$TMP/sign.err")"
fi

# cards signed by a2a-edge -> the SDK verifier (public key from `a2a-edge card jwks`)
rc=0
{
    "$BIN" card sign --in "$OFF/raw-unsigned.json" --kid edge-hs --secret-env HS_SECRET --out "$OFF/edge-hs256.json" &&
        "$BIN" card sign --in "$OFF/raw-unsigned.json" --kid edge-es --key-file "$OFF/es256.pem" --alg ES256 \
            --out "$OFF/edge-es256.json" &&
        "$BIN" card jwks --key-file "$OFF/es256.pem" --alg ES256 --kid edge-es >"$OFF/edge-jwks.json"
} 2>"$TMP/sign.err" || rc=$?
if ((rc == 0)); then
    pass "edge-sign: a2a-edge card sign (HS256, ES256) and card jwks: $(head -c 200 "$OFF/edge-jwks.json")"
    helper verify verify "$OFF/edge-hs256.json" "$OFF/edge-es256.json" \
        --secret-env edge-hs=HS_SECRET --jwks "$OFF/edge-jwks.json"
else
    fail "edge-sign: exit $rc: $(head -c 300 "$TMP/sign.err")"
fi

# =====================================================================
# 2. the card served by a2a-edge (embedded engine): HS256 and ES256
# =====================================================================
URL_hs='' URL_es='' URL_iacgood='' URL_iacwrong='' PID_hs='' PID_es=''
start_proxy() { # start_proxy NAME POLICY ENV=VALUE... : sets URL_<NAME>, PID_<NAME>
    local name=$1 policy=$2
    shift 2
    start_edge "$policy" "$TMP/$name.ready" "$TMP/$name.log" "$@"
    printf -v "PID_$name" '%s' "$EDGE_PID"
    if ! wait_ready "$EDGE_PID" "$TMP/$name.ready"; then
        show_tail "$TMP/$name.log" "proxy $name log"
        if [[ "$READY_WHY" == exited ]]; then
            fail "proxy-start $name: exited before becoming ready"
        else
            fail "proxy-start $name: no usable ready file"
        fi
        return 1
    fi
    printf -v "URL_$name" '%s' "$READY_URL"
    pass "proxy-start $name: ready at $READY_URL"
}

card_policy() { # card_policy LISTEN PUBLIC_URL UPSTREAM_URL: callers' bearer CALLER_TOKEN
    policy_head "$TMP/certs" agent "$3" "$1" "$2"
    [[ "$3" == embedded ]] || echo 'token_env = "UPSTREAM_TOKEN"'
    cat <<EOF

[auth]
[[auth.bearer]]
principal = "caller"
token_env = "CALLER_TOKEN"
EOF
}

log "2. card served by a2a-edge (embedded engine)"
helper genkey genkey "$TMP/edge-es256.pem"
# (a) HS256, secret from the environment
{
    card_policy 127.0.0.1:0 https://127.0.0.1:0/ embedded
    cat <<EOF

[card]
max_age_secs = 45

[[card.signing_keys]]
kid = "edge-hs"
alg = "HS256"
secret_env = "EDGE_HS_SECRET"
EOF
} >"$TMP/hs.toml"
# (b) ES256, key file; a fixed port so that the header can carry the jku
ES_PORT=$(free_port)
ES_URL="https://127.0.0.1:$ES_PORT/"
{
    card_policy "127.0.0.1:$ES_PORT" "$ES_URL" embedded
    cat <<EOF

[card]
jku = "${ES_URL}.well-known/jwks.json"

[[card.signing_keys]]
kid = "edge-es"
alg = "ES256"
private_key_file = "$TMP/edge-es256.pem"
EOF
} >"$TMP/es.toml"
# the dev certificates are generated by the first proxy; start the second after it
hs_ok=0
es_ok=0
start_proxy hs "$TMP/hs.toml" CALLER_TOKEN="$BEARER" EDGE_HS_SECRET="$EDGE_HS_SECRET" && hs_ok=1
start_proxy es "$TMP/es.toml" CALLER_TOKEN="$BEARER" && es_ok=1
CA="$TMP/certs/ca.pem"
if ((hs_ok)); then
    helper served-hs256 served --label served-hs256 --url "$URL_hs" --ca "$CA" --alg HS256 \
        --kid edge-hs --secret-env EDGE_HS_SECRET
    rc=0
    out=$("$BIN" card verify --url "${URL_hs}.well-known/agent-card.json" --ca-file "$CA" \
        --secret edge-hs=EDGE_HS_SECRET 2>"$TMP/verify.err") || rc=$?
    verdict "served-hs256 edge-verify-url" valid "$out" "$rc" "a2a-edge card verify --url …/agent-card.json --ca-file ca.pem --secret edge-hs=EDGE_HS_SECRET"
fi
if ((es_ok)); then
    helper served-es256 served --label served-es256 --url "$URL_es" --ca "$CA" --alg ES256 --kid edge-es
    rc=0
    out=$("$BIN" card verify --url "${URL_es}.well-known/agent-card.json" --ca-file "$CA" \
        --jwks-url "${URL_es}.well-known/jwks.json" 2>"$TMP/verify.err") || rc=$?
    verdict "served-es256 edge-verify-url" valid "$out" "$rc" "a2a-edge card verify --url …/agent-card.json --ca-file ca.pem --jwks-url …/jwks.json"
fi
stop "${PID_hs:-}"
stop "${PID_es:-}"

# =====================================================================
# 3. the real iac-code as the upstream: verified, rewritten, re-signed
# =====================================================================
run_iac() {
    log "3. iac-code 0.16.0 upstream"
    iac_venv || { fail "iac-venv: iac-code 0.16.0 / a2a-sdk 1.2.0 not importable after install"; return; }
    mkdir -p "$TMP/iac/home" "$TMP/iac/config" "$TMP/iac/work"
    local iac_port iac_url iac_token iac_secret t0 health
    iac_port=$(free_port)
    iac_url="http://127.0.0.1:$iac_port/"
    iac_token=$(rand_token)
    iac_secret=$(rand_token)
    # iac-code's own config file: auth token and card signing secret (kid is always "default")
    (umask 077 && cat >"$TMP/iac/a2a-server.yml" <<EOF
host: 127.0.0.1
port: $iac_port
token: "$iac_token"
signing-secret: "$iac_secret"
EOF
    )
    t0=$SECONDS
    iac_code "$TMP/iac/work" HOME="$TMP/iac/home" IAC_CODE_CONFIG_DIR="$TMP/iac/config" \
        IAC_CODE_BASE_URL="http://127.0.0.1:9/v1" IAC_CODE_API_KEY=sk-unused IAC_CODE_MODEL=unused \
        "$IAC_VENV/bin/iac-code" a2a --config "$TMP/iac/a2a-server.yml" \
        >"$TMP/iac.stdout" 2>"$TMP/iac.stderr" &
    IAC_PID=$!
    track "$IAC_PID"
    health=$(iac_health "$iac_url" "$IAC_TIMEOUT" "$IAC_PID" "$iac_token") || {
        show_tail "$TMP/iac.stderr" "iac-code stderr"
        fail "iac-code-start: GET /health: $health"
        return
    }
    pass "iac-code-start: iac-code a2a --config (token, signing-secret) on $iac_url, /health -> $health after $((SECONDS - t0)) s"

    # iac-code's own card: signed? (the SKIP condition) and valid for the SDK 1.3.0 verifier
    IAC_TOKEN="$iac_token" IAC_SIGNING_SECRET="$iac_secret" \
        helper iac-upstream upstream --url "$iac_url" --token-env IAC_TOKEN --secret-env IAC_SIGNING_SECRET \
        --save "$TMP/iac-card.json"
    if grep -q '^UNSIGNED ' "$TMP/helper.out"; then
        skip "iac-code-signed-upstream: iac-code 0.16.0 served an unsigned card although its YAML config sets signing-secret ($(grep '^UNSIGNED ' "$TMP/helper.out"))"
        return
    fi
    [[ -s "$TMP/iac-card.json" ]] || return
    local rc=0 out
    out=$(IAC_SIGNING_SECRET="$iac_secret" "$BIN" card verify --in "$TMP/iac-card.json" \
        --secret default=IAC_SIGNING_SECRET 2>"$TMP/verify.err") || rc=$?
    verdict iac-card-edge-verify valid "$out" "$rc" "a2a-edge card verify --in <iac-code's own card> --secret default=IAC_SIGNING_SECRET"

    # two proxies in front of it: the right upstream secret, and a wrong one
    helper genkey genkey "$TMP/iac-edge-es256.pem"
    local section
    for section in good wrong; do
        {
            card_policy 127.0.0.1:0 https://127.0.0.1:0/ "$iac_url"
            cat <<EOF

[card]
refresh_interval_ms = 60000

[card.upstream_keys]
secrets_env = { default = "$([[ $section == good ]] && echo IAC_SIGNING_SECRET || echo IAC_WRONG_SECRET)" }

[[card.signing_keys]]
kid = "edge-iac"
alg = "ES256"
private_key_file = "$TMP/iac-edge-es256.pem"
EOF
        } >"$TMP/iac-$section.toml"
    done
    local good_ok=0 wrong_ok=0
    start_proxy iacgood "$TMP/iac-good.toml" CALLER_TOKEN="$BEARER" UPSTREAM_TOKEN="$iac_token" \
        IAC_SIGNING_SECRET="$iac_secret" && good_ok=1
    start_proxy iacwrong "$TMP/iac-wrong.toml" CALLER_TOKEN="$BEARER" UPSTREAM_TOKEN="$iac_token" \
        IAC_WRONG_SECRET="wrong-$iac_secret" && wrong_ok=1
    if ((good_ok)); then
        helper iac-served served --label iac-edge --url "$URL_iacgood" --ca "$CA" --alg ES256 --kid edge-iac \
            --internal "127.0.0.1:$iac_port" --save "$TMP/iac-edge-card.json"
        rc=0
        out=$("$BIN" card verify --url "${URL_iacgood}.well-known/agent-card.json" --ca-file "$CA" \
            --jwks-url "${URL_iacgood}.well-known/jwks.json" 2>"$TMP/verify.err") || rc=$?
        verdict "iac-edge edge-verify-url" valid "$out" "$rc" "a2a-edge card verify --url …/agent-card.json --ca-file ca.pem --jwks-url …/jwks.json"
        # the re-signed card no longer verifies with iac-code's secret (its signature was replaced)
        rc=0
        out=$(IAC_SIGNING_SECRET="$iac_secret" "$BIN" card verify --in "$TMP/iac-edge-card.json" \
            --secret default=IAC_SIGNING_SECRET 2>"$TMP/verify.err") || rc=$?
        if [[ "$out" != valid && $rc -eq 1 ]]; then
            pass "iac-edge upstream-signature-replaced: the edge's card with only iac-code's secret (kid default) -> $out (exit $rc)"
        else
            fail "iac-edge upstream-signature-replaced: $out (exit $rc)"
        fi
    fi
    if ((wrong_ok)); then
        # twice: each request without a card retries the fetch, and each must fail
        local st st2
        st=$("$PY" "$HERE/card_sign.py" status "${URL_iacwrong}.well-known/agent-card.json" --ca "$CA" 2>&1) || true
        st2=$("$PY" "$HERE/card_sign.py" status "${URL_iacwrong}.well-known/agent-card.json" --ca "$CA" 2>&1) || true
        [[ "$st2" == 503* ]] || st=$st2
        if [[ "$st" == 503* ]]; then
            pass "iac-wrong-secret-503: GET card from the proxy with the wrong upstream secret -> $st"
        else
            fail "iac-wrong-secret-503: expected 503, got $st"
        fi
        if grep -q 'signature-mismatch' "$TMP/iacwrong.log"; then
            pass "iac-wrong-secret-log: $(grep -m1 'signature-mismatch' "$TMP/iacwrong.log" | head -c 300)"
        else
            fail "iac-wrong-secret-log: no signature-mismatch in the proxy log"
            show_tail "$TMP/iacwrong.log" "proxy iacwrong log"
        fi
        if grep -qF -- "$iac_secret" "$TMP/iacwrong.log" "$TMP/iacgood.log"; then
            fail "iac-secret-not-logged: iac-code's signing secret appears in a proxy log"
        else
            pass "iac-secret-not-logged: the upstream secrets appear in no proxy log"
        fi
    fi
}
if [[ "$CARD_IAC" == on ]]; then
    run_iac
else
    skip "iac-code: CARD_IAC=off"
fi

summary
if ((NFAIL != 0)); then
    log "card-sign interop: FAILED"
    exit 1
fi
log "card-sign interop: all checks passed"
