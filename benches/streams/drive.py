#!/usr/bin/env python3
"""Driver of the streams benchmark (stdlib only: asyncio + ssl; every connection to 127.0.0.1).

    drive.py memory  --name NAME --url URL --cacert CA --edge-pid PID [--engine-pid PID]
                     [--admin HOST:PORT] --streams N --out JSON [knobs]
    drive.py latency --direct URL --edge URL --cacert CA --n N --out JSON [knobs]
    drive.py report  --header LINE --note TEXT JSON...

The bearer token comes from $BENCH_TOKEN (or --token).

`memory`: the idle VmRSS of the edge (and of the engine, when given) sampled --idle-samples
times over --idle-secs (the max is reported), then --streams SendStreamingMessage streams of
`[[wait]]` turns, one TLS connection (HTTP/1.1) each, at most --open-concurrency being set up at
once; once every stream has had its first SSE `data:` event (else the run fails), --settle s
for the rest of the turn's events, then the RSS sampled the same way, the edge's own gauges
(`a2a_edge_streams_open`, `a2a_edge_connections_open`) and its open descriptors; then every
client connection is closed and the RSS read again --after s later.

`latency`: time from sending a SendStreamingMessage (a default turn: task, working, 3 artifact
chunks, input-required) to the end of its first SSE `data:` event, --n streams per target and
connection mode, the targets interleaved (direct, edge, direct, edge, ...; --warmup more first,
not counted). Modes: `fresh` (a new connection per stream: TCP, and TLS to the edge; the timer
starts after the handshake, and the connection is closed after the first event) and
`keepalive` (one connection per target; each stream is read to its end, then the next request
goes on the same connection). Blocking sockets, no event loop, so the client adds as little as
it can to both sides.
"""

from __future__ import annotations

import argparse
import asyncio
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

KIB = 1024
EVENT_END = re.compile(rb'\r?\n\r?\n')


# ---- the processes ------------------------------------------------------------------------

def proc_mem(pid: int) -> dict:
    """VmRSS, VmHWM, RssAnon, RssFile, Threads (status) and Anonymous, Private_Dirty,
    AnonHugePages (smaps_rollup) of PID, kB; fds: open descriptors."""
    out: dict = {}
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            k, _, v = line.partition(':')
            if k in ('VmRSS', 'VmHWM', 'RssAnon', 'RssFile', 'RssShmem', 'Threads'):
                out[k] = int(v.split()[0])
    try:
        with open(f'/proc/{pid}/smaps_rollup') as f:
            for line in f:
                k, _, v = line.partition(':')
                if k in ('Anonymous', 'Private_Dirty', 'AnonHugePages'):
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    try:
        out['fds'] = len(os.listdir(f'/proc/{pid}/fd'))
        names: dict[str, int] = {}
        for t in os.listdir(f'/proc/{pid}/task'):
            with open(f'/proc/{pid}/task/{t}/comm') as f:
                name = re.sub(r'\d+$', 'N', f.read().strip())
            names[name] = names.get(name, 0) + 1
        out['thread_names'] = names
    except OSError:
        pass
    return out


async def sample_max(pids: dict[str, int], count: int, secs: float) -> dict[str, dict]:
    """`count` snapshots of each process over `secs`; per process the snapshot of the largest
    VmRSS, with all the VmRSS samples."""
    best: dict[str, dict] = {}
    seen: dict[str, list[int]] = {k: [] for k in pids}
    for i in range(count):
        if i:
            await asyncio.sleep(secs / max(1, count - 1))
        for name, pid in pids.items():
            m = proc_mem(pid)
            seen[name].append(m['VmRSS'])
            if name not in best or m['VmRSS'] > best[name]['VmRSS']:
                best[name] = m
    for name in best:
        best[name]['samples'] = seen[name]
    return best


def metrics(admin: str | None) -> dict[str, float]:
    """The edge's a2a_edge_streams_open and a2a_edge_connections_open (admin listener)."""
    if not admin:
        return {}
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f'http://{admin}/metrics', timeout=10) as r:
        text = r.read().decode()
    out = {}
    for name in ('a2a_edge_streams_open', 'a2a_edge_connections_open'):
        m = re.search(rf'^{name} (\S+)$', text, re.M)
        if m:
            out[name] = float(m.group(1))
    return out


# ---- requests -----------------------------------------------------------------------------

def rpc_body(text: str) -> bytes:
    return json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': 'SendStreamingMessage', 'params': {
        'message': {'messageId': str(uuid.uuid4()), 'role': 'ROLE_USER', 'parts': [{'text': text}]}}}).encode()


def request_bytes(u: urllib.parse.SplitResult, token: str | None, text: str) -> bytes:
    body = rpc_body(text)
    head = (f'POST {u.path or "/"} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\n'
            'Content-Type: application/json\r\nAccept: text/event-stream\r\nA2A-Version: 1.0\r\n'
            + (f'Authorization: Bearer {token}\r\n' if token else '')
            + f'Content-Length: {len(body)}\r\n\r\n')
    return head.encode() + body


def has_data(event: bytes) -> bool:
    return any(line.startswith(b'data:') for line in event.splitlines())


def tls_context(cacert: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=cacert)
    ctx.set_alpn_protocols(['http/1.1'])
    return ctx


class BadAnswer(Exception):
    pass


# ---- memory: many open streams (asyncio) ----------------------------------------------------

class Stream:
    """One SSE stream on its own TLS connection."""

    def __init__(self) -> None:
        self.w: asyncio.StreamWriter | None = None
        self.first_at: float | None = None
        self.events = 0
        self.ended: str | None = None  # why it ended, while the benchmark still held it

    async def run(self, u, ctx, req: bytes, sem: asyncio.Semaphore, first: asyncio.Event,
                  progress: dict, n: int) -> None:
        try:
            async with sem:
                r, self.w = await asyncio.open_connection(u.hostname, u.port, ssl=ctx,
                                                          server_hostname=u.hostname if ctx else None,
                                                          limit=1 << 20)
                self.w.write(req)
                await self.w.drain()
                status = (await r.readuntil(b'\r\n')).split()
                headers = {}
                while (line := await r.readuntil(b'\r\n')) != b'\r\n':
                    k, _, v = line.decode('latin-1').partition(':')
                    headers[k.strip().lower()] = v.strip().lower()
                if len(status) < 2 or status[1] != b'200' or 'text/event-stream' not in headers.get('content-type', ''):
                    body = await asyncio.wait_for(r.read(600), 5)
                    raise BadAnswer(f'HTTP {status[1:2]} {headers.get("content-type")}: {body[:300]!r}')
                chunked = headers.get('transfer-encoding') == 'chunked'
                buf = b''
                pieces = body_pieces(r, chunked)  # one generator: a break leaves it mid-chunk
                async for piece in pieces:
                    buf += piece
                    while (m := EVENT_END.search(buf)):
                        ev, buf = buf[:m.start()], buf[m.end():]
                        if has_data(ev):
                            self.events += 1
                            if self.first_at is None:
                                self.first_at = time.monotonic()
                                progress['first'] += 1
                                if progress['first'] == n:
                                    first.set()
                    if self.first_at is not None:
                        break
                if self.first_at is None:
                    raise BadAnswer('the stream ended before its first event')
            # the rest of the turn's events, and whatever comes until the benchmark closes it
            async for piece in pieces:
                buf += piece
                while (m := EVENT_END.search(buf)):
                    ev, buf = buf[:m.start()], buf[m.end():]
                    self.events += has_data(ev)
            self.ended = 'ended by the server'
        except asyncio.CancelledError:
            raise
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                BadAnswer, ValueError) as e:
            self.ended = f'{type(e).__name__}: {e}'[:300]
            progress.setdefault('errors', []).append(self.ended)
            if self.first_at is None:
                progress['failed'] += 1
                if progress['failed'] + progress['first'] >= n:
                    first.set()


async def body_pieces(r: asyncio.StreamReader, chunked: bool):
    """The decoded body of an HTTP/1.1 answer, piece by piece, until its end."""
    if not chunked:
        while (piece := await r.read(65536)):
            yield piece
        return
    while True:
        size = int((await r.readuntil(b'\r\n')).split(b';')[0].strip(), 16)
        if size == 0:
            while await r.readuntil(b'\r\n') != b'\r\n':
                pass
            return
        yield await r.readexactly(size)
        await r.readexactly(2)


async def memory(a: argparse.Namespace) -> dict:
    pids = {'edge': a.edge_pid}
    if a.engine_pid:
        pids['engine'] = a.engine_pid
    res: dict = {'name': a.name, 'label': a.label, 'workers': a.workers, 'streams': a.streams,
                 'directive': a.text}
    res['idle'] = await sample_max(pids, a.idle_samples, a.idle_secs)
    res['idle_metrics'] = metrics(a.admin)
    if a.streams <= 0:
        return res
    u = urllib.parse.urlsplit(a.url)
    ctx = tls_context(a.cacert) if u.scheme == 'https' else None
    token = a.token or os.environ.get('BENCH_TOKEN', '')
    sem = asyncio.Semaphore(a.open_concurrency)
    first = asyncio.Event()
    progress = {'first': 0, 'failed': 0}
    streams = [Stream() for _ in range(a.streams)]
    t0 = time.monotonic()
    tasks = [asyncio.create_task(s.run(u, ctx, request_bytes(u, token, a.text), sem, first, progress, a.streams))
             for s in streams]
    try:
        await asyncio.wait_for(first.wait(), a.open_timeout)
    except asyncio.TimeoutError:
        pass
    opened_s = time.monotonic() - t0
    got = sum(1 for s in streams if s.first_at is not None)
    res.update(first_events=got, open_s=opened_s, failed=progress['failed'],
               errors=sorted(set(progress.get('errors', [])))[:5])
    if got == a.streams:
        await asyncio.sleep(a.settle)
        res['held'] = await sample_max(pids, a.idle_samples, a.idle_secs)
        res['held_metrics'] = metrics(a.admin)
        res['still_open'] = sum(1 for s in streams if s.first_at is not None and s.ended is None)
        res['events'] = sum(s.events for s in streams)
        res['ended'] = sorted({s.ended for s in streams if s.ended})[:5]
    for s in streams:
        if s.w is not None:
            s.w.transport.abort()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    if got == a.streams:
        await asyncio.sleep(a.after)
        res['after'] = await sample_max(pids, 1, 0)
        res['after_metrics'] = metrics(a.admin)
    return res


# ---- latency: time to the first event (blocking sockets) ------------------------------------

class Client:
    """HTTP/1.1 over one blocking socket (TLS when the URL is https)."""

    def __init__(self, url: str, ctx: ssl.SSLContext | None, token: str | None) -> None:
        self.u = urllib.parse.urlsplit(url)
        self.ctx = ctx if self.u.scheme == 'https' else None
        self.token = token if self.ctx else None  # the engine itself takes no credential here
        self.s: socket.socket | None = None
        self.buf = b''

    def connect(self) -> None:
        s = socket.create_connection((self.u.hostname, self.u.port), timeout=30)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.ctx:
            s = self.ctx.wrap_socket(s, server_hostname=self.u.hostname)  # the handshake, here
        self.s, self.buf = s, b''

    def close(self) -> None:
        if self.s is not None:
            try:
                self.s.close()
            except OSError:
                pass
        self.s = None

    def _more(self) -> None:
        piece = self.s.recv(65536)
        if not piece:
            raise BadAnswer('connection closed by the server')
        self.buf += piece

    def _line(self) -> bytes:
        while (i := self.buf.find(b'\r\n')) < 0:
            self._more()
        line, self.buf = self.buf[:i], self.buf[i + 2:]
        return line

    def _exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._more()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def stream(self, text: str, to_end: bool) -> float:
        """Sends one SendStreamingMessage; the seconds until its first data event is complete.
        to_end: read the stream to its end (the connection can carry the next request)."""
        req = request_bytes(self.u, self.token, text)
        t0 = time.perf_counter()
        self.s.sendall(req)
        status = self._line().split()
        headers = {}
        while (line := self._line()):
            k, _, v = line.decode('latin-1').partition(':')
            headers[k.strip().lower()] = v.strip().lower()
        if len(status) < 2 or status[1] != b'200':
            raise BadAnswer(f'HTTP {status[1:2]}: {self.buf[:300]!r}')
        if headers.get('transfer-encoding') != 'chunked':
            raise BadAnswer(f'not a chunked stream: {headers}')
        body, first, done = b'', None, False
        while not done:
            size = int(self._line().split(b';')[0].strip(), 16)
            if size == 0:
                while self._line():
                    pass
                done = True
            else:
                body += self._exactly(size)
                self._exactly(2)
            if first is None:
                while (m := EVENT_END.search(body)):
                    ev, body = body[:m.start()], body[m.end():]
                    if has_data(ev):
                        first = time.perf_counter() - t0
                        break
                if first is not None and not to_end:
                    return first
        if first is None:
            raise BadAnswer('the stream ended without a data event')
        if headers.get('connection') == 'close':
            self.close()
        return first


def quantiles(xs: list[float]) -> dict:
    q = statistics.quantiles(xs, n=100, method='inclusive')
    return {'n': len(xs), 'p50': statistics.median(xs), 'p90': q[89], 'p99': q[98],
            'mean': statistics.fmean(xs), 'min': min(xs), 'max': max(xs)}


def latency(a: argparse.Namespace) -> dict:
    ctx = tls_context(a.cacert)
    token = a.token or os.environ.get('BENCH_TOKEN', '')
    targets = {'direct': a.direct, 'edge': a.edge}
    if a.nginx:
        targets['nginx'] = a.nginx
    res: dict = {'n': a.n, 'warmup': a.warmup, 'modes': {}, 'text': a.latency_text}
    for mode in a.modes.split(','):
        clients = {k: Client(v, ctx, token) for k, v in targets.items()}
        times: dict[str, list[float]] = {k: [] for k in targets}
        for i in range(a.warmup + a.n):
            for k, c in clients.items():
                if mode == 'fresh' or c.s is None:
                    c.connect()
                try:
                    dt = c.stream(a.latency_text, to_end=(mode == 'keepalive'))
                finally:
                    if mode == 'fresh':
                        c.close()
                if i >= a.warmup:
                    times[k].append(dt * 1000)
        for c in clients.values():
            c.close()
        res['modes'][mode] = {k: quantiles(v) for k, v in times.items()}
        d, e = res['modes'][mode]['direct'], res['modes'][mode]['edge']
        n = res['modes'][mode].get('nginx')
        print(f"latency {mode}: direct p50 {d['p50']:.3f} ms, edge p50 {e['p50']:.3f} ms "
              f"(+{e['p50'] - d['p50']:.3f} ms)"
              + (f", nginx p50 {n['p50']:.3f} ms (+{n['p50'] - d['p50']:.3f} ms)" if n else ''),
              file=sys.stderr)
    return res


# ---- report -------------------------------------------------------------------------------

def mib(kb: float | None) -> str:
    return '–' if kb is None else f'{kb / KIB:.1f} MiB'


def fmt_names(names: dict[str, int]) -> str:
    return ', '.join(f'{k} ×{v}' for k, v in sorted(names.items()))


def gauge_of(r: dict, when: str, name: str) -> str:
    v = r.get(when, {}).get(name)
    return '?' if v is None else f'{v:.0f}'


def verdict(ok: bool) -> str:
    return 'yes' if ok else '**no**'


def report(a: argparse.Namespace) -> None:
    mem, lat = [], None
    for path in a.files:
        with open(path) as f:
            r = json.load(f)
        if 'modes' in r:
            lat = r
        else:
            mem.append(r)
    out = ['# a2a-edge streams: memory per open SSE stream, first-event latency', '', a.header, '', a.note, '']
    if mem:
        n = max(r['streams'] for r in mem)
        out += [f'## Memory: VmRSS of `a2a-edge serve`, idle and with {n:,} open SSE streams', '',
                f'| edge | A2A_EDGE_WORKERS | threads | idle RSS (≤ 15 MiB?) | RSS with {n:,} streams '
                f'(≤ 60 MiB?) | per stream | streams open (edge gauge) / client | edge fds | RSS {a.after:g} s after '
                'the clients closed | engine RSS idle → with the streams |',
                '|---|---|---:|---:|---:|---:|---|---:|---:|---|']
        for r in mem:
            idle, held, after = r['idle']['edge'], r.get('held', {}).get('edge'), r.get('after', {}).get('edge')
            eng_i, eng_h = r['idle'].get('engine'), r.get('held', {}).get('engine')
            per = f"{(held['VmRSS'] - idle['VmRSS']) / r['streams']:.1f} KiB" if held else '–'
            threads = f"{idle['Threads']}" + (f" → {held['Threads']}" if held and held['Threads'] != idle['Threads'] else '')
            gauge = (f"{gauge_of(r, 'held_metrics', 'a2a_edge_streams_open')} / {r.get('still_open')}"
                     if held else f"failed: {r.get('first_events', 0)} of {r['streams']} got a first event")
            engine = (f"{mib(eng_i['VmRSS'])} → {mib(eng_h['VmRSS'] if eng_h else None)}" if eng_i
                      else 'in the edge (embedded)')
            out.append(f"| {r['label']} | {r['workers']} | {threads} | {mib(idle['VmRSS'])} "
                       f"({verdict(idle['VmRSS'] <= 15 * KIB)}) | "
                       + (f"{mib(held['VmRSS'])} ({verdict(held['VmRSS'] <= 60 * KIB)})" if held else '–')
                       + f" | {per} | {gauge} | {held['fds'] if held else '–'} | "
                       f"{mib(after['VmRSS']) if after else '–'} | {engine} |")
        out += ['', 'RSS = VmRSS from /proc/PID/status, the largest of '
                f'{len(mem[0]["idle"]["edge"]["samples"])} samples over {a.idle_secs:g} s; per stream = '
                f'(RSS with the streams − idle RSS) / {n:,}. The streams: one TLS connection (HTTP/1.1) each, '
                f'a SendStreamingMessage of `{mem[0]["directive"]}` (the engine\'s `[[wait]]`: task, working, '
                '3 artifact chunks, then the turn stays WORKING, the stream open); measured once every stream '
                f'had its first event and {a.settle:g} s more. Edge fds: its open descriptors then (each stream: '
                'the caller\'s connection and, with an engine upstream, one to the engine).', '']
        out += ['Memory detail (idle → with the streams; kB from /proc/PID/status and smaps_rollup):', '']
        for r in mem:
            idle, held = r['idle']['edge'], r.get('held', {}).get('edge')
            if not held:
                out.append(f"- {r['label']}, workers {r['workers']}: idle RssAnon {idle.get('RssAnon')} kB, "
                           f"RssFile {idle.get('RssFile')} kB; the streams did not all open: {r.get('errors')}")
                continue
            d_anon = held.get('RssAnon', 0) - idle.get('RssAnon', 0)
            d_file = held.get('RssFile', 0) - idle.get('RssFile', 0)
            out.append(f"- {r['label']}, workers {r['workers']}: RssAnon {idle.get('RssAnon')} → {held.get('RssAnon')} kB "
                       f"(+{d_anon / r['streams']:.1f} KiB per stream), RssFile {idle.get('RssFile')} → "
                       f"{held.get('RssFile')} kB (+{d_file} kB), smaps Anonymous {idle.get('Anonymous')} → "
                       f"{held.get('Anonymous')} kB (of it in transparent huge pages, AnonHugePages: {idle.get('AnonHugePages')} → "
                       f"{held.get('AnonHugePages')} kB), threads {idle['Threads']} → {held['Threads']} "
                       f"({fmt_names(held.get('thread_names', {}))}), fds "
                       f"{idle.get('fds')} → {held.get('fds')}; streams opened in {r['open_s']:.1f} s, "
                       f"{r['events']:,} data events received while held; VmHWM {held.get('VmHWM')} kB; after close: "
                       f"streams open {gauge_of(r, 'after_metrics', 'a2a_edge_streams_open')}, "
                       f"connections open {gauge_of(r, 'after_metrics', 'a2a_edge_connections_open')}")
        out.append('')
    if lat:
        out += [f"## First SSE event: direct vs through the edge ({lat['n']} streams per row, "
                f"{lat['warmup']} more first as warm-up)", '',
                '| connections | direct p50 / p90 / p99 | edge p50 / p90 / p99 | edge − direct p50 (≤ +0.3 ms?) '
                '| edge / direct p50 | edge − direct p90 / p99 |',
                '|---|---|---|---:|---:|---|']
        names = {'fresh': 'fresh per stream (timer after the TCP/TLS handshake)',
                 'keepalive': 'keep-alive (one per target, each stream read to its end)'}
        for mode, m in lat['modes'].items():
            d, e = m['direct'], m['edge']
            diff = e['p50'] - d['p50']
            out.append(f"| {names.get(mode, mode)} | {d['p50']:.3f} / {d['p90']:.3f} / {d['p99']:.3f} ms | "
                       f"{e['p50']:.3f} / {e['p90']:.3f} / {e['p99']:.3f} ms | {diff:+.3f} ms ({verdict(diff <= 0.3)}) | "
                       f"{e['p50'] / d['p50']:.2f} | {e['p90'] - d['p90']:+.3f} / {e['p99'] - d['p99']:+.3f} ms |")
        out += ['', 'Time from the request\'s first byte sent to the end of the first SSE `data:` event (the '
                'task), in ms. direct: plain HTTP/1.1 to `a2a-edge engine`; edge: TLS + bearer to '
                '`a2a-edge serve`, whose upstream is that engine. The targets alternate request by request '
                f"(text `{lat['text']}`: a default turn, 5 events). fresh: a new connection per stream, closed "
                'after the first event (the edge drops its stream from the engine then, and the connection with '
                'it unless it had already read the turn to its end); keep-alive: the client makes no connection '
                'during the run, and the edge takes its connection to the engine from its pool (one per worker '
                'thread).', '']
        if any('nginx' in m for m in lat['modes'].values()):
            out += ['Reference: nginx (TLS termination and `proxy_pass` to the same engine, upstream '
                    'keepalive, no response buffering, no checks), measured in the same rotation:', '',
                    '| connections | nginx p50 / p90 / p99 | nginx − direct p50 | edge − nginx p50 |',
                    '|---|---|---:|---:|']
            for mode, m in lat['modes'].items():
                if 'nginx' not in m:
                    continue
                d, e, n = m['direct'], m['edge'], m['nginx']
                out.append(f"| {names.get(mode, mode)} | {n['p50']:.3f} / {n['p90']:.3f} / {n['p99']:.3f} ms | "
                           f"{n['p50'] - d['p50']:+.3f} ms | {e['p50'] - n['p50']:+.3f} ms |")
            out.append('')
    sys.stdout.write('\n'.join(out) + '\n')


# ---- main -----------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('cmd', choices=['memory', 'latency', 'report'])
    ap.add_argument('files', nargs='*')
    ap.add_argument('--out')
    ap.add_argument('--cacert')
    ap.add_argument('--token')
    # memory
    ap.add_argument('--name', default='')
    ap.add_argument('--label', default='')
    ap.add_argument('--workers', default='default')
    ap.add_argument('--url')
    ap.add_argument('--edge-pid', type=int)
    ap.add_argument('--engine-pid', type=int)
    ap.add_argument('--admin')
    ap.add_argument('--streams', type=int, default=1000)
    ap.add_argument('--text', default='[[wait]] hold')
    ap.add_argument('--open-concurrency', type=int, default=64)
    ap.add_argument('--open-timeout', type=float, default=60)
    ap.add_argument('--idle-samples', type=int, default=5)
    ap.add_argument('--idle-secs', type=float, default=2)
    ap.add_argument('--settle', type=float, default=1)
    ap.add_argument('--after', type=float, default=2)
    # latency
    ap.add_argument('--direct')
    ap.add_argument('--edge')
    ap.add_argument('--nginx', help='latency: also this TLS proxy of the same engine (a reference)')
    ap.add_argument('--n', type=int, default=500)
    ap.add_argument('--warmup', type=int, default=20)
    ap.add_argument('--modes', default='fresh,keepalive')
    ap.add_argument('--latency-text', default='hello')
    # report
    ap.add_argument('--header', default='')
    ap.add_argument('--note', default='')
    a = ap.parse_intermixed_args()
    if a.cmd == 'report':
        report(a)
        return
    if a.cmd == 'memory':
        res = asyncio.run(memory(a))
        idle = res['idle']['edge']['VmRSS']
        msg = f"{a.name}: idle {mib(idle)}"
        if a.streams > 0:
            if 'held' not in res:
                with open(a.out, 'w') as f:
                    json.dump(res, f, indent=1)
                sys.exit(f"{a.name}: only {res.get('first_events', 0)} of {a.streams} streams got their first "
                         f"event within {a.open_timeout:g} s ({res.get('failed', 0)} failed: {res.get('errors')})")
            held = res['held']['edge']['VmRSS']
            gauge = res['held_metrics'].get('a2a_edge_streams_open')
            msg += (f", with {a.streams} streams {mib(held)} (+{(held - idle) / a.streams:.1f} KiB each; "
                    f"{res['still_open']} open at the client, edge gauge {gauge})")
            if res['still_open'] != a.streams or (gauge is not None and gauge != a.streams):
                with open(a.out, 'w') as f:
                    json.dump(res, f, indent=1)
                sys.exit(f"{msg}: not every stream was open when the RSS was read: {res.get('ended')}")
        print(msg, file=sys.stderr)
    else:
        res = latency(a)
    with open(a.out, 'w') as f:
        json.dump(res, f, indent=1)


if __name__ == '__main__':
    main()
