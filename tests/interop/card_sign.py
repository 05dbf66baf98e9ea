#!/usr/bin/env python3
"""Agent Card signatures: the a2a-sdk (1.3.0, `a2a[signing]`) against a2a-edge.

Helper of card_sign.sh, run with the SDK venv's interpreter. Subcommands:

  prepare DIR        sign test cards with the SDK signer (HS256, ES256, the
                     iac-code worked example), write tampered copies, the ES256
                     key (PKCS#8 PEM) and its JWKS into DIR; cases.tsv lists
                     FILE<TAB>EXPECTED-VERDICT<TAB>VERIFY-ARGS for `a2a-edge card verify`
  verify FILE...     verify cards signed by `a2a-edge card sign` with the SDK
                     verifier (`--secret-env KID=ENV`, `--jwks FILE`); each
                     must verify, and fail once its description is changed
  served             fetch the card (and JWKS) an a2a-edge serves over TLS and
                     verify it with the SDK verifier; caching headers, 304
  upstream           fetch iac-code's own (HS256-signed) card, verify it with
                     the SDK 1.3.0 verifier
  genkey FILE        write a new ES256 (P-256) private key, PKCS#8 PEM, 0600
  status URL         print the HTTP status of a GET (trusting --ca)

Output: one `PASS name: ...` / `FAIL name: ...` / `NOTE ...` line per check;
exit status 1 if any FAIL.
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import os
import sys
import traceback
import warnings

# The SDK warns on short HMAC keys (the worked example's secret is "k") and on
# cards without skills; both are intended here.
warnings.filterwarnings("ignore")
import logging  # noqa: E402

logging.disable(logging.WARNING)

NFAIL = 0
DEBUG = bool(os.environ.get("INTEROP_DEBUG"))


def say(kind: str, name: str, msg: str) -> None:
    global NFAIL
    if kind == "FAIL":
        NFAIL += 1
    print(f"{kind} {name}: {msg}", flush=True)


def check(name: str, ok: bool, msg: str) -> bool:
    say("PASS" if ok else "FAIL", name, msg)
    return ok


def short(v, n: int = 300) -> str:
    s = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
    return s if len(s) <= n else s[:n] + "…"


def b64url_json(seg: str):
    return json.loads(base64.urlsafe_b64decode(seg + "=" * (-len(seg) % 4)))


# ---------------------------------------------------------------- SDK helpers


def sdk():
    # imported lazily: `status` needs none of it
    import jwt  # noqa: F401
    from a2a.client.card_resolver import parse_agent_card
    from a2a.utils import signing
    from google.protobuf.json_format import MessageToDict

    return parse_agent_card, signing, MessageToDict


def sdk_sign(card: dict, key, header: dict) -> dict:
    parse_agent_card, signing, MessageToDict = sdk()
    parsed = parse_agent_card(copy.deepcopy(card))
    signing.create_agent_card_signer(signing_key=key, protected_header=header)(parsed)
    return MessageToDict(parsed)


def sdk_verify(card: dict, key_provider, algorithms: list[str]) -> str:
    """'valid' or the SDK's exception (class: message)."""
    parse_agent_card, signing, _ = sdk()
    parsed = parse_agent_card(copy.deepcopy(card))
    try:
        signing.create_signature_verifier(key_provider, algorithms)(parsed)
        return "valid"
    except signing.SignatureVerificationError as e:
        return f"{type(e).__name__}: {e}"


# A key_provider must raise a PyJWTError for a kid it does not know: the SDK's
# verifier only catches PyJWTError (any other exception escapes the verifier
# instead of moving on to the next signature).


def jwks_provider(jwks: dict, seen: list | None = None):
    from jwt import PyJWK
    from jwt.exceptions import InvalidKeyError

    def provider(kid, jku):
        if seen is not None:
            seen.append((kid, jku))
        for k in jwks.get("keys", []):
            if k.get("kid") == kid:
                return PyJWK(k)
        raise InvalidKeyError(f"no key {kid!r} in the JWKS")

    return provider


def secret_provider(secrets: dict[str, str], seen: list | None = None):
    from jwt.exceptions import InvalidKeyError

    def provider(kid, jku):
        if seen is not None:
            seen.append((kid, jku))
        if kid not in secrets:
            raise InvalidKeyError(f"no secret for kid {kid!r}")
        return secrets[kid]

    return provider


def generate_es256():
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return key, pem


def public_jwk(key, kid: str) -> dict:
    from jwt.algorithms import ECAlgorithm

    jwk = ECAlgorithm.to_jwk(key.public_key(), as_dict=True)
    jwk.update({"kid": kid, "alg": "ES256", "use": "sig"})
    return jwk


def write(path: str, data, mode: int = 0o644) -> None:
    text = data if isinstance(data, (str, bytes)) else json.dumps(data, ensure_ascii=False)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    fd = os.open(path, flags, mode)
    with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w", encoding=None if isinstance(text, bytes) else "utf-8") as f:
        f.write(text)
    os.chmod(path, mode)


def tamper(card: dict) -> dict:
    t = copy.deepcopy(card)
    t["description"] = t.get("description", "") + " (tampered)"
    return t


# ------------------------------------------------------------------ cards

# The iac-code worked example (iac-code-upstream.md §4): secret "k", kid "k1".
TINY = {
    "name": "tiny",
    "description": "Tiny card",
    "version": "1.0.0",
    "supportedInterfaces": [
        {"url": "http://127.0.0.1:1/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ],
    "capabilities": {"streaming": True},
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "skills": [],
}
TINY_SIGNATURE = {
    "protected": "eyJhbGciOiJIUzI1NiIsImprdSI6bnVsbCwia2lkIjoiazEiLCJ0eXAiOiJKT1NFIn0",
    "signature": "hTbnUvSkAFFQ2NTkMszqR_H7E8iwhpybvt5_P4NaTAg",
}

# A card that exercises the canonical form: non-ASCII text (UTF-16 key order
# does not matter here, literal UTF-8 does), protobuf Struct doubles
# (1048576.0 -> 1048576, 0.5, 1e-07), empty strings/lists/objects pruned,
# scope-less security requirements, an extension with nested params.
RICH = {
    "name": "Édge-tëst agent ✓",
    "description": "Card signed by the a2a-sdk — non-ASCII: 日本語, emoji 🚀, quote \" backslash \\",
    "version": "2.1.0",
    "supportedInterfaces": [
        {"url": "https://agent.example/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": "https://agent.example/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
    ],
    "provider": {"organization": "Example Ørg", "url": "https://example.org"},
    "iconUrl": "",
    "documentationUrl": "https://example.org/docs",
    "capabilities": {
        "streaming": True,
        "pushNotifications": False,
        "extendedAgentCard": True,
        "extensions": [
            {
                "uri": "urn:example:ext:v1",
                "description": "numbers and nesting",
                "required": False,
                "params": {
                    "maxBatchBytes": 1048576.0,
                    "ratio": 0.5,
                    "tiny": 1e-7,
                    "neg": -3,
                    "zeta": {"b": [1, 2.5, "x", True, None], "a": {}},
                    "empty": "",
                    "list": [],
                },
            }
        ],
    },
    "securitySchemes": {
        "bearerAuth": {"httpAuthSecurityScheme": {"scheme": "bearer", "bearerFormat": "opaque"}},
        "apiKeyAuth": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}},
    },
    "securityRequirements": [
        {"schemes": {"bearerAuth": {"list": []}}},
        {"schemes": {"apiKeyAuth": {"list": [""]}}},
    ],
    "defaultInputModes": ["text/plain", "application/json"],
    "defaultOutputModes": ["text/plain"],
    "skills": [
        {
            "id": "s1",
            "name": "Skill ünø",
            "description": "does things",
            "tags": ["a", "b"],
            "examples": ["do X", ""],
            "inputModes": ["text/plain"],
            "outputModes": [],
        }
    ],
}


# ----------------------------------------------------------------- prepare


def cmd_prepare(a) -> None:
    d = a.dir
    hs_secret = os.environ[a.hs_secret_env]
    cases = []  # (file, expected verdict, verify args)

    # 1. the iac-code worked example: byte-exact signature
    tiny = sdk_sign(TINY, "k", {"alg": "HS256", "typ": "JOSE", "kid": "k1", "jku": None})
    sig = tiny["signatures"][0]
    check(
        "sdk-sign-worked-example",
        sig.get("protected") == TINY_SIGNATURE["protected"]
        and sig.get("signature") == TINY_SIGNATURE["signature"],
        f"SDK signer reproduces iac-code-upstream.md §4: {short(sig)}",
    )
    write(f"{d}/tiny.json", tiny)
    write(f"{d}/tiny-tampered.json", tamper(tiny))
    write(f"{d}/tiny-urlchanged.json", {**tiny, "url": "http://evil.example/"})
    cases += [
        ("tiny.json", "valid", f"--secret k1={a.k_env}"),
        ("tiny-tampered.json", "signature-mismatch", f"--secret k1={a.k_env}"),
        # legacy `url` is not a proto field: not covered by the SDK's canonical form
        ("tiny-urlchanged.json", "valid", f"--secret k1={a.k_env}"),
        ("tiny.json", "unknown-key", f"--secret other={a.k_env}"),
        ("tiny.json", "signature-mismatch", f"--secret k1={a.hs_secret_env}"),
    ]

    # 2. HS256 with a 32+ byte secret, SDK header without jku
    for name, card in (("tiny", TINY), ("rich", RICH)):
        hs = sdk_sign(card, hs_secret, {"alg": "HS256", "typ": "JOSE", "kid": "hs-1"})
        write(f"{d}/{name}-hs256.json", hs)
        write(f"{d}/{name}-hs256-tampered.json", tamper(hs))
        cases += [
            (f"{name}-hs256.json", "valid", f"--secret hs-1={a.hs_secret_env}"),
            (f"{name}-hs256-tampered.json", "signature-mismatch", f"--secret hs-1={a.hs_secret_env}"),
        ]

    # 3. ES256 with a generated key, jku in the header (a2a-edge must not follow it)
    key, pem = generate_es256()
    write(f"{d}/es256.pem", pem, 0o600)
    jwks = {"keys": [public_jwk(key, "es-1")]}
    write(f"{d}/es256-jwks.json", jwks)
    other, _ = generate_es256()
    write(f"{d}/other-jwks.json", {"keys": [public_jwk(other, "es-1")]})
    header = {"alg": "ES256", "typ": "JOSE", "kid": "es-1", "jku": "https://keys.invalid/jwks.json"}
    for name, card in (("tiny", TINY), ("rich", RICH)):
        es = sdk_sign(card, pem, header)
        write(f"{d}/{name}-es256.json", es)
        write(f"{d}/{name}-es256-tampered.json", tamper(es))
        cases += [
            (f"{name}-es256.json", "valid", f"--jwks {d}/es256-jwks.json"),
            (f"{name}-es256-tampered.json", "signature-mismatch", f"--jwks {d}/es256-jwks.json"),
        ]
    cases.append(("rich-es256.json", "signature-mismatch", f"--jwks {d}/other-jwks.json"))

    # 3b. what a server may really serve: the raw JSON (unknown and legacy
    # fields, proto defaults, empty values) with the signature the SDK made
    # over its parsed form; verifiers must parse before canonicalizing
    raw = copy.deepcopy(RICH)
    raw.update({"x-vendor": {"note": "unknown field"}, "url": "https://agent.example/a2a",
                "preferredTransport": "JSONRPC", "protocolVersion": "1.0"})
    raw["capabilities"]["extensions"][0]["required"] = False
    raw["signatures"] = sdk_sign(RICH, pem, header)["signatures"]
    write(f"{d}/raw-es256.json", raw)
    write(f"{d}/raw-es256-tampered.json", tamper(raw))
    cases += [
        ("raw-es256.json", "valid", f"--jwks {d}/es256-jwks.json"),
        ("raw-es256-tampered.json", "signature-mismatch", f"--jwks {d}/es256-jwks.json"),
    ]
    write(f"{d}/raw-unsigned.json", RICH)

    # 4. two signatures (HS256 of an unknown kid first, then ES256): any valid one suffices
    both = sdk_sign(RICH, hs_secret, {"alg": "HS256", "typ": "JOSE", "kid": "nobody"})
    _, signing, MessageToDict = sdk()
    from a2a.client.card_resolver import parse_agent_card

    parsed = parse_agent_card(copy.deepcopy(both))
    signing.create_agent_card_signer(pem, header)(parsed)
    both = MessageToDict(parsed)
    write(f"{d}/rich-two-sigs.json", both)
    cases.append(("rich-two-sigs.json", "valid", f"--jwks {d}/es256-jwks.json"))

    # the SDK itself agrees on every SDK-signed file
    sdk_checks = [
        ("tiny.json", secret_provider({"k1": "k"}), ["HS256"], "valid"),
        ("rich-hs256.json", secret_provider({"hs-1": hs_secret}), ["HS256"], "valid"),
        ("rich-es256.json", jwks_provider(jwks), ["ES256"], "valid"),
        ("rich-es256-tampered.json", jwks_provider(jwks), ["ES256"], "InvalidSignaturesError"),
        ("raw-es256.json", jwks_provider(jwks), ["ES256"], "valid"),
        ("rich-two-sigs.json", jwks_provider(jwks), ["ES256"], "valid"),
    ]
    for f, prov, algs, want in sdk_checks:
        got = sdk_verify(json.load(open(f"{d}/{f}", encoding="utf-8")), prov, algs)
        check(f"sdk-self-verify {f}", got.startswith(want), got)

    with open(f"{d}/cases.tsv", "w", encoding="utf-8") as f:
        for c in cases:
            f.write("\t".join(c) + "\n")


# ------------------------------------------------------------------ verify


def cmd_verify(a) -> None:
    secrets = {}
    for s in a.secret_env or []:
        kid, _, env = s.partition("=")
        secrets[kid] = os.environ[env]
    jwks = json.load(open(a.jwks, encoding="utf-8")) if a.jwks else None
    for path in a.files:
        card = json.load(open(path, encoding="utf-8"))
        name = os.path.basename(path)
        sigs = card.get("signatures") or []
        if not check(f"sdk-verify-edge-signed {name}", len(sigs) == 1, f"{len(sigs)} signature(s)"):
            continue
        hdr = b64url_json(sigs[0]["protected"])
        alg = hdr.get("alg")
        prov = jwks_provider(jwks) if alg != "HS256" else secret_provider(secrets)
        got = sdk_verify(card, prov, [alg])
        check(f"sdk-verify-edge-signed {name}", got == "valid", f"{got}; protected {json.dumps(hdr)}")
        got = sdk_verify(tamper(card), prov, [alg])
        check(f"sdk-verify-edge-signed-tampered {name}", got.startswith("InvalidSignaturesError"), got)


# ------------------------------------------------------------------ served


def ssl_ctx(ca: str):
    import ssl

    return ssl.create_default_context(cafile=ca)


def cmd_served(a) -> None:
    import asyncio

    asyncio.run(served(a))


async def served(a) -> None:
    import email.utils
    from urllib.parse import urlsplit

    import httpx
    from a2a.client.card_resolver import A2ACardResolver

    label = a.label
    public = a.url
    u = urlsplit(public)
    origin = f"{u.scheme}://{u.netloc}"
    card_url = origin + "/.well-known/agent-card.json"
    jwks_url = origin + "/.well-known/jwks.json"
    ctx = ssl_ctx(a.ca)

    async with httpx.AsyncClient(verify=ctx, timeout=10, trust_env=False) as http:
        # -- raw fetch: headers, bytes
        r = await http.get(card_url)
        if not check(f"{label} card-200", r.status_code == 200, f"GET {card_url} -> {r.status_code} {short(r.text, 200)}"):
            return
        body = r.content
        card = r.json()
        etag, cc, lm = r.headers.get("etag"), r.headers.get("cache-control"), r.headers.get("last-modified")
        check(
            f"{label} card-cache-headers",
            bool(etag and etag.startswith('"') and etag.endswith('"') and cc and "max-age=" in cc and lm and email.utils.parsedate_to_datetime(lm)),
            f"ETag: {etag}; Cache-Control: {cc}; Last-Modified: {lm}; Content-Type: {r.headers.get('content-type')}",
        )
        r304 = await http.get(card_url, headers={"If-None-Match": etag or '"none"'})
        check(
            f"{label} card-if-none-match-304",
            r304.status_code == 304 and r304.content == b"" and r304.headers.get("etag") == etag,
            f"If-None-Match: {etag} -> {r304.status_code}, body {len(r304.content)} B, ETag {r304.headers.get('etag')}",
        )
        r200 = await http.get(card_url, headers={"If-None-Match": '"sha256-other"'})
        check(f"{label} card-if-none-match-other-200", r200.status_code == 200, f"other ETag -> {r200.status_code}")
        again = await http.get(card_url)
        check(
            f"{label} card-stable-bytes",
            again.content == body and again.headers.get("etag") == etag,
            "second GET: same bytes and ETag" if again.content == body else "second GET: bytes changed",
        )

        # -- the card points at the edge only
        ifaces = card.get("supportedInterfaces") or []
        check(
            f"{label} card-url",
            len(ifaces) == 1 and ifaces[0].get("url") == public and ifaces[0].get("protocolBinding") == "JSONRPC",
            f"supportedInterfaces = {short(ifaces)}",
        )
        if a.internal:
            text = body.decode("utf-8")
            leaks = [s for s in (a.internal, "http://") if s in text]
            check(f"{label} card-no-internal-address", not leaks, f"absent: {a.internal!r}, 'http://'" if not leaks else f"found {leaks}")
            if "url" in card:
                check(f"{label} card-legacy-url", card["url"] == public, f"legacy url = {card['url']}")

        # -- the signature header
        sigs = card.get("signatures") or []
        if not check(f"{label} card-signed", len(sigs) == 1, f"{len(sigs)} signature(s)"):
            return
        hdr = b64url_json(sigs[0]["protected"])
        check(
            f"{label} card-protected-header",
            hdr.get("alg") == a.alg and hdr.get("kid") == a.kid and hdr.get("typ") == "JOSE",
            f"protected = {json.dumps(hdr)}" + (f", unprotected = {json.dumps(sigs[0]['header'])}" if "header" in sigs[0] else ""),
        )

        # -- the JWKS
        rj = await http.get(jwks_url)
        jwks = None
        if a.alg == "HS256":
            secret = os.environ[a.secret_env]
            ok = secret not in rj.text and '"k"' not in rj.text and '"oct"' not in rj.text
            if rj.status_code == 200:
                ok = ok and not rj.json().get("keys")
            check(f"{label} jwks-no-secret", ok, f"GET /.well-known/jwks.json -> {rj.status_code} {short(rj.text, 160)}")
        else:
            ok = rj.status_code == 200
            if ok:
                jwks = rj.json()
                keys = jwks.get("keys") or []
                mine = [k for k in keys if k.get("kid") == a.kid]
                ok = len(mine) == 1 and mine[0].get("kty") == "EC" and mine[0].get("crv") == "P-256" and not any("d" in k or "k" in k for k in keys)
            check(
                f"{label} jwks",
                ok,
                f"GET {jwks_url} -> {rj.status_code}, Cache-Control: {rj.headers.get('cache-control')}, {short(rj.text, 260)}",
            )

        # -- the a2a-sdk verifier, through the SDK's own card resolver
        seen: list = []
        if a.alg == "HS256":
            provider = secret_provider({a.kid: os.environ[a.secret_env]}, seen)
        else:
            provider = jku_provider(origin, jwks_url, a.ca, seen)
        from a2a.utils.signing import SignatureVerificationError, create_signature_verifier

        verifier = create_signature_verifier(provider, [a.alg])
        resolver = A2ACardResolver(http, origin)
        try:
            parsed = await resolver.get_agent_card(signature_verifier=verifier)
            check(
                f"{label} sdk-verify",
                True,
                f"A2ACardResolver.get_agent_card(signature_verifier=create_signature_verifier(..., ['{a.alg}'])) accepted "
                f"'{parsed.name}'; key_provider called with {seen}",
            )
        except Exception as e:  # noqa: BLE001
            if DEBUG:
                traceback.print_exc()
            check(f"{label} sdk-verify", False, f"{type(e).__name__}: {e}; key_provider called with {seen}")

        # -- negative controls with the same SDK verifier
        got = sdk_verify(tamper(card), provider, [a.alg])
        check(f"{label} sdk-verify-tampered", got.startswith("InvalidSignaturesError"), f"description changed -> {got}")
        if a.alg == "HS256":
            wrong = secret_provider({a.kid: os.environ[a.secret_env] + "x"})
        else:
            other, _ = generate_es256()
            wrong = jwks_provider({"keys": [public_jwk(other, a.kid)]})
        got = sdk_verify(card, wrong, [a.alg])
        check(f"{label} sdk-verify-wrong-key", got.startswith("InvalidSignaturesError"), f"other key -> {got}")
        other_alg = "RS256" if a.alg != "RS256" else "ES256"
        got = sdk_verify(card, provider, [other_alg])
        check(f"{label} sdk-verify-alg-allowlist", got.startswith("InvalidSignaturesError"), f"algorithms=['{other_alg}'] -> {got}")

    if a.save:
        write(a.save, body.decode("utf-8"))


def jku_provider(origin: str, default_url: str, ca: str, seen: list):
    """The SDK's intended flow: key_provider(kid, jku) fetches the key set,
    from the header's jku when present (only on the edge's own origin), else
    from the well-known JWKS of the origin."""
    import httpx
    from jwt import PyJWK
    from jwt.exceptions import InvalidKeyError

    def provider(kid, jku):
        url = jku or default_url
        seen.append((kid, url))
        if not url.startswith(origin + "/"):
            raise InvalidKeyError(f"jku {url} is not on {origin}")
        with httpx.Client(verify=ssl_ctx(ca), timeout=10, trust_env=False) as c:
            r = c.get(url)
            r.raise_for_status()
            for k in r.json().get("keys", []):
                if k.get("kid") == kid:
                    return PyJWK(k)
        raise InvalidKeyError(f"no key {kid!r} at {url}")

    return provider


# ---------------------------------------------------------------- upstream


def cmd_upstream(a) -> None:
    import httpx

    r = httpx.get(
        a.url.rstrip("/") + "/.well-known/agent-card.json",
        headers={"Authorization": "Bearer " + os.environ[a.token_env]},
        timeout=10,
        trust_env=False,
    )
    if not check("iac-card-direct", r.status_code == 200, f"iac-code GET card (its token) -> {r.status_code}"):
        return
    card = r.json()
    write(a.save, r.text)
    sigs = card.get("signatures") or []
    if not sigs:
        print(f"UNSIGNED iac-code's card carries no signatures (keys: {sorted(card)})")
        return
    hdr = b64url_json(sigs[0]["protected"])
    say("NOTE", "iac-card-header", f"protected = {json.dumps(hdr)}, signature entry keys {sorted(sigs[0])}")
    got = sdk_verify(card, secret_provider({"default": os.environ[a.secret_env]}), ["HS256"])
    check("iac-card-sdk-1.3.0-verify", got == "valid", f"iac-code's own signature (a2a-sdk 1.2.0 signer) with the 1.3.0 verifier: {got}")


def cmd_genkey(a) -> None:
    _, pem = generate_es256()
    write(a.out, pem, 0o600)
    check("genkey", True, f"ES256 (P-256) private key, PKCS#8 PEM, mode 0600: {os.path.basename(a.out)}")


def cmd_status(a) -> None:
    import httpx

    with httpx.Client(verify=ssl_ctx(a.ca), timeout=10, trust_env=False) as c:
        r = c.get(a.url)
        print(r.status_code, r.text[:300].replace("\n", " "))


def main() -> int:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("prepare")
    s.add_argument("dir")
    s.add_argument("--hs-secret-env", required=True)
    s.add_argument("--k-env", required=True, help="env var holding the worked example's secret 'k'")
    s = sub.add_parser("verify")
    s.add_argument("files", nargs="+")
    s.add_argument("--secret-env", action="append")
    s.add_argument("--jwks")
    s = sub.add_parser("served")
    s.add_argument("--label", required=True)
    s.add_argument("--url", required=True, help="the edge's public_url")
    s.add_argument("--ca", required=True)
    s.add_argument("--alg", required=True, choices=["HS256", "ES256", "RS256", "EdDSA"])
    s.add_argument("--kid", required=True)
    s.add_argument("--secret-env")
    s.add_argument("--internal", help="a string (the agent's host:port) that must not appear")
    s.add_argument("--save")
    s = sub.add_parser("upstream")
    s.add_argument("--url", required=True)
    s.add_argument("--token-env", required=True)
    s.add_argument("--secret-env", required=True)
    s.add_argument("--save", required=True)
    s = sub.add_parser("genkey")
    s.add_argument("out")
    s = sub.add_parser("status")
    s.add_argument("url")
    s.add_argument("--ca", required=True)
    a = p.parse_args()
    try:
        {"prepare": cmd_prepare, "verify": cmd_verify, "served": cmd_served, "upstream": cmd_upstream, "genkey": cmd_genkey, "status": cmd_status}[a.cmd](a)
    except Exception as e:  # noqa: BLE001
        if DEBUG:
            traceback.print_exc()
        say("FAIL", f"{a.cmd}-error", f"{type(e).__name__}: {e}")
    return 1 if NFAIL else 0


if __name__ == "__main__":
    sys.exit(main())
