"""
=========================================
A synthetic cohort of wearable behavior
=========================================

:func:`~skicml.datasets.make_wearable_cohort` simulates people wearing a watch
and carrying a phone: each sample is one week of 168 hourly values of
behavioral variables (steps, energy, heart rate, HRV, sleep, ...) with NaN
where nothing was recorded. Traits (age, fitness, chronotype), circadian and
weekend rhythms, health states (sleep disorder, beta blockers, pregnancy,
infections) and layered missingness (charging, days off the wrist, night-only
sensors) are all part of the generator.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np

from skicml.datasets import make_wearable_cohort, wearable_variables

X, meta, y_static, y_weekly = make_wearable_cohort(n_people=200, n_weeks=4, random_state=0)
variables = wearable_variables("core")
print(X.shape, "weeks x hours x variables")
print(variables[["name", "unit", "schedule"]].to_string(index=False))
print(y_static.head())

# %%
# One week of one person: each variable z-scored over the cohort so that they
# share a colour scale; white cells are missing.
mean = np.nanmean(X, axis=(0, 1))
std = np.nanstd(X, axis=(0, 1)) + 1e-9
week = (X[3] - mean) / std
fig, ax = plt.subplots(figsize=(10, 4))
image = ax.imshow(np.ma.masked_invalid(week.T), aspect="auto", cmap="viridis", vmin=-2, vmax=3,
                  interpolation="nearest")
ax.set_yticks(range(len(variables)), variables["name"], fontsize=7)
ax.set_xticks(range(0, 169, 24), ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun", ""])
ax.set_xlabel("hour of the week")
fig.colorbar(image, ax=ax, label="z-score")
fig.tight_layout()

# %%
# How much is missing, by variable: hourly sensors lose the charging hours and
# the days off the wrist; nightly and sparse ones are missing by design.
observed = (~np.isnan(X)).mean(axis=(0, 1))
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.barh(variables["name"], observed)
ax.set_xlabel("share of hours observed")
fig.tight_layout()

# %%
# The circadian rhythm of steps, averaged over the cohort.
steps = X[..., list(variables["name"]).index("steps_watch")]
fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(np.nanmean(steps.reshape(len(X), 7, 24), axis=(0, 1)))
ax.set_xlabel("hour of the day")
ax.set_ylabel("mean steps per hour")
fig.tight_layout()
plt.show()
