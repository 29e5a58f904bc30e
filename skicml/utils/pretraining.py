"""The step loop of the ``skicml pretrain`` recipes (re-exported) and their shared run options.

:func:`pretrain` lives in :mod:`skicml.utils.training`, beside the epoch loop
the estimators train with; it stays importable from here, where the recipes
and users found it. :func:`add_run_options` declares the options every
resumable recipe takes, once.
"""

from .training import pretrain

__all__ = ["add_run_options", "pretrain"]


def add_run_options(parser, what="model"):
    """Add the options of a resumable recipe to its ``argparse`` parser.

    ``--checkpoint`` (the resumable training state, a file), ``--max-minutes``
    (stop early; a later call with the same checkpoint resumes), ``--export``
    (where to write the shippable file), ``--threads`` (torch's intra-op
    threads) and ``--quiet``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
    what : str, default="model"
        What the exported file holds, for the help text.

    Returns
    -------
    argparse.ArgumentParser
        ``parser``, for chaining.

    Examples
    --------
    >>> import argparse
    >>> from skicml.utils.pretraining import add_run_options
    >>> args = add_run_options(argparse.ArgumentParser()).parse_args(["--max-minutes", "5"])
    >>> args.max_minutes, args.checkpoint, args.quiet
    (5.0, None, False)
    """
    parser.add_argument("--checkpoint", default=None, help="resumable training state (a file)")
    parser.add_argument("--max-minutes", type=float, default=None, help="stop early; a later call resumes")
    parser.add_argument("--export", default=None, help=f"write the shippable {what} file here")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--quiet", action="store_true")
    return parser
