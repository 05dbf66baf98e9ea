#!/usr/bin/env bash
# Checks packaging/ without building anything (run by .ci/run; `bash packaging/check.sh` from
# anywhere):
#   1. promtool: the alert rules parse, and their unit tests (alerts_test.yml) pass;
#   2. the dashboard and the alerts use only metrics, labels and codes the edge exports
#      (check_refs.py against src/), every dashboard query parses (promtool), every alert is
#      tested, and the container policy is the shipped default with container addresses;
#   3. the systemd unit: systemd-analyze verify, and its exposure score (systemd-analyze security);
#   4. the container policy passes `a2a-edge check` when a built binary is at hand;
#   5. pgo-build.sh parses; the PGO training driver (cargo example pgo-train) trains that binary
#      for 2 s when both are built;
#   6. the container's build context (.dockerignore) holds what the Dockerfile copies and every
#      target Cargo.toml declares by path.
# promtool comes from the Debian package `prometheus`, installed when missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf -- '--- %s\n' "$*"; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

step "promtool"
if ! command -v promtool >/dev/null 2>&1; then
    if [[ $(id -u) -ne 0 ]]; then
        echo "packaging/check.sh: promtool is missing; install it (apt-get install prometheus) or run as root" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    # --no-install-recommends: promtool only, without node-exporter and its collectors.
    apt-get install -y --no-install-recommends prometheus >/dev/null 2>&1 \
        || { apt-get update >/dev/null && apt-get install -y --no-install-recommends prometheus >/dev/null; } \
        || { echo "packaging/check.sh: cannot install the Debian package prometheus (promtool)" >&2; exit 1; }
    command -v promtool >/dev/null 2>&1 \
        || { echo "packaging/check.sh: the prometheus package installed no promtool" >&2; exit 1; }
fi
promtool --version 2>&1 | head -n 1

step "promtool check rules packaging/prometheus/alerts.yml"
promtool check rules packaging/prometheus/alerts.yml

step "promtool test rules packaging/prometheus/alerts_test.yml"
promtool test rules packaging/prometheus/alerts_test.yml

step "dashboard and alerts against src/ (packaging/check_refs.py)"
python3 packaging/check_refs.py --promql-out "$tmp/dashboard-queries.yml"

step "every dashboard query parses (promtool check rules)"
promtool check rules "$tmp/dashboard-queries.yml"

step "systemd unit packaging/systemd/a2a-edge.service"
if command -v systemd-analyze >/dev/null 2>&1; then
    # verify wants every command of the unit to exist: the same unit, with a stub in place of
    # /usr/local/bin/a2a-edge.
    mkdir -p "$tmp/unit/bin"
    printf '#!/bin/sh\nexit 0\n' >"$tmp/unit/bin/a2a-edge"
    chmod 0755 "$tmp/unit/bin/a2a-edge"
    sed "s#/usr/local/bin/a2a-edge#$tmp/unit/bin/a2a-edge#g" packaging/systemd/a2a-edge.service \
        >"$tmp/unit/a2a-edge.service"
    # verify exits 0 on an unknown key or a value it cannot parse (it only warns, naming the
    # file): any line about the unit is a failure.
    status=0
    (cd "$tmp/unit" && systemd-analyze verify --man=no ./a2a-edge.service) >"$tmp/verify.out" 2>&1 || status=$?
    cat "$tmp/verify.out"
    if [[ $status -ne 0 ]] || grep -q 'a2a-edge\.service' "$tmp/verify.out"; then
        echo "packaging/check.sh: systemd-analyze verify found problems in packaging/systemd/a2a-edge.service" >&2
        exit 1
    fi
    echo "systemd-analyze verify: ok"
    if systemd-analyze security --help 2>/dev/null | grep -q -- '--offline'; then
        # Exposure on systemd's 0-10 scale (lower is better); --threshold is in tenths. The unit
        # scores 1.4 with systemd 252: fail if hardening regresses past 2.0.
        status=0
        (cd "$tmp/unit" && systemd-analyze security --offline=true --threshold=20 --no-pager ./a2a-edge.service) \
            >"$tmp/security.out" 2>&1 || status=$?
        grep 'Overall exposure level' "$tmp/security.out" || cat "$tmp/security.out"
        if [[ $status -ne 0 ]]; then
            grep '✗' "$tmp/security.out" || true
            echo "packaging/check.sh: the unit's exposure level is above 2.0" >&2
            exit 1
        fi
    else
        echo "skipped: systemd-analyze security --offline (systemd older than 250)"
    fi
else
    echo "skipped: systemd-analyze not found"
fi

step "a2a-edge check --policy packaging/container/policy.toml"
bin="${A2A_EDGE_BIN:-}"
if [[ -z $bin ]]; then
    for b in "${CARGO_TARGET_DIR:-$PWD/target}/debug/a2a-edge" "${CARGO_TARGET_DIR:-$PWD/target}/release/a2a-edge"; do
        if [[ -x $b ]]; then bin="$b"; break; fi
    done
fi
if [[ -n $bin && -x $bin ]]; then
    # From an empty directory, as in the image (WORKDIR /var/lib/a2a-edge); check writes nothing.
    mkdir -p "$tmp/workdir"
    policy="$PWD/packaging/container/policy.toml"
    status=0
    (cd "$tmp/workdir" && "$bin" check --policy "$policy") >"$tmp/check.out" 2>&1 || status=$?
    if [[ $status -ne 0 ]]; then
        cat "$tmp/check.out"
        echo "packaging/check.sh: $bin check refused the container policy" >&2
        exit 1
    fi
    head -n 4 "$tmp/check.out"
else
    echo "skipped: no a2a-edge binary (set A2A_EDGE_BIN, or cargo build first)"
fi

step "packaging/pgo-build.sh parses and explains itself (the build itself takes 15 min: not run here)"
bash -n packaging/pgo-build.sh
bash packaging/pgo-build.sh --help | grep -q 'profile-guided optimization' || {
    echo "packaging/check.sh: packaging/pgo-build.sh --help printed no usage" >&2
    exit 1
}
if bash packaging/pgo-build.sh --no-such-flag >/dev/null 2>&1; then
    echo "packaging/check.sh: packaging/pgo-build.sh accepted an unknown argument" >&2
    exit 1
fi
echo "ok"

step "the PGO training driver (cargo example pgo-train) trains that binary for 2 s"
driver="${CARGO_TARGET_DIR:-$PWD/target}/debug/examples/pgo-train"
if [[ -n $bin && -x $bin && -x $driver ]]; then
    # Its own checks: every answer as expected (a refused request refused, a SendMessage
    # answered), each process stopped by SIGTERM and exiting 0 (what writes a profile).
    status=0
    "$driver" --edge "$bin" --secs 2 --connections 4 --dir "$tmp/train" >"$tmp/train.out" 2>&1 || status=$?
    if [[ $status -ne 0 ]]; then
        cat "$tmp/train.out"
        echo "packaging/check.sh: the training driver failed against $bin" >&2
        exit 1
    fi
    grep -E '^[0-9]+ requests' "$tmp/train.out"
else
    echo "skipped: no a2a-edge binary or no $driver (cargo test builds it)"
fi

step "the container's build context (.dockerignore) holds what packaging/Dockerfile copies and cargo wants"
python3 - <<'PY'
import fnmatch, re, sys
ignore = [l.strip() for l in open(".dockerignore") if l.strip() and not l.startswith("#")]
def matches(pattern, path):
    # A line matches a path or one of its parent directories; "**/" anywhere below the root.
    parts = path.split("/")
    if pattern.startswith("**/"):
        pattern = pattern[3:]
        names = ["/".join(parts[i:j]) for i in range(len(parts)) for j in range(i + 1, len(parts) + 1)]
    else:
        names = ["/".join(parts[:j]) for j in range(1, len(parts) + 1)]
    return any(fnmatch.fnmatchcase(n, pattern) for n in names)
def admitted(path):
    # Docker's rule: the last line that matches decides; "!" admits.
    ok = True
    for line in ignore:
        if matches(line.lstrip("!"), path):
            ok = line.startswith("!")
    return ok
docker = open("packaging/Dockerfile").read()
copied = [src for m in re.finditer(r"^COPY (?!--from)(.+)$", docker, re.M) for src in m.group(1).split()[:-1]]
bad = [c for c in copied if not admitted(c)]
# Every target Cargo.toml declares by path must be inside what the image copies.
declared = re.findall(r'^path = "([^"]+)"', open("Cargo.toml").read(), re.M)
declared += [f"benches/{n}.rs" for n in re.findall(r'^\[\[bench\]\]\nname = "([^"]+)"', open("Cargo.toml").read(), re.M)]
missing = [d for d in declared if not any(d == c or d.startswith(c.rstrip("/") + "/") for c in copied)]
if bad or missing:
    sys.exit(f"packaging/check.sh: excluded by .dockerignore: {bad}; declared in Cargo.toml but not copied: {missing}")
print(f"ok: {len(copied)} COPY sources admitted, {len(declared)} declared targets copied")
PY

step "packaging: ok"
