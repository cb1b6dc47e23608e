"""Stopping while the server hangs: a second stop signal always exits at once.

A server that accepts connections but never answers keeps libmongoc's
monitor threads in a blocking read; closing the task's connection pool
after the loop has ended waits for them (several seconds). The README
promises that a second SIGINT/SIGTERM exits at once: it must hold in that
teardown too, not only while the event loop runs (main.c on_late_signal).
"""

import signal
import socket
import threading
import time

from pipeline_support import write_config


class SilentServer:
    """Accepts TCP connections on 127.0.0.1 and never answers."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)

    def close(self):
        self.closed = True
        self.sock.close()
        for c in self.conns:
            c.close()


def test_second_signal_exits_at_once_while_connections_hang(tmp_workdir, start_mongocdc):
    srv = SilentServer()
    try:
        uri = "mongodb://127.0.0.1:%d/?replicaSet=rs0" % srv.port
        cfg = write_config(tmp_workdir, uri)
        d = start_mongocdc("-c", cfg)
        time.sleep(2)  # connected, its monitors blocked reading the silent server
        assert d.running()
        d._await_handlers()
        d.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        d.proc.send_signal(signal.SIGTERM)
        rc = d.stop(timeout_s=60)
        err = d.stderr_path.read_text(errors="replace")
        # The second signal either reached the loop (the "again" line) or the
        # teardown after it; both exit 1 without waiting for the connections.
        assert rc == 1, (rc, err[-2000:])
        assert ("again: exiting now" in err or "stop signal during shutdown" in err), err[-2000:]
    finally:
        srv.close()
