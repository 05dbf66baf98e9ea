#!/usr/bin/env python3
"""Interop client: two agents behind one a2a-edge ([[agents]]), driven with the official
a2a-sdk (1.3.0) Python client API over TLS; one PASS/FAIL line per check.

Usage:
    INTEROP_TOKEN=... agents_client.py --ca ca.pem \\
        --catalog https://localhost:PORT/.well-known/agents.json \\
        --agent tf https://localhost:PORT/agents/tf/ 'terraform agent' \\
        --agent ros https://localhost:PORT/agents/ros/ 'ros review agent'

Each agent's card is resolved by the SDK's own A2ACardResolver from the agent's public URL as
the base URL; the SDK client is made from that card alone. Exit status is 0 only when every
check passed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from dataclasses import dataclass, field

import httpx

from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import new_text_message
from a2a.types import (
    AgentCard,
    GetTaskRequest,
    Role,
    SendMessageRequest,
    TaskState,
)
from a2a.utils.errors import JSON_RPC_ERROR_CODE_MAP, TaskNotFoundError
from a2a.utils.signing import create_signature_verifier

from edge_http import CheckFailed, Checks, env_secret, expect


CHECK_TIMEOUT_S = 30.0
HTTP_TIMEOUT_S = 15.0
CARD_PATH = '.well-known/agent-card.json'
JWKS_PATH = '/.well-known/jwks.json'


def state_name(state: int) -> str:
    try:
        return TaskState.Name(state)
    except ValueError:
        return f'UNKNOWN({state})'


@dataclass
class Agent:
    name: str  # the [[agents]] name (the catalog's)
    url: str  # its public URL: JSON-RPC endpoint and card base
    card_name: str  # the name its engine's card carries
    card: AgentCard | None = None
    task_ids: list[str] = field(default_factory=list)

    @property
    def card_url(self) -> str:
        return self.url + CARD_PATH

    @property
    def origin(self) -> str:
        u = httpx.URL(self.url)
        return f'{u.scheme}://{u.netloc.decode()}'


class Runner(Checks):
    check_timeout_s = CHECK_TIMEOUT_S
    show_cause = True

    def __init__(self, ca: str, token: str, catalog: str, agents: list[Agent]) -> None:
        super().__init__(ca)
        self.token = token
        self.catalog = catalog
        self.agents = agents

    def httpx_client(self, token: str | None) -> httpx.AsyncClient:
        return httpx.AsyncClient(**self.http_options(token, timeout_s=HTTP_TIMEOUT_S))

    def sdk_client(self, http: httpx.AsyncClient, agent: Agent) -> Client:
        if agent.card is None:
            raise CheckFailed(f'no card for {agent.name} (the card check failed)')
        return ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(agent.card)

    # -- checks -------------------------------------------------------------

    async def c_card(self, agent: Agent) -> str:
        # a2a-sdk 1.3.0: A2ACardResolver(http, base_url) strips the base URL's trailing '/'
        # and appends '/.well-known/agent-card.json', so a base URL with a path prefix
        # (https://localhost:PORT/agents/tf/) resolves <prefix>.well-known/agent-card.json;
        # no explicit agent_card_path is needed.
        async with self.httpx_client(None) as http:
            resolver = A2ACardResolver(http, agent.url)
            card = await resolver.get_agent_card()
        agent.card = card  # the later checks use it even when this one fails
        expect(
            card.name == agent.card_name,
            f'card name {card.name!r}, expected {agent.card_name!r} (from its engine)',
        )
        expect(len(card.supported_interfaces) > 0, 'card has no supportedInterfaces')
        iface = card.supported_interfaces[0]
        expect(
            iface.url == agent.url,
            f'supportedInterfaces[0].url={iface.url!r}, expected the agent URL {agent.url!r}',
        )
        expect(
            iface.protocol_binding == 'JSONRPC',
            f'supportedInterfaces[0].protocolBinding={iface.protocol_binding!r}',
        )
        expect(len(card.signatures) > 0, 'card is not signed')
        if card.HasField('provider') and not card.provider.url.startswith(agent.origin + '/'):
            # the edge rewrites the interfaces, not provider.url (the organization's URL):
            # the standalone engine puts its own listen URL there
            self.note(
                f'card-{agent.name}',
                f'provider.url {card.provider.url!r} is not on {agent.origin}',
            )
        return (
            f'{resolver.base_url}/{resolver.agent_card_path}: name={card.name!r} '
            f'url={iface.url} signatures={len(card.signatures)}'
        )

    def jku_provider(self, agent: Agent, seen: list[tuple[str | None, str]]):
        """key_provider(kid, jku) for the SDK's verifier: the key set at the header's jku (only
        on the agent's own origin), else at the origin's /.well-known/jwks.json. Raises a
        PyJWTError for a key it cannot give (the SDK's verifier catches only those)."""
        from jwt import PyJWK
        from jwt.exceptions import InvalidKeyError

        def provider(kid: str | None, jku: str | None) -> PyJWK:
            url = jku or agent.origin + JWKS_PATH
            seen.append((kid, url))
            if not url.startswith(agent.origin + '/'):
                raise InvalidKeyError(f'jku {url} is not on {agent.origin}')
            with httpx.Client(**self.http_options(None, timeout_s=HTTP_TIMEOUT_S)) as c:
                r = c.get(url)
                r.raise_for_status()
                for k in r.json().get('keys', []):
                    if k.get('kid') == kid:
                        return PyJWK(k)
            raise InvalidKeyError(f'no key {kid!r} at {url}')

        return provider

    async def c_card_verify(self, agent: Agent) -> str:
        # The SDK's own flow: the resolver verifies the card it fetched with
        # create_signature_verifier and a key provider that follows the header's jku.
        seen: list[tuple[str | None, str]] = []
        verifier = create_signature_verifier(self.jku_provider(agent, seen), ['ES256'])
        async with self.httpx_client(None) as http:
            resolver = A2ACardResolver(http, agent.url)
            card = await resolver.get_agent_card(signature_verifier=verifier)
        expect(bool(seen), 'the key provider was not called')
        return f'{card.name!r} verified by the SDK; key_provider called with {seen}'

    async def c_send(self, agent: Agent) -> str:
        req = SendMessageRequest(
            message=new_text_message(f'hello {agent.name} from the a2a-sdk', role=Role.ROLE_USER)
        )
        async with self.httpx_client(self.token) as http:
            events = [ev async for ev in self.sdk_client(http, agent).send_message(req)]
        expect(len(events) == 1, f'expected 1 response, got {len(events)}')
        kind = events[0].WhichOneof('payload')
        if kind == 'message':
            return f'message {events[0].message.message_id}'
        expect(kind == 'task', f'expected a task or a message, got {kind}')
        task = events[0].task
        expect(bool(task.id), 'task without id')
        agent.task_ids.append(task.id)
        return f'task {task.id} state={state_name(task.status.state)}'

    async def c_get_own(self, agent: Agent) -> str:
        expect(bool(agent.task_ids), f'no task from {agent.name}')
        tid = agent.task_ids[0]
        async with self.httpx_client(self.token) as http:
            task = await self.sdk_client(http, agent).get_task(GetTaskRequest(id=tid))
        expect(task.id == tid, f'GetTask returned id {task.id!r}, expected {tid!r}')
        return f'task {tid} at {agent.url}: state={state_name(task.status.state)}'

    async def c_get_other(self, owner: Agent, other: Agent) -> str:
        expect(bool(owner.task_ids), f'no task from {owner.name}')
        tid = owner.task_ids[0]
        async with self.httpx_client(self.token) as http:
            try:
                task = await self.sdk_client(http, other).get_task(GetTaskRequest(id=tid))
            except TaskNotFoundError as e:
                code = JSON_RPC_ERROR_CODE_MAP[TaskNotFoundError]
                return f'task {tid} of {owner.name} at {other.url}: {code} {e.message!r}'
        raise CheckFailed(
            f'task {tid} of {owner.name} found at {other.name}: '
            f'state={state_name(task.status.state)}'
        )

    async def c_catalog(self) -> str:
        async with self.httpx_client(None) as http:
            r = await http.get(self.catalog)
            expect(r.status_code == 200, f'HTTP {r.status_code}')
            doc = r.json()
            listed = {a.get('name'): a for a in doc.get('agents', [])}
            for agent in self.agents:
                entry = listed.get(agent.name)
                expect(entry is not None, f'{agent.name} not listed: {sorted(listed)}')
                expect(
                    entry.get('cardUrl') == agent.card_url,
                    f'{agent.name}: cardUrl={entry.get("cardUrl")!r}, expected {agent.card_url!r}',
                )
                expect(bool(entry.get('description')), f'{agent.name}: no description')
                # the cardUrl serves that agent's card
                card = await http.get(entry['cardUrl'])
                expect(card.status_code == 200, f'{entry["cardUrl"]}: HTTP {card.status_code}')
                name = card.json().get('name')
                expect(name == agent.card_name, f'{entry["cardUrl"]}: card name {name!r}')
            expect(bool(doc.get('signatures')), 'catalog is not signed')
        names = ', '.join(f'{a.name} -> {a.card_url}' for a in self.agents)
        return f'{len(listed)} agents listed: {names}'

    # -- driver -------------------------------------------------------------

    async def run(self) -> int:
        for agent in self.agents:
            await self.acheck(f'card-{agent.name}', lambda a=agent: self.c_card(a))
            await self.acheck(f'card-verify-{agent.name}', lambda a=agent: self.c_card_verify(a))
        for agent in self.agents:
            await self.acheck(f'send-message-{agent.name}', lambda a=agent: self.c_send(a))
        for agent in self.agents:
            await self.acheck(f'get-task-{agent.name}', lambda a=agent: self.c_get_own(a))
        for owner in self.agents:
            for other in self.agents:
                if other is not owner:
                    await self.acheck(
                        f'task-not-found-{owner.name}-at-{other.name}',
                        lambda o=owner, x=other: self.c_get_other(o, x),
                    )
        await self.acheck('catalog', self.c_catalog)
        print(f'agents-client: {self.passed} passed, {self.failed} failed', flush=True)
        return 0 if self.failed == 0 else 1


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument('--ca', required=True, help='CA bundle (PEM) to trust')
    ap.add_argument('--catalog', required=True, help='the URL of /.well-known/agents.json')
    ap.add_argument(
        '--agent',
        nargs=3,
        action='append',
        required=True,
        metavar=('NAME', 'URL', 'CARD_NAME'),
        help='an agent: its [[agents]] name, public URL and the name its card carries',
    )
    ap.add_argument(
        '--token-env',
        default='INTEROP_TOKEN',
        help='environment variable holding the bearer token',
    )
    args = ap.parse_args()
    token = env_secret(args.token_env)
    if not token:
        return 2
    agents = [Agent(name, url, card_name) for name, url, card_name in args.agent]
    return asyncio.run(Runner(args.ca, token, args.catalog, agents).run())


if __name__ == '__main__':
    sys.exit(main())
