#!/usr/bin/env python3
"""Interop client: drives a running a2a-edge proxy with the official a2a-sdk
(1.3.0) Python client API over TLS and prints one PASS/FAIL line per check.

Usage:
    INTEROP_TOKEN=... sdk_client.py --url https://127.0.0.1:PORT/ --ca ca.pem

Exit status is 0 only when every check passed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import httpx

from a2a.client import (
    A2ACardResolver,
    A2AClientError,
    AgentCardResolutionError,
    Client,
    ClientConfig,
    ClientFactory,
)
from a2a.helpers.proto_helpers import new_text_message
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)

from edge_http import CheckFailed, Checks, env_secret, expect


CHECK_TIMEOUT_S = 30.0
HTTP_TIMEOUT_S = 15.0


def state_name(state: int) -> str:
    try:
        return TaskState.Name(state)
    except ValueError:
        return f'UNKNOWN({state})'


def user_msg(text: str) -> SendMessageRequest:
    return SendMessageRequest(
        message=new_text_message(text, role=Role.ROLE_USER),
    )


def event_kind(ev: StreamResponse) -> str:
    return ev.WhichOneof('payload') or 'empty'


def event_state(ev: StreamResponse) -> int | None:
    kind = event_kind(ev)
    if kind == 'task':
        return ev.task.status.state
    if kind == 'status_update':
        return ev.status_update.status.state
    return None


def event_task_id(ev: StreamResponse) -> str | None:
    kind = event_kind(ev)
    if kind == 'task':
        return ev.task.id
    if kind == 'status_update':
        return ev.status_update.task_id
    if kind == 'artifact_update':
        return ev.artifact_update.task_id
    return None


class Runner(Checks):
    check_timeout_s = CHECK_TIMEOUT_S
    show_cause = True

    def __init__(
        self, url: str, ca: str, token: str, auth_header: str | None = None
    ) -> None:
        super().__init__(ca)
        self.url = url
        self.ca = ca
        self.token = token
        # None: `Authorization: Bearer <token>`; else the API-key header to put the token in.
        self.auth_header = auth_header
        self.card: AgentCard | None = None
        # ids of tasks created by earlier checks (for GetTask / ListTasks)
        self.task_ids: list[str] = []

    # -- plumbing ---------------------------------------------------------

    def httpx_client(self, token: str | None) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            **self.http_options(token, timeout_s=HTTP_TIMEOUT_S, auth_header=self.auth_header)
        )

    def sdk_client(
        self, http: httpx.AsyncClient, *, streaming: bool
    ) -> Client:
        assert self.card is not None
        factory = ClientFactory(
            ClientConfig(streaming=streaming, httpx_client=http)
        )
        return factory.create(self.card)

    # -- checks -------------------------------------------------------------

    async def c_card(self) -> str:
        async with self.httpx_client(self.token) as http:
            card = await A2ACardResolver(http, self.url).get_agent_card()
        self.card = card
        expect(len(card.supported_interfaces) > 0, 'card has no supportedInterfaces')
        iface = card.supported_interfaces[0]
        expect(
            iface.url == self.url,
            f'supportedInterfaces[0].url={iface.url!r}, expected public_url {self.url!r}',
        )
        expect(
            iface.protocol_binding == 'JSONRPC',
            f'supportedInterfaces[0].protocolBinding={iface.protocol_binding!r}, expected JSONRPC',
        )
        return (
            f'name={card.name!r} url={iface.url} binding={iface.protocol_binding} '
            f'version={iface.protocol_version!r} streaming={card.capabilities.streaming}'
        )

    async def c_card_public(self) -> str:
        # The agent card must stay reachable without credentials.
        async with self.httpx_client(None) as http:
            card = await A2ACardResolver(http, self.url).get_agent_card()
        expect(bool(card.name), 'card without a name')
        return 'card resolved without a token'

    async def _send_blocking(self, text: str) -> Task:
        async with self.httpx_client(self.token) as http:
            client = self.sdk_client(http, streaming=False)
            events = [ev async for ev in client.send_message(user_msg(text))]
        expect(len(events) == 1, f'expected 1 response, got {len(events)}')
        ev = events[0]
        expect(
            event_kind(ev) == 'task',
            f'expected a task result, got {event_kind(ev)}',
        )
        return ev.task

    async def c_send(self) -> str:
        task = await self._send_blocking('hello from the a2a-sdk interop client')
        st = task.status.state
        expect(
            st == TaskState.TASK_STATE_INPUT_REQUIRED,
            f'task state {state_name(st)}, expected TASK_STATE_INPUT_REQUIRED',
        )
        expect(bool(task.id), 'task without id')
        self.task_ids.append(task.id)
        return f'task {task.id} state={state_name(st)} artifacts={len(task.artifacts)}'

    async def c_send_complete(self) -> str:
        task = await self._send_blocking('[[complete]] finish please')
        st = task.status.state
        expect(
            st == TaskState.TASK_STATE_COMPLETED,
            f'task state {state_name(st)}, expected TASK_STATE_COMPLETED',
        )
        self.task_ids.append(task.id)
        return f'task {task.id} state={state_name(st)}'

    async def c_stream(self) -> str:
        assert self.card is not None
        expect(
            self.card.capabilities.streaming,
            'card does not advertise capabilities.streaming',
        )
        async with self.httpx_client(self.token) as http:
            client = self.sdk_client(http, streaming=True)
            events = [
                ev
                async for ev in client.send_message(
                    user_msg('[[chunks:4]] stream this through the proxy')
                )
            ]
        kinds = [event_kind(e) for e in events]
        expect(len(events) >= 3, f'only {len(events)} events: {kinds}')
        expect(kinds[0] == 'task', f'first event is {kinds[0]}, expected task')
        n_art = kinds.count('artifact_update')
        expect(n_art >= 2, f'expected several artifact updates, got {n_art}: {kinds}')
        states = [event_state(e) for e in events if event_state(e) is not None]
        last = states[-1] if states else None
        expect(
            last == TaskState.TASK_STATE_INPUT_REQUIRED,
            f'last state {state_name(last) if last is not None else None}, '
            'expected TASK_STATE_INPUT_REQUIRED',
        )
        ids = {event_task_id(e) for e in events} - {None}
        expect(len(ids) == 1, f'events refer to several task ids: {ids}')
        tid = ids.pop()
        self.task_ids.append(tid)
        return f'{len(events)} events ({n_art} artifact chunks), task {tid} ended {state_name(last)}'

    async def c_get_task(self) -> str:
        expect(bool(self.task_ids), 'no task from earlier checks')
        tid = self.task_ids[0]
        async with self.httpx_client(self.token) as http:
            client = self.sdk_client(http, streaming=False)
            task = await client.get_task(GetTaskRequest(id=tid))
        expect(task.id == tid, f'GetTask returned id {task.id!r}, expected {tid!r}')
        st = task.status.state
        expect(
            st == TaskState.TASK_STATE_INPUT_REQUIRED,
            f'state {state_name(st)}, expected TASK_STATE_INPUT_REQUIRED',
        )
        return f'task {tid} state={state_name(st)} history={len(task.history)}'

    async def c_list_tasks(self) -> str:
        expect(bool(self.task_ids), 'no task from earlier checks')
        seen: set[str] = set()
        pages = 0
        token = ''
        async with self.httpx_client(self.token) as http:
            client = self.sdk_client(http, streaming=False)
            while True:
                resp = await client.list_tasks(
                    ListTasksRequest(page_size=100, page_token=token)
                )
                pages += 1
                seen.update(t.id for t in resp.tasks)
                token = resp.next_page_token
                if not token or pages >= 20:
                    break
        missing = [t for t in self.task_ids if t not in seen]
        expect(not missing, f'ListTasks ({len(seen)} tasks, {pages} pages) misses {missing}')
        return f'{len(seen)} tasks in {pages} page(s), all {len(self.task_ids)} earlier tasks found'

    async def c_cancel_return_immediately(self) -> str:
        req = user_msg('[[wait]] wait until canceled')
        req.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
        async with self.httpx_client(self.token) as http:
            client = self.sdk_client(http, streaming=False)
            events = [ev async for ev in client.send_message(req)]
            expect(len(events) == 1 and event_kind(events[0]) == 'task',
                   f'expected one task, got {[event_kind(e) for e in events]}')
            task = events[0].task
            st0 = task.status.state
            expect(
                st0 in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING),
                f'returnImmediately gave state {state_name(st0)}, expected SUBMITTED/WORKING',
            )
            canceled = await client.cancel_task(CancelTaskRequest(id=task.id))
            st1 = canceled.status.state
            expect(
                st1 == TaskState.TASK_STATE_CANCELED,
                f'CancelTask returned state {state_name(st1)}, expected TASK_STATE_CANCELED',
            )
            again = await client.get_task(GetTaskRequest(id=task.id))
            st2 = again.status.state
            expect(
                st2 == TaskState.TASK_STATE_CANCELED,
                f'GetTask after cancel: {state_name(st2)}, expected TASK_STATE_CANCELED',
            )
        return f'task {task.id}: {state_name(st0)} -> {state_name(st1)}'

    async def c_cancel_streaming(self) -> str:
        async with self.httpx_client(self.token) as http, self.httpx_client(
            self.token
        ) as http2:
            streamer = self.sdk_client(http, streaming=True)
            canceller = self.sdk_client(http2, streaming=False)
            events: list[StreamResponse] = []
            tid = None
            cancel_state = None
            stream = streamer.send_message(user_msg('[[wait]] stream until canceled'))
            async for ev in stream:
                events.append(ev)
                if tid is None:
                    tid = event_task_id(ev)
                    expect(tid is not None, f'first event {event_kind(ev)} has no task id')
                    st = event_state(ev)
                    expect(
                        st not in (TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_COMPLETED,
                                   TaskState.TASK_STATE_FAILED),
                        f'[[wait]] task already terminal: {state_name(st)}',
                    )
                    canceled = await canceller.cancel_task(CancelTaskRequest(id=tid))
                    cancel_state = canceled.status.state
                    expect(
                        cancel_state == TaskState.TASK_STATE_CANCELED,
                        f'CancelTask returned {state_name(cancel_state)}',
                    )
        states = [event_state(e) for e in events if event_state(e) is not None]
        expect(bool(states), 'no state events on the stream')
        expect(
            states[-1] == TaskState.TASK_STATE_CANCELED,
            f'stream ended in {state_name(states[-1])}, expected TASK_STATE_CANCELED',
        )
        return f'task {tid}: stream of {len(events)} events ended {state_name(states[-1])}'

    async def c_proto_names(self) -> str:
        # A2A 1.0 JSON is ProtoJSON: proto field names (message_id, media_type, task_id,
        # history_length as a string) are as valid as the JSON names. The edge accepts them,
        # and its answers parse as the SDK's own protobuf messages.
        from google.protobuf import json_format
        from a2a.types import SendMessageResponse, Task

        async def rpc(http: httpx.AsyncClient, method: str, params: dict) -> dict:
            body = {'jsonrpc': '2.0', 'id': 1, 'method': method, 'params': params}
            r = await http.post(self.url, json=body, headers={'A2A-Version': '1.0'})
            expect(r.status_code == 200, f'{method}: HTTP {r.status_code}')
            answer = r.json()
            expect('result' in answer, f'{method} in proto names refused: {answer.get("error")}')
            return answer['result']

        async with self.httpx_client(self.token) as http:
            sent = await rpc(http, 'SendMessage', {'message': {
                'message_id': 'proto-names-1', 'role': 'ROLE_USER',
                'parts': [{'text': '[[input]] proto names', 'media_type': 'text/plain'}]},
                'configuration': {'history_length': '1', 'return_immediately': False}})
            resp = json_format.ParseDict(sent, SendMessageResponse(), ignore_unknown_fields=True)
            tid = resp.task.id
            expect(bool(tid), f'no task in the answer: {sent}')
            got = await rpc(http, 'GetTask', {'id': tid, 'history_length': '0'})
            task = json_format.ParseDict(got, Task(), ignore_unknown_fields=True)
            expect(task.id == tid, f'GetTask answered {task.id}')
            expect(len(task.history) == 0, f'history_length "0" ignored: {len(task.history)} messages')
        return f'task {tid}: SendMessage and GetTask in proto field names, answers parse as SendMessageResponse and Task'

    async def _expect_401(self, token: str | None) -> str:
        async with self.httpx_client(token) as http:
            client = self.sdk_client(http, streaming=False)
            try:
                _ = [ev async for ev in client.send_message(user_msg('should be refused'))]
            except A2AClientError as e:
                cause = e.__cause__
                expect(
                    isinstance(cause, httpx.HTTPStatusError),
                    f'refused, but not by an HTTP status: {e!r} (cause {cause!r})',
                )
                resp = cause.response
                expect(resp.status_code == 401, f'HTTP {resp.status_code}, expected 401')
                www = resp.headers.get('www-authenticate', '')
                return f'HTTP 401, WWW-Authenticate={www!r}'
            raise CheckFailed('request without a valid token was accepted')

    async def c_no_token(self) -> str:
        return await self._expect_401(None)

    async def c_wrong_token(self) -> str:
        return await self._expect_401(self.token + 'x')

    async def c_tls_untrusted(self) -> str:
        # A client that does not trust the dev CA must refuse the server cert.
        async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S) as http:
            try:
                await A2ACardResolver(http, self.url).get_agent_card()
            except AgentCardResolutionError as e:
                expect(
                    'CERTIFICATE_VERIFY_FAILED' in str(e) or 'certificate' in str(e).lower(),
                    f'failed for another reason: {e}',
                )
                return 'default trust store rejects the dev certificate'
        raise CheckFailed('server certificate accepted without the dev CA')

    # -- driver -------------------------------------------------------------

    async def run(self) -> int:
        card_ok = await self.acheck('card', self.c_card)
        await self.acheck('card-public', self.c_card_public)
        await self.acheck('tls-untrusted', self.c_tls_untrusted)
        if not card_ok:
            # The SDK client is built from the card; fall back to a minimal
            # card pointing at the public url so the other checks still run.
            from a2a.client import minimal_agent_card  # noqa: PLC0415

            self.card = minimal_agent_card(self.url, ['JSONRPC'])
            self.card.capabilities.streaming = True
            print(f'NOTE card check failed; using a minimal card for {self.url}', flush=True)
        await self.acheck('send-message', self.c_send)
        await self.acheck('send-message-complete', self.c_send_complete)
        await self.acheck('stream-message', self.c_stream)
        await self.acheck('get-task', self.c_get_task)
        await self.acheck('list-tasks', self.c_list_tasks)
        await self.acheck('cancel-return-immediately', self.c_cancel_return_immediately)
        await self.acheck('cancel-streaming', self.c_cancel_streaming)
        await self.acheck('proto-names', self.c_proto_names)
        await self.acheck('auth-no-token', self.c_no_token)
        await self.acheck('auth-wrong-token', self.c_wrong_token)
        print(f'sdk-client: {self.passed} passed, {self.failed} failed', flush=True)
        return 0 if self.failed == 0 else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--url', required=True, help="the proxy's public_url")
    ap.add_argument('--ca', required=True, help='CA bundle (PEM) to trust')
    ap.add_argument(
        '--token-env',
        default='INTEROP_TOKEN',
        help='environment variable holding the bearer token',
    )
    ap.add_argument(
        '--auth-header',
        default=None,
        help='send the secret in this API-key header instead of Authorization: Bearer',
    )
    args = ap.parse_args()
    token = env_secret(args.token_env)
    if not token:
        return 2
    return asyncio.run(Runner(args.url, args.ca, token, args.auth_header).run())


if __name__ == '__main__':
    sys.exit(main())
