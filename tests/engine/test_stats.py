"""One percentile for /metrics and every benchmark: numpy's default (linear) definition."""

import numpy as np
import pytest

from engine.floor.base.stats import percentile


@pytest.mark.parametrize(
    "values", [[3.0], [4.0, 1.0], [5.0, 1.0, 9.0, 2.0, 7.0], list(np.random.default_rng(0).random(101))]
)
@pytest.mark.parametrize("q", [0.0, 0.5, 0.95, 1.0])
def test_a_percentile_is_numpys_linear_quantile(values, q):
    assert percentile(values, q) == pytest.approx(float(np.quantile(values, q)))


def test_no_values_have_a_zero_percentile():
    assert percentile([], 0.5) == 0.0
