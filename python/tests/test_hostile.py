"""Odd and hostile inputs to every call: each ends in a result or in ValueError, TypeError or
LinAlgError; none crashes the interpreter or hangs. Results that come back are checked."""

import numpy as np
import pytest

import hetla

ALLOWED = (ValueError, TypeError, np.linalg.LinAlgError)


def spd(n, seed=0):
    g = np.random.default_rng(seed).standard_normal((n, n))
    return g @ g.T + n * np.eye(n)


A = spd(6)
ODD = [
    None,
    "abc",
    3,
    [],
    [[1.0, 2.0], [3.0]],  # ragged
    np.zeros((0, 0)),
    np.zeros((2, 0, 0)),
    np.zeros((0,)),
    np.zeros((3, 0)),
    np.zeros((0, 3)),
    np.zeros((0, 2, 2)),
    np.float64(0.0),
    np.eye(3)[:, :2],  # a tall matrix (LU and QR factor it; Cholesky refuses)
    np.ones((1, 1)),
    np.array([[np.nan]]),
    np.eye(3, dtype=bool),
    np.eye(3, dtype=np.int8),
    np.eye(3, dtype=np.float16),
    np.eye(3, dtype=np.uint64),
    np.eye(3, dtype="m8[s]"),
    np.eye(3, dtype=np.longdouble),
    A[::-1, ::-1],  # negative strides
    A[::2, ::2],  # non-contiguous
    np.asfortranarray(A),
    np.broadcast_to(A, (3, 6, 6)),  # zero stride over the stack, read-only
    A.astype(np.complex128) + 1j * np.eye(6),  # an imaginary diagonal, not read (LAPACK's rule)
    -A,
    np.full((4, 4), 1e308),
    np.full((4, 4), 1e-320),
    np.eye(4).reshape(2, 2, 2, 2),
]

CALLS = {
    "cho_factor": lambda a: hetla.cho_factor(a),
    "cho_factor lower": lambda a: hetla.cho_factor(a, lower=True, overwrite_a=True),
    "cholesky": lambda a: hetla.cholesky(a),
    "cho_solve": lambda a: hetla.cho_solve((a, False), np.ones(np.shape(a)[-1:] or 1)),
    "solve_spd": lambda a: hetla.solve_spd(a, np.ones(np.shape(a)[-1:] or 1)),
    "solve_spd mixed": lambda a: hetla.solve_spd(a, np.ones(np.shape(a)[-1:] or 1), mixed=True),
    "lu_factor": lambda a: hetla.lu_factor(a),
    "solve": lambda a: hetla.solve(a, np.ones(np.shape(a)[-1:] or 1)),
    "qr": lambda a: hetla.qr(a),
    "lstsq": lambda a: hetla.lstsq(a, np.ones(np.shape(a)[:1] or 1)),
    "lstsq of a stack": lambda a: hetla.lstsq(a, np.ones(np.shape(a)[-2:-1] or 1)),
    "qr pivoting": lambda a: hetla.qr(a, pivoting=True),
    "lu_solve": lambda a: hetla.lu_solve(hetla.lu_factor(a), np.ones(np.shape(a)[-1:] or 1)),
    "solve sym": lambda a: hetla.solve(a, np.ones(np.shape(a)[-1:] or 1), assume_a="sym"),
    "solve lower triangular": lambda a: hetla.solve(a, np.ones(np.shape(a)[-1:] or 1), assume_a="lower triangular"),
    "CholeskyFactor": lambda a: hetla.CholeskyFactor(a),
    "spd_logdet": lambda a: hetla.spd_logdet(a),
}


@pytest.mark.filterwarnings("ignore:Diagonal number")
@pytest.mark.parametrize("name", list(CALLS))
def test_every_odd_input_is_a_result_or_a_clear_error(name):
    for i, a in enumerate(ODD):
        try:
            a = a.copy() if isinstance(a, np.ndarray) and a.flags.writeable else a
            out = CALLS[name](a)
        except ALLOWED as e:
            assert str(e), f"{name}, input {i}: an error without a message"
            continue
        # A result: finite where the input was finite and far from overflow and underflow (an R
        # of a matrix of 1e308's, or a solve with a "factor" of 1e-320's, overflows in scipy as
        # here).
        flat = out if isinstance(out, tuple) else (out,)
        big = float(np.abs(a).max()) if isinstance(a, np.ndarray) and a.dtype.kind in "fc" and a.size else 1.0
        scaled = big > 1e300 or big < 1e-300
        for part in flat if not scaled else ():
            if isinstance(part, np.ndarray) and part.dtype.kind in "fc":
                assert np.isfinite(part).all() or part.size == 0, f"{name}, input {i}"


def test_aliasing_arrays_are_refused_not_corrupted():
    c, lower = hetla.cho_factor(spd(5))
    # b is c itself: the solve reads c while it writes the solution into its own copy of b.
    x = hetla.cho_solve((c, lower), c)
    assert np.isfinite(x).all()


def test_huge_requests_are_refused_before_any_work():
    with pytest.raises(ValueError, match="use larger tiles"):
        hetla.simulate(platform="sirocco", clusters="2x10", n=10**12, tile=1)
    with pytest.raises(ValueError):
        hetla.bound(platform="sirocco", clusters="2x10", n=-5, tile=960)
