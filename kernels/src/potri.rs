//! The tile kernels of the inverse of a Hermitian positive definite matrix from its Cholesky factor
//! (LAPACK's ?potri, tiled as Chameleon's: a tiled TRTRI, L <- L^-1, then a tiled LAUUM, L <- L^H L
//! = A^-1): [`Op::Trtri`] and [`Op::Lauum`] on diagonal tiles, [`Op::SolveRight`],
//! [`Op::SyrkAdjoint`] and [`Op::TrmmAdjoint`] on the others ([`Op::SolveLower`] and [`Op::MatMul`]
//! serve too).
//!
//! On `Par::Rayon(p)` the panel steps split as hetla's other kernels do (see `split`): the
//! backend's sequential kernel on `p` disjoint pieces on the caller's pool (row bands of B for
//! SolveRight, column bands of B for TrmmAdjoint, column bands of equal area of C's lower triangle
//! for SyrkAdjoint, each a small SyrkAdjoint on its diagonal block above a product). TRTRI and
//! LAUUM of a diagonal tile run as one call: faer's on `par` (faer parallelises it), OpenBLAS's
//! sequential (LAPACK ?trtri, ?lauum; OpenBLAS's thread count is process-wide).

use faer::linalg::matmul::triangular::{BlockStructure, matmul_with_conj};
use faer::reborrow::ReborrowMut;
use faer::{Accum, Conj, Mat, MatMut, MatRef, Par};

use crate::scalar::adjoint_conj;
use crate::split::{bands, pieces, run_pieces, triangle_bands};
use crate::{Backend, KernelError, Op, Scalar};

impl Backend {
    /// One of the inverse's tile operations on its operands (already checked by [`Backend::run`],
    /// which counted its `flops`).
    pub(crate) fn run_potri<T: Scalar>(
        self,
        op: Op,
        flops: f64,
        reads: &[MatRef<'_, T>],
        write: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        let (rows, cols) = (write.nrows(), write.ncols());
        let seq = |op, reads: &[MatRef<'_, T>], write| self.potri_seq(op, reads, write, Par::Seq);
        match op {
            Op::SolveRight if pieces(par, flops, rows) > 1 => {
                let bands = cut(write, &bands(rows, pieces(par, flops, rows)), true);
                run_pieces(bands, |band| seq(op, reads, band))
            }
            Op::TrmmAdjoint if pieces(par, flops, cols) > 1 => {
                let bands = cut(write, &bands(cols, pieces(par, flops, cols)), false);
                run_pieces(bands, |band| seq(op, reads, band))
            }
            Op::SyrkAdjoint if pieces(par, flops, cols) > 1 => {
                // Column bands of equal area: the row bands of equal area of the triangle
                // reflected, in reverse order.
                let mut widths = triangle_bands(cols, pieces(par, flops, cols));
                widths.reverse();
                let mut starts = Vec::with_capacity(widths.len());
                let mut start = 0;
                for &w in &widths {
                    starts.push(start);
                    start += w;
                }
                let pieces: Vec<_> = cut(write, &widths, false).into_iter().zip(starts).collect();
                let a = reads[0];
                run_pieces(pieces, |(band, c0)| {
                    let w = band.ncols();
                    // The band's rows from its diagonal block down.
                    let (_, below) = band.split_at_row_mut(c0);
                    let (diagonal, rest) = below.split_at_row_mut(w);
                    let panel = a.subcols(c0, w);
                    seq(Op::SyrkAdjoint, &[panel], diagonal)?;
                    let product = Op::MatMul(crate::MatMul::new(true, false, 1.0, 1.0));
                    let right = a.subcols(c0 + w, cols - c0 - w);
                    self.run(product, &[right, panel], rest, Par::Seq)
                })
            }
            _ => self.potri_seq(op, reads, write, par),
        }
    }

    /// The kernel on one piece: faer on `par`, OpenBLAS as one sequential call.
    fn potri_seq<T: Scalar>(
        self,
        op: Op,
        reads: &[MatRef<'_, T>],
        mut write: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        let done = match self {
            Backend::Faer => faer_potri(op, reads, write.rb_mut(), par),
            #[cfg(feature = "openblas")]
            Backend::OpenBlas => crate::openblas_impl::potri(op, reads, write.rb_mut()),
            #[cfg(not(feature = "openblas"))]
            Backend::OpenBlas => Err(KernelError::BackendUnavailable { name: self.name() }),
        };
        // LAUUM and the adjoint SYRK write Hermitian blocks of the inverse: their diagonals are
        // real, exactly (as BLAS's HERK makes them), not real up to round-off.
        if matches!(op, Op::Lauum | Op::SyrkAdjoint) {
            crate::real_diagonal(write);
        }
        done
    }
}

/// `m` cut into consecutive bands of these sizes: of rows when `by_rows`, else of columns.
fn cut<'a, T: Scalar>(m: MatMut<'a, T>, sizes: &[usize], by_rows: bool) -> Vec<MatMut<'a, T>> {
    let mut rest = m;
    let mut out = Vec::with_capacity(sizes.len());
    for &size in sizes {
        let (band, tail) = if by_rows {
            rest.split_at_row_mut(size)
        } else {
            rest.split_at_col_mut(size)
        };
        out.push(band);
        rest = tail;
    }
    out
}

fn faer_potri<T: Scalar>(
    op: Op,
    reads: &[MatRef<'_, T>],
    mut write: MatMut<'_, T>,
    par: Par,
) -> Result<(), KernelError> {
    let one = T::from_f64(1.0);
    let rect = BlockStructure::Rectangular;
    match op {
        Op::Trtri => {
            // faer inverts out of place: the lower triangle is copied first (the strict upper
            // triangle is the caller's, left alone).
            let l = lower_copy(write.as_ref());
            check_diagonal(l.as_ref())?;
            faer::linalg::triangular_inverse::invert_lower_triangular(
                write.as_mut(),
                l.as_ref(),
                par,
            );
        }
        Op::Lauum => {
            let l = lower_copy(write.as_ref());
            matmul_with_conj(
                write,
                BlockStructure::TriangularLower,
                Accum::Replace,
                l.as_ref().transpose(),
                BlockStructure::TriangularUpper,
                adjoint_conj::<T>(),
                l.as_ref(),
                BlockStructure::TriangularLower,
                Conj::No,
                one,
                par,
            );
        }
        Op::SolveRight => {
            // B L^-1 = (L^-T B^T)^T: a solve with the upper triangular L^T on B^T, in place. L is
            // a Cholesky factor's diagonal tile: its diagonal is positive, as TRSM's is.
            faer::linalg::triangular_solve::solve_upper_triangular_in_place_with_conj(
                reads[0].transpose(),
                Conj::No,
                write.as_mut().transpose_mut(),
                par,
            );
            faer::zip!(write).for_each(|faer::unzip!(x)| *x = -*x);
        }
        Op::SyrkAdjoint => matmul_with_conj(
            write,
            BlockStructure::TriangularLower,
            Accum::Add,
            reads[0].transpose(),
            rect,
            adjoint_conj::<T>(),
            reads[0],
            rect,
            Conj::No,
            one,
            par,
        ),
        Op::TrmmAdjoint => {
            let b = write.as_ref().to_owned();
            matmul_with_conj(
                write,
                rect,
                Accum::Replace,
                reads[0].transpose(),
                BlockStructure::TriangularUpper,
                adjoint_conj::<T>(),
                b.as_ref(),
                rect,
                Conj::No,
                one,
                par,
            );
        }
        other => unreachable!("{other} is not an operation of the inverse"),
    }
    Ok(())
}

/// The lower triangle of `m` (zeros above).
fn lower_copy<T: Scalar>(m: MatRef<'_, T>) -> Mat<T> {
    Mat::from_fn(m.nrows(), m.ncols(), |i, j| {
        if i >= j { m[(i, j)] } else { T::from_f64(0.0) }
    })
}

/// A triangular matrix with a zero on its diagonal has no inverse: [`KernelError::Singular`] with
/// the first such index, as LAPACK's ?trtri returns info > 0.
fn check_diagonal<T: Scalar>(l: MatRef<'_, T>) -> Result<(), KernelError> {
    match (0..l.nrows()).find(|&k| l[(k, k)] == T::from_f64(0.0)) {
        Some(index) => Err(KernelError::Singular { index }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_panel_steps_split_on_two_threads_at_these_sizes() {
        let par = crate::par_for(2);
        assert_eq!(
            pieces(par, Op::SolveRight.flops(&[(300, 300), (60, 300)]), 60),
            2
        );
        assert_eq!(
            pieces(par, Op::SyrkAdjoint.flops(&[(60, 300), (300, 300)]), 300),
            2
        );
        assert_eq!(
            pieces(par, Op::TrmmAdjoint.flops(&[(300, 300), (300, 60)]), 60),
            2
        );
    }
}
