"""Common tests of every public skicml estimator.

scikit-learn's checks run through ``estimator_checks_generator`` so that each
check is its own test; checks an estimator declares it cannot pass (in its
tags, with a reason) are expected failures. Because scikit-learn silently
yields no checks for an estimator whose tags deny 2-D input, the suite also
asserts that every estimator really ran at least ``MIN_CHECKS`` of them.
Every estimator declares its parameter rules; scikit-learn's
``check_param_validation`` (which ``check_estimator`` does not run) checks
that ``fit`` enforces them.
"""

import inspect
from collections import Counter

import pytest
from sklearn.utils.estimator_checks import (
    check_estimator,
    check_param_validation,
    estimator_checks_generator,
)

from skicml.utils._test_common import FEWER_CHECKS, expected_failed_checks, estimators_under_test
from skicml.utils.estimator_checks import yield_skicml_checks

MIN_CHECKS = 30
ESTIMATORS = estimators_under_test()
_PASSED = Counter()


def _check_id(estimator, check):
    name = getattr(check, "__name__", None) or getattr(check, "func").__name__
    return f"{type(estimator).__name__}-{name}"


def _sklearn_checks():
    for estimator in ESTIMATORS:
        for item in estimator_checks_generator(
            estimator, legacy=True, expected_failed_checks=expected_failed_checks(estimator),
            mark="xfail",
        ):
            # A declared failure comes as a pytest.param carrying its xfail mark.
            (est, check), marks = (item.values, item.marks) if hasattr(item, "marks") else (item, ())
            yield pytest.param(est, check, marks=marks, id=_check_id(est, check))


@pytest.mark.parametrize("estimator, check", list(_sklearn_checks()))
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
    _PASSED[type(estimator).__name__] += 1


@pytest.mark.parametrize(
    "estimator", ESTIMATORS, ids=[type(e).__name__ for e in ESTIMATORS]
)
def test_estimator_ran_enough_checks(estimator):
    name = type(estimator).__name__
    passed = _PASSED[name]
    if passed == 0:
        # The checks were deselected in this session: run them all here so that
        # the count is never taken on faith.
        statuses = Counter()

        def record(*, status, **_):
            statuses[status] += 1

        check_estimator(
            estimator, expected_failed_checks=expected_failed_checks(estimator),
            on_fail=None, on_skip=None, callback=record,
        )
        passed = statuses["passed"]
    floor = FEWER_CHECKS.get(name, (MIN_CHECKS, ""))[0]
    assert passed >= floor, (
        f"only {passed} scikit-learn checks passed for {name}; does it deny 2-D input?"
    )


def _skicml_checks():
    for estimator in ESTIMATORS:
        for check in yield_skicml_checks(estimator):
            yield pytest.param(estimator, check, id=_check_id(estimator, check))


@pytest.mark.parametrize("estimator, check", list(_skicml_checks()))
def test_skicml_common(estimator, check):
    check(estimator)


@pytest.mark.parametrize(
    "estimator", ESTIMATORS, ids=[type(e).__name__ for e in ESTIMATORS]
)
def test_parameter_constraints_name_every_constructor_parameter(estimator):
    cls = type(estimator)
    assert "_parameter_constraints" in dir(cls), f"{cls.__name__} declares no _parameter_constraints"
    parameters = set(inspect.signature(cls.__init__).parameters) - {"self"}
    assert set(cls._parameter_constraints) == parameters


@pytest.mark.parametrize(
    "estimator", ESTIMATORS, ids=[type(e).__name__ for e in ESTIMATORS]
)
def test_parameter_constraints_are_enforced(estimator):
    check_param_validation(type(estimator).__name__, estimator)


def test_every_estimator_declares_reasons():
    for estimator in ESTIMATORS:
        for check, reason in expected_failed_checks(estimator).items():
            assert isinstance(reason, str) and len(reason) > 10, (type(estimator).__name__, check)


def test_estimators_left_out_of_the_common_checks_say_why_and_where_they_are_tested():
    from skicml.utils import all_estimators
    from skicml.utils._test_common import NOT_COMMON_TESTED

    names = {name for name, _ in all_estimators()}
    for name, reason in NOT_COMMON_TESTED.items():
        assert name in names, f"{name} is not a public estimator"
        assert "tests/" in reason and len(reason) > 40, name


def test_estimators_with_fewer_checks_say_why_and_where_they_are_tested():
    from skicml.utils import all_estimators

    names = {name for name, _ in all_estimators()}
    for name, (floor, reason) in FEWER_CHECKS.items():
        assert name in names, f"{name} is not a public estimator"
        assert 0 < floor < MIN_CHECKS and "tests/" in reason and len(reason) > 40, name
