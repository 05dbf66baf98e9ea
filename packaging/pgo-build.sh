#!/usr/bin/env bash
# A release binary built with profile-guided optimization (PGO), issue #16: the compiler lays
# out and inlines the code by what a real run of the edge executed, not by guesses.
#
#   bash packaging/pgo-build.sh         # writes target/pgo/a2a-edge (about 15 min on 2 cores)
#
# Steps: (1) an instrumented release build (`-Cprofile-generate`); (2) training: that binary
# serves what callers send. TRAIN=driver (the default) runs packaging/pgo/train.rs (cargo
# example `pgo-train`, needs nothing but cargo): `a2a-edge engine` with `a2a-edge serve` in
# front, SendMessage, streams, GetTask, ListTasks, CancelTask, the card and refused requests
# over HTTP/1.1 and HTTP/2, bearer, Basic, API-key and JWT callers, and with redis-server on
# PATH the state in Redis too. TRAIN=bench runs the benchmarks instead (benches/load/run.sh:
# SendMessage over HTTP/1.1 and HTTP/2, engine and static upstreams, state in memory and in
# Redis; benches/streams/run.sh: SSE streams, first events; they install nginx, wrk, h2load
# and redis-server when missing). (3) the raw profiles merged with the toolchain's own
# `llvm-profdata` (rustup's `llvm-tools`, installed when missing: its LLVM must be rustc's);
# (4) the release build again with `-Cprofile-use`. Same sources, same `Cargo.lock`, same
# checks: only the code layout differs.
#
# What the training does not run (mTLS callers, push configs, reloads) is
# compiled as cold code: correct, but not tuned. Train on what your callers send if it
# differs much (TRAIN_CMD), and measure before shipping (benches/load with
# BASELINE_BIN=target/release/a2a-edge compares the two in one run).
#
# Env:
#   OUT          the optimized binary (default target/pgo/a2a-edge); its profile beside it
#                (OUT.profdata)
#   TRAIN        driver (default) or bench: what serves as the training (above)
#   TRAIN_REQUESTS driver: requests per phase (default 60000, about half a minute on 2
#                cores): the same requests in every build, however fast or busy the machine
#                (not an identical profile: what follows the scheduling still varies)
#   TRAIN_SECS   driver: seconds per phase instead of TRAIN_REQUESTS (how many requests
#                that is depends on the machine and what else runs); bench: seconds per
#                measured load run (default 8, as the benchmark)
#   TRAIN_ROUNDS bench: rounds of the load benchmark (default 1)
#   TRAIN_CMD    a command run after the training, with A2A_EDGE_BIN set to the instrumented
#                binary (e.g. a script that replays your own traffic)
#   WORK         scratch directory: raw profiles, training logs (default: a new one under
#                $TMPDIR, removed at the end)
# The two builds keep their own target directories (target/pgo-gen, target/pgo-use).
# The benchmarks install what they need (nginx, wrk, h2load, redis-server) as they do alone.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$ROOT/target/pgo/a2a-edge}
TRAIN=${TRAIN:-driver}
TRAIN_ROUNDS=${TRAIN_ROUNDS:-1}
TRAIN_REQUESTS=${TRAIN_REQUESTS:-60000}
case $TRAIN in
driver)
    if [[ -n ${TRAIN_SECS:-} ]]; then budget=(--secs "$TRAIN_SECS") && per="$TRAIN_SECS s"; else
        budget=(--requests "$TRAIN_REQUESTS") && per="$TRAIN_REQUESTS requests"
    fi
    ;;
bench) TRAIN_SECS=${TRAIN_SECS:-8} ;;
*) echo "[pgo] error: TRAIN is driver or bench, not '$TRAIN'" >&2 && exit 1 ;;
esac
TRAIN_CMD=${TRAIN_CMD:-}
log() { echo "[pgo] $*" >&2; }
die() {
    log "error: $*"
    exit 1
}
case ${1:-} in
-h | --help)
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
    exit 0
    ;;
"") ;;
*) die "unknown argument: $1 (no arguments; see --help)" ;;
esac
if [[ -n "${WORK:-}" ]]; then
    mkdir -p "$WORK"
else
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/a2a-edge-pgo.XXXXXX")
    trap 'rm -rf "$WORK"' EXIT
fi
rm -rf "$WORK/raw"
# Build caches of their own (kept between runs: only what changed is built again).
TARGETS=${CARGO_TARGET_DIR:-$ROOT/target}
started=$SECONDS

# ---- the toolchain's llvm-profdata
host=$(rustc -vV | sed -n 's/^host: //p')
PROFDATA="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
if [[ ! -x "$PROFDATA" ]]; then
    log "rustup component add llvm-tools (llvm-profdata of rustc's LLVM)"
    rustup component add llvm-tools >&2 || die "cannot install llvm-tools; PGO needs llvm-profdata of rustc's own LLVM version"
fi
[[ -x "$PROFDATA" ]] || die "no $PROFDATA"

# ---- 1. instrumented build
log "instrumented build (-Cprofile-generate)"
(cd "$ROOT" && RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-generate=$TARGETS/pgo-gen/profraw" \
    cargo build --release --locked --quiet --bin a2a-edge --target-dir "$TARGETS/pgo-gen") ||
    die "the instrumented build failed"
GEN="$TARGETS/pgo-gen/release/a2a-edge"
# Every process the benchmarks start (edges, engines) writes its profile here at exit.
export LLVM_PROFILE_FILE="$WORK/raw/a2a-edge-%p-%m.profraw"

# ---- 2. training
if [[ $TRAIN == driver ]]; then
    # The driver is a client: built without instrumentation, in the debug profile (its speed
    # only sets how many requests the training sees).
    log "building the training driver (cargo example pgo-train)"
    (cd "$ROOT" && cargo build --locked --quiet --example pgo-train --target-dir "$TARGETS") ||
        die "the training driver did not build"
    redis=()
    if command -v redis-server >/dev/null 2>&1; then redis=(--redis); fi
    log "training: pgo-train, $per per phase (state in memory${redis:+, then in Redis})"
    "$TARGETS/debug/examples/pgo-train" --edge "$GEN" \
        "${budget[@]}" "${redis[@]}" --dir "$WORK/train" >"$WORK/train.log" 2>&1 ||
        die "training (pgo-train) failed: $(tail -20 "$WORK/train.log")"
    sed 's/^/[pgo]   /' "$WORK/train.log" >&2
else
    log "training: benches/load/run.sh --rounds $TRAIN_ROUNDS (the edges only)"
    DURATION=$TRAIN_SECS A2A_EDGE_BIN=$GEN RESULTS="$WORK/load.md" ONLY='a2a-edge(-redis)?-(engine|static)' \
        bash "$ROOT/benches/load/run.sh" --rounds "$TRAIN_ROUNDS" >"$WORK/load.log" 2>&1 ||
        die "training (benches/load/run.sh) failed: $(tail -5 "$WORK/load.log")"
    log "training: benches/streams/run.sh (200 streams, first-event latency)"
    A2A_EDGE_BIN=$GEN RESULTS="$WORK/streams.md" PHASES="upstream latency" STREAMS=200 \
        bash "$ROOT/benches/streams/run.sh" >"$WORK/streams.log" 2>&1 ||
        die "training (benches/streams/run.sh) failed: $(tail -5 "$WORK/streams.log")"
fi
if [[ -n "$TRAIN_CMD" ]]; then
    log "training: $TRAIN_CMD"
    A2A_EDGE_BIN=$GEN bash -c "$TRAIN_CMD" >"$WORK/train-cmd.log" 2>&1 ||
        die "TRAIN_CMD failed: $(tail -5 "$WORK/train-cmd.log")"
fi
shopt -s nullglob
raw=("$WORK"/raw/*.profraw)
((${#raw[@]})) || die "the training left no profile in $WORK/raw (did the edges exit normally?)"

# ---- 3. merge
mkdir -p "$(dirname "$OUT")"
"$PROFDATA" merge -o "$OUT.profdata" "${raw[@]}" || die "llvm-profdata merge failed"

# ---- 4. optimized build
log "optimized build (-Cprofile-use)"
(cd "$ROOT" && RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-use=$OUT.profdata" \
    cargo build --release --locked --quiet --bin a2a-edge --target-dir "$TARGETS/pgo-use") ||
    die "the optimized build failed"
install -m 0755 "$TARGETS/pgo-use/release/a2a-edge" "$OUT"
"$OUT" --version >/dev/null 2>&1 || "$OUT" --help >/dev/null 2>&1 || die "$OUT does not run"
log "wrote $OUT (profile $OUT.profdata; $(((SECONDS - started) / 60)) min)"
