"""The exceptions an experiment run raises past its own transfers: the run cannot go on
(`RunError`), or a signal asked it to stop (`Interrupted`, a BaseException so that only
`finally` blocks, which tear the topology down, see it on its way out)."""

from __future__ import annotations

import signal


class RunError(RuntimeError):
    """The run cannot proceed (bad environment, missing binary, ...)."""


class Interrupted(BaseException):
    """Raised from the SIGINT/SIGTERM handler so that `finally` blocks tear everything down."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
