"""A client of the planning service for training jobs: ``POST /v1/step-plans`` with bounded
retries and timeouts.

Each request has ``timeout_s`` to connect and answer. A connection error, a timeout or a 5xx
answer is retried up to ``attempts`` times in all, waiting ``backoff_s·2^k`` before retry ``k``
— or the ``Retry-After`` seconds of a 503 (the service's queue is full), when longer; then
:class:`PlannerUnavailable` says which URL failed how. A 4xx answer is not retried: the request
itself is wrong, and the service's error (``{"error": {"code", "message", "field"}}``)
becomes a :class:`~hydraulis.base.errors.HydraulisError` naming the field. With ``token`` the requests
carry ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from hydraulis.artifacts import proposal_to_dict, scheme_space_to_dict, step_plan_from_dict
from hydraulis.base.errors import HydraulisError, require, require_http_url, require_int, require_number
from hydraulis.base.types import BatchingMethod, Proposal, SchemeSpace, StepPlan
from hydraulis.dispatch import DispatchOptions
from hydraulis.dispatch.synthesis import Synthesise, SynthesisOptions

ROUTE = "/v1/step-plans"
TOKEN_VARIABLE = "HYDRAULIS_API_TOKEN"
"""The environment variable holding the bearer token: the service requires it, a training job sends it."""


class PlannerUnavailable(RuntimeError):
    """The service gave no step plan within the attempts."""


@dataclass(frozen=True)
class ClientOptions:
    timeout_s: float = 30.0
    attempts: int = 3
    backoff_s: float = 0.5
    token: str | None = None

    def __post_init__(self) -> None:
        require(require_number(self.timeout_s, "timeout_s") > 0, "timeout_s", self.timeout_s, "must be > 0")
        require_int(self.attempts, "attempts", minimum=1)
        require_number(self.backoff_s, "backoff_s", minimum=0.0)


class PlannerClient:
    """Step plans from the service at ``url`` (e.g. ``http://127.0.0.1:8000``)."""

    def __init__(self, url: str, options: ClientOptions = ClientOptions()) -> None:
        require_http_url(url, "planner_url")
        self.url, self.options = url.rstrip("/"), options
        headers = {"Authorization": f"Bearer {options.token}"} if options.token else {}
        self.http = httpx.Client(base_url=self.url, timeout=options.timeout_s, headers=headers)
        self._proposals: dict[int, dict] = {}

    def step_plan(self, proposal: Proposal, lengths: Sequence[int], method: BatchingMethod,
                  options: DispatchOptions, synthesis: SynthesisOptions = SynthesisOptions(),
                  space: SchemeSpace | None = None) -> StepPlan:
        """The service's plan of one step; ``space`` is sent with ``synthesise`` space."""
        body = {"proposal": self._proposal(proposal), "lengths": [int(s) for s in lengths],
                "method": BatchingMethod(method).value, "seed": options.seed, "alignment": options.alignment,
                "oversize": options.oversize.value, "synthesise": synthesis.mode.value,
                "synthesis_evaluations": synthesis.evaluations}
        if options.ilp_nodes:
            body.update(ilp_nodes=options.ilp_nodes, ilp_solver=options.ilp_solver.value,
                        time_limit_s=options.ilp_time_limit_s)
        if synthesis.mode is Synthesise.SPACE and space is not None:
            body["scheme_space"] = scheme_space_to_dict(space)
        return step_plan_from_dict(self._post(body))

    def close(self) -> None:
        self.http.close()

    def _post(self, body: dict) -> dict:
        failure, retry_after = "", 0.0
        for attempt in range(self.options.attempts):
            if attempt:
                time.sleep(max(self.options.backoff_s * 2 ** (attempt - 1), retry_after))
            try:
                response = self.http.post(ROUTE, json=body)
            except httpx.HTTPError as error:
                failure = f"{type(error).__name__}: {error}"
                continue
            if response.status_code < 300:
                return response.json()
            if response.status_code < 500:
                raise _client_error(response)
            failure = f"HTTP {response.status_code}: {response.text[:200]}"
            retry_after = _seconds(response.headers.get("retry-after"))
        raise PlannerUnavailable(f"planner service {self.url}{ROUTE}: no step plan after {self.options.attempts} "
                                 f"attempts of {self.options.timeout_s:g} s (last: {failure})")

    def _proposal(self, proposal: Proposal) -> dict:
        key = id(proposal)
        if key not in self._proposals:
            self._proposals[key] = proposal_to_dict(proposal)
        return self._proposals[key]


def _seconds(header: str | None) -> float:
    """A ``Retry-After`` header in seconds (0 when absent or not a number of seconds)."""
    try:
        return min(max(float(header), 0.0), 60.0) if header else 0.0
    except ValueError:
        return 0.0


def _client_error(response: httpx.Response) -> HydraulisError:
    try:
        error = response.json()["error"]
        return HydraulisError(f"planner service: {error.get('field') or 'request'}", response.status_code,
                              error.get("message", ""))
    except (ValueError, KeyError, TypeError):
        return HydraulisError("planner service", response.status_code, response.text[:200])
