"""Sphinx configuration of the skicml documentation (builds offline)."""

import os
import sys

sys.path.insert(0, os.path.abspath(".."))
os.environ.setdefault("MPLBACKEND", "Agg")

import skicml  # noqa: E402

project = "skicml"
author = "the skicml developers"
copyright = "2026, the skicml developers"
version = release = skicml.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

autosummary_generate = True
autodoc_default_options = {
    "members": True,
    "inherited-members": False,
    # scikit-learn's generated metadata-routing methods and mixin methods
    # carry docstrings with references into scikit-learn's own docs.
    "exclude-members": "set_score_request, set_fit_request, set_predict_request, set_transform_request, "
                       "set_predict_proba_request, set_output, score, fit_transform, get_metadata_routing",
}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "matplotlib_animations": False,
}

templates_path = ["_templates"]
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*/*.ipynb"]
html_theme = "alabaster"
html_theme_options = {"description": "ICML 2025 methods as scikit-learn estimators"}
html_static_path = []
# No intersphinx: the build must work without network access.
