"""A pytest plugin that puts hetla's functions in scipy's and numpy's places before the test
modules import them (``pytest -p substitute``, with this folder on ``sys.path``).

scipy.linalg: ``cho_factor``, ``cho_solve``, ``lu_factor``, ``lu_solve``, ``solve``,
``solve_triangular``, ``qr``, ``lstsq`` and ``ldl`` (scipy's own ``cholesky`` has another signature
and stays); numpy.linalg: ``cholesky``.
scipy's internals import their functions from their private modules, so only the tests see the
substitutes.
"""

import numpy.linalg
import scipy.linalg

import hetla

SCIPY = ("cho_factor", "cho_solve", "lu_factor", "lu_solve", "solve", "solve_triangular", "qr",
         "lstsq", "ldl")
NUMPY = ("cholesky",)


def pytest_configure(config):
    for name in SCIPY:
        setattr(scipy.linalg, name, getattr(hetla, name))
    for name in NUMPY:
        setattr(numpy.linalg, name, getattr(hetla, name))
