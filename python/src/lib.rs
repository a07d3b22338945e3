//! `hetla._hetla`, the extension module behind the Python package `hetla` (`python/hetla/`).
//!
//! The Python layer gives the calls scipy's and numpy's signatures and semantics (argument
//! normalisation, dtype promotion, memory order, return values); this module does the work on
//! arrays it is handed already normalised: one of the four dtypes, matrices stacked in a 3-D array
//! (a single matrix is a batch of one), written in place where the call says so. Every call reads
//! the arrays as faer views (no copy), releases the GIL while hetla computes, and maps hetla's
//! errors to the exceptions Python users expect ([`py_error`]). The options of the innermost
//! `with hetla.Platform(...)` block (a per-thread stack) reach every call.

use std::cell::RefCell;
use std::str::FromStr;

use faer::{MatMut, MatRef, Par};
use hetla::{
    Backend, Cholesky, ClusterSpec, Error, Factor, Lu, Platform, Qr, Scalar, SchedulerKind, Trans,
    c32, c64,
};
use ndarray::{ArrayView2, ArrayViewMut2, ShapeBuilder};
use numpy::{Element, IntoPyArray, PyArray1, PyArray2, PyArray3, PyArrayDyn, PyArrayMethods};
use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;

pyo3::import_exception!(numpy.linalg, LinAlgError);

/// Runs `$body` with `$T` the element type of the array `$a` (a `&Bound<PyAny>`): f32, f64, c32 or
/// c64; any other dtype is a `ValueError` naming `$what` (scipy's error for a non-numeric array).
macro_rules! by_dtype {
    ($a:expr, $what:expr, $T:ident => $body:expr) => {{
        let a: &Bound<'_, PyAny> = $a;
        if a.cast::<PyArrayDyn<f64>>().is_ok() {
            type $T = f64;
            $body
        } else if a.cast::<PyArrayDyn<f32>>().is_ok() {
            type $T = f32;
            $body
        } else if a.cast::<PyArrayDyn<c64>>().is_ok() {
            type $T = c64;
            $body
        } else if a.cast::<PyArrayDyn<c32>>().is_ok() {
            type $T = c32;
            $body
        } else {
            Err(dtype_error($what, a))
        }
    }};
}

/// The `ValueError` of an array whose dtype hetla has no kernels for (scipy's error for a
/// non-numeric array).
fn dtype_error(what: &str, a: &Bound<'_, PyAny>) -> PyErr {
    let dtype = a
        .getattr("dtype")
        .map(|d| d.to_string())
        .unwrap_or_else(|_| a.get_type().to_string());
    PyValueError::new_err(format!(
        "{what} has dtype {dtype}; hetla computes in float32, float64, complex64 and complex128"
    ))
}

/// hetla's error as the exception a numpy or scipy user expects: `numpy.linalg.LinAlgError` for a
/// matrix that cannot be factored or solved with (with the column, and scipy's wording of the
/// leading minor), `ValueError` for bad input (shapes, non-finite entries, options), `RuntimeError`
/// for the rest (a platform that cannot be built, a failed kernel).
fn py_error(e: Error) -> PyErr {
    match &e {
        Error::NotPositiveDefinite { column } => LinAlgError::new_err(format!(
            "{e} ({}-th leading minor of the array is not positive definite)",
            column + 1
        )),
        Error::Singular { .. }
        | Error::RankDeficient { .. }
        | Error::NoConvergence { .. }
        | Error::DowndateNotPositiveDefinite { .. } => LinAlgError::new_err(e.to_string()),
        Error::NotSquare { .. }
        | Error::DimensionMismatch { .. }
        | Error::RowsMismatch { .. }
        | Error::Underdetermined { .. }
        | Error::NonFinite { .. }
        | Error::ZeroTileSize
        | Error::Layout { .. }
        | Error::InvalidOption { .. }
        | Error::TooLarge { .. }
        | Error::DeterminantOutOfRange { .. } => PyValueError::new_err(e.to_string()),
        _ => PyRuntimeError::new_err(e.to_string()),
    }
}

/// [`py_error`] for matrix `index` of a batch of `count`: the message says which.
fn batch_error(e: Error, index: usize, count: usize) -> PyErr {
    let err = py_error(e);
    if count == 1 {
        return err;
    }
    Python::attach(|py| {
        let message = format!("matrix {index} of the batch: {}", err.value(py));
        let kind = err.get_type(py);
        PyErr::from_type(kind, message)
    })
}

/// The options of a `with hetla.Platform(...)` block.
#[derive(Clone, Default)]
struct Options {
    clusters: Option<ClusterSpec>,
    backend: Option<Backend>,
    threads: Option<usize>,
    scheduler: Option<SchedulerKind>,
}

thread_local! {
    /// The stack of `with hetla.Platform(...)` blocks of this thread, innermost last.
    static PLATFORMS: RefCell<Vec<Options>> = const { RefCell::new(Vec::new()) };
}

/// Applies the innermost platform block's options to a builder with Cholesky's run options.
macro_rules! with_options {
    ($builder:expr) => {{
        let mut builder = $builder;
        if let Some(o) = PLATFORMS.with(|p| p.borrow().last().cloned()) {
            if let Some(spec) = o.clusters {
                builder = builder.clusters(spec);
            }
            if let Some(backend) = o.backend {
                builder = builder.backend(backend);
            }
            if let Some(threads) = o.threads {
                builder = builder.threads(threads);
            }
            if let Some(scheduler) = o.scheduler {
                builder = builder.scheduler(scheduler);
            }
        }
        builder
    }};
}

fn cholesky_options() -> Cholesky {
    with_options!(Cholesky::new())
}

fn lu_options() -> Lu {
    with_options!(Lu::new())
}

fn qr_options() -> Qr {
    with_options!(Qr::new())
}

/// A faer view of an ndarray view, for as long as the view borrows.
fn faer_ref<T: Scalar>(a: ArrayView2<'_, T>) -> MatRef<'_, T> {
    let (rows, cols) = a.dim();
    let (rs, cs) = (a.strides()[0], a.strides()[1]);
    // SAFETY: ndarray guarantees that every (i, j) with i < rows, j < cols lies at
    // ptr + i rs + j cs inside the array's memory, borrowed for the view's lifetime, which the
    // faer view keeps.
    unsafe { MatRef::from_raw_parts(a.as_ptr(), rows, cols, rs, cs) }
}

/// A writable faer view of a writable ndarray view, taking over its borrow.
fn faer_mut<T: Scalar>(mut a: ArrayViewMut2<'_, T>) -> MatMut<'_, T> {
    let (rows, cols) = a.dim();
    let (rs, cs) = (a.strides()[0], a.strides()[1]);
    // SAFETY: as in `faer_ref`; the ndarray view is unique (writable) and is consumed, so the
    // faer view is the only access to those elements for the borrow's lifetime.
    unsafe { MatMut::from_raw_parts_mut(a.as_mut_ptr(), rows, cols, rs, cs) }
}

/// Parallel kernels for work worth them, the calling thread for small work.
fn par_for(flops: f64) -> Par {
    if flops > 1e6 { Par::rayon(0) } else { Par::Seq }
}

/// Borrows a writable 3-D array of `T`.
fn writable<'py, T: Element>(
    a: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<numpy::PyReadwriteArray3<'py, T>> {
    let a = a.cast::<PyArray3<T>>().map_err(|_| {
        PyValueError::new_err(format!("{what} must be a 3-D array (a stack of matrices)"))
    })?;
    a.try_readwrite()
        .map_err(|e| PyValueError::new_err(format!("{what} cannot be written: {e}")))
}

/// Borrows a readable array of `T` with `D` dimensions.
fn readable<'py, T: Element, D: ndarray::Dimension>(
    a: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<numpy::PyReadonlyArray<'py, T, D>> {
    let a = a.cast::<numpy::PyArray<T, D>>().map_err(|_| {
        PyValueError::new_err(format!(
            "{what} must be a {}-D array of its matrix's dtype",
            D::NDIM.unwrap_or(0)
        ))
    })?;
    a.try_readonly()
        .map_err(|e| PyValueError::new_err(format!("{what} cannot be read: {e}")))
}

/// Factors every matrix of the stack `a` (n x n each), into the stack `out` of the same shape when
/// given (`a` is then only read), else in place: the lower triangle of each with `lower`, else the
/// upper one (the lower triangle of its transpose, which is the same numbers), scipy's
/// `cho_factor`; the other triangle keeps what `a` had there, or with `clean` is zeroed (numpy's
/// `cholesky`). One matrix runs tiled on the whole platform, a stack one matrix per core (each
/// copied to `out` and factored while in cache).
#[pyfunction]
#[pyo3(signature = (a, out, lower, clean))]
fn cho_factor(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    out: Option<&Bound<'_, PyAny>>,
    lower: bool,
    clean: bool,
) -> PyResult<()> {
    by_dtype!(a, "a", T => cho_factor_t::<T>(py, a, out, lower, clean))
}

fn cho_factor_t<T: Scalar + Element>(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    out: Option<&Bound<'_, PyAny>>,
    lower: bool,
    clean: bool,
) -> PyResult<()> {
    // The triangle to factor, as the lower triangle of a view.
    fn oriented<V: ndarray::RawData>(
        m: ndarray::ArrayBase<V, ndarray::Ix2>,
        lower: bool,
    ) -> ndarray::ArrayBase<V, ndarray::Ix2> {
        if lower { m } else { m.reversed_axes() }
    }
    let chol = cholesky_options();
    let source = match out {
        Some(_) => Some(readable::<T, ndarray::Ix3>(a, "a")?),
        None => None,
    };
    let mut target = writable::<T>(out.unwrap_or(a), "the output")?;
    let source = source.as_ref().map(|s| s.as_array());
    let mut target = target.as_array_mut();
    let count = target.shape()[0];
    if let Some(s) = &source
        && s.shape() != target.shape()
    {
        return Err(PyValueError::new_err(format!(
            "the output has shape {:?}, a {:?}: expected the same",
            target.shape(),
            s.shape()
        )));
    }
    let failed = py.detach(move || {
        let mut mats: Vec<MatMut<'_, T>> = target
            .outer_iter_mut()
            .map(|m| faer_mut(oriented(m, lower)))
            .collect();
        let results = match (&source, mats.as_mut_slice()) {
            (_, []) => Ok(Vec::new()),
            (None, [one]) => Ok(vec![chol.factor_in_place(one.as_mut())]),
            (None, many) => chol.factor_batch_in_place(many),
            (Some(s), [one]) => {
                let a = faer_ref(oriented(s.index_axis(ndarray::Axis(0), 0), lower));
                Ok(vec![chol.factor_into(a, one.as_mut())])
            }
            (Some(s), many) => {
                let sources: Vec<MatRef<'_, T>> = s
                    .outer_iter()
                    .map(|m| faer_ref(oriented(m, lower)))
                    .collect();
                chol.factor_batch_into(&sources, many)
            }
        };
        let results = match results {
            Ok(results) => results,
            Err(e) => return Some((e, 0)),
        };
        if let Some((i, e)) = results
            .into_iter()
            .enumerate()
            .find_map(|(i, r)| r.err().map(|e| (i, e)))
        {
            return Some((e, i));
        }
        if clean {
            for m in &mut mats {
                let n = m.nrows();
                for j in 1..n {
                    m.as_mut()
                        .col_mut(j)
                        .subrows_mut(0, j)
                        .fill(T::from_f64(0.0));
                }
            }
        }
        None
    });
    match failed {
        Some((e, i)) => Err(batch_error(e, i, count)),
        None => Ok(()),
    }
}

/// Solves in place A_i X_i = B_i for every i from the factors of the stack `c` (as `cho_factor`
/// left them: L in the lower triangle with `lower`, else U = L^H in the upper one); `x` holds the
/// B_i and receives the X_i. scipy's `cho_solve`.
#[pyfunction]
fn cho_solve(
    py: Python<'_>,
    c: &Bound<'_, PyAny>,
    lower: bool,
    x: &Bound<'_, PyAny>,
) -> PyResult<()> {
    by_dtype!(c, "c", T => cho_solve_t::<T>(py, c, lower, x))
}

fn cho_solve_t<T: Scalar + Element>(
    py: Python<'_>,
    c: &Bound<'_, PyAny>,
    lower: bool,
    x: &Bound<'_, PyAny>,
) -> PyResult<()> {
    use faer::linalg::triangular_solve as ts;
    let c = readable::<T, ndarray::Ix3>(c, "c")?;
    let mut x = writable::<T>(x, "b")?;
    let (c, mut x) = (c.as_array(), x.as_array_mut());
    let (count, n) = (c.shape()[0], c.shape()[1]);
    if c.shape()[2] != n || x.shape()[0] != count || x.shape()[1] != n {
        return Err(PyValueError::new_err(format!(
            "c is a stack of {count} {n}x{} matrices, b a stack of {} with {} rows: expected {count} right-hand sides of {n} rows",
            c.shape()[2],
            x.shape()[0],
            x.shape()[1]
        )));
    }
    let failed = py.detach(move || {
        for (i, (c, x)) in c.outer_iter().zip(x.outer_iter_mut()).enumerate() {
            let (c, mut x) = (faer_ref(c), faer_mut(x));
            if !c.is_all_finite() {
                return Some((non_finite("c"), i));
            }
            if !x.is_all_finite() {
                return Some((non_finite("b"), i));
            }
            if let Some(k) = (0..n).find(|&k| c[(k, k)] == T::from_f64(0.0)) {
                return Some((Error::NotPositiveDefinite { column: k }, i));
            }
            let par = par_for(2.0 * (n * n * x.ncols()) as f64);
            // A = L L^H: L y = b, then L^H x = y. With the upper triangle, L = U^H is U read
            // transposed and conjugated.
            let (l, conj_l, conj_lh) = if lower {
                (c, faer::Conj::No, faer::Conj::Yes)
            } else {
                (c.transpose(), faer::Conj::Yes, faer::Conj::No)
            };
            ts::solve_lower_triangular_in_place_with_conj(l, conj_l, x.as_mut(), par);
            ts::solve_upper_triangular_in_place_with_conj(l.transpose(), conj_lh, x.as_mut(), par);
        }
        None
    });
    match failed {
        Some((e, i)) => Err(batch_error(e, i, count)),
        None => Ok(()),
    }
}

/// The error of an operand with a NaN or an infinity (scipy's `check_finite`).
fn non_finite(what: &'static str) -> Error {
    Error::InvalidOption {
        option: what,
        reason: "the array must not contain infs or NaNs".into(),
    }
}

/// What `lu_factor` returns: the factors, the interchanges, the first zero pivot's column, and the
/// reciprocal condition estimate when asked for.
type LuParts<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyArray1<i32>>,
    Option<usize>,
    Option<f64>,
);

/// LU with partial pivoting of the square `a` (left unchanged): the factors as LAPACK's ?getrf
/// leaves them (a new Fortran-ordered array), the interchanges 0-based (int32, scipy's `piv`), and
/// the first column with an exactly zero pivot, if any; with `rcond`, also the reciprocal 1-norm
/// condition estimate (?gecon's, O(n^2)).
#[pyfunction]
fn lu_factor<'py>(py: Python<'py>, a: &Bound<'py, PyAny>, rcond: bool) -> PyResult<LuParts<'py>> {
    by_dtype!(a, "a", T => lu_factor_t::<T>(py, a, rcond))
}

fn lu_factor_t<'py, T: Scalar + Element>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    rcond: bool,
) -> PyResult<LuParts<'py>> {
    let a = readable::<T, ndarray::Ix2>(a, "a")?;
    let a = a.as_array();
    let lu = lu_options();
    let (factor, rcond) = py
        .detach(move || -> hetla::Result<_> {
            let factor = lu.factor(faer_ref(a))?;
            let rcond = if rcond { Some(factor.rcond()?) } else { None };
            Ok((factor, rcond))
        })
        .map_err(py_error)?;
    let piv: Vec<i32> = factor.pivots().iter().map(|&p| p as i32).collect();
    Ok((
        to_numpy(py, factor.storage()),
        PyArray1::from_vec(py, piv),
        factor.singular(),
        rcond,
    ))
}

/// LU with partial pivoting of `a` (any shape, Fortran-ordered, writable) in place, as LAPACK's
/// ?getrf: the min(m, n) interchanges (0-based, int32, scipy's `piv`) and the first column with an
/// exactly zero pivot, if any. No copy: a square matrix is factored by the task graph over its
/// block columns where it lies.
#[pyfunction]
fn lu_factor_in_place<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyArray1<i32>>, Option<usize>)> {
    by_dtype!(a, "a", T => {
        let mut a = a
            .cast::<PyArray2<T>>()
            .map_err(|_| PyValueError::new_err("a must be a 2-D array"))?
            .try_readwrite()
            .map_err(|e| PyValueError::new_err(format!("a cannot be written: {e}")))?;
        let view = a.as_array_mut();
        let lu = lu_options();
        let (ipiv, singular) = py
            .detach(move || lu.factor_in_place(faer_mut(view)))
            .map_err(py_error)?;
        let piv: Vec<i32> = ipiv.iter().map(|&p| p as i32).collect();
        Ok((PyArray1::from_vec(py, piv), singular))
    })
}

/// What `lu_factor_batch` returns: the interchanges of every matrix, and each one's first zero
/// pivot's column.
type BatchPivots<'py> = (Bound<'py, PyArray2<i32>>, Vec<Option<usize>>);

/// LU with partial pivoting of every matrix of the stack `a` (count x m x n, any strides, read
/// only) into `lu` (count x m x n, writable; Fortran-ordered matrices are factored where they lie),
/// one matrix per core, each copied and factored while in cache (`hetla::Lu::factor_batch_into`, no
/// Python loop): the interchanges (count x min(m, n), 0-based, int32, scipy's `piv`) and each
/// matrix's first column with an exactly zero pivot (None where there is none). A failing matrix is
/// an error naming it.
#[pyfunction]
fn lu_factor_batch<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    lu: &Bound<'py, PyAny>,
) -> PyResult<BatchPivots<'py>> {
    by_dtype!(a, "a", T => {
        let a = readable::<T, ndarray::Ix3>(a, "a")?;
        let mut lu = writable::<T>(lu, "lu")?;
        let (a, mut lu) = (a.as_array(), lu.as_array_mut());
        let (count, k) = (a.shape()[0], a.shape()[1].min(a.shape()[2]));
        let options = lu_options();
        let results = py
            .detach(move || {
                let sources: Vec<MatRef<'_, T>> = a.outer_iter().map(faer_ref).collect();
                let mut mats: Vec<MatMut<'_, T>> = lu.outer_iter_mut().map(faer_mut).collect();
                options.factor_batch_into(&sources, &mut mats)
            })
            .map_err(py_error)?;
        let mut piv = Vec::with_capacity(count * k);
        let mut singular = Vec::with_capacity(count);
        for (i, result) in results.into_iter().enumerate() {
            let (pivots, zero) = result.map_err(|e| batch_error(e, i, count))?;
            piv.extend(pivots.iter().map(|&p| p as i32));
            singular.push(zero);
        }
        let piv = ndarray::Array2::from_shape_vec((count, k), piv)
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        Ok((piv.into_pyarray(py), singular))
    })
}

/// Solves in place op(A_i) X_i = B_i for every i from the stack of `lu_factor`'s factors `lu`
/// (count x n x n) and interchanges `piv` (count x n, 0-based); `x` (count x n x k, writable) holds
/// the B_i and receives the X_i; one system per core (`hetla::Lu::solve_factored_batch`). `trans`:
/// 0 A, 1 A^T, 2 A^H (scipy's). A failing system is an error naming it.
#[pyfunction]
fn lu_solve_batch(
    py: Python<'_>,
    lu: &Bound<'_, PyAny>,
    piv: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    trans: u8,
) -> PyResult<()> {
    let trans = trans_of(trans)?;
    let piv = piv
        .cast::<PyArray2<i64>>()
        .map_err(|_| PyValueError::new_err("piv must be a 2-D int64 array"))?
        .try_readonly()
        .map_err(|e| PyValueError::new_err(format!("piv cannot be read: {e}")))?;
    let pivots: Vec<Vec<usize>> = piv
        .as_array()
        .outer_iter()
        .map(|row| row.iter().map(|&p| usize::try_from(p)).collect())
        .collect::<Result<_, _>>()
        .map_err(|_| PyValueError::new_err("piv must hold row indices >= 0"))?;
    by_dtype!(lu, "lu", T => {
        let factors = readable::<T, ndarray::Ix3>(lu, "lu")?;
        let mut x = writable::<T>(x, "x")?;
        let (factors, mut x) = (factors.as_array(), x.as_array_mut());
        let count = x.shape()[0];
        let options = lu_options();
        let results = py
            .detach(move || {
                let lus: Vec<MatRef<'_, T>> = factors.outer_iter().map(faer_ref).collect();
                let pivots: Vec<&[usize]> = pivots.iter().map(Vec::as_slice).collect();
                let mut xs: Vec<MatMut<'_, T>> = x.outer_iter_mut().map(faer_mut).collect();
                options.solve_factored_batch(&lus, &pivots, &mut xs, trans)
            })
            .map_err(py_error)?;
        for (i, result) in results.into_iter().enumerate() {
            result.map_err(|e| batch_error(e, i, count))?;
        }
        Ok(())
    })
}

/// Solves in place op(A_i) X_i = B_i for every i of the stack `a` (count x n x n, left unchanged)
/// by LU with partial pivoting, one system per core (`hetla::Lu::solve_batch`, the factors never
/// leaving Rust); `x` (count x n x k, writable) holds the B_i and receives the X_i. Returns each
/// A_i's reciprocal condition estimate (?gecon's, for scipy's warning); a singular or failing
/// system is an error naming it.
#[pyfunction]
fn lu_solve_systems(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    trans: u8,
) -> PyResult<Vec<f64>> {
    let trans = trans_of(trans)?;
    by_dtype!(a, "a", T => {
        let options = lu_options();
        solve_systems::<T>(py, a, x, move |mats, xs| options.solve_batch(mats, xs, trans))
    })
}

/// The systems of the stacks `a` (count x n x n) and `x` (count x n x k, writable) solved in place
/// by the batch call `solve`: each system's reciprocal condition estimate, a failing system an
/// error naming it.
fn solve_systems<T: Scalar + Element>(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    solve: impl for<'m> FnOnce(
        &[MatRef<'m, T>],
        &mut [MatMut<'m, T>],
    ) -> hetla::Result<Vec<hetla::Result<f64>>>
    + Send,
) -> PyResult<Vec<f64>> {
    let a = readable::<T, ndarray::Ix3>(a, "a")?;
    let mut x = writable::<T>(x, "x")?;
    let (a, mut x) = (a.as_array(), x.as_array_mut());
    let count = x.shape()[0];
    let results = py
        .detach(move || {
            let mats: Vec<MatRef<'_, T>> = a.outer_iter().map(faer_ref).collect();
            let mut xs: Vec<MatMut<'_, T>> = x.outer_iter_mut().map(faer_mut).collect();
            solve(&mats, &mut xs)
        })
        .map_err(py_error)?;
    every(results).map_err(|(e, i)| batch_error(e, i, count))
}

/// Solves in place A_i X_i = B_i for every i of the stack `a` (count x n x n, left unchanged), each
/// A_i Hermitian (real: symmetric) indefinite given by its lower triangle, by Bunch-Kaufman, one
/// system per core (`hetla::Ldlt::solve_batch`, the factors never leaving Rust); `x` (count x n x
/// k, writable) holds the B_i and receives the X_i. Returns each A_i's reciprocal condition
/// estimate (?sycon's, for scipy's warning); a singular or failing system is an error naming it.
#[pyfunction]
fn ldlt_solve_systems(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
) -> PyResult<Vec<f64>> {
    by_dtype!(a, "a", T => {
        let options = with_options!(hetla::Ldlt::new());
        solve_systems::<T>(py, a, x, move |mats, xs| options.solve_batch(mats, xs))
    })
}

/// Solves in place op(A) X = B from `lu_factor`'s factors and interchanges; `x` (n x k) holds B and
/// receives X. `trans`: 0 A, 1 A^T, 2 A^H (scipy's).
#[pyfunction]
fn lu_solve(
    py: Python<'_>,
    lu: &Bound<'_, PyAny>,
    piv: Vec<i64>,
    x: &Bound<'_, PyAny>,
    trans: u8,
) -> PyResult<()> {
    by_dtype!(lu, "lu", T => lu_solve_t::<T>(py, lu, piv, x, trans))
}

fn lu_solve_t<T: Scalar + Element>(
    py: Python<'_>,
    lu_array: &Bound<'_, PyAny>,
    piv: Vec<i64>,
    x: &Bound<'_, PyAny>,
    trans: u8,
) -> PyResult<()> {
    let trans = trans_of(trans)?;
    let pivots = piv
        .iter()
        .map(|&p| usize::try_from(p))
        .collect::<Result<Vec<usize>, _>>()
        .map_err(|_| PyValueError::new_err("piv must hold row indices >= 0"))?;
    let factors = readable::<T, ndarray::Ix2>(lu_array, "lu")?;
    let mut x = writable_rhs::<T>(x)?;
    let (factors, x) = (factors.as_array(), x.as_array_mut());
    let lu = lu_options();
    py.detach(move || lu.solve_factored(faer_ref(factors), &pivots, faer_mut(x), trans))
        .map_err(py_error)
}

/// The reciprocal condition estimate (LAPACK's ?pocon) of each matrix of a stack from its Cholesky
/// factor in `c` (count x n x n, as `cho_factor` left it: L in the lower triangle with `lower`,
/// else U = L^H in the upper one) and its ||A||_1 in `norms`.
#[pyfunction]
fn cho_rcond(
    py: Python<'_>,
    c: &Bound<'_, PyAny>,
    lower: bool,
    norms: Vec<f64>,
) -> PyResult<Vec<f64>> {
    by_dtype!(c, "c", T => {
        let c = readable::<T, ndarray::Ix3>(c, "c")?;
        let c = c.as_array();
        if norms.len() != c.shape()[0] {
            return Err(PyValueError::new_err(format!(
                "{} norms for {} factors: expected one per factor",
                norms.len(),
                c.shape()[0]
            )));
        }
        let count = norms.len();
        py.detach(move || {
            c.outer_iter()
                .zip(&norms)
                .enumerate()
                .map(|(i, (m, &norm))| {
                    // The upper triangle of U is the lower triangle of U's transpose: the factor
                    // of A^T, whose condition number is A's.
                    let m = if lower { m } else { m.reversed_axes() };
                    hetla::cholesky_rcond(faer_ref(m), norm).map_err(|e| (e, i))
                })
                .collect::<Result<Vec<f64>, _>>()
        })
        .map_err(|(e, i)| batch_error(e, i, count))
    })
}

/// Solves op(A) X = B in place in `x` (2-D, writable, of `a`'s dtype) by LU with partial pivoting
/// of `a` (n x n, left unchanged), the factors never leaving Rust (scipy's `solve` returns only X).
/// Returns `(singular, rcond)`: the first column with an exactly zero pivot (X then untouched),
/// else None and the reciprocal condition estimate of A (?gecon's), for scipy's warning.
#[pyfunction]
fn lu_solve_system(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    trans: u8,
) -> PyResult<(Option<usize>, f64)> {
    by_dtype!(a, "a", T => lu_solve_system_t::<T>(py, a, x, trans))
}

fn lu_solve_system_t<T: Scalar + Element>(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    trans: u8,
) -> PyResult<(Option<usize>, f64)> {
    let trans = trans_of(trans)?;
    let a = readable::<T, ndarray::Ix2>(a, "a")?;
    let mut x = writable_rhs::<T>(x)?;
    let (a, x) = (a.as_array(), x.as_array_mut());
    let lu = lu_options();
    py.detach(move || -> hetla::Result<_> {
        let factor = lu.factor(faer_ref(a))?;
        if let Some(column) = factor.singular() {
            return Ok((Some(column), 0.0));
        }
        let rcond = factor.rcond()?;
        lu.solve_factored(factor.storage(), factor.pivots(), faer_mut(x), trans)?;
        Ok((None, rcond))
    })
    .map_err(py_error)
}

/// Solves A X = B in place in `x` (2-D, writable, of `a`'s dtype) for the Hermitian (real:
/// symmetric) indefinite A whose lower triangle is `a`'s (left unchanged), by Aasen's factorisation
/// (`hetla::Ldlt`), the factors never leaving Rust. Returns `(singular, rcond)`: the first column
/// of T with an exactly zero pivot (X then untouched), else None and the reciprocal condition
/// estimate of A (?sycon's), for scipy's warning.
#[pyfunction]
fn ldlt_solve_system(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
) -> PyResult<(Option<usize>, f64)> {
    by_dtype!(a, "a", T => ldlt_solve_system_t::<T>(py, a, x))
}

fn ldlt_solve_system_t<T: Scalar + Element>(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
) -> PyResult<(Option<usize>, f64)> {
    let a = readable::<T, ndarray::Ix2>(a, "a")?;
    let mut x = writable_rhs::<T>(x)?;
    let (a, x) = (a.as_array(), x.as_array_mut());
    let ldlt = with_options!(hetla::Ldlt::new());
    py.detach(move || -> hetla::Result<_> {
        let factor = ldlt.factor(faer_ref(a))?;
        if let Some(column) = factor.singular() {
            return Ok((Some(column), 0.0));
        }
        let rcond = factor.rcond()?;
        factor.solve_in_place(faer_mut(x))?;
        Ok((None, rcond))
    })
    .map_err(py_error)
}

/// `lu_solve`'s `trans`: 0 (A x = b), 1 (A^T x = b) or 2 (A^H x = b).
fn trans_of(trans: u8) -> PyResult<Trans> {
    match trans {
        0 => Ok(Trans::No),
        1 => Ok(Trans::Transpose),
        2 => Ok(Trans::Adjoint),
        t => Err(PyValueError::new_err(format!(
            "trans must be 0 (A x = b), 1 (A^T x = b) or 2 (A^H x = b), got {t}"
        ))),
    }
}

/// A right-hand side to be solved in place: a writable 2-D array of the matrix's dtype.
fn writable_rhs<'py, T: Element>(
    x: &Bound<'py, PyAny>,
) -> PyResult<numpy::PyReadwriteArray2<'py, T>> {
    x.cast::<PyArray2<T>>()
        .map_err(|_| PyValueError::new_err("b must be a 2-D array of the matrix's dtype"))?
        .try_readwrite()
        .map_err(|e| PyValueError::new_err(format!("b cannot be written: {e}")))
}

/// Solves op(A) X = B in place in `x` (2-D, writable, of `a`'s dtype) for the triangular A in the
/// `lower` or upper triangle of `a` (the other is not read), op by `trans` as `lu_solve`'s. Returns
/// the reciprocal condition estimate of op(A) (LAPACK's ?trcon, 1-norm), for scipy's warning. A
/// zero on the diagonal is a LinAlgError naming it.
#[pyfunction]
fn solve_triangular(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    lower: bool,
    trans: u8,
) -> PyResult<f64> {
    by_dtype!(a, "a", T => solve_triangular_t::<T>(py, a, x, lower, trans))
}

fn solve_triangular_t<T: Scalar + Element>(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    lower: bool,
    trans: u8,
) -> PyResult<f64> {
    let trans = trans_of(trans)?;
    let triangle = if lower {
        hetla::Triangle::Lower
    } else {
        hetla::Triangle::Upper
    };
    let a = readable::<T, ndarray::Ix2>(a, "a")?;
    let mut x = writable_rhs::<T>(x)?;
    let (a, x) = (a.as_array(), x.as_array_mut());
    py.detach(move || hetla::solve_triangular(faer_ref(a), triangle, trans, faer_mut(x)))
        .map_err(|e| match e {
            Error::Singular { column } => LinAlgError::new_err(format!(
                "A singular matrix detected: the triangular matrix's diagonal entry ({0}, {0}) \
                 (1-based) is exactly zero (LAPACK ?trtrs's info = {0})",
                column + 1
            )),
            e => py_error(e),
        })
}

/// Householder QR of `a` (m x n, left unchanged): `(q, r)` by `mode`, scipy's: "full" (Q m x m, R m
/// x n), "economic" (Q m x k, R k x n, k = min(m, n)), "r" (no Q, R m x n).
#[pyfunction]
fn qr<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    mode: &str,
) -> PyResult<(Option<Bound<'py, PyAny>>, Bound<'py, PyAny>)> {
    by_dtype!(a, "a", T => qr_t::<T>(py, a, mode))
}

fn qr_t<'py, T: Scalar + Element>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    mode: &str,
) -> PyResult<(Option<Bound<'py, PyAny>>, Bound<'py, PyAny>)> {
    let (full, want_q) = match mode {
        "full" => (true, true),
        "economic" => (false, true),
        "r" => (true, false),
        other => {
            return Err(PyValueError::new_err(format!(
                "mode must be 'full', 'economic' or 'r', got {other:?}"
            )));
        }
    };
    let a = readable::<T, ndarray::Ix2>(a, "a")?;
    let a = a.as_array();
    let qr = qr_options();
    let (q, r) = py
        .detach(move || -> hetla::Result<_> {
            let a = faer_ref(a);
            let (m, n) = (a.nrows(), a.ncols());
            let factor = qr.factor(a)?;
            let r = factor.r();
            let rows = if full { m } else { r.nrows() };
            let r = ndarray::Array2::from_shape_fn((rows, n).f(), |(i, j)| {
                if i < r.nrows() {
                    r[(i, j)]
                } else {
                    T::from_f64(0.0)
                }
            });
            // Q formed in the array NumPy receives (no copy of its own).
            let q = match want_q {
                false => None,
                true => {
                    let cols = if full { m } else { m.min(n) };
                    let mut q = ndarray::Array2::<T>::from_elem((m, cols).f(), T::from_f64(0.0));
                    factor.q_into(faer_mut(q.view_mut()))?;
                    Some(q)
                }
            };
            Ok((q, r))
        })
        .map_err(py_error)?;
    Ok((
        q.map(|q| q.into_pyarray(py).into_any()),
        r.into_pyarray(py).into_any(),
    ))
}

/// The least-squares solution of min ||A X - B|| (A m x n with m >= n and full column rank, B m x
/// k) by Householder QR, Q^H B applied in the factorisation's task graph; X is n x k.
#[pyfunction]
fn lstsq<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    by_dtype!(a, "a", T => {
        let a = readable::<T, ndarray::Ix2>(a, "a")?;
        let b = readable::<T, ndarray::Ix2>(b, "b")?;
        let (a, b) = (a.as_array(), b.as_array());
        let qr = qr_options();
        let x = py
            .detach(move || qr.solve_least_squares(faer_ref(a), b))
            .map_err(py_error)?;
        Ok(x.into_pyarray(py).into_any())
    })
}

/// LAPACK ?geqrf's factorisation of `a` (m x n, left unchanged), scipy's `qr(mode="raw")`: `h` (m x
/// n, Fortran-ordered) holds R on and above its diagonal and the Householder vectors below it (unit
/// first entries implied), `tau` (min(m, n)) the reflectors' scalars, H_i = I - tau_i v_i v_i^H.
/// One QR of the whole matrix by the tile kernel (?geqrt, whose reflectors are ?geqrf's; each tau
/// is the diagonal entry of its block's T).
#[pyfunction]
fn qr_raw<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    by_dtype!(a, "a", T => {
        let a = readable::<T, ndarray::Ix2>(a, "a")?;
        let a = a.as_array();
        let (m, n) = a.dim();
        let k = m.min(n);
        let mut h = ndarray::Array2::<T>::zeros((m, n).f());
        h.assign(&a);
        // LAPACK's usual inner block, at most the reflectors' count.
        let ib = k.clamp(1, 32);
        let mut t = ndarray::Array2::<T>::zeros((ib, k).f());
        if k > 0 {
            let (hv, tv) = (h.view_mut(), t.view_mut());
            py.detach(move || {
                Backend::default().qr_tile(faer_mut(hv), faer_mut(tv), Par::rayon(0))
            })
            .map_err(|e| py_error(Error::Kernel(e)))?;
        }
        let tau: ndarray::Array1<T> = (0..k).map(|c| t[(c % ib, c)]).collect();
        Ok((h.into_pyarray(py).into_any(), tau.into_pyarray(py).into_any()))
    })
}

/// A = Q R for every matrix of the stack `a` (count x m x n, any strides, read only), one matrix
/// per core (`hetla::Qr::factor_batch_into`, LAPACK's ?geqrt and ?orgqr): R into `r` (count x rows
/// x n, writable, min(m, n) <= rows <= m; zeros below each triangle) and with `q` (count x m x c,
/// writable, c <= m) Q's first c columns of each. A failing matrix is an error naming it.
#[pyfunction]
fn qr_batch(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    r: &Bound<'_, PyAny>,
    q: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    by_dtype!(a, "a", T => {
        let a = readable::<T, ndarray::Ix3>(a, "a")?;
        let mut r = writable::<T>(r, "r")?;
        let mut q = q.map(|q| writable::<T>(q, "q")).transpose()?;
        let (a, mut r) = (a.as_array(), r.as_array_mut());
        let count = a.shape()[0];
        let options = qr_options();
        let mut q = q.as_mut().map(|q| q.as_array_mut());
        py.detach(move || -> Result<(), (Error, usize)> {
            let mats: Vec<MatRef<'_, T>> = a.outer_iter().map(faer_ref).collect();
            let mut rs: Vec<MatMut<'_, T>> = r.outer_iter_mut().map(faer_mut).collect();
            let mut qs: Option<Vec<MatMut<'_, T>>> =
                q.as_mut().map(|q| q.outer_iter_mut().map(faer_mut).collect());
            let done = options
                .factor_batch_into(&mats, &mut rs, qs.as_deref_mut())
                .map_err(|e| (e, 0))?;
            every(done).map(|_| ())
        })
        .map_err(|(e, i)| batch_error(e, i, count))
    })
}

/// Each result of a batch, or the first failure with its matrix's index.
fn every<R>(results: Vec<hetla::Result<R>>) -> Result<Vec<R>, (Error, usize)> {
    results
        .into_iter()
        .enumerate()
        .map(|(i, r)| r.map_err(|e| (e, i)))
        .collect()
}

/// The minimum-norm least-squares solutions of every problem of the stacks `a` (count x m x n) and
/// `b` (count x m x k), one per core, and each A's effective rank: ?gelsy's
/// (`hetla::Qr::lstsq_rank_batch`), or with `singular` ?gelsd's, by each A's singular values,
/// returned too (count x min(m, n), `hetla::Qr::lstsq_svd_batch`). A failing problem is an error
/// naming it.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn lstsq_batch<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    rcond: Option<f64>,
    singular: bool,
) -> PyResult<(Bound<'py, PyAny>, Vec<usize>, Option<Bound<'py, PyAny>>)> {
    by_dtype!(a, "a", T => {
        let a = readable::<T, ndarray::Ix3>(a, "a")?;
        let b = readable::<T, ndarray::Ix3>(b, "b")?;
        let (a, b) = (a.as_array(), b.as_array());
        let (count, n, k) = (a.shape()[0], a.shape()[2], b.shape()[2]);
        let size = a.shape()[1].min(n);
        let options = qr_options();
        let solved = py.detach(move || -> hetla::Result<Vec<hetla::Result<_>>> {
            let mats: Vec<MatRef<'_, T>> = a.outer_iter().map(faer_ref).collect();
            let rhs: Vec<MatRef<'_, T>> = b.outer_iter().map(faer_ref).collect();
            if singular {
                options.lstsq_svd_batch(&mats, &rhs, rcond)
            } else {
                let solved = options.lstsq_rank_batch(&mats, &rhs, rcond)?;
                Ok(solved.into_iter().map(|r| r.map(|(x, rank)| (x, rank, Vec::new()))).collect())
            }
        });
        let solved = every(solved.map_err(py_error)?).map_err(|(e, i)| batch_error(e, i, count))?;
        let mut x = ndarray::Array3::<T>::zeros((count, n, k));
        let mut ranks = Vec::with_capacity(count);
        let mut flat = Vec::with_capacity(if singular { count * size } else { 0 });
        for (i, (xi, rank, values)) in solved.into_iter().enumerate() {
            x.index_axis_mut(ndarray::Axis(0), i)
                .assign(&ndarray::Array2::from_shape_fn((n, k), |(r, c)| xi[(r, c)]));
            ranks.push(rank);
            flat.extend(values);
        }
        let s = if singular {
            Some(PyArray1::from_vec(py, flat).reshape([count, size])?.into_any())
        } else {
            None
        };
        Ok((x.into_pyarray(py).into_any(), ranks, s))
    })
}

/// Bunch-Kaufman's P A P^T = L D L^* of the Hermitian (`hermitian`, L^* = L^H) or complex symmetric
/// (L^T) matrix whose lower triangle is `a`'s (`hetla::Ldl`): L (unit lower), D (block diagonal)
/// and P as indices (row i of P A P^T is row `perm[i]` of A).
#[pyfunction]
#[allow(clippy::type_complexity)]
fn ldl<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    hermitian: bool,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>, Vec<usize>)> {
    by_dtype!(a, "a", T => {
        let a = readable::<T, ndarray::Ix2>(a, "a")?;
        let a = a.as_array();
        let f = py
            .detach(move || hetla::Ldl::factor(faer_ref(a), hermitian))
            .map_err(py_error)?;
        let n = f.l().nrows();
        let l = ndarray::Array2::from_shape_fn((n, n), |(i, j)| f.l()[(i, j)]);
        let d = ndarray::Array2::from_shape_fn((n, n), |(i, j)| f.d()[(i, j)]);
        Ok((l.into_pyarray(py).into_any(), d.into_pyarray(py).into_any(), f.perm().to_vec()))
    })
}

/// What `qr_pivoted` returns: Q (None when not asked for), R and the column permutation.
type PivotedParts<'py> = (
    Option<Bound<'py, PyAny>>,
    Bound<'py, PyAny>,
    Bound<'py, PyArray1<i32>>,
);

/// QR with column pivoting, A P = Q R (|R_ii| non-increasing): Q m x m (`full`) or m x min(m, n)
/// when `want_q`, R likewise m x n or min(m, n) x n, and P as the column indices of A in A P
/// (scipy's `P`).
#[pyfunction]
fn qr_pivoted<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    full: bool,
    want_q: bool,
) -> PyResult<PivotedParts<'py>> {
    by_dtype!(a, "a", T => {
        let a = readable::<T, ndarray::Ix2>(a, "a")?;
        let a = a.as_array();
        let f = py
            .detach(move || hetla::PivotedQr::factor(faer_ref(a), full))
            .map_err(py_error)?;
        let perm: Vec<i32> = f.perm().iter().map(|&p| p as i32).collect();
        Ok((
            want_q.then(|| to_numpy(py, f.q())),
            to_numpy(py, f.r()),
            PyArray1::from_vec(py, perm),
        ))
    })
}

/// The minimum-norm least-squares solution of min ||A X - B|| for A m x n of any shape and rank,
/// with A's effective rank at `rcond` (None: eps): ?gelsy's (`hetla::lstsq_rank`), or with
/// `singular` ?gelsd's, by A's singular values, returned too in `a`'s real precision
/// (`hetla::lstsq_svd`; scipy's `lstsq` with its SVD drivers).
#[pyfunction]
#[allow(clippy::type_complexity)]
fn lstsq_rank<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    rcond: Option<f64>,
    singular: bool,
) -> PyResult<(Bound<'py, PyAny>, usize, Option<Bound<'py, PyAny>>)> {
    by_dtype!(a, "a", T => {
        let a = readable::<T, ndarray::Ix2>(a, "a")?;
        let b = readable::<T, ndarray::Ix2>(b, "b")?;
        let (a, b) = (faer_ref(a.as_array()), faer_ref(b.as_array()));
        let (x, rank, s) = py
            .detach(move || match singular {
                true => hetla::lstsq_svd(a, b, rcond).map(|(x, rank, s)| (x, rank, Some(s))),
                false => hetla::lstsq_rank(a, b, rcond).map(|(x, rank)| (x, rank, None)),
            })
            .map_err(py_error)?;
        let s = s.map(|s| PyArray1::from_vec(py, s).into_any());
        Ok((to_numpy(py, x.as_ref()), rank, s))
    })
}

/// Solves the SPD (Hermitian positive definite) A X = B in mixed precision: factor in single,
/// refine to double (float64 and complex128 only). Returns X and the refinement steps taken.
#[pyfunction]
fn solve_spd_mixed<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyAny>, usize)> {
    macro_rules! refined {
        ($T:ty) => {{
            let a = readable::<$T, ndarray::Ix2>(a, "a")?;
            let b = readable::<$T, ndarray::Ix2>(b, "b")?;
            let (a, b) = (a.as_array(), b.as_array());
            let chol = cholesky_options();
            let (x, refinement) = py
                .detach(move || chol.solve_refined(faer_ref(a), b))
                .map_err(py_error)?;
            Ok((x.into_pyarray(py).into_any(), refinement.iterations))
        }};
    }
    if a.cast::<PyArrayDyn<f64>>().is_ok() {
        refined!(f64)
    } else if a.cast::<PyArrayDyn<c64>>().is_ok() {
        refined!(c64)
    } else {
        Err(PyTypeError::new_err(
            "mixed precision refines to float64 or complex128: give a of one of those dtypes",
        ))
    }
}

/// A kind of factor, generic over the scalar type (`Factor<T>`, `LdltFactor<T>`).
trait FactorKind {
    type Of<T: Scalar>: Send;
}

/// A builder that factors one matrix into a factor of its kind.
trait Factorizer: Send + Sync {
    type Kind: FactorKind;
    fn factor_view<T: Scalar>(
        &self,
        a: MatRef<'_, T>,
    ) -> hetla::Result<<Self::Kind as FactorKind>::Of<T>>;
}

impl Factorizer for Cholesky {
    type Kind = PositiveDefinite;
    fn factor_view<T: Scalar>(&self, a: MatRef<'_, T>) -> hetla::Result<Factor<T>> {
        self.factor(a)
    }
}

impl Factorizer for hetla::Ldlt {
    type Kind = Indefinite;
    fn factor_view<T: Scalar>(&self, a: MatRef<'_, T>) -> hetla::Result<hetla::LdltFactor<T>> {
        self.factor(a)
    }
}

/// The factor of the 2-D array `a` (any of hetla's dtypes) by `builder`, the GIL released while it
/// factors.
fn factor_array<B: Factorizer>(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    builder: B,
) -> PyResult<AnyFactor<B::Kind>> {
    by_dtype!(a, "a", T => {
        let a = readable::<T, ndarray::Ix2>(a, "a")?;
        let a = a.as_array();
        py.detach(|| builder.factor_view(faer_ref(a)))
            .map(T::wrap::<B::Kind>)
            .map_err(py_error)
    })
}

/// Cholesky's factors.
struct PositiveDefinite;
impl FactorKind for PositiveDefinite {
    type Of<T: Scalar> = Factor<T>;
}

/// The symmetric indefinite family's factors.
struct Indefinite;
impl FactorKind for Indefinite {
    type Of<T: Scalar> = hetla::LdltFactor<T>;
}

/// A factor of one matrix of the family `F`, in the precision the matrix came in.
enum AnyFactor<F: FactorKind> {
    F32(F::Of<f32>),
    F64(F::Of<f64>),
    C32(F::Of<c32>),
    C64(F::Of<c64>),
}

impl<F: FactorKind> AnyFactor<F> {
    /// The dtype name ("float64", ...).
    fn dtype(&self) -> &'static str {
        match self {
            AnyFactor::F32(_) => "float32",
            AnyFactor::F64(_) => "float64",
            AnyFactor::C32(_) => "complex64",
            AnyFactor::C64(_) => "complex128",
        }
    }
}

/// A factor that solves A X = B for an ndarray B.
trait Solver<T: Scalar>: Sync {
    fn solve_array(&self, b: ndarray::ArrayView2<'_, T>) -> hetla::Result<ndarray::Array2<T>>;
}

impl<T: Scalar> Solver<T> for Factor<T> {
    fn solve_array(&self, b: ndarray::ArrayView2<'_, T>) -> hetla::Result<ndarray::Array2<T>> {
        self.solve(b)
    }
}

impl<T: Scalar> Solver<T> for hetla::LdltFactor<T> {
    fn solve_array(&self, b: ndarray::ArrayView2<'_, T>) -> hetla::Result<ndarray::Array2<T>> {
        self.solve(b)
    }
}

/// X with A X = B through the factor `f`, B a 2-D array of the factor's dtype (the GIL released).
fn solve_with<'py, T: Scalar + Element>(
    py: Python<'py>,
    f: &impl Solver<T>,
    b: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    // b as numpy reads it: (n,) or (n, k) of any numeric dtype the factor's holds (a real factor
    // refuses a complex b, whose imaginary part a conversion would drop).
    let np = py.import("numpy")?;
    let given = np.call_method1("asarray", (b,))?;
    let kind: String = given.getattr("dtype")?.getattr("kind")?.extract()?;
    let ndim: usize = given.getattr("ndim")?.extract()?;
    let dtype = given.getattr("dtype")?.to_string();
    if !"biufc".contains(kind.as_str()) || (kind == "c" && !T::PRECISION.is_complex()) {
        return Err(PyValueError::new_err(format!(
            "b has dtype {dtype}; this factor solves in {}: give b of a real or, for a complex \
             factor, complex numeric dtype",
            numpy::dtype::<T>(py)
        )));
    }
    if ndim != 1 && ndim != 2 {
        return Err(PyValueError::new_err(format!(
            "b must be of shape (n,) or (n, k), got {ndim} dimensions"
        )));
    }
    let mut converted = np.call_method1("asarray", (given, numpy::dtype::<T>(py)))?;
    if ndim == 1 {
        let rows: usize = converted.len()?;
        converted = converted.call_method1("reshape", ((rows, 1),))?;
    }
    let b = readable::<T, ndarray::Ix2>(&converted, "b")?;
    let b = b.as_array();
    let x = py.detach(|| f.solve_array(b)).map_err(py_error)?;
    Ok(match ndim {
        1 => x.column(0).to_owned().into_pyarray(py).into_any(),
        _ => x.into_pyarray(py).into_any(),
    })
}

/// The element types a factor can have.
trait Typed: Scalar + Element {
    fn wrap<F: FactorKind>(f: F::Of<Self>) -> AnyFactor<F>;
}

macro_rules! typed {
    ($($t:ty => $variant:ident),*) => {$(
        impl Typed for $t {
            fn wrap<F: FactorKind>(f: F::Of<Self>) -> AnyFactor<F> {
                AnyFactor::$variant(f)
            }
        }
    )*};
}

typed!(f32 => F32, f64 => F64, c32 => C32, c64 => C64);

/// Runs `$body` with `$f` the typed factor inside an [`AnyFactor`].
macro_rules! on_factor {
    ($any:expr, $f:ident => $body:expr) => {
        match $any {
            AnyFactor::F32($f) => $body,
            AnyFactor::F64($f) => $body,
            AnyFactor::C32($f) => $body,
            AnyFactor::C64($f) => $body,
        }
    };
}

/// The Cholesky factor of a symmetric (Hermitian) positive definite matrix, kept to solve with and
/// to read from: `solve`, `logdet`, `rcond`, `inv`, `l`, and rank-k `update` and `downdate` (A + W
/// W^H, A - W W^H refactored in O(n^2 k)). Built from the matrix's lower triangle.
#[pyclass(name = "CholeskyFactor", module = "hetla")]
struct PyFactor(AnyFactor<PositiveDefinite>);

#[pymethods]
impl PyFactor {
    #[new]
    fn new(py: Python<'_>, a: &Bound<'_, PyAny>) -> PyResult<Self> {
        factor_array(py, a, cholesky_options()).map(PyFactor)
    }

    /// Order of the factored matrix.
    #[getter]
    fn n(&self) -> usize {
        on_factor!(&self.0, f => f.n())
    }

    /// The dtype name ("float64", ...).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.0.dtype()
    }

    /// L, lower triangular (zeros above the diagonal), a new array.
    #[getter]
    fn l<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        on_factor!(&self.0, f => to_numpy(py, f.l().as_ref()))
    }

    /// Solves A X = B: B of shape (n,) (X then (n,)) or (n, k), of any numeric dtype the factor's
    /// holds (converted to it).
    fn solve<'py>(&self, py: Python<'py>, b: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        on_factor!(&self.0, f => solve_with(py, f, b))
    }

    /// ln det A (A is positive definite: its determinant is positive), without overflow.
    fn logdet(&self) -> f64 {
        on_factor!(&self.0, f => f.log_det())
    }

    /// The reciprocal condition number of A in the 1-norm, estimated (LAPACK ?pocon).
    fn rcond(&self, py: Python<'_>) -> PyResult<f64> {
        on_factor!(&self.0, f => py.detach(|| f.rcond()).map_err(py_error))
    }

    /// A^-1, a new array (from the factor, LAPACK ?potri's way), written where numpy keeps it.
    fn inv<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        on_factor!(&self.0, f => {
            let n = f.n();
            let mut out = ndarray::Array2::zeros((n, n).f());
            py.detach(|| f.inverse_into(faer_mut(out.view_mut())))
                .map_err(py_error)?;
            Ok(out.into_pyarray(py).into_any())
        })
    }

    /// Refactors in place for A + W W^H (W of shape (n,) or (n, k)), in O(n^2 k).
    fn update(&mut self, py: Python<'_>, w: &Bound<'_, PyAny>) -> PyResult<()> {
        self.change(py, w, true)
    }

    /// Refactors in place for A - W W^H; `LinAlgError` when that is not positive definite (the
    /// factor is then left as it was).
    fn downdate(&mut self, py: Python<'_>, w: &Bound<'_, PyAny>) -> PyResult<()> {
        self.change(py, w, false)
    }

    fn __repr__(&self) -> String {
        format!("CholeskyFactor(n={}, dtype={})", self.n(), self.dtype())
    }
}

impl PyFactor {
    fn change(&mut self, py: Python<'_>, w: &Bound<'_, PyAny>, up: bool) -> PyResult<()> {
        fn change<T: Scalar + Element>(
            py: Python<'_>,
            f: &mut Factor<T>,
            w: &Bound<'_, PyAny>,
            up: bool,
        ) -> PyResult<()> {
            let w = readable::<T, ndarray::Ix2>(w, "w")?;
            let w = w.as_array();
            let mut changed = f.clone();
            py.detach(|| {
                if up {
                    changed.update(faer_ref(w))
                } else {
                    changed.downdate(faer_ref(w))
                }
            })
            .map_err(py_error)?;
            *f = changed;
            Ok(())
        }
        on_factor!(&mut self.0, f => change(py, f, w, up))
    }
}

/// The symmetric (Hermitian) indefinite factor A = Q^T L T L^H Q of one matrix (Aasen's,
/// `hetla::Ldlt`), kept to solve with and to read from: `solve`, `inertia`, `logdet` (ln |det A|
/// and its sign), `rcond`. Built from the matrix's lower triangle. Not scipy's `ldl` shape: T is
/// block tridiagonal (b wide), not the 1 x 1 and 2 x 2 blocks of Bunch-Kaufman's D.
#[pyclass(name = "LdltFactor", module = "hetla")]
struct PyLdlt(AnyFactor<Indefinite>);

#[pymethods]
impl PyLdlt {
    #[new]
    fn new(py: Python<'_>, a: &Bound<'_, PyAny>) -> PyResult<Self> {
        factor_array(py, a, with_options!(hetla::Ldlt::new())).map(PyLdlt)
    }

    /// Order of the factored matrix.
    #[getter]
    fn n(&self) -> usize {
        on_factor!(&self.0, f => f.n())
    }

    /// The dtype name ("float64", ...).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.0.dtype()
    }

    /// Solves A X = B: B of shape (n,) (X then (n,)) or (n, k), of any numeric dtype the factor's
    /// holds (converted to it); LinAlgError for a singular A.
    fn solve<'py>(&self, py: Python<'py>, b: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        on_factor!(&self.0, f => solve_with(py, f, b))
    }

    /// A's inertia: (positive, negative, zero) counts of its eigenvalues.
    fn inertia(&self, py: Python<'_>) -> PyResult<(usize, usize, usize)> {
        let i = on_factor!(&self.0, f => py.detach(|| f.inertia()).map_err(py_error))?;
        Ok((i.positive, i.negative, i.zero))
    }

    /// (sign, ln |det A|), as numpy's `slogdet`: det A is real (A is Hermitian); (0, -inf) for a
    /// singular A.
    fn logdet(&self) -> (f64, f64) {
        on_factor!(&self.0, f => (f.det_sign(), f.log_abs_det()))
    }

    /// The reciprocal condition number of A in the 1-norm, estimated (LAPACK ?sycon).
    fn rcond(&self, py: Python<'_>) -> PyResult<f64> {
        on_factor!(&self.0, f => py.detach(|| f.rcond()).map_err(py_error))
    }

    fn __repr__(&self) -> String {
        format!("LdltFactor(n={}, dtype={})", self.n(), self.dtype())
    }
}

/// A new Fortran-ordered numpy array holding `m`.
fn to_numpy<'py, T: Scalar + Element>(py: Python<'py>, m: MatRef<'_, T>) -> Bound<'py, PyAny> {
    let mut out = ndarray::Array2::<T>::from_elem((m.nrows(), m.ncols()).f(), T::from_f64(0.0));
    faer_mut(out.view_mut()).copy_from(m);
    out.into_pyarray(py).into_any()
}

/// The options every call inside `with hetla.Platform(...)` runs with: the CPU clusters (a spec as
/// the command line's `--clusters`: "2x1", "core", "auto"...), or `threads` (one cluster of that
/// many cores), the CPU kernels' backend ("faer", "openblas" when built in) and the scheduler
/// ("mct", ...). The platform is built (and checked) when the object is made, and shared by the
/// calls. Blocks nest; each thread has its own.
#[pyclass(name = "Platform", module = "hetla")]
struct PyPlatform {
    options: Options,
    description: String,
}

#[pymethods]
impl PyPlatform {
    #[new]
    #[pyo3(signature = (clusters=None, backend=None, threads=None, scheduler=None))]
    fn new(
        py: Python<'_>,
        clusters: Option<&str>,
        backend: Option<&str>,
        threads: Option<usize>,
        scheduler: Option<&str>,
    ) -> PyResult<Self> {
        let value = |what: &str, e: String| PyValueError::new_err(format!("{what}: {e}"));
        if clusters.is_some() && threads.is_some() {
            return Err(PyValueError::new_err(
                "give clusters or threads, not both (threads=t is clusters=\"1xt\")",
            ));
        }
        if threads == Some(0) {
            return Err(PyValueError::new_err("threads must be at least 1"));
        }
        let options = Options {
            clusters: clusters
                .map(ClusterSpec::from_str)
                .transpose()
                .map_err(|e| value("clusters", e.to_string()))?,
            backend: backend
                .map(Backend::from_str)
                .transpose()
                .map_err(|e| value("backend", e.to_string()))?,
            threads,
            scheduler: scheduler
                .map(SchedulerKind::from_str)
                .transpose()
                .map_err(|e| value("scheduler", e.to_string()))?,
        };
        let spec = match (threads, &options.clusters) {
            (Some(t), _) => ClusterSpec::Grid { count: 1, size: t },
            (None, Some(spec)) => spec.clone(),
            (None, None) => ClusterSpec::default(),
        };
        let backend = options.backend.unwrap_or_default();
        let platform = py
            .detach(|| Platform::shared(&spec, backend))
            .map_err(|e| PyValueError::new_err(format!("the platform cannot be built: {e}")))?;
        let sizes: Vec<String> = platform
            .clusters()
            .iter()
            .map(|c| c.size().to_string())
            .collect();
        let description = format!(
            "Platform(clusters={:?}, cores per cluster [{}], backend={backend:?}, scheduler={:?})",
            clusters.map_or_else(
                || threads.map_or("auto".into(), |t| format!("1x{t}")),
                str::to_owned
            ),
            sizes.join(", "),
            options.scheduler.unwrap_or_default()
        );
        Ok(PyPlatform {
            options,
            description,
        })
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        PLATFORMS.with(|p| p.borrow_mut().push(slf.options.clone()));
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        PLATFORMS.with(|p| p.borrow_mut().pop());
        false
    }

    fn __repr__(&self) -> String {
        self.description.clone()
    }
}

/// Runs a `hetla` subcommand (`["simulate", "--n", "9600", ...]`, without the program name) and
/// returns each of its reports as JSON text (the keys of the command line's `--json`). A command
/// line that does not parse, an invalid option or a problem too large is a `ValueError`, a matrix
/// that cannot be factored `LinAlgError`, memory that cannot be had `MemoryError`, another failure
/// a `RuntimeError`.
#[pyfunction]
fn run_json(py: Python<'_>, args: Vec<String>) -> PyResult<Vec<String>> {
    py.detach(|| hetla_cli::run_json(&args)).map_err(|f| {
        let message = format!(
            "hetla {}: {} ({})",
            args.first().map_or("", String::as_str),
            f.message,
            f.kind
        );
        match f.kind {
            "usage" | "invalid_option" | "too_large" | "tiling" | "zero_tile_size" | "layout"
            | "not_square" | "dimension_mismatch" | "rows_mismatch" | "non_finite"
            | "platform_model" | "underdetermined" => PyValueError::new_err(message),
            "not_positive_definite" | "singular" | "rank_deficient" => {
                LinAlgError::new_err(message)
            }
            "memory" => PyMemoryError::new_err(message),
            _ => PyRuntimeError::new_err(message),
        }
    })
}

#[pymodule]
fn _hetla(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cho_factor, m)?)?;
    m.add_function(wrap_pyfunction!(cho_solve, m)?)?;
    m.add_function(wrap_pyfunction!(lu_factor, m)?)?;
    m.add_function(wrap_pyfunction!(lu_factor_in_place, m)?)?;
    m.add_function(wrap_pyfunction!(lu_factor_batch, m)?)?;
    m.add_function(wrap_pyfunction!(lu_solve_batch, m)?)?;
    m.add_function(wrap_pyfunction!(lu_solve_systems, m)?)?;
    m.add_function(wrap_pyfunction!(lu_solve, m)?)?;
    m.add_function(wrap_pyfunction!(cho_rcond, m)?)?;
    m.add_function(wrap_pyfunction!(lu_solve_system, m)?)?;
    m.add_function(wrap_pyfunction!(ldlt_solve_system, m)?)?;
    m.add_function(wrap_pyfunction!(ldlt_solve_systems, m)?)?;
    m.add_function(wrap_pyfunction!(ldl, m)?)?;
    m.add_function(wrap_pyfunction!(qr_batch, m)?)?;
    m.add_function(wrap_pyfunction!(lstsq_batch, m)?)?;
    m.add_function(wrap_pyfunction!(solve_triangular, m)?)?;
    m.add_function(wrap_pyfunction!(qr, m)?)?;
    m.add_function(wrap_pyfunction!(lstsq, m)?)?;
    m.add_function(wrap_pyfunction!(qr_pivoted, m)?)?;
    m.add_function(wrap_pyfunction!(qr_raw, m)?)?;
    m.add_function(wrap_pyfunction!(lstsq_rank, m)?)?;
    m.add_function(wrap_pyfunction!(solve_spd_mixed, m)?)?;
    m.add_function(wrap_pyfunction!(run_json, m)?)?;
    m.add_class::<PyFactor>()?;
    m.add_class::<PyLdlt>()?;
    m.add_class::<PyPlatform>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
