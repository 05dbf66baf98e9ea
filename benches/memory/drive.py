#!/usr/bin/env python3
"""Load driver of the memory benchmark (stdlib only; every connection goes to 127.0.0.1).

    drive.py sample --pid PID --out FILE [--interval 0.05]
    drive.py PHASE --url URL --cacert CA --pid PID --samples FILE --agent URL
                   --log PROXY_LOG --out JSON [knobs]        PHASE: listtasks listtasks_fit
                                                         slowreaders cleaning card throttle
    drive.py report --header LINE --policy-note TEXT PHASE_JSON...

The bearer token comes from $BENCH_TOKEN (or --token). `sample` appends "epoch_seconds rss_kB" to FILE every --interval s while PID lives (VmRSS of
/proc/PID/status). A phase reads the proxy's RSS itself just before its attack ("before") and
AFTER seconds after it ("after"); "peak" is the largest sample between the two. It writes one
JSON object: the RSS figures, the phase's own numbers, a one-line summary and detail lines.
`report` turns those files into the Markdown results (stdout).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import re
import socket
import ssl
import statistics
import sys
import time
import urllib.parse
import urllib.request
import uuid

CLK_TCK = os.sysconf('SC_CLK_TCK')
MB = 1024 * 1024


# ---- the proxy process ----------------------------------------------------------------------

def proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of PID, kB."""
    out = {}
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            if line.startswith(('VmRSS:', 'VmHWM:')):
                k, v = line.split(':', 1)
                out[k] = int(v.split()[0])
    return out


def rss_kb(pid: int) -> int:
    return proc_status(pid)['VmRSS']


def cpu_secs(pid: int) -> float:
    """utime + stime of PID, seconds."""
    with open(f'/proc/{pid}/stat') as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # fields 14 and 15 of stat(5)


def sample(pid: int, out: str, interval: float) -> None:
    with open(out, 'a', buffering=1) as f:
        while True:
            try:
                rss = rss_kb(pid)
            except (OSError, KeyError):
                return
            f.write(f'{time.time():.3f} {rss}\n')
            time.sleep(interval)


def peak_kb(samples: str, t0: float, t1: float, *also: int) -> int:
    best = max(also) if also else 0
    try:
        with open(samples) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2 and t0 <= float(parts[0]) <= t1:
                    best = max(best, int(parts[1]))
    except OSError:
        pass
    return best


class LogTail:
    """The proxy's JSON log lines written since this object was made."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self.offset = os.path.getsize(path)
        except OSError:
            self.offset = 0

    def lines(self) -> list[dict]:
        out = []
        try:
            with open(self.path, 'rb') as f:
                f.seek(self.offset)
                for raw in f:
                    try:
                        out.append(json.loads(raw))
                    except ValueError:
                        pass
        except OSError:
            pass
        return out


def tcp_queues(local_port: int, remote_port: int) -> tuple[int, int]:
    """Kernel bytes queued on 127.0.0.1 sockets (/proc/net/tcp): the send queues of the sockets
    bound to local_port (the proxy's side of its callers) and the receive queues of the sockets
    connected to remote_port (the proxy's side of its agent)."""
    tx = rx = 0
    try:
        with open('/proc/net/tcp') as f:
            next(f)
            for line in f:
                p = line.split()
                lport, rport = int(p[1].split(':')[1], 16), int(p[2].split(':')[1], 16)
                t, r = (int(x, 16) for x in p[4].split(':'))
                if lport == local_port and p[3] == '01':
                    tx += t
                if rport == remote_port and p[3] == '01':
                    rx += r
    except OSError:
        pass
    return tx, rx


def agent_stats(agent: str) -> dict:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(agent.rstrip('/') + '/_stats', timeout=10) as r:
        return json.load(r)


# ---- a small HTTP/1.1 client over TLS (asyncio) ---------------------------------------------

class Resp:
    def __init__(self, status: int, headers: dict[str, str], body: bytes, ms: float) -> None:
        self.status, self.headers, self.body, self.ms = status, headers, body, ms

    def json(self) -> object:
        try:
            return json.loads(self.body)
        except ValueError:
            return None


class Conn:
    """One keep-alive connection; reopened when the server closed it."""

    def __init__(self, url: str, ctx: ssl.SSLContext) -> None:
        u = urllib.parse.urlsplit(url)
        self.host, self.port, self.path = u.hostname, u.port or 443, u.path or '/'
        self.ctx = ctx
        self.r: asyncio.StreamReader | None = None
        self.w: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.r, self.w = await asyncio.open_connection(
            self.host, self.port, ssl=self.ctx, server_hostname=self.host, limit=1 << 20)

    def close(self) -> None:
        if self.w is not None:
            self.w.close()
        self.r = self.w = None

    async def request(self, method: str, path: str | None = None, headers: dict | None = None,
                      body: bytes = b'', timeout: float = 60) -> Resp:
        return await asyncio.wait_for(self._request(method, path, headers, body), timeout)

    async def _request(self, method, path, headers, body) -> Resp:
        if self.w is None:
            await self.open()
        h = {'Host': f'{self.host}:{self.port}', **(headers or {})}
        if body or method == 'POST':
            h['Content-Length'] = str(len(body))
        head = f'{method} {path or self.path} HTTP/1.1\r\n' + ''.join(
            f'{k}: {v}\r\n' for k, v in h.items()) + '\r\n'
        t0 = time.perf_counter()
        try:
            self.w.write(head.encode() + body)
            await self.w.drain()
            status_line = await self.r.readuntil(b'\r\n')
        except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
            # a keep-alive connection the server had closed: once more on a new one
            self.close()
            await self.open()
            self.w.write(head.encode() + body)
            await self.w.drain()
            status_line = await self.r.readuntil(b'\r\n')
        status = int(status_line.split()[1])
        hdrs: dict[str, str] = {}
        while True:
            line = await self.r.readuntil(b'\r\n')
            if line == b'\r\n':
                break
            k, _, v = line.decode('latin-1').partition(':')
            hdrs[k.strip().lower()] = v.strip()
        if method == 'HEAD' or status in (204, 304):
            data = b''
        elif 'content-length' in hdrs:
            data = await self.r.readexactly(int(hdrs['content-length']))
        elif hdrs.get('transfer-encoding', '').lower() == 'chunked':
            parts = []
            while True:
                size = int((await self.r.readuntil(b'\r\n')).split(b';')[0], 16)
                if size == 0:
                    while await self.r.readuntil(b'\r\n') != b'\r\n':
                        pass
                    break
                parts.append(await self.r.readexactly(size))
                await self.r.readexactly(2)
            data = b''.join(parts)
        else:
            data = await self.r.read()
            hdrs['connection'] = 'close'
        ms = (time.perf_counter() - t0) * 1000
        if hdrs.get('connection', '').lower() == 'close':
            self.close()
        return Resp(status, hdrs, data, ms)


def tls_context(cacert: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=cacert)
    ctx.set_alpn_protocols(['http/1.1'])
    return ctx


class Edge:
    """What every phase needs: the proxy's URL, the CA, the token, the process."""

    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.url = a.url
        self.ctx = tls_context(a.cacert)
        self.pid = a.pid
        a.token = a.token or os.environ.get('BENCH_TOKEN', '')

    def conn(self) -> Conn:
        return Conn(self.url, self.ctx)

    def rpc_headers(self, token: str | None = None, extra: dict | None = None) -> dict:
        return {'Authorization': f'Bearer {token or self.a.token}', 'Content-Type': 'application/json',
                'A2A-Version': '1.0', **(extra or {})}

    async def rpc(self, c: Conn, method: str, params: dict, timeout: float = 120, **kw) -> Resp:
        body = json.dumps({'jsonrpc': '2.0', 'id': str(uuid.uuid4()), 'method': method,
                           'params': params}).encode()
        return await c.request('POST', headers=self.rpc_headers(**kw), body=body, timeout=timeout)


def send_params(text: str = 'hello') -> dict:
    return {'message': {'messageId': str(uuid.uuid4()), 'role': 'ROLE_USER', 'parts': [{'text': text}]}}


def task_of(resp: Resp) -> dict:
    v = resp.json()
    if resp.status != 200 or not isinstance(v, dict) or 'result' not in v:
        raise SystemExit(f'SendMessage failed: HTTP {resp.status}: {resp.body[:300]!r}')
    r = v['result']
    return r.get('task', r)


def fmt_counts(xs) -> str:
    """'value ×count, …' of an iterable, by value."""
    return ', '.join(f'{v} ×{n}' for v, n in sorted(collections.Counter(xs).items()))


def mib(kb: float) -> str:
    return f'{kb / 1024:.1f} MiB'


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float('nan')
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


class Window:
    """Before / peak / after of the proxy's RSS around an attack."""

    def __init__(self, edge: Edge) -> None:
        self.edge = edge
        self.t0 = time.time()
        self.before = rss_kb(edge.pid)

    def close(self, extra: dict | None = None) -> dict:
        after = rss_kb(self.edge.pid)
        t1 = time.time()
        st = proc_status(self.edge.pid)
        return {'before_kb': self.before, 'peak_kb': peak_kb(self.edge.a.samples, self.t0, t1, self.before, after),
                'after_kb': after, 'hwm_kb': st.get('VmHWM', 0), **(extra or {})}


# ---- phases ---------------------------------------------------------------------------------

async def ph_listtasks(edge: Edge) -> dict:
    a = edge.a
    c = edge.conn()
    for _ in range(a.tasks):
        task_of(await edge.rpc(c, 'SendMessage', send_params()))
    c.close()
    stats0 = agent_stats(a.agent)
    win = Window(edge)
    conns = [edge.conn() for _ in range(a.concurrency)]

    async def listing(cn: Conn) -> list[dict]:
        pages, token = [], None
        for _ in range(a.max_pages):
            params = {'pageSize': 100, 'includeArtifacts': True}
            if token:
                params['pageToken'] = token
            r = await edge.rpc(cn, 'ListTasks', params, timeout=300)
            v = r.json()
            page = {'status': r.status, 'bytes': len(r.body), 'ms': r.ms}
            if isinstance(v, dict) and isinstance(v.get('result'), dict):
                tasks = v['result'].get('tasks') or []
                token = v['result'].get('nextPageToken') or None
                page.update(tasks=len(tasks), full=sum(1 for t in tasks if 'history' in t or 'artifacts' in t),
                            token=bool(token), ids=[t.get('id') for t in tasks if isinstance(t, dict)])
            else:
                err = v.get('error', {}) if isinstance(v, dict) else {}
                reason = next((d.get('reason') for d in err.get('data', []) if isinstance(d, dict)), None)
                page.update(tasks=0, full=0, token=False,
                            error=f"{err.get('code', r.status)} {reason or (v or {}).get('reason', '')}".strip())
                token = None
            pages.append(page)
            if not token:
                break
        return pages

    t = time.perf_counter()
    rounds = []
    for _ in range(a.rounds):
        rounds.append(await asyncio.gather(*(listing(cn) for cn in conns)))
    elapsed = time.perf_counter() - t
    for cn in conns:
        cn.close()
    await asyncio.sleep(a.after)
    stats1 = agent_stats(a.agent)
    res = win.close()
    pages = [p for rnd in rounds for lst in rnd for p in lst]
    ok = [p for p in pages if p['status'] == 200 and 'error' not in p]
    per_page = collections.Counter((p['tasks'], p['full'], p['token']) for p in ok)
    errors = collections.Counter(p.get('error', f"HTTP {p['status']}") for p in pages if p not in ok)
    listings = [lst for rnd in rounds for lst in rnd]
    gets = stats1.get('rpc.GetTask', 0) - stats0.get('rpc.GetTask', 0)
    listed = sum(p['tasks'] for p in ok)
    aborted = stats1.get('writes_aborted', 0) - stats0.get('writes_aborted', 0)
    shape = '; '.join(f'{n}× {t} tasks ({f} whole, {t - f} as id/context/state), nextPageToken '
                      f"{'set' if tok else 'none'}" for (t, f, tok), n in per_page.most_common())
    res.update(
        pages=len(pages), pages_ok=len(ok), per_page=shape, errors=dict(errors),
        summary=(f"{len(ok)}/{len(pages)} pages OK: {shape or 'none'}"
                 + (f"; errors {dict(errors)}" if errors else '')),
        details=[
            f'{a.tasks} tasks of ~{a.task_mb:g} MB each (the agent\'s GetTask answer); {a.rounds} rounds of '
            f'{a.concurrency} concurrent ListTasks (pageSize 100, includeArtifacts true), each listing '
            f'followed through nextPageToken (at most {a.max_pages} pages) in {elapsed:.1f} s',
            f'pages: {shape or "none"}' + (f'; errors: {dict(errors)}' if errors else ''),
            f'pages per listing: {fmt_counts(len(lst) for lst in listings)}; distinct tasks per listing '
            f'(of {a.tasks}): {fmt_counts(len({i for p in lst for i in p.get("ids", [])}) for lst in listings)}; '
            f'page size {min(p["bytes"] for p in pages)}–{max(p["bytes"] for p in pages)} bytes, '
            f'latency p50 {pct([p["ms"] for p in pages], 50):.0f} ms, max {max(p["ms"] for p in pages):.0f} ms',
            f'agent: {gets:.0f} GetTask reads during the listings ({gets / max(1, listed):.1f} per task listed), '
            f'{aborted:.0f} of them cut off by the proxy before the whole answer was written',
        ])
    return res


def raw_subscriber(edge: Edge, tid: str, i: int, rcvbuf: int,
                   method: str = 'SubscribeToTask') -> ssl.SSLSocket:
    """A TLS connection that sends SubscribeToTask (or `method` of the task) and never reads a
    byte of the answer."""
    u = urllib.parse.urlsplit(edge.url)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(10)
    s.connect((u.hostname, u.port))
    ss = edge.ctx.wrap_socket(s, server_hostname=u.hostname)
    body = json.dumps({'jsonrpc': '2.0', 'id': i, 'method': method, 'params': {'id': tid}}).encode()
    head = (f'POST {u.path or "/"} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\n'
            f'Authorization: Bearer {edge.a.token}\r\nContent-Type: application/json\r\n'
            f'Accept: text/event-stream\r\nA2A-Version: 1.0\r\nContent-Length: {len(body)}\r\n\r\n')
    ss.sendall(head.encode() + body)
    return ss


async def ph_slowreaders(edge: Edge) -> dict:
    a = edge.a
    c = edge.conn()
    tid = task_of(await edge.rpc(c, 'SendMessage', send_params()))['id']
    c.close()
    logs = LogTail(a.log)
    stats0 = agent_stats(a.agent)
    win = Window(edge)
    t_open = time.time()
    socks = [raw_subscriber(edge, tid, i, a.rcvbuf) for i in range(a.streams)]
    # hold the stalled streams longer than the proxy's stream_idle_timeout_ms
    all_dropped_at = None
    rss_early = queues_early = None
    edge_port = urllib.parse.urlsplit(edge.url).port
    agent_port = urllib.parse.urlsplit(a.agent).port
    while time.time() - t_open < a.stall_secs:
        await asyncio.sleep(0.25)
        if rss_early is None and time.time() - t_open >= a.early:
            rss_early, queues_early = rss_kb(edge.pid), tcp_queues(edge_port, agent_port)
        n = sum(1 for ln in logs.lines() if ln.get('event') == 'stream_end' and ln.get('outcome') == 'client.stalled')
        if all_dropped_at is None and n >= a.streams:
            all_dropped_at = time.time() - t_open
    rss_held = rss_kb(edge.pid)
    queues_held = tcp_queues(edge_port, agent_port)
    stats_held = agent_stats(a.agent)
    # an honest subscriber of the same principal, with the stalled connections still open
    hc = edge.conn()
    honest = {}
    try:
        r = await edge.rpc(hc, 'SubscribeToTask', {'id': tid}, timeout=a.honest_timeout,
                           extra={'Accept': 'text/event-stream'})
        text = r.body.decode('utf-8', 'replace')
        honest = {'status': r.status, 'events': text.count('\ndata: ') + text.startswith('data: '),
                  'bytes': len(r.body), 'ms': r.ms, 'error_frame': 'event: error' in text}
    except asyncio.TimeoutError:
        honest = {'status': 'timeout', 'events': 0, 'bytes': 0, 'ms': a.honest_timeout * 1000}
    hc.close()
    for s in socks:
        s.close()
    await asyncio.sleep(a.after)
    stats1 = agent_stats(a.agent)
    res = win.close()
    ends = collections.Counter(ln.get('outcome') for ln in logs.lines() if ln.get('event') == 'stream_end')
    stalled = ends.get('client.stalled', 0)
    started = stats1.get('streams_started', 0) - stats0.get('streams_started', 0)
    completed_held = stats_held.get('streams_completed', 0) - stats0.get('streams_completed', 0)
    full = a.events * a.event_kb / 1024
    res.update(
        stalled=stalled, rss_held_kb=rss_held, rss_early_kb=rss_early, ends=dict(ends), honest=honest,
        summary=(f"{stalled}/{a.streams} stalled streams ended `client.stalled`"
                 + (f" (all within {all_dropped_at:.1f} s)" if all_dropped_at else '')
                 + f"; RSS {mib(rss_held)} with the stalled connections still open after the drop; "
                 f"honest stream after: {honest.get('events', 0)} events, HTTP {honest.get('status')}"),
        details=[
            f'{a.streams} SubscribeToTask streams on one task; each client sends its request and never reads '
            f'(SO_RCVBUF {a.rcvbuf or "default"}); the agent streams {a.events} events of {a.event_kb} KiB '
            f'(~{full:.0f} MiB per stream) as fast as the proxy takes them; held {a.stall_secs:g} s',
            f'stream_end outcomes in the proxy log: {dict(ends)}',
            f'agent: {started:.0f} streams started, {completed_held:.0f} written to the end while the stalled '
            f'clients were connected; {stats1.get("stream_bytes", 0) - stats0.get("stream_bytes", 0):.0f} bytes '
            f'taken by the proxy in all',
            f'{a.early:g} s after the streams opened (before the idle timeout): RSS {mib(rss_early or 0)}; kernel '
            f'queues (not in RSS): {(queues_early or (0, 0))[0] / MB:.1f} MiB unsent to the clients, '
            f'{(queues_early or (0, 0))[1] / MB:.1f} MiB received from the agent and not yet read by the proxy',
            f'end of the hold (stalled connections still open): RSS {mib(rss_held)}, kernel queues '
            f'{queues_held[0] / MB:.1f} MiB unsent to the clients, {queues_held[1] / MB:.1f} MiB unread from the '
            f'agent; after the clients closed (+{a.after:g} s): RSS {mib(res["after_kb"])}',
            f'honest SubscribeToTask of the same principal after the drop (stalled connections still open): '
            f'HTTP {honest.get("status")}, {honest.get("events", 0)} events, {honest.get("bytes", 0)} bytes in '
            f'{honest.get("ms", 0):.0f} ms' + (' (ended with an error frame)' if honest.get('error_frame') else ''),
        ])
    return res


def first_bytes(s: ssl.SSLSocket, limit: int = 1 << 16, wait: float = 5) -> bytes:
    """What a socket's answer starts with: its head and the body's first 256 bytes (or all of a
    shorter body)."""
    s.settimeout(wait)
    got = b''
    try:
        while len(got) < limit:
            piece = s.recv(limit - len(got))
            if not piece:
                break
            got += piece
            head, sep, body = got.partition(b'\r\n\r\n')
            m = re.search(rb'(?i)\r\ncontent-length: *(\d+)', head)
            if sep and len(body) >= min(256, int(m.group(1)) if m else 256):
                break
    except (socket.timeout, OSError):
        pass
    return got


async def ph_slowgets(edge: Edge) -> dict:
    """Concurrent GetTask of one ~12 MB task from clients that never read: what the proxy
    holds of the answers while it waits for them."""
    a = edge.a
    c = edge.conn()
    tid = task_of(await edge.rpc(c, 'SendMessage', send_params()))['id']
    c.close()
    stats0 = agent_stats(a.agent)
    win = Window(edge)
    socks = [raw_subscriber(edge, tid, i, a.rcvbuf, 'GetTask') for i in range(a.streams)]
    await asyncio.sleep(a.stall_secs)
    rss_held = rss_kb(edge.pid)
    stats_held = agent_stats(a.agent)
    answers = collections.Counter()
    for s in socks:
        got = first_bytes(s)
        status = got[9:12].decode('ascii', 'replace') if got.startswith(b'HTTP/1.1 ') else '?'
        body = got.partition(b'\r\n\r\n')[2]
        if b'"result"' in body[:256]:
            kind = 'result'
        elif b'"error"' in body:
            m = re.search(rb'"reason":"([^"]+)"', body)
            kind = 'error ' + (m.group(1).decode() if m else '?')
        else:
            kind = 'nothing'
        answers[f'HTTP {status} {kind}'] += 1
        s.close()
    await asyncio.sleep(a.after)
    res = win.close()
    gets = stats_held.get('rpc.GetTask', 0) - stats0.get('rpc.GetTask', 0)
    res.update(
        rss_held_kb=rss_held, answers=dict(answers),
        summary=(f"{a.streams} GetTask of a ~{a.task_mb:g} MB task, clients not reading: "
                 f"RSS {mib(rss_held)} held after {a.stall_secs:g} s; answers {dict(answers)}"),
        details=[
            f'one task whose GetTask answer is ~{a.task_mb:g} MB; {a.streams} TLS connections each send '
            f'GetTask of it and read nothing for {a.stall_secs:g} s (SO_RCVBUF {a.rcvbuf or "default"}), '
            f'then read the start of their answer',
            f'agent: {gets:.0f} GetTask answered while the clients waited',
            f'answers (status and what the body starts with): {dict(answers)}',
            f'RSS at the end of the wait {mib(rss_held)}; after the clients closed (+{a.after:g} s): '
            f'{mib(res["after_kb"])}',
        ])
    return res


async def ph_cleaning(edge: Edge) -> dict:
    a = edge.a
    win = Window(edge)
    c = edge.conn()
    first = await edge.rpc(c, 'SendMessage', send_params())
    v = first.json() or {}
    if first.status != 200 or 'result' not in v:
        outcome = f'HTTP {first.status} {first.body[:200]!r}'
    else:
        md = task_of(first).get('metadata') or {}
        outcome = f'result, {len(first.body)} bytes, metadata with {len(md)} top-level key(s)'
    cpu0 = cpu_secs(edge.pid)
    walls = []
    for _ in range(a.answers):
        r = await edge.rpc(c, 'SendMessage', send_params())
        walls.append(r.ms)
    cpu_per = (cpu_secs(edge.pid) - cpu0) / a.answers * 1000

    hconn = edge.conn()

    async def health_probe(duration: float) -> list[float]:
        lat, end = [], time.monotonic() + duration
        while time.monotonic() < end:
            r = await hconn.request('GET', '/health', timeout=30)
            if r.status == 200:
                lat.append(r.ms)
            await asyncio.sleep(a.health_interval)
        return lat

    idle = await health_probe(1.0)
    stop = time.monotonic() + a.health_secs
    loaded_walls: list[float] = []

    async def sender(cn: Conn) -> None:
        while time.monotonic() < stop:
            r = await edge.rpc(cn, 'SendMessage', send_params())
            loaded_walls.append(r.ms)

    conns = [edge.conn() for _ in range(a.senders)]
    cpu1 = cpu_secs(edge.pid)
    t1 = time.monotonic()
    *_, loaded = await asyncio.gather(*(sender(cn) for cn in conns), health_probe(a.health_secs))
    cpu_load = cpu_secs(edge.pid) - cpu1
    load_secs = time.monotonic() - t1
    for cn in conns + [c, hconn]:
        cn.close()
    await asyncio.sleep(a.after)
    res = win.close()
    res.update(
        cpu_ms_per_answer=cpu_per, health_p50=pct(loaded, 50), health_max=max(loaded, default=float('nan')),
        summary=(f'proxy CPU {cpu_per:.1f} ms per answer; /health during {a.senders} concurrent answers: '
                 f'p50 {pct(loaded, 50):.1f} ms, max {max(loaded, default=float("nan")):.1f} ms'),
        details=[
            f'agent answer: a task whose metadata is one dotted key of {a.meta_segments} segments over '
            f'{a.meta_children} child keys ({first.body and len(first.body) or 0} bytes as relayed); first '
            f'answer: {outcome}',
            f'{a.answers} answers one after another: proxy CPU (utime+stime) {cpu_per:.1f} ms per answer; '
            f'round trip p50 {pct(walls, 50):.1f} ms, max {max(walls):.1f} ms',
            f'/health every {a.health_interval * 1000:.0f} ms: idle p50 {pct(idle, 50):.2f} ms, max '
            f'{max(idle, default=float("nan")):.2f} ms; during {a.senders} concurrent answer loops '
            f'({len(loaded_walls)} answers in {load_secs:.1f} s, round trip p50 {pct(loaded_walls, 50):.0f} ms, '
            f'proxy CPU {cpu_load / max(1, len(loaded_walls)) * 1000:.1f} ms per answer): {len(loaded)} probes, '
            f'p50 {pct(loaded, 50):.2f} ms, p99 {pct(loaded, 99):.2f} ms, max '
            f'{max(loaded, default=float("nan")):.2f} ms',
        ])
    return res


async def ph_card(edge: Edge) -> dict:
    a = edge.a
    # the start-up fetch failed; wait until its backoff (1 s) is over, the worst case
    for _ in range(100):
        times = agent_stats(a.agent).get('card_fetch_times') or [0]
        if time.time() - max(times) > 1.5:
            break
        await asyncio.sleep(0.1)
    s0 = agent_stats(a.agent)
    win = Window(edge)
    bursts = []
    for b in range(a.bursts):
        if b:
            await asyncio.sleep(a.burst_gap)
        f0 = agent_stats(a.agent).get('card_fetches', 0)

        async def one() -> tuple[object, float]:
            cn = edge.conn()
            try:
                r = await cn.request('GET', '/.well-known/agent-card.json', timeout=30)
                return r.status, r.ms
            except (OSError, asyncio.TimeoutError, ssl.SSLError, asyncio.IncompleteReadError) as e:
                return type(e).__name__, 0.0
            finally:
                cn.close()

        t = time.perf_counter()
        out = await asyncio.gather(*(one() for _ in range(a.requests)))
        wall = time.perf_counter() - t
        f1 = agent_stats(a.agent).get('card_fetches', 0)
        bursts.append({'codes': dict(collections.Counter(str(s) for s, _ in out)), 'fetches': f1 - f0,
                       'wall_s': wall, 'max_ms': max(ms for _, ms in out)})
    await asyncio.sleep(a.after)
    s1 = agent_stats(a.agent)
    res = win.close()
    fetches = sum(b['fetches'] for b in bursts)
    codes = collections.Counter()
    for b in bursts:
        codes.update(b['codes'])
    res.update(
        fetches=fetches, codes=dict(codes),
        summary=(f'{a.requests * a.bursts} public requests caused {fetches:.0f} card fetch(es) at the agent; '
                 f'status codes {dict(sorted(codes.items()))}'),
        details=[
            f'the agent\'s card is not JSON; {a.bursts} burst(s) of {a.requests} concurrent unauthenticated GET '
            f'/.well-known/agent-card.json (each on its own TLS connection), the first one more than 1.5 s after '
            f'the last fetch (after the backoff of the failed start-up fetch)',
            *(f'burst {i + 1}: {b["fetches"]:.0f} fetch(es) at the agent, codes {b["codes"]}, {b["wall_s"]:.2f} s, '
              f'slowest answer {b["max_ms"]:.0f} ms' for i, b in enumerate(bursts)),
            f'card fetches at the agent over the whole proxy life: {s1.get("card_fetches", 0):.0f} '
            f'({s0.get("card_fetches", 0):.0f} before the first burst)',
        ])
    return res


def values_parts(a) -> tuple[str, int, str]:
    """The message's parts for --values-shape (JSON), its item count, and what they are. Within
    the value bound the items are split into data parts of at most 1 MB each (the edge's bound
    of a data part), so that the request is valid and forwarded."""
    def part(data: str) -> str:
        return '{"data":{"a":' + data + '},"mediaType":"application/json"}'
    if a.values_shape == 'zeros':
        n = max(1, (int(a.body_mb * 1024 * 1024) - 200) // 2)
        return part('[' + ','.join(['0'] * n) + ']'), n, f'one data part of an array of {n:,} zeros'
    n = a.values_count
    items = ['[0]'] * n if a.values_shape == 'nested' else [f'"k{i}":0' for i in range(n)]
    per = 1_000_000 // (len(items[-1]) + 1)
    chunks = [items[i:i + per] for i in range(0, n, per)]
    if a.values_shape == 'nested':
        parts = [part('[' + ','.join(c) + ']') for c in chunks]
        what = f'{len(parts)} data parts of {n:,} one-item arrays `[0]` in all'
    else:
        parts = [part('{' + ','.join(c) + '}') for c in chunks]
        what = f'{len(parts)} data parts of {n:,} object members `"k<i>":0` in all'
    return ','.join(parts), n, what


async def ph_values(edge: Edge) -> dict:
    """Authenticated SendMessage bodies of small JSON values in a data part: `[0,0,...]` (each
    value a 72-byte tree node where its text costs two bytes), or within the value bound
    `[[0],[0],...]` or `{"k0":0,...}` (trees of 100 to 190 MB from bodies of a few MB)."""
    a = edge.a
    parts, n, what = values_parts(a)
    body = ('{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m",'
            '"role":"ROLE_USER","parts":[' + parts + ']}}}').encode()
    win = Window(edge)
    codes: collections.Counter = collections.Counter()
    slowest = 0.0

    async def one() -> None:
        nonlocal slowest
        cn = edge.conn()
        try:
            r = await cn.request('POST', headers=edge.rpc_headers(), body=body, timeout=120)
            v = r.json()
            err = v.get('error') if isinstance(v, dict) else None
            reason = (err.get('data') or [{}])[0].get('reason') if isinstance(err, dict) else None
            if reason is None and isinstance(v, dict) and 'result' not in v:
                reason = v.get('reason')  # an HTTP refusal: {"error": ..., "reason": ...}
            codes[f'{r.status} {reason or "result"}'] += 1
            slowest = max(slowest, r.ms)
        except (OSError, asyncio.TimeoutError, ssl.SSLError, asyncio.IncompleteReadError) as e:
            codes[type(e).__name__] += 1
        finally:
            cn.close()

    for _ in range(a.rounds):
        await asyncio.gather(*(one() for _ in range(a.concurrency)))
    await asyncio.sleep(a.after)
    res = win.close()
    total = a.rounds * a.concurrency
    res.update(
        codes=dict(codes),
        summary=(f'{total} SendMessage bodies of {len(body) / 1048576:.1f} MiB ({a.values_shape}, {n:,} items '
                 f'each), {a.concurrency} at once: {dict(sorted(codes.items()))}'),
        details=[
            f'{a.rounds} round(s) of {a.concurrency} concurrent requests, each on its own TLS connection; a '
            f'message of {what} (a body refused is never forwarded)',
            f'slowest answer {slowest:.0f} ms',
        ])
    return res


async def ph_throttle(edge: Edge) -> dict:
    a = edge.a
    logs = LogTail(a.log)
    bad = 'wrong-' + uuid.uuid4().hex
    win = Window(edge)

    async def wave(addrs: list[str], workers: int) -> tuple[collections.Counter, collections.Counter, float, float]:
        codes: collections.Counter = collections.Counter()
        reasons: collections.Counter = collections.Counter()
        retry = [0.0]
        it = iter(addrs)

        async def worker() -> None:
            cn = edge.conn()
            for ip in it:
                try:
                    r = await cn.request('POST', headers=edge.rpc_headers(bad, {'X-Forwarded-For': ip}),
                                         body=b'', timeout=30)
                except (OSError, asyncio.TimeoutError, ssl.SSLError, asyncio.IncompleteReadError) as e:
                    codes[type(e).__name__] += 1
                    cn.close()
                    continue
                codes[r.status] += 1
                if r.status == 429:
                    retry[0] = max(retry[0], float(r.headers.get('retry-after', 0) or 0))
                    v = r.json()
                    reasons[v.get('reason') if isinstance(v, dict) else None] += 1
            cn.close()

        t = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(workers)))
        return codes, reasons, retry[0], time.perf_counter() - t

    v4 = [f'10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}' for i in range(1, a.requests + 1)]
    c1, r1, _, s1 = await wave(v4, a.workers)
    rss_wave = rss_kb(edge.pid)
    v6 = [f'2001:db8:77:1:{os.urandom(2).hex()}:{os.urandom(2).hex()}:{os.urandom(2).hex()}:{i:x}'
          for i in range(a.v6_requests)]
    c2, r2, retry, _ = await wave(v6, min(a.workers, 8))
    peak_t = time.time()
    wait = max(retry, 1.0) + a.past_block
    await asyncio.sleep(wait)
    sweep = [f'11.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}' for i in range(1, a.sweep_requests + 1)]
    c3, _, _, _ = await wave(sweep, a.workers)
    await asyncio.sleep(a.after)
    res = win.close()
    refused = collections.Counter(ln.get('reason') for ln in logs.lines() if ln.get('status') in (401, 429))
    n429 = c2.get(429, 0)
    res.update(
        v6_429=n429, v6_codes={str(k): v for k, v in c2.items()},
        summary=(f'{a.v6_requests} failures from one /64: {n429} got 429 ({c2.get(401, 0)} got 401); '
                 f'{a.requests} one-shot IPv4 failures: {dict(c1)}'),
        details=[
            f'{a.requests} requests with a wrong bearer token, each from its own X-Forwarded-For IPv4 address '
            f'(10.0.0.1…), {a.workers} keep-alive connections: {dict(c1)} in {s1:.1f} s '
            f'({a.requests / s1:.0f}/s); RSS right after: {mib(rss_wave)}',
            f'{a.v6_requests} from random addresses inside 2001:db8:77:1::/64: {dict(c2)}, 429 reasons {dict(r2)}, '
            f'largest Retry-After {retry:g} s',
            f'then {wait:g} s of quiet (Retry-After + {a.past_block:g} s) and {a.sweep_requests} failures from new '
            f'addresses (11.0.0.1…) so the keyed limiters sweep: {dict(c3)}; after = {a.after:g} s later',
            f'proxy log, refusals during the phase by reason: {dict(refused)}',
        ])
    return res


PHASES = {'listtasks': ph_listtasks, 'listtasks_fit': ph_listtasks, 'slowreaders': ph_slowreaders,
          'slowgets': ph_slowgets, 'cleaning': ph_cleaning,
          'card': ph_card, 'throttle': ph_throttle, 'values': ph_values}


# ---- the report -----------------------------------------------------------------------------

TITLES = {
    'listtasks': 'listtasks: 10 concurrent ListTasks over ~12 MB tasks',
    'listtasks_fit': 'listtasks_fit: the same over tasks just under the 4 MiB page budget',
    'slowreaders': 'slowreaders: stalled SSE subscribers',
    'slowgets': 'slowgets: concurrent GetTask of a large task, clients not reading',
    'cleaning': 'cleaning: answer metadata with a huge dotted key',
    'values': 'values: request bodies of small JSON values',
    'card': 'card: invalid upstream card, public GET burst',
    'throttle': 'throttle: auth failures from rotating addresses',
}


def report(a: argparse.Namespace) -> None:
    rows, details = [], []
    for path in a.files:
        with open(path) as f:
            r = json.load(f)
        name = r['phase']
        rows.append(f"| {name} | {mib(r['before_kb'])} | {mib(r['peak_kb'])} | {mib(r['after_kb'])} | "
                    f"{r['summary']} |")
        details.append(f"**{TITLES.get(name, name)}** (fresh proxy; VmHWM at the end {mib(r['hwm_kb'])}, "
                       f"phase {r['elapsed_s']:.0f} s)\n\n" + '\n'.join(f'- {d}' for d in r['details']))
    print('# a2a-edge memory and CPU under hostile agents and callers\n')
    print(a.header + '\n')
    print(a.policy_note + '\n')
    print('| phase | RSS before | RSS peak | RSS after | phase figure |')
    print('|---|---:|---:|---:|---|')
    print('\n'.join(rows))
    print('\nRSS is VmRSS of the proxy process (/proc/PID/status): "before" just before the attack, '
          '"peak" the largest 50 ms sample from then until "after", which is read a few seconds after '
          'the attack ended.\n')
    print('## Details\n')
    print('\n\n'.join(details))


# ---- main -----------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('phase', choices=['sample', 'report', *PHASES])
    ap.add_argument('files', nargs='*')
    ap.add_argument('--pid', type=int)
    ap.add_argument('--out')
    ap.add_argument('--interval', type=float, default=0.05)
    ap.add_argument('--url')
    ap.add_argument('--cacert')
    ap.add_argument('--token')
    ap.add_argument('--samples')
    ap.add_argument('--agent')
    ap.add_argument('--log')
    ap.add_argument('--after', type=float, default=3)
    # listtasks
    ap.add_argument('--tasks', type=int, default=10)
    ap.add_argument('--task-mb', type=float, default=12)
    ap.add_argument('--concurrency', type=int, default=10)
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--max-pages', type=int, default=20)
    # slowreaders
    ap.add_argument('--streams', type=int, default=20)
    ap.add_argument('--stall-secs', type=float, default=12)
    ap.add_argument('--rcvbuf', type=int, default=0)
    ap.add_argument('--early', type=float, default=3)
    ap.add_argument('--events', type=int, default=12)
    ap.add_argument('--event-kb', type=int, default=1024)
    ap.add_argument('--honest-timeout', type=float, default=30)
    # cleaning
    ap.add_argument('--answers', type=int, default=10)
    ap.add_argument('--senders', type=int, default=2)
    ap.add_argument('--health-secs', type=float, default=5)
    ap.add_argument('--health-interval', type=float, default=0.05)
    ap.add_argument('--meta-segments', type=int, default=100_000)
    ap.add_argument('--meta-children', type=int, default=50_000)
    # values (--concurrency and --rounds are shared with listtasks)
    ap.add_argument('--body-mb', type=float, default=32)
    ap.add_argument('--values-shape', choices=['zeros', 'nested', 'keys'], default='zeros')
    ap.add_argument('--values-count', type=int, default=500_000)
    # card
    ap.add_argument('--requests', type=int, default=200)
    ap.add_argument('--bursts', type=int, default=1)
    ap.add_argument('--burst-gap', type=float, default=1.5)
    # throttle (--requests is shared with card: run.sh passes it per phase)
    ap.add_argument('--workers', type=int, default=16)
    ap.add_argument('--v6-requests', type=int, default=300)
    ap.add_argument('--past-block', type=float, default=2)
    ap.add_argument('--sweep-requests', type=int, default=1100)
    # report
    ap.add_argument('--header', default='')
    ap.add_argument('--policy-note', default='')
    a = ap.parse_intermixed_args()
    if a.phase == 'sample':
        sample(a.pid, a.out, a.interval)
        return
    if a.phase == 'report':
        report(a)
        return
    edge = Edge(a)
    t = time.time()
    res = asyncio.run(PHASES[a.phase](edge))
    res['phase'] = a.phase
    res['elapsed_s'] = time.time() - t
    with open(a.out, 'w') as f:
        json.dump(res, f, indent=1)
    print(f'{a.phase}: before {mib(res["before_kb"])}, peak {mib(res["peak_kb"])}, after {mib(res["after_kb"])}: '
          f'{res["summary"]}', file=sys.stderr)


if __name__ == '__main__':
    main()
