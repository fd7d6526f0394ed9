"""The pure core must import without torch and without fastapi (design §3)."""

import subprocess
import sys

BLOCKER = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'fastapi', 'uvicorn', 'datasets', 'tokenizers'):
            raise ImportError('blocked: ' + name)
sys.meta_path.insert(0, Block())
"""


def test_core_imports_without_torch_or_fastapi():
    modules = ["hydraulis.base.types", "hydraulis.cost", "hydraulis.artifacts", "hydraulis.planner",
               "hydraulis.dispatch", "hydraulis.simulation", "hydraulis.profiler.analytic",
               "hydraulis.artifacts.original_pool", "hydraulis.io.profile_run", "hydraulis.profiler.fit",
               "hydraulis.profiler.compare", "hydraulis.fused", "hydraulis.artifacts.fused", "hydraulis.sharding.pipeline",
               "hydraulis.sharding.parameters", "hydraulis.sharding.ranges", "hydraulis.sharding.ownership",
               "hydraulis.sharding.states", "hydraulis.sharding.activations", "hydraulis.job.config",
               "hydraulis.job.strategy_spec", "hydraulis.job.records", "hydraulis.job.manifest",
               "hydraulis.job.memory_report", "hydraulis.integrations.megatron", "hydraulis.integrations.torch",
               "hydraulis.integrations.cp_contract"]
    code = BLOCKER + "".join(f"import {m}\n" for m in modules) + "print('ok')"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_the_blocker_blocks():
    result = subprocess.run([sys.executable, "-c", BLOCKER + "import torch"], capture_output=True, text=True)
    assert result.returncode != 0


GPU_MACHINE_BLOCKER = BLOCKER.replace("('torch', ", "(")
"""A GPU machine's python: its own torch, but none of the service's or the data pipeline's packages."""


def test_the_runtime_trains_without_the_services_or_the_data_pipelines_packages():
    modules = ["hydraulis.cli", "hydraulis.runtime.trainer", "hydraulis.runtime.step", "hydraulis.runtime.run",
               "hydraulis.runtime.memory.report", "hydraulis.runtime.profiling.measure"]
    code = GPU_MACHINE_BLOCKER + "".join(f"import {m}\n" for m in modules) + "print('ok')"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
