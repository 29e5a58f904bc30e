"""Expert Race under torch.distributed: the training threshold is taken over every rank's batch."""

import json
import textwrap

import pytest
import torch

from skicml.nn.moe import race_threshold

pytestmark = pytest.mark.distributed

WORKER = textwrap.dedent('''
    import json, os, sys
    import torch
    import torch.distributed as dist
    from skicml.base import seeded
    from skicml.nn import ExpertRaceMoE

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    with seeded(0):
        moe = ExpertRaceMoE(8, n_experts=4, top_k=2)
    # Ranks hold batches of different sizes, as the last batch of an epoch may.
    x = torch.randn(2 + rank, 5, 8, generator=torch.Generator().manual_seed(rank))
    _, aux = moe(x)
    with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as f:
        json.dump({"tau": float(aux["tau"]), "scores": aux["logits"].detach().reshape(-1).tolist(),
                   "selected": int(aux["mask"].sum())}, f)
    dist.barrier()
    dist.destroy_process_group()
''')


def test_the_threshold_is_global_over_ranks(tmp_path, torchrun):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    torchrun(script, tmp_path)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["tau"] == ranks[1]["tau"]
    scores = torch.tensor(ranks[0]["scores"] + ranks[1]["scores"]).reshape(-1, 4)
    assert ranks[0]["tau"] == pytest.approx(float(race_threshold(scores, 2.0)))
    # K = 2 experts a token over both ranks' 25 tokens, shared unevenly between them.
    assert ranks[0]["selected"] + ranks[1]["selected"] == 2 * (10 + 15)
