import subprocess
import sys

import pytest

from skicml import cli


def test_info(capsys):
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert "scikit-learn" in out and "device:" in out and "shipped models" in out


def test_info_is_a_compact_table_and_verbose_gives_the_provenance(capsys):
    from skicml import _weights

    assert cli.main(["info"]) == 0
    compact = capsys.readouterr().out
    names = list(_weights.available_weights())
    for name in names:
        (row,) = [line for line in compact.splitlines() if line.startswith(name + " ")]
        assert " MB " in row and _weights.available_weights()[name].benchmark[:20] in row
    # the published models' table adds a header, a rule, a row per name and the open_clip line
    assert "recipe:" not in compact and len(compact.splitlines()) < 40 + len(_weights.published_weights()) + 5
    assert cli.main(["info", "--verbose"]) == 0
    verbose = capsys.readouterr().out
    assert verbose.count("      recipe: ") == len(names) and verbose.count("skicml pretrain") >= len(names)


def test_shipped_provenance_names_no_path_of_the_training_machine():
    import re

    from skicml import _weights

    for name in _weights.available_weights():
        provenance = _weights.load_weights(name)["provenance"]
        assert "path" not in provenance, name
        text = repr(provenance)
        assert not re.search(r"(?<![\w.])/(?:[\w.+-]+/)+", text), (name, re.findall(r"/\S+", text)[:3])


def test_tour_runs_every_family(capsys, monkeypatch):
    # The real tour rows, with each method's run replaced by a stub, so this
    # checks the registry wiring without fitting anything.
    import importlib

    from skicml.utils.tour import TourEntry

    stub = {"score": 0.1, "baseline_score": 0.2, "seconds": 0.0}
    names = []
    for module_name in cli.TOUR_MODULES:
        module = importlib.import_module(module_name)
        entries = [TourEntry(e.method, e.task, e.metric, e.baseline, lambda: stub) for e in module.tour_entries()]
        names += [e.method for e in entries]
        monkeypatch.setattr(module, "tour_entries", lambda entries=entries: entries)
    assert "TabICLClassifier" in names
    assert cli.main(["tour"]) == 0
    assert "TabICLClassifier" in capsys.readouterr().out


def test_tour_without_estimators_says_so(capsys, monkeypatch):
    monkeypatch.setattr(cli, "TOUR_MODULES", [])
    assert cli.main(["tour"]) == 0
    assert "no estimator is available yet" in capsys.readouterr().out


def test_tour_only_without_a_match_lists_the_methods_and_fails(capsys):
    assert cli.main(["tour", "--only", "NoSuchMethod"]) == 2
    err = capsys.readouterr().err
    assert "'NoSuchMethod' matches no method" in err
    assert "TabICLClassifier" in err and "WhitenedCLIPScorer" in err


def test_tour_runs_entries(capsys, monkeypatch, tmp_path):
    module = tmp_path / "fake_tour.py"
    module.write_text(
        "from skicml.utils.tour import TourEntry\n"
        "def tour_entries():\n"
        "    return [TourEntry('FakeMethod', 'toy', 'accuracy', 'Dummy',\n"
        "                      lambda: {'score': 0.9, 'baseline_score': 0.5, 'seconds': 0.1})]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(cli, "TOUR_MODULES", ["fake_tour"])
    assert cli.main(["tour"]) == 0
    out = capsys.readouterr().out
    assert "FakeMethod" in out and "0.9000" in out and "0.5000" in out


def test_pretrain_lists_and_rejects(capsys, monkeypatch):
    monkeypatch.setattr(cli, "PRETRAIN_RECIPES", {"toy": "math:floor"})
    assert cli.main(["pretrain"]) == 0
    assert "toy" in capsys.readouterr().out
    assert cli.main(["pretrain", "nope"]) == 2


def test_python_dash_m():
    result = subprocess.run([sys.executable, "-m", "skicml", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "pretrain" in result.stdout


def test_unknown_arguments_fail():
    with pytest.raises(SystemExit):
        cli.main(["info", "--bogus"])


def test_discovery_finds_every_recipe_and_tour_row():
    import importlib

    from skicml.utils.discovery import all_pretrain_recipes, all_tour_modules

    recipes = all_pretrain_recipes()
    assert set(recipes) == {"git", "graphgpt", "physics-world-model", "pointcloud", "race-dit-digits", "tabicl", "tabicl-regressor",
                            "tiny-clip", "tiny-diffusion-teacher", "tiny-vlm", "wearable"}
    assert cli.PRETRAIN_RECIPES == recipes
    for name, target in recipes.items():
        module_name, function = target.split(":")
        module = importlib.import_module(module_name)
        assert module.RECIPE_NAME == name and callable(getattr(module, function))
    modules = all_tour_modules()
    assert cli.TOUR_MODULES == modules
    assert {"skicml.tabicl._tour", "skicml.wearable._tour", "skicml.graph._graphgpt._tour", "skicml.graph._git._tour",
            "skicml.clip._tour", "skicml.pointcloud._tour", "skicml.vlm._vista._tour",
            "skicml.vlm._lavender._tour"} <= set(modules)
    methods = {e.method: e for m in modules for e in importlib.import_module(m).tour_entries()}
    assert {"TabICLClassifier", "WearableEncoder", "GraphGPTRegressor", "GITClassifier",
            "WhitenedCLIPScorer", "GAPromptClassifier", "VISTASteerer", "LavenderTuner"} <= set(methods)
    assert methods["WhitenedCLIPScorer"].extra == "clip"


def test_discovery_walks_the_file_tree(tmp_path):
    from skicml.utils.discovery import all_pretrain_recipes, all_tour_modules

    package = tmp_path / "pkg"
    for folder in ("", "fam", "dom", "dom/_meth"):
        (package / folder).mkdir(exist_ok=True)
        (package / folder / "__init__.py").write_text("")
    (package / "notapackage").mkdir()
    for folder in ("fam", "dom/_meth", "notapackage"):
        (package / folder / "_tour.py").write_text("def tour_entries():\n    return []\n")
    (package / "fam" / "_pretrain.py").write_text('RECIPE_NAME = "fam"\ndef main(argv):\n    pass\n')
    (package / "dom" / "_meth" / "_pretrain.py").write_text('"""Doc."""\nRECIPE_NAME = "meth"\n')
    assert all_tour_modules(package, "pkg") == ["pkg.dom._meth._tour", "pkg.fam._tour"]
    assert all_pretrain_recipes(package, "pkg") == {"fam": "pkg.fam._pretrain:main",
                                                   "meth": "pkg.dom._meth._pretrain:main"}
    (package / "dom" / "_meth" / "_pretrain.py").write_text('RECIPE_NAME = "fam"\n')
    with pytest.raises(ValueError, match="two pretraining recipes are named 'fam'"):
        all_pretrain_recipes(package, "pkg")
    (package / "dom" / "_meth" / "_pretrain.py").write_text("def main(argv):\n    pass\n")
    with pytest.raises(ValueError, match="RECIPE_NAME"):
        all_pretrain_recipes(package, "pkg")


def test_tour_row_with_a_missing_extra_is_reported(capsys, monkeypatch, tmp_path):
    module = tmp_path / "fake_extra_tour.py"
    module.write_text(
        "from skicml.utils.tour import TourEntry\n"
        "def _run():\n"
        "    raise AssertionError('a row whose extra is missing must not run')\n"
        "def tour_entries():\n"
        "    return [TourEntry('NeedsExtra', 'toy', 'accuracy', 'Dummy', _run,\n"
        "                      requires=('skicml_no_such_module',), extra='clip'),\n"
        "            TourEntry('Plain', 'toy', 'accuracy', 'Dummy',\n"
        "                      lambda: {'score': 0.75, 'baseline_score': 0.5})]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(cli, "TOUR_MODULES", ["fake_extra_tour"])
    assert cli.main(["tour"]) == 0
    out = capsys.readouterr().out
    assert "NeedsExtra: skipped, needs the clip extra" in out and 'skicml[clip]' in out
    assert "skicml_no_such_module" in out and "0.7500" in out


def test_tour_reports_each_rows_own_time_as_it_ends(capfd, monkeypatch, tmp_path):
    # Issue 28, item 9: the tour showed only a bar over the methods and, at
    # the end, each method's own time, not how long each row took.
    module = tmp_path / "fake_timed_tour.py"
    module.write_text(
        "import time\n"
        "from skicml.utils.tour import TourEntry\n"
        "def _slow():\n"
        "    time.sleep(0.35)\n"
        "    return {'score': 0.9, 'baseline_score': 0.5, 'seconds': 0.0}\n"
        "def tour_entries():\n"
        "    return [TourEntry('SlowMethod', 'toy', 'accuracy', 'Dummy', _slow),\n"
        "            TourEntry('FastMethod', 'toy', 'accuracy', 'Dummy',\n"
        "                      lambda: {'score': 0.8, 'baseline_score': 0.5, 'seconds': 0.0})]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(cli, "TOUR_MODULES", ["fake_timed_tour"])
    assert cli.main(["tour"]) == 0
    out, err = capfd.readouterr()
    import re

    reported = dict(re.findall(r"tour: (\w+) done in ([\d.]+) s", err))
    assert set(reported) == {"SlowMethod", "FastMethod"}
    assert float(reported["SlowMethod"]) >= 0.3 > float(reported["FastMethod"])
    header, _, slow, fast = out.splitlines()[:4]
    assert header.split()[-5:] == ["row", "seconds", "row", "CPU", "seconds"]
    assert slow.split()[0] == "SlowMethod" and slow.split()[-3:-1] == ["0.0", reported["SlowMethod"]]
    assert fast.split()[0] == "FastMethod" and fast.split()[-3:-1] == ["0.0", reported["FastMethod"]]
    # The CPU column counts computation, not waiting: the slow row sleeps.
    assert float(slow.split()[-1]) < 0.2
    assert re.search(r"total [\d.]+ s, [\d.]+ CPU seconds \(torch threads: 1\)", out)


# ------------------------------------------------------------------ published models
def test_download_help():
    with pytest.raises(SystemExit) as exited:
        cli.main(["download", "--help"])
    assert exited.value.code == 0


def test_info_lists_published_names_and_marks_the_cached_ones(hub_cache, capsys):
    import torch

    hub_cache.put("tabicl-regressor-v2-20260212.ckpt", lambda path: torch.save({"config": {}, "state_dict": {}}, path))
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert "published models" in out and str(hub_cache.hub_cache) in out
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines()
            if line.startswith(("tabicl-classifier-v", "tabicl-regressor-v", "point-mae"))}
    assert rows == {"tabicl-classifier-v2-20260212.ckpt": "no", "tabicl-regressor-v2-20260212.ckpt": "yes",
                    "tabicl-classifier-v1.1-20250506.ckpt": "no", "tabicl-classifier-v1-20250208.ckpt": "no",
                    "point-mae-pretrain": "no"}
    assert "open_clip" in out


def test_download_fetches_once_into_the_cache(hub_cache, monkeypatch, capsys):
    from skicml import _weights

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    calls = []

    def fake_hub_download(repo_id, filename, revision=None, cache_dir=None):
        # what huggingface_hub does, without the network: the file lands in the cache's layout
        calls.append((repo_id, filename, revision, cache_dir))
        return str(hub_cache.add(repo_id, filename, lambda path: path.write_bytes(b"weights")))

    monkeypatch.setattr("huggingface_hub.hf_hub_download", fake_hub_download)
    name = "tabicl-classifier-v1-20250208.ckpt"
    assert cli.main(["download", name]) == 0
    assert calls == [("jingang/TabICL", name, None, str(hub_cache.hub_cache))]
    assert capsys.readouterr().out.startswith(f"{name}: {hub_cache.hub_cache}")
    assert cli.main(["download", name]) == 0 and len(calls) == 1  # cached now: no second download
    assert _weights.published_weights(name).is_cached()


def test_download_refuses_unknown_names_and_says_when_offline(hub_cache, capsys):
    assert cli.main(["download", "no-such-model"]) == 2
    assert "not a published model" in capsys.readouterr().err
    assert cli.main(["download", "tabicl-classifier-v2-20260212.ckpt"]) == 1
    assert "HF_HUB_OFFLINE=1 forbids downloading" in capsys.readouterr().err
