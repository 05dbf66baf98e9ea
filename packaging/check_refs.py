#!/usr/bin/env python3
"""Keeps packaging/ in step with the code (run by packaging/check.sh; standard library only).

- The Grafana dashboard parses, every panel (rows aside) has targets and the ${DS_PROMETHEUS}
  data source, ids are unique and panels do not overlap.
- Every metric name in a dashboard query, an alert rule or an alert test series is one the edge
  exports (it appears in src/), every label name is one src/telemetry/metrics.rs writes (or a
  target label: job, instance), and every literal label value (`reason="ok"`,
  `kind="contexts"`) appears as a string in src/ (for kind, why and result: is one of the
  values metrics.rs enumerates), so a renamed metric, label or code fails here.
- Every alert in alerts.yml has a test in alerts_test.yml.
- packaging/container/policy.toml is policies/default.toml with only the listen addresses changed.
- With --promql-out FILE: writes every dashboard query (Grafana variables replaced) as a
  recording rule, for `promtool check rules` to parse.
"""
import argparse
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = ROOT / "packaging"
DASHBOARD = PKG / "grafana" / "a2a-edge.json"
ALERTS = PKG / "prometheus" / "alerts.yml"
ALERT_TESTS = PKG / "prometheus" / "alerts_test.yml"

# Labels Prometheus adds to every target, and the histogram bucket label.
TARGET_LABELS = {"job", "instance"}
# Metrics that are not the edge's own.
FOREIGN_METRICS = {"up"}
# Labels whose values are names an operator chooses (or numbers), not codes in src/.
FREE_VALUES = {"job", "instance", "upstream", "status", "le", "version", "alertname", "severity"}
PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
    "bool", "offset",
}

errors = []


def fail(msg):
    errors.append(msg)


def src_facts():
    text = "\n".join(p.read_text() for p in sorted((ROOT / "src").rglob("*.rs")))
    metrics = set(re.findall(r"\ba2a_edge_[a-z0-9_]+", text))
    literals = set(re.findall(r'"((?:[^"\\]|\\.)*)"', text))
    mtext = (ROOT / "src" / "telemetry" / "metrics.rs").read_text()
    labels = set()
    for seg in re.findall(r"&\[(.*?)\]", mtext, flags=re.S):
        labels.update(re.findall(r'\(\s*"([a-z_]+)"\s*,', seg))
    # Labels whose values metrics.rs enumerates itself: `for (kind, n) in [("tasks", ..), ..]`.
    enums = {}
    for label, seg in re.findall(r"for \((\w+), \w+\) in \[(.*?)\]", mtext, flags=re.S):
        if label in labels:
            enums.setdefault(label, set()).update(re.findall(r'\(\s*"([a-z_]+)"\s*,', seg))
    if not metrics or not labels or not enums:
        sys.exit("check_refs: found no a2a_edge_ metrics or labels in src/: is this the repository?")
    literals = (literals, enums)
    return metrics, labels | TARGET_LABELS | {"le"}, literals


def check_expr(where, expr, metrics, labels, literals):
    expr_no_strings = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    for name in re.findall(r"\ba2a_edge_[a-zA-Z0-9_]+", expr_no_strings):
        # A histogram registered in src/ is scraped as its _bucket, _sum and _count series.
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        if name not in metrics and family not in metrics:
            fail(f"{where}: metric {name} is not exported by the edge (not found in src/)")
    # Any other selector written name{...}.
    for name in re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{", expr_no_strings):
        if not name.startswith("a2a_edge_") and name not in FOREIGN_METRICS and name not in PROMQL_WORDS:
            fail(f"{where}: selector {name}{{...}} is neither an a2a-edge metric nor one of {sorted(FOREIGN_METRICS)}")
    for body in re.findall(r"\{([^{}]*)\}", expr):
        for label, op, value in re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"', body):
            if label not in labels:
                fail(f"{where}: label {label} is not one the edge writes ({sorted(labels)})")
            strings, enums = literals
            if op not in ("=", "!=") or label in FREE_VALUES or "$" in value:
                continue
            if label in enums and value not in enums[label]:
                fail(f'{where}: {label}="{value}": metrics.rs writes only {sorted(enums[label])}')
            elif value not in strings:
                fail(f'{where}: {label}="{value}": no such string in src/ (a renamed code?)')
    for group in re.findall(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", expr_no_strings):
        for label in re.findall(r"[a-zA-Z_][a-zA-Z0-9_]*", group):
            if label not in labels:
                fail(f"{where}: grouping label {label} is not one the edge writes")


def yaml_exprs(path):
    """(line, expr) of every `expr:` in a rules file, without a YAML library: a plain scalar on
    the line, or a `|`/`>` block below it."""
    lines = path.read_text().splitlines()
    out = []
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)(?:-\s+)?expr:\s*(.*)$", lines[i])
        if not m:
            i += 1
            continue
        indent, value = len(m.group(1)), m.group(2).strip()
        start = i + 1
        if value[:1] in ("|", ">"):
            block = []
            i += 1
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
                block.append(lines[i].strip())
                i += 1
            out.append((start, " ".join(block)))
            continue
        if value[:1] in ("'", '"'):
            value = value[1:-1].replace("''", "'") if value[0] == "'" else json.loads(value)
        out.append((start, value))
        i += 1
    return out


def test_series(path):
    """(line, series) of every input series of a promtool test file."""
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        m = re.match(r"^\s*-?\s*series:\s*(.*)$", line)
        if m:
            v = m.group(1).strip()
            if v[:1] == '"':
                v = json.loads(v)
            elif v[:1] == "'":
                v = v[1:-1].replace("''", "'")
            out.append((n, v))
    return out


def grafana_exprs(dash):
    """(where, expr) of every query: panel targets, templating queries, annotations."""
    out = []
    for p in dash.get("panels", []):
        for t in p.get("targets", []):
            out.append((f"panel {p.get('id')} {p.get('title')!r} target {t.get('refId')}", t.get("expr", "")))
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v.get("query")
            q = q.get("query", "") if isinstance(q, dict) else (q or "")
            out.append((f"variable {v.get('name')}", q))
    for a in dash.get("annotations", {}).get("list", []):
        if a.get("expr"):
            out.append((f"annotation {a.get('name')!r}", a["expr"]))
    return out


def check_dashboard(metrics, labels, literals, promql_out):
    try:
        dash = json.loads(DASHBOARD.read_text())
    except (OSError, ValueError) as e:
        fail(f"{DASHBOARD}: {e}")
        return
    variables = {v.get("name") for v in dash.get("templating", {}).get("list", [])}
    if "DS_PROMETHEUS" not in variables:
        fail(f"{DASHBOARD}: no DS_PROMETHEUS data source variable")
    ids, boxes = set(), []
    for p in dash.get("panels", []):
        pid, title = p.get("id"), p.get("title")
        if pid in ids:
            fail(f"{DASHBOARD}: panel id {pid} used twice")
        ids.add(pid)
        g = p.get("gridPos") or {}
        if not all(isinstance(g.get(k), int) for k in ("x", "y", "w", "h")):
            fail(f"{DASHBOARD}: panel {pid} {title!r} has no complete gridPos")
            continue
        if g["x"] + g["w"] > 24:
            fail(f"{DASHBOARD}: panel {pid} {title!r} is wider than the grid")
        for other, og in boxes:
            if g["x"] < og["x"] + og["w"] and og["x"] < g["x"] + g["w"] and g["y"] < og["y"] + og["h"] and og["y"] < g["y"] + g["h"]:
                fail(f"{DASHBOARD}: panel {pid} {title!r} overlaps panel {other}")
        boxes.append((pid, g))
        if p.get("type") == "row":
            continue
        targets = p.get("targets") or []
        if not targets or not all(t.get("expr", "").strip() for t in targets):
            fail(f"{DASHBOARD}: panel {pid} {title!r} has no target, or a target without expr")
        for d in [p.get("datasource")] + [t.get("datasource") for t in targets]:
            if not isinstance(d, dict) or d.get("uid") != "${DS_PROMETHEUS}":
                fail(f"{DASHBOARD}: panel {pid} {title!r}: data source is not ${{DS_PROMETHEUS}}")
                break
    exprs = grafana_exprs(dash)
    for where, expr in exprs:
        check_expr(f"{DASHBOARD.name}: {where}", expr, metrics, labels, literals)
    if promql_out:
        rules = ["groups:", "  - name: dashboard-queries", "    rules:"]
        for n, (where, expr) in enumerate(exprs):
            if expr.startswith("label_values("):
                m = re.match(r"label_values\((.*),\s*[a-zA-Z_]+\)$", expr)
                expr = m.group(1) if m else expr
            expr = (expr.replace("$__rate_interval", "5m").replace("$__interval", "1m")
                    .replace("$job", ".+").replace("$instance", ".+"))
            rules.append(f"      - record: dashboard:query:{n}")
            rules.append(f"        expr: {json.dumps(expr)}")
            rules.append(f"        labels: {{where: {json.dumps(where)}}}")
        pathlib.Path(promql_out).write_text("\n".join(rules) + "\n")


def check_rules(metrics, labels, literals):
    exprs = yaml_exprs(ALERTS)
    if not exprs:
        fail(f"{ALERTS}: no expr found")
    for line, expr in exprs:
        check_expr(f"{ALERTS.name}:{line}", expr, metrics, labels, literals)
    for line, series in test_series(ALERT_TESTS):
        check_expr(f"{ALERT_TESTS.name}:{line}", series, metrics, labels, literals)
    alerts = re.findall(r"^\s*-\s*alert:\s*(\S+)", ALERTS.read_text(), flags=re.M)
    tested = set(re.findall(r"^\s*alertname:\s*(\S+)", ALERT_TESTS.read_text(), flags=re.M))
    for a in alerts:
        if a not in tested:
            fail(f"{ALERTS.name}: alert {a} has no test in {ALERT_TESTS.name}")
    for a in tested - set(alerts):
        fail(f"{ALERT_TESTS.name}: tests alert {a}, which {ALERTS.name} does not define")


def check_container_policy():
    def settings(path):
        out = []
        for line in path.read_text().splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                out.append(line)
        return out

    shipped = settings(ROOT / "policies" / "default.toml")
    container = settings(PKG / "container" / "policy.toml")
    allowed = re.compile(r"^(listen|admin_listen|admin_allow_non_loopback)\s*=")
    a = [l for l in shipped if not allowed.match(l)]
    b = [l for l in container if not allowed.match(l)]
    if a != b:
        import difflib
        diff = "\n".join(difflib.unified_diff(a, b, "policies/default.toml", "packaging/container/policy.toml", lineterm=""))
        fail("packaging/container/policy.toml differs from policies/default.toml beyond the listen addresses:\n" + diff)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--promql-out", help="write the dashboard's queries as recording rules here")
    args = ap.parse_args()
    metrics, labels, literals = src_facts()
    check_dashboard(metrics, labels, literals, args.promql_out)
    check_rules(metrics, labels, literals)
    check_container_policy()
    if errors:
        for e in errors:
            print(f"FAIL {e}", file=sys.stderr)
        sys.exit(1)
    print(f"ok: dashboard, alerts and tests use only exported metrics ({len(metrics)} names in src/) "
          f"and labels ({', '.join(sorted(labels))}); every alert is tested; the container policy "
          "is the shipped default with container addresses")


if __name__ == "__main__":
    main()
