"""A small client of beanstalkd's text protocol: put, reserve, delete and a tube, nothing more
(what the servers benchmark uses; the protocol is beanstalkd's doc/protocol.txt)."""

from __future__ import annotations

import socket


class BeanstalkError(Exception):
    pass


class Beanstalk:
    def __init__(self, host: str, port: int, tube: str) -> None:
        self.sock = socket.create_connection((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = self.sock.makefile("rb")
        self._expect(f"use {tube}", b"USING")
        self._expect(f"watch {tube}", b"WATCHING")
        self._expect("ignore default", b"WATCHING")

    def _send(self, line: str, body: bytes | None = None) -> list[bytes]:
        data = line.encode() + b"\r\n"
        if body is not None:
            data += body + b"\r\n"
        self.sock.sendall(data)
        return self.reader.readline().split()

    def _expect(self, line: str, word: bytes) -> list[bytes]:
        answer = self._send(line)
        if not answer or answer[0] != word:
            raise BeanstalkError(f"{line!r} answered {answer!r}")
        return answer

    def put(self, body: bytes, ttr: int = 60) -> int:
        answer = self._send(f"put 1024 0 {ttr} {len(body)}", body)
        if not answer or answer[0] != b"INSERTED":
            raise BeanstalkError(f"put answered {answer!r}")
        return int(answer[1])

    def reserve(self, timeout: int = 0) -> tuple[int, bytes] | None:
        """The next job, or None when none came within `timeout` seconds."""
        answer = self._send(f"reserve-with-timeout {timeout}")
        if answer and answer[0] == b"TIMED_OUT":
            return None
        if not answer or answer[0] != b"RESERVED":
            raise BeanstalkError(f"reserve answered {answer!r}")
        body = self.reader.read(int(answer[2]) + 2)[:-2]
        return int(answer[1]), body

    def delete(self, job: int) -> None:
        self._expect(f"delete {job}", b"DELETED")

    def close(self) -> None:
        self.reader.close()
        self.sock.close()
