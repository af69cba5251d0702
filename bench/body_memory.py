"""What big refused bodies do to the web workers' memory: RSS before and after N concurrent posts
of SIZE bytes, each far over what the queue's 64 KiB item cap could take.

    .venv/bin/python bench/body_memory.py [--size 16777216] [--clients 40] [--chunked]
                                          [--threads 64]

gunicorn as in production (gunicorn.conf.py: gthread, 2 workers, 64 threads). Every post is
refused with 413; what is measured is what the workers kept: RSS of the master and workers
together (VmRSS), before the posts, at its highest while they run (sampled every 50 ms) and a
second after the last answer. A body read whole before its refusal stays in the workers'
memory (freed to the allocator, not to the system); one refused on its Content-Length is never
read, and a chunked one is read only up to the cap.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

from http_bench_server import HOST, QUEUE, Server  # noqa: E402

PIECE = 64 * 1024


def body(size: int) -> Iterator[bytes]:
    """A JSON item of `size` bytes, in pieces of at most PIECE."""
    head, tail = b'{"x": "', b'"}'
    yield head
    left = size - len(head) - len(tail)
    while left > 0:
        piece = min(left, PIECE)
        yield b"a" * piece
        left -= piece
    yield tail


def post_big(port: int, token: str, size: int, chunked: bool) -> str:
    """One post of a `size`-byte JSON item; the answer's status line."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {size}"
        sock.sendall(
            f"POST /api/v1/queues/{HOST}/{QUEUE}/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            f"Connection: close\r\n{framing}\r\n\r\n".encode()
        )
        try:
            for piece in body(size):
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            if chunked:
                sock.sendall(b"0\r\n\r\n")
        except OSError:  # the server answered and stopped reading: fine
            pass
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except OSError:
            pass
    return answer.split(b"\r\n", 1)[0].decode(errors="replace")


def concurrently(
    n: int, call: Callable[[], object], *, wait: bool = True
) -> list[threading.Thread]:
    threads = [threading.Thread(target=call) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads if wait else ():
        thread.join()
    return threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--clients", type=int, default=40)
    parser.add_argument("--chunked", action="store_true")
    parser.add_argument("--threads", type=int, default=64)
    args = parser.parse_args()
    server = Server(threads=args.threads, fsync=False)
    server.prepare()
    server.start()
    token = server.tokens["producer"]
    try:
        # as many small posts at once first: each thread that serves one has its database
        # connection and its caches, whatever the body; "before" counts them
        for _ in range(2):
            concurrently(args.clients, lambda: post_big(server.port, token, 1000, args.chunked))
        time.sleep(1)
        before = server.rss_mb()
        answers: list[str] = []
        clients = concurrently(args.clients, lambda: answers.append(
            post_big(server.port, token, args.size, args.chunked)), wait=False)  # fmt: skip
        peak = before
        while any(client.is_alive() for client in clients):
            peak = max(peak, server.rss_mb())
            time.sleep(0.05)
        time.sleep(1)
        after = server.rss_mb()
        print(json.dumps({"size": args.size, "clients": args.clients, "chunked": args.chunked,
                          "rss_mb": {"before": round(before), "peak": round(peak),
                                     "after": round(after)},
                          "answers": Counter(answers)}))  # fmt: skip
    finally:
        server.stop()


if __name__ == "__main__":
    main()
