"""Who the explorer answers, over HTTP: requests naming another host (DNS rebinding), POSTs from
another site's page, bodies not sent as JSON, and, served beyond this computer, requests without
its token are refused with the app's JSON error and never reach the model; its own page's
requests are answered. TestClient for each case, and a real socket for what a browser cannot
fake but a raw client can send (no Host at all)."""

import http.client
import json
import socket

import pytest

from qkvmt.explore.app import create_app
from qkvmt.web.guard import Access, is_loopback
from tests.explore.conftest import serving

PORT = 8123  # TestClient opens no socket: the port the server would have been started on
OWN = f"127.0.0.1:{PORT}"
JSON = {"content-type": "application/json"}


class Echo:
    """An explorer that answers what it was asked and remembers it: a refusal must leave it unasked."""

    def __init__(self):
        self.asked = []

    def page(self):
        return "<p>the page</p>"

    def sentence(self, body):
        self.asked.append(body)
        return {"source": body["source"]}

    align = inspect = curves = intervene = lens = signal = sentence


def client(access: Access, host: str = OWN):
    from starlette.testclient import TestClient

    echo = Echo()
    return TestClient(create_app(echo, access), base_url=f"http://{host}", follow_redirects=False), echo


def refused(r, status: int, message: str) -> None:
    assert r.status_code == status and r.headers["content-type"] == "application/json"
    error = r.json()["error"]
    assert message in error and "\n" not in error


@pytest.mark.parametrize(
    "host,loopback",
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("192.168.1.5", False),
        ("example.org", False),
    ],
)
def test_which_hosts_serve_this_computer_alone(host, loopback):
    assert is_loopback(host) is loopback
    assert (Access.of(host, PORT).token is None) is loopback  # beyond this computer, a token


def test_the_hosts_answered_are_the_servers_own_addresses_with_its_port():
    assert Access.of("127.0.0.1", PORT).hosts == {f"127.0.0.1:{PORT}", f"localhost:{PORT}", f"[::1]:{PORT}"}
    assert Access.of("::1", PORT).hosts == {f"127.0.0.1:{PORT}", f"localhost:{PORT}", f"[::1]:{PORT}"}
    assert Access.of("192.168.1.5", PORT).hosts == {f"192.168.1.5:{PORT}"}
    assert Access.of("0.0.0.0", PORT).hosts is None  # every address: the token alone guards it
    assert "localhost" in Access.of("localhost", 80).hosts  # a browser leaves out port 80
    tokens = {Access.of("0.0.0.0", PORT).token for _ in range(3)}
    assert len(tokens) == 3 and all(len(t) >= 40 for t in tokens)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", ""])
def test_a_server_on_every_address_prints_the_machines_name_not_the_wildcard(host):
    access = Access.of(host, PORT)
    assert access.url(host, "/translate") == f"http://{socket.gethostname()}:{PORT}/translate?token={access.token}"
    assert Access.of("192.168.1.5", PORT).url("192.168.1.5").startswith(f"http://192.168.1.5:{PORT}/?token=")


@pytest.mark.parametrize(
    "host",
    [
        "evil.example:8123",
        "evil.example",
        "127.0.0.1.evil.example:8123",
        "127.0.0.1:8123@evil.example",
        "localhost.evil.example:8123",
    ],
)
def test_a_host_that_is_not_the_servers_address_is_refused(host):
    """A rebound name says the attacker's host, whatever port."""
    c, echo = client(Access.of("127.0.0.1", PORT))
    refused(c.get("/", headers={"host": host}), 403, "is not this server's address")
    refused(c.post("/api/sentence", json={"source": "w3"}, headers={"host": host}), 403, "is not this server's address")
    assert echo.asked == []


@pytest.mark.parametrize(
    "host",
    [
        f"127.0.0.1:{PORT}",
        f"localhost:{PORT}",
        f"[::1]:{PORT}",
        f"LocalHost:{PORT}",
        "localhost:9000",
        "127.0.0.1",
        "[::1]:9000",
    ],
)  # the last three: an SSH tunnel's port
def test_the_servers_own_host_is_answered(host):
    c, echo = client(Access.of("127.0.0.1", PORT), host)
    assert c.get("/").text == "<p>the page</p>"
    assert c.post("/api/sentence", json={"source": "w3"}).json() == {"source": "w3"}
    assert echo.asked == [{"source": "w3"}]


@pytest.mark.parametrize(
    "origin",
    ["http://evil.example", "null", f"http://127.0.0.1:{PORT + 1}", f"https://{OWN}", f"http://localhost:{PORT}"],
)
def test_a_post_from_another_sites_page_is_refused(origin):
    c, echo = client(Access.of("127.0.0.1", PORT))
    refused(
        c.post("/api/sentence", json={"source": "w3"}, headers={"origin": origin}), 403, "requests from other sites"
    )
    # the issue's "simple" request: no preflight, so only the server can stop it
    refused(
        c.post("/api/sentence", content=b'{"source": "w3"}', headers={"origin": origin, "content-type": "text/plain"}),
        403,
        "requests from other sites",
    )
    assert echo.asked == []
    assert c.get("/", headers={"origin": origin}).status_code == 200  # a GET reads the page only: no Origin check


def test_a_post_from_its_own_page_or_with_no_origin_is_answered():
    c, echo = client(Access.of("127.0.0.1", PORT))
    assert c.post("/api/sentence", json={"source": "a"}, headers={"origin": f"http://{OWN}"}).status_code == 200
    assert c.post("/api/align", json={"source": "b"}).status_code == 200  # curl, a script: no Origin
    assert echo.asked == [{"source": "a"}, {"source": "b"}]


@pytest.mark.parametrize(
    "media", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None]
)
def test_a_body_not_sent_as_json_is_refused(media):
    c, echo = client(Access.of("127.0.0.1", PORT))
    headers = {} if media is None else {"content-type": media}
    refused(
        c.post("/api/inspect", content=b'{"source": "w3"}', headers=headers), 415, "send the body as application/json"
    )
    assert echo.asked == []
    ok = c.post(
        "/api/inspect", content=b'{"source": "w3"}', headers={"content-type": "Application/JSON; charset=utf-8"}
    )
    assert ok.status_code == 200


def test_beyond_this_computer_every_request_needs_the_token():
    access = Access.of("0.0.0.0", PORT)
    c, echo = client(access, f"mybox:{PORT}")
    cookie = f"{access.cookie}={access.token}"
    for wrong in ({}, {"token": "x" * 43}, {"token": "ä"}, {"token": ""}):
        refused(c.get("/", params=wrong), 403, "needs its token")
        refused(c.post("/api/sentence", params=wrong, json={"source": "w3"}), 403, "needs its token")
    refused(
        c.post("/api/sentence", json={"source": "w3"}, headers={"cookie": f"{access.cookie}=wrong"}),
        403,
        "needs its token",
    )
    other_port = Access.of("0.0.0.0", PORT + 1).cookie
    refused(
        c.post("/api/sentence", json={"source": "w3"}, headers={"cookie": f"{other_port}={access.token}"}),
        403,
        "needs its token",
    )
    assert echo.asked == []

    opened = c.get("/", params={"token": access.token})  # the printed address, once
    assert opened.status_code == 303 and opened.headers["location"] == "/"
    set_cookie = opened.headers["set-cookie"].lower()
    assert set_cookie.startswith(cookie.lower()) and "httponly" in set_cookie and "samesite=lax" in set_cookie
    c.cookies.clear()  # from here on, the cookie is sent by hand
    assert c.get("/", headers={"cookie": cookie}).text == "<p>the page</p>"
    assert c.post("/api/sentence", json={"source": "a"}, headers={"cookie": cookie}).status_code == 200
    assert c.post("/api/sentence", params={"token": access.token}, json={"source": "b"}).status_code == 200  # a script
    assert echo.asked == [{"source": "a"}, {"source": "b"}]
    refused(
        c.post("/api/sentence", json={"source": "c"}, headers={"cookie": cookie, "origin": "http://evil.example"}),
        403,
        "requests from other sites",
    )  # the token does not let other sites in


def test_beyond_this_computer_on_one_address_other_hosts_are_refused_even_with_the_token():
    access = Access.of("192.168.1.5", PORT)
    c, echo = client(access, f"evil.example:{PORT}")
    refused(c.get("/", params={"token": access.token}), 403, "is not this server's address")
    c, echo = client(access, f"192.168.1.5:{PORT}")
    assert c.get("/", params={"token": access.token}).status_code == 303


def ask(port: int, method: str, path: str, headers: dict, body: bytes = b"", version: str = "HTTP/1.1"):
    """One raw request on a real socket, the headers exactly as given: (status, JSON body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn._http_vsn_str = version
    conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    for name, value in headers.items():
        conn.putheader(name, value)
    conn.endheaders(body or None)
    r = conn.getresponse()
    status, text = r.status, r.read()
    conn.close()
    return status, json.loads(text) if r.getheader("content-type") == "application/json" else text


def test_on_a_real_socket_the_issues_requests_are_refused_and_the_pages_answered():
    echo = Echo()
    with serving(echo) as url:
        port = int(url.rsplit(":", 1)[1].strip("/"))
        own, body = f"127.0.0.1:{port}", b'{"source": "w3"}'
        sent = {"content-type": "application/json", "content-length": str(len(body))}
        status, answer = ask(port, "POST", "/api/sentence", {"host": f"evil.example:{port}"} | sent, body)
        assert status == 403 and "is not this server's address" in answer["error"]
        status, answer = ask(
            port,
            "POST",
            "/api/sentence",
            {"host": own, "origin": "http://evil.example"} | sent | {"content-type": "text/plain"},
            body,
        )
        assert status == 403 and "requests from other sites" in answer["error"]
        status, answer = ask(port, "GET", "/", {}, version="HTTP/1.0")  # no Host at all
        assert status == 403 and "is not this server's address" in answer["error"]
        assert echo.asked == []
        status, answer = ask(port, "POST", "/api/sentence", {"host": own, "origin": f"http://{own}"} | sent, body)
        assert status == 200 and answer == {"source": "w3"} and echo.asked == [{"source": "w3"}]
