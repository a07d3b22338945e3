//! Checks of distributed results computed where the tiles live: no rank holds a matrix, each
//! multiplies its own tiles by a few replicated columns, and one `all_reduce` sums the parts (O(n x
//! columns) words per rank, O(n^2 x columns / ranks) flops).
//!
//! - [`probed_residual`]: the factor's scaled residual ||A - L L^H||_1 / (n ||A||_1 eps) probed
//!   with random columns V, ||A V - L (L^H V)||_1 / (n ||A||_1 ||V||_1 eps), eps that of the
//!   precision. It is never above the full residual (||(A - L L^H) V||_1 <= ||A - L
//!   L^H||_1 ||V||_1), and of its order for errors that are not arranged to miss V; it is checked
//!   against the same threshold ([`crate::check::RESIDUAL_THRESHOLD`]).
//! - [`DistributedLu::probed_residual`](super::DistributedLu::probed_residual): the same for a
//!   distributed LU (P A = L U, L unit lower and U upper in one general matrix, with its
//!   interchanges): ||P A V - L (U V)||_1 / (n ||A||_1 ||V||_1 eps), LAPACK's dget01 ratio probed.
//! - [`probed_qr_residual`]: R of a distributed QR against A, ||A^H (A V) - R^H (R V)||_1 /
//!   (m ||A||_1^2 ||V||_1 eps) (R^H R = A^H A whatever the reflectors).
//! - [`least_squares_ratio`]: LAPACK's dqrt17 ratio of distributed least-squares solutions.
//! - [`solve_backward_error`]: ||A X - B||_1 / (||A||_1 ||X||_1) of a distributed solve, the
//!   measure [`crate::check::solve_backward_error`] gives on one node; A symmetric (its lower
//!   triangle held, a Cholesky's) or general (every tile held, an LU's).
//!
//! The Cholesky checks read only the lower triangles of A and L (diagonal tiles included), as the
//! factorisation does; the LU check reads every tile.

use faer::linalg::matmul::triangular::{BlockStructure, matmul_with_conj};
use faer::{Accum, Conj, Mat, MatMut, MatRef, Par};
use mpi::collective::SystemOperation;
use mpi::traits::{Communicator, CommunicatorCollectives};

use super::matrix::{DistributedMatrix, DistributedRhs};
use super::wire::{self, Wire};
use crate::{Error, Result};

/// Random columns a distributed run's residual is probed with ([`probed_residual`]): the columns of
/// X whose ratios a report gives.
pub const PROBES: usize = 4;

/// The probed scaled residual of the distributed factor `l` of `a` (see the module documentation):
/// collective, the same value on every rank. 0 for n = 0.
pub fn probed_residual<T: Wire, C: Communicator>(
    comm: &C,
    a: &DistributedMatrix<T>,
    l: &DistributedMatrix<T>,
    seed: u64,
) -> Result<f64> {
    same_layout(a, l, "the factor")?;
    let n = a.tiling.rows();
    if n == 0 {
        return Ok(0.0);
    }
    // The same V on every rank, generated where it is used.
    let v = crate::matgen::random_in::<f64>(n, PROBES, seed);
    let v = Mat::<T>::from_fn(n, PROBES, |i, j| T::from_f64(v[(i, j)]));
    let av = all_sum(comm, times(a, v.as_ref(), Product::Symmetric));
    let ltv = all_sum(comm, times(l, v.as_ref(), Product::LowerTransposed));
    let lltv = all_sum(comm, times(l, ltv.as_ref(), Product::Lower));
    let anorm = symmetric_norm1(comm, a);
    let eps = T::PRECISION.epsilon();
    Ok(norm1((av - lltv).as_ref()) / (n as f64 * anorm * norm1(v.as_ref()) * eps))
}

/// The probed scaled residual of the distributed LU factor `lu` of the general matrix `a`, with the
/// interchanges `ipiv` (0-based and global, as [`crate::Lu::factor_distributed`] returns them; see
/// the module documentation): collective, the same value on every rank. 0 for n = 0.
pub(crate) fn probed_lu_residual<T: Wire, C: Communicator>(
    comm: &C,
    a: &DistributedMatrix<T>,
    lu: &DistributedMatrix<T>,
    ipiv: &[usize],
    seed: u64,
) -> Result<f64> {
    same_layout(a, lu, "the factor")?;
    let n = a.tiling.rows();
    if a.lower || lu.lower || a.tiling.cols() != n {
        return Err(Error::InvalidOption {
            option: "residual",
            reason: "an LU's residual needs square general matrices (every tile held)".into(),
        });
    }
    if ipiv.len() != n || ipiv.iter().enumerate().any(|(i, &p)| p < i || p >= n) {
        return Err(Error::InvalidOption {
            option: "residual",
            reason: format!(
                "the interchanges are not an LU's of order {n}: {} of them, each row i swapped with a row in i..{n}",
                ipiv.len()
            ),
        });
    }
    if n == 0 {
        return Ok(0.0);
    }
    let v = crate::matgen::random_in::<f64>(n, PROBES, seed);
    let v = Mat::<T>::from_fn(n, PROBES, |i, j| T::from_f64(v[(i, j)]));
    let mut pav = all_sum(comm, general_times(a, v.as_ref(), Part::Whole));
    for (i, &p) in ipiv.iter().enumerate().filter(|(i, p)| i != *p) {
        for c in 0..PROBES {
            let (x, y) = (pav[(i, c)], pav[(p, c)]);
            (pav[(i, c)], pav[(p, c)]) = (y, x);
        }
    }
    let uv = all_sum(comm, general_times(lu, v.as_ref(), Part::Upper));
    let luv = all_sum(comm, general_times(lu, uv.as_ref(), Part::StrictLower)) + &uv;
    let eps = T::PRECISION.epsilon();
    let anorm = general_norm1(comm, a);
    Ok(norm1((pav - luv).as_ref()) / (n as f64 * anorm * norm1(v.as_ref()) * eps))
}

/// The probed scaled residual of the R in the distributed QR factor `f` (LAPACK's layout, as
/// [`crate::Qr::factor_distributed`] leaves it) of the tall general matrix `a`: R^H R = A^H A
/// whatever the reflectors, so ||A^H (A V) - R^H (R V)||_1 / (m ||A||_1^2 ||V||_1 eps) with random
/// columns V, each product computed where the tiles live (see the module documentation):
/// collective, the same value on every rank. 0 for an empty matrix.
pub fn probed_qr_residual<T: Wire, C: Communicator>(
    comm: &C,
    a: &DistributedMatrix<T>,
    f: &DistributedMatrix<T>,
    seed: u64,
) -> Result<f64> {
    same_layout(a, f, "the factor")?;
    let (m, n) = (a.tiling.rows(), a.tiling.cols());
    if a.lower || f.lower || m < n {
        return Err(Error::InvalidOption {
            option: "residual",
            reason: "a QR's residual needs tall general matrices (m >= n, every tile held)".into(),
        });
    }
    if n == 0 {
        return Ok(0.0);
    }
    let v = crate::matgen::random_in::<f64>(n, PROBES, seed);
    let v = Mat::<T>::from_fn(n, PROBES, |i, j| T::from_f64(v[(i, j)]));
    let av = all_sum(comm, general_times(a, v.as_ref(), Part::Whole));
    let aav = all_sum(comm, adjoint_times(a, av.as_ref(), Part::Whole));
    let rv = all_sum(comm, general_times(f, v.as_ref(), Part::Upper));
    let rrv = all_sum(comm, adjoint_times(f, rv.as_ref(), Part::Upper));
    let eps = T::PRECISION.epsilon();
    let anorm = general_norm1(comm, a);
    Ok(norm1((aav - rrv).as_ref()) / (m as f64 * anorm * anorm * norm1(v.as_ref()) * eps))
}

/// ||A X - B||_1 / (||A||_1 ||X||_1) of the distributed solution `x` of A X = B (see the
/// module documentation): collective, the same value on every rank. 0 when X is zero.
pub fn solve_backward_error<T: Wire, C: Communicator>(
    comm: &C,
    a: &DistributedMatrix<T>,
    x: &DistributedRhs<T>,
    b: &DistributedRhs<T>,
) -> Result<f64> {
    same_layout(&x.0, &b.0, "the right-hand sides")?;
    if x.0.grid != a.grid || x.0.tiling.rows() != a.tiling.rows() {
        return Err(Error::InvalidOption {
            option: "grid",
            reason: "the solution and the matrix are not on the same grid with the same rows"
                .into(),
        });
    }
    let x_all = all_sum(comm, placed(&x.0));
    let xnorm = norm1(x_all.as_ref());
    if xnorm == 0.0 {
        return Ok(0.0);
    }
    // A symmetric matrix's lower triangle, or a general matrix's every tile.
    let (mut r, anorm) = if a.lower {
        let product = times(a, x_all.as_ref(), Product::Symmetric);
        (product, symmetric_norm1(comm, a))
    } else {
        let product = general_times(a, x_all.as_ref(), Part::Whole);
        (product, general_norm1(comm, a))
    };
    r -= placed(&b.0);
    let r = all_sum(comm, r);
    Ok(norm1(r.as_ref()) / (anorm * xnorm))
}

/// LAPACK's dqrt17 ratio ||A^H (B - A X)||_1 / (||A||_1 ||B||_1 max(m, k) eps) of the distributed
/// least-squares solutions `x` (n x k) of the tall general `a` (m x n) for `b` (m x k), computed
/// where the tiles live (X and the residual replicated: O((m + n) k) words a rank): collective, the
/// same value on every rank. 0 when B is zero.
pub fn least_squares_ratio<T: Wire, C: Communicator>(
    comm: &C,
    a: &DistributedMatrix<T>,
    x: &DistributedRhs<T>,
    b: &DistributedRhs<T>,
) -> Result<f64> {
    let (m, n, k) = (a.tiling.rows(), a.tiling.cols(), b.0.tiling.cols());
    let (xt, bt) = (x.0.tiling, b.0.tiling);
    if a.lower
        || x.0.grid != a.grid
        || b.0.grid != a.grid
        || (xt.rows(), xt.cols()) != (n, k)
        || bt.rows() != m
    {
        return Err(Error::InvalidOption {
            option: "residual",
            reason: format!(
                "least squares of a general {m} x {n} matrix needs B of {m} rows and X of {n}, on its grid: got B {} x {}, X {} x {}",
                bt.rows(),
                bt.cols(),
                xt.rows(),
                xt.cols()
            ),
        });
    }
    let b_all = all_sum(comm, placed(&b.0));
    let bnorm = norm1(b_all.as_ref());
    if bnorm == 0.0 {
        return Ok(0.0);
    }
    let x_all = all_sum(comm, placed(&x.0));
    let residual = b_all - all_sum(comm, general_times(a, x_all.as_ref(), Part::Whole));
    let normal = all_sum(comm, adjoint_times(a, residual.as_ref(), Part::Whole));
    let eps = T::PRECISION.epsilon();
    let anorm = general_norm1(comm, a);
    Ok(norm1(normal.as_ref()) / (anorm * bnorm * m.max(k) as f64 * eps))
}

fn same_layout<T: Wire>(
    a: &DistributedMatrix<T>,
    b: &DistributedMatrix<T>,
    what: &str,
) -> Result<()> {
    if a.grid != b.grid || a.tiling != b.tiling {
        return Err(Error::InvalidOption {
            option: "grid",
            reason: format!("{what} are not on the same grid and tiling as their partner"),
        });
    }
    Ok(())
}

/// What a rank's tiles of a lower triangle stand for in a product.
#[derive(Clone, Copy)]
enum Product {
    /// The Hermitian (real: symmetric) matrix with that lower triangle.
    Symmetric,
    /// The lower triangular matrix.
    Lower,
    /// Its adjoint (real: transpose).
    LowerTransposed,
}

/// ||M||_1.
fn norm1<T: Wire>(m: MatRef<'_, T>) -> f64 {
    (0..m.ncols())
        .map(|j| (0..m.nrows()).map(|i| m[(i, j)].abs_f64()).sum::<f64>())
        .fold(0.0, f64::max)
}

/// This rank's part of `m x`: the sum over its tiles (see [`Product`]) of their products with the
/// rows of the replicated `x` they meet.
fn times<T: Wire>(m: &DistributedMatrix<T>, x: MatRef<'_, T>, product: Product) -> Mat<T> {
    let t = &m.tiling;
    let mut y = Mat::<T>::zeros(x.nrows(), x.ncols());
    let k = x.ncols();
    for (&(i, j), tile) in &m.tiles {
        let rows = |i: usize| (t.offset(i), t.tile_rows(i));
        let (ri, ni) = rows(i);
        let (rj, nj) = rows(j);
        let diagonal = i == j;
        let lower = if diagonal {
            BlockStructure::TriangularLower
        } else {
            BlockStructure::Rectangular
        };
        // y += op(lhs) x, op(lhs) = lhs conjugated when `conj` (for an adjoint).
        let add = |y: MatMut<'_, T>, lhs: MatRef<'_, T>, s: BlockStructure, conj, x| {
            let r = BlockStructure::Rectangular;
            let one = T::from_f64(1.0);
            matmul_with_conj(
                y,
                r,
                Accum::Add,
                lhs,
                s,
                conj,
                x,
                r,
                Conj::No,
                one,
                Par::Seq,
            );
        };
        let tile = tile.as_ref();
        // y_i += m_ij x_j (the lower triangle of a diagonal tile).
        if !matches!(product, Product::LowerTransposed) {
            add(
                y.as_mut().submatrix_mut(ri, 0, ni, k),
                tile,
                lower,
                Conj::No,
                x.submatrix(rj, 0, nj, k),
            );
        }
        // y_j += m_ij^H x_i (the strict upper triangle of a Hermitian diagonal tile).
        let transposed = match (product, diagonal) {
            (Product::Lower, _) => None,
            (Product::Symmetric, true) => Some(BlockStructure::StrictTriangularUpper),
            (Product::LowerTransposed, true) => Some(BlockStructure::TriangularUpper),
            (_, false) => Some(BlockStructure::Rectangular),
        };
        if let Some(s) = transposed {
            let y_j = y.as_mut().submatrix_mut(rj, 0, nj, k);
            add(
                y_j,
                tile.transpose(),
                s,
                Conj::Yes,
                x.submatrix(ri, 0, ni, k),
            );
        }
    }
    y
}

/// Which part of a general matrix's tiles a product reads.
#[derive(Clone, Copy, PartialEq)]
enum Part {
    /// Every entry.
    Whole,
    /// On and above the diagonal (an LU's U).
    Upper,
    /// Strictly below the diagonal (an LU's L less its unit diagonal).
    StrictLower,
}

/// The blocks of tile (i, j) of shape `(rows, cols)` that `part` reads: (first row, first column,
/// rows, columns) and their structure. A diagonal tile need not be square (the last tile column of
/// a tall matrix): its leading square carries the triangle, the rest is wholly in or out.
fn pieces(
    (i, j): (usize, usize),
    (rows, cols): (usize, usize),
    part: Part,
) -> Vec<((usize, usize, usize, usize), BlockStructure)> {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let r = BlockStructure::Rectangular;
    let k = rows.min(cols);
    match (part, i.cmp(&j)) {
        (Part::Whole, _) | (Part::Upper, Less) | (Part::StrictLower, Greater) => {
            vec![((0, 0, rows, cols), r)]
        }
        (Part::Upper, Equal) => {
            let mut p = vec![((0, 0, k, k), BlockStructure::TriangularUpper)];
            if cols > k {
                p.push(((0, k, rows, cols - k), r));
            }
            p
        }
        (Part::StrictLower, Equal) => {
            let mut p = vec![((0, 0, k, k), BlockStructure::StrictTriangularLower)];
            if rows > k {
                p.push(((k, 0, rows - k, cols), r));
            }
            p
        }
        (Part::Upper, Greater) | (Part::StrictLower, Less) => vec![],
    }
}

/// This rank's part of `part(m) x` for a general matrix `m` (every tile held).
fn general_times<T: Wire>(m: &DistributedMatrix<T>, x: MatRef<'_, T>, part: Part) -> Mat<T> {
    let t = &m.tiling;
    let mut y = Mat::<T>::zeros(t.rows(), x.ncols());
    let k = x.ncols();
    let r = BlockStructure::Rectangular;
    for (&(i, j), tile) in &m.tiles {
        let (ri, rj) = (t.offset(i), t.offset(j));
        for ((r0, c0, rows, cols), structure) in pieces((i, j), (tile.nrows(), tile.ncols()), part)
        {
            matmul_with_conj(
                y.as_mut().submatrix_mut(ri + r0, 0, rows, k),
                r,
                Accum::Add,
                tile.submatrix(r0, c0, rows, cols),
                structure,
                Conj::No,
                x.submatrix(rj + c0, 0, cols, k),
                r,
                Conj::No,
                T::from_f64(1.0),
                Par::Seq,
            );
        }
    }
    y
}

/// This rank's part of `part(m)^H y` for a general matrix `m` (every tile held).
fn adjoint_times<T: Wire>(m: &DistributedMatrix<T>, y: MatRef<'_, T>, part: Part) -> Mat<T> {
    let t = &m.tiling;
    let mut z = Mat::<T>::zeros(t.cols(), y.ncols());
    let k = y.ncols();
    let r = BlockStructure::Rectangular;
    for (&(i, j), tile) in &m.tiles {
        let (ri, rj) = (t.offset(i), t.offset(j));
        for ((r0, c0, rows, cols), structure) in pieces((i, j), (tile.nrows(), tile.ncols()), part)
        {
            // The adjoint of an upper triangle is lower, and the other way round.
            let structure = match structure {
                BlockStructure::TriangularUpper => BlockStructure::TriangularLower,
                BlockStructure::StrictTriangularLower => BlockStructure::StrictTriangularUpper,
                other => other,
            };
            matmul_with_conj(
                z.as_mut().submatrix_mut(rj + c0, 0, cols, k),
                r,
                Accum::Add,
                tile.submatrix(r0, c0, rows, cols).transpose(),
                structure,
                Conj::Yes,
                y.submatrix(ri + r0, 0, rows, k),
                r,
                Conj::No,
                T::from_f64(1.0),
                Par::Seq,
            );
        }
    }
    z
}

/// ||A||_1 of the general matrix `a` (every tile held).
fn general_norm1<T: Wire, C: Communicator>(comm: &C, a: &DistributedMatrix<T>) -> f64 {
    let t = &a.tiling;
    let mut sums = Mat::<f64>::zeros(t.cols(), 1);
    for (&(_, j), tile) in &a.tiles {
        for c in 0..tile.ncols() {
            sums[(t.offset(j) + c, 0)] += tile.col(c).iter().map(|x| x.abs_f64()).sum::<f64>();
        }
    }
    let sums = all_sum(comm, sums);
    sums.col(0).iter().copied().fold(0.0, f64::max)
}

/// This rank's tiles of `m` in a zero matrix of `m`'s shape.
fn placed<T: Wire>(m: &DistributedMatrix<T>) -> Mat<T> {
    let t = &m.tiling;
    let mut all = Mat::<T>::zeros(t.rows(), t.cols());
    for (&(i, j), tile) in &m.tiles {
        all.as_mut()
            .submatrix_mut(t.offset(i), t.offset(j), tile.nrows(), tile.ncols())
            .copy_from(tile);
    }
    all
}

/// The sum of every rank's `part`, on every rank.
fn all_sum<T: Wire, C: Communicator>(comm: &C, part: Mat<T>) -> Mat<T> {
    let (rows, cols) = (part.nrows(), part.ncols());
    // Complex entries sum part by part.
    let mine = wire::parts_of(part.as_ref());
    let mut sum = vec![T::Part::default(); mine.len()];
    comm.all_reduce_into(&mine[..], &mut sum[..], SystemOperation::sum());
    wire::tile_of(rows, cols, &sum).unwrap_or(part)
}

/// ||A||_1 of the Hermitian matrix whose lower triangle `a` holds.
fn symmetric_norm1<T: Wire, C: Communicator>(comm: &C, a: &DistributedMatrix<T>) -> f64 {
    let t = &a.tiling;
    let mut sums = Mat::<f64>::zeros(t.rows(), 1);
    for (&(i, j), tile) in &a.tiles {
        let (ri, rj) = (t.offset(i), t.offset(j));
        for c in 0..tile.ncols() {
            // A diagonal tile's lower triangle, each entry also standing for its mirror.
            let first = if i == j { c } else { 0 };
            for r in first..tile.nrows() {
                let v = tile[(r, c)].abs_f64();
                sums[(rj + c, 0)] += v;
                if i != j || r != c {
                    sums[(ri + r, 0)] += v;
                }
            }
        }
    }
    let sums = all_sum(comm, sums);
    sums.col(0).iter().copied().fold(0.0, f64::max)
}
