"""A job refuses a proposal priced with a loss chunk that holds less than its own."""

from dataclasses import replace

import pytest

from hydraulis.artifacts import write_proposal
from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import model_preset
from hydraulis.job.config import RuntimeOptions, TrainConfig
from hydraulis.runtime.run import resolve_run
from tests.dispatch.helpers import group, proposal


def _proposal_file(tmp_path, chunk: int) -> str:
    made = replace(proposal((group(1, 2, 64, 0.0, 0.1, 1.0),)), model=model_preset("tiny"), loss_chunk_tokens=chunk)
    write_proposal(tmp_path / "proposal.json", made)
    return str(tmp_path / "proposal.json")


@pytest.mark.parametrize("priced, runtime", [(1024, 1024), (1024, 256), (0, 0)])
def test_the_same_or_a_smaller_chunk_runs(tmp_path, priced, runtime):
    config = TrainConfig("tiny", (), 1, proposal_file=_proposal_file(tmp_path, priced),
                         runtime=RuntimeOptions(loss_chunk_tokens=runtime))
    assert resolve_run(config).layouts


@pytest.mark.parametrize("priced, runtime", [(1024, 0), (1024, 4096), (0, 1024)])
def test_a_chunk_that_may_hold_more_is_refused_naming_both(tmp_path, priced, runtime):
    config = TrainConfig("tiny", (), 1, proposal_file=_proposal_file(tmp_path, priced),
                         runtime=RuntimeOptions(loss_chunk_tokens=runtime))
    with pytest.raises(HydraulisError) as error:
        resolve_run(config)
    assert str(error.value).startswith(f"loss_chunk_tokens: {runtime} may hold more than the proposal was priced "
                                       f"with ({priced};")
