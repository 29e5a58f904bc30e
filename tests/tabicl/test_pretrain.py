"""Pretraining TabICL on the prior: learning, DDP, export.

The step loop's exact resumption is tested in tests/utils/test_training.py.
"""

import json
import textwrap

import pytest
import torch
import torch.nn.functional as F

from skicml import _weights
from skicml.tabicl._model import TabICLModel
from skicml.tabicl._pretrain import PRESETS, _PriorSource, main, prior_loss
from skicml.tabicl.prior import PriorConfig, TabularPrior
from skicml.utils.training import pretrain

CONFIG = PriorConfig(max_features=6, min_rows=32, max_rows=48)


def test_short_pretraining_beats_uniform_guessing():
    # Spreading probability evenly over the classes present in the context
    # scores mean(log K); beating it needs the labels of the context rows.
    held_out = TabularPrior(CONFIG, seed=99).sample(32)
    torch.manual_seed(0)
    model = TabICLModel(**PRESETS["tiny"])
    with torch.no_grad():
        before = float(prior_loss(model, held_out))
    source = _PriorSource(TabularPrior(CONFIG, seed=0), batch_size=8)
    pretrain(model, source, prior_loss, steps=160, lr=3e-3, verbose=0, device="cpu")
    with torch.no_grad():
        after = float(prior_loss(model, held_out))
    uniform_over_present = float(torch.log(held_out["n_classes"].float()).mean())
    assert after < before
    assert after < uniform_over_present


def test_prior_loss_drops_shared_padding_exactly():
    # A batch whose tables are all narrower than the padded width: the loss
    # must equal the loss over the full padded width (masked columns).
    torch.manual_seed(0)
    model = TabICLModel(**PRESETS["tiny"])
    for layer in model.modules():  # the zero-initialised projections would hide the padding
        if isinstance(layer, torch.nn.Linear):
            torch.nn.init.normal_(layer.weight, std=0.3)
    batch = TabularPrior(PriorConfig(max_features=12, min_rows=32, max_rows=48), seed=3).sample(4)
    batch["n_features"] = batch["n_features"].clamp(max=5)
    batch["X"][..., 5:] = 0.0
    wide = {**batch, "X": F.pad(batch["X"], (0, 20))}
    with torch.no_grad():
        n_train = batch["n_train"]
        padded = model(wide["X"], batch["y"][:, :n_train], n_features=batch["n_features"])
        expected = F.cross_entropy(padded.flatten(0, 1), batch["y"][:, n_train:].flatten())
        assert float(prior_loss(model, wide)) == pytest.approx(float(expected), abs=1e-5)


def test_recipe_exports_a_loadable_model(tmp_path, capsys):
    checkpoint, out = tmp_path / "run.ckpt", tmp_path / "model.pt"
    assert main(["--preset", "tiny", "--steps", "3", "--batch-size", "2", "--min-rows", "32", "--max-rows", "40",
                 "--max-features", "5", "--eval-every", "0", "--checkpoint", str(checkpoint),
                 "--export", str(out), "--quiet"]) == 0
    payload = _weights.load_weights(out)
    provenance = payload["provenance"]
    assert provenance["steps"] == 3 and provenance["preset"] == "tiny"
    assert "--preset tiny" in provenance["recipe"] and "real_accuracy" in provenance
    assert json.loads(provenance["prior"])["max_features"] == 5
    model = TabICLModel(**payload["config"])
    model.load_state_dict(payload["state_dict"])



def test_init_from_warm_starts_a_fresh_schedule(tmp_path):
    first, out = tmp_path / "first.ckpt", tmp_path / "first.pt"
    common = ["--preset", "tiny", "--batch-size", "2", "--min-rows", "32", "--max-rows", "40",
              "--max-features", "5", "--eval-every", "0", "--quiet"]
    main(common + ["--steps", "2", "--checkpoint", str(first), "--export", str(out)])
    for source in (first, out):  # a checkpoint or an exported weights file
        second = tmp_path / f"second-{source.suffix[1:]}.ckpt"
        main(common + ["--steps", "0", "--binary-prob", "0.2", "--checkpoint", str(second),
                       "--init-from", str(source)])
        state = torch.load(second, weights_only=True)
        assert state["history"]["step"] == 0
        for name, weights in _weights.load_weights(out)["state_dict"].items():
            torch.testing.assert_close(state["model"][name], weights.float(), msg=name)
    with pytest.raises(FileNotFoundError):
        main(common + ["--steps", "0", "--checkpoint", str(tmp_path / "x.ckpt"),
                       "--init-from", str(tmp_path / "missing.pt")])


def test_row_blocks_deepen_a_model_without_changing_its_predictions(tmp_path):
    from skicml.tabicl._pretrain import load_deepening_rows

    torch.manual_seed(0)
    shallow = TabICLModel(**PRESETS["tiny"])
    for p in shallow.parameters():  # trained-looking weights: no zero output projections
        torch.nn.init.normal_(p, std=0.2)
    deep = load_deepening_rows(TabICLModel(**dict(PRESETS["tiny"], row_num_blocks=3)), shallow.state_dict())
    X, y = torch.randn(2, 30, 4), torch.randint(0, 3, (2, 20))
    with torch.no_grad():
        torch.testing.assert_close(deep(X, y), shallow(X, y))
    torch.testing.assert_close(deep.row_interactor.tf_row.blocks[2].linear1.weight,
                               shallow.row_interactor.tf_row.blocks[0].linear1.weight)
    with pytest.raises(ValueError, match="can only be deepened"):
        load_deepening_rows(TabICLModel(**PRESETS["tiny"]), deep.state_dict())
    # the CLI: --row-blocks with --init-from records the deeper architecture
    source, out = tmp_path / "shallow.ckpt", tmp_path / "deep.pt"
    torch.save({"model": shallow.state_dict()}, source)
    main(["--preset", "tiny", "--row-blocks", "2", "--init-from", str(source), "--steps", "0", "--batch-size", "2",
          "--min-rows", "32", "--max-rows", "40", "--max-features", "5", "--eval-every", "0", "--quiet",
          "--checkpoint", str(tmp_path / "deep.ckpt"), "--export", str(out)])
    payload = _weights.load_weights(out)
    assert payload["config"]["row_num_blocks"] == 2
    exported = TabICLModel(**payload["config"])
    exported.load_state_dict(payload["state_dict"])
    with torch.no_grad():
        torch.testing.assert_close(exported(X, y), shallow(X, y), atol=1e-3, rtol=1e-3)


def test_prior_flags_reach_the_recorded_prior(tmp_path):
    out = tmp_path / "w.pt"
    main(["--preset", "tiny", "--batch-size", "2", "--min-rows", "32", "--max-rows", "40", "--max-features", "5",
          "--binary-prob", "0.3", "--categorical-prob", "0.7", "--eval-every", "0", "--quiet", "--steps", "1",
          "--checkpoint", str(tmp_path / "run.ckpt"), "--export", str(out)])
    prior = json.loads(_weights.load_weights(out)["provenance"]["prior"])
    assert (prior["binary_prob"], prior["categorical_prob"], prior["max_features"]) == (0.3, 0.7, 5)


WORKER = textwrap.dedent('''
    import json, os, sys
    import torch
    import torch.distributed as dist
    from skicml.tabicl._model import TabICLModel
    from skicml.tabicl._pretrain import PRESETS, _PriorSource, prior_loss
    from skicml.tabicl.prior import PriorConfig, TabularPrior
    from skicml.utils.training import pretrain

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = TabICLModel(**PRESETS["tiny"])
    source = _PriorSource(TabularPrior(PriorConfig(max_features=5, min_rows=32, max_rows=40), seed=rank), 2)
    history = pretrain(model, source, prior_loss, steps=3, lr=3e-3, verbose=0, device="cpu",
                       checkpoint_path=os.path.join(sys.argv[1], "ddp.ckpt"))
    flat = torch.cat([p.detach().flatten() for p in model.parameters()]).tolist()
    json.dump({"params": flat, "items": history["items"]}, open(os.path.join(sys.argv[1], f"{rank}.json"), "w"))
    dist.destroy_process_group()
''')


@pytest.mark.distributed
def test_ddp_pretraining_under_torchrun(tmp_path, torchrun):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    torchrun(script, tmp_path)
    ranks = [json.loads((tmp_path / f"{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["params"] == pytest.approx(ranks[1]["params"], abs=1e-6)
    assert ranks[0]["items"] == 3 * 2 * 2  # steps x tables per rank x ranks
    assert (tmp_path / "ddp.ckpt").exists()
