import subprocess
import sys

import pytest

from skicml import cli


def test_info(capsys):
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert "scikit-learn" in out and "device:" in out and "shipped models" in out


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
