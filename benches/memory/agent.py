#!/usr/bin/env python3
"""A hostile A2A agent for the memory benchmark (stdlib only, binds 127.0.0.1).

    agent.py --mode MODE --port-file FILE [--task-mb 12] [--event-kb 1024] [--events 12]
             [--meta-segments 100000] [--meta-children 50000]

Every mode answers GET /health (200) and GET /_stats (its counters as JSON; the benchmark
reads them directly, never through the proxy). What it does to the proxy:

    listtasks    SendMessage: a completed Task `t-<n>` in a new context `ctx-<n>`.
                 GetTask: that task at ~--task-mb MB (history and artifacts of 1 MB texts),
                 with the status (and timestamp) of the SendMessage answer, or with
                 --fresh-timestamps the time of the read (as a task that changed since).
    slowreaders  SendMessage: a working Task `t-<n>`. SubscribeToTask: an SSE stream (chunked)
                 written as fast as the proxy takes it: the task, then --events artifact
                 updates of --event-kb KiB each, then a completed status update.
    cleaning     SendMessage: a completed Task whose metadata holds one dotted key of
                 --meta-segments segments (`a.a.a…`) over --meta-children child keys.
    card         the Agent Card is not JSON (every fetch counted); SendMessage as listtasks.
    throttle     a well-behaved agent (the attack is on the proxy's authentication).
    values       SendMessage: a completed Task, answered after 2 s (the proxy holds each
                 checked request, and the tree parsed from it, that long).

Every other mode serves a valid card (JSONRPC, streaming). The bound port is written
(atomically) to --port-file.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MB = 1024 * 1024


def now_rfc3339() -> str:
    now = time.time()
    return time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(now)) + f'.{int(now * 1000) % 1000:03d}Z'


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.c: dict[str, float] = {}
        self.card_fetch_times: list[float] = []

    def add(self, key: str, n: float = 1) -> None:
        with self.lock:
            self.c[key] = self.c.get(key, 0) + n

    def snapshot(self) -> dict:
        with self.lock:
            return {**self.c, 'card_fetch_times': list(self.card_fetch_times)}


STATS = Stats()


class Agent:
    """The mode's answers; big bodies are built once and cached."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.a = args
        self.lock = threading.Lock()
        self.n = 0
        self.contexts: dict[str, str] = {}
        self.statuses: dict[str, dict] = {}
        self.cache: dict[str, bytes] = {}

    def next_task(self) -> tuple[str, str]:
        with self.lock:
            self.n += 1
            tid, ctx = f't-{self.n}', f'ctx-{self.n}'
            self.contexts[tid] = ctx
        return tid, ctx

    @staticmethod
    def status(state: str) -> dict:
        return {'state': state, 'timestamp': now_rfc3339()}

    def small_task(self, tid: str, ctx: str, state: str) -> dict:
        """A task's status (and its timestamp) is fixed at its first answer: GetTask says the same."""
        with self.lock:
            st = self.statuses.setdefault(tid, self.status(state))
        return {'id': tid, 'contextId': ctx, 'status': st}

    def big_task(self, tid: str) -> bytes:
        """~task_mb MB: half history (agent messages), half artifacts, 1 MB of text each. With
        --fresh-timestamps its status timestamp is the time of the read (a task that changed)."""
        with self.lock:
            data = self.cache.get(tid)
        if data is None:
            ctx = self.contexts.get(tid, 'ctx-unknown')
            n = max(1, round(self.a.task_mb))
            text = 'x' * (MB - 256)
            hist = [{'messageId': f'{tid}-m{i}', 'contextId': ctx, 'taskId': tid, 'role': 'ROLE_AGENT',
                     'parts': [{'text': text}]} for i in range(n // 2)]
            arts = [{'artifactId': f'{tid}-a{i}', 'name': f'blob-{i}', 'parts': [{'text': text}]}
                    for i in range(n - n // 2)]
            task = self.small_task(tid, ctx, 'TASK_STATE_COMPLETED')
            if self.a.fresh_timestamps:
                task['status'] = {**task['status'], 'timestamp': '@@TS@@'}
            task['history'] = hist
            task['artifacts'] = arts
            data = json.dumps(task, separators=(',', ':')).encode()
            with self.lock:
                self.cache[tid] = data
        if self.a.fresh_timestamps:
            data = data.replace(b'@@TS@@', now_rfc3339().encode(), 1)
        return data

    def metadata_task(self, tid: str, ctx: str) -> bytes:
        """A completed task whose metadata is {"a.a.…a": {"k0": 0, …}} (built once)."""
        key = 'meta-template'
        with self.lock:
            tpl = self.cache.get(key)
        if tpl is None:
            long_key = '.'.join(['a'] * self.a.meta_segments)
            children = {f'k{i}': 0 for i in range(self.a.meta_children)}
            task = self.small_task('@@TID@@', '@@CTX@@', 'TASK_STATE_COMPLETED')
            task['metadata'] = {long_key: children}
            tpl = json.dumps(task, separators=(',', ':')).encode()
            with self.lock:
                self.cache[key] = tpl
        return tpl.replace(b'@@TID@@', tid.encode()).replace(b'@@CTX@@', ctx.encode())

    def card(self, host: str, port: int) -> dict:
        return {
            'name': f'hostile-{self.a.mode}', 'version': '1',
            'description': 'a hostile agent for the a2a-edge memory benchmark',
            'supportedInterfaces': [{'url': f'http://{host}:{port}/', 'protocolBinding': 'JSONRPC',
                                     'protocolVersion': '1.0'}],
            'capabilities': {'streaming': True}, 'defaultInputModes': ['text/plain'],
            'defaultOutputModes': ['text/plain'], 'skills': [],
        }


AGENT: Agent


class Handler(BaseHTTPRequestHandler):
    server_version = 'hostile-agent/1'
    protocol_version = 'HTTP/1.1'

    def log_message(self, fmt: str, *args) -> None:  # quiet
        pass

    # -- plumbing ---------------------------------------------------------

    def send_bytes(self, status: int, data: bytes, ctype: str = 'application/json') -> None:
        self.send_response(status)
        self.send_header('Content-Type', ctype)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except OSError:  # the proxy stopped reading (a capped read): counted, not an error here
            STATS.add('writes_aborted')
            self.close_connection = True
            return
        STATS.add('bytes_written', len(data))

    def send_json(self, status: int, obj: object) -> None:
        self.send_bytes(status, json.dumps(obj, separators=(',', ':')).encode())

    def rpc_result(self, rid: object, result_json: bytes) -> None:
        head = b'{"jsonrpc":"2.0","id":' + json.dumps(rid).encode() + b',"result":'
        self.send_bytes(200, head + result_json + b'}')

    # -- routes -----------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802
        if self.path == '/health':
            self.send_json(200, {'status': 'ok'})
        elif self.path == '/_stats':
            self.send_json(200, STATS.snapshot())
        elif self.path == '/.well-known/agent-card.json':
            STATS.add('card_fetches')
            with STATS.lock:
                STATS.card_fetch_times.append(time.time())
            if AGENT.a.mode == 'card':
                self.send_bytes(200, b'{"name": "broken", "skills": [')  # not JSON
            else:
                host, port = self.server.server_address[:2]
                self.send_json(200, AGENT.card(host, port))
        else:
            self.send_json(404, {'error': 'not found'})

    def do_POST(self) -> None:  # noqa: N802
        n = int(self.headers.get('Content-Length') or 0)
        raw = self.rfile.read(n) if n > 0 else b''
        try:
            body = json.loads(raw)
            method, rid, params = body.get('method'), body.get('id'), body.get('params') or {}
        except (ValueError, AttributeError):
            self.send_json(200, {'jsonrpc': '2.0', 'id': None,
                                 'error': {'code': -32700, 'message': 'Parse error'}})
            return
        STATS.add(f'rpc.{method}')
        mode = AGENT.a.mode
        if method == 'SendMessage':
            if mode == 'values':
                # A slow agent: the proxy holds each checked request while it waits.
                time.sleep(2)
            tid, ctx = AGENT.next_task()
            if mode == 'cleaning':
                self.rpc_result(rid, b'{"task":' + AGENT.metadata_task(tid, ctx) + b'}')
            else:
                state = 'TASK_STATE_WORKING' if mode == 'slowreaders' else 'TASK_STATE_COMPLETED'
                task = AGENT.small_task(tid, ctx, state)
                self.rpc_result(rid, json.dumps({'task': task}).encode())
        elif method == 'GetTask' and mode == 'listtasks':
            tid = str(params.get('id', ''))
            if tid not in AGENT.contexts:
                self.send_json(200, {'jsonrpc': '2.0', 'id': rid,
                                     'error': {'code': -32001, 'message': 'Task not found'}})
                return
            self.rpc_result(rid, AGENT.big_task(tid))
        elif method == 'SubscribeToTask' and mode == 'slowreaders':
            self.stream(rid, str(params.get('id', '')))
        else:
            self.send_json(200, {'jsonrpc': '2.0', 'id': rid,
                                 'error': {'code': -32601, 'message': 'Method not found'}})

    def stream(self, rid: object, tid: str) -> None:
        """SSE, chunked, as fast as the proxy takes it; counts how far each stream got."""
        ctx = AGENT.contexts.get(tid, 'ctx-unknown')
        STATS.add('streams_started')
        self.send_response(200)
        self.send_header('Content-Type', 'text/event-stream')
        self.send_header('Cache-Control', 'no-cache')
        self.send_header('Transfer-Encoding', 'chunked')
        self.end_headers()
        text = 'y' * (AGENT.a.event_kb * 1024 - 300)

        def event(result: dict) -> bytes:
            data = json.dumps({'jsonrpc': '2.0', 'id': rid, 'result': result},
                              separators=(',', ':')).encode()
            frame = b'data: ' + data + b'\n\n'
            return f'{len(frame):x}\r\n'.encode() + frame + b'\r\n'

        frames = [event({'task': AGENT.small_task(tid, ctx, 'TASK_STATE_WORKING')})]
        for i in range(AGENT.a.events):
            frames.append(event({'artifactUpdate': {
                'taskId': tid, 'contextId': ctx, 'append': i > 0, 'lastChunk': i == AGENT.a.events - 1,
                'artifact': {'artifactId': f'{tid}-stream', 'parts': [{'text': text}]}}}))
        frames.append(event({'statusUpdate': {'taskId': tid, 'contextId': ctx,
                                              'status': AGENT.status('TASK_STATE_COMPLETED')}}))
        sent = 0
        try:
            for f in frames:
                self.wfile.write(f)
                sent += len(f)
                STATS.add('stream_bytes', len(f))
            self.wfile.write(b'0\r\n\r\n')
        except OSError:
            STATS.add('streams_aborted')
            self.close_connection = True
            return
        STATS.add('streams_completed')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--mode', required=True,
                    choices=['listtasks', 'slowreaders', 'cleaning', 'card', 'throttle', 'values'])
    ap.add_argument('--port-file', required=True)
    ap.add_argument('--task-mb', type=float, default=12)
    ap.add_argument('--fresh-timestamps', action='store_true')
    ap.add_argument('--event-kb', type=int, default=1024)
    ap.add_argument('--events', type=int, default=12)
    ap.add_argument('--meta-segments', type=int, default=100_000)
    ap.add_argument('--meta-children', type=int, default=50_000)
    args = ap.parse_args()
    global AGENT
    AGENT = Agent(args)
    if args.mode == 'cleaning':
        AGENT.metadata_task('t-0', 'ctx-0')  # built before the port is announced
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.request_queue_size = 512
    srv = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    port = srv.server_address[1]
    tmp = args.port_file + '.tmp'
    with open(tmp, 'w') as f:
        f.write(f'{port}\n')
    os.replace(tmp, args.port_file)
    srv.serve_forever()


if __name__ == '__main__':
    main()
