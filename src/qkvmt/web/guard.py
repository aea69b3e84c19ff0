"""Who qkvmt's servers answer (the explorer, qkvmt serve): requests to the address they printed.

A server on 127.0.0.1 is within reach of every web page its user visits. Such a page can send it
cross-site "simple" requests (a form, a text/plain fetch: no preflight asks first), and, by
rebinding its own host name to 127.0.0.1 (DNS rebinding), even read the answers. So, as Jupyter
does, a server refuses (403, the app's JSON error):

- a Host that is not the address it was started on (127.0.0.1, localhost, [::1] or the host=
  given, with its port): a rebound name still says the attacker's host. A loopback name on
  another port is answered: only this computer can send it (an SSH tunnel, `ssh -L 9000:...`);
- a POST whose Origin is not the server's own (web.json_api also takes application/json only, which
  no form sends and no cross-site fetch sends unasked);
- served beyond this computer (host= not loopback), a request without its random token: the
  printed address carries it once, the first visit trades it for a cookie and drops it from the
  address bar, and the page's own fetches send the cookie; a program sends it as ?token= on each
  request.
"""

import ipaddress
import re
import secrets
import socket
from dataclasses import dataclass

LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
SAFE = ("GET", "HEAD", "OPTIONS")  # methods that only read: the Origin check is for the others


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def is_wildcard(host: str) -> bool:
    """0.0.0.0, :: or "": every address of the machine, so no one name the browser will use."""
    try:
        return host == "" or ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def netloc(host: str) -> str:
    """The host as a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


@dataclass(frozen=True)
class Access:
    """What a request must carry to be answered."""

    port: int
    hosts: frozenset[str] | None  # the Host headers answered; None: any (a wildcard address: the token guards it)
    token: str | None  # None: this computer alone, no token, and its names answered on any port

    @classmethod
    def of(cls, host: str, port: int) -> "Access":
        """Access to a server started on host:port (its real port, once bound)."""
        host = host.lower()
        if is_loopback(host):
            names, token = {*LOOPBACK, netloc(host)}, None
        else:
            names, token = (None if is_wildcard(host) else {netloc(host)}), secrets.token_urlsafe(32)
        if names is not None:  # a browser leaves out port 80
            names = {f"{n}:{port}" for n in names} | (names if port == 80 else set())
        return cls(port, None if names is None else frozenset(names), token)

    @property
    def cookie(self) -> str:
        # one per port: browsers share a host's cookies across its ports
        return f"qkvmt-{self.port}"

    def url(self, host: str, path: str = "/") -> str:
        """The address to open, with the token when there is one; on a wildcard address, by the
        machine's name, which others on its network can reach (0.0.0.0 names no machine to them)."""
        shown = socket.gethostname() if is_wildcard(host) else host
        return f"http://{netloc(shown)}:{self.port}{path}" + (f"?token={self.token}" if self.token else "")

    def warning(self, host: str) -> str | None:
        """What a server off loopback says first (None on loopback)."""
        if self.token is None:
            return None
        return (
            f"warning: host={host} serves anyone who can reach this machine on port {self.port} and has the token in "
            "the address below (sent unencrypted, over plain HTTP); requests without it are refused. Leave host= out "
            "to serve this computer alone (127.0.0.1)"
        )

    def has_token(self, given: str | None) -> bool:
        return given is not None and secrets.compare_digest(given.encode(), self.token.encode())


class Guard:
    """ASGI middleware: a request `access` refuses gets `refuse(message, 403)`; the others go on to `app`.
    pages=False (an API, qkvmt serve): a GET with the token is answered, not traded for a cookie, since
    a program that follows the redirect without keeping cookies would then be refused."""

    def __init__(self, app, access: Access, refuse, pages: bool = True):
        self.app, self.access, self.refuse, self.pages = app, access, refuse, pages

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            from starlette.requests import Request

            answer = self.check(Request(scope))
            if answer is not None:
                return await answer(scope, receive, send)
        await self.app(scope, receive, send)

    def check(self, request):
        """None to serve the request, else the response that refuses it (or trades the token for a cookie)."""
        a = self.access
        host = request.headers.get("host", "").lower()
        if a.token is None:  # loopback: a tunnel or proxy on this computer may use another port
            name = re.sub(r":\d+$", "", host)
            answered = name in LOOPBACK or f"{name}:{a.port}" in a.hosts
        else:
            answered = a.hosts is None or host in a.hosts
        if not answered:
            return self.refuse(f"Host {host!r} is not this server's address: use the address the server printed", 403)
        if a.token is not None:
            in_url = a.has_token(request.query_params.get("token"))
            if in_url and request.method == "GET" and self.pages:
                from starlette.responses import RedirectResponse

                answer = RedirectResponse(request.url.path, 303)  # the token leaves the address bar and history
                answer.set_cookie(a.cookie, a.token, httponly=True, samesite="lax")
                return answer
            if not (in_url or a.has_token(request.cookies.get(a.cookie))):
                return self.refuse(
                    "this server serves beyond this computer and needs its token: use the address "
                    "with ?token= that it printed",
                    403,
                )
        origin = request.headers.get("origin")
        if request.method not in SAFE and origin is not None and origin.lower() != f"http://{host}":
            return self.refuse(
                f"Origin {origin!r} is not this server's page: requests from other sites are refused", 403
            )
        return None
