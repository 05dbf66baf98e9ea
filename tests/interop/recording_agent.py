#!/usr/bin/env python3
"""A tiny A2A agent that records what reaches it (stdlib only, binds 127.0.0.1).

    recording_agent.py --log FILE [--port 0] [--port-file FILE] [--name agent-1]

Routes:
    GET  /.well-known/agent-card.json   a minimal valid A2A 1.0 card (JSONRPC at this URL)
    POST /                              JSON-RPC: SendMessage answers a completed task whose
                                        contextId is the message's; any other method gets
                                        -32601

Every request appends one JSON line to --log: method, path, headers (a list of [name, value]
pairs in arrival order, so a header sent twice shows twice) and body (parsed JSON when it is).
The bound port is written (atomically) to --port-file.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import uuid

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    server_version = 'recording-agent/1'
    protocol_version = 'HTTP/1.1'
    log_path = ''
    name = 'agent-1'
    lock = threading.Lock()

    def log_message(self, fmt: str, *args) -> None:  # quiet
        pass

    def record(self, raw: bytes) -> object:
        try:
            body: object = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode('utf-8', 'replace')
        line = json.dumps({'method': self.command, 'path': self.path,
                           'headers': [[k, v] for k, v in self.headers.items()], 'body': body})
        with self.lock, open(self.log_path, 'a', encoding='utf-8') as f:
            f.write(line + '\n')
        return body

    def send_json(self, status: int, obj: object) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def card(self) -> dict:
        host, port = self.server.server_address[:2]
        return {
            'name': self.name, 'version': '1', 'description': 'records the requests it gets',
            'supportedInterfaces': [{'url': f'http://{host}:{port}/', 'protocolBinding': 'JSONRPC',
                                     'protocolVersion': '1.0'}],
            'capabilities': {'streaming': False}, 'defaultInputModes': ['text/plain'],
            'defaultOutputModes': ['text/plain'], 'skills': [],
        }

    def do_GET(self) -> None:  # noqa: N802
        self.record(b'')
        if self.path == '/.well-known/agent-card.json':
            self.send_json(200, self.card())
        else:
            self.send_json(404, {'error': 'not found'})

    def do_POST(self) -> None:  # noqa: N802
        n = int(self.headers.get('Content-Length') or 0)
        body = self.record(self.rfile.read(n) if n > 0 else b'')
        if not isinstance(body, dict):
            self.send_json(200, {'jsonrpc': '2.0', 'id': None,
                                 'error': {'code': -32700, 'message': 'Parse error'}})
            return
        rid = body.get('id')
        if body.get('method') != 'SendMessage':
            self.send_json(200, {'jsonrpc': '2.0', 'id': rid,
                                 'error': {'code': -32601, 'message': 'Method not found'}})
            return
        msg = (body.get('params') or {}).get('message') or {}
        ctx = msg.get('contextId') or f'ctx-{uuid.uuid4().hex}'
        task = {
            'id': f'task-{uuid.uuid4().hex}', 'contextId': ctx,
            'status': {'state': 'TASK_STATE_COMPLETED', 'message': {
                'messageId': f'reply-{uuid.uuid4().hex}', 'contextId': ctx, 'role': 'ROLE_AGENT',
                'parts': [{'text': 'recorded'}]}},
        }
        self.send_json(200, {'jsonrpc': '2.0', 'id': rid, 'result': {'task': task}})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--log', required=True)
    ap.add_argument('--port', type=int, default=0)
    ap.add_argument('--port-file', default='')
    ap.add_argument('--name', default='agent-1')
    args = ap.parse_args()
    Handler.log_path = args.log
    Handler.name = args.name
    srv = ThreadingHTTPServer(('127.0.0.1', args.port), Handler)
    port = srv.server_address[1]
    print(f'recording-agent listening on 127.0.0.1:{port}', flush=True)
    if args.port_file:
        tmp = args.port_file + '.tmp'
        with open(tmp, 'w') as f:
            f.write(f'{port}\n')
        os.replace(tmp, args.port_file)
    srv.serve_forever()


if __name__ == '__main__':
    main()
