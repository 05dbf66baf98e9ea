#!/usr/bin/env python3
"""How an agent behind a2a-edge verifies the caller's identity assertion.

With `[auth.identity_assertion]` in its policy, a2a-edge puts a signed, short-lived JWT on
every request it forwards, in `X-A2A-Edge-Identity` (the header name is configurable). Its
claims: `iss` (the edge's public URL), `aud` (the agent's `[[upstreams]] name`), `sub` (the
principal), `tenant` (only when the caller has one), `groups`, `scheme`, `jti` (the request
id, also sent as `X-Request-Id`), `iat`, `exp`. The public key is at
`<edge public URL>.well-known/jwks.json`.

An agent that trusts the claims only after this check does not depend on the network path to
keep the header honest. Needs PyJWT with its crypto extra (`pip install 'PyJWT[crypto]'`) and
httpx for the JWKS fetch.

    verify_identity.py --issuer https://edge:8443/ --agent agent-1 [--ca ca.pem] TOKEN

prints the verified claims as JSON (exit 0), or the reason it does not verify (exit 1).
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys

import httpx
import jwt


def fetch_jwks(issuer: str, ca_file: str | None = None) -> dict:
    """The edge's published keys, over TLS (trusting `ca_file` when given). Fetch once and
    cache; fetch again when a token names a kid the cached set does not have."""
    verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca_file) if ca_file else True
    r = httpx.get(issuer.rstrip('/') + '/.well-known/jwks.json', verify=verify, timeout=10)
    r.raise_for_status()
    return r.json()


# ---- verify_identity (quoted in the README) ---------------------------------------------------
def verify_identity(token: str, jwks: dict, agent_name: str, issuer: str) -> dict:
    """The claims of an X-A2A-Edge-Identity header once verified, else a jwt.PyJWTError.

    jwks: the edge's /.well-known/jwks.json document; agent_name: this agent's name in the
    edge's policy (the audience); issuer: the edge's public URL, e.g. "https://edge:8443/".
    """
    kid = jwt.get_unverified_header(token).get('kid')
    key = next((k for k in jwt.PyJWKSet.from_dict(jwks).keys if k.key_id == kid), None)
    if key is None:
        raise jwt.InvalidKeyError(f'no key {kid!r} in the edge JWKS (refetch it once)')
    return jwt.decode(
        token,
        key,  # a PyJWK: the token's alg must be the key's own
        algorithms=['ES256', 'RS256', 'EdDSA'],  # asymmetric only: never HS256 or "none"
        audience=agent_name,  # a token for another agent is refused
        issuer=issuer,
        options={'require': ['exp', 'iat', 'sub', 'iss', 'aud']},
    )
# ---- end verify_identity -----------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--issuer', required=True, help="the edge's public URL")
    ap.add_argument('--agent', required=True, help="this agent's [[upstreams]] name")
    ap.add_argument('--ca', default=None, help="CA bundle (PEM) for the edge's certificate")
    ap.add_argument('token')
    args = ap.parse_args()
    try:
        claims = verify_identity(args.token, fetch_jwks(args.issuer, args.ca), args.agent, args.issuer)
    except jwt.PyJWTError as e:
        print(f'not verified: {type(e).__name__}: {e}', file=sys.stderr)
        return 1
    print(json.dumps(claims, indent=2))
    return 0


if __name__ == '__main__':
    sys.exit(main())
