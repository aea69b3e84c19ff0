"""The serving stage's clients, in a process of their own, as a server's clients are: threads
of the server's own process would take its interpreter lock between the decoding's operators.
Standard library only, so the process starts light.

    python -m qkvmt.bench.http_clients

reads one JSON line, {"port", "sources", "clients", "per_request"}, then answers each "go" line
with one JSON line, {"translations": [...]} in order or {"error": message}, until its input ends.
"""

import http.client
import json
import queue
import sys
from concurrent.futures import ThreadPoolExecutor


def clients(port: int, sources: list[str], n_clients: int, per_request: int) -> list[str]:
    """`sources` translated by `n_clients` threads, each taking the next request of
    `per_request` sentences until none is left; the translations in order."""
    todo: queue.SimpleQueue = queue.SimpleQueue()
    for start in range(0, len(sources), per_request):
        todo.put(start)
    out: list[str | None] = [None] * len(sources)

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        try:
            while True:
                try:
                    start = todo.get_nowait()
                except queue.Empty:
                    return
                chunk = sources[start : start + per_request]
                body = json.dumps({"sentences": chunk})
                conn.request("POST", "/translate", body, {"Content-Type": "application/json"})
                answer = conn.getresponse()
                body = answer.read()
                if answer.status != 200:
                    raise RuntimeError(f"the server answered {answer.status}: {body.decode(errors='replace')}")
                out[start : start + len(chunk)] = json.loads(body)["translations"]
        finally:
            conn.close()

    with ThreadPoolExecutor(n_clients) as pool:
        for done in [pool.submit(client) for _ in range(n_clients)]:
            done.result()
    return out


def main() -> None:
    job = json.loads(sys.stdin.readline())
    for line in sys.stdin:
        try:
            if line.strip() != "go":
                raise ValueError(f"{line.strip()!r} is not go")
            answer = {"translations": clients(job["port"], job["sources"], job["clients"], job["per_request"])}
        except Exception as e:  # the benchmark raises it, in its own process
            answer = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
