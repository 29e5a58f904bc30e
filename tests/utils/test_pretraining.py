"""The recipes' one runner (run_recipe) on a toy recipe: resume, warm start, export, provenance.

Each recipe's own tests (tests/<family>/test_pretrain*.py) run it at a tiny
size; here the runner's steps are checked once, on a stream of random
regression batches.
"""

import argparse
import json
import textwrap

import pytest
import torch

from skicml.utils.pretraining import (
    RecipeRun,
    add_run_options,
    load_model_state,
    metrics_line,
    recipe_provenance,
    run_recipe,
)


class _Stream:
    """Batch ``i`` is drawn from its own seed: the state is the batch counter."""

    def __init__(self, seed):
        self.seed, self.index = seed, 0

    def sample(self):
        self.index += 1
        generator = torch.Generator().manual_seed(1000 * self.seed + self.index)
        x = torch.randn(16, 3, generator=generator)
        return x, x @ torch.tensor([[1.0], [-2.0], [0.5]]) + 0.1 * torch.randn(16, 1, generator=generator)

    def state_dict(self):
        return {"index": self.index}

    def load_state_dict(self, state):
        self.index = int(state["index"])


def _parser():
    parser = argparse.ArgumentParser(prog="skicml pretrain toy")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-every", type=int, default=0)
    parser.add_argument("--init-from", default=None)
    return add_run_options(parser)


def _loss(model, batch):
    x, y = batch
    return torch.nn.functional.mse_loss(model(x), y)


def _export(run):
    provenance = recipe_provenance(run, ("steps", "lr", "seed", "final_loss", "threads"), data="toy stream")
    torch.save({"state_dict": run.model.state_dict(), "provenance": provenance}, run.args.export)


def _main(argv, calls=None, **pieces):
    """The toy recipe's main; ``calls`` collects which pieces ran."""
    calls = [] if calls is None else calls

    def build_model(run):
        calls.append("build_model")
        # Dropout draws from the global generator: resuming must restore it.
        return torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Dropout(0.2), torch.nn.Linear(8, 1))

    def finish(run):
        calls.append("finish")
        return {"weight_norm": float(run.model[0].weight.detach().norm())}

    def export(run):
        calls.append("export")
        assert run.final is not None and run.is_main and run.finished
        _export(run)

    args = _parser().parse_args(argv)
    options = dict(build_model=build_model, make_source=lambda run: _Stream(run.args.seed), loss=_loss,
                   finish=finish, export=export)
    return run_recipe(args, argv, "toy", **{**options, **pieces})


def _weights(path):
    return torch.load(path, weights_only=True)["state_dict"]


def test_an_interrupted_run_resumed_ends_with_the_uninterrupted_weights(tmp_path, capsys):
    straight = _main(["--export", str(tmp_path / "straight.pt"), "--quiet"])
    checkpoint, resumed = str(tmp_path / "run.ckpt"), tmp_path / "resumed.pt"
    common = ["--checkpoint", checkpoint, "--export", str(resumed), "--quiet"]
    calls = []
    first = _main(common + ["--max-minutes", "0"], calls)  # stops after one step
    assert first["step"] == 1 and not resumed.exists() and calls == ["build_model"]
    assert "stopped at step 1 of 6; run the same command again to resume" in capsys.readouterr().out
    history = _main(common, calls)
    assert calls == ["build_model", "build_model", "finish", "export"]
    assert history["loss"] == straight["loss"]
    a, b = _weights(tmp_path / "straight.pt"), _weights(resumed)
    for name in a:
        torch.testing.assert_close(b[name], a[name], rtol=0, atol=0, msg=name)
    provenance = torch.load(resumed, weights_only=True)["provenance"]
    assert list(provenance) == ["recipe", "data", "steps", "lr", "seed", "final_loss", "threads"]
    assert provenance["recipe"] == "skicml pretrain toy --checkpoint run.ckpt --export resumed.pt --quiet"
    assert provenance["steps"] == 6 and provenance["seed"] == 0 and provenance["lr"] == 0.05


def test_evaluations_are_described_after_the_loop(capsys):
    seen = []

    def evaluate(model, step):
        seen.append((step, model.training))
        return {"loss": 0.25}

    _main(["--eval-every", "2", "--quiet"], evaluate=evaluate, describe=metrics_line)
    assert seen == [(2, False), (4, False), (6, False)]
    assert "step 2: loss 0.250\nstep 4: loss 0.250\nstep 6: loss 0.250\n" in capsys.readouterr().out


def test_init_from_warm_starts_unless_the_checkpoint_exists(tmp_path):
    first = tmp_path / "first.ckpt"
    _main(["--steps", "2", "--checkpoint", str(first), "--quiet"])
    trained = load_model_state(first)
    loaded = []
    second = tmp_path / "second.ckpt"
    argv = ["--steps", "0", "--checkpoint", str(second), "--init-from", str(first), "--quiet"]
    _main(argv, warm_start=lambda model, state: loaded.append(set(state)) or model.load_state_dict(state))
    assert loaded == [set(trained)]
    state = torch.load(second, weights_only=True)
    assert state["history"]["step"] == 0
    for name, tensor in trained.items():
        torch.testing.assert_close(state["model"][name], tensor)
    # The checkpoint exists now: the run resumes it and ignores --init-from.
    _main(argv, warm_start=lambda model, state: loaded.append("again"))
    assert loaded == [set(trained)]
    with pytest.raises(FileNotFoundError):
        _main(["--steps", "0", "--init-from", str(tmp_path / "missing.pt"), "--quiet"])


def test_export_now_exports_the_checkpoint_as_it_is(tmp_path):
    checkpoint = str(tmp_path / "run.ckpt")
    _main(["--checkpoint", checkpoint, "--max-minutes", "0", "--quiet"])
    calls = []
    history = _main(["--checkpoint", checkpoint, "--export-now", "--export", str(tmp_path / "now.pt"), "--quiet"],
                    calls, export=lambda run: calls.append("export") or _export(run))
    assert history["step"] == 1 and calls == ["build_model", "finish", "export"]
    torch.testing.assert_close(_weights(tmp_path / "now.pt")["0.weight"], load_model_state(checkpoint)["0.weight"])
    assert torch.load(tmp_path / "now.pt", weights_only=True)["provenance"]["steps"] == 1


@pytest.mark.parametrize("checkpoint", [None, "missing.ckpt"])
def test_export_now_without_a_checkpoint_names_the_option(tmp_path, checkpoint):
    argv = ["--export-now", "--export", str(tmp_path / "now.pt"), "--quiet"]
    if checkpoint is not None:
        argv += ["--checkpoint", str(tmp_path / checkpoint)]
    with pytest.raises(ValueError, match="--export-now exports the --checkpoint"):
        _main(argv)
    assert not (tmp_path / "now.pt").exists()


def test_provenance_names_its_standard_keys():
    run = RecipeRun(argparse.Namespace(seed=3, steps=4, batch_size=8), "toy", ["--seed", "3"])
    run.history = {"step": 4, "loss": [2.0, 1.0, 1.0, 1.0], "seconds": 90.0, "items": 32}
    provenance = recipe_provenance(run, ("steps", "final_loss", "train_minutes"), final_loss=1.5, data="x")
    assert provenance == {"recipe": "skicml pretrain toy --seed 3", "data": "x", "steps": 4, "final_loss": 1.5,
                          "train_minutes": 1.5}
    assert recipe_provenance(run, (), recipe="skicml pretrain toy --first-call") == {
        "recipe": "skicml pretrain toy --first-call"}
    with pytest.raises(ValueError, match="Unknown provenance keys.*'tables'"):
        recipe_provenance(run, ("steps", "tables"))



WORKER = textwrap.dedent('''
    import argparse, json, os, sys
    import torch
    import torch.distributed as dist
    from skicml.utils.pretraining import add_run_options, run_recipe

    class Stream:
        def __init__(self, rank):
            self.generator = torch.Generator().manual_seed(rank)
        def sample(self):
            x = torch.randn(4, 3, generator=self.generator)
            return x, x.sum(1, keepdim=True)
        def state_dict(self):
            return {"generator": self.generator.get_state()}
        def load_state_dict(self, state):
            self.generator.set_state(state["generator"])

    folder, seen = sys.argv[1], {"exports": []}

    def build_model(run):
        seen["model"] = torch.nn.Linear(3, 1)
        return seen["model"]

    def make_source(run):
        seen.update(rank=run.rank, world_size=run.world_size, initialized=dist.is_initialized())
        return Stream(run.rank)

    def export(run):
        seen["exports"].append(run.rank)
        torch.save(run.model.state_dict(), run.args.export)

    torch.set_num_threads(1)
    parser = argparse.ArgumentParser()
    for option, default in (("--steps", 3), ("--lr", 0.1), ("--seed", 0)):
        parser.add_argument(option, type=type(default), default=default)
    argv = ["--checkpoint", os.path.join(folder, "run.ckpt"), "--export", os.path.join(folder, "model.pt"), "--quiet"]
    history = run_recipe(add_run_options(parser).parse_args(argv), argv, "toy", build_model=build_model,
                         make_source=make_source, loss=lambda model, batch: ((model(batch[0]) - batch[1]) ** 2).mean(),
                         export=export, distributed=True)
    model = seen.pop("model")
    seen.update(items=history["items"], torn_down=not dist.is_initialized(),
                params=torch.cat([p.detach().flatten() for p in model.parameters()]).tolist())
    json.dump(seen, open(os.path.join(folder, f"{seen['rank']}.json"), "w"))
''')


@pytest.mark.distributed
def test_a_distributed_recipe_sets_up_trains_on_every_rank_exports_once_and_tears_down(tmp_path, torchrun):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    torchrun(script, tmp_path)
    ranks = [json.loads((tmp_path / f"{rank}.json").read_text()) for rank in (0, 1)]
    assert [(r["rank"], r["world_size"], r["initialized"], r["torn_down"]) for r in ranks] == [
        (0, 2, True, True), (1, 2, True, True)]
    assert ranks[0]["params"] == pytest.approx(ranks[1]["params"], abs=1e-6)
    assert ranks[0]["items"] == 3 * 4 * 2  # steps x rows per rank x ranks
    assert ranks[0]["exports"] == [0] and ranks[1]["exports"] == []
    exported = torch.load(tmp_path / "model.pt", weights_only=True)
    assert exported["weight"].flatten().tolist() == pytest.approx(ranks[0]["params"][:3])


def test_a_checkpoint_resumes_only_under_the_schedule_it_was_started_with(tmp_path):
    # Resumed with more steps, a finished run restored the old schedule's final rate (0) and
    # then followed the tail of the new one: a silent mix of two schedules.
    checkpoint = str(tmp_path / "run.ckpt")
    _main(["--checkpoint", checkpoint, "--quiet"])
    with pytest.raises(ValueError, match=r"checkpoint_path .*steps 6 -> 8"):
        _main(["--checkpoint", checkpoint, "--steps", "8", "--quiet"])
    with pytest.raises(ValueError, match=r"lr 0.05 -> 0.1"):
        _main(["--checkpoint", checkpoint, "--lr", "0.1", "--quiet"])
    assert _main(["--checkpoint", checkpoint, "--quiet"])["step"] == 6  # the same options still resume
