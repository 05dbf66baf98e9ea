#!/usr/bin/env python3
"""What the shared state's LEARN and TURN scripts cost inside Redis, apart from any edge or network.

Loads LEARN (the script the edge runs for every answer) and TURN from src/state/shared.rs, starts a
redis-server of its own (free port, temporary directory, no persistence) and runs it N times
per phase, pipelined over one connection:

  new context   a new task in a new context each time (the engine shape of benches/load);
  one context   N new tasks in one context (small at first, then promoted to sorted sets);
  new context, at the cap
                the first again with the owner's `state.max_tasks_per_owner` at CAP
                (default N / 10): past it each new task takes out the owner's oldest;
  turn, new context
                TURN (the script that begins each turn on a context the request names) on a
                new context id each time: it makes the context and counts it in the owner's
                expiry index (the `count_bare` path);
  turn, its context
                TURN on a context the owner has (one of N made by LEARN first, unmeasured),
                each once: the check, the lease, and the renewal of the context and of the
                owner's expiry index;
  floor         a script that only returns 'ok', given the same 15 arguments.

Each phase has an owner of its own; "contexts kept" counts the phase's context keys after it.

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
CAP = int(os.environ.get("CAP", str(max(16, N // 10))))


def script(name, rev=""):
    """The script `name` (LEARN, TURN) as in the work tree, or as in git revision `rev`: its
    `concat!` of `*_lua!()` macros and raw strings, expanded."""
    if rev:
        src = subprocess.run(["git", "-C", ROOT, "show", rev + ":src/state/shared.rs"],
                             check=True, capture_output=True, text=True).stdout
    else:
        src = open(os.path.join(ROOT, "src/state/shared.rs"), encoding="utf-8").read()
    learn = re.search(r"const %s: &str = concat!\((.*?)\n\);" % name, src, re.S)
    if not learn:
        sys.exit("scripts.py: %s not found in src/state/shared.rs (its layout changed?)" % name)
    text = ""
    for part in re.finditer(r'(\w+)!\(\)|r#"(.*?)"#', learn.group(1), re.S):
        if part.group(2) is not None:
            text += part.group(2)
            continue
        macro = re.search(r"macro_rules! %s \{\s*\(\) => \{\s*r#\"(.*?)\"#" % part.group(1), src, re.S)
        if not macro:
            sys.exit("scripts.py: macro %s! not found in src/state/shared.rs" % part.group(1))
        text += macro.group(1)
    return text


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


def learns(sha, tag, context_of, cap):
    """N runs of LEARN `sha`: task i (new) in context_of(i), the owner's cap `cap`."""
    stamp = int(time.time() * 1e6)
    return [
        resp("EVALSHA", sha, 0, "bench:", "alice-%s" % tag, "agent", context_of(i),
             "task-%s-%08d-0123456789abcdef" % (tag, i), "TASK_STATE_COMPLETED", stamp + i,
             "86400000", "", "", "60000", "16", cap, "", "")
        for i in range(N)
    ]


def turns(sha, tag, context_of, cap):
    """N runs of TURN `sha`: a turn on context_of(i), no task named, the owner's cap `cap`."""
    return [
        resp("EVALSHA", sha, 0, "bench:", context_of(i), "alice-%s" % tag, "", "-",
             "token-%08d" % i, "60000", "86400000", "", "agent", cap)
        for i in range(N)
    ]


def phase(r, tag, context_of, cap, learn=None, turn=None):
    """N runs of LEARN `learn`, or of TURN `turn` (on the contexts LEARN `learn` made first,
    unmeasured, when both are given); Redis's counts per run."""
    if learn and turn:
        for got in r.pipeline(learns(learn, tag, context_of, cap)):
            if got != b"ok":
                sys.exit("scripts.py: LEARN answered %r" % got)
    cmds = turns(turn, tag, context_of, cap) if turn else learns(learn, tag, context_of, cap)
    r.call("CONFIG", "RESETSTAT")
    for got in r.pipeline(cmds):
        if got != b"ok" and not (isinstance(got, list) and got[0] == b"ok"):
            sys.exit("scripts.py: the script answered %r" % got)
    rows = stats(r)
    run = rows.get("evalsha", (0, 0))[1] / N
    inner = {k: v for k, v in rows.items() if k not in ("evalsha", "config|resetstat", "info")}
    contexts = len(r.call("KEYS", "bench:c:ctx-%s-*" % tag))
    return run, inner, contexts


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
        # (label, LEARN's sha, TURN's sha)
        scripts = [("", r.call("SCRIPT", "LOAD", script("LEARN")),
                    r.call("SCRIPT", "LOAD", script("TURN")))]
        if BASELINE:
            scripts.append((BASELINE, r.call("SCRIPT", "LOAD", script("LEARN", BASELINE)),
                            r.call("SCRIPT", "LOAD", script("TURN", BASELINE))))
        floor = r.call("SCRIPT", "LOAD", "return 'ok'")
        # (phase, the context of run i, the owner's cap, TURN's phase: each phase has an
        # owner of its own)
        each = lambda t: (lambda i: "ctx-%s-%08d-0123456789abcdef" % (t, i))
        phases = [
            ("new context", each, N, None),
            ("one context", lambda t: (lambda i: "ctx-%s-one-0123456789abcdef" % t), N, None),
            ("new context, at the cap", each, CAP, None),
            ("turn, new context", each, N, "new"),
            ("turn, its context", each, N, "its"),
        ]
        runs = {}  # (phase, script label) -> [(µs per run, inner counts)] over the rounds
        for rnd in range(ROUNDS):
            r.call("FLUSHALL")
            for n, (name, ctx, cap, turn) in enumerate(phases):
                # The order alternates by round (the second runs on a larger keyspace).
                for label, learn, turn_sha in scripts if rnd % 2 == 0 else scripts[::-1]:
                    tag = "p%d%d%s" % (n, rnd, "b" if label else "")
                    got = phase(r, tag, ctx(tag), cap,
                                learn=None if turn == "new" else learn,
                                turn=turn_sha if turn else None)
                    runs.setdefault((name, label), []).append(got)
            tag = "f%d" % rnd
            runs.setdefault(("floor", ""), []).append(
                phase(r, tag, lambda i: "ctx-%08d" % i, N, learn=floor))
        results = []
        for (name, label), got in runs.items():
            got.sort(key=lambda x: x[0])
            run, inner, contexts = got[len(got) // 2]
            title = name if not label else "%s (%s)" % (name, label)
            results.append((title, run, got[0][0], got[-1][0], inner, contexts))
    finally:
        server.terminate()
        server.wait()
    out = [
        "# LEARN and TURN inside Redis",
        "",
        "%s · redis-server %s · N = %d per phase · %d rounds%s · `python3 benches/state/scripts.py`"
        % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), version, N, ROUNDS,
           " · baseline: the scripts of %s" % BASELINE if BASELINE else ""),
        "",
        "µs of Redis's own time per script run (`INFO commandstats`): the run (the median round,"
        " and the range over the rounds), the commands it called (each counted in its own row"
        " too), and what is left: the Lua interpreter and each `redis.call`'s way from Lua to"
        " Redis and back.",
        "",
        "| phase | µs per run | range | commands per run | µs in the commands | µs outside them | contexts kept | the commands |",
        "|---|---:|---|---:|---:|---:|---:|---|",
    ]
    for name, run, lo, hi, inner, contexts in results:
        calls = sum(c for c, _ in inner.values()) / N
        us = sum(u for _, u in inner.values()) / N
        which = ", ".join(
            "%s %.2f" % (k, c / N) for k, (c, _) in sorted(inner.items(), key=lambda kv: -kv[1][0])
        ) or "–"
        out.append("| %s | %.1f | %.1f–%.1f | %.2f | %.1f | %.1f | %d | %s |"
                   % (name, run, lo, hi, calls, us, run - us, contexts, which))
    text = "\n".join(out) + "\n"
    print(text)
    with open(RESULTS, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
