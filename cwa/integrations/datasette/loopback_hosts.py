"""A Datasette plugin that `cwa browse` loads (`--plugins-dir`): only a request whose `Host`
names a loopback address is answered. The server listens on 127.0.0.1 only, but a web page on a
name its attacker points at 127.0.0.1 (DNS rebinding) would otherwise reach it with the browser's
help and read the archive; such a request names the attacker's host and gets 403."""

from __future__ import annotations

from typing import Any

from datasette import hookimpl

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
REFUSAL = b"cwa browse answers only requests addressed to 127.0.0.1 or localhost\n"


def loopback_host(host: bytes | None) -> bool:
    """Whether a `Host` header value names a loopback address (any port)."""
    if not host:
        return False
    name = host.decode("latin-1").strip().lower()
    if name.startswith("["):  # [::1]:8001
        name = name[: name.find("]") + 1]
    elif ":" in name:
        name = name.rsplit(":", 1)[0]
    return name in LOOPBACK_NAMES


@hookimpl
def asgi_wrapper(datasette: Any):
    def wrap(app):
        async def loopback_only(scope, receive, send):
            if scope["type"] in ("http", "websocket") and not loopback_host(
                dict(scope.get("headers") or ()).get(b"host")
            ):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 403,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8")],
                    }
                )
                await send({"type": "http.response.body", "body": REFUSAL})
                return
            await app(scope, receive, send)

        return loopback_only

    return wrap
