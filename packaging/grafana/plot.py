#!/usr/bin/env python3
"""The traffic driver and the plotter of packaging/grafana/plot.sh (run that, not this).

  plot.py drive --url URL --ca CA --prometheus PROM --job JOB --seconds N --window OUT.json
      Waits until Prometheus scrapes the edge, then drives a mix of traffic through the edge's
      public URL for N seconds (threads; the rate ramps up, spikes and falls) and writes the
      time window of the run to OUT.json. Tokens come from PLOT_TOKEN_LOAD, PLOT_TOKEN_BURSTY
      and PLOT_TOKEN_READER (the principals of plot.sh's policy).

  plot.py plot --dashboard a2a-edge.json --prometheus PROM --job JOB --window W.json --out PNG
      Evaluates the queries of some of the dashboard's time-series panels with Prometheus's
      query_range API over the window and plots them in a grid. Exits 1 when a query returns
      no series (or only empty ones): a broken query or metric name is noticed.

Standard library only, plus matplotlib for `plot`.
"""

import argparse
import collections
import http.client
import io
import json
import math
import os
import random
import re
import socket
import ssl
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

# ---- Prometheus's HTTP API -------------------------------------------------------------------

NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def prom_get(base, path, **params):
    """GET base+path?params from Prometheus's API; the `data` of a success, else raises."""
    url = base.rstrip("/") + path
    if params:
        url += "?" + urllib.parse.urlencode(params)
    try:
        with NO_PROXY.open(url, timeout=30) as r:
            doc = json.load(r)
    except urllib.error.HTTPError as e:
        body = e.read().decode(errors="replace")[:500]
        raise RuntimeError(f"{path}: HTTP {e.code}: {body}") from None
    if doc.get("status") != "success":
        raise RuntimeError(f"{path}: {doc.get('errorType')}: {doc.get('error')}")
    return doc["data"]


def wait_scraped(prom, job, timeout):
    """Wait until Prometheus answers and has scraped JOB successfully."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            res = prom_get(prom, "/api/v1/query", query=f'up{{job="{job}"}}')["result"]
            if res and res[0]["value"][1] == "1":
                return
            last = f"up = {res[0]['value'][1]}" if res else "no target yet"
        except (OSError, RuntimeError) as e:
            last = str(e)
        time.sleep(0.25)
    raise SystemExit(f"drive: Prometheus has not scraped job {job} after {timeout}s ({last})")


# ---- the traffic driver ------------------------------------------------------------------------


class Edge:
    """Where the edge is and how to reach it: one TLS context, trusting the dev CA."""

    def __init__(self, url, ca):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port or 443
        self.path = u.path or "/"
        self.ctx = ssl.create_default_context(cafile=ca)
        self.ctx.set_alpn_protocols(["http/1.1"])

    def connect(self, timeout=15):
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)


def rpc_body(method, params):
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})


def message(text):
    return {"message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}}


def headers(token=None, stream=False):
    h = {"A2A-Version": "1.0", "Content-Type": "application/json"}
    if token is not None:
        h["Authorization"] = f"Bearer {token}"
    if stream:
        h["Accept"] = "text/event-stream"
    return h


class Tally:
    """Answers by kind and status, shared by the threads (for the summary)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = collections.Counter()

    def add(self, kind, status):
        with self.lock:
            self.counts[(kind, status)] += 1

    def report(self):
        with self.lock:
            items = sorted(self.counts.items())
        total = sum(n for _, n in items)
        print(f"drive: {total} answers", file=sys.stderr)
        for (kind, status), n in items:
            print(f"drive:   {kind:<16} {status!s:<8} {n}", file=sys.stderr)
        return dict(items)


class Client:
    """One keep-alive connection of one thread; reconnects when the edge closed it."""

    def __init__(self, edge, tally):
        self.edge, self.tally = edge, tally
        self.conn = None

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def call(self, kind, method, path, body=None, hdrs=None):
        """One request; returns (status, body bytes), or (None, b"") after two failures."""
        for attempt in range(2):
            if self.conn is None:
                self.conn = self.edge.connect()
            try:
                self.conn.request(method, path, body=body, headers=hdrs or {})
                resp = self.conn.getresponse()
                data = resp.read()
                if resp.will_close:
                    self.close()
                self.tally.add(kind, resp.status)
                return resp.status, data
            except (OSError, http.client.HTTPException) as e:
                self.close()
                if attempt == 1:
                    self.tally.add(kind, type(e).__name__)
        return None, b""


class Profile:
    """The shape of the run over time: the request rate and the number of open streams."""

    def __init__(self, seconds, t0):
        self.seconds, self.t0 = seconds, t0
        # (name, start, end) as fractions of the run
        self.phases = [
            ("warm-up", 0.0, 0.1),
            ("ramp", 0.1, 0.45),
            ("plateau", 0.45, 0.6),
            ("spike", 0.6, 0.7),
            ("decay", 0.7, 1.0),
        ]

    def frac(self):
        return (time.monotonic() - self.t0) / self.seconds

    def done(self):
        return self.frac() >= 1.0

    def rate(self):
        """Requests per second of the steady mix now."""
        f = self.frac()
        if f < 0.1:
            return 10.0
        if f < 0.45:
            return 10.0 + (f - 0.1) / 0.35 * 70.0
        if f < 0.6:
            return 80.0
        if f < 0.7:
            return 200.0
        return 80.0 - (f - 0.7) / 0.3 * 60.0

    def streams(self):
        """How many streams should be open now."""
        f = self.frac()
        if f < 0.1:
            return 1
        if f < 0.45:
            return 1 + int((f - 0.1) / 0.35 * 4)
        if f < 0.6:
            return 5
        if f < 0.7:
            return 8
        return 2


# The steady mix: (kind, weight)
MIX = [
    ("send", 45),
    ("send-slow", 5),
    ("get-unknown", 15),
    ("get-known", 5),
    ("card", 10),
    ("no-credentials", 8),
    ("wrong-token", 7),
    ("unauthorized", 5),
]


def steady_worker(edge, path, tokens, profile, workers, tally, known, rng):
    """One of WORKERS threads sending the steady mix at profile.rate() / WORKERS per second."""
    client = Client(edge, tally)
    kinds = [k for k, _ in MIX]
    weights = [w for _, w in MIX]
    while not profile.done():
        began = time.monotonic()
        kind = rng.choices(kinds, weights)[0]
        if kind == "send" or kind == "send-slow":
            text = "[[slow:30]] hello" if kind == "send-slow" else "hello"
            status, data = client.call(kind, "POST", path, rpc_body("SendMessage", message(text)),
                                       headers(tokens["load"]))
            if status == 200:
                try:
                    task = json.loads(data)["result"]["task"]["id"]
                    known.append(task)
                except (ValueError, KeyError, TypeError):
                    pass
        elif kind == "get-unknown":
            client.call(kind, "POST", path, rpc_body("GetTask", {"id": str(uuid.uuid4())}),
                        headers(tokens["load"]))
        elif kind == "get-known":
            if known:
                client.call(kind, "POST", path, rpc_body("GetTask", {"id": known[-1]}),
                            headers(tokens["load"]))
        elif kind == "card":
            client.call(kind, "GET", "/.well-known/agent-card.json")
        elif kind == "no-credentials":
            client.call(kind, "POST", path, rpc_body("SendMessage", message("hello")), headers())
        elif kind == "wrong-token":
            client.call(kind, "POST", path, rpc_body("SendMessage", message("hello")),
                        headers("not-" + tokens["load"]))
        elif kind == "unauthorized":
            client.call(kind, "POST", path, rpc_body("SendMessage", message("hello")),
                        headers(tokens["reader"]))
        pause = workers / max(profile.rate(), 0.1) - (time.monotonic() - began)
        if pause > 0:
            time.sleep(pause * rng.uniform(0.8, 1.2))
    client.close()


def stream_worker(i, edge, path, tokens, profile, tally, rng):
    """Stream I is open while profile.streams() > I; every fourth one is dropped early."""
    n = 0
    while not profile.done():
        if i >= profile.streams():
            time.sleep(0.2)
            continue
        n += 1
        gone = n % 4 == 0
        kind = "stream-dropped" if gone else "stream"
        conn = edge.connect(timeout=30)
        try:
            conn.request("POST", path,
                         rpc_body("SendStreamingMessage", message("[[chunks:5]] [[slow:200]] hello")),
                         headers(tokens["load"], stream=True))
            resp = conn.getresponse()
            if resp.status == 200 and gone:
                resp.fp.readline()  # the first event's first line, then hang up
                resp.close()
            else:
                resp.read()
            tally.add(kind, resp.status)
        except (OSError, http.client.HTTPException) as e:
            tally.add(kind, type(e).__name__)
        finally:
            conn.close()
        time.sleep(rng.uniform(0.0, 0.3))


def burst_worker(edge, path, tokens, profile, tally):
    """Every 10 s, 50 requests of principal bursty as fast as they go: over its rate (429)."""
    client = Client(edge, tally)
    next_burst = time.monotonic() + 5
    while not profile.done():
        if time.monotonic() < next_burst:
            time.sleep(0.1)
            continue
        next_burst += 10
        for _ in range(50):
            client.call("burst", "POST", path, rpc_body("SendMessage", message("hello")),
                        headers(tokens["bursty"]))
    client.close()


def idle_tls(edge):
    """A TLS connection that never sends a request (the edge closes it: first_request_timeout)."""
    try:
        with socket.create_connection((edge.host, edge.port), timeout=10) as raw:
            with edge.ctx.wrap_socket(raw, server_hostname=edge.host) as tls:
                tls.settimeout(10)
                tls.recv(1)  # until the edge closes
    except OSError:
        pass


def churn_worker(edge, profile, tally):
    """Connection churn: a new connection per card GET twice a second, a plain-text request to
    the TLS port every 3 s (tls.handshake_failed), an idle TLS connection every 6 s."""
    tick = 0
    while not profile.done():
        tick += 1
        conn = edge.connect()
        try:
            conn.request("GET", "/.well-known/agent-card.json", headers={"Connection": "close"})
            resp = conn.getresponse()
            resp.read()
            tally.add("card-new-conn", resp.status)
        except (OSError, http.client.HTTPException) as e:
            tally.add("card-new-conn", type(e).__name__)
        finally:
            conn.close()
        if tick % 6 == 0:
            try:
                with socket.create_connection((edge.host, edge.port), timeout=5) as raw:
                    raw.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                    raw.recv(1024)
            except OSError:
                pass
            tally.add("plain-text", "sent")
        if tick % 12 == 0:
            threading.Thread(target=idle_tls, args=(edge,), daemon=True).start()
            tally.add("idle-tls", "opened")
        time.sleep(0.5)


def drive(args):
    tokens = {}
    for who in ("load", "bursty", "reader"):
        tokens[who] = os.environ.get(f"PLOT_TOKEN_{who.upper()}") or sys.exit(
            f"drive: PLOT_TOKEN_{who.upper()} is not set")
    edge = Edge(args.url, args.ca)
    path = edge.path
    wait_scraped(args.prometheus, args.job, args.ready_timeout)
    time.sleep(3)  # a few samples at rest before the traffic starts

    tally = Tally()
    known = collections.deque(maxlen=100)
    start_wall = time.time()
    profile = Profile(args.seconds, time.monotonic())
    workers = args.workers
    threads = [threading.Thread(target=steady_worker,
                                args=(edge, path, tokens, profile, workers, tally, known,
                                      random.Random(i)))
               for i in range(workers)]
    threads += [threading.Thread(target=stream_worker,
                                 args=(i, edge, path, tokens, profile, tally, random.Random(100 + i)))
                for i in range(8)]
    threads.append(threading.Thread(target=burst_worker, args=(edge, path, tokens, profile, tally)))
    threads.append(threading.Thread(target=churn_worker, args=(edge, profile, tally)))
    for t in threads:
        t.start()
    last = -1
    while not profile.done():
        ten = int(profile.frac() * 10)
        if ten != last:
            print(f"drive: {ten * 10:3d}% ({profile.rate():.0f} req/s steady, "
                  f"{profile.streams()} streams)", file=sys.stderr)
            last = ten
        time.sleep(0.5)
    for t in threads:
        t.join(timeout=30)
    end_wall = time.time()
    time.sleep(4)  # the last streams end, the last samples are scraped
    counts = tally.report()

    window = {
        "start": start_wall - 5,
        "end": end_wall + 4,
        "traffic_start": start_wall,
        "traffic_end": end_wall,
        "phases": [[name, start_wall + a * args.seconds, start_wall + b * args.seconds]
                   for name, a, b in profile.phases],
        "answers": {f"{k} {s}": n for (k, s), n in counts.items()},
    }
    with open(args.window, "w") as f:
        json.dump(window, f, indent=1)
    if not any(s == 200 for (k, s) in counts if k == "send"):
        sys.exit("drive: no SendMessage was answered 200")


# ---- the plotter -------------------------------------------------------------------------------

# The panels plotted, by title (drawn in the dashboard's order).
PANELS = [
    "Requests by route and status",
    "Refusals by reason",
    "JSON-RPC methods",
    "Authorization refusals",
    "Latency p50 / p99 by route",
    "Open connections and streams",
    "Connections by outcome",
    "Streams ended by outcome",
    "Requests in flight per agent",
    "Registry entries",
]

# Grafana unit -> (axis label, kind)
UNITS = {
    "reqps": ("req/s", "rate"),
    "cps": ("connections/s", "rate"),
    "ops": ("per second", "rate"),
    "s": ("seconds", "seconds"),
    "percentunit": ("share", "percent"),
    "short": ("", "count"),
    "none": ("", "count"),
}

RATE_INTERVAL = "5s"  # Grafana's $__rate_interval for a 1 s scrape interval is 4 s; a little more


def substitute(expr, job):
    """The Grafana variables of a query replaced as a dashboard with job=JOB, instance=All does."""
    values = {"job": job, "instance": ".*", "__rate_interval": RATE_INTERVAL,
              "__interval": "1s"}

    def one(m):
        name = m.group(1) or m.group(2)
        if name not in values:
            raise SystemExit(f"plot: unknown Grafana variable ${name} in {expr}")
        return values[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", one, expr)


def legend(fmt, metric):
    if fmt and fmt != "__auto":
        text = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: metric.get(m.group(1), ""), fmt)
        text = " ".join(text.split())
        if text:
            return text
    labels = ", ".join(f'{k}="{v}"' for k, v in sorted(metric.items()) if k != "__name__")
    return f"{metric.get('__name__', '')}{{{labels}}}"


def plot(args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import PercentFormatter

    with open(args.dashboard) as f:
        dashboard = json.load(f)
    with open(args.window) as f:
        window = json.load(f)
    by_title = {p.get("title"): p for p in dashboard["panels"] if p.get("type") == "timeseries"}
    missing = [t for t in PANELS if t not in by_title]
    if missing:
        sys.exit(f"plot: the dashboard has no time-series panel {missing}")
    panels = sorted((by_title[t] for t in PANELS),
                    key=lambda p: (p["gridPos"]["y"], p["gridPos"]["x"]))

    start, end, t0 = window["start"], window["end"], window["traffic_start"]
    failures = []
    results = []  # per panel: [(label, xs, ys)]
    for p in panels:
        series = []
        for target in p.get("targets", []):
            expr = substitute(target["expr"], args.job)
            data = prom_get(args.prometheus, "/api/v1/query_range", query=expr,
                            start=f"{start:.3f}", end=f"{end:.3f}", step="1")
            got = 0
            for s in data["result"]:
                xs = [float(t) - t0 for t, _ in s["values"]]
                ys = [float(v) for _, v in s["values"]]
                if not any(math.isfinite(y) for y in ys):
                    continue
                got += 1
                series.append((legend(target.get("legendFormat"), s["metric"]), xs, ys))
            print(f"plot: {p['title']!r} {target.get('refId', '')}: {got} series: {expr}",
                  file=sys.stderr)
            if got == 0:
                failures.append(f"{p['title']!r}: no series for {expr}")
        results.append(series)

    try:
        version = prom_get(args.prometheus, "/api/v1/query",
                           query=f'a2a_edge_build_info{{job="{args.job}"}}')["result"][0]["metric"]["version"]
    except (IndexError, KeyError):
        version = "?"
        failures.append("no a2a_edge_build_info")
    prom_version = prom_get(args.prometheus, "/api/v1/status/buildinfo").get("version", "?")
    prom_version = ".".join(re.split(r"[.+-]", prom_version)[:2])

    cols = 2
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(16, 18), dpi=100, squeeze=False)
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t0))
    fig.suptitle(f"a2a-edge {version}: Grafana dashboard \"{dashboard.get('title', '?')}\", "
                 f"{len(panels)} of its panels, {date}\n"
                 f"rendered from a real run: Prometheus {prom_version} scraping /metrics; "
                 f"the dashboard's own queries (rate window {RATE_INTERVAL}, step 1 s; "
                 f"shaded: the traffic spike)",
                 fontsize=13)
    spike = [ph for ph in window.get("phases", []) if ph[0] == "spike"]
    for ax, p, series in zip(axes.flat, panels, results):
        unit_label, kind = UNITS.get(p.get("fieldConfig", {}).get("defaults", {}).get("unit"),
                                     ("", "count"))
        for label, xs, ys in sorted(series, key=lambda s: s[0]):
            ax.plot(xs, ys, label=label, linewidth=1.2)
        for _, a, b in spike:
            ax.axvspan(a - t0, b - t0, color="tab:red", alpha=0.07, linewidth=0)
        ax.set_title(p["title"], fontsize=11, loc="left")
        ax.set_xlim(start - t0, end - t0)
        ax.grid(True, alpha=0.3)
        ax.tick_params(labelsize=8)
        if kind == "seconds":
            finite = [y for _, _, ys in series for y in ys if math.isfinite(y) and y > 0]
            if finite and max(finite) / min(finite) > 100:
                ax.set_yscale("log")
                unit_label += " (log scale)"
        elif kind == "percent":
            ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        elif kind == "rate":
            ax.set_ylim(bottom=0)
        else:
            ax.set_ylim(bottom=0)
            # Gauges of very different sizes (registry tasks vs running turns): a linear axis
            # would flatten the small ones to the floor
            peaks = [max((y for y in ys if math.isfinite(y)), default=0) for _, _, ys in series]
            small = [m for m in peaks if m > 0]
            if len(small) > 1 and max(small) / min(small) > 50:
                ax.set_yscale("symlog", linthresh=1)
                ax.set_ylim(bottom=0)
                unit_label += " (symlog scale)"
        ax.set_ylabel(unit_label, fontsize=9)
        ax.set_xlabel("seconds since the traffic started", fontsize=8)
        if series:
            ax.legend(fontsize=7, loc="upper left", ncol=2 if len(series) > 5 else 1,
                      framealpha=0.8)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    # A palette of 128 colours keeps the PNG small (the plot has few colours; the antialiased
    # edges need the rest); Pillow comes with matplotlib.
    from PIL import Image

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    buf.seek(0)
    with Image.open(buf) as img:
        img.convert("RGB").quantize(colors=128, dither=Image.Dither.NONE).save(args.out, optimize=True)
    size = os.path.getsize(args.out)
    print(f"plot: wrote {args.out} ({size // 1024} KiB, {len(panels)} panels)", file=sys.stderr)
    if size > 300 * 1024:
        print("plot: note: the PNG is larger than 300 KiB", file=sys.stderr)
    if failures:
        for f in failures:
            print(f"plot: FAIL {f}", file=sys.stderr)
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("drive")
    d.add_argument("--url", required=True, help="the edge's public URL (ready file)")
    d.add_argument("--ca", required=True, help="the dev CA (PEM)")
    d.add_argument("--prometheus", required=True, help="Prometheus's base URL")
    d.add_argument("--job", required=True)
    d.add_argument("--seconds", type=float, default=90)
    d.add_argument("--workers", type=int, default=6, help="threads of the steady mix")
    d.add_argument("--ready-timeout", type=float, default=60)
    d.add_argument("--window", required=True, help="where to write the run's time window")
    p = sub.add_parser("plot")
    p.add_argument("--dashboard", required=True)
    p.add_argument("--prometheus", required=True)
    p.add_argument("--job", required=True)
    p.add_argument("--window", required=True)
    p.add_argument("--out", required=True)
    args = ap.parse_args()
    drive(args) if args.cmd == "drive" else plot(args)


if __name__ == "__main__":
    main()
