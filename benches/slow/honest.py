#!/usr/bin/env python3
"""The honest client of benches/slow/run.sh: one JSON-RPC ListTasks every INTERVAL seconds.

Standard library only (http.client + ssl). At most one request in flight: the next request
leaves at the next INTERVAL tick, or at once if the previous answer came later than that (a
closed loop, like a real caller waiting for its answer; `sent` falls short of
DURATION / INTERVAL when the proxy is slow).

Modes:
  keepalive  one HTTPS/1.1 connection reused for every request, reconnecting after any error
             or close (what a pooling client such as httpx in the a2a-sdk does).
  new        a new TCP + TLS connection for every request (a client without a pool, or one
             whose pooled connection went idle): this one needs the proxy to still accept.

A request succeeds when the answer is HTTP 200 with a JSON-RPC result for its id. Latency is
measured from just before the request is written (and, in `new`, before connecting) to the
last byte of the answer; percentiles are over successful requests. The summary (JSON) goes to
--out, a one-line human summary to stderr.
"""
import argparse
import http.client
import json
import os
import signal
import socket
import ssl
import sys
import time


def percentile(sorted_values, p):
    """Nearest-rank percentile of an ascending list (None if empty)."""
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1, int(-(-p * len(sorted_values) // 100)) - 1))
    return sorted_values[k]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True, help="the proxy's JSON-RPC URL (https://127.0.0.1:PORT/)")
    ap.add_argument("--cacert", required=True, help="CA that signed the proxy's certificate")
    ap.add_argument("--token-env", default="HONEST_TOKEN", help="environment variable with the bearer token")
    ap.add_argument("--mode", choices=("keepalive", "new"), default="keepalive")
    ap.add_argument("--interval", type=float, default=0.05, help="seconds between requests (0.05)")
    ap.add_argument("--duration", type=float, required=True, help="seconds to run")
    ap.add_argument("--timeout", type=float, default=5.0, help="per-request socket timeout in seconds (5)")
    ap.add_argument("--out", required=True, help="summary JSON file")
    ap.add_argument("--source", default=None,
                    help="local address to connect from (e.g. 127.0.0.2: another client than the attacker)")
    a = ap.parse_args()

    token = os.environ.get(a.token_env, "")
    if not token:
        sys.exit(f"honest.py: ${a.token_env} is empty")
    from urllib.parse import urlsplit

    u = urlsplit(a.url)
    host, port, path = u.hostname, u.port or 443, u.path or "/"
    ctx = ssl.create_default_context(cafile=a.cacert)
    ctx.set_alpn_protocols(["http/1.1"])
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "A2A-Version": "1.0",
        "Accept": "application/json",
    }

    stop = False

    def on_term(*_):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    latencies = []  # seconds, successful requests
    failures = {}  # kind -> count
    sent = ok = connects = 0
    conn = None
    start = time.monotonic()
    end = start + a.duration
    last_ok_at = start
    max_gap = 0.0  # longest time without a successful answer
    tick = 0
    while not stop:
        next_at = start + tick * a.interval
        now = time.monotonic()
        if next_at >= end or now >= end:
            break
        if next_at > now:
            time.sleep(next_at - now)
        else:
            # late: skip the ticks already missed instead of bursting to catch up
            tick = int((now - start) / a.interval)
        tick += 1
        sent += 1
        body = json.dumps({"jsonrpc": "2.0", "id": sent, "method": "ListTasks", "params": {}}).encode()
        t0 = time.monotonic()
        kind = None
        try:
            if conn is None:
                conn = http.client.HTTPSConnection(
                    host, port, context=ctx, timeout=a.timeout,
                    source_address=(a.source, 0) if a.source else None)
                conn.connect()
                connects += 1
            conn.request("POST", path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200:
                kind = f"http_{resp.status}"
            else:
                try:
                    doc = json.loads(data)
                    if not (isinstance(doc, dict) and doc.get("id") == sent and "result" in doc and "error" not in doc):
                        reason = None
                        try:
                            reason = doc["error"]["data"][0]["reason"]
                        except Exception:
                            pass
                        kind = f"jsonrpc_error:{reason}" if "error" in doc else "jsonrpc_shape"
                except ValueError:
                    kind = "json_syntax"
            if a.mode == "new" or resp.will_close:
                conn.close()
                conn = None
        except socket.timeout:
            kind = "timeout"
        except ssl.SSLError as e:
            kind = f"tls:{e.reason or type(e).__name__}"
        except (ConnectionError, http.client.HTTPException, OSError) as e:
            kind = f"conn:{type(e).__name__}"
        t1 = time.monotonic()
        if kind is None:
            ok += 1
            latencies.append(t1 - t0)
            max_gap = max(max_gap, t1 - last_ok_at)
            last_ok_at = t1
        else:
            failures[kind] = failures.get(kind, 0) + 1
            if conn is not None:
                conn.close()
                conn = None
    finished = time.monotonic()
    if conn is not None:
        conn.close()
    max_gap = max(max_gap, finished - last_ok_at)
    latencies.sort()
    ms = lambda v: None if v is None else round(v * 1000, 2)
    summary = {
        "mode": a.mode,
        "interval_s": a.interval,
        "duration_s": round(finished - start, 2),
        "sent": sent,
        "ok": ok,
        "success_pct": round(100.0 * ok / sent, 2) if sent else 0.0,
        "failures": failures,
        "connects": connects,
        "p50_ms": ms(percentile(latencies, 50)),
        "p90_ms": ms(percentile(latencies, 90)),
        "p99_ms": ms(percentile(latencies, 99)),
        "max_ms": ms(latencies[-1] if latencies else None),
        "max_gap_s": round(max_gap, 2),
    }
    with open(a.out, "w") as f:
        json.dump(summary, f)
    print(
        f"honest[{a.mode}]: {sent} sent, {ok} ok ({summary['success_pct']}%), "
        f"p50 {summary['p50_ms']} ms, p99 {summary['p99_ms']} ms, max {summary['max_ms']} ms, "
        f"longest without success {summary['max_gap_s']} s, failures {failures or 'none'}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
