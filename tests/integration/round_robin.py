"""A balancer in front of several replicas that sends each HTTP request to the next one in turn
(the harshest spread a Kubernetes Service can give): what a client polling through it sees is
what every replica serves, alternately.

Each request is forwarded on a connection of its own with ``Connection: close`` and answered
to the client in the same way, so one client connection carries one request; the long-polls of
the shims are held open for as long as the replica holds them."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading

HEAD_END = b"\r\n\r\n"


class RoundRobin:
    def __init__(self, port: int, upstream_ports: list[int]) -> None:
        self.port = port
        self.upstreams = list(upstream_ports)
        self.forwarded = 0
        self.failed = 0
        self._turn = itertools.count()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        self._thread.start()
        assert started.wait(10), "the balancer did not start"

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", self.port))
        started.set()
        self._loop.run_forever()

    def close(self) -> None:
        async def stop() -> None:
            assert self._server is not None
            self._server.close()
            held = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in held:  # the long-polls still held
                task.cancel()
            await asyncio.gather(*held, return_exceptions=True)
            self._loop.stop()

        asyncio.run_coroutine_threadsafe(stop(), self._loop)
        self._thread.join(10)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(HEAD_END)
            lines = head.split(b"\r\n")
            length = 0
            kept = [lines[0]]
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
                if name.strip().lower() in (b"connection", b"keep-alive") or not line:
                    continue
                kept.append(line)
            body = await reader.readexactly(length) if length else b""
            port = self.upstreams[next(self._turn) % len(self.upstreams)]
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                self.failed += 1
                writer.write(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                await writer.drain()
                return
            up_writer.write(b"\r\n".join(kept) + b"\r\nconnection: close\r\n\r\n" + body)
            await up_writer.drain()
            response = await up_reader.read()  # the replica closes after its answer
            up_writer.close()
            self.forwarded += 1
            head, sep, rest = response.partition(HEAD_END)
            out = [line for line in head.split(b"\r\n") if not line.lower().startswith((b"connection:", b"keep-alive:"))]
            writer.write(b"\r\n".join(out) + b"\r\nconnection: close" + sep + rest)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, ValueError):
            self.failed += 1
        finally:
            with contextlib.suppress(Exception):
                writer.close()
