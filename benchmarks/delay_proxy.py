"""A TCP forwarding proxy that adds a fixed delay to every HTTP request, to give a local S3 server
the latency of a real object store (10-100 ms per request). It forwards bytes unchanged, so
signed requests stay valid; a request starts when the client sends after the server answered.
Given several servers holding the same data, it spreads the connections over them in turn (one
Python S3 server answers a few hundred requests per second)."""

from __future__ import annotations

import asyncio
import threading


class DelayProxy:
    """Listens on 127.0.0.1 (``url``) and forwards to ``host:port`` (or to each of ``more_ports`` on
    ``host`` in turn, connection by connection), ``delay_s`` late per request."""

    def __init__(self, host: str, port: int, delay_s: float, more_ports: tuple[int, ...] = ()):
        self.upstreams = [(host, p) for p in (port, *more_ports)]
        self._turn = 0
        self.delay_s = delay_s
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="delay-proxy", daemon=True)
        self._server: asyncio.base_events.Server | None = None

    def start(self) -> None:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, "127.0.0.1", 0), self._loop
        ).result()
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        async def close() -> None:
            self._server.close()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            self._turn += 1
            server_r, server_w = await asyncio.open_connection(*self.upstreams[self._turn % len(self.upstreams)])
        except OSError:
            client_w.close()
            return
        answered = [True]  # the next bytes from the client begin a new request

        async def upstream() -> None:
            while data := await client_r.read(1 << 16):
                if answered[0]:
                    answered[0] = False
                    await asyncio.sleep(self.delay_s)
                server_w.write(data)
                await server_w.drain()
            server_w.close()

        async def downstream() -> None:
            while data := await server_r.read(1 << 16):
                answered[0] = True
                client_w.write(data)
                await client_w.drain()
            client_w.close()

        try:
            await asyncio.gather(upstream(), downstream())
        except (ConnectionError, OSError):
            client_w.close()
            server_w.close()


def main() -> None:
    """``python benchmarks/delay_proxy.py DELAY_MS PORT [PORT...]``: serve until killed; prints the proxy's URL."""
    import sys
    import time

    ports = [int(p) for p in sys.argv[2:]]
    proxy = DelayProxy("127.0.0.1", ports[0], float(sys.argv[1]) / 1e3, tuple(ports[1:]))
    proxy.start()
    print(proxy.url, flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
