"""An HTTP server on a free loopback port, served from a daemon thread of the test process."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# How often serve_forever looks for a shutdown request: stop() waits up to this long.
# socketserver's own default, half a second, was a third of the fast suite's wall time
# once every OneDrive and embedding test stopped a server.
POLL_SECONDS = 0.01


class LoopbackServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> None:
        threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": POLL_SECONDS}, daemon=True
        ).start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
