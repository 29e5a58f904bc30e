"""The argument checks every generator of skicml.datasets shares."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from skicml.datasets import make_shape_scenes, make_triangle_graphs, make_wearable_cohort
from skicml.datasets._validation import check_int, check_real, is_real_in


@given(st.integers(-50, 50), st.integers(-5, 5))
def test_check_int_accepts_exactly_the_integers_from_low(value, low):
    if value >= low:
        assert check_int(np.int64(value), "n", low) == value
        assert type(check_int(np.int64(value), "n", low)) is int
    else:
        with pytest.raises(ValueError, match=rf"n must be an integer >= {low}, got {value}\."):
            check_int(value, "n", low)


@pytest.mark.parametrize("value", [True, 2.0, "3", None])
def test_check_int_refuses_what_is_not_an_integer(value):
    with pytest.raises(ValueError, match="n_things must be an integer >= 1"):
        check_int(value, "n_things", 1)


@given(st.floats(-2, 3) | st.sampled_from([math.nan, math.inf, -math.inf]) | st.integers(-2, 3))
def test_check_real_and_is_real_in_agree_on_the_interval(value):
    inside = math.isfinite(value) and 0 <= value < 1
    assert is_real_in(value, 0, 1, high_inclusive=False) == inside
    if inside:
        assert check_real(value, "rate", 0, 1, high_inclusive=False) == float(value)
    else:
        with pytest.raises(ValueError, match=r"rate must be a number in \[0, 1\), got"):
            check_real(value, "rate", 0, 1, high_inclusive=False)


def test_bool_is_not_a_number():
    assert not is_real_in(True, 0, 1)
    with pytest.raises(ValueError, match=r"noise must be a number in \[0.0, 1.0\]"):
        check_real(False, "noise", 0.0, 1.0)


@pytest.mark.parametrize("generate, argument", [
    (lambda: make_shape_scenes(0), "n_scenes"),
    (lambda: make_shape_scenes(2, noise=1.5), "noise"),
    (lambda: make_triangle_graphs(True), "n_graphs"),
    (lambda: make_triangle_graphs(5, edge_probability=1.5), "edge_probability"),
    (lambda: make_wearable_cohort(n_people=2.0), "n_people"),
    (lambda: make_wearable_cohort(n_people=2, label_noise=0.6), "label_noise"),
])
def test_every_generator_names_the_argument_it_refuses(generate, argument):
    with pytest.raises(ValueError, match=argument):
        generate()
