"""The base of every table of the config: an unknown key is an error (a typo never silently does nothing) and a
loaded value cannot change."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
