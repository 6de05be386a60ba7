"""A real `ccswitch-agent` for the tests that drive it over its sockets: its datapath socket,
operator socket and log in the test's temporary directory. Needs the Rust binaries (make
build); fails rather than skips without them."""

import os
import socket
import subprocess
import time

import pytest

from ccswitch.agent.operator import OperatorClient
from ccswitch.experiments import environment
from ccswitch.topology.daemons import python_agent_env
from fake_datapath import ANSWER_TIMEOUT_S, START_TIMEOUT_S


def agent_binary():
    path = os.path.join(environment.bin_dir(), "ccswitch-agent")
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} not built (make build)")
    return path


def wait_connectable(path, proc, log_path):
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            with open(log_path) as f:
                pytest.fail(f"the agent exited with {proc.returncode}:\n{f.read()}")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            return
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(f"the agent did not listen on {path}")
            time.sleep(0.02)
        finally:
            s.close()


class Agent:
    """`ccswitch-agent --socket agent.sock --operator-socket operator.sock ARGS`, its stdout and
    stderr in agent.log; ready once its operator socket accepts connections."""

    def __init__(self, tmp_path, args=()):
        self.dir = tmp_path
        self.socket = str(tmp_path / "agent.sock")
        self.operator_socket = str(tmp_path / "operator.sock")
        self.log_path = str(tmp_path / "agent.log")
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [agent_binary(), "--socket", self.socket, "--operator-socket", self.operator_socket, *args],
                stdout=log, stderr=subprocess.STDOUT, env=python_agent_env(dict(os.environ)),
            )
        try:
            # Only the operator socket is probed: a probe of the datapath socket would count
            # as datapath 1. FakeDatapath retries until the datapath socket listens.
            wait_connectable(self.operator_socket, self.proc, self.log_path)
        except BaseException:
            self.stop()
            raise

    def client(self):
        return OperatorClient(self.operator_socket, timeout=ANSWER_TIMEOUT_S)

    def wait_datapath_socket(self):
        """Until the datapath socket's file exists (it may be bound just after the operator
        socket; connecting to probe it would count as a datapath)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while not os.path.exists(self.socket):
            if time.monotonic() > deadline or not self.alive():
                pytest.fail(f"the agent did not bind {self.socket}")
            time.sleep(0.02)

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, 9)
        self.proc.wait()
