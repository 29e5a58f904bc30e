"""The shared training loop under DDP: two processes, gloo, launched by torchrun."""

import json
import textwrap

import pytest

pytestmark = pytest.mark.distributed

WORKER = textwrap.dedent('''
    import json, os, sys
    import numpy as np
    import torch
    import torch.distributed as dist
    from skicml.base import seeded
    from skicml.utils.training import fit_module

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    rng = np.random.RandomState(0)
    X = torch.from_numpy(rng.randn(203, 4).astype(np.float32))
    y = (X[:, 0] - X[:, 2] > 0).long()
    with seeded(0):
        module = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    module, history = fit_module(
        module, X, y, max_epochs=int(sys.argv[2]), batch_size=16, lr=1e-2,
        validation_fraction=0.2, stratify=True, n_iter_no_change=int(sys.argv[3]), seed=0,
    )
    with torch.no_grad():
        accuracy = float((module(X).argmax(1) == y).float().mean())
    flat = torch.cat([p.detach().flatten() for p in module.parameters()]).tolist()
    with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as f:
        json.dump({"params": flat, "accuracy": accuracy, "epochs": history.n_epochs,
                   "valid": history.valid_loss}, f)
    # Both ranks meet before tearing gloo down: a rank that exits while its
    # peer's gloo threads still talk to it can abort the peer (SIGABRT,
    # "terminate called without an active exception"; seen once in CI).
    dist.barrier()
    dist.destroy_process_group()
''')


def _run(tmp_path, torchrun, max_epochs, patience):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    torchrun(script, tmp_path, max_epochs, patience)
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]


def test_ddp_training_keeps_ranks_in_step(tmp_path, torchrun):
    rank0, rank1 = _run(tmp_path, torchrun, max_epochs=40, patience=4)
    # DDP averages gradients, so both ranks hold the same weights...
    assert rank0["params"] == pytest.approx(rank1["params"], abs=1e-6)
    # ...and early stopping, fed the rank-averaged validation loss, stops both
    # at the same epoch (a rank stopping alone would hang the other).
    assert rank0["epochs"] == rank1["epochs"]
    assert rank0["valid"] == pytest.approx(rank1["valid"])
    assert rank0["accuracy"] > 0.9
