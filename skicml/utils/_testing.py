"""A minimal estimator built on :mod:`skicml.base`, for testing the machinery.

It is deliberately the smallest complete example of the estimator pattern
(declared parameter rules, validation, seeding, the shared training loop,
fitted attributes, class logits under inference mode with
:class:`~skicml.base.LogitsClassifierMixin` turning them into
``predict_proba`` / ``predict`` / ``decision_function``, the tags of
:class:`~skicml.base.TorchEstimatorMixin`), so the common test suite can prove
the shared machinery passes scikit-learn's checks before any method lands on
it, and a new estimator can be written by copying it. It is private and not
listed by :func:`skicml.utils.all_estimators`.
"""

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..base import LogitsClassifierMixin, TorchEstimatorMixin, seeded, to_tensor
from .param_validation import Integral, Interval, fit_context, shared_constraints


class _TinyMLPClassifier(TorchEstimatorMixin, LogitsClassifierMixin, ClassifierMixin, BaseEstimator):
    """One-hidden-layer perceptron trained by :func:`skicml.utils.training.fit_module`.

    Parameters
    ----------
    hidden_size : int, default=16
    max_epochs : int, default=40
    batch_size : int, default=64
    lr : float, default=1e-2
    validation_fraction : float or None, default=None
    n_iter_no_change : int or None, default=None
    device : str, default="auto"
    random_state : int, RandomState instance or None, default=None
    verbose : int or "auto", default="auto"
        ``"auto"`` shows a progress bar only once a step has run for a few
        seconds, and clears it at the end.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    module_ : torch.nn.Module
    loss_curve_ : list of float
    n_iter_ : int
    """

    _parameter_constraints = {
        "hidden_size": [Interval(Integral, 1, None, closed="left")],
        **shared_constraints("max_epochs", "batch_size", "lr", "validation_fraction", "n_iter_no_change",
                             "device", "random_state", "verbose"),
    }

    def __init__(self, hidden_size=16, max_epochs=40, batch_size=64, lr=1e-2,
                 validation_fraction=None, n_iter_no_change=None, device="auto",
                 random_state=None, verbose="auto"):
        self.hidden_size = hidden_size
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32], ensure_min_samples=2)
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes in the "
                f"data; got 1 class ({self.classes_[0]!r})."
            )
        self.mean_ = X.mean(axis=0)
        self.scale_ = np.where(X.std(axis=0) > 0, X.std(axis=0), 1.0)
        seed = self._seed()
        with seeded(seed):
            module = torch.nn.Sequential(
                torch.nn.Linear(X.shape[1], self.hidden_size),
                torch.nn.Tanh(),
                torch.nn.Linear(self.hidden_size, len(self.classes_)),
            ).double()
        self.module_, history = self._fit_module(
            module,
            to_tensor((X - self.mean_) / self.scale_, dtype="float64"),
            torch.as_tensor(codes, dtype=torch.long),
            loss="cross_entropy",
            stratify=self.validation_fraction is not None,
            seed=seed,
        )
        self.loss_curve_ = history.train_loss
        self.n_iter_ = history.n_epochs
        return self

    def _class_logits(self, X):
        # What LogitsClassifierMixin reads: check fittedness first, then one
        # row of class logits per sample.
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        device = self._device()
        module = self.module_.to(device)
        with torch.inference_mode():
            logits = module(to_tensor((X - self.mean_) / self.scale_, dtype="float64", device=device))
        return logits.cpu().numpy()
