"""Reference predictors of the physics testbed: one that memorises, one that knows the law.

Both are multi-output regressors from conditioning frames to future frames,
so a video model and they are scored by the same evaluators: the oracle's
out-of-distribution error stays at its in-distribution error (the parse
floor), the case-based predictor's grows with the distance to the nearest
training case, the "case-based generalisation" the paper finds in video
models.
"""


import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.neighbors import NearestNeighbors
from sklearn.utils.validation import check_is_fitted, validate_data

from ...base import warn_user
from ...datasets import PHYSICS_COLORS, PHYSICS_SHAPES, render_videos, simulate_physics
from ...utils.param_validation import Integral, Interval, Real, StrOptions, fit_context
from ._evaluation import parse_object_states

__all__ = ["CaseBasedVideoPredictor", "PhysicsOraclePredictor"]

_CLIP_DOC = """\
    Conditioning clips ``X`` are ``(n_videos, n_cond_frames, H, W, 3)``
    frames (uint8, or floats in [0, 1]) or the same flattened to rows with
    ``frame_shape=(H, W, 3)``; targets ``y`` are the future frames in either
    layout, and predictions come back in the layout and dtype of ``y``.
    Rows without ``frame_shape`` are read as one frame of ``(1, 1,
    n_features)``, which makes any feature matrix a valid input.
"""


_ONE_FRAME = ("PhysicsOraclePredictor: X has one conditioning frame, which shows where the objects are but not how "
              "they move: every object is predicted at rest. Pass at least 2 conditioning frames (3 to tell a "
              "parabola).")


class _ClipInput:
    """Reads conditioning clips and future frames in the 5-D or the flattened layout."""

    def _read_X(self, X, reset, y=None):
        array = np.asarray(X) if not hasattr(X, "tocsr") else X
        if getattr(array, "ndim", 0) == 5:
            clips = _check_frames(array, "X")
            if reset:
                if self.frame_shape is not None and tuple(self.frame_shape) != clips.shape[2:]:
                    raise ValueError(f"X has frames of shape {clips.shape[2:]} but frame_shape={self.frame_shape}.")
                self.frame_shape_ = clips.shape[2:]
                self.n_cond_frames_ = clips.shape[1]
                self.n_features_in_ = int(np.prod(clips.shape[1:]))
                self.input_dtype_ = clips.dtype
            elif clips.shape[1:] != (self.n_cond_frames_, *self.frame_shape_):
                raise ValueError(f"X has clips of shape {clips.shape[1:]}, but the predictor was fitted on "
                                 f"{(self.n_cond_frames_, *self.frame_shape_)} (n_features "
                                 f"{self.n_features_in_}).")
            rows = clips.reshape(len(clips), -1).astype(np.float64)
            if clips.dtype == np.uint8:
                rows /= 255.0
            return clips, rows
        if getattr(array, "ndim", 0) > 2:
            raise ValueError(
                f"X has shape {tuple(array.shape)}; {type(self).__name__} reads clips of shape (n_videos, n_frames, "
                "H, W, 3) (5-D), or the same flattened to 2-D rows with frame_shape=(H, W, 3). One clip is "
                "X[None]; a single frame per clip is X[:, None]."
            )
        rows = validate_data(self, X, reset=reset, dtype=[np.float64, np.float32])
        if reset:
            frame_shape = (1, 1, rows.shape[1]) if self.frame_shape is None else tuple(self.frame_shape)
            size = int(np.prod(frame_shape))
            if rows.shape[1] % size:
                raise ValueError(f"X has {rows.shape[1]} features, not a whole number of frames of shape "
                                 f"{frame_shape} ({size} values each).")
            self.frame_shape_ = frame_shape
            self.n_cond_frames_ = rows.shape[1] // size
            self.input_dtype_ = rows.dtype
        clips = None
        if self._is_video_frame():
            clips = rows.reshape(len(rows), self.n_cond_frames_, *self.frame_shape_)
            if rows.size and (rows.min() < 0 or rows.max() > 255):
                raise ValueError("flattened frames must be intensities in [0, 1] or [0, 255].")
            clips = _check_frames(clips if rows.max(initial=0) <= 1 else clips.astype(np.uint8), "X")
            rows = rows / 255.0 if rows.max(initial=0) > 1 else rows
        return clips, np.asarray(rows, dtype=np.float64)

    def _is_video_frame(self):
        shape = self.frame_shape_
        return len(shape) == 3 and shape[2] == 3 and shape[0] == shape[1] and shape[0] >= 2

    def _read_fit_input(self, X, y):
        """``fit``'s reading of the training clips and targets: ``(clips, rows, targets)``.

        Sets the fitted layout of the clips (``frame_shape_``,
        ``n_cond_frames_``, ...) and of the targets (``y_shape_``,
        ``y_dtype_``); ``targets`` are rows, one per clip.
        """
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None.")
        clips, rows = self._read_X(X, reset=True)
        return clips, rows, self._read_y(y, len(rows))

    def _read_query(self, X):
        """``predict``'s reading of clips, fitted or not: ``(clips, rows)`` in the fitted layout."""
        check_is_fitted(self)
        return self._read_X(X, reset=False)

    def _read_y(self, y, n):
        array = np.asarray(y)
        if array.ndim == 5:
            frames = _check_frames(array, "y")
            self.y_shape_ = frames.shape[1:]
            self.y_dtype_ = frames.dtype
            targets = frames.reshape(len(frames), -1)
        else:
            targets = np.asarray(y, dtype=np.float64)
            if targets.ndim not in (1, 2):
                raise ValueError(f"y must be future frames (n, T, H, W, 3) or a 1-D / 2-D array, got shape "
                                 f"{array.shape}.")
            if not np.all(np.isfinite(targets)):
                raise ValueError("y contains NaN or infinity.")
            self.y_shape_ = targets.shape[1:]
            self.y_dtype_ = targets.dtype
            targets = targets.reshape(len(targets), -1)
        if len(targets) != n:
            raise ValueError(f"X has {n} clips but y has {len(targets)} targets.")
        return targets

    def _as_output(self, rows):
        rows = np.asarray(rows)
        if self.y_dtype_ == np.uint8:
            rows = np.clip(np.rint(rows), 0, 255).astype(np.uint8)
        else:
            rows = rows.astype(self.y_dtype_, copy=False)
        return rows.reshape((len(rows), *self.y_shape_))

    def _future_layout(self):
        """``(n_future_frames, H, W)`` when ``y`` holds frames of the input's shape, else None."""
        if not self._is_video_frame():
            return None
        size = int(np.prod(self.frame_shape_))
        width = int(np.prod(self.y_shape_)) if self.y_shape_ else 1
        if width % size:
            return None
        return width // size

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags


def _check_frames(array, name):
    if array.size == 0:
        raise ValueError(f"{name} is empty: shape {array.shape}.")
    if array.dtype == np.uint8:
        return array
    if np.issubdtype(array.dtype, np.integer):
        if array.min() < 0 or array.max() > 255:
            raise ValueError(f"integer {name} must lie in [0, 255].")
        return array.astype(np.uint8)
    array = np.asarray(array, dtype=np.float64)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or infinity.")
    if array.min() < 0 or array.max() > 1:
        raise ValueError(f"float {name} must be intensities in [0, 1], got [{array.min()}, {array.max()}].")
    return array


def _to_uint8(clips):
    return clips if clips.dtype == np.uint8 else np.rint(clips * 255).astype(np.uint8)


class CaseBasedVideoPredictor(_ClipInput, RegressorMixin, BaseEstimator):
    __doc__ = """Predict the future of the nearest training clip: memorisation as a predictor.

    The "case-based" reference of Kang et al. (ICML 2025): ``fit`` stores
    the training pairs, ``predict`` returns the future frames of the
    training clip whose conditioning frames are nearest (mean of
    ``n_neighbors``). In distribution its error is the grid spacing; out of
    distribution it is the distance to the nearest training case, the
    failure the paper finds in video diffusion models.

""" + _CLIP_DOC + """
    Parameters
    ----------
    n_neighbors : int, default=1
    metric : {"pixel_l2", "state"}, default="pixel_l2"
        Distance between conditioning clips: of their pixels, or of the
        object states parsed from them (positions and radii; video frames only).
    align : {"none", "translate"}, default="none"
        ``"translate"`` shifts the neighbour's future frames (by whole
        pixels) by the offset between the query's and the neighbour's parsed
        positions in the last conditioning frame (video frames only).
    frame_shape : tuple of int or None, default=None
        ``(H, W, 3)`` of flattened frames.
    colors : sequence of str, default=("red", "blue")
        Objects parsed for ``metric="state"`` and ``align="translate"``.
    world_size : float, default=10.0

    Attributes
    ----------
    frame_shape_ : tuple of int
    n_cond_frames_ : int
    y_shape_ : tuple of int
        Shape of one target.
    n_features_in_ : int
    neighbors_ : NearestNeighbors
        The index over the training clips.

    See Also
    --------
    PhysicsOraclePredictor : The law-abiding reference.

    Examples
    --------
    >>> from skicml.datasets import make_physics_videos
    >>> from skicml.video import CaseBasedVideoPredictor
    >>> videos = make_physics_videos("uniform", 20, n_frames=8, random_state=0).videos
    >>> model = CaseBasedVideoPredictor().fit(videos[:, :3], videos[:, 3:])
    >>> bool((model.predict(videos[:5, :3]) == videos[:5, 3:]).all())
    True
    """

    _parameter_constraints = {
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "metric": [StrOptions({"pixel_l2", "state"})],
        "align": [StrOptions({"none", "translate"})],
        "frame_shape": [tuple, list, None],
        "colors": [tuple, list],
        "world_size": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, n_neighbors=1, metric="pixel_l2", align="none", frame_shape=None, colors=("red", "blue"),
                 world_size=10.0):
        self.n_neighbors = n_neighbors
        self.metric = metric
        self.align = align
        self.frame_shape = frame_shape
        self.colors = colors
        self.world_size = world_size

    def _features(self, clips, rows):
        if self.metric == "pixel_l2":
            return rows
        states = parse_object_states(_to_uint8(clips), colors=self.colors, world_size=self.world_size)
        # An absent object is far from every present one, and equal to another absent one.
        return np.nan_to_num(states.reshape(len(states), -1), nan=-self.world_size)

    def _needs_video(self, what):
        if not self._is_video_frame():
            raise ValueError(f"{what} needs video frames (H, W, 3): pass 5-D clips or frame_shape, got frames of "
                             f"shape {self.frame_shape_}.")

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Store the training clips and their futures.

        Parameters
        ----------
        X : array-like of shape (n_videos, n_cond_frames, H, W, 3) or (n_videos, n_features)
        y : array-like of shape (n_videos, n_future_frames, H, W, 3), (n_videos, n_targets) or (n_videos,)

        Returns
        -------
        self
        """
        clips, rows, targets = self._read_fit_input(X, y)
        if self.metric == "state" or self.align == "translate":
            self._needs_video(f"metric={self.metric!r}, align={self.align!r}")
        if self.n_neighbors > len(rows):
            raise ValueError(f"n_neighbors={self.n_neighbors} exceeds the {len(rows)} training clips.")
        self.train_targets_ = targets
        self.neighbors_ = NearestNeighbors(n_neighbors=self.n_neighbors).fit(self._features(clips, rows))
        if self.align == "translate":
            self.train_positions_ = self._last_positions(clips)
        return self

    def _last_positions(self, clips):
        return parse_object_states(_to_uint8(clips[:, -1:]), colors=self.colors, world_size=self.world_size)[:, 0]

    def kneighbors(self, X, n_neighbors=None):
        """Distances to and indices of the nearest training clips.

        Parameters
        ----------
        X : array-like, as in :meth:`fit`
        n_neighbors : int or None, default=None
            ``None``: the fitted ``n_neighbors``.

        Returns
        -------
        distances, indices : ndarray of shape (n_videos, n_neighbors)
        """
        clips, rows = self._read_query(X)
        return self.neighbors_.kneighbors(self._features(clips, rows), n_neighbors=n_neighbors)

    def predict(self, X):
        """The future of the nearest training clips.

        Parameters
        ----------
        X : array-like, as in :meth:`fit`

        Returns
        -------
        y_pred : ndarray in the layout and dtype of the training ``y``
        """
        clips, rows = self._read_query(X)
        _, index = self.neighbors_.kneighbors(self._features(clips, rows))
        futures = self.train_targets_[index].astype(np.float64).mean(axis=1)
        if self.align == "translate" and self._future_layout() is not None:
            futures = self._translate(futures, clips, index[:, 0])
        return self._as_output(futures)

    def _translate(self, futures, clips, nearest):
        """Shift each future by the query's offset from its neighbour, in whole pixels."""
        height, width, _ = self.frame_shape_
        frames = futures.reshape(len(futures), -1, height, width, 3)
        offset = self._last_positions(clips)[..., :2] - self.train_positions_[nearest][..., :2]
        offset = np.nanmean(offset, axis=1)                                   # over objects
        shift_x = np.rint(np.nan_to_num(offset[:, 0]) * width / self.world_size).astype(int)
        shift_y = np.rint(np.nan_to_num(-offset[:, 1]) * height / self.world_size).astype(int)
        background = 255.0 if self.y_dtype_ == np.uint8 else 1.0
        shifted = np.full_like(frames, background)
        for i, (dx, dy) in enumerate(zip(shift_x, shift_y)):
            src_y = slice(max(0, -dy), min(height, height - dy))
            dst_y = slice(max(0, dy), min(height, height + dy))
            src_x = slice(max(0, -dx), min(width, width - dx))
            dst_x = slice(max(0, dx), min(width, width + dx))
            shifted[i, :, dst_y, dst_x] = frames[i, :, src_y, src_x]
        return shifted.reshape(len(futures), -1)


class PhysicsOraclePredictor(_ClipInput, RegressorMixin, BaseEstimator):
    __doc__ = """Predict future frames by the physical law: parse, fit, re-render.

    The law-abiding reference: object states are parsed from the
    conditioning frames (:func:`parse_object_states`), the law fitted to
    them (a constant velocity, a constant acceleration of the height, or
    constant velocities that then collide elastically with masses ``r^2``
    of the parsed radii), and the future re-rendered
    (:func:`skicml.datasets.render_videos`). It learns nothing from
    training data: its error is the parse floor, in distribution and out of
    it alike, the comparison point that makes a video model's OOD gap
    meaningful.

""" + _CLIP_DOC + """
    When the frames are not RGB video frames (a generic feature matrix, or
    targets that are not frames of the input's shape), there is no scene to
    read and the oracle predicts the median training target.

    Parameters
    ----------
    law : {"auto", "uniform", "parabola", "collision"}, default="auto"
        ``"auto"``: a collision when two colours are present, a parabola when
        the fitted vertical acceleration exceeds 0.5 units/s^2 (with at
        least three conditioning frames), uniform motion otherwise.
    frame_shape : tuple of int or None, default=None
    colors : sequence of str, default=("red", "blue")
        The objects to parse and re-render, by colour.
    shape : {"circle", "square", "ring"}, default="circle"
        The shape re-rendered.
    frame_dt : float, default=0.1
    world_size : float, default=10.0
    antialias : {"area", "soft_disc", "none"}, default="area"

    Attributes
    ----------
    frame_shape_ : tuple of int
    n_cond_frames_ : int
    y_shape_ : tuple of int
    n_features_in_ : int
    median_target_ : ndarray
        What is predicted where no scene can be read.

    See Also
    --------
    CaseBasedVideoPredictor : The memorising reference.

    Examples
    --------
    >>> from skicml.datasets import make_physics_videos
    >>> from skicml.video import PhysicsOraclePredictor, velocity_error
    >>> data = make_physics_videos("uniform", 10, v_range=(4.5, 6.0), n_frames=12, random_state=0)
    >>> oracle = PhysicsOraclePredictor().fit(data.videos[:, :3], data.videos[:, 3:])
    >>> future = oracle.predict(data.videos[:, :3])
    >>> errors = velocity_error(future, data.params, "uniform", states_true=data.states)
    >>> bool(errors["vel_error"].mean() < 0.02)
    True
    """

    _parameter_constraints = {
        "law": [StrOptions({"auto", "uniform", "parabola", "collision"})],
        "frame_shape": [tuple, list, None],
        "colors": [tuple, list],
        "shape": [StrOptions(set(PHYSICS_SHAPES))],
        "frame_dt": [Interval(Real, 0, None, closed="neither")],
        "world_size": [Interval(Real, 0, None, closed="neither")],
        "antialias": [StrOptions({"area", "soft_disc", "none"})],
    }

    def __init__(self, law="auto", frame_shape=None, colors=("red", "blue"), shape="circle", frame_dt=0.1,
                 world_size=10.0, antialias="area"):
        self.law = law
        self.frame_shape = frame_shape
        self.colors = colors
        self.shape = shape
        self.frame_dt = frame_dt
        self.world_size = world_size
        self.antialias = antialias

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Read the layout of the clips and of their futures; the law needs no training.

        Parameters
        ----------
        X : array-like of shape (n_videos, n_cond_frames, H, W, 3) or (n_videos, n_features)
        y : array-like of shape (n_videos, n_future_frames, H, W, 3), (n_videos, n_targets) or (n_videos,)

        Returns
        -------
        self
        """
        for color in self.colors:
            if color not in PHYSICS_COLORS:
                raise ValueError(f"colors must be names among {sorted(PHYSICS_COLORS)}, got {color!r}.")
        _, _, targets = self._read_fit_input(X, y)
        self.median_target_ = np.median(targets.astype(np.float64), axis=0)
        self.n_future_frames_ = self._future_layout()
        if self.n_future_frames_ is not None and self.n_cond_frames_ == 1:
            warn_user(_ONE_FRAME, UserWarning)
        return self

    def _warn_unread(self, clips, states):
        """Say which clips the law cannot be read from: no object of ``colors``, or no motion to see."""
        seen = (~np.isnan(states[..., 0])).sum(axis=1)                    # (n_videos, n_objects)
        none = seen.max(axis=1, initial=0) == 0
        drawn = (_to_uint8(clips) < 128).any(axis=(1, 2, 3, 4))
        colors, n = tuple(self.colors), len(clips)
        for rows, what in ((none & drawn, "their conditioning frames hold objects of other colours only, so "
                                          "their predicted futures are blank frames. Pass the colours they show in "
                                          f"colors= (among {sorted(PHYSICS_COLORS)})."),
                           (none & ~drawn, "their conditioning frames are blank, and so are their predicted "
                                           "futures.")):
            if rows.any():
                warn_user(
                    f"{int(rows.sum())} of {n} clips (the first at index {int(np.argmax(rows))}) show no object of "
                    f"colors={colors}: {what}", UserWarning,
                )
        if self.n_cond_frames_ == 1:
            warn_user(_ONE_FRAME, UserWarning)
            return
        once = (seen == 1).any(axis=1)
        if once.any():
            warn_user(
                f"{int(once.sum())} of {n} clips (the first at index {int(np.argmax(once))}) show an object in only "
                "one conditioning frame: it has no velocity to read and is predicted at rest.",
                UserWarning,
            )

    def predict(self, X):
        """Future frames by the fitted law.

        Parameters
        ----------
        X : array-like, as in :meth:`fit`

        Returns
        -------
        y_pred : ndarray in the layout and dtype of the training ``y``
        """
        clips, rows = self._read_query(X)
        if self.n_future_frames_ is None:
            return self._as_output(np.repeat(self.median_target_[None], len(rows), axis=0))
        states = parse_object_states(_to_uint8(clips), colors=self.colors, world_size=self.world_size)
        self._warn_unread(clips, states)
        future, radii = self.extrapolate(states)
        height = self.frame_shape_[0]
        missing = np.isnan(radii)
        videos = render_videos(np.where(missing[:, None, :, None], np.nan, future), np.where(missing, 1.0, radii),
                               colors=list(self.colors), shapes=self.shape, resolution=height,
                               antialias=self.antialias, world_size=self.world_size)
        rows_out = videos.reshape(len(videos), -1).astype(np.float64)
        if self.y_dtype_ != np.uint8:
            rows_out /= 255.0
        return self._as_output(rows_out)

    def extrapolate(self, states):
        """Future positions from parsed conditioning states, by the law.

        Parameters
        ----------
        states : ndarray of shape (n_videos, n_cond_frames, n_objects, 3)
            From :func:`parse_object_states`.

        Returns
        -------
        future : ndarray of shape (n_videos, n_future_frames, n_objects, 2)
        radii : ndarray of shape (n_videos, n_objects)
            NaN for an object never seen.
        """
        check_is_fitted(self)
        n_videos, n_cond, n_objects, _ = states.shape
        times = np.arange(n_cond) * self.frame_dt
        ahead = (n_cond + np.arange(self.n_future_frames_)) * self.frame_dt
        with np.errstate(all="ignore"):
            radii = np.nanmax(np.where(np.isnan(states[..., 2]), -np.inf, states[..., 2]), axis=1)
        radii = np.where(np.isfinite(radii), radii, np.nan)
        future = np.full((n_videos, len(ahead), n_objects, 2), np.nan)
        fits = {}
        for i in range(n_videos):
            for k in range(n_objects):
                seen = ~np.isnan(states[i, :, k, 0])
                if not seen.any():
                    continue
                t, xy = times[seen], states[i, seen, k, :2]
                degree = 1 if seen.sum() >= 2 else 0
                x_fit = np.polyfit(t, xy[:, 0], degree) if degree else np.array([xy[0, 0]])
                y_lin = np.polyfit(t, xy[:, 1], degree) if degree else np.array([xy[0, 1]])
                y_quad = np.polyfit(t, xy[:, 1], 2) if seen.sum() >= 3 else None
                fits[i, k] = (x_fit, y_lin, y_quad)
        for i in range(n_videos):
            present = [k for k in range(n_objects) if (i, k) in fits]
            law = self._law(fits, i, present)
            if law == "collision":
                future[i] = self._collide(fits, i, present, radii[i], ahead, n_objects)
                continue
            for k in present:
                x_fit, y_lin, y_quad = fits[i, k]
                y_fit = y_quad if law == "parabola" and y_quad is not None else y_lin
                future[i, :, k, 0] = np.polyval(x_fit, ahead)
                future[i, :, k, 1] = np.polyval(y_fit, ahead)
        return future, radii

    def _law(self, fits, i, present):
        if self.law != "auto":
            return self.law if (self.law != "collision" or len(present) >= 2) else "uniform"
        if len(present) >= 2:
            return "collision"
        if present:
            y_quad = fits[i, present[0]][2]
            if y_quad is not None and abs(2 * y_quad[0]) > 0.5:
                return "parabola"
        return "uniform"

    def _collide(self, fits, i, present, radii, ahead, n_objects):
        """The 1-D elastic law from the two balls' fitted velocities at the last conditioning frame."""
        out = np.full((len(ahead), n_objects, 2), np.nan)
        left, right = sorted(present[:2], key=lambda k: np.polyval(fits[i, k][0], ahead[0]))
        now = ahead[0] - self.frame_dt
        x1, x2 = (np.polyval(fits[i, k][0], now) for k in (left, right))
        v1, v2 = (fits[i, k][0][0] if len(fits[i, k][0]) > 1 else 0.0 for k in (left, right))
        r1, r2 = radii[left], radii[right]
        # Parse noise may leave the balls overlapping by a hair at contact.
        x2 = max(x2, x1 + r1 + r2)
        height = np.mean([np.polyval(fits[i, k][1], now) for k in (left, right)])
        params = {"x1": [x1], "x2": [x2], "y1": [height], "r1": [r1], "r2": [r2], "vx1": [v1], "vx2": [v2]}
        states = simulate_physics("collision", params, n_frames=len(ahead), frame_dt=self.frame_dt,
                                  world_size=self.world_size, time_offset=self.frame_dt)[0]
        out[:, left], out[:, right] = states[:, 0], states[:, 1]
        return out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # On a generic feature matrix there is no scene to read: it predicts
        # the median target, which scores near zero.
        tags.regressor_tags.poor_score = True
        return tags
