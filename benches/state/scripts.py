#!/usr/bin/env python3
"""What the shared state's LEARN script costs inside Redis, apart from any edge or network.

Loads LEARN from src/state/shared.rs (the script the edge runs for every answer), starts a
redis-server of its own (free port, temporary directory, no persistence) and runs it N times
per phase, pipelined over one connection:

  new context   a new task in a new context each time (the engine shape of benches/load);
  one context   N new tasks in one context (small at first, then promoted to sorted sets);
  floor         a script that only returns 'ok', given the same 12 arguments.

Redis's own count (`INFO commandstats`, reset before each phase) gives the µs per script run,
the commands it called and what is left outside them: the Lua interpreter and the cost of each
`redis.call` (Lua to Redis and back). The phases run ROUNDS times (default 3), Redis emptied
before each round; the table gives the median run and the range over the rounds. This host's
noise is about ±15 % between single rounds: compare medians, and a change only against its
baseline in the same run. BASELINE=<git revision> runs that revision's LEARN too, interleaved
phase by phase (an A/B in one run). Redis's own time here is a lower bound of what a script costs
under load, where the keys it looks up are colder (benches/load/run.sh reports that). Prints a
Markdown table, also written to RESULTS.

    python3 benches/state/scripts.py            # N=50000; RESULTS=benches/state/scripts.md
    BASELINE=HEAD~1 python3 benches/state/scripts.py
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N = int(os.environ.get("N", "50000"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
BASELINE = os.environ.get("BASELINE", "")
RESULTS = os.environ.get("RESULTS", os.path.join(ROOT, "benches/state/scripts.md"))


def learn_script(rev=""):
    """LEARN as in the work tree, or as in git revision `rev`."""
    if rev:
        src = subprocess.run(["git", "-C", ROOT, "show", rev + ":src/state/shared.rs"],
                             check=True, capture_output=True, text=True).stdout
    else:
        src = open(os.path.join(ROOT, "src/state/shared.rs"), encoding="utf-8").read()
    promote = re.search(r'macro_rules! promote_lua \{\s*\(\) => \{\s*r#"(.*?)"#', src, re.S)
    learn = re.search(r'const LEARN: &str = concat!\(\s*promote_lua!\(\),\s*r#"(.*?)"#', src, re.S)
    if not promote or not learn:
        sys.exit("scripts.py: LEARN not found in src/state/shared.rs (its layout changed?)")
    return promote.group(1) + learn.group(1)


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Redis:
    def __init__(self, port):
        for _ in range(200):
            try:
                self.sock = socket.create_connection(("127.0.0.1", port))
                break
            except OSError:
                time.sleep(0.05)
        else:
            sys.exit("scripts.py: redis-server did not start")
        self.f = self.sock.makefile("rb")

    def reply(self):
        line = self.f.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"-":
            sys.exit("scripts.py: redis error: %s" % rest.decode())
        if kind in (b"+", b":"):
            return rest
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if kind == b"*":
            return [self.reply() for _ in range(int(rest))]
        sys.exit("scripts.py: unexpected reply %r" % line)

    def call(self, *args):
        self.sock.sendall(resp(*args))
        return self.reply()

    def pipeline(self, commands, batch=500):
        replies = []
        for i in range(0, len(commands), batch):
            chunk = commands[i : i + batch]
            self.sock.sendall(b"".join(chunk))
            replies += [self.reply() for _ in chunk]
        return replies


def stats(r):
    rows = {}
    for line in r.call("INFO", "commandstats").decode().splitlines():
        if line.startswith("cmdstat_"):
            name, rest = line[len("cmdstat_") :].split(":", 1)
            kv = dict(x.split("=") for x in rest.split(","))
            rows[name] = (int(kv["calls"]), int(kv["usec"]))
    return rows


def phase(r, sha, tag, context_of):
    """N runs of the script `sha`, task i (new) in context_of(i); Redis's counts per run."""
    stamp = int(time.time() * 1e6)
    cmds = [
        resp("EVALSHA", sha, 0, "bench:", "alice", "agent", context_of(i),
             "task-%s-%08d-0123456789abcdef" % (tag, i), "TASK_STATE_COMPLETED", stamp + i,
             "86400000", "", "", "60000", "16")
        for i in range(N)
    ]
    r.call("CONFIG", "RESETSTAT")
    for got in r.pipeline(cmds):
        if got != b"ok":
            sys.exit("scripts.py: the script answered %r" % got)
    rows = stats(r)
    run = rows.get("evalsha", (0, 0))[1] / N
    inner = {k: v for k, v in rows.items() if k not in ("evalsha", "config|resetstat", "info")}
    return run, inner


def main():
    if not shutil.which("redis-server"):
        sys.exit("scripts.py: redis-server is needed (apt-get install redis-server)")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    tmp = tempfile.mkdtemp(prefix="a2a-scripts.")
    server = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "",
         "--appendonly", "no", "--dir", tmp],
        stdout=subprocess.DEVNULL,
    )
    try:
        r = Redis(port)
        version = r.call("INFO", "server").decode()
        version = re.search(r"redis_version:(\S+)", version).group(1)
        scripts = [("", r.call("SCRIPT", "LOAD", learn_script()))]
        if BASELINE:
            scripts.append((BASELINE, r.call("SCRIPT", "LOAD", learn_script(BASELINE))))
        floor = r.call("SCRIPT", "LOAD", "return 'ok'")
        phases = [
            ("new context", lambda t: (lambda i: "ctx-%s-%08d-0123456789abcdef" % (t, i))),
            ("one context", lambda t: (lambda i: "ctx-one-%s-0123456789abcdef" % t)),
        ]
        runs = {}  # (phase, script label) -> [(µs per run, inner counts)] over the rounds
        for rnd in range(ROUNDS):
            r.call("FLUSHALL")
            for name, ctx in phases:
                # The order alternates by round (the second runs on a larger keyspace).
                for label, sha in scripts if rnd % 2 == 0 else scripts[::-1]:
                    tag = "%s%d%s" % (name[0], rnd, "b" if label else "")
                    runs.setdefault((name, label), []).append(phase(r, sha, tag, ctx(tag)))
            tag = "f%d" % rnd
            runs.setdefault(("floor", ""), []).append(phase(r, floor, tag, lambda i: "ctx-%08d" % i))
        results = []
        for (name, label), got in runs.items():
            got.sort(key=lambda x: x[0])
            run, inner = got[len(got) // 2]
            title = name if not label else "%s (%s)" % (name, label)
            results.append((title, run, got[0][0], got[-1][0], inner))
    finally:
        server.terminate()
        server.wait()
    out = [
        "# LEARN inside Redis",
        "",
        "%s · redis-server %s · N = %d per phase · %d rounds%s · `python3 benches/state/scripts.py`"
        % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), version, N, ROUNDS,
           " · baseline: LEARN of %s" % BASELINE if BASELINE else ""),
        "",
        "µs of Redis's own time per script run (`INFO commandstats`): the run (the median round,"
        " and the range over the rounds), the commands it called (each counted in its own row"
        " too), and what is left: the Lua interpreter and each `redis.call`'s way from Lua to"
        " Redis and back.",
        "",
        "| phase | µs per run | range | commands per run | µs in the commands | µs outside them | the commands |",
        "|---|---:|---|---:|---:|---:|---|",
    ]
    for name, run, lo, hi, inner in results:
        calls = sum(c for c, _ in inner.values()) / N
        us = sum(u for _, u in inner.values()) / N
        which = ", ".join(
            "%s %.2f" % (k, c / N) for k, (c, _) in sorted(inner.items(), key=lambda kv: -kv[1][0])
        ) or "–"
        out.append("| %s | %.1f | %.1f–%.1f | %.2f | %.1f | %.1f | %s |"
                   % (name, run, lo, hi, calls, us, run - us, which))
    text = "\n".join(out) + "\n"
    print(text)
    with open(RESULTS, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
