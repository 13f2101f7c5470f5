"""The metrics actor's numbers as ``prometheus_client`` metric families, and the text it serves on ``/metrics``.

The actor owns its numbers (counters built from the facts other actors tell it, gauges read at scrape time), so the
families are built afresh from them at each scrape by a custom collector in a registry of the actor's own, never
the process-wide default one, which anything else in the process could add to, and whose own process and platform
collectors would add metrics that docs/metrics.md does not promise. Families built here carry no
``_created`` series, so the exposition has exactly the lines docs/metrics.md lists.

Pure: nothing here talks to an actor, and every function is tested without one.
"""
from __future__ import annotations

from typing import Callable, Iterable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

TURN_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
# The text format 0.0.4 is what generate_latest writes; newer prometheus_client releases name a later version in
# their CONTENT_TYPE_LATEST, so the header is spelled out here.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Samples = Iterable[tuple[dict, float]]   # (labels, value) pairs; every pair of one family has the same label names


class Histogram:
    """One series of observations in fixed buckets, kept as counts per bucket (made cumulative when exposed)."""

    def __init__(self, buckets: tuple = TURN_BUCKETS):
        self.buckets, self.counts, self.sum, self.count = buckets, [0] * len(buckets), 0.0, 0

    def observe(self, value: float) -> None:
        self.sum += value
        self.count += 1
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1
                break


def gauge(name: str, help_text: str, samples: Samples) -> Metric:
    return _filled(GaugeMetricFamily, name, help_text, list(samples))


def counter(name: str, help_text: str, samples: Samples) -> Metric:
    """``name`` ends in ``_total``, as exposed; prometheus_client keeps the family under the name without it."""
    return _filled(CounterMetricFamily, name.removesuffix("_total"), help_text, list(samples))


def histogram(name: str, help_text: str, label_names: tuple[str, ...], series: dict) -> Metric:
    """``series`` maps a tuple of label values (in ``label_names`` order) to its ``Histogram``."""
    family = HistogramMetricFamily(name, help_text, labels=list(label_names))
    for values, h in sorted(series.items()):
        running, buckets = 0, []
        for bound, count in zip(h.buckets, h.counts):
            running += count
            buckets.append((floatToGoString(bound), running))
        buckets.append(("+Inf", h.count))
        family.add_metric([str(v) for v in values], buckets, h.sum)
    return family


def _filled(kind, name: str, help_text: str, samples: list) -> Metric:
    label_names = list(samples[0][0]) if samples else []
    family = kind(name, help_text, labels=label_names)
    for labels, value in samples:
        family.add_metric([str(labels[k]) for k in label_names], value)
    return family


class _Families:
    """prometheus_client's Collector protocol over a function that returns the families of the moment."""

    def __init__(self, families: Callable[[], list[Metric]]):
        self.families = families

    def collect(self):
        return self.families()


def registry_of(families: Callable[[], list[Metric]]) -> CollectorRegistry:
    """A registry of its own that exposes whatever ``families()`` returns at each scrape."""
    registry = CollectorRegistry(auto_describe=False)   # no describe: nothing is collected until a scrape
    registry.register(_Families(families))
    return registry


def exposition(registry: CollectorRegistry) -> str:
    """The registry's families in the Prometheus text format 0.0.4."""
    return generate_latest(registry).decode("utf-8")
