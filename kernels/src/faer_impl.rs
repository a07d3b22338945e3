//! The tile kernels on faer (pure Rust).

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{LltError, cholesky_in_place, cholesky_in_place_scratch};
use faer::linalg::matmul::{matmul, triangular::BlockStructure};
use faer::linalg::triangular_solve::{
    solve_lower_triangular_in_place, solve_upper_triangular_in_place,
};
use faer::{Accum, MatMut, MatRef, Par};

use crate::KernelError;

pub(crate) fn potrf(mut a: MatMut<'_, f64>, par: Par) -> Result<(), KernelError> {
    let n = a.nrows();
    // faer uses the strict upper triangle as scratch; LAPACK leaves it alone, and so must
    // we (it is the caller's data when factoring in place). Saving it costs O(n^2).
    let upper: Vec<f64> = (1..n)
        .flat_map(|j| (0..j).map(move |i| (i, j)))
        .map(|(i, j)| a[(i, j)])
        .collect();
    let mut buf = MemBuffer::new(cholesky_in_place_scratch::<f64>(n, par, Default::default()));
    // No regularisation: a non-positive pivot is an error the caller must see.
    let result = cholesky_in_place(
        a.as_mut(),
        Default::default(),
        par,
        MemStack::new(&mut buf),
        Default::default(),
    );
    let mut saved = upper.into_iter();
    for j in 1..n {
        for i in 0..j {
            a[(i, j)] = saved
                .next()
                .expect("one saved value per strict upper entry");
        }
    }
    result
        .map(|_| ())
        .map_err(|LltError::NonPositivePivot { index }| KernelError::NotPositiveDefinite { index })
}

pub(crate) fn trsm(l: MatRef<'_, f64>, b: MatMut<'_, f64>, par: Par) -> Result<(), KernelError> {
    // X L^T = B  <=>  L X^T = B^T: a left lower solve on the transposed view, no copy.
    solve_lower_triangular_in_place(l, b.transpose_mut(), par);
    Ok(())
}

pub(crate) fn syrk(a: MatRef<'_, f64>, c: MatMut<'_, f64>, par: Par) -> Result<(), KernelError> {
    faer::linalg::matmul::triangular::matmul(
        c,
        BlockStructure::TriangularLower,
        Accum::Add,
        a,
        BlockStructure::Rectangular,
        a.transpose(),
        BlockStructure::Rectangular,
        -1.0,
        par,
    );
    Ok(())
}

pub(crate) fn gemm_sub(
    a: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    c: MatMut<'_, f64>,
    par: Par,
) -> Result<(), KernelError> {
    matmul(c, Accum::Add, a, b, -1.0, par);
    Ok(())
}

/// C <- alpha A B + beta C (A, B possibly transposed views). With beta = 0 the old C is
/// never read, so NaN or garbage there does not leak into the result (BLAS semantics).
pub(crate) fn matmul_scaled(
    a: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    mut c: MatMut<'_, f64>,
    alpha: f64,
    beta: f64,
    par: Par,
) -> Result<(), KernelError> {
    if beta == 0.0 {
        matmul(c, Accum::Replace, a, b, alpha, par);
    } else {
        scale(c.as_mut(), beta);
        matmul(c, Accum::Add, a, b, alpha, par);
    }
    Ok(())
}

/// C <- beta C; beta = 0 overwrites C with zeros without reading it.
pub(crate) fn scale(mut c: MatMut<'_, f64>, beta: f64) {
    if beta == 0.0 {
        c.fill(0.0);
    } else if beta != 1.0 {
        faer::zip!(c).for_each(|faer::unzip!(x)| *x *= beta);
    }
}

pub(crate) fn solve_lower(
    l: MatRef<'_, f64>,
    transpose: bool,
    x: MatMut<'_, f64>,
    par: Par,
) -> Result<(), KernelError> {
    if transpose {
        solve_upper_triangular_in_place(l.transpose(), x, par);
    } else {
        solve_lower_triangular_in_place(l, x, par);
    }
    Ok(())
}
