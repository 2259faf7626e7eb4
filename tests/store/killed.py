"""A writer process SIGKILLed at a random moment, and what it said it committed before."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

FORK = multiprocessing.get_context("fork")


def kill_a_writer(
    target: Callable[..., None],
    args: tuple[Any, ...],
    rng: random.Random,
    most: float,
    first: bool = False,
) -> list[Any]:
    """Run ``target(*args, pipe)`` in a forked child, SIGKILL it after 0.05–``most`` s, return what it sent.

    The child sends each thing it committed on ``pipe`` after the commit returns, so
    the list is what a reader must find; a message cut by the kill is not in it.
    ``first``: the random wait starts once the child said its first commit (up to 60 s),
    so a loaded machine cannot kill it before it wrote anything.
    """
    receiver, sender = FORK.Pipe(duplex=False)
    child = FORK.Process(target=target, args=(*args, sender))
    child.start()
    sender.close()
    said: list[Any] = []
    if first and receiver.poll(60):
        said.append(receiver.recv())
    time.sleep(rng.uniform(0.05, most))
    os.kill(child.pid or 0, signal.SIGKILL)
    child.join(30)
    assert child.exitcode == -signal.SIGKILL
    return said + _drained(receiver)


def _drained(receiver: Connection) -> list[Any]:
    sent: list[Any] = []
    while receiver.poll():
        try:
            sent.append(receiver.recv())
        except EOFError:
            break
    receiver.close()
    return sent
