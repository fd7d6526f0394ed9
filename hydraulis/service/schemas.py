"""Request and response bodies. They only convert to and from the core types: artifacts are
passed as their JSON documents and parsed by :mod:`hydraulis.artifacts`, so the HTTP API and
the files are one format."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from hydraulis.types import OptimizerLayout


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LayoutBody(Body):
    dp: int = Field(ge=1, le=1_000_000)
    tp: int = Field(ge=1, le=1_000_000)
    pp: int = Field(ge=1, le=1_000_000)

    def to_core(self) -> OptimizerLayout:
        return OptimizerLayout(self.dp, self.tp, self.pp)


class Presets(BaseModel):
    models: dict[str, dict[str, int]]
    devices: dict[str, dict[str, float | int]]


class ValidateSpaceRequest(Body):
    scheme_space: dict[str, Any] = Field(description="a scheme-space document (hydraulis space ... -o)")
    optimizer_layout: LayoutBody | None = Field(
        default=None, description="layout for the longest-sequence column (default: ZeRO-1 over all devices)")


class SchemeRow(BaseModel):
    cp: int
    tp: int
    pp: int
    devices: int
    a: float
    b: float
    c: float
    max_seq_len: int
    limit: str
    states_bytes: float
    activation_bytes_per_token: float


class ValidateSpaceResponse(BaseModel):
    valid: bool
    optimizer_layout: LayoutBody
    schemes: list[SchemeRow]


class AnalyticSpaceRequest(Body):
    model: str = Field(description="model preset, see GET /v1/presets")
    device: str = Field(description="device preset, see GET /v1/presets")
    devices: int = Field(ge=1)
    devices_per_node: int | None = Field(default=None, ge=1, le=1024)
    cp: list[int] = Field(default=[1, 2, 4, 8], min_length=1, max_length=8)
    tp: list[int] = Field(default=[1, 2, 4, 8], min_length=1, max_length=8)
    pp: list[int] = Field(default=[1, 2, 4, 8], min_length=1, max_length=8)
