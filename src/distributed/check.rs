//! Checks of distributed results computed where the tiles live: no rank holds a matrix,
//! each multiplies its own tiles by a few replicated columns, and one `all_reduce` sums
//! the parts (O(n x columns) words per rank, O(n^2 x columns / ranks) flops).
//!
//! - [`probed_residual`]: the factor's scaled residual ||A - L L^T||_1 / (n ||A||_1 eps)
//!   probed with random columns V, ||A V - L (L^T V)||_1 / (n ||A||_1 ||V||_1 eps). It is
//!   never above the full residual (||(A - L L^T) V||_1 <= ||A - L L^T||_1 ||V||_1), and
//!   of its order for errors that are not arranged to miss V; it is checked against the
//!   same threshold ([`crate::check::RESIDUAL_THRESHOLD`]).
//! - [`solve_backward_error`]: ||A X - B||_1 / (||A||_1 ||X||_1) of a distributed solve,
//!   the measure [`crate::check::solve_backward_error`] gives on one node.
//!
//! Both read only the lower triangles of A and L (diagonal tiles included), as the
//! factorisation does.

use faer::linalg::matmul::triangular::{BlockStructure, matmul};
use faer::{Accum, Mat, MatMut, MatRef, Par};
use mpi::collective::SystemOperation;
use mpi::traits::{Communicator, CommunicatorCollectives};

use super::{DistributedMatrix, DistributedRhs};
use crate::check::norm1;
use crate::{Error, Result};

/// Random columns the residual is probed with.
pub const PROBES: usize = 4;

/// The probed scaled residual of the distributed factor `l` of `a` (see the module
/// documentation): collective, the same value on every rank. 0 for n = 0.
pub fn probed_residual<C: Communicator>(
    comm: &C,
    a: &DistributedMatrix,
    l: &DistributedMatrix,
    seed: u64,
) -> Result<f64> {
    same_layout(a, l, "the factor")?;
    let n = a.tiling.rows();
    if n == 0 {
        return Ok(0.0);
    }
    // The same V on every rank, generated where it is used.
    let v = crate::matgen::random(n, PROBES, seed);
    let av = all_sum(comm, times(a, v.as_ref(), Product::Symmetric));
    let ltv = all_sum(comm, times(l, v.as_ref(), Product::LowerTransposed));
    let lltv = all_sum(comm, times(l, ltv.as_ref(), Product::Lower));
    let anorm = symmetric_norm1(comm, a);
    Ok(norm1((av - lltv).as_ref()) / (n as f64 * anorm * norm1(v.as_ref()) * f64::EPSILON))
}

/// ||A X - B||_1 / (||A||_1 ||X||_1) of the distributed solution `x` of A X = B (see the
/// module documentation): collective, the same value on every rank. 0 when X is zero.
pub fn solve_backward_error<C: Communicator>(
    comm: &C,
    a: &DistributedMatrix,
    x: &DistributedRhs,
    b: &DistributedRhs,
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
    let mut r = times(a, x_all.as_ref(), Product::Symmetric);
    r -= placed(&b.0);
    let r = all_sum(comm, r);
    Ok(norm1(r.as_ref()) / (symmetric_norm1(comm, a) * xnorm))
}

fn same_layout(a: &DistributedMatrix, b: &DistributedMatrix, what: &str) -> Result<()> {
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
    /// The symmetric matrix with that lower triangle.
    Symmetric,
    /// The lower triangular matrix.
    Lower,
    /// Its transpose.
    LowerTransposed,
}

/// This rank's part of `m x`: the sum over its tiles (see [`Product`]) of their products
/// with the rows of the replicated `x` they meet.
fn times(m: &DistributedMatrix, x: MatRef<'_, f64>, product: Product) -> Mat<f64> {
    let t = &m.tiling;
    let mut y = Mat::<f64>::zeros(x.nrows(), x.ncols());
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
        let add = |y: MatMut<'_, f64>, lhs: MatRef<'_, f64>, s: BlockStructure, x| {
            let r = BlockStructure::Rectangular;
            matmul(y, r, Accum::Add, lhs, s, x, r, 1.0, Par::Seq);
        };
        let tile = tile.as_ref();
        // y_i += m_ij x_j (the lower triangle of a diagonal tile).
        if !matches!(product, Product::LowerTransposed) {
            add(
                y.as_mut().submatrix_mut(ri, 0, ni, k),
                tile,
                lower,
                x.submatrix(rj, 0, nj, k),
            );
        }
        // y_j += m_ij^T x_i (the strict upper triangle of a symmetric diagonal tile).
        let transposed = match (product, diagonal) {
            (Product::Lower, _) => None,
            (Product::Symmetric, true) => Some(BlockStructure::StrictTriangularUpper),
            (Product::LowerTransposed, true) => Some(BlockStructure::TriangularUpper),
            (_, false) => Some(BlockStructure::Rectangular),
        };
        if let Some(s) = transposed {
            let y_j = y.as_mut().submatrix_mut(rj, 0, nj, k);
            add(y_j, tile.transpose(), s, x.submatrix(ri, 0, ni, k));
        }
    }
    y
}

/// This rank's tiles of `m` in a zero matrix of `m`'s shape.
fn placed(m: &DistributedMatrix) -> Mat<f64> {
    let t = &m.tiling;
    let mut all = Mat::<f64>::zeros(t.rows(), t.cols());
    for (&(i, j), tile) in &m.tiles {
        all.as_mut()
            .submatrix_mut(t.offset(i), t.offset(j), tile.nrows(), tile.ncols())
            .copy_from(tile);
    }
    all
}

/// The sum of every rank's `part`, on every rank.
fn all_sum<C: Communicator>(comm: &C, part: Mat<f64>) -> Mat<f64> {
    let (rows, cols) = (part.nrows(), part.ncols());
    let mine: Vec<f64> = part.col_iter().flat_map(|c| c.iter().copied()).collect();
    let mut sum = vec![0.0; mine.len()];
    comm.all_reduce_into(&mine[..], &mut sum[..], SystemOperation::sum());
    Mat::from_fn(rows, cols, |r, c| sum[c * rows + r])
}

/// ||A||_1 of the symmetric matrix whose lower triangle `a` holds.
fn symmetric_norm1<C: Communicator>(comm: &C, a: &DistributedMatrix) -> f64 {
    let t = &a.tiling;
    let mut sums = Mat::<f64>::zeros(t.rows(), 1);
    for (&(i, j), tile) in &a.tiles {
        let (ri, rj) = (t.offset(i), t.offset(j));
        for c in 0..tile.ncols() {
            // A diagonal tile's lower triangle, each entry also standing for its mirror.
            let first = if i == j { c } else { 0 };
            for r in first..tile.nrows() {
                let v = tile[(r, c)].abs();
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
