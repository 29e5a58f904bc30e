import numpy as np
import torch
from sklearn.datasets import load_digits

from skicml.moe import RaceDiTGenerator
from skicml.moe._pretrain import load_training_digits, main

_TINY = ["--steps", "4", "--hidden-dim", "16", "--depth", "1", "--n-heads", "2", "--batch-size", "32", "--quiet"]


def test_the_recipe_exports_a_file_the_generator_loads_with_its_provenance(tmp_path, capsys):
    path = tmp_path / "race.pt"
    assert main([*_TINY, "--export", str(path)]) == 0
    assert "class accuracy of 200 guided samples" in capsys.readouterr().out
    provenance = torch.load(path, weights_only=True)["provenance"]
    assert provenance["recipe"].startswith("skicml pretrain race-dit-digits --steps 4")
    assert provenance["steps"] == 4 and 0 <= provenance["metrics"]["class_accuracy"] <= 1
    digits = load_digits()
    model = RaceDiTGenerator(pretrained=str(path), max_epochs=0, device="cpu").fit(digits.images, digits.target)
    assert model.sample(2, y=[3, 4], random_state=0).shape == (2, 8, 8)
    assert np.isfinite(model.thresholds_).all()


def test_export_now_writes_the_checkpoints_network(tmp_path):
    checkpoint, first, second = tmp_path / "run.ckpt", tmp_path / "a.pt", tmp_path / "b.pt"
    main([*_TINY, "--checkpoint", str(checkpoint), "--export", str(first)])
    main([*_TINY, "--checkpoint", str(checkpoint), "--export-now", "--export", str(second)])
    a, b = (torch.load(p, weights_only=True) for p in (first, second))
    assert all(torch.equal(a["state_dict"][k], b["state_dict"][k]) for k in a["state_dict"])
    # The file records the command that trained it, not the one that exported it.
    assert a["provenance"]["recipe"] == b["provenance"]["recipe"] and "--export-now" not in b["provenance"]["recipe"]


def test_the_mnist_option_reads_the_wheels_28x28_digits_in_their_pixel_range():
    mnist = load_training_digits("mnist")
    assert mnist.images.shape == (5000, 28, 28) and set(mnist.target) == set(range(10))
    assert mnist.images.min() == 0 and mnist.images.max() == mnist.pixel_max == 255.0
    digits = load_training_digits("digits")
    assert digits.images.shape == (1797, 8, 8) and digits.pixel_max == 16.0
