"""The regressors the performance model chooses from (scikit-learn, imported on first use), the
non-negative least-squares baseline of the cost terms, and the scores they are compared by.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from moagcn.errors import UserError


def _pipeline(est):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    return make_pipeline(StandardScaler(), est)


def _linear(**kw):
    from sklearn.linear_model import LinearRegression
    return _pipeline(LinearRegression(**kw))


def _ridge(**kw):
    from sklearn.linear_model import Ridge
    return _pipeline(Ridge(**kw))


def _lasso(**kw):
    from sklearn.linear_model import Lasso
    return _pipeline(Lasso(**kw))


def _tree(**kw):
    from sklearn.tree import DecisionTreeRegressor
    return DecisionTreeRegressor(**kw)


def _forest(**kw):
    from sklearn.ensemble import RandomForestRegressor
    return RandomForestRegressor(**kw)


def _boosting(**kw):
    from sklearn.ensemble import GradientBoostingRegressor
    return GradientBoostingRegressor(**kw)


def _knn(**kw):
    from sklearn.neighbors import KNeighborsRegressor
    return _pipeline(KNeighborsRegressor(**kw))


def _svr(**kw):
    from sklearn.svm import SVR
    return _pipeline(SVR(**kw))


def _adaboost(**kw):
    from sklearn.ensemble import AdaBoostRegressor
    return AdaBoostRegressor(**kw)


def _bagging(**kw):
    from sklearn.ensemble import BaggingRegressor
    return BaggingRegressor(**kw)


class _Zero:
    """The baseline alone: a regressor that predicts no correction."""

    def fit(self, X, y):
        return self

    def predict(self, X):
        return np.zeros(len(X))


#: name -> (factory, hyper-parameters): vGNN's eight (linear, ridge, lasso, decision tree, SVR,
#: AdaBoost, bagging, random forest), gradient boosting, k nearest neighbours, and the cost-term
#: baseline alone. Every random one is seeded, so a refit on the same samples is exact.
REGRESSORS: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {
    "cost_terms": (lambda: _Zero(), {}),
    "linear": (_linear, {}),
    "ridge": (_ridge, {"alpha": 1.0}),
    "lasso": (_lasso, {"alpha": 1e-3, "max_iter": 50_000}),
    "decision_tree": (_tree, {"min_samples_leaf": 2, "random_state": 0}),
    "svr": (_svr, {"C": 1.0, "epsilon": 0.01}),
    "adaboost": (_adaboost, {"n_estimators": 100, "random_state": 0}),
    "bagging": (_bagging, {"n_estimators": 50, "random_state": 0, "n_jobs": 1}),
    "random_forest": (_forest, {"n_estimators": 100, "min_samples_leaf": 1, "random_state": 0,
                                "n_jobs": 1}),
    "gradient_boosting": (_boosting, {"n_estimators": 200, "max_depth": 3,
                                      "learning_rate": 0.05, "random_state": 0}),
    "knn": (_knn, {"n_neighbors": 5, "weights": "distance"}),
}


def make_regressor(name: str, params: Mapping[str, Any] | None = None):
    """A new, unfitted regressor of :data:`REGRESSORS` (``params``: its hyper-parameters)."""
    if name not in REGRESSORS:
        raise UserError(f"unknown regressor {name!r}; choose from {', '.join(REGRESSORS)}")
    factory, defaults = REGRESSORS[name]
    try:
        return factory(**dict(defaults if params is None else params))
    except ImportError:
        raise UserError("the performance model needs scikit-learn; install it with "
                        "`pip install scikit-learn`") from None


def fit_baseline(T: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative coefficients ``c`` minimising the relative error ``sum((T c - y) / y)^2``
    (one device's runs: ``T`` its cost terms, ``y`` its times).

    Columns are scaled to unit norm first (the terms span orders of magnitude); a column that is
    zero on this device keeps coefficient 0.
    """
    from scipy.optimize import nnls
    A = T / y[:, None]
    norms = np.linalg.norm(A, axis=0)
    used = norms > 0
    coef = np.zeros(T.shape[1])
    if used.any():
        sol, _ = nnls(A[:, used] / norms[used], np.ones(len(y)), maxiter=50 * T.shape[1])
        coef[used] = sol / norms[used]
    return coef


@dataclass
class Score:
    """One regressor's accuracy and cost on held-out runs (times in seconds)."""

    regressor: str
    mse: float
    mae: float
    mape: float
    #: microseconds per predicted run (one batch over the held-out runs)
    us_per_prediction: float

    def as_dict(self) -> dict:
        return {"regressor": self.regressor, "mse_s2": self.mse, "mae_s": self.mae,
                "mape": self.mape, "us_per_prediction": self.us_per_prediction}


def mape(pred: np.ndarray, true: np.ndarray) -> float:
    """Mean absolute percentage error as a fraction (0.05 = 5 %)."""
    return float(np.mean(np.abs(pred - true) / true))
