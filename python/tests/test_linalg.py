"""hetla's scipy-compatible calls against scipy.linalg and numpy.linalg, and LAPACK's scaled
residual ratios (< 30), on random, ill-conditioned, graded, complex, batched and failing inputs."""

import threading
import time
import warnings

import numpy as np
import pytest
import scipy.linalg as sl

import hetla

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
THRESHOLD = 30.0


def eps(dtype):
    return np.finfo(dtype).eps


def rng(seed=0):
    return np.random.default_rng(seed)


def random(shape, dtype, seed=0):
    r = rng(seed)
    a = r.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * r.standard_normal(shape)
    return a.astype(dtype)


def spd(n, dtype, seed=0, cond=None, batch=()):
    """A Hermitian positive definite matrix (or a stack), with condition number ``cond`` when
    given (eigenvalues spread geometrically), else well conditioned."""
    g = random(batch + (n, n), np.complex128 if np.issubdtype(dtype, np.complexfloating) else np.float64, seed)
    if cond is None:
        a = g @ np.conj(np.swapaxes(g, -1, -2)) + n * np.eye(n)
    else:
        q, _ = np.linalg.qr(g)
        d = np.geomspace(1.0, 1.0 / cond, n)
        a = (q * d[..., None, :]) @ np.conj(np.swapaxes(q, -1, -2))
        a = (a + np.conj(np.swapaxes(a, -1, -2))) / 2
    return a.astype(dtype)


def norm1(a):
    return np.abs(a).sum(axis=-2).max(axis=-1)


def cholesky_ratio(a, l):
    """LAPACK's ||A - L L^H||_1 / (n ||A||_1 eps), in double."""
    a64 = a.astype(np.complex128)
    l64 = l.astype(np.complex128)
    n = a.shape[-1]
    return norm1(a64 - l64 @ np.conj(np.swapaxes(l64, -1, -2))) / (n * norm1(a64) * eps(a.dtype))


def solve_ratio(a, x, b):
    """||B - A X||_1 / (||A||_1 ||X||_1 n eps), LAPACK's solve test."""
    a64, x64, b64 = (m.astype(np.complex128) for m in (a, x, b))
    n = a.shape[-1]
    return norm1(b64 - a64 @ x64) / (norm1(a64) * max(norm1(x64), 1e-300) * n * eps(a.dtype))


# ---- Cholesky -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("n", [1, 7, 100, 600])
def test_cho_factor_matches_scipy_and_lapack_ratios(dtype, lower, order, n):
    a = np.array(spd(n, dtype, seed=n), order=order)
    keep = a.copy()
    c, low = hetla.cho_factor(a, lower=lower)
    assert low is lower
    np.testing.assert_array_equal(a, keep)  # not overwritten
    assert c.dtype == dtype and c.shape == a.shape
    tri = np.tril if lower else np.triu
    factor = tri(c)
    l = factor if lower else np.conj(factor.T)
    assert cholesky_ratio(a, l) < THRESHOLD
    cs, _ = sl.cho_factor(a, lower=lower)
    tol = 50 * n * eps(dtype) * np.abs(cs).max()
    assert np.abs(factor - tri(cs)).max() <= tol
    # The other triangle keeps what a had there (LAPACK leaves it; scipy calls it random data).
    other = np.triu(c, 1) if lower else np.tril(c, -1)
    np.testing.assert_array_equal(other, np.triu(a, 1) if lower else np.tril(a, -1))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [False, True])
def test_cho_solve_matches_scipy(dtype, lower):
    n = 300
    a = spd(n, dtype, seed=3)
    for b in (random((n,), dtype, 4), random((n, 5), dtype, 5)):
        x = hetla.cho_solve(hetla.cho_factor(a, lower=lower), b)
        assert x.shape == b.shape and x.dtype == dtype
        xs = sl.cho_solve(sl.cho_factor(a, lower=lower), b)
        assert solve_ratio(a, x.reshape(n, -1), b.reshape(n, -1)) < THRESHOLD
        assert np.abs(x - xs).max() <= 1e3 * eps(dtype) * np.abs(xs).max()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_is_numpys(dtype, upper):
    a = spd(200, dtype, seed=6)
    l = hetla.cholesky(a, upper=upper)
    ln = np.linalg.cholesky(a, upper=upper)
    assert l.dtype == dtype
    assert np.abs(l - ln).max() <= 100 * 200 * eps(dtype) * np.abs(ln).max()
    # zeros in the other triangle, exactly
    other = np.tril(l, -1) if upper else np.triu(l, 1)
    assert not other.any()


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("cond", [1e4, 1e8, 1e12])
def test_ill_conditioned_keep_the_lapack_ratio(dtype, cond):
    n = 150
    a = spd(n, dtype, seed=7, cond=cond)
    c, lower = hetla.cho_factor(a, lower=True)
    assert cholesky_ratio(a, np.tril(c)) < THRESHOLD
    b = random((n, 2), dtype, 8)
    x = hetla.cho_solve((c, lower), b)
    assert solve_ratio(a, x, b) < THRESHOLD


def test_graded_and_scaled_matrices():
    n = 120
    base = spd(n, np.float64, seed=9)
    d = np.geomspace(1e-6, 1e6, n)
    graded = base * d[:, None] * d[None, :]
    for a in (graded, base * 1e250, base * 1e-250):
        l = hetla.cholesky(a)
        assert cholesky_ratio(a, l) < THRESHOLD


def test_integer_and_bool_inputs_are_promoted_like_scipy():
    a = np.array([[4, 2], [2, 3]])
    c, _ = hetla.cho_factor(a)
    assert c.dtype == np.float64
    np.testing.assert_allclose(np.triu(c), np.triu(sl.cho_factor(a)[0]))
    assert hetla.cholesky([[1.0]]).tolist() == [[1.0]]


def test_overwrite_a_factors_in_place():
    a = spd(50, np.float64, seed=10)
    ref = sl.cho_factor(a.copy())[0]
    c, _ = hetla.cho_factor(a, overwrite_a=True)
    assert c is a
    np.testing.assert_allclose(np.triu(a), np.triu(ref), atol=1e-12)


# ---- batches ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [False, True])
def test_stacks_factor_as_batches(dtype, lower):
    a = spd(12, dtype, seed=11, batch=(3, 5))
    c, _ = hetla.cho_factor(a, lower=lower)
    assert c.shape == a.shape
    tri = np.tril if lower else np.triu
    cs, _ = sl.cho_factor(a, lower=lower)
    assert np.abs(tri(c) - tri(cs)).max() <= 1e3 * eps(dtype) * np.abs(cs).max()
    b = random((3, 5, 12, 2), dtype, 12)
    x = hetla.cho_solve((c, lower), b)
    xs = sl.cho_solve((cs, lower), b)
    assert np.abs(x - xs).max() <= 1e4 * eps(dtype) * np.abs(xs).max()
    # scipy 1.17's rule: a vector is (N,) (broadcast over the stack), a stack of them (..., N, 1).
    v = random((12,), dtype, 13)
    assert hetla.cho_solve((c, lower), v).shape == (3, 5, 12)
    assert hetla.cho_solve((c, lower), v[:, None][None, None]).shape == (3, 5, 12, 1)
    with pytest.raises(ValueError, match="rows"):
        hetla.cho_solve((c, lower), random((3, 5, 12), dtype, 13))
    l = hetla.cholesky(a)
    assert np.abs(l - np.linalg.cholesky(a)).max() <= 1e3 * eps(dtype) * np.abs(l).max()


def test_a_failing_matrix_in_a_batch_is_named():
    a = spd(8, np.float64, seed=14, batch=(6,))
    a[4, 5, 5] = -100.0
    with pytest.raises(np.linalg.LinAlgError, match="matrix 4 of the batch.*column 5"):
        hetla.cho_factor(a)


def test_solve_spd_single_batched_and_mixed():
    a = spd(200, np.float64, seed=15)
    b = random((200, 3), np.float64, 16)
    for mixed in (False, True):
        x = hetla.solve_spd(a, b, mixed=mixed)
        assert solve_ratio(a, x, b) < THRESHOLD
    ab = spd(10, np.complex128, seed=17, batch=(4,))
    bb = random((4, 10, 1), np.complex128, 18)
    x = hetla.solve_spd(ab, bb)
    np.testing.assert_allclose(x, np.linalg.solve(ab, bb), rtol=1e-10)
    x = hetla.solve_spd(ab, bb, mixed=True)
    np.testing.assert_allclose(x, np.linalg.solve(ab, bb), rtol=1e-10)
    with pytest.raises(TypeError, match="float64 or complex128"):
        hetla.solve_spd(a.astype(np.float32), b.astype(np.float32), mixed=True)


# ---- the SPD toolkit ----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_factor_object_logdet_rcond_inverse_update_downdate(dtype):
    n = 60
    a = spd(n, dtype, seed=19)
    f = hetla.CholeskyFactor(a)
    assert f.n == n and f.dtype == np.dtype(dtype).name
    sign, logdet = np.linalg.slogdet(a.astype(np.complex128))
    assert abs(f.logdet() - logdet) <= 1e3 * n * eps(dtype) * abs(logdet)
    exact = 1.0 / (norm1(a.astype(np.complex128)) * norm1(np.linalg.inv(a.astype(np.complex128))))
    assert exact / 10 <= f.rcond() <= exact * 10
    inv = f.inv()
    assert np.abs(inv @ a - np.eye(n)).max() <= 1e4 * n * eps(dtype)
    assert cholesky_ratio(a, f.l) < THRESHOLD
    w = random((n, 2), dtype, 20)
    f.update(w)
    a2 = a + w @ np.conj(w.T)
    assert cholesky_ratio(a2, f.l) < THRESHOLD
    f.downdate(w)
    assert cholesky_ratio(a, f.l) < 10 * THRESHOLD
    x = f.solve(random((n, 1), dtype, 21))
    assert x.shape == (n, 1)
    assert abs(hetla.spd_logdet(a) - logdet) <= 1e3 * n * eps(dtype) * abs(logdet)
    assert hetla.spd_logdet(np.stack([a, a])).shape == (2,)
    assert hetla.spd_inv(np.stack([a, a])).shape == (2, n, n)
    assert 0 < hetla.spd_rcond(a) <= 1


def test_a_downdate_that_loses_definiteness_raises_and_keeps_the_factor():
    a = spd(20, np.float64, seed=22)
    f = hetla.CholeskyFactor(a)
    before = f.l
    with pytest.raises(np.linalg.LinAlgError):
        f.downdate(10 * np.sqrt(np.abs(a).max()) * np.ones((20, 1)))
    np.testing.assert_array_equal(f.l, before)


# ---- LU -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 50, 400])
def test_lu_factor_and_solve_match_scipy(dtype, n):
    a = random((n, n), dtype, n)
    lu, piv = hetla.lu_factor(a)
    lus, pivs = sl.lu_factor(a)
    assert piv.dtype == np.int32 and lu.dtype == dtype
    np.testing.assert_array_equal(piv, pivs)
    assert np.abs(lu - lus).max() <= 1e3 * n * eps(dtype) * np.abs(lus).max()
    b = random((n, 3), dtype, n + 1)
    for trans in (0, 1, 2):
        x = hetla.lu_solve((lu, piv), b, trans=trans)
        op = [a, a.T, np.conj(a.T)][trans]
        assert solve_ratio(op, x, b) < THRESHOLD
    x = hetla.solve(a, b[:, 0])
    assert x.shape == (n,)
    assert solve_ratio(a, x[:, None], b[:, :1]) < THRESHOLD


def test_singular_lu_warns_as_scipy_and_solve_raises():
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    with pytest.warns(hetla.LinAlgWarning, match="exactly zero"):
        lu, piv = hetla.lu_factor(a)
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        hetla.lu_solve((lu, piv), np.ones(2))
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        hetla.solve(a, np.ones(2))


def test_solve_assume_pos_and_transposed():
    a = spd(80, np.float64, seed=23)
    b = random((80,), np.float64, 24)
    np.testing.assert_allclose(hetla.solve(a, b, assume_a="pos"), sl.solve(a, b, assume_a="pos"), rtol=1e-10)
    g = random((80, 80), np.float64, 25)
    np.testing.assert_allclose(hetla.solve(g, b, transposed=True), sl.solve(g, b, transposed=True), rtol=1e-8)


# ---- QR and least squares -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(120, 40), (60, 60), (30, 70)])
def test_qr_modes_match_scipys_shapes_and_lapack_ratios(dtype, shape):
    a = random(shape, dtype, 26)
    m, n = shape
    k = min(m, n)
    for mode, (qs, rs) in {"full": ((m, m), (m, n)), "economic": ((m, k), (k, n))}.items():
        q, r = hetla.qr(a, mode=mode)
        assert q.shape == qs and r.shape == rs and q.dtype == dtype
        assert not np.tril(r, -1).any()
        a64 = a.astype(np.complex128)
        assert norm1(a64 - q @ r) / (m * norm1(a64) * eps(dtype)) < THRESHOLD
        assert norm1(np.eye(q.shape[1]) - np.conj(q.T) @ q) / (m * eps(dtype)) < THRESHOLD
        _, r_scipy = sl.qr(a, mode=mode)
        # R is unique up to the signs of its rows.
        assert np.abs(np.abs(r) - np.abs(r_scipy)).max() <= 1e3 * m * eps(dtype) * np.abs(r_scipy).max()
    (r,) = hetla.qr(a, mode="r")
    assert r.shape == (m, n)
    q, r = hetla.qr(np.stack([a, 2 * a]), mode="economic")
    assert q.shape == (2, m, k) and r.shape == (2, k, n)
    assert np.abs(q[1] @ r[1] - 2 * a).max() <= 1e3 * m * eps(dtype) * np.abs(a).max()


@pytest.mark.parametrize("dtype", DTYPES)
def test_lstsq_matches_scipy(dtype):
    a = random((300, 40), dtype, 27)
    b = random((300, 3), dtype, 28)
    x, res, rank, s = hetla.lstsq(a, b)
    xs, ress, ranks, ss = sl.lstsq(a, b)
    # scipy's default driver (gelsd) returns A's singular values: hetla's too.
    assert rank == ranks == 40
    np.testing.assert_allclose(s, ss, rtol=1e3 * eps(dtype))
    assert np.abs(x - xs).max() <= 1e3 * eps(dtype) * np.abs(xs).max() * 40
    np.testing.assert_allclose(res, ress, rtol=1e3 * eps(dtype) * 40)
    x1, r1, _, _ = hetla.lstsq(a, b[:, 0])
    assert x1.shape == (40,) and np.ndim(r1) == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_lstsq_of_any_rank_and_shape_is_scipys_gelsy(dtype):
    # A rank-deficient tall matrix, an underdetermined wide one, and a wide rank-deficient one:
    # the minimum-norm solution and the effective rank, as scipy's gelsy driver gives them.
    tall = random((50, 5), dtype, 29)
    tall[:, 3] = 0.0
    wide = random((5, 50), dtype, 30)
    low = (random((6, 2), dtype, 31) @ random((2, 9), dtype, 32)).astype(dtype)
    for a, rank in ((tall, 4), (wide, 5), (low, 2)):
        b = random((a.shape[0], 2), dtype, 33)
        x, _, r, _ = hetla.lstsq(a, b)
        xs, _, rs, _ = sl.lstsq(a, b, lapack_driver="gelsy")
        assert r == rs == rank
        assert np.abs(x - xs).max() <= 1e3 * eps(dtype) * max(np.abs(xs).max(), 1.0)


# ---- errors as Python users expect, never a crash -----------------------------------------


def test_not_positive_definite_is_linalgerror_with_the_column():
    a = spd(30, np.float64, seed=31)
    a[17, 17] = -1.0
    with pytest.raises(np.linalg.LinAlgError, match=r"column 17 .*18-th leading minor"):
        hetla.cho_factor(a, lower=True)
    with pytest.raises(np.linalg.LinAlgError):
        hetla.cholesky(-np.eye(3))
    assert issubclass(hetla.LinAlgError, np.linalg.LinAlgError)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_input_is_valueerror(bad):
    a = spd(20, np.float64, seed=32)
    a[10, 3] = bad
    with pytest.raises(ValueError, match="(?i)finite|nan|inf"):
        hetla.cho_factor(a, lower=True)
    with pytest.raises(ValueError):
        hetla.lu_factor(a)
    with pytest.raises(ValueError):
        hetla.cho_solve(hetla.cho_factor(spd(20, np.float64), lower=True), np.full(20, bad))


@pytest.mark.parametrize(
    "a",
    [np.ones(3), np.ones((2, 3)), np.ones((2, 3, 4)), np.float64(3.0), [[1.0, 2.0]]],
)
def test_wrong_shapes_are_valueerror(a):
    with pytest.raises(ValueError, match="square"):
        hetla.cho_factor(a)
    if np.ndim(a) < 2:
        with pytest.raises(ValueError, match="matrix"):
            hetla.lu_factor(a)
    else:
        # LU of any shape, as scipy's (LAPACK's ?getrf).
        lu, piv = hetla.lu_factor(a)
        assert lu.shape == np.shape(a) and piv.shape == np.shape(a)[:-2] + (min(np.shape(a)[-2:]),)


def test_numeric_dtypes_are_promoted_and_others_are_valueerror():
    # scipy's choices of the computed dtype: long double in double, small integers and bools in
    # float32 (float64 for solve), larger integers in float64.
    assert hetla.cho_factor(np.eye(3, dtype=np.longdouble))[0].dtype == np.float64
    assert hetla.cho_factor(np.eye(3, dtype=np.clongdouble))[0].dtype == np.complex128
    for small in (bool, np.int8, np.uint16):
        assert hetla.lu_factor(np.eye(3, dtype=small))[0].dtype == np.float32
        assert hetla.solve(np.eye(3, dtype=small), np.ones(3, dtype=small)).dtype == np.float64
    assert hetla.qr(np.eye(3, dtype=np.int32))[1].dtype == np.float64
    # Non-numeric arrays are scipy's ValueError (object, str, bytes, void).
    with pytest.raises(ValueError):
        hetla.cho_factor(np.array([["a", "b"], ["c", "d"]], dtype=object))
    for kind in ("U1", "S1", "V8"):
        with pytest.raises(ValueError):
            hetla.cholesky(np.zeros((3, 3), dtype=kind))
        with pytest.raises(ValueError):
            hetla.lu_factor(np.zeros((3, 3), dtype=kind))
        with pytest.raises(ValueError):
            hetla.solve(np.zeros((3, 3), dtype=kind), np.zeros(3, dtype=kind))
        # Types numpy cannot combine (void and float) are its TypeError, as scipy's.
        with pytest.raises(TypeError if kind == "V8" else ValueError):
            hetla.solve(np.zeros((3, 3), dtype=kind), np.ones(3))
    # A b of numeric strings is read as numbers, datetimes and timedeltas are solved in float64,
    # as scipy 1.16 and 1.17 do.
    assert hetla.solve(np.eye(2), np.array([b"1", b"2"])).tolist() == [1.0, 2.0]
    assert hetla.solve(np.eye(2, dtype="m8[s]"), np.ones(2, dtype="m8[s]")).dtype == np.float64


def test_rhs_mismatches_are_valueerror():
    c = hetla.cho_factor(np.eye(4))
    with pytest.raises(ValueError, match="rows"):
        hetla.cho_solve(c, np.ones(5))
    with pytest.raises(ValueError):
        hetla.cho_solve(c, np.ones((2, 2, 4)))
    with pytest.raises(ValueError, match="trans"):
        hetla.lu_solve(hetla.lu_factor(np.eye(4)), np.ones(4), trans=5)
    lu, piv = hetla.lu_factor(np.eye(4))
    with pytest.raises(ValueError, match="pivots|interchange"):
        hetla.lu_solve((lu, np.array([9, 1, 2, 3])), np.ones(4))


def test_empty_matrices():
    c, _ = hetla.cho_factor(np.zeros((0, 0)))
    assert c.shape == (0, 0)
    assert hetla.cho_factor(np.zeros((3, 0, 0)))[0].shape == (3, 0, 0)


def test_read_only_input_is_not_written_and_overwrite_copies_it():
    a = spd(10, np.float64)
    a.setflags(write=False)
    c, _ = hetla.cho_factor(a, overwrite_a=True)
    assert c is not a


# ---- the GIL is released while hetla computes ---------------------------------------------


def test_other_python_threads_run_while_hetla_factors():
    a = spd(1500, np.float64, seed=33)
    ticks = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks[0] += 1

    t = threading.Thread(target=count)
    t.start()
    try:
        time.sleep(0.01)
        # Several calls: with the GIL held, the counting thread could not run during any of them.
        during = []
        for _ in range(3):
            before = ticks[0]
            hetla.cho_factor(a)
            during.append(ticks[0] - before)
    finally:
        stop.set()
        t.join()
    assert max(during) > 1000, during


def test_platform_blocks_nest_and_check_their_options():
    a = spd(300, np.float64, seed=34)
    ref = hetla.cholesky(a)
    with hetla.Platform(clusters="2x1") as p:
        assert "2x1" in repr(p)
        with hetla.Platform(threads=1):
            np.testing.assert_allclose(hetla.cholesky(a), ref, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(hetla.cholesky(a), ref, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="clusters"):
        hetla.Platform(clusters="banana")
    with pytest.raises(ValueError, match="backend"):
        hetla.Platform(backend="cublas-on-the-moon")
    with pytest.raises(ValueError):
        hetla.Platform(clusters="2x1", threads=2)


def test_no_warning_from_a_regular_solve():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hetla.solve(np.eye(3) * 2, np.ones(3))


def test_ldlt_factor_solves_and_reads_the_inertia_and_determinant_of_indefinite_matrices():
    rng = np.random.default_rng(7)
    for dtype in (np.float32, np.float64, np.complex64, np.complex128):
        n = 60
        q, _ = np.linalg.qr(rng.standard_normal((n, n)) + (1j * rng.standard_normal((n, n)) if np.iscomplexobj(np.zeros(1, dtype)) else 0))
        d = np.where(np.arange(n) % 3 == 0, -1.0, 2.0) * (1 + np.arange(n) / n)
        a = ((q * d) @ q.conj().T).astype(dtype)
        f = hetla.LdltFactor(np.tril(a))
        assert f.inertia() == (40, 20, 0)
        sign, logabs = f.logdet()
        s_np, l_np = np.linalg.slogdet(a.astype(np.complex128))
        assert sign == np.sign(s_np.real) and abs(logabs - l_np) < 1e-3 * abs(l_np)
        b = rng.standard_normal((n, 2)).astype(dtype)
        x = f.solve(b)
        tol = 1e-3 if dtype in (np.float32, np.complex64) else 1e-10
        assert np.abs(a @ x - b).max() < tol * np.abs(b).max() * n
        assert 0 < f.rcond() <= 1
        assert repr(f).startswith("LdltFactor(n=60")


def test_solve_assume_sym_matches_scipy_on_indefinite_matrices():
    rng = np.random.default_rng(8)
    a = rng.uniform(-1, 1, (200, 200))
    a = a + a.T
    b = rng.uniform(-1, 1, (200, 3))
    np.testing.assert_allclose(hetla.solve(a, b, assume_a="sym"), sl.solve(a, b, assume_a="sym"), rtol=1e-8, atol=1e-10)
    c = a + 1j * np.triu(rng.uniform(-1, 1, (200, 200)), 1)
    c = np.tril(c) + np.tril(c, -1).conj().T
    np.testing.assert_allclose(hetla.solve(c, b, assume_a="her", lower=True), sl.solve(c, b, assume_a="her", lower=True), rtol=1e-8, atol=1e-10)


def test_factors_solve_a_vector_and_any_numeric_b_of_their_kind():
    n = 40
    a = spd(n, np.float64, seed=41)
    b = random((n,), np.float64, 42)
    for f in (hetla.CholeskyFactor(a), hetla.LdltFactor(np.tril(a))):
        x = f.solve(b)
        assert x.shape == (n,)
        np.testing.assert_allclose(a @ x, b, rtol=0, atol=1e-10 * np.abs(b).max())
        # Integers are converted to the factor's dtype; the result is the same as in float64.
        ints = np.arange(n)
        np.testing.assert_allclose(f.solve(ints), f.solve(ints.astype(np.float64)), rtol=1e-14)
        assert f.solve(ints[:, None]).shape == (n, 1)
        # A real factor refuses a complex b (a conversion would drop its imaginary part), and a
        # 3-D b, each with what it got.
        with pytest.raises(ValueError, match="complex128"):
            f.solve(b.astype(np.complex128))
        with pytest.raises(ValueError, match="3 dimensions"):
            f.solve(np.ones((n, 1, 1)))
