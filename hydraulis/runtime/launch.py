"""Starting the processes of a job and their ``torch.distributed`` world.

Two ways in, one per-rank body (:func:`_rank_main`):

* **torchrun** (many nodes, or any launcher that sets ``RANK``, ``WORLD_SIZE``,
  ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``)::

      torchrun --nnodes 2 --nproc-per-node 8 --rdzv-endpoint HOST:29500 -m hydraulis train --config train.json

  :func:`launched_by_torchrun` sees the variables and :func:`run_job` runs this process as
  its rank (``env://`` rendezvous, its keys under a prefix per torchrun attempt, so
  ``--max-restarts`` restarts meet reliably: design §10).
* **local**: ``--nproc N`` without torchrun starts ``N`` processes on this machine
  (``torch.multiprocessing``, start method ``forkserver``: one server imports torch and the
  runtime once, every rank is forked from it) that meet through a file store in a
  fresh temporary folder — no port to pick. If any rank fails, the others are ended (``SIGKILL``
  after :data:`GRACE_S` twice, so a stopped rank too) and the first failure is raised as
  :class:`RankFailure`. The launcher also watches every rank's heartbeat file
  (:class:`~.heartbeat.HeartbeatWatch`): a rank silent for ``timeout_s`` — rank 0 included —
  ends the job at once (every rank ``SIGKILL``), naming it and its last completed step.

The details: :func:`_rank_main`."""

from __future__ import annotations

import logging
import multiprocessing
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from hydraulis.base.errors import HydraulisError
from hydraulis.job.config import RuntimeOptions
from hydraulis.runtime.heartbeat import Heartbeat, HeartbeatWatch, describe_step
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.sharding.kinds import DeviceKind, Precision

log = logging.getLogger(__name__)

TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
ENV_RENDEZVOUS = "env://"
RESTART_VARIABLE = "TORCHELASTIC_RESTART_COUNT"
AGENT_STORE = "TORCHELASTIC_USE_AGENT_STORE"
"""Set to ``True`` by torchrun when its agent, not rank 0, hosts the rendezvous store."""
GRACE_S = 1.0
"""Seconds the local launcher gives the other ranks to end once one failed (then ``SIGTERM``,
and after as long again ``SIGKILL``: a stopped rank cannot handle ``SIGTERM``); also how often
it reads the ranks' heartbeat files."""
PRELOAD = ("torch", "hydraulis.runtime.trainer")
"""What the forkserver imports once before forking local ranks: torch and the runtime's jobs."""
DTYPES = {Precision.FP32: torch.float32, Precision.BF16: torch.bfloat16}


def compute_dtype(options: RuntimeOptions, device: torch.device) -> torch.dtype:
    """The compute dtype of ``options.precision`` on ``device`` (auto: bf16 on CUDA, fp32 on the CPU)."""
    if options.precision is Precision.AUTO:
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return DTYPES[options.precision]


class RankFailure(RuntimeError):
    """A rank of a local job ended with an error."""


@dataclass(frozen=True)
class RankContext:
    """This process's rank, world size, device and compute dtype; the job's ``timeout_s``, which
    every process group it creates carries; its heartbeat (None on a single process)."""

    rank: int
    world_size: int
    device: torch.device
    dtype: torch.dtype
    timeout_s: float = RuntimeOptions.timeout_s
    heartbeat: Heartbeat | None = None

    def new_group(self, ranks: list[int]) -> dist.ProcessGroup:
        """``torch.distributed.new_group(ranks)`` with the job's timeout (torch's default is 30 min)."""
        return dist.new_group(ranks, timeout=timedelta(seconds=self.timeout_s))

    def completed(self, step: int) -> None:
        """Tell the heartbeat this rank completed ``step`` (named if the job fails)."""
        if self.heartbeat is not None:
            self.heartbeat.completed(step)

    @property
    def world(self) -> ParallelGroup:
        return ParallelGroup(None, self.world_size, self.rank)

    @classmethod
    def single(cls, options: RuntimeOptions) -> RankContext:
        """One process, no ``torch.distributed`` (the single-device reference)."""
        device = _device(options, 0)
        return cls(0, 1, device, compute_dtype(options, device))


Job = Callable[..., None]
"""``job(context, *args)``, run on every rank; a module-level function (the launcher pickles it)."""


def launched_by_torchrun() -> bool:
    return all(name in os.environ for name in TORCHRUN_VARIABLES)


def run_job(job: Job, args: tuple, options: RuntimeOptions, nproc: int = 0, devices: int = 1,
            log_level: str = "warning") -> None:
    """Run ``job`` on every rank: as this process's rank under torchrun (world size from
    torchrun), else on ``nproc`` local processes (default ``devices``). The world must hold at
    least ``devices`` ranks (the most any strategy of the job uses)."""
    torchrun = launched_by_torchrun()
    world = world_size(nproc, devices)
    if torchrun:
        _rank_main(int(os.environ["LOCAL_RANK"]), int(os.environ["RANK"]), world, ENV_RENDEZVOUS, job, args, options,
                   log_level)
    else:
        _spawn(world, job, args, options, log_level)


def world_size(nproc: int = 0, devices: int = 1) -> int:
    """The ranks of the job: torchrun's ``WORLD_SIZE``, else ``nproc`` (default ``devices``);
    an error when it cannot hold ``devices``."""
    torchrun = launched_by_torchrun()
    world = int(os.environ["WORLD_SIZE"]) if torchrun else nproc or devices
    if torchrun and nproc and nproc != world:
        raise HydraulisError("nproc", nproc, f"differs from torchrun's WORLD_SIZE = {world}")
    if world < devices:
        raise HydraulisError("nproc", world, f"is fewer than the {devices} devices a strategy uses")
    return world


def _spawn(world: int, job: Job, args: tuple, options: RuntimeOptions, log_level: str) -> None:
    with tempfile.TemporaryDirectory(prefix="hydraulis-") as folder:
        store = f"file://{Path(folder) / 'store'}"
        beats = Path(folder) / "heartbeats"
        beats.mkdir()
        watch = HeartbeatWatch(beats, world, options.timeout_s)
        processes = mp.start_processes(_spawned, args=(world, store, str(beats), job, args, options, log_level),
                                       nprocs=world, join=False, start_method=_start_method())
        try:
            while not processes.join(timeout=GRACE_S, grace_period=GRACE_S):
                silent = watch.silent()
                if silent:
                    _kill(processes.processes)
                    raise RankFailure(f"{watch.describe(silent)}; every rank was ended")
        except mp.ProcessRaisedException as error:
            raise RankFailure(_reported(error.error_index, _last_line(str(error)))) from None
        except mp.ProcessExitedException as error:
            raise RankFailure(f"rank {error.error_index} exited with status {error.exit_code} "
                              f"({describe_step(watch.last_step(error.error_index))})") from None


def _start_method() -> str:
    """``forkserver`` where the platform has it: the server imports :data:`PRELOAD` once per
    launching process, so a rank starts in milliseconds instead of importing torch anew (seconds
    per rank, and a job's ranks import at once on the same cores); else ``spawn``. The server
    starts with the launching process's environment, which its ranks then inherit."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return "spawn"
    multiprocessing.set_forkserver_preload(list(PRELOAD))
    return "forkserver"


def _reported(index: int, line: str) -> str:
    """A failed rank's last line as the launcher reports it: the rank's own message when it
    raised a :class:`RankFailure` (:func:`_failure`), else the line prefixed with the rank."""
    _, raised, message = line.partition(f"{RankFailure.__name__}: ")
    return message if raised else f"rank {index} failed: {line}"


def _kill(processes: list) -> None:
    """``SIGKILL`` every rank still running (a stopped one too) and reap it."""
    for process in processes:
        if process.is_alive():
            process.kill()
    for process in processes:
        process.join()


def _spawned(local_rank: int, nproc: int, store: str, beats: str, job: Job, args: tuple, options: RuntimeOptions,
             log_level: str) -> None:
    _rank_main(local_rank, local_rank, nproc, store, job, args, options, log_level, beats)


def _rank_main(local_rank: int, rank: int, world_size: int, init_method: str, job: Job, args: tuple,
               options: RuntimeOptions, log_level: str, beats: str | None = None) -> None:
    """Each rank: logging with its rank in every line; ``torch.set_num_threads``; the device (CPU with
    gloo, or ``cuda:LOCAL_RANK`` with NCCL); ``init_process_group(timeout=…)`` so that a collective
    or point-to-point wait on a dead or stuck peer fails after ``timeout_s`` instead of hanging, on
    every process group the job creates too (:meth:`RankContext.new_group`; torch's default for a
    new group is 30 minutes). Gloo also fails at once when a peer's connection closes, and a failing
    rank exits, closing its own connections — so one dead rank brings every other rank down with an
    error. A failing rank names, before its own error, the ranks whose heartbeats stopped
    (:mod:`.heartbeat`): the first line of a failed job names the rank that died or hung, not the
    neighbour that noticed. ``beats``: the local launcher's heartbeat folder.
    """
    _setup_rank_logging(rank, log_level)
    torch.set_num_threads(options.threads)
    device = _device(options, local_rank)
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)
    timeout = timedelta(seconds=options.timeout_s)
    store = _store(init_method, rank, world_size, timeout)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=timeout)
    heartbeat = Heartbeat(store, rank, world_size, folder=beats)
    context = RankContext(rank, world_size, device, compute_dtype(options, device), options.timeout_s, heartbeat)
    try:
        context.world.all_reduce(torch.zeros(1, device=device))
        log.debug("rank %d of %d on %s (%s)", rank, world_size, device, backend)
        job(context, *args)
    except HydraulisError as error:
        log.error("rank %d failed: %s", rank, error)
        raise
    except Exception as error:
        raise _failure(rank, error, heartbeat) from None
    dist.barrier()  # no rank tears its groups down while another still talks to it
    heartbeat.stop()
    dist.destroy_process_group()


def _failure(rank: int, error: Exception, heartbeat: Heartbeat) -> RankFailure:
    """This rank's failure as one line that names first the ranks that stopped answering, if
    any (:mod:`.heartbeat`), then what this rank saw; logged here, raised to the launcher."""
    cause = f"{type(error).__name__}: {_last_line(str(error))}"
    silent = heartbeat.silent_ranks()
    stopped = "".join(f"rank {peer} stopped responding (no heartbeat in {2 * heartbeat.interval_s:g} s, "
                      f"{describe_step(step)}); " for peer, step in (silent or {}).items())
    if silent is None:
        stopped = _store_silent(heartbeat) + "; "
    message = f"{stopped}rank {rank} failed: {cause} ({describe_step(heartbeat.step)})"
    log.error("%s", message)
    return RankFailure(message)


def _store_silent(heartbeat: Heartbeat) -> str:
    """Who is silent when the store cannot be read: under ``env://`` without torchrun's agent
    store, rank 0, which hosts it."""
    if heartbeat.file is not None or os.environ.get(AGENT_STORE) == "True":
        return "the job's store cannot be read"
    return "rank 0 stopped responding (the store it hosts does not answer)"


def _store(init_method: str, rank: int, world_size: int, timeout: timedelta) -> dist.Store:
    """The rendezvous store of ``init_method``, its keys under a prefix of their own for each
    torchrun attempt (``TORCHELASTIC_RESTART_COUNT``). torchrun's default static rendezvous
    hands every attempt the same store and prefix: without ours, a restarted rank can read the
    address a dead rank of the previous attempt published and fail with ``Gloo connectFullMesh
    failed … Connection refused`` (design §10)."""
    store, _, _ = next(dist.rendezvous(init_method, rank, world_size, timeout=timeout))
    return dist.PrefixStore(f"hydraulis/attempt-{os.environ.get(RESTART_VARIABLE, '0')}", store)


def _device(options: RuntimeOptions, local_rank: int) -> torch.device:
    if options.device is DeviceKind.CUDA and not torch.cuda.is_available():
        raise HydraulisError("device", options.device.value, "is not available on this machine")
    if options.device is DeviceKind.CPU or not torch.cuda.is_available():
        return torch.device("cpu")
    if local_rank >= torch.cuda.device_count():
        raise HydraulisError("nproc", local_rank + 1, f"exceeds the {torch.cuda.device_count()} GPUs of this node "
                             "(one rank per GPU; use --device cpu for more ranks)")
    return torch.device("cuda", local_rank)


class _RankFilter(logging.Filter):
    def __init__(self, rank: int) -> None:
        super().__init__()
        self.rank = rank

    def filter(self, record: logging.LogRecord) -> bool:
        record.rank = self.rank
        return True


def _setup_rank_logging(rank: int, level: str) -> None:
    """Every line names its rank; the per-step lines of :mod:`hydraulis.runtime.trainer` and the
    checkpoints written and resumed (logged by rank 0) show at ``info`` whatever the level."""
    handler = logging.StreamHandler()
    handler.addFilter(_RankFilter(rank))
    handler.setFormatter(logging.Formatter("%(asctime)s rank %(rank)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("hydraulis.runtime.trainer", "hydraulis.runtime.checkpoint"):
        logging.getLogger(name).setLevel(min(logging.INFO, root.level))


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else text
