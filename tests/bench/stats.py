"""Latency and throughput summaries."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Sequential:
    """Round trips made one after another: each latency sample is one send + its reply."""

    n: int
    median_us: float
    p99_us: float
    mean_us: float
    round_medians_us: list[float] = field(default_factory=list)
    """The median of each round, to show how much the machine wandered during the run."""
    cpu_us: dict[str, float] = field(default_factory=dict)
    """CPU time per round trip spent by each process involved (client, broker, worker...)."""
    other_cores: float = 0.0

    @property
    def per_s(self) -> float:
        """Round trips per second back to back (1 / mean latency)."""
        return 1e6 / self.mean_us


@dataclass(frozen=True, slots=True)
class Pipelined:
    """Round trips with ``window`` requests kept outstanding."""

    n: int
    window: int
    seconds: float
    round_rates: list[float] = field(default_factory=list)
    cpu_us: dict[str, float] = field(default_factory=dict)
    other_cores: float = 0.0

    @property
    def per_s(self) -> float:
        return self.n / self.seconds


def percentile(ordered: list[int], q: float) -> int:
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def summarize(rounds: list[list[int]], cpu_us: dict[str, float], other_cores: float) -> Sequential:
    samples = sorted(s for r in rounds for s in r)
    if not samples:
        raise ValueError("no samples")
    return Sequential(
        n=len(samples),
        median_us=statistics.median(samples) / 1000,
        p99_us=percentile(samples, 0.99) / 1000,
        mean_us=statistics.fmean(samples) / 1000,
        round_medians_us=[statistics.median(r) / 1000 for r in rounds if r],
        cpu_us=cpu_us,
        other_cores=other_cores,
    )


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (p95 of 100 samples is the 95th smallest); NaN for no samples."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))]


@dataclass(slots=True)
class Series:
    """Latency samples in ms."""

    samples: list[float] = field(default_factory=list)

    def add(self, ms: float) -> None:
        self.samples.append(ms)

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else math.nan

    @property
    def p95(self) -> float:
        return pct(self.samples, 0.95)

    @property
    def p99(self) -> float:
        return pct(self.samples, 0.99)
