//! The kernels of LU with partial pivoting, on every backend and precision: the panel factorisation
//! ([`Op::LuPanel`]), the update of a column block by a factored panel ([`Op::LuUpdate`]) and the
//! row interchanges alone ([`Op::LuSwap`]).
//!
//! Row interchanges are LAPACK's `ipiv`, 0-based: at step i, rows i and `ipiv[i]` (>= i) of the
//! panel were swapped; applying them to another block means swapping its rows i and `ipiv[i]` for i
//! in order (?laswp).
//!
//! The panel is factored as LAPACK's ?getrf2 does, recursively: the left half, its interchanges and
//! triangular solve applied to the right half, the right half's update (a product), the right half,
//! and its interchanges applied back to the left half. One column is the leaf: the entry of largest
//! |re| + |im| (BLAS i?amax's measure) is the pivot, swapped to the top, and the column below it
//! divided by it. An exactly zero pivot (its whole column below is zero then) leaves the column as
//! it is, the factorisation goes on, and its column is reported (LAPACK's info > 0). The products
//! and solves of the recursion run on the backend's split kernels (the cluster's threads, see
//! `split`), the leaves on the calling thread: the same code for faer and OpenBLAS.
//!
//! The update of a column block by a panel is embarrassingly parallel over the block's columns:
//! each thread swaps, solves and updates a band of columns with the backend's sequential kernels.

use faer::{MatMut, MatRef, Par};

use crate::backend::Backend;
use crate::error::KernelError;
use crate::op::Op;
use crate::product::Product;
use crate::scalar::Scalar;
use crate::split::{bands, col_bands, pieces, run_pieces};

impl Backend {
    /// The body of [`Self::lu_panel`], compiled in this crate for each scalar (see `compiled`).
    pub(crate) fn lu_panel_impl<T: Scalar>(
        self,
        a: MatMut<'_, T>,
        ipiv: &mut [usize],
        par: Par,
    ) -> Result<Option<usize>, KernelError> {
        self.ensure_available()?;
        let shape = (a.nrows(), a.ncols());
        Op::LuPanel
            .check_shapes(&[shape])
            .map_err(|reason| KernelError::Operands {
                op: Op::LuPanel,
                reason,
            })?;
        if ipiv.len() != shape.1 {
            return Err(KernelError::Operands {
                op: Op::LuPanel,
                reason: format!(
                    "{} interchanges for a panel of {} columns",
                    ipiv.len(),
                    shape.1
                ),
            });
        }
        let mut zero = None;
        self.panel(a, ipiv, 0, &mut zero, par)?;
        Ok(zero)
    }

    /// The body of [`Self::lu_update`], compiled in this crate for each scalar (see `compiled`).
    pub(crate) fn lu_update_impl<T: Scalar>(
        self,
        panel: MatRef<'_, T>,
        ipiv: &[usize],
        c: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        self.ensure_available()?;
        check_pivoted(Op::LuUpdate, panel, ipiv, c.as_ref())?;
        let b = panel.ncols();
        let m = c.nrows();
        let flops = Op::LuUpdate.flops(&[(m, b), (m, c.ncols())]);
        let sizes = bands(c.ncols(), pieces(par, flops, c.ncols()));
        let (l11, l21) = panel.split_at_row(b);
        run_pieces(col_bands(c, &sizes), |mut c| {
            swap_rows(c.as_mut(), ipiv);
            let (mut c1, c2) = c.split_at_row_mut(b);
            self.lu_solve_seq(l11, crate::Solve::LeftUnitLower, c1.as_mut())?;
            if m > b {
                self.matmul_seq(Product::subtract(l21, c1.as_ref()), c2)?;
            }
            Ok(())
        })
    }

    /// The body of [`Self::lu_swap`], compiled in this crate for each scalar (see `compiled`).
    pub(crate) fn lu_swap_impl<T: Scalar>(
        self,
        panel: MatRef<'_, T>,
        ipiv: &[usize],
        c: MatMut<'_, T>,
    ) -> Result<(), KernelError> {
        check_pivoted(Op::LuSwap, panel, ipiv, c.as_ref())?;
        swap_rows(c, ipiv);
        Ok(())
    }

    /// The recursive panel factorisation (see the module doc); `offset` is the panel's first column
    /// in the caller's (for the zero pivot it reports).
    fn panel<T: Scalar>(
        self,
        mut a: MatMut<'_, T>,
        ipiv: &mut [usize],
        offset: usize,
        zero: &mut Option<usize>,
        par: Par,
    ) -> Result<(), KernelError> {
        let (m, n) = (a.nrows(), a.ncols());
        match n {
            // An empty panel (a 0 x 0 matrix): nothing to factor (it split into empty halves
            // forever before, until the stack overflowed).
            0 => return Ok(()),
            1 => {
                ipiv[0] = leaf_column(a, offset, zero);
                return Ok(());
            }
            _ => {}
        }
        let n1 = n / 2;
        let (mut left, mut right) = a.as_mut().split_at_col_mut(n1);
        let (ipiv1, ipiv2) = ipiv.split_at_mut(n1);
        self.panel(left.as_mut(), ipiv1, offset, zero, par)?;
        swap_rows(right.as_mut(), ipiv1);
        let (l11, l21) = left.as_ref().split_at_row(n1);
        let (mut a12, a22) = right.split_at_row_mut(n1);
        self.split_left_solve(l11, crate::Solve::LeftUnitLower, a12.as_mut(), par)?;
        self.split_matmul(Product::subtract(l21, a12.as_ref()), a22, par)?;
        let (left, right) = a.as_mut().split_at_col_mut(n1);
        self.panel(right.subrows_mut(n1, m - n1), ipiv2, offset + n1, zero, par)?;
        swap_rows(left.subrows_mut(n1, m - n1), ipiv2);
        for p in ipiv2.iter_mut() {
            *p += n1;
        }
        Ok(())
    }

    /// X <- L^-1 X with L unit lower triangular (`Solve::LeftUnitLower`), or X <- U^-1 X with U
    /// upper triangular (`Solve::LeftUpper`), on `par`: the right-hand sides are independent.
    pub(crate) fn split_left_solve<T: Scalar>(
        self,
        l: MatRef<'_, T>,
        solve: crate::Solve,
        x: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        let (m, r) = (x.nrows(), x.ncols());
        if m == 0 || r == 0 {
            return Ok(());
        }
        let sizes = bands(r, pieces(par, (m * m * r) as f64, r));
        run_pieces(col_bands(x, &sizes), |x| self.lu_solve_seq(l, solve, x))
    }
}

/// A column block with rows below a panel (and starting at the same row) and the panel's
/// interchanges, checked against each other.
fn check_pivoted<T: Scalar>(
    op: Op,
    panel: MatRef<'_, T>,
    ipiv: &[usize],
    c: MatRef<'_, T>,
) -> Result<(), KernelError> {
    let shapes = [(panel.nrows(), panel.ncols()), (c.nrows(), c.ncols())];
    op.check_shapes(&shapes)
        .map_err(|reason| KernelError::Operands { op, reason })?;
    if ipiv.len() != panel.ncols() {
        return Err(KernelError::Operands {
            op,
            reason: format!(
                "{} interchanges for a panel of {} columns",
                ipiv.len(),
                panel.ncols()
            ),
        });
    }
    if let Some((i, &p)) = ipiv
        .iter()
        .enumerate()
        .find(|&(i, &p)| p < i || p >= c.nrows())
    {
        return Err(KernelError::Operands {
            op,
            reason: format!(
                "interchange {i} swaps with row {p}, outside rows {i}..{}",
                c.nrows()
            ),
        });
    }
    Ok(())
}

/// Rows i and `ipiv[i]` of `c` swapped, for i in order (?laswp, forward), column by column.
#[inline]
pub fn swap_rows<T: Scalar>(c: MatMut<'_, T>, ipiv: &[usize]) {
    T::compiled_swap_rows(c, ipiv)
}

impl Backend {
    /// The body of [`swap_rows`], compiled in this crate for each scalar (see `compiled`; the same
    /// for every backend).
    pub(crate) fn swap_rows_impl<T: Scalar>(mut c: MatMut<'_, T>, ipiv: &[usize]) {
        for j in 0..c.ncols() {
            let mut col = c.as_mut().col_mut(j);
            for (i, &p) in ipiv.iter().enumerate() {
                if p != i {
                    let t = col[i];
                    col[i] = col[p];
                    col[p] = t;
                }
            }
        }
    }
}

/// One column's step of the panel: `a` is the column from its diagonal down. Returns the pivot's
/// row (relative to the diagonal), swapped to the top, the column below divided by it; an exactly
/// zero pivot leaves the column as it is and is recorded in `zero` (its column in the panel is
/// `offset`).
fn leaf_column<T: Scalar>(mut a: MatMut<'_, T>, offset: usize, zero: &mut Option<usize>) -> usize {
    let mut pivot = 0;
    let mut largest = -1.0;
    for (i, x) in a.as_ref().col(0).iter().enumerate() {
        let z = x.to_c64();
        let size = z.re.abs() + z.im.abs();
        // The first of equal sizes; a NaN wins (so that it shows in U, where the caller's
        // finiteness checks find it).
        if size > largest || (size.is_nan() && !largest.is_nan()) {
            largest = size;
            pivot = i;
        }
    }
    let p = a[(pivot, 0)];
    if p == T::from_f64(0.0) {
        zero.get_or_insert(offset);
        return pivot;
    }
    swap_rows(a.as_mut(), &[pivot]);
    let inverse = T::from_f64(1.0) / p;
    // A pivot too small for its reciprocal to be finite divides instead (LAPACK's sfmin test).
    let by_reciprocal = inverse.finite();
    let rows = a.nrows();
    for x in a.col_mut(0).subrows_mut(1, rows - 1).iter_mut() {
        if by_reciprocal {
            *x *= inverse;
        } else {
            *x /= p;
        }
    }
    pivot
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::random;
    use faer::Mat;

    /// A device's path to the update: the interchanges and the step's first row as arguments give
    /// the update of the rows from it, the rows above untouched; wrong arguments are refused.
    #[test]
    fn the_update_with_its_arguments_is_the_update_of_the_rows_from_the_steps_first() {
        use crate::{AnyMat, KernelArgs, Scalar};
        let (n, b, first) = (40, 8, 16);
        let mut panel = random::<f64>(n, b, 5);
        let mut ipiv = vec![0; b];
        Backend::Faer
            .lu_panel(
                panel.as_mut().subrows_mut(first, n - first),
                &mut ipiv,
                Par::Seq,
            )
            .unwrap();
        let c = random::<f64>(n, 6, 6);
        let mut expected = c.clone();
        let rows = n - first;
        Backend::Faer
            .lu_update(
                panel.as_ref().subrows(first, rows),
                &ipiv,
                expected.as_mut().subrows_mut(first, rows),
                Par::Seq,
            )
            .unwrap();
        let mut out = AnyMat::zeros(crate::Precision::D, n, 6);
        out.as_mut()
            .copy_from(f64::any_ref(c.as_ref()), None)
            .unwrap();
        let args = KernelArgs::Pivots { first, ipiv };
        let reads = [f64::any_ref(panel.as_ref())];
        Backend::Faer
            .run_any_with(Op::LuUpdate, &reads, out.as_mut(), &args, Par::Seq)
            .unwrap();
        let got = f64::of_any_ref(out.as_ref()).unwrap();
        assert!(got == expected.as_ref(), "the update differs");
        let refused = |op, args: &KernelArgs| {
            let mut out = AnyMat::zeros(crate::Precision::D, n, 6);
            (Backend::Faer.run_any_with(op, &reads, out.as_mut(), args, Par::Seq)).unwrap_err()
        };
        let err = refused(Op::LuUpdate, &KernelArgs::None).to_string();
        assert!(err.contains("interchanges"), "{err}");
        let err = refused(Op::Potrf, &args).to_string();
        assert!(err.contains("no arguments"), "{err}");
        let below = KernelArgs::Pivots {
            first: n + 1,
            ipiv: vec![0; b],
        };
        let err = refused(Op::LuSwap, &below).to_string();
        assert!(err.contains("first row"), "{err}");
    }

    /// A device's path to the panel: the step's first row as its argument factors the rows from it
    /// (the rows above untouched) as the backend's panel does, and leaves the interchanges and the
    /// zero pivot in the slot; reads are refused.
    #[test]
    fn the_panel_with_its_arguments_factors_the_rows_from_the_steps_first_into_its_slot() {
        use crate::{AnyMat, KernelArgs, PanelFound, PanelSlot, Scalar};
        let (n, b, first) = (40, 8, 16);
        let mut a = random::<f64>(n, b, 7);
        a.col_mut(3).fill(0.0);
        let mut expected = a.clone();
        let mut ipiv = vec![0; b];
        let zero = Backend::Faer
            .lu_panel(
                expected.as_mut().subrows_mut(first, n - first),
                &mut ipiv,
                Par::Seq,
            )
            .unwrap();
        assert_eq!(zero, Some(3));
        let mut out = AnyMat::zeros(crate::Precision::D, n, b);
        out.as_mut()
            .copy_from(f64::any_ref(a.as_ref()), None)
            .unwrap();
        let found = PanelSlot::new();
        let args = KernelArgs::Panel {
            first,
            found: found.clone(),
        };
        Backend::Faer
            .run_any_with(Op::LuPanel, &[], out.as_mut(), &args, Par::Seq)
            .unwrap();
        assert!(f64::of_any_ref(out.as_ref()).unwrap() == expected.as_ref());
        assert_eq!(found.found(), Some(PanelFound { ipiv, zero }));
        let reads = [f64::any_ref(a.as_ref())];
        let err = (Backend::Faer.run_any_with(Op::LuPanel, &reads, out.as_mut(), &args, Par::Seq))
            .unwrap_err();
        assert!(err.to_string().contains("reads no tile"), "{err}");
        let below = KernelArgs::Panel {
            first: n + 1,
            found,
        };
        let err = (Backend::Faer.run_any_with(Op::LuPanel, &[], out.as_mut(), &below, Par::Seq))
            .unwrap_err();
        assert!(err.to_string().contains("first row"), "{err}");
    }

    #[test]
    fn an_empty_panel_factors_into_nothing() {
        for rows in [0, 5] {
            let mut a = Mat::<f64>::zeros(rows, 0);
            let zero = Backend::Faer
                .lu_panel(a.as_mut(), &mut [], Par::Seq)
                .unwrap();
            assert_eq!(zero, None);
        }
    }

    #[test]
    fn interchanges_outside_the_block_are_refused() {
        let p = Mat::<f64>::zeros(4, 2);
        let mut c = Mat::<f64>::zeros(4, 3);
        let err = Backend::Faer
            .lu_swap(p.as_ref(), &[0, 9], c.as_mut())
            .unwrap_err();
        assert!(err.to_string().contains("row 9"), "{err}");
        let err = Backend::Faer
            .lu_update(p.as_ref(), &[0], c.as_mut(), Par::Seq)
            .unwrap_err();
        assert!(err.to_string().contains("1 interchanges"), "{err}");
    }
}
