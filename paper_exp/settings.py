"""The paper's experimental settings, reproduced on the project's cost model.

LLaMA 7B / 13B / 32B; 16, 32, 64 devices (8 per node) with 50K / 100K / 200K tokens per step
(the paper's 200K for 64 devices, scaled with the devices) and 1024 devices with 1.6M tokens;
32K maximum length; a web-like and a code-like workload. Past the paper's grid, Llama 3.1 405B on
16,384 H100s (analytic space), 1.6M tokens per step, web-like workload.

Scheme spaces: on 16–64 devices the original system's measured LLaMA-7B and 13B pools (A800,
bundled with Hydraulis) and the analytic LLaMA-32B space on A800 80 GB, whose efficiencies are
calibrated to those pools (``benchmarks/analytic_vs_reference.py``). On 1024 devices the
analytic A800 space for every model: the pools have no context parallelism, and with 1.6M
tokens over 1024 devices (≈ 1.6K per device) a step is bound by its longest 32K sequence, which
only context parallelism shortens — on the pools every contender but padding ties there. The
analytic spaces compose every variant of their schemes (sequence parallelism, recomputation of
k layers per stage; design §6.6): under the runtime's memory accounting LLaMA-32B holds a 32K
sequence on 16 A800s only with recomputation. Workloads: ``examples/data/longtail.txt``
(synthetic long tail, web-like; ``examples/data/README.md``) and ``paper_exp/data/stdlib_lengths.txt``
(the CPython standard library tokenized, code-like; ``paper_exp/data/README.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_SEQ_LEN = 32_768
DEVICES_PER_NODE = 8
DEVICE = "a800-80g"
TOKENS_PER_64_DEVICES = 200_000
TOKENS_AT_1024 = 1_600_000
MODELS = ("llama-7b", "llama-13b", "llama-32b")
POOLS = {"llama-7b": "bundled:7b", "llama-13b": "bundled:13b", "llama-32b": None}
"""A bundled measured pool on small clusters, or ``None`` for the analytic space on :data:`DEVICE`."""
WORKLOADS = {"web": ROOT / "examples" / "data" / "longtail.txt", "code": ROOT / "paper_exp" / "data" / "stdlib_lengths.txt"}
SMALL_CLUSTERS = (16, 32, 64)
LARGE_CLUSTER = 1024
LARGEST = ("llama-405b", 16_384, "h100-80g")
"""The largest published runs' scale (Llama 3 405B trained on 16,384 H100s): model, devices and
device preset of the one setting past the paper's grid, at the large clusters' 1.6M tokens."""


@dataclass(frozen=True)
class Setting:
    model: str
    devices: int
    workload: str

    @property
    def name(self) -> str:
        return f"{self.model}_{self.devices}dev_{self.workload}"

    @property
    def space(self) -> str | None:
        return None if self.devices >= LARGE_CLUSTER else POOLS[self.model]

    @property
    def device(self) -> str:
        """The device preset of an analytic space: H100 for the largest setting, else :data:`DEVICE`."""
        return LARGEST[2] if (self.model, self.devices) == LARGEST[:2] else DEVICE

    @property
    def token_budget(self) -> int:
        if self.devices >= LARGE_CLUSTER:
            return TOKENS_AT_1024
        return TOKENS_PER_64_DEVICES * self.devices // 64

    @property
    def lengths(self) -> Path:
        return WORKLOADS[self.workload]


def all_settings() -> list[Setting]:
    """Every model × cluster × workload, small clusters first, then the largest setting (web)."""
    return [Setting(model, devices, workload)
            for devices in (*SMALL_CLUSTERS, LARGE_CLUSTER) for model in MODELS for workload in WORKLOADS
            ] + [Setting(LARGEST[0], LARGEST[1], "web")]
