"""A Hugging Face hub cache and a torch.hub cache laid out on disk, for tests that never touch the network.

The layout is huggingface_hub's own::

    <cache>/models--<owner>--<name>/blobs/<sha256>
    <cache>/models--<owner>--<name>/snapshots/<commit>/<filename> -> ../../blobs/<sha256>
    <cache>/models--<owner>--<name>/refs/<revision>                 (holds <commit>)

so that ``huggingface_hub.try_to_load_from_cache`` and ``hf_hub_download``
with ``HF_HUB_OFFLINE=1`` find the files as they would find real downloads.
A URL's file lies where torch.hub (or, for open_clip's URLs, open_clip)
would have put it.
"""

import hashlib
import os
from pathlib import Path

from skicml import _weights


class FakeHub:
    """Writes files into the caches the published models are read from."""

    def __init__(self, hub_cache, torch_home):
        self.hub_cache = Path(hub_cache)
        self.torch_home = Path(torch_home)

    def add(self, repo_id, filename, write, revision="main"):
        """Write ``filename`` of ``repo_id`` at ``revision`` with ``write(path)``; return its snapshot path."""
        repo = self.hub_cache / ("models--" + repo_id.replace("/", "--"))
        commit = hashlib.sha1(f"{repo_id}@{revision}".encode()).hexdigest()
        (repo / "blobs").mkdir(parents=True, exist_ok=True)
        staging = repo / "blobs" / "incoming"
        write(staging)
        blob = repo / "blobs" / hashlib.sha256(staging.read_bytes()).hexdigest()
        os.replace(staging, blob)
        snapshot = repo / "snapshots" / commit / filename
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        if snapshot.exists() or snapshot.is_symlink():
            snapshot.unlink()
        try:
            snapshot.symlink_to(os.path.relpath(blob, snapshot.parent))
        except OSError:  # no symlinks here: huggingface_hub copies too
            snapshot.write_bytes(blob.read_bytes())
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / revision).write_text(commit)
        return snapshot

    def put(self, name, write, model_name=None):
        """Write the file of the published ``name`` (``write(path)``) where its cache keeps it."""
        entry = _weights.published_weights(name, model_name=model_name)
        assert entry is not None, name
        if entry.url:
            target = Path(entry._url_target())
            target.parent.mkdir(parents=True, exist_ok=True)
            write(target)
            return target
        return self.add(entry.repo_id, entry.filenames[0], write, entry.revision or "main")
