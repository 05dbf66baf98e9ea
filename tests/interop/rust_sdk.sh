#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Interop test: the official Rust A2A SDK (a2a-client-lf 0.2.9) resolves the Agent Card the
# edge serves with the shipped default setup (embedded engine, dev certificates). The SDK
# refuses a whole card for one missing required field (it refused `provider` without `url`).
#
# Env:
#   A2A_EDGE_BIN   use this binary instead of `cargo build --release`
#   READY_TIMEOUT  seconds to wait for the proxy's ready file (default 60)
#   RUST_SDK_TARGET cargo target dir of the check (default: a dir under CARGO_TARGET_DIR or target/)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_TAG=rust-sdk
# shellcheck source=lib.sh
source "$HERE/lib.sh"
READY_TIMEOUT=${READY_TIMEOUT:-60}
TARGET=${RUST_SDK_TARGET:-${CARGO_TARGET_DIR:-$ROOT/target}/rust-sdk-check}

summary() { echo "rust-sdk: $NPASS passed, $NFAIL failed"; }

log "building the check (a2a-client-lf 0.2.9; tests/interop/rust_sdk/)"
(cd "$HERE/rust_sdk" && CARGO_TARGET_DIR="$TARGET" cargo build --release --locked --quiet) ||
    die "the Rust SDK check did not build"
CHECK="$TARGET/release/a2a-edge-rust-sdk-check"

edge_bin release
[[ -x "$BIN" ]] || die "binary not found or not executable: $BIN"
make_tmp a2a-rust-sdk

TOKEN=$(rand_token)
{
    policy_head "$TMP/certs" engine embedded
    printf '\n[auth]\n[[auth.bearer]]\nprincipal = "rust-sdk"\ntoken_env = "RUST_SDK_TOKEN"\n'
} >"$TMP/policy.toml"
start_edge "$TMP/policy.toml" "$TMP/ready.json" "$TMP/proxy.log" "RUST_SDK_TOKEN=$TOKEN"
if ! wait_ready "$EDGE_PID" "$TMP/ready.json"; then
    show_tail "$TMP/proxy.log" "proxy log" 40
    fail "proxy-start: $READY_ERR"
    summary
    exit 1
fi
pass "proxy-start: ready at $READY_URL"

if out=$("$CHECK" "$READY_URL" "$TMP/certs/ca.pem" 2>&1); then
    pass "${out#PASS }"
else
    fail "rust-sdk-card: ${out#FAIL }"
fi
summary
((NFAIL == 0))
