"""Test-session settings that must be in place before skicml is imported."""

import os

# One intra-op thread: torch's default of two makes scikit-learn's checks ten
# times slower on two cores (OpenMP spinning on tiny tensors).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import torch  # noqa: E402

# GPU kernels run on CPU tensors in Triton's interpreter when no GPU is here;
# the variable must be set before any kernel module is imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

torch.set_num_threads(1)

from skicml import _weights  # noqa: E402

# Families register their shipped files when first imported, and tests swap
# the registry for an empty one; fill the real one before any test can, so a
# family first imported under a swapped registry is not lost from it.
_weights.available_weights()
