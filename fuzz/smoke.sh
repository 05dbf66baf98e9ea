#!/usr/bin/env bash
# fuzz/smoke.sh [SECONDS]: build every cargo-fuzz target once, then run each for SECONDS
# (default 20) on a copy of its committed seed corpus (the tree stays clean). Fails on any
# crash, property violation, timeout or out-of-memory, printing the artifact and the command
# that reproduces it. Prints the executions of each target.
#
# Works on stable Rust (`-s none`: no sanitizer). Environment:
#   FUZZ_JOBS=N             targets run at once (default 2; CI machines have 2 cores)
#   FUZZ_TARGETS="a b"      run only these targets
#   FUZZ_CODEGEN_UNITS=N    codegen units of the build (default 16: a faster build for a short
#                           run; 1 is cargo-fuzz's default and runs faster)
#   FUZZ_SANITIZER=address  build with AddressSanitizer (uses RUSTC_BOOTSTRAP=1 on stable)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

secs="${1:-20}"
jobs="${FUZZ_JOBS:-2}"
cgu="${FUZZ_CODEGEN_UNITS:-16}"
sanitizer="${FUZZ_SANITIZER:-none}"
cargo_fuzz_version="0.13.2"

start=$(date +%s)
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz $cargo_fuzz_version"
    cargo install --locked cargo-fuzz --version "$cargo_fuzz_version"
fi
if [[ "$sanitizer" != none ]]; then
    export RUSTC_BOOTSTRAP=1
fi

targets=()
if [[ -n "${FUZZ_TARGETS:-}" ]]; then
    read -r -a targets <<<"$FUZZ_TARGETS"
else
    while IFS= read -r t; do targets+=("$t"); done < <(cargo fuzz list)
fi

echo "fuzz: building ${#targets[@]} targets (sanitizer $sanitizer, codegen units $cgu)"
build_start=$(date +%s)
cargo fuzz build -s "$sanitizer" --codegen-units "$cgu"
build_secs=$(($(date +%s) - build_start))
host=$(rustc -vV | sed -n 's/^host: //p')
# cargo honours CARGO_TARGET_DIR (relative to fuzz/ when relative).
target_dir="${CARGO_TARGET_DIR:-target}"
[[ "$target_dir" == /* ]] || target_dir="$PWD/$target_dir"
bin_dir="$target_dir/$host/release"

work=$(mktemp -d "${TMPDIR:-/tmp}/a2a-edge-fuzz-smoke.XXXXXX")
trap 'rm -rf "$work"' EXIT

run_one() {
    local t=$1
    mkdir -p "$work/corpus/$t" "artifacts/$t"
    if [[ -d "corpus/$t" ]]; then
        cp -R "corpus/$t/." "$work/corpus/$t/"
    fi
    local rc=0
    "$bin_dir/$t" "$work/corpus/$t" \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$PWD/artifacts/$t/" >"$work/$t.log" 2>&1 || rc=$?
    echo "$rc" >"$work/$t.rc"
}

echo "fuzz: running each target for ${secs}s, $jobs at a time"
running=0
for t in "${targets[@]}"; do
    if ((running >= jobs)); then
        wait -n || true
        running=$((running - 1))
    fi
    run_one "$t" &
    running=$((running + 1))
done
wait || true

failed=0
printf '\n%-22s %14s %10s %22s  %s\n' target executions exec/s 'cov / ft / corpus' result
for t in "${targets[@]}"; do
    rc=$(cat "$work/$t.rc" 2>/dev/null || echo 1)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log" | tail -1)
    rate=$(sed -n 's/^#[0-9]*[[:space:]]*DONE.*exec\/s: \([0-9]*\).*/\1/p' "$work/$t.log" | tail -1)
    # Coverage at the end: edges, features, corpus inputs (libFuzzer's DONE line).
    cov=$(sed -n 's/^#[0-9]*[[:space:]]*DONE[[:space:]]*cov: \([0-9]*\) ft: \([0-9]*\) corp: \([0-9]*\).*/\1 \/ \2 \/ \3/p' "$work/$t.log" | tail -1)
    if [[ "$rc" == 0 ]]; then
        result=ok
    else
        result="FAILED (exit $rc)"
        failed=1
    fi
    printf '%-22s %14s %10s %22s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "$result"
done

for t in "${targets[@]}"; do
    rc=$(cat "$work/$t.rc" 2>/dev/null || echo 1)
    [[ "$rc" == 0 ]] && continue
    echo
    echo "=== $t failed (exit $rc); the end of its log:"
    grep -v '^#[0-9]' "$work/$t.log" | tail -40
    artifact=$(sed -n "s/.*Test unit written to \(.*\)$/\1/p" "$work/$t.log" | tail -1)
    if [[ -n "$artifact" ]]; then
        echo
        echo "artifact: $artifact"
        echo "reproduce: (cd fuzz && cargo fuzz run -s $sanitizer $t $artifact)"
        echo "minimize:  (cd fuzz && cargo fuzz tmin -s $sanitizer $t $artifact)"
    fi
done

echo
echo "fuzz: build ${build_secs}s, total $(($(date +%s) - start))s"
if ((failed)); then
    echo "fuzz: FAILED"
    exit 1
fi
echo "fuzz: all ${#targets[@]} targets ran ${secs}s each without a failure"
