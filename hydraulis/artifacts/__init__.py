"""Every artifact Hydraulis reads or writes — scheme space, proposal, step plan, training config
as versioned JSON, and lengths files. This package is the only place that parses or prints
them; loading validates and names the offending field."""

from hydraulis.artifacts.lengths import read_lengths, write_lengths
from hydraulis.artifacts.proposal import proposal_from_dict, proposal_to_dict, read_proposal, write_proposal
from hydraulis.artifacts.record import read_json, timestamp, write_json
from hydraulis.artifacts.scheme_space import (
    read_scheme_space,
    scheme_space_from_dict,
    scheme_space_to_dict,
    write_scheme_space,
)
from hydraulis.artifacts.step_plan import read_step_plan, step_plan_from_dict, step_plan_to_dict, write_step_plan
from hydraulis.artifacts.train_config import (
    read_train_config,
    train_config_from_dict,
    train_config_to_dict,
    write_train_config,
)

__all__ = [
    "proposal_from_dict",
    "read_lengths",
    "proposal_to_dict",
    "read_json",
    "read_proposal",
    "read_scheme_space",
    "read_step_plan",
    "read_train_config",
    "scheme_space_from_dict",
    "scheme_space_to_dict",
    "step_plan_from_dict",
    "step_plan_to_dict",
    "timestamp",
    "train_config_from_dict",
    "train_config_to_dict",
    "write_json",
    "write_lengths",
    "write_proposal",
    "write_scheme_space",
    "write_step_plan",
    "write_train_config",
]
