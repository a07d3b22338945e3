"""scipy's semantics at the edges, call by call, against scipy itself: every size (0 x 0, (N, 0),
(0,) right-hand sides, 1 x 1 and scalars), scipy 1.17's batching rules, the structures of
``solve(assume_a=...)`` and the triangle each reads, its warnings, its in-place work, and the
dtypes each call computes in. (scipy's own test files run against hetla in
``python/scipy_suite/run.py``.)"""

import warnings

import numpy as np
import pytest
import scipy.linalg as sl

import hetla


def rand(shape, dtype=np.float64, seed=0):
    r = np.random.default_rng(seed)
    a = r.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * r.standard_normal(shape)
    return a.astype(dtype)


def spd(n, dtype=np.float64, seed=0, batch=()):
    g = rand(batch + (n, n), dtype, seed)
    return (g @ np.conj(np.swapaxes(g, -1, -2)) + n * np.eye(n)).astype(dtype)


def same(ours, theirs, rtol=1e-10):
    """Same shape, same dtype, same values (to ``rtol`` of the largest)."""
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    assert ours.dtype == theirs.dtype, (ours.dtype, theirs.dtype)
    if theirs.size:
        scale = max(np.abs(theirs).max(), 1.0)
        assert np.abs(ours - theirs).max() <= rtol * scale


@pytest.mark.parametrize("b_shape", [(0,), (0, 0), (0, 3)])
def test_every_call_on_a_0_by_0_matrix_gives_scipys_empty_result(b_shape):
    a, b = np.empty((0, 0)), np.empty(b_shape)
    same(hetla.solve(a, b), sl.solve(a, b))
    c = hetla.cho_factor(a)
    same(c[0], sl.cho_factor(a)[0])
    same(hetla.cho_solve(c, b), sl.cho_solve(sl.cho_factor(a), b))
    lu = hetla.lu_factor(a)
    same(hetla.lu_solve(lu, b), sl.lu_solve(sl.lu_factor(a), b))
    x, residues, rank, _ = hetla.lstsq(a, b)
    xs, residues_s, rank_s, _ = sl.lstsq(a, b)
    same(x, xs)
    assert rank == rank_s == 0


def test_right_hand_sides_with_no_columns_and_matrices_of_one_entry():
    a = spd(4)
    b = np.empty((4, 0))
    for ours, theirs in [
        (hetla.solve(a, b), sl.solve(a, b)),
        (hetla.cho_solve(hetla.cho_factor(a), b), sl.cho_solve(sl.cho_factor(a), b)),
        (hetla.lu_solve(hetla.lu_factor(a), b), sl.lu_solve(sl.lu_factor(a), b)),
    ]:
        same(ours, theirs)
    one = np.array([[4.0]])
    same(hetla.solve(one, [2.0]), sl.solve(one, [2.0]))
    same(hetla.cho_factor(one)[0], sl.cho_factor(one)[0])
    same(hetla.lu_factor(one)[0], sl.lu_factor(one)[0])


def test_least_squares_with_no_rows_or_no_columns_is_the_zero_solution_of_rank_0():
    for a_shape, b_shape in [((0, 2), (0,)), ((0, 4), (0, 2)), ((4, 0), (4,)), ((4, 0), (4, 2))]:
        a, b = np.zeros(a_shape), np.ones(b_shape)
        ours, theirs = hetla.lstsq(a, b), sl.lstsq(a, b)
        same(ours[0], theirs[0])
        same(ours[1], theirs[1])
        assert ours[2] == theirs[2] == 0


def test_a_scalar_matrix_divides_any_right_hand_side_and_zero_is_singular():
    same(hetla.solve(2.0, 4.0), sl.solve(2.0, 4.0))
    same(hetla.solve([[2.0]], [1.0, 4.0]), sl.solve([[2.0]], [1.0, 4.0]))
    for b in (0, 1, [0, 1]):
        for a in (0, [[0]], np.zeros((1, 1))):
            with pytest.raises(np.linalg.LinAlgError):
                hetla.solve(a, b)
    with pytest.raises(ValueError, match="infs or NaNs"):
        hetla.solve([[np.nan]], [1.0])


@pytest.mark.parametrize(
    "a_batch, b_shape",
    [((), (6,)), ((3,), (6,)), ((2, 3), (6, 2)), ((2, 3), (3, 6, 2)), ((3,), (2, 1, 6, 4)), ((1,), (4, 6, 1))],
)
def test_stacks_broadcast_as_scipys(a_batch, b_shape):
    a = spd(6, seed=1, batch=a_batch)
    b = rand(b_shape, seed=2)
    same(hetla.solve(a, b), sl.solve(a, b))
    same(hetla.cho_solve(hetla.cho_factor(a, lower=True), b), sl.cho_solve(sl.cho_factor(a, lower=True), b))
    lu, piv = sl.lu_factor(a)
    same(hetla.lu_solve(hetla.lu_factor(a), b), sl.lu_solve((lu, piv), b))
    same(hetla.solve(a, b, assume_a="pos"), sl.solve(a, b, assume_a="pos"))


def test_stacks_that_do_not_broadcast_are_clear_errors():
    a = spd(6, batch=(3,))
    for b in (rand((2, 6, 1)), rand((3, 6))):  # a stack of 2 against 3; (3, 6) is one 3 x 6 b
        with pytest.raises(ValueError, match="broadcast|rows"):
            hetla.solve(a, b)
        with pytest.raises(ValueError, match="broadcast|rows"):
            hetla.cho_solve(hetla.cho_factor(a), b)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize(
    "assume_a",
    ["sym", "her", "pos", "upper triangular", "lower triangular", "diagonal", "tridiagonal", "general", None],
)
def test_each_structure_reads_what_scipy_reads(assume_a, lower, dtype):
    if assume_a == "her" and dtype == np.float64:
        pytest.skip("the same as sym")
    n = 7
    a = spd(n, dtype, seed=3)
    # The entries the structure does not read hold garbage: the answers must not see them.
    if assume_a in ("sym", "her", "pos"):
        garbage = np.triu(rand((n, n), dtype, 4) * 1e3, 1)
        a = a + (garbage if lower else garbage.T)
    elif assume_a in ("upper triangular", "lower triangular"):
        a = a + 7 * np.eye(n)
    b = rand((n, 2), dtype, 5)
    ours = hetla.solve(a, b, assume_a=assume_a, lower=lower)
    theirs = sl.solve(a, b, assume_a=assume_a, lower=lower)
    same(ours, theirs, rtol=1e-8)


def test_unknown_structures_are_a_value_error_and_ill_conditioned_matrices_warn():
    with pytest.raises(ValueError, match="not a recognized matrix structure"):
        hetla.solve(np.eye(2), np.ones(2), assume_a="skew")
    a = np.diag(np.logspace(0, 50, 10))
    for structure in (None, "general", "sym", "diagonal", "upper triangular", "pos"):
        with pytest.warns(hetla.LinAlgWarning, match="Ill-conditioned matrix"):
            hetla.solve(a, np.ones(10), assume_a=structure)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hetla.solve(spd(10), np.ones(10))


def test_overwrite_works_in_place_where_scipy_does():
    a = np.asfortranarray(spd(5, seed=6) + np.triu(np.ones((5, 5))))
    b = np.asfortranarray(rand((5, 2), seed=7))
    a0, b0 = a.copy(), b.copy()
    x = hetla.solve(a, b, overwrite_a=True, overwrite_b=True)
    assert np.shares_memory(x, b) and not (b == b0).all() and not (a == a0).all()
    np.testing.assert_allclose(a0 @ x, b0, atol=1e-12)
    # Not where scipy does not: C order, another dtype, or without the flags.
    for a1, b1, flags in [
        (np.ascontiguousarray(a0), np.ascontiguousarray(b0), True),
        (a0.astype(int), b0.astype(int), True),
        (a0.copy(order="F"), b0.copy(order="F"), False),
    ]:
        a2, b2 = a1.copy(), b1.copy()
        x = hetla.solve(a1, b1, overwrite_a=flags, overwrite_b=flags)
        assert not np.shares_memory(x, b1)
        assert (a1 == a2).all() and (b1 == b2).all()


@pytest.mark.parametrize("dtype", [bool, np.int8, np.uint8, np.int16, np.int32, np.int64, np.float16, np.longdouble, np.clongdouble])
def test_each_call_computes_in_scipys_dtype(dtype):
    a = (np.eye(3) * 2).astype(dtype)
    b = np.ones(3, dtype=dtype)
    for ours, theirs in [
        (hetla.solve(a, b), sl.solve(a, b)),
        (hetla.cho_factor(a)[0], sl.cho_factor(a)[0]),
        (hetla.lu_factor(a)[0], sl.lu_factor(a)[0]),
        (hetla.qr(a)[1], sl.qr(a)[1]),
        (hetla.lstsq(a, b)[0], sl.lstsq(a, b)[0]),
        (hetla.cho_solve(hetla.cho_factor(a), b), sl.cho_solve(sl.cho_factor(a), b)),
        (hetla.lu_solve(hetla.lu_factor(a), b), sl.lu_solve(sl.lu_factor(a), b)),
    ]:
        assert ours.dtype == theirs.dtype, (np.dtype(dtype), ours.dtype, theirs.dtype)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_factors_and_inverses_have_exactly_real_diagonals(dtype):
    a = spd(40, dtype, seed=8)
    a[np.diag_indices(40)] += 1e-6j  # round-off on the diagonal, not read (LAPACK's rule)
    for c in (hetla.cho_factor(a, lower=True)[0], hetla.cholesky(a), hetla.spd_inv(a)):
        assert (np.diagonal(c).imag == 0).all()
    stack = hetla.cholesky(spd(10, dtype, seed=9, batch=(3,)))
    assert (np.diagonal(stack, axis1=-2, axis2=-1).imag == 0).all()


def test_a_failing_matrix_of_a_stack_is_named_in_every_batched_call():
    a = spd(5, seed=10, batch=(4,))
    a[2] = 0.0  # singular
    b = np.ones(5)
    with pytest.raises(np.linalg.LinAlgError, match="matrix 2 of the batch"):
        hetla.solve(a, b)
    with pytest.raises(np.linalg.LinAlgError, match="matrix 2 of the batch"):
        hetla.cho_factor(a)
    lu, piv = hetla.lu_factor(np.stack([spd(5, seed=11)] * 3))
    lu[1, 3, 3] = 0.0
    with pytest.raises(np.linalg.LinAlgError, match="matrix 1 of the batch"):
        hetla.lu_solve((lu, piv), b)
    bad = rand((3, 6, 4), seed=12)
    bad[2, 0, 0] = np.nan
    with pytest.raises(ValueError, match="matrix 2 of the batch"):
        hetla.lstsq(bad, np.ones(6))
    with pytest.raises(ValueError, match="matrix 2 of the batch"):
        hetla.qr(bad)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.complex64])
def test_pivoted_qr_is_the_qr_of_the_permuted_matrix_with_a_real_diagonal(dtype):
    a = rand((9, 7), dtype, seed=13)
    q, r, p = hetla.qr(a, pivoting=True)
    q2, r2 = hetla.qr(a[:, p])
    tolerance = 1e-4 if dtype == np.complex64 else 1e-12
    np.testing.assert_allclose(q, q2, atol=tolerance)
    np.testing.assert_allclose(r, r2, atol=tolerance)
    d = np.diagonal(r)
    assert (d.imag == 0).all() and (np.abs(d[1:]) <= np.abs(d[:-1])).all()


def test_on_off_arguments_and_lstsq_drivers_are_checked():
    a = spd(3, seed=14)
    # scipy's own test passes a dict by position as overwrite_a: a TypeError naming it.
    with pytest.raises(TypeError, match="overwrite_a must be True or False, got dict"):
        hetla.qr((a,), {"lwork": 0})
    with pytest.raises(TypeError, match="check_finite"):
        hetla.solve(a, np.ones(3), check_finite="yes")
    with pytest.raises(ValueError, match="lapack_driver"):
        hetla.lstsq(a, np.ones(3), lapack_driver="gelsx")
    for driver in (None, "gelsd", "gelsy", "gelss"):
        assert hetla.lstsq(a, np.ones(3), lapack_driver=driver)[2] == 3
    assert hetla.cho_factor(a, overwrite_a=np.True_, check_finite=0)[1] is False


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("transposed", [False, True])
def test_triangular_kinds_substitute_on_their_triangle_and_refuse_a_zero_diagonal(dtype, transposed):
    n = 9
    r = rand((n, n), dtype, seed=15) + 4 * np.eye(n, dtype=dtype)
    r[np.triu_indices(n, 1)] = np.nan  # the triangle not read
    b = rand((n, 3), dtype, seed=16)
    x = hetla.solve(r, b, assume_a="lower triangular", transposed=transposed)
    low = np.tril(np.nan_to_num(r))
    op = low.T if transposed else low
    tolerance = 1e-4 if dtype in (np.float32, np.complex64) else 1e-12
    np.testing.assert_allclose(op @ x, b, atol=tolerance * 10)
    if not (transposed and np.iscomplexobj(r)):  # scipy refuses complex transposed solves
        same(x, sl.solve(np.tril(np.nan_to_num(r)), b, assume_a="lower triangular",
                         transposed=transposed), rtol=tolerance)
    r[4, 4] = 0
    with pytest.raises(np.linalg.LinAlgError, match=r"diagonal entry \(5, 5\)"):
        hetla.solve(r, b, assume_a="lower triangular", transposed=transposed)


@pytest.mark.parametrize("assume_a", [None, "pos", "sym", "upper triangular", "diagonal"])
@pytest.mark.parametrize("lower", [False, True])
def test_an_ill_conditioned_matrix_of_a_stack_warns_with_its_index(assume_a, lower):
    a = np.stack([spd(4, np.complex128, seed=17)] * 3)
    a[1] = np.diag([1, 1, 1, 1e-30])
    with pytest.warns(hetla.LinAlgWarning, match=r"matrix 1 of the batch\) \(rcond=1e-30"):
        hetla.solve(a, np.ones(4), assume_a=assume_a, lower=lower)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hetla.solve(np.stack([spd(4, np.complex128, seed=18)] * 3), np.ones(4),
                    assume_a=assume_a, lower=lower)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_solve_triangular_is_scipys(dtype):
    n = 9
    rtol = 1e-4 if dtype in (np.float32, np.complex64) else 1e-10
    a = rand((n, n), dtype, 31) + 4 * np.eye(n, dtype=dtype)
    b = rand((n, 3), dtype, 32)
    for lower in (False, True):
        for trans in (0, 1, 2, "N", "T", "C"):
            for unit in (False, True):
                ours = hetla.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit)
                theirs = sl.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit)
                same(ours, theirs, rtol)
    # A vector b stays a vector; a stack of matrices broadcasts against one b, as scipy's.
    same(hetla.solve_triangular(a, b[:, 0]), sl.solve_triangular(a, b[:, 0]), rtol)
    stack = np.stack([a, a.T.copy(), 2 * a])
    same(hetla.solve_triangular(stack, b, lower=True), sl.solve_triangular(stack, b, lower=True), rtol)
    # Integers are computed in float64.
    assert hetla.solve_triangular(np.eye(3, dtype=np.int32), np.ones(3, dtype=np.int32)).dtype == np.float64


def test_solve_triangular_refuses_what_scipy_refuses():
    a = np.triu(rand((4, 4), np.float64, 33)) + 4 * np.eye(4)
    singular = a.copy()
    singular[2, 2] = 0
    with pytest.raises(np.linalg.LinAlgError):
        hetla.solve_triangular(singular, np.ones(4))
    nan = a.copy()
    nan[0, 3] = np.nan
    with pytest.raises(ValueError):
        hetla.solve_triangular(nan, np.ones(4))
    with pytest.raises(ValueError):
        hetla.solve_triangular(a, np.ones(5))
    with pytest.raises(ValueError):
        hetla.solve_triangular(a, np.ones(4), trans="X")
    with pytest.raises(ValueError):
        hetla.solve_triangular(np.zeros((3, 3), dtype="U1"), np.ones(3))


def test_a_batched_cho_factor_returns_lower_as_scipys_array_and_cho_solve_takes_it():
    a = spd(5, np.float64, seed=51, batch=(3,))
    b = rand((3, 5, 2), np.float64, 52)
    for lower in (False, True):
        c, flags = hetla.cho_factor(a, lower=lower)
        theirs = sl.cho_factor(a, lower=lower)[1]
        assert isinstance(flags, np.ndarray) and flags.shape == theirs.shape == (3,)
        assert (flags == theirs).all()
        same(hetla.cho_solve((c, flags), b), sl.cho_solve(sl.cho_factor(a, lower=lower), b))
    # One matrix: a bool, as scipy's.
    assert hetla.cho_factor(a[0])[1] is False


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("shape", [(7, 4), (4, 7), (5, 5)])
def test_qr_raw_is_lapacks_packed_form(dtype, shape):
    rtol = 1e-4 if dtype in (np.float32, np.complex64) else 1e-10
    a = rand(shape, dtype, 61)
    (h, tau), r = hetla.qr(a, mode="raw")
    (h0, tau0), r0 = sl.qr(a, mode="raw")
    assert h.flags.f_contiguous
    same(h, h0, rtol)
    same(tau, tau0, rtol)
    same(r, r0, rtol)
    # With pivoting: ?geqp3's reflectors, the columns in the pivoted order returned.
    (h, tau), r, p = hetla.qr(a, mode="raw", pivoting=True)
    (h1, tau1), r1 = sl.qr(a[:, p], mode="raw")
    same(h, h1, rtol)
    same(tau, tau1, rtol)
    same(r, r1, rtol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_lstsq_returns_the_singular_values_for_scipys_svd_drivers(dtype):
    rtol = 1e-4 if dtype in (np.float32, np.complex64) else 1e-10
    a = rand((9, 4), dtype, 71)
    b = rand((9,), dtype, 72)
    for driver in (None, "gelsd", "gelss"):
        s = hetla.lstsq(a, b, lapack_driver=driver)[3]
        same(s, sl.lstsq(a, b, lapack_driver=driver)[3], rtol)
    assert hetla.lstsq(a, b, lapack_driver="gelsy")[3] is None
    # A stack gives a stack of them, as scipy's.
    stack = np.stack([a, 2 * a])
    bs = np.stack([b, b])[..., None]
    same(hetla.lstsq(stack, bs)[3], sl.lstsq(stack, bs)[3], rtol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_lstsq_ranks_an_exactly_singular_matrix_by_its_singular_values_as_gelsd(dtype):
    # A singular circulant (scipy's TestSolveCirculant::test_singular): its pivoted R's last
    # diagonal entry is rounding at eps's level, its smallest singular value far below, so
    # gelsd's rank (3) and minimum-norm solution come from the singular values, alone and in a stack.
    a = sl.circulant(np.array([1, 1, 0, 0])).astype(dtype)
    b = np.array([1, 2, 3, 4], dtype=dtype)
    tolerance = 1e-4 if dtype in (np.float32, np.complex64) else 1e-12
    for driver in (None, "gelsd", "gelss"):
        x, _, rank, s = hetla.lstsq(a, b, lapack_driver=driver)
        y, _, their_rank, their_s = sl.lstsq(a, b, lapack_driver=driver)
        assert rank == their_rank == 3
        same(x, y, tolerance)
        same(s, their_s, tolerance)
    xs, _, ranks, _ = hetla.lstsq(np.stack([a, a]), np.stack([b, b])[..., None])
    assert list(ranks) == [3, 3]
    same(xs[1, :, 0], sl.lstsq(a, b)[0], tolerance)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("shape", [(7, 5, 5), (2, 3, 9, 6), (4, 5, 8)])
def test_stacked_lu_is_scipys_matrix_by_matrix_and_solves_every_trans(dtype, shape):
    # A stack is factored in one call, one matrix per core, each read where it lies
    # (hetla::Lu::factor_batch_into).
    a = rand(shape, dtype, seed=20)
    lu, piv = hetla.lu_factor(a)
    theirs_lu, theirs_piv = sl.lu_factor(a)
    tolerance = 1e-4 if dtype in (np.float32, np.complex64) else 1e-10
    np.testing.assert_array_equal(piv, theirs_piv)
    same(lu, theirs_lu, rtol=tolerance)
    assert lu.dtype == theirs_lu.dtype and piv.dtype == theirs_piv.dtype
    if shape[-1] == shape[-2]:
        b = rand(shape[:-1] + (2,), dtype, seed=21)
        for trans in (0, 1, 2):
            same(hetla.lu_solve((lu, piv), b, trans=trans), sl.lu_solve((theirs_lu, theirs_piv), b, trans=trans), rtol=tolerance)


def test_a_stacked_lu_reads_any_layout_and_dtype_as_scipy():
    # Fortran-ordered, strided and integer stacks: each matrix read where it lies (or converted),
    # the factors scipy's.
    a = rand((6, 7, 7), seed=23)
    for view in (np.swapaxes(a, -1, -2), a[::2], a[:, ::2, ::2], (a * 10).astype(np.int64)):
        lu, piv = hetla.lu_factor(view)
        theirs_lu, theirs_piv = sl.lu_factor(view)
        np.testing.assert_array_equal(piv, theirs_piv)
        same(lu, theirs_lu, rtol=1e-10)


def test_a_singular_member_of_a_stacked_lu_warns_naming_it():
    a = rand((3, 4, 4), seed=22)
    a[1, :, 2] = 0.0
    with pytest.warns(hetla.LinAlgWarning, match="matrix 1 of the batch"):
        lu, _ = hetla.lu_factor(a)
    assert lu[1, 2, 2] == 0.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("shape", [(7, 5, 5), (2, 3, 9, 6), (4, 5, 8), (3, 1, 1)])
def test_stacked_qr_is_scipys_matrix_by_matrix_in_every_mode(dtype, shape):
    # A stack is factored in one call, one matrix per core (hetla::Qr::factor_batch_in_place).
    a = rand(shape, dtype, seed=40)
    tolerance = 1e-4 if dtype in (np.float32, np.complex64) else 1e-10
    for mode in ("full", "economic", "r"):
        ours, theirs = hetla.qr(a, mode=mode), sl.qr(a, mode=mode)
        if mode == "r":  # scipy's stacked mode "r" gives R itself
            ours, theirs = (ours,), (theirs,)
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            same(o, t, rtol=tolerance)


@pytest.mark.parametrize("shape", [(0, 3, 3), (2, 0, 3), (2, 3, 0)])
def test_stacked_qr_of_empty_matrices_or_none_gives_the_shapes_of_a_qr(shape):
    # scipy 1.17 refuses an empty stack and fails on empty matrices in one.
    a = np.ones(shape)
    m, n = shape[-2:]
    k = min(m, n)
    q, r = hetla.qr(a)
    assert q.shape == shape[:-2] + (m, m) and r.shape == shape
    np.testing.assert_array_equal(q, np.broadcast_to(np.eye(m), q.shape))
    q, r = hetla.qr(a, mode="economic")
    assert q.shape == shape[:-2] + (m, k) and r.shape == shape[:-2] + (k, n)
    assert hetla.qr(a, mode="r").shape == shape


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("driver", ["gelsy", "gelsd"])
@pytest.mark.parametrize("shapes", [((5, 9, 4), (5, 9, 2)), ((3, 8, 8), (8,)), ((2, 4, 7), (2, 4, 3)),
                                    ((2, 1, 6, 3), (3, 6, 2))])
def test_stacked_lstsq_is_scipys_problem_by_problem(dtype, driver, shapes):
    # One problem per core (hetla::Qr::lstsq_rank_batch); the singular values for scipy's SVD drivers.
    a, b = rand(shapes[0], dtype, seed=41), rand(shapes[1], dtype, seed=42)
    tolerance = 1e-3 if dtype in (np.float32, np.complex64) else 1e-9
    ours, theirs = hetla.lstsq(a, b, lapack_driver=driver), sl.lstsq(a, b, lapack_driver=driver)
    same(ours[0], theirs[0], rtol=tolerance)
    same(ours[2], theirs[2])
    if driver == "gelsy":
        # scipy's gelsy gives no residues (an empty array) and, for a stack, an array of None as
        # s; hetla gives the residues where M > N and the rank is N (as gelsd's), and None.
        assert ours[3] is None
        if a.shape[-2] > a.shape[-1]:
            same(ours[1], sl.lstsq(a, b, lapack_driver="gelsd")[1], rtol=tolerance)
    else:
        same(ours[1], theirs[1], rtol=tolerance)
        same(ours[3], theirs[3], rtol=tolerance)


def test_a_stacked_lstsq_of_mixed_rank_solves_each_problem():
    # scipy 1.17 fails here inside numpy's stack (the residues' shapes differ); hetla returns each
    # problem's minimum-norm solution and rank, with no residues.
    a = rand((3, 8, 4), seed=43)
    a[1, :, 3] = a[1, :, 0]
    b = rand((3, 8, 1), seed=44)
    x, residues, rank, s = hetla.lstsq(a, b)
    np.testing.assert_array_equal(rank, [4, 3, 4])
    assert residues.shape == (3, 0) and s.shape == (3, 4)
    for i in range(3):
        same(x[i], sl.lstsq(a[i], b[i])[0], rtol=1e-9)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("transposed", [False, True])
def test_stacked_symmetric_indefinite_solves_are_scipys(dtype, lower, transposed):
    # One system per core by Bunch-Kaufman (hetla::Ldlt::solve_batch); the other triangle unread.
    n = 12
    g = rand((4, n, n), dtype, seed=45)
    a = g + np.conj(np.swapaxes(g, -1, -2))
    a[:, np.arange(n), np.arange(n)] = np.where(np.arange(n) % 2, -3.0, 3.0)
    b = rand((4, n, 2), dtype, seed=46)
    assume = "her" if np.iscomplexobj(a) else "sym"
    if transposed and np.iscomplexobj(a):
        theirs = np.linalg.solve(np.swapaxes(a, -1, -2), b)  # scipy refuses complex transposed
    else:
        theirs = sl.solve(a, b, assume_a=assume, lower=lower, transposed=transposed)
    unread = np.triu_indices(n, 1) if lower else np.tril_indices(n, -1)
    a[(slice(None),) + unread] = np.nan
    ours = hetla.solve(a, b, assume_a=assume, lower=lower, transposed=transposed)
    same(ours, theirs, rtol=1e-3 if dtype in (np.float32, np.complex64) else 1e-9)
    singular = a.copy()
    singular[2, 3, :] = singular[2, :, 3] = 0
    with pytest.raises(np.linalg.LinAlgError, match="matrix 2 of the batch"):
        hetla.solve(singular, b, assume_a=assume, lower=lower)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("hermitian", [False, True])
def test_ldl_factors_as_scipys_and_reads_one_triangle(dtype, lower, hermitian):
    # hetla.Ldl: Bunch-Kaufman's pivoting; the same reconstruction, triangle and blocks as scipy's.
    n = 40
    g = rand((n, n), dtype, seed=50)
    a = g + (np.conj(g.T) if hermitian else g.T)
    a[np.arange(0, n, 3), np.arange(0, n, 3)] = 0  # zero diagonal entries: 2 x 2 blocks
    star = (lambda m: np.conj(m.T)) if hermitian or not np.iscomplexobj(a) else (lambda m: m.T)
    unread = np.triu_indices(n, 1) if lower else np.tril_indices(n, -1)
    given = a.copy()
    given[unread] = np.nan
    lu, d, perm = hetla.ldl(given, lower=lower, hermitian=hermitian)
    theirs = sl.ldl(a, lower=lower, hermitian=hermitian)
    assert lu.dtype == theirs[0].dtype and d.dtype == theirs[1].dtype and perm.dtype == theirs[2].dtype
    tolerance = 1e-4 if dtype in (np.float32, np.complex64) else 1e-11
    np.testing.assert_allclose(lu @ d @ star(lu), a, atol=tolerance * np.abs(a).max() * n)
    inside = np.tril_indices(n, -1) if not lower else np.triu_indices(n, 1)
    assert not np.any(lu[perm][inside])
    assert np.count_nonzero(np.diagonal(d, 1)) > 0  # a 2 x 2 block at least
    off = np.abs(d) * (np.abs(np.subtract.outer(np.arange(n), np.arange(n))) > 1)
    assert not off.any()


def test_ldl_refuses_and_warns_as_scipy():
    with pytest.raises(ValueError):
        hetla.ldl(np.eye(3)[:, :2])
    with pytest.warns(np.exceptions.ComplexWarning):
        hetla.ldl(np.eye(3) * 1j)
    lu, d, perm = hetla.ldl(np.empty((0, 0)))
    assert lu.shape == d.shape == (0, 0) and perm.shape == (0,)
    with pytest.raises(ValueError):
        hetla.ldl(np.array([[1.0, np.nan], [np.nan, 1.0]]))
    # A stack, matrix by matrix.
    a = rand((3, 5, 5), seed=51)
    a = a + np.swapaxes(a, -1, -2)
    lu, d, perm = hetla.ldl(a)
    assert lu.shape == d.shape == (3, 5, 5) and perm.shape == (3, 5)
    np.testing.assert_allclose(lu @ d @ np.swapaxes(lu, -1, -2), a, atol=1e-12)
