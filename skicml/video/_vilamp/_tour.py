"""The ViLAMP family's row of ``skicml tour``."""

import time

from ...utils.tour import TourEntry

_N_FRAMES = 1000
_N_PATCHES = 49
_REDUCTION = 10


def _run():
    import numpy as np

    from ...datasets import make_needle_embeddings
    from ._compressor import ViLAMPCompressor
    from ._layout import VideoEmbedding

    # Long videos with many query-relevant events of unequal strength; every
    # method keeps a tenth of the patch tokens.
    data = make_needle_embeddings(8, n_frames=_N_FRAMES, n_patches=_N_PATCHES, dim=32, n_scenes=48, n_needles=24,
                                  needle_len=(2, 10), salient_patches=(2, 6), random_state=0)
    videos = [VideoEmbedding(f, q, p) for f, q, p in zip(data.frames, data.queries, data.patches)]
    tokens = _N_FRAMES * _N_PATCHES // _REDUCTION
    keyframes = (tokens - _N_FRAMES) // (_N_PATCHES - 1)

    def recall(compressor):
        start = time.perf_counter()
        chosen = compressor.fit(videos).get_selection(videos)
        hits = [any(f in set(keys.tolist()) for f in range(a, b)) for keys, events in zip(chosen, data.events)
                for a, b in events]
        return float(np.mean(hits)), time.perf_counter() - start

    score, seconds = recall(ViLAMPCompressor(max_keyframes=keyframes, fill="gaps"))
    baseline, _ = recall(ViLAMPCompressor(max_keyframes=keyframes, selector="uniform"))
    return {"score": score, "baseline_score": baseline, "seconds": seconds}


def tour_entries():
    return [TourEntry("ViLAMPCompressor", f"needle videos, {_N_FRAMES} frames, 1/{_REDUCTION} of the tokens",
                      "event recall (higher is better)", "uniform keyframes", _run)]
