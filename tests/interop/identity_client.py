#!/usr/bin/env python3
"""Interop client: a2a-edge's identity assertion, checked with the example verifier.

Sends SendMessage through the edge as three callers (ana: tenant team-a; ben: tenant team-b;
carol: no tenant), reads what the recording agent (recording_agent.py) received, and checks the
X-A2A-Edge-Identity header with `verify_identity` from verify_identity.py (PyJWT) and the
edge's /.well-known/jwks.json. A fourth caller, rita, may only read ([authz]): her SendMessage,
sent with the official a2a-sdk client and as raw JSON-RPC, must be refused with the edge's
authorization error (-32050) and never reach the agent. One PASS/FAIL line per check
(edge_http.Checks).

Usage (normally started by identity.sh):
    ANA_TOKEN=... BEN_TOKEN=... CAROL_TOKEN=... RITA_TOKEN=... identity_client.py --url https://127.0.0.1:P/ \\
        --ca ca.pem --agent-log FILE --agent agent-1 --kid edge-id --ttl 2

Exit status: 0 when no check FAILed.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
import json
import sys
import time
import uuid

from pathlib import Path

import httpx
import jwt

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import new_text_message
from a2a.types import Role, SendMessageRequest

from edge_http import CheckFailed, Checks, env_secret, expect
from verify_identity import fetch_jwks, verify_identity


IDENTITY = 'x-a2a-edge-identity'
TENANT = 'x-a2a-edge-tenant'
PRINCIPAL = 'x-a2a-edge-principal'

# name -> (token env var, tenant, groups), as in identity.sh's policy
CALLERS = {
    'ana': ('ANA_TOKEN', 'team-a', ['deployers']),
    'ben': ('BEN_TOKEN', 'team-b', ['deployers', 'ops']),
    'carol': ('CAROL_TOKEN', None, []),
}
# the read-only caller (identity.sh's [authz] rule "readers": methods = ["read"]) and her token
READER, READER_ENV = 'rita', 'RITA_TOKEN'
AUTHZ_CODE = -32050
AUTHZ_MESSAGE = 'Permission denied: this caller may not call SendMessage'


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b'=').decode()


def b64url_decode(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + '=' * (-len(s) % 4))


def short(obj: object, n: int = 300) -> str:
    s = obj if isinstance(obj, str) else json.dumps(obj)
    return s if len(s) <= n else s[:n] + '…'


class Seen:
    """One request as the agent got it: header values by lower-case name (all of them)."""

    def __init__(self, rec: dict) -> None:
        self.rec = rec
        self.headers: dict[str, list[str]] = {}
        for k, v in rec.get('headers') or []:
            self.headers.setdefault(k.lower(), []).append(v)

    def all(self, name: str) -> list[str]:
        return self.headers.get(name, [])

    def one(self, name: str) -> str:
        values = self.all(name)
        expect(len(values) == 1, f'the agent got {len(values)} {name} headers: {[short(v, 60) for v in values]}')
        return values[0]


class Runner(Checks):
    def __init__(self, args: argparse.Namespace, tokens: dict[str, str]) -> None:
        super().__init__(args.ca)
        self.url: str = args.url
        self.ca: str = args.ca
        self.agent: str = args.agent
        self.kid: str = args.kid
        self.ttl: int = args.ttl
        self.agent_log = Path(args.agent_log)
        self.tokens = tokens
        self.jwks: dict = {}
        self.seen: dict[str, Seen] = {}     # caller -> its SendMessage at the agent
        self.claims: dict[str, dict] = {}   # caller -> verified claims

    # -- plumbing -------------------------------------------------------------

    def send(self, who: str, headers: dict[str, str] | None = None) -> Seen:
        """SendMessage as `who` through the edge; what the agent received for it."""
        mid = f'msg-{uuid.uuid4().hex}'
        body = {'jsonrpc': '2.0', 'id': f'rpc-{uuid.uuid4().hex[:8]}', 'method': 'SendMessage',
                'params': {'message': {'messageId': mid, 'role': 'ROLE_USER', 'parts': [{'text': 'hi'}]}}}
        opts = self.http_options(self.tokens[who], timeout_s=30,
                                 headers={'A2A-Version': '1.0', **(headers or {})})
        with httpx.Client(**opts) as http:
            r = http.post(self.url, json=body)
        expect(r.status_code == 200, f'{who}: HTTP {r.status_code}: {short(r.text)}')
        doc = r.json()
        expect('task' in (doc.get('result') or {}), f'{who}: no task in the answer: {short(doc)}')
        for _ in range(20):  # the agent logs before it answers; allow for a slow disk anyway
            for line in reversed(self.agent_log.read_text(encoding='utf-8').splitlines()):
                rec = json.loads(line)
                body = rec.get('body') if isinstance(rec.get('body'), dict) else {}
                msg = (body.get('params') or {}).get('message') or {}
                if msg.get('messageId') == mid:
                    return Seen(rec)
            time.sleep(0.05)
        raise CheckFailed(f'{who}: the agent never got message {mid}')

    def agent_records(self) -> list[dict]:
        return [json.loads(line) for line in self.agent_log.read_text(encoding='utf-8').splitlines()]

    async def sdk_send(self, who: str, mid: str) -> Exception:
        """SendMessage (message id `mid`) as `who` with the a2a-sdk client (card from the edge,
        non-streaming JSON-RPC); the exception it raised (CheckFailed if it raised none)."""
        opts = self.http_options(self.tokens[who], timeout_s=30)
        async with httpx.AsyncClient(**opts) as http:
            card = await A2ACardResolver(http, self.url).get_agent_card()
            client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
            msg = new_text_message('may a reader write?', role=Role.ROLE_USER)
            msg.message_id = mid
            try:
                events = [ev async for ev in client.send_message(SendMessageRequest(message=msg))]
            except Exception as e:  # noqa: BLE001 -- the point: which one, and what it says
                return e
        raise CheckFailed(f'{who}: the SDK got an answer, no error: {short(str(events))}')

    def verify(self, token: str, agent: str | None = None, issuer: str | None = None) -> dict:
        return verify_identity(token, self.jwks, agent or self.agent, issuer or self.url)

    def refused(self, token: str, want: type[Exception], **kw) -> str:
        try:
            claims = self.verify(token, **kw)
        except want as e:
            return f'{type(e).__name__}: {e}'
        except jwt.PyJWTError as e:
            raise CheckFailed(f'refused, but with {type(e).__name__}: {e} (expected {want.__name__})')
        raise CheckFailed(f'verified: {claims}')

    # -- checks ---------------------------------------------------------------

    def c_jwks(self) -> str:
        self.jwks = fetch_jwks(self.url, self.ca)
        keys = self.jwks.get('keys') or []
        mine = [k for k in keys if k.get('kid') == self.kid]
        expect(len(mine) == 1, f'{len(mine)} keys with kid {self.kid!r}: {short(self.jwks)}')
        k = mine[0]
        expect(k.get('kty') == 'EC' and k.get('crv') == 'P-256' and k.get('alg') == 'ES256',
               f'not an ES256 P-256 key: {k}')
        expect(k.get('use') == 'sig', f'use={k.get("use")!r}, expected sig')
        expect('d' not in k, 'the JWKS publishes the private key (d)')
        return f'{len(keys)} key(s); {self.kid}: kty=EC crv=P-256 alg=ES256 use=sig, no private part'

    def c_verified(self, who: str) -> str:
        env, tenant, groups = CALLERS[who]
        seen = self.send(who)
        self.seen[who] = seen
        token = seen.one(IDENTITY)
        header = jwt.get_unverified_header(token)
        expect(header == {'alg': 'ES256', 'kid': self.kid, 'typ': 'JWT'}, f'protected header {header}')
        c = self.verify(token)
        self.claims[who] = c
        rid = seen.one('x-request-id')
        want = {'iss': self.url, 'aud': self.agent, 'sub': who, 'groups': groups,
                'scheme': 'bearer', 'jti': rid}
        if tenant is not None:
            want['tenant'] = tenant
        got = {k: c.get(k) for k in want}
        expect(got == want, f'claims {got}, expected {want}')
        if tenant is None:
            expect('tenant' not in c, f'tenant claim {c.get("tenant")!r} for a caller without a tenant')
        expect(c['exp'] - c['iat'] == self.ttl, f'exp - iat = {c["exp"] - c["iat"]}, expected ttl_secs {self.ttl}')
        expect(abs(c['iat'] - time.time()) < 5, f'iat {c["iat"]} is {c["iat"] - time.time():.1f} s off')
        extra = sorted(set(c) - set(want) - {'tenant', 'iat', 'exp'})
        expect(not extra, f'unexpected claims {extra}')
        expect(self.tokens[who] not in json.dumps(seen.rec['headers']),
               f"the caller's token reached the agent")
        return (f'sub={c["sub"]} tenant={c.get("tenant", "<none>")} groups={c["groups"]} '
                f'scheme={c["scheme"]} aud={c["aud"]} iss={c["iss"]} jti=X-Request-Id={rid} '
                f'exp-iat={c["exp"] - c["iat"]}s')

    def c_tenant_header(self) -> str:
        out = []
        for who, (_, tenant, _) in CALLERS.items():
            seen = self.seen.get(who)
            expect(seen, f'no request of {who} from identity-verified')
            expect(seen.one(PRINCIPAL) == who, f'{who}: {PRINCIPAL}={seen.all(PRINCIPAL)}')
            if tenant is None:
                expect(not seen.all(TENANT), f'{who} (no tenant): the agent got {TENANT}={seen.all(TENANT)}')
            else:
                expect(seen.one(TENANT) == tenant == self.claims[who].get('tenant'),
                       f'{who}: {TENANT}={seen.all(TENANT)}, claim {self.claims[who].get("tenant")!r}, '
                       f'expected {tenant!r}')
            out.append(f'{who}: {TENANT}={seen.all(TENANT) or "absent"}')
        return '; '.join(out) + ' (same as the tenant claim)'

    def c_wrong_audience(self) -> str:
        token = self.seen['ana'].one(IDENTITY)
        return self.refused(token, jwt.InvalidAudienceError, agent='agent-2')

    def c_wrong_issuer(self) -> str:
        token = self.seen['ana'].one(IDENTITY)
        return self.refused(token, jwt.InvalidIssuerError, issuer='https://other-edge.example/')

    def c_tampered(self) -> str:
        h, p, s = self.seen['ana'].one(IDENTITY).split('.')
        payload = bytearray(b64url_decode(p))
        at = payload.index(b'"sub":"ana"') + len(b'"sub":"an')
        payload[at] ^= 0x03  # "ana" -> "anb": still valid JSON, one byte flipped
        forged = f'{h}.{b64url(bytes(payload))}.{s}'
        return f'sub "ana" -> "{payload[at - 2:at + 1].decode()}": ' + self.refused(forged, jwt.InvalidSignatureError)

    def c_alg_swapped(self) -> str:
        """A token made with alg HS256 (the public JWK as the HMAC secret) or alg none."""
        h, p, _ = self.seen['ana'].one(IDENTITY).split('.')
        out = []
        jwk_json = json.dumps(next(k for k in self.jwks['keys'] if k.get('kid') == self.kid)).encode()
        for alg in ('HS256', 'none'):
            head = b64url(json.dumps({'alg': alg, 'kid': self.kid, 'typ': 'JWT'}).encode())
            sig = b64url(hmac.new(jwk_json, f'{head}.{p}'.encode(), hashlib.sha256).digest()) if alg == 'HS256' else ''
            out.append(f'{alg}: ' + self.refused(f'{head}.{p}.{sig}', jwt.InvalidAlgorithmError))
        return '; '.join(out)

    def c_forged_headers(self) -> str:
        # ana replays ben's real (still valid) assertion, names ben's tenant and principal
        ben_token = self.seen['ben'].one(IDENTITY)
        # and picks the request id (the jti an agent may keep to refuse replays)
        forged = {'X-A2A-Edge-Identity': ben_token, 'X-A2A-Edge-Tenant': 'team-b',
                  'X-A2A-Edge-Principal': 'ben', 'X-Request-Id': self.claims['ben']['jti']}
        seen = self.send('ana', forged)
        token = seen.one(IDENTITY)
        expect(token != ben_token, "ben's assertion sent by ana reached the agent")
        c = self.verify(token)
        expect(c['jti'] == seen.one('x-request-id'), f'jti {c["jti"]} != X-Request-Id {seen.all("x-request-id")}')
        expect(c['jti'] != self.claims['ben']['jti'], f'the caller chose the jti: {c["jti"]} (ben\'s)')
        expect(c['sub'] == 'ana' and c.get('tenant') == 'team-a', f'claims sub={c["sub"]} tenant={c.get("tenant")}')
        expect(seen.all(TENANT) == ['team-a'], f'{TENANT} at the agent: {seen.all(TENANT)}')
        expect(seen.all(PRINCIPAL) == ['ana'], f'{PRINCIPAL} at the agent: {seen.all(PRINCIPAL)}')
        # carol has no tenant: a tenant she names must not reach the agent at all
        seen = self.send('carol', {'X-A2A-Edge-Tenant': 'team-a', 'X-A2A-Edge-Identity': 'forged.jws.value'})
        expect(not seen.all(TENANT), f'carol\'s forged {TENANT} reached the agent: {seen.all(TENANT)}')
        c = self.verify(seen.one(IDENTITY))
        expect(c['sub'] == 'carol' and 'tenant' not in c, f'carol: claims {c}')
        return (f"ana with ben's assertion, {TENANT}: team-b, {PRINCIPAL}: ben, X-Request-Id: ben's jti "
                f'-> the agent got one assertion (sub=ana tenant=team-a, a jti of its own), '
                f'{TENANT}=team-a, {PRINCIPAL}=ana; carol with a '
                f'forged tenant and assertion -> no {TENANT}, her own assertion')

    def c_expired(self) -> str:
        token = self.seen['ana'].one(IDENTITY)
        exp = self.claims['ana']['exp']
        wait = exp + 1 - time.time()  # PyJWT refuses once now >= exp (leeway 0, its default)
        if wait > 0:
            time.sleep(wait)
        return (f'{time.time() - exp:.1f} s after exp (ttl_secs {self.ttl}): '
                + self.refused(token, jwt.ExpiredSignatureError))

    def c_authz_sdk_error(self) -> str:
        """The read-only caller's SendMessage: the SDK raises the edge's -32050, the raw
        answer is that error (HTTP 200), and the agent receives nothing."""
        who = READER
        before = len(self.agent_records())
        sdk_mid = f'msg-{uuid.uuid4().hex}'
        e = asyncio.run(self.sdk_send(who, sdk_mid))
        text = str(e)
        expect(str(AUTHZ_CODE) in text and AUTHZ_MESSAGE in text,
               f'SDK raised {type(e).__name__}: {text!r} (cause {e.__cause__!r}); expected '
               f'{AUTHZ_CODE} and {AUTHZ_MESSAGE!r} in its text')
        sdk = f'{type(e).__module__}.{type(e).__name__}: {text}'
        # the same request as raw JSON-RPC: the error object itself
        raw_mid = f'msg-{uuid.uuid4().hex}'
        rpc_id = f'rpc-{uuid.uuid4().hex[:8]}'
        body = {'jsonrpc': '2.0', 'id': rpc_id, 'method': 'SendMessage',
                'params': {'message': {'messageId': raw_mid, 'role': 'ROLE_USER',
                                       'parts': [{'text': 'may a reader write?'}]}}}
        opts = self.http_options(self.tokens[who], timeout_s=30, headers={'A2A-Version': '1.0'})
        with httpx.Client(**opts) as http:
            r = http.post(self.url, json=body)
        expect(r.status_code == 200, f'raw: HTTP {r.status_code}, expected 200: {short(r.text)}')
        doc = r.json()
        expect(doc.get('id') == rpc_id and 'result' not in doc, f'raw: {short(doc)}')
        err = doc.get('error') or {}
        expect(err.get('code') == AUTHZ_CODE, f'raw: error.code {err.get("code")!r}: {short(doc)}')
        expect(err.get('message') == AUTHZ_MESSAGE, f'raw: error.message {err.get("message")!r}')
        data = err.get('data')
        expect(isinstance(data, list) and data and isinstance(data[0], dict), f'raw: error.data {short(data)}')
        info = data[0]
        expect(info.get('reason') == 'authz.method', f'raw: error.data[0].reason {info.get("reason")!r}')
        want = {'method': 'SendMessage', 'missing': 'write'}
        expect(info.get('metadata') == want, f'raw: error.data[0].metadata {info.get("metadata")!r}, expected {want}')
        # neither request reached the agent (it logs every request before it answers)
        after = self.agent_records()
        expect(len(after) == before, f'the agent got {len(after) - before} request(s) during the check')
        leaked = [m for m in (sdk_mid, raw_mid) if m in json.dumps(after)]
        expect(not leaked, f'the agent got message(s) {leaked}')
        return (f'{who} (methods = ["read"]) SendMessage: SDK raised {sdk}; raw: HTTP 200, '
                f'error.code={err["code"]} reason={info["reason"]} metadata={json.dumps(info["metadata"])}; '
                f'the agent got nothing ({before} requests before and after)')

    def run(self) -> int:
        if self.check('identity-jwks', self.c_jwks):
            ok = self.check('identity-verified', lambda: self.c_verified('ana'))
            ok = self.check('identity-verified-team-b', lambda: self.c_verified('ben')) and ok
            ok = self.check('identity-verified-no-tenant', lambda: self.c_verified('carol')) and ok
            if ok:
                self.check('identity-tenant-header', self.c_tenant_header)
                self.check('identity-wrong-audience', self.c_wrong_audience)
                self.check('identity-wrong-issuer', self.c_wrong_issuer)
                self.check('identity-tampered', self.c_tampered)
                self.check('identity-alg-swapped', self.c_alg_swapped)
                self.check('identity-forged-header-stripped', self.c_forged_headers)
                self.check('identity-expired', self.c_expired)
        self.check('authz-sdk-error', self.c_authz_sdk_error)
        print(f'identity-client: {self.passed} passed, {self.failed} failed', flush=True)
        return 0 if self.failed == 0 else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--url', required=True, help="the edge's public_url (the issuer)")
    ap.add_argument('--ca', required=True, help='CA bundle (PEM) to trust')
    ap.add_argument('--agent-log', required=True, help="recording_agent.py's --log")
    ap.add_argument('--agent', default='agent-1', help="the agent's [[upstreams]] name")
    ap.add_argument('--kid', default='edge-id')
    ap.add_argument('--ttl', type=int, default=2, help='[auth.identity_assertion] ttl_secs')
    args = ap.parse_args()
    if not args.url.endswith('/'):
        args.url += '/'
    tokens = {}
    for who, (env, _, _) in CALLERS.items():
        token = env_secret(env)
        if not token:
            return 2
        tokens[who] = token
    tokens[READER] = env_secret(READER_ENV)
    if not tokens[READER]:
        return 2
    return Runner(args, tokens).run()


if __name__ == '__main__':
    sys.exit(main())
