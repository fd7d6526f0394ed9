"""Work functions for the worker-pool tests (module-level, so a worker can import them)."""

import time
from pathlib import Path


def echo(body, settings):
    return {"echo": body}


def sleep_forever(body, settings):
    while True:
        time.sleep(60)


def wait_for_file(body, settings):
    while not Path(body).exists():
        time.sleep(0.01)
    return {"released": body}


def fail(body, settings):
    raise RuntimeError("a bug in the work")
