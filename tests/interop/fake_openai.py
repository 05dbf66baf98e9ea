#!/usr/bin/env python3
"""A tiny OpenAI-compatible model server for offline interop tests.

Stdlib only (http.server, threaded), binds 127.0.0.1.

    fake_openai.py [--port 0] [--port-file FILE]

Routes:
    GET  /v1/models              one model ("fake-model")
    POST /v1/chat/completions    streaming SSE (`"stream": true`) or plain JSON

Environment:
    FAKE_REPLY          the assistant text (default "Hello from the fake LLM.")
    FAKE_SLOW_SECONDS   delay before answering when the last user message
                        contains the word SLOW (default 5)
    FAKE_LOG            append one JSON line per request: method, path,
                        headers, body (parsed JSON when possible)
    FAKE_API_KEYS       comma-separated keys accepted as `Authorization: Bearer
                        <key>` on /chat/completions; any other (or none) gets
                        an OpenAI-style 401 (default: every key is accepted)

The bound port is printed as `fake-openai listening on 127.0.0.1:PORT` and,
with --port-file, written (atomically) to that file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import uuid

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


REPLY = os.environ.get('FAKE_REPLY', 'Hello from the fake LLM.')
SLOW_SECONDS = float(os.environ.get('FAKE_SLOW_SECONDS', '5'))
LOG_PATH = os.environ.get('FAKE_LOG', '')
API_KEYS = frozenset(k for k in os.environ.get('FAKE_API_KEYS', '').split(',') if k)
MODEL = 'fake-model'

_log_lock = threading.Lock()


def log_request(method: str, path: str, headers: dict, raw: bytes) -> None:
    if not LOG_PATH:
        return
    try:
        body: object = json.loads(raw) if raw else None
    except ValueError:
        body = raw.decode('utf-8', 'replace')
    line = json.dumps(
        {
            'ts': time.time(),
            'method': method,
            'path': path,
            'headers': headers,
            'body': body,
        },
        ensure_ascii=False,
    )
    with _log_lock, open(LOG_PATH, 'a', encoding='utf-8') as f:
        f.write(line + '\n')
        f.flush()


def last_user_text(body: dict) -> str:
    for msg in reversed(body.get('messages') or []):
        if not isinstance(msg, dict) or msg.get('role') != 'user':
            continue
        content = msg.get('content')
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return ' '.join(
                c.get('text', '') for c in content if isinstance(c, dict)
            )
        return ''
    return ''


def words(text: str) -> list[str]:
    # "Hello from the fake LLM." -> ["Hello ", "from ", "the ", "fake ", "LLM."]
    parts = text.split(' ')
    return [p + ' ' for p in parts[:-1]] + [parts[-1]] if parts else [text]


class Handler(BaseHTTPRequestHandler):
    server_version = 'fake-openai/1'
    protocol_version = 'HTTP/1.1'

    def log_message(self, fmt: str, *args) -> None:  # quiet
        pass

    def _headers(self) -> dict:
        return {k: v for k, v in self.headers.items()}

    def _json(self, status: int, obj: object) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        log_request('GET', self.path, self._headers(), b'')
        if self.path.rstrip('/') in ('/v1/models', '/models'):
            self._json(
                200,
                {
                    'object': 'list',
                    'data': [
                        {'id': MODEL, 'object': 'model', 'created': 0, 'owned_by': 'fake'}
                    ],
                },
            )
        else:
            self._json(404, {'error': {'message': 'not found', 'type': 'invalid_request_error'}})

    def do_POST(self) -> None:  # noqa: N802
        n = int(self.headers.get('Content-Length') or 0)
        raw = self.rfile.read(n) if n > 0 else b''
        log_request('POST', self.path, self._headers(), raw)
        if self.path.rstrip('/') not in ('/v1/chat/completions', '/chat/completions'):
            self._json(404, {'error': {'message': 'not found', 'type': 'invalid_request_error'}})
            return
        try:
            body = json.loads(raw or b'{}')
            assert isinstance(body, dict)
        except (ValueError, AssertionError):
            self._json(400, {'error': {'message': 'bad json', 'type': 'invalid_request_error'}})
            return
        if API_KEYS:
            auth = self.headers.get('Authorization', '')
            if not (auth.startswith('Bearer ') and auth[7:] in API_KEYS):
                self._json(401, {'error': {'message': 'Incorrect API key provided.',
                                           'type': 'invalid_request_error',
                                           'code': 'invalid_api_key'}})
                return
        if 'SLOW' in last_user_text(body):
            time.sleep(SLOW_SECONDS)
        model = body.get('model') or MODEL
        cid = 'chatcmpl-' + uuid.uuid4().hex[:24]
        created = int(time.time())
        usage = {'prompt_tokens': 10, 'completion_tokens': 5, 'total_tokens': 15}
        try:
            if body.get('stream'):
                self._stream(cid, created, model, usage)
            else:
                self._json(
                    200,
                    {
                        'id': cid,
                        'object': 'chat.completion',
                        'created': created,
                        'model': model,
                        'choices': [
                            {
                                'index': 0,
                                'message': {'role': 'assistant', 'content': REPLY},
                                'finish_reason': 'stop',
                            }
                        ],
                        'usage': usage,
                    },
                )
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (e.g. a canceled turn)

    def _stream(self, cid: str, created: int, model: str, usage: dict) -> None:
        self.send_response(200)
        self.send_header('Content-Type', 'text/event-stream')
        self.send_header('Cache-Control', 'no-cache')
        self.send_header('Connection', 'close')
        self.end_headers()
        self.close_connection = True

        def chunk(delta: dict, finish: str | None = None, **extra) -> None:
            obj = {
                'id': cid,
                'object': 'chat.completion.chunk',
                'created': created,
                'model': model,
                'choices': [{'index': 0, 'delta': delta, 'finish_reason': finish}],
            }
            obj.update(extra)
            self.wfile.write(b'data: ' + json.dumps(obj).encode() + b'\n\n')
            self.wfile.flush()

        chunk({'role': 'assistant', 'content': ''})
        for w in words(REPLY):
            chunk({'content': w})
        chunk({}, 'stop')
        usage_chunk = {
            'id': cid,
            'object': 'chat.completion.chunk',
            'created': created,
            'model': model,
            'choices': [],
            'usage': usage,
        }
        self.wfile.write(b'data: ' + json.dumps(usage_chunk).encode() + b'\n\n')
        self.wfile.write(b'data: [DONE]\n\n')
        self.wfile.flush()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--port', type=int, default=0)
    ap.add_argument('--port-file', default='')
    args = ap.parse_args()
    httpd = ThreadingHTTPServer(('127.0.0.1', args.port), Handler)
    httpd.daemon_threads = True
    port = httpd.server_address[1]
    if args.port_file:
        tmp = args.port_file + '.tmp'
        with open(tmp, 'w') as f:
            f.write(f'{port}\n')
        os.replace(tmp, args.port_file)
    print(f'fake-openai listening on 127.0.0.1:{port}', flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == '__main__':
    sys.exit(main())
