//! Numerical checks of results, as LAPACK's test suite computes them, for the tests, the command
//! line and Python alike: the scaled residuals of a Cholesky factor (reading only the lower
//! triangle of A), an LU factor with its interchanges (and its growth) and a QR factorisation (with
//! the orthogonality of Q), the backward error of a solve, the orthogonality of a least-squares
//! residual to A's range, and the relative error of a matrix product against a reference. Every
//! ratio below [`RESIDUAL_THRESHOLD`] passes.

use faer::linalg::matmul::triangular::{BlockStructure, matmul};
use faer::{Accum, Mat, MatMut, MatRef, Par};
use hetla_kernels::Scalar;

mod input;
pub(crate) use input::{
    check_finite, check_finite_triangle, check_hermitian_lower, check_hermitian_lower_entries,
    check_output_shape, check_rows, check_square, check_system, hermitian_column_sums,
};

/// The threshold below which LAPACK's tests accept a scaled residual.
pub const RESIDUAL_THRESHOLD: f64 = 30.0;

/// 1-norm of the symmetric (Hermitian) matrix whose lower triangle is `m`'s.
fn symmetric_norm1<T: Scalar>(m: MatRef<'_, T>) -> f64 {
    hermitian_column_sums(m).into_iter().fold(0.0, f64::max)
}

/// ||M||_1, the largest column sum of |M| (0 for an empty matrix).
pub fn norm1<T: Scalar>(m: MatRef<'_, T>) -> f64 {
    // A contiguous column is summed from its slice: faer's checked indexing costs tens of
    // instructions an entry in the debug builds the tests run.
    m.col_iter()
        .map(|c| match c.try_as_col_major() {
            Some(c) => c.as_slice().iter().map(|x| x.abs_f64()).sum::<f64>(),
            None => c.iter().map(|x| x.abs_f64()).sum::<f64>(),
        })
        .fold(0.0, f64::max)
}

/// The largest |m_ij| (0 for an empty matrix).
fn max_abs<T: Scalar>(m: MatRef<'_, T>) -> f64 {
    m.col_iter()
        .flat_map(|c| c.iter().map(|x| x.abs_f64()).collect::<Vec<_>>())
        .fold(0.0, f64::max)
}

/// C <- C - A B, faer's product on `par` (the residual of every check below).
fn subtract_product<T: Scalar>(c: MatMut<'_, T>, a: MatRef<'_, T>, b: MatRef<'_, T>, par: Par) {
    faer::linalg::matmul::matmul(c, Accum::Add, a, b, T::from_f64(-1.0), par);
}

/// `num / den`, 0 when both are 0 (an empty or zero matrix checks as exact).
fn ratio(num: f64, den: f64) -> f64 {
    if num == 0.0 { 0.0 } else { num / den }
}

/// LAPACK's dget01 ratio ||P A - L U||_1 / (n ||A||_1 eps) of an n x n LU factor `lu` (L unit lower
/// below the diagonal, U on and above it) with the 0-based interchanges `ipiv` (row i swapped with
/// row `ipiv[i]`, in order), eps that of the precision. The product L U is one faer call on the
/// global thread pool.
pub fn lu_residual<T: Scalar>(a: MatRef<'_, T>, lu: MatRef<'_, T>, ipiv: &[usize]) -> f64 {
    let n = a.nrows();
    let mut pa = a.to_owned();
    hetla_kernels::swap_rows(pa.as_mut(), ipiv);
    let (l, u) = (unit_lower(lu), upper(lu));
    subtract_product(
        pa.as_mut(),
        l.as_ref(),
        u.as_ref(),
        faer::get_global_parallelism(),
    );
    ratio(
        norm1(pa.as_ref()),
        n as f64 * norm1(a) * T::PRECISION.epsilon(),
    )
}

/// The growth factor max |U_ij| / max |A_ij| of an LU factor `lu` of `a` (U on and above its
/// diagonal): how far partial pivoting let the entries grow.
pub fn lu_growth<T: Scalar>(a: MatRef<'_, T>, lu: MatRef<'_, T>) -> f64 {
    ratio(max_abs(upper(lu).as_ref()), max_abs(a))
}

/// L of a packed LU factor: its strictly lower part with a unit diagonal (min(m, n) columns).
fn unit_lower<T: Scalar>(lu: MatRef<'_, T>) -> Mat<T> {
    let k = lu.nrows().min(lu.ncols());
    Mat::from_fn(lu.nrows(), k, |i, j| match i.cmp(&j) {
        std::cmp::Ordering::Greater => lu[(i, j)],
        std::cmp::Ordering::Equal => T::from_f64(1.0),
        std::cmp::Ordering::Less => T::from_f64(0.0),
    })
}

/// The upper trapezoid of a packed factor (min(m, n) rows).
fn upper<T: Scalar>(f: MatRef<'_, T>) -> Mat<T> {
    let k = f.nrows().min(f.ncols());
    Mat::from_fn(k, f.ncols(), |i, j| {
        if i <= j { f[(i, j)] } else { T::from_f64(0.0) }
    })
}

/// LAPACK's dqrt01 ratios of a QR factorisation of the m x n `a`: ||A - Q R||_1 / (m ||A||_1 eps)
/// for `q` (m x k, k columns of Q) and `r` (k x n), and [`orthogonality`] of `q`.
pub fn qr_residual<T: Scalar>(a: MatRef<'_, T>, q: MatRef<'_, T>, r: MatRef<'_, T>) -> f64 {
    let mut d = a.to_owned();
    subtract_product(d.as_mut(), q, r, faer::get_global_parallelism());
    ratio(
        norm1(d.as_ref()),
        a.nrows() as f64 * norm1(a) * T::PRECISION.epsilon(),
    )
}

/// LAPACK's dqrt01 orthogonality ratio ||I - Q^H Q||_1 / (m eps) of the m x k `q`.
pub fn orthogonality<T: Scalar>(q: MatRef<'_, T>) -> f64 {
    let k = q.ncols();
    let mut e = Mat::<T>::identity(k, k);
    // The adjoint is faer's conjugate view, which the helper's types do not take.
    faer::linalg::matmul::matmul(
        e.as_mut(),
        Accum::Add,
        q.adjoint(),
        q,
        T::from_f64(-1.0),
        faer::get_global_parallelism(),
    );
    ratio(
        norm1(e.as_ref()),
        q.nrows().max(1) as f64 * T::PRECISION.epsilon(),
    )
}

/// The backward error of a solve, scaled as LAPACK's dget02: ||A X - B||_1 / (||A||_1 ||X||_1 n
/// eps) for a general n x n `a` (every entry read).
pub fn backward_error<T: Scalar>(a: MatRef<'_, T>, x: MatRef<'_, T>, b: MatRef<'_, T>) -> f64 {
    let r = a * x - b;
    ratio(
        norm1(r.as_ref()),
        norm1(a) * norm1(x) * a.nrows() as f64 * T::PRECISION.epsilon(),
    )
}

/// The orthogonality of a least-squares residual to A's range (LAPACK's dqrt17 kind):
/// ||A^H (B - A X)||_1 / (||A||_1 ||B - A X||_1 m eps) for an m x n `a`.
pub fn least_squares_residual<T: Scalar>(
    a: MatRef<'_, T>,
    x: MatRef<'_, T>,
    b: MatRef<'_, T>,
) -> f64 {
    let r = b - a * x;
    ratio(
        norm1((a.adjoint() * &r).as_ref()),
        norm1(a) * norm1(r.as_ref()) * a.nrows() as f64 * T::PRECISION.epsilon(),
    )
}

/// ||A - L L^H||_1 / (n ||A||_1 eps), with A and L read from the lower triangles of `a`
/// and `l`, eps that of their precision. Below [`RESIDUAL_THRESHOLD`] the factor is accepted. 0 for
/// n = 0.
///
/// The product is faer's triangular one: the lower triangle of L L^H from L's lower triangle (what
/// the storage holds above the diagonal is not read), n^3/3 flops (4 times as many real ones for a
/// complex type) on `par`'s threads. It ran 20-30% faster than blocks of 256 columns through the
/// GEMM tile kernel (n = 4096 and 8192 on two cores) and needs no copy of L.
pub fn cholesky_residual<T: Scalar>(a: MatRef<'_, T>, l: MatRef<'_, T>, par: Par) -> f64 {
    let n = a.nrows();
    if n == 0 {
        return 0.0;
    }
    let mut r = a.to_owned();
    let product = |r: &mut Mat<T>| {
        faer::linalg::matmul::triangular::matmul_with_conj(
            r.as_mut(),
            BlockStructure::TriangularLower,
            Accum::Add,
            l,
            BlockStructure::TriangularLower,
            faer::Conj::No,
            l.transpose(),
            BlockStructure::TriangularUpper,
            faer::Conj::Yes,
            T::from_f64(-1.0),
            par,
        )
    };
    // On a pool of `par`'s threads, whatever pool the caller runs in.
    match rayon::ThreadPoolBuilder::new()
        .num_threads(par.degree().max(1))
        .build()
    {
        Ok(pool) => pool.install(|| product(&mut r)),
        Err(_) => product(&mut r),
    }
    let anorm = symmetric_norm1(a);
    symmetric_norm1(r.as_ref()) / (n as f64 * anorm * T::PRECISION.epsilon())
}

/// [`cholesky_residual`] with the product on GPU `gpu` (cuBLAS ?syrk/?herk on the whole matrix:
/// `hetla_kernels::cuda::GpuContext::cholesky_gram_residual`), the norms on the host: the same
/// ratio, up to rounding, in seconds at n = 32768 where the host's cores take tens of seconds.
/// Errors when the GPU cannot be reached or cannot hold a and l (the caller then checks on the
/// host).
#[cfg(feature = "cuda")]
pub fn cholesky_residual_on_gpu<T: Scalar>(
    a: MatRef<'_, T>,
    l: MatRef<'_, T>,
    gpu: usize,
) -> crate::Result<f64> {
    let n = a.nrows();
    if n == 0 {
        return Ok(0.0);
    }
    let context = hetla_kernels::cuda::GpuContext::new(gpu)?;
    let r = context.cholesky_gram_residual(a, l)?;
    let anorm = symmetric_norm1(a);
    Ok(symmetric_norm1(r.as_ref()) / (n as f64 * anorm * T::PRECISION.epsilon()))
}

/// ||A X - B||_1 / (||A||_1 ||X||_1), with A symmetric (Hermitian) given by its lower triangle, in
/// any precision; 0 when X is zero or empty. Divided by n eps it is LAPACK's dpot02 ratio, below
/// [`RESIDUAL_THRESHOLD`] for a backward-stable solve.
pub fn solve_backward_error<T: Scalar>(
    a: MatRef<'_, T>,
    x: MatRef<'_, T>,
    b: MatRef<'_, T>,
    par: Par,
) -> f64 {
    let xnorm = norm1(x);
    if xnorm == 0.0 {
        return 0.0;
    }
    let mut r: Mat<T> = b.to_owned();
    r.as_mut()
        .col_iter_mut()
        .for_each(|c| c.iter_mut().for_each(|v| *v = -*v));
    // A X = tril(A) X + strict_tril(A)^H X.
    let rect = BlockStructure::Rectangular;
    matmul(
        r.as_mut(),
        rect,
        Accum::Add,
        a,
        BlockStructure::TriangularLower,
        x,
        rect,
        T::from_f64(1.0),
        par,
    );
    matmul(
        r.as_mut(),
        rect,
        Accum::Add,
        a.adjoint(),
        BlockStructure::StrictTriangularUpper,
        x,
        rect,
        T::from_f64(1.0),
        par,
    );
    norm1(r.as_ref()) / (symmetric_norm1(a) * xnorm)
}

/// ||C - R||_F / ||R||_F: the relative error of a computed matrix against a reference
/// (the difference's norm when the reference is zero).
pub fn relative_error<T: Scalar>(c: MatRef<'_, T>, reference: MatRef<'_, T>) -> f64 {
    let (mut diff, mut scale) = (0.0_f64, 0.0_f64);
    for j in 0..c.ncols() {
        for i in 0..c.nrows() {
            let r = reference[(i, j)].to_c64();
            diff += (c[(i, j)].to_c64() - r).norm_sqr();
            scale += r.norm_sqr();
        }
    }
    let (diff, scale) = (diff.sqrt(), scale.sqrt());
    if scale > 0.0 { diff / scale } else { diff }
}

/// C0 <- alpha op(A) op(B) + beta C0 computed by one faer call on all `par`'s threads: the
/// reference a tiled product is checked against (op is the transpose, the adjoint for a complex
/// type, as in [`crate::Gemm`]); [`relative_error`] compares the two.
pub fn reference_product<T: Scalar>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c0: MatRef<'_, T>,
    (trans_a, trans_b): (bool, bool),
    (alpha, beta): (f64, f64),
    par: Par,
) -> Mat<T> {
    let conj = |trans: bool| {
        if trans && T::PRECISION.is_complex() {
            faer::Conj::Yes
        } else {
            faer::Conj::No
        }
    };
    let (ca, cb) = (conj(trans_a), conj(trans_b));
    let a = if trans_a { a.transpose() } else { a };
    let b = if trans_b { b.transpose() } else { b };
    let mut c = c0.to_owned();
    let alpha = T::from_f64(alpha);
    use faer::linalg::matmul::matmul_with_conj;
    if beta == 0.0 {
        matmul_with_conj(c.as_mut(), Accum::Replace, a, ca, b, cb, alpha, par);
    } else {
        let beta = T::from_f64(beta);
        faer::zip!(c.as_mut()).for_each(|faer::unzip!(x)| *x *= beta);
        matmul_with_conj(c.as_mut(), Accum::Add, a, ca, b, cb, alpha, par);
    }
    c
}

/// LAPACK's dpot03 ratio of an inverse: ||A X - I||_1 / (n ||A||_1 ||X||_1 eps), A and X Hermitian
/// given by their lower triangles (X = A^-1 as ?potri writes it), the product on `par`'s threads.
pub(crate) fn inverse_residual<T: Scalar>(a: MatRef<'_, T>, x: MatRef<'_, T>, par: Par) -> f64 {
    let n = a.nrows();
    let full = |m: MatRef<'_, T>| {
        Mat::from_fn(n, n, |i, j| {
            if i >= j {
                m[(i, j)]
            } else {
                T::conj_impl(&m[(j, i)])
            }
        })
    };
    identity_ratio(full(a).as_ref(), full(x).as_ref(), par)
}

/// ||A X - I||_1 / (n ||A||_1 ||X||_1 eps) of square `a` and `x`, the product on `par`'s threads (0
/// for n = 0).
fn identity_ratio<T: Scalar>(a: MatRef<'_, T>, x: MatRef<'_, T>, par: Par) -> f64 {
    let n = a.nrows();
    if n == 0 {
        return 0.0;
    }
    let mut r = Mat::<T>::identity(n, n);
    subtract_product(r.as_mut(), a, x, par);
    ratio(
        norm1(r.as_ref()),
        n as f64 * norm1(a) * norm1(x) * T::PRECISION.epsilon(),
    )
}

/// LAPACK's dtrt01 ratio of a triangular inverse: ||L X - I||_1 / (n ||L||_1 ||X||_1 eps), L and X
/// given by their lower triangles (what is above them is not read), the product on `par`'s threads.
pub(crate) fn triangular_inverse_residual<T: Scalar>(
    l: MatRef<'_, T>,
    x: MatRef<'_, T>,
    par: Par,
) -> f64 {
    let n = l.nrows();
    let lower = |m: MatRef<'_, T>| {
        Mat::from_fn(
            n,
            n,
            |i, j| if i >= j { m[(i, j)] } else { T::from_f64(0.0) },
        )
    };
    identity_ratio(lower(l).as_ref(), lower(x).as_ref(), par)
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::c64;

    /// The column sums of |A| from the whole Hermitian matrix, column by column.
    fn whole_matrix_sums<T: Scalar>(a: MatRef<'_, T>) -> Vec<f64> {
        let n = a.nrows();
        (0..n)
            .map(|j| {
                (0..n)
                    .map(|i| {
                        let x = if i >= j { a[(i, j)] } else { a[(j, i)] };
                        if i == j {
                            x.re_f64().abs()
                        } else {
                            x.abs_f64()
                        }
                    })
                    .sum()
            })
            .collect()
    }

    fn assert_close(got: &[f64], want: &[f64]) {
        for (j, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-12 * w.abs(),
                "column {j}: {g} against {w}"
            );
        }
    }

    #[test]
    fn column_sums_of_a_large_triangle_in_parts_are_the_whole_matrix_sums_in_either_order() {
        // 2100^2 / 2 entries: summed in parts.
        let n = 2100;
        let a = crate::matgen::random_hpd::<c64>(n, 3);
        let want = whole_matrix_sums(a.as_ref());
        assert_close(&hermitian_column_sums(a.as_ref()), &want);
        // The conjugate lower triangle (the same moduli) read from a row-major view, as of a
        // C-ordered matrix.
        let mut rows = Mat::<c64>::zeros(n, n);
        rows.copy_from(a.adjoint());
        let c_ordered = rows.as_ref().transpose();
        assert!(c_ordered.col_stride() == 1 && c_ordered.row_stride() != 1);
        assert_close(&hermitian_column_sums(c_ordered), &want);
        // Deterministic: the parts are fixed, not the machine's threads.
        assert_eq!(
            hermitian_column_sums(a.as_ref()),
            hermitian_column_sums(a.as_ref())
        );
        // A NaN shows in the sums of its row and column only.
        let mut a = crate::matgen::random_hpd::<f64>(n, 4);
        a[(1500, 700)] = f64::NAN;
        let sums = hermitian_column_sums(a.as_ref());
        let nan: Vec<usize> = (0..n).filter(|&j| sums[j].is_nan()).collect();
        assert_eq!(nan, [700, 1500]);
    }
}
