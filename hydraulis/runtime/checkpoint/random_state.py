"""A rank's random states as JSON: nothing executable in a checkpoint.

Pickles of the generators' states (what ``torch.save`` of ``np.random.get_state()`` writes)
can run any code when loaded, so a checkpoint holds them as plain JSON numbers instead::

    {"torch": [byte, …], "numpy": {"key": [uint32, …], "pos": 624, "has_gauss": 0,
     "cached_gaussian": 0.0}, "python": {"version": 3, "state": [int, …]},
     "cuda": [[byte, …], …]}                                   ("cuda" only where CUDA runs)

Worked example: torch's CPU generator state is 5,056 bytes, numpy's Mersenne Twister 624
words and a position, Python's 625 integers — about 20 kB of JSON per rank.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import torch

from hydraulis.base.errors import HydraulisError


def random_states() -> dict:
    """This process's generators' states, copied as they are (cheap: taken at a checkpoint step
    while training waits; :func:`encode_states` turns them into JSON in the background)."""
    states = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def encode_states(states: dict) -> str:
    """The states :func:`random_states` took as the JSON text of the module docstring."""
    kind, key, position, has_gauss, cached = states["numpy"]
    version, state, gauss = states["python"]
    document = {"torch": states["torch"].tolist(),
                "numpy": {"kind": kind, "key": key.tolist(), "pos": position, "has_gauss": has_gauss,
                          "cached_gaussian": cached},
                "python": {"version": version, "state": list(state), "gauss": gauss}}
    if "cuda" in states:
        document["cuda"] = [state.tolist() for state in states["cuda"]]
    return json.dumps(document)


def set_random_states(states: dict) -> None:
    """Restore the states of a decoded :func:`encode_states` JSON (CUDA's only on as many devices)."""
    torch.set_rng_state(torch.tensor(states["torch"], dtype=torch.uint8))
    numpy = states["numpy"]
    np.random.set_state((numpy["kind"], np.array(numpy["key"], dtype=np.uint32), numpy["pos"], numpy["has_gauss"],
                         numpy["cached_gaussian"]))
    python = states["python"]
    random.setstate((python["version"], tuple(python["state"]), python["gauss"]))
    cuda = states.get("cuda")
    if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all([torch.tensor(state, dtype=torch.uint8) for state in cuda])


def read_random_states(path: Path) -> dict:
    """The states in ``path``; an error naming the file when it is not such JSON."""
    try:
        states = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(states, dict) or not {"torch", "numpy", "python"} <= states.keys():
            raise ValueError("it lacks the torch, numpy and python states")
    except (ValueError, UnicodeDecodeError) as error:
        raise HydraulisError("checkpoint", str(path), f"holds no random states ({error})") from None
    return states
