"""Plumbing shared by the interop clients (sdk_client.py, iac_code_client.py).

- `Checks`: runs named checks and prints one line per check, counting them:

      PASS name: detail [ms]      FAIL name: why [ms]
      SKIP name: why              NOTE name: observation

  A check is a function (`check`) or a coroutine function (`acheck`) that returns the PASS
  detail (or None for "ok"), raises `CheckFailed` (see `expect`) for a FAIL or `Skipped` for a
  SKIP; any other exception is a FAIL too (with a traceback on stderr when INTEROP_DEBUG is set).
- `Checks.http_options`: the arguments of an httpx client (sync or async) for the proxy: TLS
  trusting only the given CA, the caller's token, a timeout.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import time
import traceback

from collections.abc import Awaitable, Callable
from typing import Any

import httpx


class CheckFailed(Exception):
    """A check's expectation did not hold: FAIL."""


class Skipped(Exception):
    """A check that does not apply here: SKIP."""


def expect(cond: object, msg: str) -> None:
    if not cond:
        raise CheckFailed(msg)


class Checks:
    # "timed out after N s" for a coroutine check that takes longer (None: no limit)
    check_timeout_s: float | None = None
    # FAIL lines of unexpected exceptions name the exception's cause too
    show_cause = False

    def __init__(self, ca: str) -> None:
        self.ssl_ctx = ssl.create_default_context(cafile=ca)
        self.passed = self.failed = self.skipped = 0

    def http_options(
        self,
        token: str | None,
        *,
        timeout_s: float,
        auth_header: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """httpx.Client / httpx.AsyncClient arguments: trust the CA; send `headers` and the
        token (None: none) as `Authorization: Bearer <token>`, or in the API-key header
        `auth_header`."""
        h = dict(headers or {})
        if token is not None:
            if auth_header:
                h[auth_header] = token
            else:
                h['Authorization'] = f'Bearer {token}'
        return {'verify': self.ssl_ctx, 'headers': h, 'timeout': httpx.Timeout(timeout_s)}

    # -- running checks ---------------------------------------------------

    def check(self, name: str, fn: Callable[[], str | None]) -> bool:
        t0 = time.monotonic()
        try:
            detail = fn()
        except Exception as e:  # noqa: BLE001
            return self._failed(name, e, t0)
        return self._passed(name, detail, t0)

    async def acheck(self, name: str, fn: Callable[[], Awaitable[str | None]]) -> bool:
        t0 = time.monotonic()
        try:
            detail = await asyncio.wait_for(fn(), self.check_timeout_s)
        except asyncio.TimeoutError:
            self._fail(name, f'timed out after {self.check_timeout_s:.0f}s', t0)
            return False
        except Exception as e:  # noqa: BLE001
            return self._failed(name, e, t0)
        return self._passed(name, detail, t0)

    def _passed(self, name: str, detail: str | None, t0: float) -> bool:
        ms = (time.monotonic() - t0) * 1000
        self.passed += 1
        print(f'PASS {name}: {detail or "ok"} [{ms:.0f} ms]', flush=True)
        return True

    def _failed(self, name: str, e: Exception, t0: float) -> bool:
        """SKIP or FAIL for the exception `e` (called while it is being handled)."""
        if isinstance(e, Skipped):
            self.skipped += 1
            print(f'SKIP {name}: {e}', flush=True)
        elif isinstance(e, CheckFailed):
            self._fail(name, str(e), t0)
        else:
            cause = f' (cause: {e.__cause__!r})' if self.show_cause and e.__cause__ else ''
            self._fail(name, f'{type(e).__name__}: {e}{cause}', t0)
            if os.environ.get('INTEROP_DEBUG'):
                traceback.print_exc()
        return False

    def _fail(self, name: str, msg: str, t0: float) -> None:
        ms = (time.monotonic() - t0) * 1000
        self.failed += 1
        print(f'FAIL {name}: {msg} [{ms:.0f} ms]', flush=True)

    @staticmethod
    def note(name: str, text: str) -> None:
        print(f'NOTE {name}: {text}', flush=True)


def env_secret(var: str) -> str | None:
    """The secret in the environment variable `var`, or None after a `FAIL setup` line."""
    value = os.environ.get(var, '')
    if not value:
        print(f'FAIL setup: ${var} is empty', flush=True)
        return None
    return value
