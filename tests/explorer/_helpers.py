"""Constants and a result builder shared by the tests of examples.explorer."""

from __future__ import annotations

from examples import explorer as e
from examples.tools.measure import Timing
from examples.tools.models import SIZES

TINY = SIZES["tiny"]
DATA = e.RUNS


def _result(policy, median=None, low=None, high=None, temp=1000, flops=100.0):
    timing = None if median is None else Timing(median, low, high, 7)
    return e.Result.with_timing(
        timing,
        policy=policy,
        residual_bytes_per_layer=10,
        temp_bytes=temp,
        argument_bytes=0,
        host_temp_bytes=0,
        flops=flops,
    )
