#!/usr/bin/env python3
"""Interop client: the real iac-code A2A server behind a2a-edge.

Plain JSON-RPC over httpx (no SDK types) so that the exact wire shapes
(error codes, `error.data[0].reason`, SSE frames) are visible. Prints one
line per check:

    PASS name: detail [ms]      FAIL name: why [ms]
    SKIP name: why              NOTE name: observation

Usage (normally started by iac_code.sh):
    ALICE_TOKEN=... BOB_TOKEN=... ALICE_LLM_KEY=... [TENANT_A_TOKEN=... TENANT_B_TOKEN=...] \\
        iac_code_client.py --url https://127.0.0.1:P/ --ca ca.pem \\
        --iac-url http://127.0.0.1:Q/ --workspace DIR --fake-log FILE \\
        --iac-access-log FILE --iac-tasks-dir DIR [--validation auto|on|off] [--tenants on|off]

--validation: `on` = the edge must reject bad requests (FAIL otherwise);
`off` = SKIP the rejection checks; `auto` (default) = probe with GetTask on
the id `a/b`: -32602 from the edge means validation is wired, anything else
(iac-code answers -32603) means SKIP.

--tenants on: the principals tenant-a-user (tenant team-a) and tenant-b-user (team-b) may work
in <workspace>/team-a and <workspace>/team-b only ([authz] workspace_roots); off: SKIP those
checks.

Exit status: 0 when no check FAILed (SKIP and NOTE do not fail).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import uuid

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from edge_http import CheckFailed, Checks, Skipped, env_secret, expect


REPLY = os.environ.get('FAKE_REPLY', 'Hello from the fake LLM.')
# bob's two turns naming alice's contextId
BOB_SEND = 'bob on alice\'s context'
BOB_STREAM = 'bob streams on alice\'s context'
HTTP_TIMEOUT_S = 90.0

INPUT_REQUIRED = 'TASK_STATE_INPUT_REQUIRED'
CANCELED = 'TASK_STATE_CANCELED'
TERMINAL = {
    'TASK_STATE_COMPLETED',
    'TASK_STATE_FAILED',
    'TASK_STATE_CANCELED',
    'TASK_STATE_REJECTED',
}


def short(obj: object, n: int = 400) -> str:
    s = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
    return s if len(s) <= n else s[:n] + f'…(+{len(s) - n} chars)'


def new_id(prefix: str) -> str:
    return f'{prefix}-{uuid.uuid4().hex[:12]}'


def texts_of(message: dict | None) -> list[str]:
    if not isinstance(message, dict):
        return []
    return [p['text'] for p in message.get('parts') or [] if isinstance(p, dict) and 'text' in p]


def task_texts(task: dict) -> list[str]:
    out: list[str] = []
    for m in task.get('history') or []:
        out.extend(texts_of(m))
    out.extend(texts_of((task.get('status') or {}).get('message')))
    return out


def event_kind(result: dict) -> str:
    for k in ('task', 'message', 'statusUpdate', 'artifactUpdate'):
        if k in result:
            return k
    return 'unknown:' + ','.join(sorted(result))


def event_state(result: dict) -> str | None:
    if 'task' in result:
        return (result['task'].get('status') or {}).get('state')
    if 'statusUpdate' in result:
        return (result['statusUpdate'].get('status') or {}).get('state')
    return None


def event_task_id(result: dict) -> str | None:
    if 'task' in result:
        return result['task'].get('id')
    for k in ('statusUpdate', 'artifactUpdate'):
        if k in result:
            return result[k].get('taskId')
    return None


def paths_where(obj: object, pred: Callable[[object], bool], path: str = '') -> list[str]:
    """Dotted paths (list indices as [i]) of the leaves for which pred holds."""
    out: list[str] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += paths_where(v, pred, f'{path}.{k}' if path else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += paths_where(v, pred, f'{path}[{i}]')
    elif pred(obj):
        out.append(path)
    return out


def generic(paths: list[str]) -> str:
    """Paths with list indices folded ([3] -> [*]), deduplicated, with counts."""
    counts: dict[str, int] = {}
    for p in paths:
        g = re.sub(r'\[\d+\]', '[*]', re.sub(r'^event\d+\.', 'event.', p))
        counts[g] = counts.get(g, 0) + 1
    return ', '.join(f'{g} (x{n})' if n > 1 else g for g, n in counts.items())


# (not inside a longer token: iac-code's own ids such as `iac-<32 hex>` end in one)
ALIAS_RE = re.compile(r'(?<![0-9A-Za-z_-])c-[0-9a-f]{32}(?![0-9A-Za-z_-])')


def is_alias(agent_ctx: str | None) -> bool:
    """Whether a context id is one of the edge's per-caller aliases (`c-` + 32 hex digits)."""
    return isinstance(agent_ctx, str) and ALIAS_RE.fullmatch(agent_ctx) is not None


def user_turns(llm_request: dict) -> list[str]:
    """The user messages of one chat request, in order: the conversation the model was shown."""
    out = []
    for m in (llm_request.get('body') or {}).get('messages') or []:
        if not isinstance(m, dict) or m.get('role') != 'user':
            continue
        content = m.get('content')
        if isinstance(content, list):
            content = ''.join(c.get('text', '') for c in content if isinstance(c, dict))
        out.append(content if isinstance(content, str) else json.dumps(content))
    return out


def context_ids(obj: object) -> set[str]:
    """Every value of a `contextId` key anywhere in obj."""
    out: set[str] = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == 'contextId' and isinstance(v, str):
                out.add(v)
            else:
                out |= context_ids(v)
    elif isinstance(obj, list):
        for v in obj:
            out |= context_ids(v)
    return out


def working_directories(llm_request: dict) -> list[str]:
    """The `Working directory: `...`` lines of iac-code's system prompt in one chat request:
    where the turn ran."""
    out = []
    for m in (llm_request.get('body') or {}).get('messages') or []:
        content = m.get('content') if isinstance(m, dict) else None
        if isinstance(content, list):
            content = ' '.join(c.get('text', '') for c in content if isinstance(c, dict))
        if isinstance(content, str):
            out += re.findall(r'Working directory: `([^`\n]*)`', content)
    return out


def iter_sse(resp: httpx.Response) -> Iterator[tuple[str, str]]:
    """Yield (event, data) per SSE event; comments are skipped."""
    event, data = '', []
    for line in resp.iter_lines():
        if line == '':
            if data:
                yield event or 'message', '\n'.join(data)
            event, data = '', []
            continue
        if line.startswith(':'):
            continue
        field, _, value = line.partition(':')
        if value.startswith(' '):
            value = value[1:]
        if field == 'data':
            data.append(value)
        elif field == 'event':
            event = value
    if data:
        yield event or 'message', '\n'.join(data)


class Runner(Checks):
    def __init__(self, args: argparse.Namespace, token: str, bob_token: str, llm_key: str) -> None:
        super().__init__(args.ca)
        self.url: str = args.url
        self.iac_url: str = args.iac_url
        self.iac_port = httpx.URL(args.iac_url).port
        self.workspace: str = args.workspace
        self.fake_log = Path(args.fake_log)
        self.iac_access_log = Path(args.iac_access_log)
        self.iac_tasks_dir = Path(args.iac_tasks_dir)
        self.validation: str = args.validation
        self.token = token
        self.http = self.client(token)
        self.bob = self.client(bob_token) if bob_token else None
        self.llm_key = llm_key
        self.secret_seen: dict[str, list[str]] = {}    # check -> paths of "[REDACTED]"
        self.secret_leaked: dict[str, list[str]] = {}  # check -> paths of alice's key
        self.task_ids: list[str] = []
        self.first_task: dict | None = None
        self.alice_prompts: list[str] = []  # alice's turns on self.ctx, in order
        self.validation_active: bool | None = None
        self.reject_errors: dict[str, dict] = {}  # rejection check -> the error object
        # tenant principal -> (its client, its tenant), when the policy has them
        self.tenants: dict[str, tuple[httpx.Client, str]] = {}
        if args.tenants == 'on':
            for who, env, tenant in (('tenant-a-user', 'TENANT_A_TOKEN', 'team-a'),
                                     ('tenant-b-user', 'TENANT_B_TOKEN', 'team-b')):
                self.tenants[who] = (self.client(os.environ[env]), tenant)

    # -- plumbing -----------------------------------------------------------

    def client(self, token: str | None) -> httpx.Client:
        return httpx.Client(
            **self.http_options(token, timeout_s=HTTP_TIMEOUT_S, headers={'A2A-Version': '1.0'})
        )

    def rpc(self, method: str, params: dict, http: httpx.Client | None = None) -> dict:
        body = {'jsonrpc': '2.0', 'id': new_id('rpc'), 'method': method, 'params': params}
        r = (http or self.http).post(self.url, json=body)
        expect(r.status_code == 200, f'{method}: HTTP {r.status_code}: {short(r.text)}')
        ctype = r.headers.get('content-type', '')
        expect('json' in ctype, f'{method}: content-type {ctype!r}: {short(r.text)}')
        doc = r.json()
        expect(doc.get('id') == body['id'], f'{method}: response id {doc.get("id")!r} != {body["id"]!r}')
        return doc

    def result(self, method: str, params: dict, http: httpx.Client | None = None) -> dict:
        doc = self.rpc(method, params, http)
        expect('result' in doc, f'{method}: error {short(doc.get("error"))}')
        return doc['result']

    def message(self, text: str, context_id: str, metadata: dict | None = None,
                cwd: str | None = 'workspace') -> dict:
        md = dict(metadata or {})
        if cwd is not None:
            ic = dict(md.get('iac_code') or {})
            ic.setdefault('cwd', self.workspace if cwd == 'workspace' else cwd)
            md['iac_code'] = ic
        msg: dict[str, Any] = {
            'messageId': new_id('msg'),
            'contextId': context_id,
            'role': 'ROLE_USER',
            'parts': [{'text': text}],
        }
        if md:
            msg['metadata'] = md
        return msg

    # -- what reached the upstream side ---------------------------------------

    def llm_requests(self) -> list[dict]:
        if not self.fake_log.exists():
            return []
        out = []
        for line in self.fake_log.read_text(encoding='utf-8').splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get('method') == 'POST' and 'chat/completions' in rec.get('path', ''):
                out.append(rec)
        return out

    def iac_posts(self) -> int:
        if not self.iac_access_log.exists():
            return 0
        return sum(
            1 for line in self.iac_access_log.read_text(errors='replace').splitlines()
            if '"POST ' in line
        )

    def iac_task_files(self) -> set[str]:
        if not self.iac_tasks_dir.is_dir():
            return set()
        return {p.name for p in self.iac_tasks_dir.iterdir()}

    @property
    def iac_contexts_dir(self) -> Path:
        return self.iac_tasks_dir.parent / 'contexts'

    def iac_context_ids(self) -> set[str]:
        """The contexts iac-code stored (a2a/contexts/<id>.json), by the ids it knows them by."""
        d = self.iac_contexts_dir
        if not d.is_dir():
            return set()
        return {p.name[:-5] for p in d.iterdir() if p.name.endswith('.json')}

    @staticmethod
    def read_json_file(f: Path, wait_s: float = 2.0) -> dict | None:
        """A JSON file iac-code writes (given a moment to appear), or None."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                doc = json.loads(f.read_text(encoding='utf-8'))
                return doc if isinstance(doc, dict) else None
            except (OSError, ValueError):
                if time.monotonic() >= deadline:
                    return None
                time.sleep(0.1)

    def iac_task_context(self, task_id: str) -> str | None:
        """The context id iac-code filed a task under (its tasks/<task id>.json `context_id`):
        the id the agent knows the context by, which is the edge's alias for a context id the
        caller chose."""
        doc = self.read_json_file(self.iac_tasks_dir / f'{task_id}.json')
        return doc.get('context_id') if doc else None

    def iac_context(self, agent_ctx: str) -> dict | None:
        """iac-code's record of a context by its own id (contexts/<id>.json: cwd, session_id)."""
        return self.read_json_file(self.iac_contexts_dir / f'{agent_ctx}.json')

    def iac_context_cwd_of_task(self, task_id: str) -> tuple[str | None, str | None]:
        """(the agent's context id, the cwd iac-code bound that context to) for a task."""
        agent_ctx = self.iac_task_context(task_id)
        rec = self.iac_context(agent_ctx) if agent_ctx else None
        return agent_ctx, (rec or {}).get('cwd')

    def list_all_tasks(self) -> dict[str, dict]:
        seen: dict[str, dict] = {}
        token = ''
        for _ in range(50):
            params: dict[str, Any] = {'pageSize': 100}
            if token:
                params['pageToken'] = token
            res = self.result('ListTasks', params)
            for t in res.get('tasks') or []:
                seen[t['id']] = t
            token = res.get('nextPageToken') or ''
            if not token:
                break
        return seen

    def snapshot(self) -> dict:
        # uvicorn writes its access line around the time the response is sent:
        # give it a moment so a POST is never counted on the wrong side
        time.sleep(0.5)
        return {
            'llm': len(self.llm_requests()),
            'posts': self.iac_posts(),
            'task_files': self.iac_task_files(),
            'contexts': self.iac_context_ids(),
        }

    # -- card -----------------------------------------------------------------

    def c_card(self) -> str:
        r = self.http.get(self.url + '.well-known/agent-card.json')
        expect(r.status_code == 200, f'HTTP {r.status_code}: {short(r.text)}')
        card = r.json()
        self.card_text = r.text
        self.card = card
        ifaces = card.get('supportedInterfaces') or []
        expect(ifaces, f'no supportedInterfaces: {short(card)}')
        expect(
            ifaces[0].get('url') == self.url,
            f'supportedInterfaces[0].url={ifaces[0].get("url")!r}, expected {self.url!r}',
        )
        expect(card.get('name') == 'iac-code', f'name={card.get("name")!r}, expected iac-code')
        return (
            f'name={card.get("name")} version={card.get("version")} '
            f'interfaces={[(i.get("protocolBinding"), i.get("url")) for i in ifaces]} '
            f'legacy url={card.get("url")!r}'
        )

    def c_card_no_internal_address(self) -> str:
        text = self.card_text
        port = str(self.iac_port)
        hits = [m.start() for m in re.finditer(rf'(?<![0-9]){re.escape(port)}(?![0-9])', text)]
        expect(not hits, f'internal port {port} appears in the card at offsets {hits[:5]}: '
               + '; '.join(text[max(0, h - 40):h + 10] for h in hits[:3]))
        expect('http://' not in text, 'card mentions a plain http:// URL: '
               + text[max(0, text.find('http://') - 40):text.find('http://') + 60])
        urls = sorted(set(re.findall(r'https?://[^"\s]+', text)))
        expect(all(u.startswith(self.url) for u in urls),
               f'card advertises URLs outside the public_url: {urls}')
        return f'port {port} absent; URLs in the card: {urls}'

    def c_card_extensions(self) -> str:
        exts = (self.card.get('capabilities') or {}).get('extensions') or []
        uris = [e.get('uri') for e in exts]
        with_paths = []
        for e in exts:
            blob = json.dumps(e.get('params') or {})
            paths = sorted(set(re.findall(r'/iac-code/[A-Za-z0-9_/.-]+', blob)))
            if paths:
                with_paths.append((e.get('uri'), paths))
        for uri, paths in with_paths:
            self.note('card-extension-paths', f'{uri} params still advertise {paths} '
                      '(the proxy does not rewrite extension params yet)')
        # Those paths are relative to the proxy's origin now; the proxy only
        # routes JSON-RPC, so they are dead links for a caller:
        codes = {}
        for p in ('iac-code/readiness', 'iac-code/execution/state?contextId=x'):
            r = self.http.get(self.url + p)
            codes[p] = r.status_code
            expect(r.status_code != 200,
                   f'GET /{p} through the proxy returned 200 (iac-code route exposed): {short(r.text)}')
        if with_paths:
            self.note('card-extension-paths', f'through the proxy: {codes} '
                      '(advertised execution-control/pipeline endpoints are not reachable)')
        return f'extensions={uris}; /iac-code/* not exposed: {codes}'

    def c_card_security(self) -> str:
        card = self.card
        schemes = card.get('securitySchemes')
        expect(schemes, 'card advertises no securitySchemes')
        return f'securitySchemes={short(schemes, 200)} securityRequirements={short(card.get("securityRequirements"), 200)}'

    # -- turns ----------------------------------------------------------------

    def c_send(self) -> str:
        self.ctx = new_id('ctx-iac')
        n0 = len(self.llm_requests())
        t0 = time.monotonic()
        self.alice_prompts.append('hello')
        res = self.result('SendMessage', {'message': self.message('hello', self.ctx)})
        dt = time.monotonic() - t0
        expect('task' in res, f'expected a task, got {short(res)}')
        task = res['task']
        st = (task.get('status') or {}).get('state')
        texts = task_texts(task)
        expect(st == INPUT_REQUIRED,
               f'state {st}, expected {INPUT_REQUIRED}; texts={texts}; task={short(task, 800)}')
        expect(REPLY in texts or REPLY in ''.join(texts),
               f'fake reply {REPLY!r} not in history/status: {texts}')
        expect(task.get('contextId') == self.ctx, f'contextId {task.get("contextId")!r} != {self.ctx!r}')
        n1 = len(self.llm_requests())
        expect(n1 == n0 + 1, f'fake LLM saw {n1 - n0} chat requests for one turn, expected 1')
        self.task_ids.append(task['id'])
        self.first_task = task
        return (f'task {task["id"]} {st} in {dt:.2f}s; history texts={texts}; '
                f'metadata.iac_code keys={sorted((task.get("metadata") or {}).get("iac_code", {}))}')

    def c_followup(self) -> str:
        expect(self.first_task, 'no first turn')
        n0 = len(self.llm_requests())
        self.alice_prompts.append('second turn please')
        res = self.result('SendMessage', {'message': self.message('second turn please', self.ctx)})
        task = res.get('task') or {}
        st = (task.get('status') or {}).get('state')
        expect(st == INPUT_REQUIRED, f'state {st}: {short(task, 800)}')
        expect(REPLY in ''.join(task_texts(task)), f'reply missing: {task_texts(task)}')
        reqs = self.llm_requests()
        expect(len(reqs) == n0 + 1, f'fake LLM saw {len(reqs) - n0} requests, expected 1')
        msgs = (reqs[-1].get('body') or {}).get('messages') or []
        flat = json.dumps(msgs, ensure_ascii=False)
        expect('second turn please' in flat, 'the LLM request lacks the new prompt')
        expect('hello' in flat and REPLY in flat,
               f'the LLM request lacks the first turn (no conversation memory): roles={[m.get("role") for m in msgs]}')
        self.task_ids.append(task['id'])
        same = task['id'] == self.first_task['id']
        return (f'task {task["id"]} ({"same" if same else "new"} task on context {self.ctx}) {st}; '
                f'LLM got {len(msgs)} messages, roles={[m.get("role") for m in msgs]}')

    def stream(self, http: httpx.Client, params: dict) -> Iterator[tuple[str, dict]]:
        body = {'jsonrpc': '2.0', 'id': new_id('st'), 'method': 'SendStreamingMessage', 'params': params}
        with http.stream('POST', self.url, json=body) as r:
            ctype = r.headers.get('content-type', '')
            if r.status_code != 200 or 'text/event-stream' not in ctype:
                r.read()
                raise CheckFailed(f'HTTP {r.status_code} {ctype!r}: {short(r.text)}')
            for event, data in iter_sse(r):
                doc = json.loads(data)
                expect(doc.get('id') == body['id'], f'event id {doc.get("id")!r} != {body["id"]!r}')
                yield event, doc

    def c_stream(self) -> str:
        ctx = new_id('ctx-stream')
        events: list[dict] = []
        t0 = time.monotonic()
        first_ms = None
        for event, doc in self.stream(self.http, {'message': self.message('hello stream', ctx)}):
            if first_ms is None:
                first_ms = (time.monotonic() - t0) * 1000
            expect('result' in doc, f'error event ({event}): {short(doc)}')
            events.append(doc['result'])
        kinds = [event_kind(e) for e in events]
        expect(len(events) >= 3, f'only {len(events)} events: {kinds}')
        expect(kinds[0] == 'task', f'first event is {kinds[0]}, expected task')
        expect(kinds[-1] == 'statusUpdate', f'last event is {kinds[-1]}')
        last = event_state(events[-1])
        expect(last == INPUT_REQUIRED, f'last state {last}, expected {INPUT_REQUIRED}')
        deltas = [
            t for e in events if 'statusUpdate' in e
            and (e['statusUpdate'].get('status') or {}).get('state') == 'TASK_STATE_WORKING'
            and str(((e['statusUpdate'].get('status') or {}).get('message') or {}).get('messageId', '')).endswith('-message')
            for t in texts_of((e['statusUpdate'].get('status') or {}).get('message'))
        ]
        expect(len(deltas) >= 2, f'no text deltas: {kinds}')
        expect(''.join(deltas) == REPLY, f'deltas {deltas} do not add up to {REPLY!r}')
        ids = {event_task_id(e) for e in events} - {None}
        expect(len(ids) == 1, f'events name several task ids: {ids}')
        tid = ids.pop()
        self.task_ids.append(tid)
        states = [event_state(e) for e in events if event_state(e)]
        return (f'{len(events)} events, first after {first_ms:.0f} ms, task {tid}; '
                f'states={states}; deltas={deltas}')

    def c_get_task(self) -> str:
        expect(self.task_ids, 'no task from earlier checks')
        tid = self.task_ids[0]
        task = self.result('GetTask', {'id': tid})
        expect(task.get('id') == tid, f'id {task.get("id")!r}')
        st = (task.get('status') or {}).get('state')
        expect(st == INPUT_REQUIRED, f'state {st}')
        return f'task {tid} {st}, history={len(task.get("history") or [])} messages'

    def c_list_tasks(self) -> str:
        expect(self.task_ids, 'no task from earlier checks')
        seen = self.list_all_tasks()
        missing = [t for t in self.task_ids if t not in seen]
        expect(not missing, f'ListTasks ({len(seen)} tasks) misses {missing}')
        return f'{len(seen)} tasks, all {len(self.task_ids)} earlier tasks found'

    def c_cancel_streaming(self) -> str:
        ctx = new_id('ctx-cancel')
        events: list[dict] = []
        tid = None
        cancel_state = None
        t0 = time.monotonic()
        with self.client(self.token) as other:
            for event, doc in self.stream(
                self.http, {'message': self.message('please be SLOW', ctx)}
            ):
                expect('result' in doc, f'error event ({event}): {short(doc)}')
                ev = doc['result']
                events.append(ev)
                if tid is None:
                    tid = event_task_id(ev)
                    expect(tid, f'first event {event_kind(ev)} has no task id')
                    st = event_state(ev)
                    expect(st not in TERMINAL and st != INPUT_REQUIRED,
                           f'SLOW turn already finished: {st}')
                    # iac-code needs the turn to be running before it can cancel
                    time.sleep(0.5)
                    canceled = self.result('CancelTask', {'id': tid}, other)
                    cancel_state = (canceled.get('status') or {}).get('state')
                    t_cancel = time.monotonic() - t0
                    expect(cancel_state == CANCELED,
                           f'CancelTask returned {cancel_state}: {short(canceled, 600)}')
        t_end = time.monotonic() - t0
        states = [event_state(e) for e in events if event_state(e)]
        expect(states and states[-1] == CANCELED, f'stream ended in {states[-1:]}; states={states}')
        again = self.result('GetTask', {'id': tid})
        st2 = (again.get('status') or {}).get('state')
        expect(st2 == CANCELED, f'GetTask after cancel: {st2}')
        text = texts_of((again.get('status') or {}).get('message'))
        self.task_ids.append(tid)
        return (f'task {tid}: cancel at {t_cancel:.2f}s, stream closed at {t_end:.2f}s '
                f'(LLM delay {os.environ.get("FAKE_SLOW_SECONDS", "5")}s); states={states}; '
                f'final text={text}')

    # -- a second principal: alice's tasks are hers ---------------------------

    def rpc_any(self, method: str, params: dict, http: httpx.Client) -> tuple[dict, str]:
        """One JSON-RPC call that may be answered as JSON or as SSE (streaming
        methods): the JSON document, or the first SSE event; and how it came."""
        body = {'jsonrpc': '2.0', 'id': new_id('rpc'), 'method': method, 'params': params}
        with http.stream('POST', self.url, json=body, timeout=httpx.Timeout(20.0)) as r:
            ctype = r.headers.get('content-type', '')
            if r.status_code != 200:
                r.read()
                raise CheckFailed(f'{method}: HTTP {r.status_code}: {short(r.text)}')
            if 'text/event-stream' in ctype:
                for event, data in iter_sse(r):
                    doc, how = json.loads(data), f'SSE event {event!r}'
                    break
                else:
                    raise CheckFailed(f'{method}: empty SSE stream')
            else:
                r.read()
                expect('json' in ctype, f'{method}: content-type {ctype!r}: {short(r.text)}')
                doc, how = r.json(), 'JSON'
        expect(doc.get('id') == body['id'], f'{method}: response id {doc.get("id")!r} != {body["id"]!r}')
        return doc, how

    @staticmethod
    def canon_error(err: object, ids: list[str]) -> str:
        """The error object as sorted JSON, the requested ids replaced by <ID>
        (a not-found message may name the id it was asked about)."""
        s = json.dumps(err, sort_keys=True, ensure_ascii=False)
        for i in ids:
            if i:
                s = s.replace(i, '<ID>')
        return s

    def turn_raw(self, method: str, params: dict, http: httpx.Client) -> tuple[list[dict], str]:
        """A whole SendMessage (one JSON document) or SendStreamingMessage (every SSE event,
        read to the end): the JSON-RPC documents and the raw text of their data."""
        body = {'jsonrpc': '2.0', 'id': new_id('rpc'), 'method': method, 'params': params}
        with http.stream('POST', self.url, json=body) as r:
            ctype = r.headers.get('content-type', '')
            if r.status_code != 200:
                r.read()
                raise CheckFailed(f'{method}: HTTP {r.status_code}: {short(r.text)}')
            if 'text/event-stream' in ctype:
                datas = [data for _, data in iter_sse(r)]
            else:
                r.read()
                expect('json' in ctype, f'{method}: content-type {ctype!r}: {short(r.text)}')
                datas = [r.text]
        expect(datas, f'{method}: empty answer')
        docs = [json.loads(d) for d in datas]
        for doc in docs:
            expect(doc.get('id') == body['id'], f'{method}: response id {doc.get("id")!r} != {body["id"]!r}')
        return docs, '\n'.join(datas)

    @staticmethod
    def turn_task(docs: list[dict], what: str) -> dict:
        """The task a turn's answer starts with (the unary result's, or the first event's)."""
        errs = [d['error'] for d in docs if 'error' in d]
        expect(not errs, f'{what}: error {short(errs)}')
        first = docs[0].get('result') or {}
        expect('task' in first, f'{what}: expected a task, got {event_kind(first)}: {short(first)}')
        return first['task']

    def c_bob_requests(self) -> str:
        expect(self.first_task, 'no task of alice from earlier checks')
        expect(self.bob is not None, 'BOB_TOKEN not given to the client')
        tid, ctx = self.first_task['id'], self.ctx
        self.iso_task_before = self.result('GetTask', {'id': tid})
        self.iso_alice_tasks = list(self.task_ids)
        # alice's context as iac-code knows it (the edge's alias of her contextId) and its record
        self.iso_alice_agent_ctx = self.iac_task_context(tid)
        expect(self.iso_alice_agent_ctx, f'iac-code has no task file (or no context_id) for alice\'s task {tid}')
        self.iso_alice_ctx_record = self.iac_context(self.iso_alice_agent_ctx)
        expect(self.iso_alice_ctx_record, f'iac-code has no contexts/{self.iso_alice_agent_ctx}.json')
        made_up, alice_made_up = str(uuid.uuid4()), str(uuid.uuid4())
        self.iso_ids = {'alice': [tid, ctx], 'made_up': [made_up], 'alice_made_up': [alice_made_up]}
        # a made-up id asked by alice too: the answer must not depend on the caller
        self.iso_alice_ref, _ = self.rpc_any('GetTask', {'id': alice_made_up}, self.http)
        before = self.snapshot()
        bob = self.bob
        # alice's task id: refused like a made-up id, never forwarded
        self.iso_ref, _ = self.rpc_any('GetTask', {'id': made_up}, bob)
        res: dict[str, tuple[dict, str]] = {}
        res['get'] = self.rpc_any('GetTask', {'id': tid}, bob)
        res['cancel'] = self.rpc_any('CancelTask', {'id': tid}, bob)
        res['subscribe'] = self.rpc_any('SubscribeToTask', {'id': tid}, bob)
        msg = self.message('bob on alice\'s task', ctx)
        msg['taskId'] = tid
        res['send-task-id'] = self.rpc_any('SendMessage', {'message': msg}, bob)
        msg = self.message('bob on alice\'s task, no contextId', ctx)
        del msg['contextId']
        msg['taskId'] = tid
        res['send-task-id-only'] = self.rpc_any('SendMessage', {'message': msg}, bob)
        self.iso_res = res
        mid = self.snapshot()
        # alice's contextId: bob gets a context of his own by that name (each turn read whole)
        turns: dict[str, tuple[list[dict], str]] = {}
        turns['send-context'] = self.turn_raw(
            'SendMessage', {'message': self.message(BOB_SEND, ctx)}, bob)
        turns['stream-context'] = self.turn_raw(
            'SendStreamingMessage', {'message': self.message(BOB_STREAM, ctx)}, bob)
        self.iso_turns = turns
        after_turns = self.snapshot()
        self.iso_bob_llm = self.llm_requests()[mid['llm']:after_turns['llm']]
        self.iso_bob_tasks: dict[str, str] = {}
        self.iso_bob_list, _ = self.rpc_any('ListTasks', {'pageSize': 100}, bob)
        after_list = self.snapshot()
        self.iso_windows = {'task-ids': (before, mid), 'contexts': (mid, after_turns),
                            'list': (after_turns, after_list)}
        return (f'{len(res)} requests as bob on alice\'s task {tid}, 2 turns on her context {ctx}, '
                f'his ListTasks (+ GetTask on a made-up id); made-up id reference error: '
                f'{json.dumps(self.iso_ref.get("error"), ensure_ascii=False)}')

    def c_bob_reference(self) -> str:
        err = self.iso_ref.get('error')
        expect(err, f'GetTask on a made-up id answered without an error: {short(self.iso_ref)}')
        expect(err.get('code') == -32001, f'made-up id: code {err.get("code")}, expected -32001: {short(err)}')
        a = self.canon_error(self.iso_alice_ref.get('error'), self.iso_ids['alice_made_up'])
        b = self.canon_error(err, self.iso_ids['made_up'])
        expect(a == b, f'a made-up id answers alice {a} but bob {b}')
        return f'bob and alice get the same error for a made-up id: {b}'

    def bob_same_as_made_up(self, key: str) -> Callable[[], str]:
        def run() -> str:
            doc, how = self.iso_res[key]
            expect('result' not in doc, f'bob got a result: {short(doc, 700)}')
            err = doc.get('error')
            expect(err, f'no error: {short(doc)}')
            got = self.canon_error(err, self.iso_ids['alice'])
            want = self.canon_error(self.iso_ref.get('error'), self.iso_ids['made_up'])
            expect(got == want, f'error {got} differs from the made-up id\'s {want} ({how})')
            raw_same = json.dumps(err, sort_keys=True) == json.dumps(self.iso_ref.get('error'), sort_keys=True)
            return (f'{how}, error identical to the made-up id\'s'
                    f'{"" if raw_same else " (once the ids are replaced)"}: code {err.get("code")}')
        return run

    def bob_own_context(self, key: str, prompts: list[str]) -> Callable[[], str]:
        """Bob names alice's contextId: the answer is a task of his own in a context of his own
        that he sees by the name he used, and iac-code holds it under another context than
        alice's (bob's alias), with bob's turns only (`prompts`: his, in order)."""
        def run() -> str:
            docs, raw = self.iso_turns[key]
            ctx = self.ctx
            task = self.turn_task(docs, f'bob {key}')
            tid = task.get('id')
            self.iso_bob_tasks[key] = tid
            expect(tid and tid not in self.iso_alice_tasks, f'bob got task {tid}, one of alice\'s')
            results = [d['result'] for d in docs]
            ids = {event_task_id(e) for e in results} - {None}
            expect(ids == {tid}, f'the answer names tasks {sorted(ids)}, expected only {tid}')
            named = context_ids(results)
            expect(named == {ctx}, f'the answer names contexts {sorted(named)}, expected only {ctx!r} '
                                   '(the name bob used)')
            expect(not ALIAS_RE.search(raw), f'an agent-side alias is in bob\'s answer: '
                                             f'{ALIAS_RE.findall(raw)}')
            alice_ids = [t for t in self.iso_alice_tasks if t and t in raw]
            expect(not alice_ids, f'alice\'s task ids in bob\'s answer: {alice_ids}')
            texts = [t for r in results for m in ([r['task']] if 'task' in r else [])
                     for t in task_texts(m)]
            theirs = [t for t in texts if t in self.alice_prompts]
            expect(not theirs, f'alice\'s turns in bob\'s answer: {theirs}')
            states = [event_state(e) for e in results if event_state(e)]
            expect(states and states[-1] == INPUT_REQUIRED, f'states {states}')
            # what iac-code did with it
            agent_ctx = self.iac_task_context(tid)
            expect(is_alias(agent_ctx), f'iac-code filed bob\'s task {tid} under context {agent_ctx!r}, '
                                        'expected an alias c-<32 hex>')
            expect(agent_ctx != self.iso_alice_agent_ctx,
                   f'bob\'s task {tid} is in alice\'s iac-code context {agent_ctx}')
            before, after = self.iso_windows['contexts']
            new_ctx = after['contexts'] - before['contexts']
            expect(new_ctx == {agent_ctx}, f'new iac-code contexts during bob\'s turns: {sorted(new_ctx)}, '
                                           f'expected just {agent_ctx}')
            i = list(self.iso_turns).index(key)
            expect(len(self.iso_bob_llm) == len(self.iso_turns),
                   f'the LLM saw {len(self.iso_bob_llm)} requests for bob\'s {len(self.iso_turns)} turns')
            seen = user_turns(self.iso_bob_llm[i])
            expect(seen == prompts, f'the model was shown the user turns {seen}, expected bob\'s {prompts}')
            return (f'task {tid} of bob\'s own ({states[-1]}), contextId {ctx!r} as he named it; '
                    f'iac-code context {agent_ctx} (alice\'s is {self.iso_alice_agent_ctx}); '
                    f'the model saw {seen}')
        return run

    def c_bob_list(self) -> str:
        doc = self.iso_bob_list
        expect('result' in doc, f'bob\'s ListTasks: {short(doc)}')
        res = doc['result']
        tasks = res.get('tasks') or []
        listed = [t.get('id') for t in tasks]
        alices = [t for t in listed if t in self.iso_alice_tasks]
        expect(not alices, f'bob sees alice\'s tasks {alices}')
        own = set(self.iso_bob_tasks.values())
        expect(len(own) == len(self.iso_turns), f'bob\'s turns gave tasks {self.iso_bob_tasks}')
        expect(sorted(listed) == sorted(own), f'bob lists {listed}, expected his own {sorted(own)}')
        ctxs = context_ids(tasks)
        expect(ctxs == {self.ctx}, f'bob\'s tasks name contexts {sorted(ctxs)}, expected {self.ctx!r}')
        expect(not ALIAS_RE.search(json.dumps(res)), 'an agent-side alias is in bob\'s ListTasks')
        total = res.get('totalSize')
        expect(total in (None, len(own)), f'totalSize {total!r}, expected {len(own)}')
        expect(not res.get('nextPageToken'), f'nextPageToken {res.get("nextPageToken")!r}')
        before, after = self.iso_windows['list']
        expect(after['llm'] == before['llm'] and after['task_files'] == before['task_files']
               and after['contexts'] == before['contexts'],
               'bob\'s ListTasks changed what iac-code holds')
        return (f'bob lists his {len(own)} tasks {sorted(own)} (contextId {self.ctx!r}), none of alice\'s; '
                f'totalSize={total!r}; iac-code POSTs {after["posts"] - before["posts"]} (the edge reads '
                f'each listed task), no turn')

    def c_bob_untouched(self) -> str:
        before, after = self.iso_windows['task-ids']
        n = len(self.iso_res) + 1
        expect(after['posts'] == before['posts'],
               f'iac-code saw {after["posts"] - before["posts"]} POSTs during bob\'s {n} task-id requests '
               f'({before["posts"]}->{after["posts"]})')
        expect(after['llm'] == before['llm'], f'LLM requests {before["llm"]}->{after["llm"]}')
        expect(after['task_files'] == before['task_files'],
               f'new iac-code task files {sorted(after["task_files"] - before["task_files"])}')
        expect(after['contexts'] == before['contexts'],
               f'new iac-code contexts {sorted(after["contexts"] - before["contexts"])}')
        c0, c1 = self.iso_windows['contexts']
        k = len(self.iso_turns)
        posts, llm = c1['posts'] - c0['posts'], c1['llm'] - c0['llm']
        files = c1['task_files'] - c0['task_files']
        ctxs = c1['contexts'] - c0['contexts']
        expect(posts == k and llm == k,
               f'bob\'s {k} turns on the context name: {posts} POSTs to iac-code, {llm} LLM requests, expected {k} each')
        expect(len(files) == k and c0['task_files'] <= c1['task_files'],
               f'iac-code task files +{sorted(files)} -{sorted(c0["task_files"] - c1["task_files"])}, '
               f'expected {k} new')
        expect(len(ctxs) == 1 and self.iso_alice_agent_ctx not in ctxs,
               f'new iac-code contexts {sorted(ctxs)}, expected one (bob\'s)')
        return (f'task-id requests: none of {n} ({n - 1} on alice\'s task, 1 made-up) reached iac-code (POSTs {before["posts"]}->{after["posts"]}, '
                f'LLM {after["llm"]}, task files and contexts unchanged); the {k} context turns: exactly {posts} '
                f'POSTs, {llm} LLM requests, {len(files)} task files, 1 new context {sorted(ctxs)[0]}')

    def c_alice_after_bob(self) -> str:
        seen = self.list_all_tasks()
        missing = [t for t in self.iso_alice_tasks if t not in seen]
        expect(not missing, f'alice\'s ListTasks ({len(seen)} tasks) misses {missing}')
        bobs = [t for t in getattr(self, 'iso_bob_tasks', {}).values() if t in seen]
        expect(not bobs, f'alice\'s ListTasks lists bob\'s tasks {bobs}')
        tid = self.first_task['id']
        now = self.result('GetTask', {'id': tid})
        st0 = (self.iso_task_before.get('status') or {}).get('state')
        st1 = (now.get('status') or {}).get('state')
        expect(st1 == st0 == INPUT_REQUIRED, f'task {tid}: state {st0} -> {st1}')
        expect(now.get('status') == self.iso_task_before.get('status'),
               f'status changed: {short(self.iso_task_before.get("status"))} -> {short(now.get("status"))}')
        expect(now.get('contextId') == self.ctx, f'contextId {now.get("contextId")!r} != {self.ctx!r}')
        h0, h1 = self.iso_task_before.get('history') or [], now.get('history') or []
        expect(h0 == h1, f'history changed: {len(h0)} -> {len(h1)} messages')
        flat = json.dumps(now)
        expect('bob ' not in flat, 'a message of bob\'s is in alice\'s task')
        rec = self.iac_context(self.iso_alice_agent_ctx)
        expect(rec == self.iso_alice_ctx_record,
               f'iac-code\'s record of alice\'s context changed: {short(self.iso_alice_ctx_record)} -> {short(rec)}')
        # her next turn on the context: the model sees her conversation, none of bob's turns
        n0 = len(self.llm_requests())
        prompt = 'alice again after bob'
        task = self.result('SendMessage', {'message': self.message(prompt, self.ctx)}).get('task') or {}
        self.alice_prompts.append(prompt)
        expect(task.get('contextId') == self.ctx, f'follow-up contextId {task.get("contextId")!r}')
        reqs = self.llm_requests()[n0:]
        expect(len(reqs) == 1, f'the LLM saw {len(reqs)} requests for alice\'s turn')
        turns = user_turns(reqs[0])
        expect(turns == self.alice_prompts, f'the model was shown {turns}, expected alice\'s {self.alice_prompts}')
        agent_ctx = self.iac_task_context(task.get('id', ''))
        expect(agent_ctx == self.iso_alice_agent_ctx,
               f'alice\'s turn went to iac-code context {agent_ctx}, not hers ({self.iso_alice_agent_ctx})')
        self.task_ids.append(task['id'])
        return (f'ListTasks lists all {len(self.iso_alice_tasks)} of alice\'s tasks ({len(seen)}), none of bob\'s; '
                f'task {tid} still {st1}, status and {len(h1)} history messages unchanged; iac-code context '
                f'{self.iso_alice_agent_ctx} unchanged; her next turn there showed the model {turns}')

    # -- context ids the caller chooses: per-caller aliases at the agent ----------

    def c_context_alias(self) -> str:
        """A contextId alice chooses reaches iac-code as an alias c-<32 hex>, the same one on
        every turn; alice sees her name in every answer; bob naming it gets another alias."""
        expect(self.bob is not None, 'BOB_TOKEN not given to the client')
        x = new_id('ctx-alias')
        c0 = self.iac_context_ids()
        # 1. alice's first turn on x
        n0 = len(self.llm_requests())
        docs, raw = self.turn_raw('SendMessage', {'message': self.message('alias turn one', x)}, self.http)
        t1 = self.turn_task(docs, 'alice, first turn')
        expect(context_ids(docs) == {x}, f'the answer names contexts {sorted(context_ids(docs))}, expected {x!r}')
        expect(not ALIAS_RE.search(raw), f'an alias is in alice\'s answer: {ALIAS_RE.findall(raw)}')
        alias = self.iac_task_context(t1['id'])
        c1 = self.iac_context_ids()
        expect(c1 - c0 == {alias}, f'new iac-code contexts {sorted(c1 - c0)}, expected that of task '
                                   f'{t1["id"]} ({alias!r})')
        expect(is_alias(alias) and alias != x, f'iac-code knows alice\'s {x!r} as {alias!r}, expected c-<32 hex>')
        expect(not (self.iac_contexts_dir / f'{x}.json').exists(), f'iac-code has a contexts/{x}.json')
        rec = self.iac_context(alias) or {}
        expect(rec.get('context_id') == alias, f'contexts/{alias}.json says context_id {rec.get("context_id")!r}')
        # 2. her follow-up naming x: the same iac-code context, with the first turn's memory
        n1 = len(self.llm_requests())
        docs, raw = self.turn_raw('SendMessage', {'message': self.message('alias turn two', x)}, self.http)
        t2 = self.turn_task(docs, 'alice, follow-up')
        expect(context_ids(docs) == {x}, f'follow-up names contexts {sorted(context_ids(docs))}')
        expect(not ALIAS_RE.search(raw), 'an alias is in alice\'s follow-up answer')
        c2 = self.iac_context_ids()
        expect(c2 == c1, f'the follow-up made new iac-code contexts {sorted(c2 - c1)}')
        expect(self.iac_task_context(t2['id']) == alias,
               f'follow-up filed under {self.iac_task_context(t2["id"])!r}, not {alias}')
        reqs = self.llm_requests()
        expect(len(reqs) == n1 + 1 and n1 == n0 + 1, f'LLM requests {n0}->{n1}->{len(reqs)}')
        turns = user_turns(reqs[-1])
        expect(turns == ['alias turn one', 'alias turn two'], f'the model was shown {turns}')
        self.task_ids += [t1['id'], t2['id']]
        # 3. ListTasks filtered by x (translated the same way); the alias itself names nothing of hers
        doc, raw = self.rpc_text('ListTasks', {'contextId': x, 'pageSize': 100})
        expect('result' in doc, f'ListTasks contextId={x}: {short(doc)}')
        listed = sorted(t.get('id') for t in doc['result'].get('tasks') or [])
        expect(listed == sorted([t1['id'], t2['id']]), f'ListTasks contextId={x} lists {listed}')
        expect(context_ids(doc['result']) == {x}, f'ListTasks names contexts {sorted(context_ids(doc["result"]))}')
        expect(not ALIAS_RE.search(raw), 'an alias is in alice\'s ListTasks')
        by_alias = self.result('ListTasks', {'contextId': alias, 'pageSize': 100}).get('tasks') or []
        expect(not by_alias, f'ListTasks contextId=<the alias> lists {[t.get("id") for t in by_alias]}')
        # 4. bob naming x: a context of his own, another alias
        n2 = len(self.llm_requests())
        docs, raw = self.turn_raw('SendMessage', {'message': self.message('bob names alice\'s new context', x)}, self.bob)
        t3 = self.turn_task(docs, 'bob on x')
        expect(t3['id'] not in (t1['id'], t2['id']), f'bob got alice\'s task {t3["id"]}')
        expect(context_ids(docs) == {x}, f'bob\'s answer names contexts {sorted(context_ids(docs))}')
        expect(not ALIAS_RE.search(raw), 'an alias is in bob\'s answer')
        bob_alias = self.iac_task_context(t3['id'])
        c3 = self.iac_context_ids()
        expect(c3 - c2 == {bob_alias}, f'new iac-code contexts for bob\'s turn {sorted(c3 - c2)}, '
                                       f'expected {bob_alias!r}')
        expect(is_alias(bob_alias) and bob_alias not in (alias, x),
               f'bob\'s {x!r} is iac-code context {bob_alias!r}; alice\'s is {alias}')
        reqs = self.llm_requests()[n2:]
        expect(len(reqs) == 1 and user_turns(reqs[0]) == ['bob names alice\'s new context'],
               f'bob\'s turn showed the model {[user_turns(r) for r in reqs]}')
        return (f'alice\'s {x!r} is iac-code context {alias} on both turns (one new file, the model saw '
                f'both turns), answers and ListTasks(contextId) show {x!r}, ListTasks(contextId=alias) is '
                f'empty; bob\'s {x!r} is {bob_alias}')

    # -- a secret alice may send, echoed by the agent --------------------------

    def rpc_text(self, method: str, params: dict, http: httpx.Client | None = None,
                 url: str | None = None) -> tuple[dict, str]:
        body = {'jsonrpc': '2.0', 'id': new_id('rpc'), 'method': method, 'params': params}
        r = (http or self.http).post(url or self.url, json=body)
        expect(r.status_code == 200, f'{method}: HTTP {r.status_code}: {short(r.text)}')
        return r.json(), r.text

    def secret_paths(self, obj: object) -> list[str]:
        return paths_where(obj, lambda v: isinstance(v, str) and self.llm_key in v)

    def redacted_paths(self, obj: object) -> list[str]:
        return paths_where(obj, lambda v: v == '[REDACTED]')

    def key_auths(self, reqs: list[dict]) -> int:
        want = f'Bearer {self.llm_key}'
        return sum(1 for r in reqs
                   if {k.lower(): v for k, v in (r.get('headers') or {}).items()}.get('authorization') == want)

    def secret_metadata(self) -> dict:
        return {'iac_code': {'iac_code_api_key': self.llm_key}}

    def c_secret_send(self) -> str:
        if not self.llm_key:
            raise CheckFailed('ALICE_LLM_KEY not given to the client')
        self.secret_ctx = new_id('ctx-secret')
        n0 = len(self.llm_requests())
        doc, raw = self.rpc_text('SendMessage', {'message': self.message(
            'hello with my own key', self.secret_ctx, self.secret_metadata())})
        expect(self.llm_key not in raw, f'the key is in the answer at {self.secret_paths(doc)}')
        expect('result' in doc, f'error {short(doc.get("error"))}')
        task = doc['result'].get('task') or {}
        st = (task.get('status') or {}).get('state')
        expect(st == INPUT_REQUIRED, f'state {st}: {short(task_texts(task))}')
        expect(REPLY in ''.join(task_texts(task)), f'reply missing: {task_texts(task)}')
        reqs = self.llm_requests()[n0:]
        expect(len(reqs) == 1 and self.key_auths(reqs) == 1,
               f'the LLM saw {len(reqs)} requests, {self.key_auths(reqs)} with alice\'s key')
        self.secret_tid = task['id']
        self.task_ids.append(task['id'])
        red = self.redacted_paths(doc)
        self.secret_seen['unary'] = red
        return (f'task {task["id"]} {st}; the key is absent from the {len(raw)}-byte answer; '
                f'"[REDACTED]" at {generic(red) or "nowhere (not echoed)"}')

    def c_secret_llm(self) -> str:
        reqs = self.llm_requests()
        n = self.key_auths(reqs)
        expect(n >= 1, 'the fake LLM never saw alice\'s key')
        return (f'{n} of {len(reqs)} chat requests carried Authorization: Bearer <ALICE_LLM_KEY> '
                f'(the agent used the key it was sent)')

    def c_secret_get(self) -> str:
        expect(getattr(self, 'secret_tid', None), 'no task from secret-send')
        doc, raw = self.rpc_text('GetTask', {'id': self.secret_tid})
        expect('result' in doc, f'error {short(doc.get("error"))}')
        expect(self.llm_key not in raw, f'the key is in GetTask at {self.secret_paths(doc)}')
        red = self.redacted_paths(doc)
        self.secret_seen['get'] = red
        # what iac-code itself answers (its own token, straight to it)
        up = os.environ.get('IAC_UPSTREAM_TOKEN', '')
        direct = '(IAC_UPSTREAM_TOKEN not given: iac-code\'s own answer not read)'
        if up:
            with httpx.Client(timeout=10, headers={'Authorization': f'Bearer {up}', 'A2A-Version': '1.0'}) as h:
                ddoc, _ = self.rpc_text('GetTask', {'id': self.secret_tid}, h, self.iac_url)
            echoed = self.secret_paths(ddoc)
            self.secret_echoed = echoed
            if echoed:
                missing = sorted(set(echoed) - set(red))
                expect(not missing, f'iac-code echoes the key at {missing}, the proxy\'s answer has '
                       f'no "[REDACTED]" there ({generic(red)})')
                direct = f'iac-code itself answers the key at {generic(echoed)}'
            else:
                direct = 'iac-code itself does not echo the key in GetTask'
        return f'key absent; "[REDACTED]" at {generic(red) or "nowhere"}; {direct}'

    def c_secret_stream(self) -> str:
        ctx = new_id('ctx-secret-stream')
        n0 = len(self.llm_requests())
        body = {'jsonrpc': '2.0', 'id': new_id('st'), 'method': 'SendStreamingMessage',
                'params': {'message': self.message('hello stream with my own key', ctx, self.secret_metadata())}}
        raw_parts: list[str] = []
        events: list[dict] = []
        red: list[str] = []
        with self.http.stream('POST', self.url, json=body) as r:
            ctype = r.headers.get('content-type', '')
            if r.status_code != 200 or 'text/event-stream' not in ctype:
                r.read()
                raise CheckFailed(f'HTTP {r.status_code} {ctype!r}: {short(r.text)}')
            for chunk in r.iter_text():
                raw_parts.append(chunk)
        raw = ''.join(raw_parts)
        leaked: list[str] = []
        for block in re.split(r'\r?\n\r?\n', raw):
            data = '\n'.join(l[5:].lstrip(' ') for l in re.split(r'\r?\n', block) if l.startswith('data:'))
            if not data:
                continue
            doc = json.loads(data)
            expect('result' in doc, f'error event: {short(doc)}')
            n = len(events)
            events.append(doc['result'])
            red += [f'event{n}.{p}' for p in self.redacted_paths(doc['result'])]
            leaked += [f'event{n}.{p}' for p in self.secret_paths(doc['result'])]
        self.secret_seen['stream'] = red
        if self.llm_key in raw:
            self.secret_leaked['stream'] = leaked
            raise CheckFailed(
                f'alice\'s key came back in the SSE body ({len(events)} events) at '
                f'{", ".join(leaked) or "(not inside a data: JSON value)"}; "[REDACTED]" at '
                f'{generic(red) or "nowhere"}')
        states = [event_state(e) for e in events if event_state(e)]
        expect(states and states[-1] == INPUT_REQUIRED, f'stream ended in {states[-1:]}')
        reqs = self.llm_requests()[n0:]
        expect(self.key_auths(reqs) == len(reqs) == 1,
               f'the LLM saw {len(reqs)} requests, {self.key_auths(reqs)} with alice\'s key')
        tid = event_task_id(events[0])
        self.task_ids.append(tid)
        return (f'{len(events)} events ({len(raw)} bytes), task {tid} ends {states[-1]}; key absent; '
                f'"[REDACTED]" at {generic(red) or "nowhere (not echoed)"}')

    def c_secret_list(self) -> str:
        doc, raw = self.rpc_text('ListTasks', {'pageSize': 100})
        expect('result' in doc, f'error {short(doc.get("error"))}')
        expect(self.llm_key not in raw, f'the key is in ListTasks at {self.secret_paths(doc)}')
        red = self.redacted_paths(doc)
        seen = self.secret_seen
        echoed = any(seen.values()) or red or self.secret_leaked
        if not echoed:
            self.note('secret-echo', 'iac-code echoed the key in no answer alice received '
                      '(no "[REDACTED]" and no key anywhere: unary, GetTask, stream, ListTasks)')
        return (f'{len(doc["result"].get("tasks") or [])} tasks, key absent, "[REDACTED]" at '
                f'{generic(red) or "nowhere"}; echo redacted in unary={bool(seen.get("unary"))} '
                f'GetTask={bool(seen.get("get"))} stream={bool(seen.get("stream"))} ListTasks={bool(red)}')

    # -- rejections at the edge -------------------------------------------------

    def probe_validation(self) -> None:
        doc = self.rpc('GetTask', {'id': 'a/b'})
        err = doc.get('error') or {}
        self.probe_doc = doc
        if self.validation == 'on':
            self.validation_active = True
        elif self.validation == 'off':
            self.validation_active = False
        else:
            self.validation_active = err.get('code') == -32602
        if not self.validation_active:
            self.note('validation', f'edge request validation not active (mode {self.validation}); '
                      f'probe GetTask id "a/b" answered {json.dumps(doc)}')

    def reject(self, name: str, method: str, params: dict, reason_prefix: str | None,
               what: str, after_check: Callable[[], None] | None = None,
               http: httpx.Client | None = None) -> Callable[[], str]:
        def run() -> str:
            before = self.snapshot()
            tasks_before = set(self.list_all_tasks())
            before['posts'] = self.snapshot()['posts']  # after our own ListTasks
            doc = self.rpc(method, params, http)
            after = self.snapshot()
            tasks_after = set(self.list_all_tasks())
            reached = (after['llm'] != before['llm'] or after['posts'] != before['posts']
                       or after['task_files'] != before['task_files'] or tasks_after != tasks_before
                       or after['contexts'] != before['contexts'])
            if not self.validation_active:
                self.note(name, f'{what}: {short(doc, 700)}; '
                          f'reached iac-code={reached} (POSTs {before["posts"]}->{after["posts"]}, '
                          f'LLM requests {before["llm"]}->{after["llm"]}, '
                          f'new tasks {sorted(tasks_after - tasks_before)})')
                raise Skipped('IAC_VALIDATION=off' if self.validation == 'off' else
                              'edge request validation not wired in this binary')
            err = doc.get('error')
            expect(err, f'{what}: accepted by the edge: {short(doc, 700)}')
            expect(err.get('code') == -32602, f'{what}: code {err.get("code")}, expected -32602: {short(err)}')
            data = err.get('data')
            reason = None
            if isinstance(data, list) and data and isinstance(data[0], dict):
                reason = data[0].get('reason')
            if reason_prefix is not None:
                expect(isinstance(reason, str) and reason.startswith(reason_prefix),
                       f'{what}: error.data[0].reason={reason!r}, expected {reason_prefix}*: {short(err)}')
            expect(not reached,
                   f'{what}: rejected but reached iac-code (POSTs {before["posts"]}->{after["posts"]}, '
                   f'LLM {before["llm"]}->{after["llm"]}, tasks +{sorted(tasks_after - tasks_before)}, '
                   f'task files +{sorted(after["task_files"] - before["task_files"])}, '
                   f'contexts +{sorted(after["contexts"] - before["contexts"])})')
            if after_check is not None:
                after_check()
            self.reject_errors[name] = err
            return (f'{json.dumps(err, ensure_ascii=False)}; iac-code untouched '
                    f'(POSTs {after["posts"]}, LLM requests {after["llm"]}, {len(tasks_after)} tasks)')
        return run

    # -- tenants: each in its own directory ---------------------------------------

    def tenant_dir(self, tenant: str) -> str:
        return str(Path(self.workspace) / tenant)

    def tenant_turn(self, who: str) -> Callable[[], str]:
        """A turn with the tenant's own directory as cwd: iac-code serves it and runs it there
        (its system prompt's working directory and its context binding say so)."""
        def run() -> str:
            if not self.tenants:
                raise Skipped('the policy has no tenants (--tenants off)')
            http, tenant = self.tenants[who]
            ctx, wd = new_id(f'ctx-{tenant}'), self.tenant_dir(tenant)
            n0 = len(self.llm_requests())
            res = self.result('SendMessage', {'message': self.message(f'hello from {tenant}', ctx, cwd=wd)}, http)
            task = res.get('task') or {}
            st = (task.get('status') or {}).get('state')
            expect(st == INPUT_REQUIRED, f'state {st}: {short(task, 600)}')
            expect(REPLY in ''.join(task_texts(task)), f'reply missing: {task_texts(task)}')
            reqs = self.llm_requests()[n0:]
            expect(len(reqs) == 1, f'the LLM saw {len(reqs)} requests for one turn')
            dirs = working_directories(reqs[0])
            expect(dirs == [wd], f'iac-code\'s prompt names working directories {dirs}, expected [{wd!r}]')
            # iac-code knows the context by the edge's alias of ctx: found through the task's file
            agent_ctx, bound = self.iac_context_cwd_of_task(task.get('id', ''))
            expect(bound == wd, f'iac-code bound context {ctx} (its {agent_ctx!r}) to cwd {bound!r}, '
                                f'expected {wd!r}')
            again = self.result('GetTask', {'id': task['id']}, http)
            expect((again.get('status') or {}).get('state') == INPUT_REQUIRED, f'GetTask: {short(again, 300)}')
            return (f'{who} (tenant {tenant}): task {task["id"]} {st}; iac-code ran the turn in '
                    f'<workspace>/{tenant} (prompt "Working directory", context {agent_ctx} bound there); '
                    f'GetTask ok')
        return run

    def tenant_reject(self, name: str, who: str, method: str, cwd: str, what: str) -> Callable[[], str]:
        """A tenant's request with a cwd outside its own directory: workspace.outside_roots."""
        def run() -> str:
            if not self.tenants:
                raise Skipped('the policy has no tenants (--tenants off)')
            http, tenant = self.tenants[who]
            params = {'message': self.message(f'{tenant} elsewhere', new_id(f'ctx-{tenant}-out'), cwd=cwd)}
            detail = self.reject(name, method, params, 'workspace.outside_roots', f'{who}, {what}', http=http)()
            # no oracle: outside the tenant's root reads exactly like outside every root
            etc = self.reject_errors.get('reject-cwd-outside')
            if etc is not None:
                expect(self.reject_errors[name] == etc,
                       f'error {short(self.reject_errors[name])} differs from alice\'s for /etc {short(etc)}')
                detail += '; identical to the error for /etc'
            return detail
        return run

    def c_tenant_no_cwd(self) -> str:
        """A tenant's turn with no cwd at all runs in the tenant's directory (the edge gives it
        the tenant's root, `authz.require_workspace`), or is refused; never in iac-code's own
        process directory, the shared workspace root."""
        if not self.tenants:
            raise Skipped('the policy has no tenants (--tenants off)')
        http, tenant = self.tenants['tenant-a-user']
        ctx = new_id(f'ctx-{tenant}-nocwd')
        n0 = len(self.llm_requests())
        doc = self.rpc('SendMessage', {'message': self.message(f'{tenant} without a cwd', ctx, cwd=None)}, http)
        reqs = self.llm_requests()[n0:]
        if 'error' in doc:
            err = doc['error']
            expect(not reqs, f'refused ({short(err)}) but the LLM saw {len(reqs)} requests')
            return f'refused by the edge: {short(err)}'
        dirs = [d for r in reqs for d in working_directories(r)]
        task = (doc.get('result') or {}).get('task') or {}
        expect(task.get('id'), f'no task in the answer: {short(doc)}')
        agent_ctx, bound = self.iac_context_cwd_of_task(task['id'])
        own = self.tenant_dir(tenant)
        inside = all(d == own or d.startswith(own + '/') for d in dirs + [bound or ''])
        expect(bound is not None, f'no cwd for iac-code\'s context {agent_ctx!r} of task {task["id"]}')
        expect(inside, f'tenant-a-user (workspace_roots <workspace>/team-a) sent no '
                       f'metadata.iac_code.cwd; iac-code ran the turn in {dirs} (context {agent_ctx} bound to '
                       f'{bound!r}), outside the tenant\'s root')
        return (f'forwarded; iac-code ran it in {dirs}, context {agent_ctx} bound to {bound!r} '
                f'(inside the tenant root)')

    # -- credentials ------------------------------------------------------------

    def c_no_token(self) -> str:
        with self.client(None) as http:
            r = http.post(self.url, json={'jsonrpc': '2.0', 'id': 1, 'method': 'ListTasks', 'params': {}})
        expect(r.status_code == 401, f'HTTP {r.status_code}: {short(r.text)}')
        www = r.headers.get('www-authenticate', '')
        expect('a2a-edge' in www, f'401 without the proxy\'s WWW-Authenticate ({www!r}): not from the edge?')
        return f'HTTP 401 {r.text} WWW-Authenticate={www!r}'

    def c_upstream_token_at_edge(self) -> str:
        up = os.environ.get('IAC_UPSTREAM_TOKEN', '')
        if not up:
            raise Skipped('IAC_UPSTREAM_TOKEN not given to the client')
        with self.client(up) as http:
            r = http.post(self.url, json={'jsonrpc': '2.0', 'id': 1, 'method': 'ListTasks', 'params': {}})
        expect(r.status_code == 401, f'iac-code\'s own token accepted by the edge: HTTP {r.status_code}')
        return 'HTTP 401: the upstream token is not a caller credential'

    def c_direct_alice(self) -> str:
        out = []
        with httpx.Client(timeout=10) as http:
            hdr = {'Authorization': f'Bearer {self.token}', 'A2A-Version': '1.0'}
            r = http.post(self.iac_url, headers=hdr,
                          json={'jsonrpc': '2.0', 'id': 1, 'method': 'ListTasks', 'params': {}})
            expect(r.status_code == 401, f'POST / with ALICE_TOKEN: HTTP {r.status_code}: {short(r.text)}')
            out.append(f'POST / -> {r.status_code} {r.text}')
            r = http.get(self.iac_url + '.well-known/agent-card.json', headers=hdr)
            expect(r.status_code == 401, f'card with ALICE_TOKEN: HTTP {r.status_code}')
            out.append(f'card -> {r.status_code}')
        return '; '.join(out)

    def c_llm_headers(self) -> str:
        reqs = self.llm_requests()
        expect(reqs, 'the fake LLM saw no request')
        blob = self.fake_log.read_text(encoding='utf-8')
        expect(self.token not in blob, 'ALICE_TOKEN reached the fake LLM')
        auths: dict[str, int] = {}
        for r in reqs:
            h = {k.lower(): v for k, v in (r.get('headers') or {}).items()}
            a = h.get('authorization', '<none>')
            if self.llm_key and a == f'Bearer {self.llm_key}':
                a = 'Bearer <ALICE_LLM_KEY>'  # never printed
            auths[a] = auths.get(a, 0) + 1
        expected = {'Bearer sk-fake-offline-key', 'Bearer <ALICE_LLM_KEY>'}
        foreign = {a: n for a, n in auths.items() if a not in expected}
        if foreign and not self.validation_active:
            # Only the rejection probe sends a caller-supplied key; without edge
            # validation iac-code uses it (reference doc, section 5/§11 table).
            self.note('llm-credentials', f'without edge validation a caller-chosen LLM key reached '
                      f'the model: Authorization headers seen {auths}')
            expect(set(foreign) <= {'Bearer sk-caller-supplied-key'},
                   f'unexpected LLM Authorization headers: {sorted(foreign)}')
        else:
            expect(not foreign, f'LLM Authorization headers other than the configured key: {auths}')
        return (f'{len(reqs)} chat requests; ALICE_TOKEN absent from the LLM log; '
                f'Authorization headers: {auths}')

    # -- driver ---------------------------------------------------------------

    def run(self) -> int:
        card_ok = self.check('card', self.c_card)
        if card_ok:
            self.check('card-no-internal-address', self.c_card_no_internal_address)
            self.check('card-extensions', self.c_card_extensions)
            self.check('card-security', self.c_card_security)
        if self.check('send-message', self.c_send):
            self.check('send-message-followup', self.c_followup)
        self.check('stream-message', self.c_stream)
        self.check('get-task', self.c_get_task)
        self.check('list-tasks', self.c_list_tasks)
        self.check('cancel-streaming', self.c_cancel_streaming)

        # a second principal, bob: alice's tasks and contexts do not exist for him
        if self.check('isolation-bob-requests', self.c_bob_requests):
            self.check('isolation-made-up-id', self.c_bob_reference)
            # alice's task id: exactly like a made-up id
            for key, name in (('get', 'GetTask'), ('cancel', 'CancelTask'),
                              ('subscribe', 'SubscribeToTask'),
                              ('send-task-id', 'SendMessage-taskId'),
                              ('send-task-id-only', 'SendMessage-taskId-only')):
                self.check(f'isolation-bob-{name}', self.bob_same_as_made_up(key))
            # alice's contextId: a new context of bob's own by that name
            self.check('isolation-bob-SendMessage-contextId',
                       self.bob_own_context('send-context', [BOB_SEND]))
            self.check('isolation-bob-SendStreamingMessage-contextId',
                       self.bob_own_context('stream-context', [BOB_SEND, BOB_STREAM]))
            self.check('isolation-bob-ListTasks', self.c_bob_list)
            self.check('isolation-bob-not-forwarded', self.c_bob_untouched)
            self.check('isolation-alice-unchanged', self.c_alice_after_bob)
        self.check('context-alias', self.c_context_alias)

        # alice may send iac_code.iac_code_api_key ([a2a.metadata.allowed_for]):
        # the agent uses it, echoes it, and the proxy redacts the echo
        if self.check('secret-send', self.c_secret_send):
            self.check('secret-reached-llm', self.c_secret_llm)
            self.check('secret-get-task', self.c_secret_get)
        self.check('secret-stream', self.c_secret_stream)
        self.check('secret-list-tasks', self.c_secret_list)

        self.check('validation-probe', lambda: self.probe_validation() or f'mode {self.validation}, active={self.validation_active}')
        self.check('reject-cwd-outside', self.reject(
            'reject-cwd-outside', 'SendMessage',
            {'message': self.message('hello from /etc', new_id('ctx-etc'), cwd='/etc')},
            'workspace.', 'cwd=/etc'))
        # alice is allowed this key (allowed_for); bob, who has no exception, is refused
        self.check('reject-metadata-api-key', self.reject(
            'reject-metadata-api-key', 'SendMessage',
            {'message': self.message('use my key', new_id('ctx-key'),
                                     {'iac_code': {'iac_code_api_key': 'sk-caller-supplied-key'}})},
            'metadata.denied_key', 'bob, metadata.iac_code.iac_code_api_key', http=self.bob))
        self.check('reject-stream-cwd-traversal', self.reject(
            'reject-stream-cwd-traversal', 'SendStreamingMessage',
            {'message': self.message('hello via ..', new_id('ctx-dots'),
                                     cwd=self.workspace + '/../../../../etc')},
            'workspace.', 'streaming, cwd=<workspace>/../../../../etc'))
        self.check('reject-cwd-request-metadata', self.reject(
            'reject-cwd-request-metadata', 'SendMessage',
            # iac-code reads params.metadata before message.metadata (reference §6)
            {'message': self.message('hello', new_id('ctx-reqmeta')),
             'metadata': {'iac_code': {'cwd': '/etc'}}},
            'workspace.', 'params.metadata.iac_code.cwd=/etc (message.metadata has the good cwd)'))
        escape = Path(self.workspace) / 'escape'
        if not escape.is_symlink():
            escape.symlink_to('/etc')
        self.check('reject-cwd-symlink-escape', self.reject(
            'reject-cwd-symlink-escape', 'SendMessage',
            {'message': self.message('hello', new_id('ctx-link'), cwd=str(escape))},
            'workspace.', 'cwd=<workspace>/escape -> /etc'))
        missing = Path(self.workspace) / 'not' / 'there'

        def not_created() -> None:
            expect(not (Path(self.workspace) / 'not').exists(),
                   f'{missing} was created by a rejected request')
        self.check('reject-cwd-missing', self.reject(
            'reject-cwd-missing', 'SendMessage',
            {'message': self.message('hello', new_id('ctx-missing'), cwd=str(missing))},
            'workspace.', 'cwd=<workspace>/not/there (iac-code would mkdir it)', not_created))
        self.check('reject-bad-task-id', self.reject(
            'reject-bad-task-id', 'GetTask', {'id': 'a/b'}, None, 'GetTask id "a/b"'))

        # two tenants, each confined to its own directory ([authz] workspace_roots)
        for who, own, other in (('tenant-a-user', 'team-a', 'team-b'), ('tenant-b-user', 'team-b', 'team-a')):
            t = 'tenant-a' if own == 'team-a' else 'tenant-b'
            self.check(f'{t}-own-workspace', self.tenant_turn(who))
            self.check(f'{t}-reject-other-workspace', self.tenant_reject(
                f'{t}-reject-other-workspace', who, 'SendMessage', self.tenant_dir(other),
                f'cwd=<workspace>/{other}'))
        self.check('tenant-a-reject-traversal', self.tenant_reject(
            'tenant-a-reject-traversal', 'tenant-a-user', 'SendStreamingMessage',
            self.tenant_dir('team-a') + '/../team-b', 'streaming, cwd=<workspace>/team-a/../team-b'))
        self.check('tenant-b-reject-traversal', self.tenant_reject(
            'tenant-b-reject-traversal', 'tenant-b-user', 'SendMessage',
            self.tenant_dir('team-b') + '/../team-a', 'cwd=<workspace>/team-b/../team-a'))
        link = Path(self.tenant_dir('team-a')) / 'to-team-b'
        if self.tenants and not link.is_symlink():
            link.symlink_to(self.tenant_dir('team-b'))  # as a tool run in team-a could make it
        self.check('tenant-a-reject-symlink', self.tenant_reject(
            'tenant-a-reject-symlink', 'tenant-a-user', 'SendMessage', str(link),
            'cwd=<workspace>/team-a/to-team-b -> <workspace>/team-b'))
        self.check('tenant-a-reject-shared-root', self.tenant_reject(
            'tenant-a-reject-shared-root', 'tenant-a-user', 'SendMessage', self.workspace,
            'cwd=<workspace> (alice\'s root, the parent of both tenants\')'))
        self.check('tenant-no-cwd', self.c_tenant_no_cwd)

        self.check('auth-no-token', self.c_no_token)
        self.check('auth-upstream-token-at-edge', self.c_upstream_token_at_edge)
        self.check('direct-alice-refused', self.c_direct_alice)
        self.check('llm-credentials', self.c_llm_headers)
        print(f'iac-code-client: {self.passed} passed, {self.failed} failed, '
              f'{self.skipped} skipped', flush=True)
        return 0 if self.failed == 0 else 1


class Tee:
    def __init__(self, *streams) -> None:
        self.streams = streams

    def write(self, text: str) -> int:
        for st in self.streams:
            st.write(text)
        return len(text)

    def flush(self) -> None:
        for st in self.streams:
            st.flush()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--url', required=True, help="the proxy's public_url")
    ap.add_argument('--ca', required=True, help='CA bundle (PEM) to trust')
    ap.add_argument('--iac-url', required=True, help="iac-code's internal URL")
    ap.add_argument('--workspace', required=True)
    ap.add_argument('--fake-log', required=True)
    ap.add_argument('--iac-access-log', required=True, help="iac-code's stdout (uvicorn access log)")
    ap.add_argument('--iac-tasks-dir', required=True, help='$IAC_CODE_CONFIG_DIR/a2a/tasks')
    ap.add_argument('--validation', choices=('auto', 'on', 'off'), default='auto')
    ap.add_argument('--token-env', default='ALICE_TOKEN')
    ap.add_argument('--bob-token-env', default='BOB_TOKEN', help="the second principal's token")
    ap.add_argument('--llm-key-env', default='ALICE_LLM_KEY',
                    help='the LLM key alice may send as metadata.iac_code.iac_code_api_key')
    ap.add_argument('--tenants', choices=('on', 'off'), default='off',
                    help='on: check the tenant principals (TENANT_A_TOKEN, TENANT_B_TOKEN)')
    ap.add_argument('--tee', default='', help='also write the output to this file')
    args = ap.parse_args()
    if args.tee:
        sys.stdout = Tee(sys.stdout, open(args.tee, 'w', encoding='utf-8'))
    token = env_secret(args.token_env)
    if not token:
        return 2
    if not args.url.endswith('/'):
        args.url += '/'
    if not args.iac_url.endswith('/'):
        args.iac_url += '/'
    bob = env_secret(args.bob_token_env)
    if not bob:
        return 2
    llm_key = env_secret(args.llm_key_env)
    if not llm_key:
        return 2
    if args.tenants == 'on' and not (env_secret('TENANT_A_TOKEN') and env_secret('TENANT_B_TOKEN')):
        return 2
    return Runner(args, token, bob, llm_key).run()


if __name__ == '__main__':
    sys.exit(main())
