"""hetla for Python: dense factorisations on heterogeneous machines.

Drop-in calls with scipy's and numpy's signatures, semantics and return values, computed by
hetla's tiled task graphs (the GIL released):

- Cholesky: ``cho_factor``, ``cho_solve``, ``cholesky`` (numpy's), ``solve_spd`` (``mixed=True``:
  factor in single precision, refine to double), and the SPD toolkit: ``CholeskyFactor`` (solve,
  log-determinant, rcond, inverse, rank-k update and downdate), ``spd_logdet``, ``spd_rcond``,
  ``spd_inv``;
- LU: ``lu_factor``, ``lu_solve``, ``solve``;
- symmetric (Hermitian) indefinite: ``solve(assume_a="sym" or "her")`` and ``LdltFactor`` (solve,
  inertia, logdet, rcond), by Aasen's factorisation;
- QR and least squares: ``qr``, ``lstsq``.

float32, float64, complex64 and complex128 (other numeric dtypes are promoted to float64, as
scipy does); matrices stacked as (..., M, M) are batches (one matrix per core at a time). A matrix
that is not positive definite or is singular raises ``numpy.linalg.LinAlgError``; a wrong shape or
a non-finite entry ``ValueError``; a non-numeric dtype (object, str, bytes, void) ``ValueError``,
as scipy raises it.

The laboratory: ``Platform`` (a ``with`` block that sets the clusters, backend and scheduler of
every call inside it), ``info``, ``simulate``, ``bound``, ``sweep``, ``tune`` and ``cli``, returning the
command line's JSON reports as dicts (``sweep``'s rows as a pandas DataFrame when pandas is
installed).
"""

import json as _json
import math as _math
import warnings as _warnings

import numpy as _np
from numpy.linalg import LinAlgError

from . import _hetla
from ._hetla import CholeskyFactor, LdltFactor, Platform

__version__ = _hetla.__version__

__all__ = [
    "LinAlgError",
    "LinAlgWarning",
    "CholeskyFactor",
    "LdltFactor",
    "Platform",
    "cho_factor",
    "cho_solve",
    "cholesky",
    "solve_spd",
    "spd_logdet",
    "spd_rcond",
    "spd_inv",
    "lu_factor",
    "lu_solve",
    "solve",
    "solve_triangular",
    "qr",
    "lstsq",
    "ldl",
    "info",
    "simulate",
    "bound",
    "sweep",
    "tune",
    "cli",
]

try:  # scipy's warning class when scipy is there, so that filters written for it apply
    from scipy.linalg import LinAlgWarning
except ImportError:  # pragma: no cover - depends on the environment

    class LinAlgWarning(RuntimeWarning):
        """An ill-conditioned or singular matrix (scipy.linalg.LinAlgWarning without scipy)."""


_KINDS = (_np.float32, _np.float64, _np.complex64, _np.complex128)


def _dtype(*arrays, small=_np.float32):
    """The dtype hetla computes in for these arrays, scipy's choice: their common type, with bools
    and 8- and 16-bit integers computed in ``small`` (float32; scipy's ``solve`` takes float64),
    larger integers, datetimes and timedeltas in float64 (as scipy 1.16 and 1.17 solve them),
    float16 in float32 and long doubles in double. Types numpy cannot combine are numpy's
    TypeError (scipy's); a non-numeric type (object, str, bytes, void) a ValueError, as scipy's."""
    # Promoted by their type codes (no sizes, no values), as scipy promotes them.
    dtype = _np.result_type(*(_np.asarray(x).dtype.char for x in arrays))
    for x in arrays:
        kind = _np.asarray(x).dtype
        if kind.kind not in "biufcmM":
            raise ValueError(
                "hetla computes in float32, float64, complex64 and complex128, got the "
                f"non-numeric dtype {kind}"
            )
    if dtype.kind in "mM":
        return _np.dtype(_np.float64)
    if dtype.kind in "biu":
        return _np.dtype(small if dtype.itemsize <= 2 else _np.float64)
    if dtype.kind == "f":
        return _np.dtype(_np.float32 if dtype.itemsize <= 4 else _np.float64)
    if dtype.kind == "c":
        return _np.dtype(_np.complex64 if dtype.itemsize <= 8 else _np.complex128)
    raise ValueError(
        f"hetla computes in float32, float64, complex64 and complex128, got the non-numeric dtype {dtype}"
    )


def _square(a, name="a"):
    """``a`` as an array of square matrices (..., M, M), or the ValueError saying why not."""
    a = _np.asarray(a)
    if a.dtype == object:
        raise ValueError(f"{name} must be numeric, got an array of Python objects")
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{name} must be a square matrix or a stack of them (..., M, M), got shape {a.shape}")
    return a


def _flags(**flags):
    """Each of scipy's on/off arguments must be a bool (or an integer, as LAPACK's wrappers take):
    anything else, a dict passed by position for instance, is a TypeError naming it."""
    for name, value in flags.items():
        if not isinstance(value, (bool, int, _np.bool_, _np.integer)):
            raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")


def _check_finite(a, name):
    if not _np.isfinite(a).all():
        raise ValueError(f"{name} must not contain infs or NaNs")


def _copy(a, dtype, fortran):
    """A new array holding ``a`` in ``dtype``, each matrix (the last two axes) C-ordered, or
    Fortran-ordered with ``fortran`` (the stack axes stay outermost)."""
    if not fortran:
        return _np.array(a, dtype=dtype, order="C", copy=True)
    return _np.array(_np.swapaxes(a, -1, -2), dtype=dtype, order="C", copy=True).swapaxes(-1, -2)


def _stack(a):
    """``a`` (..., M, N) as a 3-D view (count, M, N) of the same memory, or None where no view
    can be (the caller then works on a copy)."""
    if a.ndim == 3:
        return a
    if a.ndim == 2:
        return a[None]
    s = a.reshape((-1,) + a.shape[-2:])
    return s if _np.shares_memory(s, a) else None


def _in_place(a, work):
    """Runs ``work`` on the 3-D stack of ``a`` and makes sure ``a`` holds the result."""
    s = _stack(a)
    if s is not None:
        work(s)
        return a
    s = _np.ascontiguousarray(a.reshape((-1,) + a.shape[-2:]))
    work(s)
    a[...] = s.reshape(a.shape)
    return a


def _empty(shape, dtype, fortran):
    """A new array of ``shape``, each matrix (the last two axes) C-ordered, or Fortran-ordered
    with ``fortran`` (the stack axes outermost)."""
    if not fortran:
        return _np.empty(shape, dtype=dtype)
    return _np.empty(shape[:-2] + (shape[-1], shape[-2]), dtype=dtype).swapaxes(-1, -2)


def _source(a):
    """``a`` as a 3-D stack to read from (a copy where no view can be)."""
    s = _stack(a)
    return s if s is not None else _np.ascontiguousarray(a).reshape((-1,) + a.shape[-2:])


def _cho(a, lower, overwrite_a, clean):
    a = _square(a)
    dtype = _dtype(a)
    if a.dtype != dtype:
        a, overwrite_a = a.astype(dtype), True
    lower = bool(lower)
    if overwrite_a and a.flags.writeable:
        if a.size:
            _in_place(a, lambda s: _hetla.cho_factor(s, None, lower, clean))
        return a
    if a.ndim == 2:
        # One matrix is read where it lies (whatever its order) straight into the tiled run's
        # tiles, and the output, laid out as ``a``, receives the other triangle and the factor
        # (no copy of ``a`` first: that pass, and the page faults of a fresh copy, were 10% of a
        # factorisation of order 4096).
        out = _np.empty_like(a, order="K")
        if a.size:
            _hetla.cho_factor(a[None], out[None], lower, clean)
        return out
    # A stack gets matrices whose factored triangle is a column-major lower one, each copied and
    # factored by one core while in cache.
    out = _empty(a.shape, dtype, lower)
    if a.size:
        _hetla.cho_factor(_source(a), _stack(out), lower, clean)
    return out


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """Cholesky factorisation of a symmetric (Hermitian) positive definite matrix, for
    ``cho_solve``: scipy.linalg.cho_factor.

    Returns ``(c, lower)``: ``c`` holds the factor in the triangle ``lower`` says (L with A = L L^H,
    or U = L^H with A = U^H U); the other triangle keeps what ``a`` had there. Only that triangle
    of ``a`` is read. A stack (..., M, M) factors as a batch, one matrix per core at a time, and
    its ``lower`` is an array of the stack's shape, as scipy's.
    ``check_finite``: the triangle read is always checked (a NaN or infinity there is a
    ValueError; the check is part of hetla's pass over the matrix). Raises LinAlgError with the
    column when the matrix is not positive definite.
    """
    _flags(lower=lower, overwrite_a=overwrite_a, check_finite=check_finite)
    del check_finite  # always checked
    c = _cho(a, lower, overwrite_a, False)
    # A stack's ``lower`` is scipy's: an array of the stack's shape (each matrix's flag).
    return c, (_np.full(c.shape[:-2], bool(lower)) if c.ndim > 2 else lower)


def cholesky(a, upper=False):
    """The Cholesky factor with zeros in its other triangle: numpy.linalg.cholesky (L with
    A = L L^H, or U = L^H with ``upper=True``). Stacks (..., M, M) factor as batches."""
    return _cho(a, not upper, False, True)


def _rhs(b, n, batch, dtype, name="b"):
    """A right-hand side beside a stack ``batch`` of n x n matrices, read by scipy's rule: ``b`` is
    a vector (N,) (a scalar is one of length 1), or (..., N, K) with its stack broadcast against
    ``batch``. Returns a new 3-D stack (count, n, k) of Fortran-ordered matrices in ``dtype``, the
    broadcast stack shape, and whether ``b`` was a vector (see ``_solution``)."""
    b = _np.asarray(b)
    if b.dtype == object:
        raise ValueError(f"{name} must be numeric, got an array of Python objects")
    if b.ndim == 0:
        b = b.reshape(1)
    vector = b.ndim == 1
    m = b[:, None] if vector else b
    if m.shape[-2] != n:
        raise ValueError(
            f"{name} of shape {b.shape} has {m.shape[-2]} rows, expected {n} (the order of the "
            "matrix): a right-hand side is (N,) or (..., N, K)"
        )
    try:
        stack = _np.broadcast_shapes(tuple(batch), m.shape[:-2])
    except ValueError:
        raise ValueError(
            f"the stack shape of {name}, {m.shape[:-2]}, does not broadcast with the matrices' "
            f"{tuple(batch)}"
        ) from None
    m = _np.broadcast_to(m, stack + m.shape[-2:])
    x = _copy(m, dtype, True).reshape((_math.prod(stack), n, m.shape[-1]))
    return x, stack, vector


def _solution(x, stack, vector):
    """The solutions ``x`` (count, n, k) shaped as their right-hand sides were (``_rhs``)."""
    x = x.reshape(stack + x.shape[-2:])
    return x[..., 0] if vector else x


def _each_of_batch(count, one):
    """``one(i)`` for every matrix i < count of a stack, a failure re-raised naming the matrix (as
    the batched Cholesky names it): "matrix i of the batch: ..."."""
    out = []
    for i in range(count):
        try:
            out.append(one(i))
        except (LinAlgError, ValueError) as e:
            if count == 1 or str(e).startswith("matrix "):
                raise
            raise type(e)(f"matrix {i} of the batch: {e}") from None
    return out


def _matrices(a, stack, dtype):
    """The square matrices ``a`` (..., n, n) broadcast to ``stack`` as a 3-D stack (count, n, n) in
    ``dtype`` (a view where one can be, else a copy)."""
    n = a.shape[-1]
    a = _np.broadcast_to(_np.asarray(a, dtype=dtype), tuple(stack) + (n, n))
    s = _stack(a) if a.ndim <= 3 else None
    if s is None or s.strides[0] == 0 and s.shape[0] > 1:
        s = _np.ascontiguousarray(a).reshape((_math.prod(stack), n, n))
    return s


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """Solves A x = b from ``cho_factor``'s ``(c, lower)``: scipy.linalg.cho_solve. ``b`` is (M,)
    or (..., M, K), its stack broadcast against ``c``'s as scipy's. Returns x, shaped as ``b``
    broadcast."""
    _flags(overwrite_b=overwrite_b, check_finite=check_finite)
    del overwrite_b, check_finite  # b is never overwritten; c and b are always checked
    c, lower = c_and_lower
    # A stack's ``lower`` may be an array (cho_factor's, scipy's): one flag for every matrix.
    flags = _np.unique(_np.asarray(lower, dtype=bool))
    if flags.size > 1:
        raise ValueError("lower must be the same for every matrix of the stack")
    lower = bool(flags[0]) if flags.size else False
    c = _square(c, "c")
    dtype = _dtype(c, _np.asarray(b))
    n = c.shape[-1]
    x, stack, vector = _rhs(b, n, c.shape[:-2], dtype)
    if x.size:
        _hetla.cho_solve(_matrices(c, stack, dtype), bool(lower), x)
    return _solution(x, stack, vector)


def solve_spd(a, b, mixed=False):
    """Solves A x = b for a symmetric (Hermitian) positive definite A (its lower triangle read).
    ``mixed=True`` factors in single precision and refines to double (float64 and complex128; a
    matrix too ill-conditioned for it is factored again in double). Stacks solve as batches."""
    a = _square(a)
    if mixed:
        dtype = _dtype(a, _np.asarray(b))
        x, stack, vector = _rhs(b, a.shape[-1], a.shape[:-2], dtype)
        mats = _matrices(a, stack, dtype)
        for i in range(x.shape[0]):
            if x[i].size:
                y, _steps = _hetla.solve_spd_mixed(mats[i], x[i])
                x[i] = _np.asarray(y)
        return _solution(x, stack, vector)
    return cho_solve(cho_factor(a, lower=True), b)


def _each(a, one, core=()):
    """``one`` of every matrix of the stack ``a``, stacked (a plain value for one matrix); each
    result of shape ``core`` (an empty stack gives an empty array of its shape)."""
    a = _square(a)
    if a.ndim == 2:
        return one(a)
    flat = a.reshape((-1,) + a.shape[-2:])
    out = _each_of_batch(flat.shape[0], lambda i: one(flat[i]))
    if not out:
        return _np.empty(a.shape[:-2] + tuple(core), dtype=_dtype(a))
    return _np.asarray(out).reshape(a.shape[:-2] + _np.shape(out[0]))


def spd_logdet(a):
    """ln det A of a symmetric (Hermitian) positive definite A, from its Cholesky factor (no
    overflow where det A would); an array of them for a stack."""
    return _each(a, lambda m: CholeskyFactor(_np.asarray(m, dtype=_dtype(m))).logdet())


def spd_rcond(a):
    """The reciprocal 1-norm condition number of a symmetric (Hermitian) positive definite A,
    estimated from its Cholesky factor (LAPACK ?pocon)."""
    return _each(a, lambda m: CholeskyFactor(_np.asarray(m, dtype=_dtype(m))).rcond())


def spd_inv(a):
    """A^-1 of a symmetric (Hermitian) positive definite A, from its Cholesky factor."""
    return _each(a, lambda m: CholeskyFactor(_np.asarray(m, dtype=_dtype(m))).inv(), _np.shape(a)[-2:])


def lu_factor(a, overwrite_a=False, check_finite=True):
    """LU factorisation with partial pivoting: scipy.linalg.lu_factor. ``a`` is M x N (any shape,
    as LAPACK's ?getrf) or a stack of them. Returns ``(lu, piv)``: L (unit diagonal implied, M x
    min(M, N)) and U (min(M, N) x N) in one matrix, and the min(M, N) 0-based row interchanges
    (row i was swapped with row ``piv[i]``). An exactly singular matrix factors with a
    LinAlgWarning, as scipy's. ``overwrite_a``: factored in ``a`` itself when it is a writable
    Fortran-ordered array of the computed dtype (scipy's in-place case), else in a copy."""
    _flags(overwrite_a=overwrite_a, check_finite=check_finite)
    del check_finite  # a is always checked
    a = _np.asarray(a)
    if a.dtype == object:
        raise ValueError("a must be numeric, got an array of Python objects")
    if a.ndim < 2:
        raise ValueError(f"a must be a matrix or a stack of them (..., M, N), got shape {a.shape}")
    dtype = _dtype(a)
    if a.ndim > 2:
        k = min(a.shape[-2:])
        if not a.size:
            return _np.empty(a.shape, dtype=dtype), _np.empty(a.shape[:-2] + (k,), dtype=_np.int32)
        # Each matrix read where it lies, copied into its Fortran-ordered output and factored
        # there by one core (no Python loop, no pass of its own for the copy).
        m, n = a.shape[-2:]
        source = _np.asarray(a.reshape((_math.prod(a.shape[:-2]), m, n)), dtype=dtype)
        lu = _empty(source.shape, dtype, True)
        piv, singular = _hetla.lu_factor_batch(source, lu)
        lu = lu.reshape(a.shape)
        for i, column in enumerate(singular):
            if column is not None:
                _warnings.warn(
                    f"matrix {i} of the batch: Diagonal number {column + 1} is exactly zero. "
                    "Singular matrix.",
                    LinAlgWarning,
                    stacklevel=2,
                )
        return lu, piv.reshape(a.shape[:-2] + (k,))
    if a.size == 0:
        return _np.empty(a.shape, dtype=dtype, order="F"), _np.empty(min(a.shape), dtype=_np.int32)
    # Factored where it lies: in a itself when scipy would (a writable Fortran-ordered array of the
    # computed dtype, overwrite_a), else in one Fortran-ordered copy (numpy's).
    in_place = overwrite_a and a.dtype == dtype and a.flags.f_contiguous and a.flags.writeable
    lu = a if in_place else _np.array(a, dtype=dtype, order="F", copy=True)
    piv, singular = _hetla.lu_factor_in_place(lu)
    if singular is not None:
        _warnings.warn(
            f"Diagonal number {singular + 1} is exactly zero. Singular matrix.",
            LinAlgWarning,
            stacklevel=2,
        )
    return lu, piv


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """Solves A x = b (``trans=0``), A^T x = b (1) or A^H x = b (2) from ``lu_factor``'s
    ``(lu, piv)``: scipy.linalg.lu_solve. ``lu`` (..., M, M) with ``piv`` (..., M), ``b`` (M,) or
    (..., M, K), their stacks broadcast together. Returns x shaped as ``b`` broadcast."""
    _flags(overwrite_b=overwrite_b, check_finite=check_finite)
    del overwrite_b, check_finite
    lu, piv = lu_and_piv
    lu = _square(lu, "lu")
    piv = _np.asarray(piv)
    n = lu.shape[-1]
    if piv.shape[-1:] != (n,):
        raise ValueError(f"piv of shape {piv.shape} does not fit lu of shape {lu.shape}: expected (..., {n})")
    if trans not in (0, 1, 2):
        raise ValueError(f"trans must be 0 (A x = b), 1 (A^T x = b) or 2 (A^H x = b), got {trans!r}")
    dtype = _dtype(lu, _np.asarray(b))
    batch = _np.broadcast_shapes(lu.shape[:-2], piv.shape[:-1])
    x, stack, vector = _rhs(b, n, batch, dtype)
    if x.size:
        lus = _matrices(lu, stack, dtype)
        pivs = _np.broadcast_to(piv, tuple(stack) + (n,)).reshape((-1, n))
        if x.shape[0] == 1:
            # One system: its solve runs on the whole platform.
            _hetla.lu_solve(lus[0], [int(p) for p in pivs[0]], x[0], int(trans))
        else:
            # A stack: one system per core (no Python loop).
            _hetla.lu_solve_batch(lus, _np.ascontiguousarray(pivs, dtype=_np.int64), x, int(trans))
    return _solution(x, stack, vector)


# scipy's names of the structures ``solve`` may assume, and how hetla solves each.
_STRUCTURES = {
    None: "general", "general": "general", "gen": "general", "banded": "general",
    "diagonal": "diagonal", "tridiagonal": "tridiagonal",
    "upper triangular": "upper", "lower triangular": "lower",
    "pos": "pos", "positive definite": "pos",
    "sym": "sym", "symmetric": "sym", "her": "her", "hermitian": "her",
}


def _structured(a, structure, lower):
    """The matrix ``structure`` means, from the entries of ``a`` that scipy reads for it: its
    diagonal, three diagonals or the triangle ``lower`` names of a symmetric or Hermitian one, the
    whole matrix otherwise (triangular kinds are solved on their triangle, not through this)."""
    if structure == "diagonal":
        return _np.diag(_np.diagonal(a))
    if structure == "tridiagonal":
        return _np.triu(_np.tril(a, 1), -1)
    if structure in ("sym", "her"):
        t = _np.tril(a) if lower else _np.triu(a)
        other = _np.swapaxes(t, -1, -2)
        if structure == "her":
            other = other.conj()
        full = t + other - _np.diag(_np.diagonal(a))
        if structure == "her":
            full[_np.diag_indices(a.shape[-1])] = _np.diagonal(a).real
        return full
    return a


def _warn_ill_conditioned(rcond, dtype, index=None):
    """scipy's LinAlgWarning for a reciprocal condition estimate below the precision's eps; ``index``
    names the matrix of a batch."""
    if rcond is not None and rcond < _np.finfo(dtype).eps:
        where = "" if index is None else f" (matrix {index} of the batch)"
        _warnings.warn(
            f"Ill-conditioned matrix{where} (rcond={rcond:.6g}): result may not be accurate.",
            LinAlgWarning,
            stacklevel=3,
        )


def _hermitian_norm1(m, lower):
    """||A||_1 of each Hermitian matrix of the stack ``m`` given by its ``lower`` (else upper)
    triangle, its diagonal's imaginary parts not read."""
    t = _np.abs(_np.tril(m) if lower else _np.triu(m))
    d = _np.diagonal(m, axis1=-2, axis2=-1)
    sums = t.sum(axis=-2) + t.sum(axis=-1) - 2 * _np.abs(d) + _np.abs(d.real)
    return sums.max(axis=-1) if sums.shape[-1] else _np.zeros(sums.shape[:-1])


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
          assume_a=None, transposed=False):
    """Solves A x = b: scipy.linalg.solve. ``a`` is (..., N, N) (a scalar is 1 x 1), ``b`` (N,) or
    (..., N, K), their stacks broadcast as scipy's; integers and bools are computed in float64 (as
    scipy's ``solve``). ``assume_a`` takes scipy's structures and reads what scipy reads:
    "pos" (or "positive definite") by Cholesky from the triangle ``lower`` names; "sym"/"her"
    (or "symmetric"/"hermitian") from that triangle by Aasen's symmetric indefinite
    factorisation (``hetla.Ldlt``'s; a stack one system per core by Bunch-Kaufman, LAPACK's ?sysv;
    a complex "sym" matrix, complex symmetric, by LU),
    "diagonal" and "tridiagonal" from those diagonals by LU with partial pivoting; "upper triangular"/"lower triangular" by one substitution on their triangle (LAPACK's
    ?trtrs, warned by ?trcon's estimate); None, "general" and "banded"
    by LU on the whole matrix. ``transposed=True`` solves A^T x = b, also for a complex A (which
    scipy refuses). A singular A raises LinAlgError; an ill-conditioned one (reciprocal
    condition estimate below eps) warns with LinAlgWarning, as scipy's. ``overwrite_a`` and
    ``overwrite_b`` work in place where scipy does (a Fortran-ordered array of the computed
    dtype): x is then ``b`` itself."""
    _flags(lower=lower, overwrite_a=overwrite_a, overwrite_b=overwrite_b,
           check_finite=check_finite, transposed=transposed)
    del check_finite  # always checked
    try:
        structure = _STRUCTURES[assume_a]
    except (KeyError, TypeError):
        raise ValueError(f"{assume_a} is not a recognized matrix structure") from None
    a = _np.asarray(a)
    if a.ndim < 2:
        a = _np.atleast_2d(a)
    a = _square(a)
    if _np.asarray(b).dtype.kind in "SU" and a.dtype.kind in "biufcmM":
        # scipy reads a b of numeric strings as numbers of A's type ("1" is 1.0).
        b = _np.asarray(b).astype(_dtype(a, small=_np.float64))
    dtype = _dtype(a, _np.asarray(b), small=_np.float64)
    if a.ndim == 2 and a.size == 1:
        # A scalar a (1 x 1): b / a for any b, as scipy's.
        _check_finite(a, "a")
        _check_finite(_np.asarray(b), "b")
        if a.item() == 0:
            raise LinAlgError("A singular matrix detected: a is a zero scalar")
        return _np.atleast_1d(_np.asarray(b, dtype=dtype)) / a.astype(dtype)[0, 0]
    n = a.shape[-1]
    x, stack, vector = _rhs(b, n, a.shape[:-2], dtype)
    if x.size == 0 or n == 0:
        return _solution(x, stack, vector)
    # In place in b where scipy solves in place: one Fortran-ordered system of the computed dtype.
    b_array = b if isinstance(b, _np.ndarray) else None
    in_b = (overwrite_b and b_array is not None and stack == () and b_array.ndim <= 2
            and b_array.dtype == dtype and b_array.flags.f_contiguous and b_array.flags.writeable)
    if in_b:
        x = (b_array[:, None] if b_array.ndim == 1 else b_array)[None]
    in_a = (overwrite_a and isinstance(a, _np.ndarray) and a.ndim == 2 and a.dtype == dtype
            and a.flags.f_contiguous and a.flags.writeable)
    mats = _matrices(a, stack, dtype)
    trans = 1 if transposed else 0
    if structure == "pos" and stack == () and not in_a:
        # One system: through the factor object, whose ?pocon estimate gives scipy's warning.
        m = mats[0] if lower else _np.conj(_np.swapaxes(mats[0], -1, -2))
        if transposed:
            m = _np.conj(m)  # A^T = conj(A) for a Hermitian A
        try:
            f = CholeskyFactor(_np.ascontiguousarray(m))
        except LinAlgError as e:
            raise LinAlgError(f"A singular matrix or one not positive definite: {e}") from None
        _warn_ill_conditioned(f.rcond(), dtype)
        x[0] = _np.asarray(f.solve(x[0])).reshape(x[0].shape)
        return b_array if in_b else _solution(x, stack, vector)
    if structure == "pos":
        norms = _hermitian_norm1(mats, lower)  # before a may be overwritten by its factor
        c = _np.swapaxes(mats, -1, -2) if transposed else mats
        try:
            c, _ = cho_factor(c, lower=lower, overwrite_a=in_a and not transposed)
        except LinAlgError as e:
            raise LinAlgError(f"A singular matrix or one not positive definite: {e}") from None
        _hetla.cho_solve(_source(c), bool(lower), x)
        # scipy's warning, matrix by matrix: ?pocon's estimate on each factor.
        rconds = _hetla.cho_rcond(_source(c), bool(lower), [float(v) for v in norms.reshape(-1)])
        for i, rcond in enumerate(rconds):
            _warn_ill_conditioned(rcond, dtype, i if len(rconds) > 1 else None)
        return b_array if in_b else _solution(x, stack, vector)
    hermitian = structure == "her" or (structure == "sym" and not _np.iscomplexobj(mats))
    if hermitian and x.shape[0] > 1:
        # A stack: one system per core by Bunch-Kaufman (?sysv's), on the lower triangle of A, or
        # of A^T = conj(A) for a transposed solve; scipy's upper triangle read as its adjoint's.
        m = mats if lower else _np.swapaxes(mats, -1, -2)
        if lower == transposed:
            m = _np.conj(m)
        for i, rcond in enumerate(_hetla.ldlt_solve_systems(_np.ascontiguousarray(m), x)):
            _warn_ill_conditioned(rcond, dtype, i)
        return b_array if in_b else _solution(x, stack, vector)
    if structure == "general" and not in_a and x.shape[0] > 1:
        # A stack: one system per core, the factors never leaving Rust (no Python loop).
        for i, rcond in enumerate(_hetla.lu_solve_systems(mats, x, trans)):
            _warn_ill_conditioned(rcond, dtype, i)
        return b_array if in_b else _solution(x, stack, vector)

    def one(i):
        if structure in ("upper", "lower"):
            # One substitution on the triangle scipy reads (?trtrs), warned by ?trcon's estimate.
            rcond = _hetla.solve_triangular(mats[i], x[i], structure == "lower", trans)
            _warn_ill_conditioned(rcond, dtype, i if x.shape[0] > 1 else None)
            return
        m = _structured(mats[i], structure, lower)
        factors_in_a = in_a and structure == "general"  # scipy leaves the factors in a
        # Hermitian (real: symmetric) indefinite: Aasen's factorisation (?sytrf_aa's), A^T = conj(A)
        # for a transposed solve. A complex "sym" is complex symmetric, not Hermitian: LU.
        hermitian = structure == "her" or (structure == "sym" and not _np.iscomplexobj(m))
        if hermitian:
            singular, rcond = _hetla.ldlt_solve_system(_np.conj(m) if transposed else m, x[i])
        elif factors_in_a:
            lu, piv, singular, rcond = _hetla.lu_factor(m, True)
        else:
            singular, rcond = _hetla.lu_solve_system(m, x[i], trans)
        if singular is not None:
            raise LinAlgError(
                f"A singular matrix detected: U({singular + 1}, {singular + 1}) is exactly zero"
            )
        _warn_ill_conditioned(rcond, dtype, i if x.shape[0] > 1 else None)
        if factors_in_a:
            _hetla.lu_solve(lu, [int(p) for p in piv], x[i], trans)
            a[...] = lu

    _each_of_batch(x.shape[0], one)
    return b_array if in_b else _solution(x, stack, vector)


_TRANS = {0: 0, "N": 0, "n": 0, 1: 1, "T": 1, "t": 1, 2: 2, "C": 2, "c": 2}


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     check_finite=True):
    """Solves a triangular system: scipy.linalg.solve_triangular. ``a`` is (..., N, N), of which
    only the triangle ``lower`` names is read (its diagonal taken as ones with
    ``unit_diagonal=True``); ``b`` (N,) or (..., N, K), their stacks broadcast as scipy's.
    ``trans``: 0 or "N" solves A x = b, 1 or "T" A^T x = b, 2 or "C" A^H x = b. One substitution
    per matrix (LAPACK ?trtrs's, on hetla's triangular solve). An exactly zero diagonal entry
    raises LinAlgError naming it; NaN or infinity in what is read, a ValueError. Integers and bools
    are computed in float64, as scipy's. ``overwrite_b`` is accepted (x is a new array)."""
    _flags(lower=lower, unit_diagonal=unit_diagonal, overwrite_b=overwrite_b,
           check_finite=check_finite)
    del check_finite, overwrite_b  # always checked; the solution is a new array
    try:
        op = _TRANS[trans]
    except (KeyError, TypeError):
        raise ValueError(f"trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}") from None
    a = _square(_np.asarray(a))
    dtype = _dtype(a, _np.asarray(b), small=_np.float64)
    n = a.shape[-1]
    x, stack, vector = _rhs(b, n, a.shape[:-2], dtype)
    if x.size == 0 or n == 0:
        return _solution(x, stack, vector)
    mats = _matrices(a, stack, dtype)

    def one(i):
        m = mats[i]
        if unit_diagonal:
            m = _np.array(m, order="F")
            m[_np.diag_indices(n)] = 1
        _hetla.solve_triangular(m, x[i], bool(lower), op)

    _each_of_batch(x.shape[0], one)
    return _solution(x, stack, vector)


def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """QR decomposition: scipy.linalg.qr. By tiled Householder reflections, or with
    ``pivoting=True`` by column pivoting (A P = Q R with |R_ii| non-increasing; faer's kernel, not
    tiled), which returns P (int32 column indices of A) last, as scipy's. ``mode``: "full" (Q M x
    M, R M x N), "economic" (Q M x K, R K x N, K = min(M, N)), "r" (returns ``(R,)``, or ``(R, P)``),
    "raw" (returns ``((h, tau), R)``, LAPACK ?geqrf's packed reflectors and R K x N, by one QR of
    the whole matrix on the tile kernel; with pivoting ?geqp3's, the columns in hetla's pivoted
    order, and P last). ``lwork`` is accepted for scipy's signature (a value below scipy's minimum, max(1, N),
    is a ValueError as there). A stack (..., M, N) is factored one matrix per core, each by one
    ?geqrt of the whole matrix (``hetla.Qr``'s batch); with pivoting or mode "raw" matrix by matrix."""
    _flags(overwrite_a=overwrite_a, pivoting=pivoting, check_finite=check_finite)
    del overwrite_a, check_finite
    if mode not in ("full", "economic", "r", "raw"):
        raise ValueError(f"mode must be 'full', 'economic', 'r' or 'raw', got {mode!r}")
    a = _np.asarray(a)
    if a.ndim < 2:
        raise ValueError(f"a must be a matrix or a stack of them (..., M, N), got shape {a.shape}")
    if lwork is not None and lwork != -1 and lwork < max(1, a.shape[-1]):
        raise ValueError(f"lwork must be at least max(1, N) = {max(1, a.shape[-1])}, got {lwork}")
    dtype = _dtype(a)
    if a.ndim > 2 and not pivoting and mode != "raw":
        # One QR per core, each matrix one ?geqrt (and ?orgqr for Q), no Python loop.
        m, n = a.shape[-2:]
        k = min(m, n)
        flat = _np.asarray(a.reshape((_math.prod(a.shape[:-2]), m, n)), dtype=dtype)
        r = _np.zeros((flat.shape[0], k if mode == "economic" else m, n), dtype=dtype)
        q = None if mode == "r" else _empty((flat.shape[0], m, m if mode == "full" else k), dtype, True)
        if flat.size:
            # Each matrix read where it lies, factored, R and Q written on one core.
            _hetla.qr_batch(flat, r, q)
        elif q is not None:
            q[...] = _np.eye(m, q.shape[-1], dtype=dtype)
        r = r.reshape(a.shape[:-2] + r.shape[-2:])
        if mode == "r":
            return r  # scipy's stacked mode "r": R itself, not the 1-tuple of one matrix
        return q.reshape(a.shape[:-2] + q.shape[-2:]), r
    if a.ndim > 2:
        flat = a.reshape((-1,) + a.shape[-2:])
        parts = _each_of_batch(flat.shape[0], lambda i: qr(flat[i], mode=mode, pivoting=pivoting))
        stacked = tuple(_np.stack(p).reshape(a.shape[:-2] + p[0].shape) for p in zip(*parts))
        return stacked
    if mode == "raw":
        # LAPACK's packed form, ?geqrf's (?geqp3's with pivoting: the same reflectors on the
        # columns in their pivoted order), and R as the economic one.
        m = _np.asarray(a, dtype=dtype)
        p = _hetla.qr_pivoted(m, False, False)[2] if pivoting else None
        h, tau = _hetla.qr_raw(m if p is None else m[:, p])
        r = _np.triu(h[: min(h.shape)])
        return ((h, tau), r) if p is None else ((h, tau), r, p)
    if pivoting:
        q, r, p = _hetla.qr_pivoted(_np.asarray(a, dtype=dtype), mode != "economic", mode != "r")
        return (r, p) if mode == "r" else (q, r, p)
    q, r = _hetla.qr(_np.asarray(a, dtype=dtype), mode)
    return (r,) if mode == "r" else (q, r)


def ldl(A, lower=True, hermitian=True, overwrite_a=False, check_finite=True):
    """The Bunch-Kaufman factorisation of a symmetric or Hermitian matrix: scipy.linalg.ldl.
    Returns ``(lu, d, perm)`` with A = lu @ d @ lu^H (``hermitian``; lu^T for a complex symmetric
    A with ``hermitian=False``), d block diagonal (1 x 1 and 2 x 2 blocks) and ``lu[perm]``
    triangular (lower, or upper with ``lower=False``). Only the triangle ``lower`` names is read;
    a Hermitian A's diagonal imaginary parts are dropped with a ComplexWarning, as scipy's.
    ``hetla.Ldl`` (LAPACK's ?sytf2/?hetf2 pivoting, unblocked: for small and moderate matrices);
    the upper form is the lower one of A with rows and columns reversed. A stack (..., N, N) is
    factored matrix by matrix."""
    _flags(lower=lower, hermitian=hermitian, overwrite_a=overwrite_a, check_finite=check_finite)
    del overwrite_a, check_finite  # A is never overwritten, always checked
    a = _np.asarray(A)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"The input array \"a\" should be square, got shape {a.shape}")
    dtype = _dtype(a, small=_np.float64)
    if a.ndim > 2:
        flat = a.reshape((_math.prod(a.shape[:-2]),) + a.shape[-2:])
        parts = _each_of_batch(flat.shape[0], lambda i: ldl(flat[i], lower, hermitian))
        return tuple(_np.stack(p).reshape(a.shape[:-2] + _np.shape(p[0])) for p in zip(*parts))
    n = a.shape[0]
    if n == 0:
        return _np.empty((0, 0), dtype=dtype), _np.empty((0, 0), dtype=dtype), _np.arange(0)
    a = _np.asarray(a, dtype=dtype)
    complex_hermitian = hermitian and _np.iscomplexobj(a)
    if complex_hermitian and _np.any(_np.diagonal(a).imag != 0):
        _warnings.warn("scipy.linalg.ldl: the diagonal of a Hermitian matrix has imaginary parts; "
                       "they are taken as zero", _np.exceptions.ComplexWarning, stacklevel=2)
    # The upper form: the lower one of A with its rows and columns reversed.
    m = a if lower else a[::-1, ::-1]
    l, d, p = _hetla.ldl(_np.ascontiguousarray(m), bool(hermitian))
    p = _np.asarray(p, dtype=_np.int64)
    lu = _np.empty_like(l)
    lu[p] = l  # row perm[i] of lu is row i of L: lu[perm] is L
    if lower:
        return lu, d, p
    return lu[::-1, ::-1].copy(), d[::-1, ::-1].copy(), (n - 1 - p)[::-1].copy()


def lstsq(a, b, cond=None, overwrite_a=False, overwrite_b=False, check_finite=True,
          lapack_driver=None):
    """Least-squares solution of A x = b: scipy.linalg.lstsq's return values ``(x, residues, rank,
    s)``: ``s`` A's singular values in non-increasing order (faer's SVD, values only) for scipy's
    SVD drivers, "gelsd" (the default) and "gelss", None for "gelsy" (an empty array for an empty
    A); another driver name is a ValueError. Any shape and rank: the minimum-norm solution and A's
    effective rank at ``cond`` (None: the precision's eps), as the driver defines it: the singular
    values above ``cond`` times the largest for the SVD drivers (``hetla::lstsq_svd``), the
    diagonal entries of a column-pivoted R for "gelsy" (``hetla::lstsq_rank``); a matrix of full
    column rank with M >= N is solved by the tiled Householder QR, any other by a complete
    orthogonal factorisation at that rank.
    ``residues`` are the squared residual norms when M > N and the rank is N, else empty. ``a``
    is (..., M, N), ``b`` (M,) or (..., M, K), their stacks broadcast as scipy's. An A with no
    rows or no columns gives the zero solution of rank 0."""
    _flags(overwrite_a=overwrite_a, overwrite_b=overwrite_b, check_finite=check_finite)
    if lapack_driver not in (None, "gelsd", "gelsy", "gelss"):
        raise ValueError(f"lapack_driver must be None, 'gelsd', 'gelsy' or 'gelss', got {lapack_driver!r}")
    # scipy's SVD drivers (gelsd, its default, and gelss) also return A's singular values.
    singular = lapack_driver != "gelsy"
    del overwrite_a, overwrite_b, check_finite
    a = _np.asarray(a)
    b = _np.asarray(b)
    if a.ndim < 2:
        raise ValueError(f"a must be a matrix or a stack of them (..., M, N), got shape {a.shape}")
    core = 2 if b.ndim >= 2 else 1
    if b.ndim == 0 or b.shape[-core] != a.shape[-2]:
        raise ValueError(f"b must have {a.shape[-2]} rows (as a), got shape {b.shape}")
    stack = _np.broadcast_shapes(a.shape[:-2], b.shape[:-core] if core == 2 else ())
    if stack:
        return _lstsq_stack(a, b, cond, stack, core, singular)
    m, n = a.shape
    dtype = _dtype(a, b)
    real = _np.float32 if dtype in (_np.float32, _np.complex64) else _np.float64
    b2 = _np.asarray(b, dtype=dtype).reshape(m, b.shape[1] if b.ndim == 2 else 1)
    if m == 0 or n == 0:
        # The zero solution, of rank 0; every row of b is left as its residue.
        x = _np.zeros((n, b2.shape[1]), dtype=dtype)
        residues = (_np.abs(b2) ** 2).sum(axis=0).astype(real) if n == 0 else _np.empty(0, dtype=real)
        if b.ndim == 1:
            x = x[:, 0]
            residues = residues[0] if n == 0 else residues
        return x, residues, 0, _np.empty(0, dtype=real)
    rcond = None if cond is None else float(cond)
    s = None
    if singular or b2.size:
        # The SVD drivers' rank: A's singular values above cond times the largest.
        x, rank, s = _hetla.lstsq_rank(_np.asarray(a, dtype=dtype), b2, rcond, singular)
    else:
        x, rank = _np.zeros((n, 0), dtype=dtype), min(m, n)
    if m > n and rank == n:
        resid = b2 - a.astype(dtype, copy=False) @ x
        residues = (_np.abs(resid) ** 2).sum(axis=0).astype(real)
    else:
        residues = _np.empty(0, dtype=dtype)  # scipy: of the computed dtype
    if b.ndim == 1:
        x = x[:, 0]
        if residues.size:
            residues = residues[0]
    return x, residues, rank, s


def _lstsq_stack(a, b, cond, stack, core, singular):
    """``lstsq`` of the stacks ``a`` (..., M, N) and ``b`` (..., M[, K]) broadcast to ``stack``:
    one problem per core (``hetla.Qr``'s least-squares batches, ?gelsd's rank with ``singular``,
    else ?gelsy's), no Python loop. Returns
    scipy's stacked ``(x, residues, rank, s)``: residues where every problem has M > N and full
    rank (scipy's stacks are rectangular), else an empty array per problem."""
    m, n = a.shape[-2:]
    dtype = _dtype(a, b)
    real = _np.float32 if dtype in (_np.float32, _np.complex64) else _np.float64
    count = _math.prod(stack)
    # Read where they lie: each core copies its matrix into the kernels' order.
    a3 = _np.ascontiguousarray(_np.broadcast_to(a, stack + (m, n)), dtype=dtype).reshape(count, m, n)
    b3 = _np.ascontiguousarray(_np.broadcast_to(b, stack + b.shape[-core:]), dtype=dtype)
    b3 = b3.reshape(count, m, -1) if core == 2 else b3.reshape(count, m, 1)
    k = b3.shape[-1]
    if m == 0 or n == 0 or count == 0 or k == 0:
        x3 = _np.zeros((count, n, k), dtype=dtype)
        ranks = _np.zeros(count, dtype=int) if m == 0 or n == 0 else _np.full(count, min(m, n))
        s3 = _np.empty((count, 0 if m == 0 or n == 0 else min(m, n)), dtype=real)
        if singular and s3.shape[-1] and count:
            # An empty B: the singular values still, from the library's batch (not numpy's SVD).
            s3 = _hetla.lstsq_batch(a3, b3, None, True)[2]
    else:
        x3, ranks, s3 = _hetla.lstsq_batch(a3, b3, None if cond is None else float(cond), singular)
        ranks = _np.asarray(ranks)
    if m > n and n > 0 and (ranks == n).all():
        residues = (_np.abs(b3 - a3 @ x3) ** 2).sum(axis=-2).astype(real)
    elif m == 0 or n == 0:
        residues = (_np.abs(b3) ** 2).sum(axis=-2).astype(real) if n == 0 else _np.empty((count, 0), dtype=real)
    else:
        residues = _np.empty((count, 0), dtype=dtype)
    x = x3.reshape(stack + (n, k))
    if core == 1:
        x = x[..., 0]
        residues = residues[..., 0] if residues.shape[-1] else residues
    residues = residues.reshape(stack + residues.shape[1:])
    s = s3.reshape(stack + s3.shape[1:]) if singular else None
    return x, residues, ranks.reshape(stack), s


# ---- the laboratory --------------------------------------------------------------------------


def _arguments(command, options):
    """The command line of ``command`` with ``options`` (``tile=960`` is ``--tile 960``, True a
    flag, False and None left out, a list or tuple joined by commas)."""
    args = [command]
    for key, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif isinstance(value, (list, tuple)):
            args += [flag, ",".join(str(v) for v in value)]
        else:
            args += [flag, str(value)]
    return args + ["--json"]


def cli(command, **options):
    """Runs a ``hetla`` command (``"simulate"``, ``"bound"``, ``"cholesky"``...) with ``options``
    as its flags and returns its JSON reports as a list of dicts."""
    return [_json.loads(r) for r in _hetla.run_json(_arguments(command, options))]


def _one(command, options):
    reports = cli(command, **options)
    return reports[0] if len(reports) == 1 else reports


def info(**options):
    """The topology, the clusters a spec makes (``clusters="2x1"``) and the backends built in:
    ``hetla info --json`` as a dict."""
    return _one("info", options)


def simulate(**options):
    """Simulates a factorisation on a modelled platform (``platform="sirocco", clusters="2x10",
    gpus=4, n=38400, tile=960``, ``factorization="lu"``...): ``hetla simulate --json`` as a dict,
    with its bounds."""
    return _one("simulate", options)


def bound(**options):
    """Lower bounds on a factorisation's makespan on a modelled platform: ``hetla bound --json``
    as a dict."""
    return _one("bound", options)


def tune(**options):
    """Ranks cluster shapes, tiles and schedulers for a factorisation by their simulated makespan
    (``factorization="lu", n=8192``; ``platform="knl"``, a file, or this machine by default,
    calibrated on first use; ``verify=2`` or ``sweep=True`` to run them for real): ``hetla tune
    --json`` as a dict (``pick``, ``runners_up``, ``default``, ``verified``...)."""
    return _one("tune", options)


def sweep(**options):
    """Simulates (or runs) every combination of cluster specs, GPU counts, orders and tiles
    (``clusters=["20x1", "2x10"], gpus=[0, 1], n="4800:9600:4800", out="sweep-out"``) and writes
    its files: ``hetla sweep --json`` as a dict, or, when pandas is installed, its rows as a
    DataFrame (the dict's other keys in ``DataFrame.attrs``)."""
    report = _one("sweep", options)
    try:
        import pandas
    except ImportError:
        return report
    if not isinstance(report, dict):
        return report
    rows_key = next((k for k, v in report.items() if isinstance(v, list) and v and isinstance(v[0], dict)), None)
    if rows_key is None:
        return report
    frame = pandas.DataFrame(report[rows_key])
    frame.attrs.update({k: v for k, v in report.items() if k != rows_key})
    return frame
