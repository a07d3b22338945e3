//! The host twins of the GPU's elementwise kernels (`cuda::elementwise`, hetla's own kernels for
//! what cuBLAS and cuSOLVER do not do): what an emulated device runs in their place, with the same
//! results, so that a mixed solve's preparation on a device is tested without a GPU.

use faer::{MatMut, MatRef};

use crate::{AnyMut, AnyRef, DeviceSpan, KernelError, Precision, Scalar};

/// One of hetla's elementwise kernels on matrices in a device's memory (what cuBLAS and cuSOLVER do
/// not do; a mixed solve's preparation on the device): a device runs it on its memory, an emulated
/// device on host memory ([`SpanKernel::run_on_host`]).
#[derive(Debug, Clone, Copy)]
pub enum SpanKernel<'a> {
    /// Sets the strict upper triangle of the square span (d or z) to the adjoint of its strict
    /// lower one ([`mirror_lower`]).
    Mirror(&'a DeviceSpan),
    /// The sums of the moduli of each column of the span (d or z) ([`column_norms`]).
    ColumnNorms(&'a DeviceSpan),
    /// The sums of the moduli of each row of the span (d or z) ([`row_norms`]): ||A||_inf of a
    /// general matrix is the largest.
    RowNorms(&'a DeviceSpan),
    /// `to` (s or c) set to `from` (d or z) rounded, the real part of each diagonal entry
    /// multiplied by `factor` first; the first entry where `watched` that overflowed
    /// ([`lower_into`]).
    Lower {
        /// The matrix rounded.
        from: &'a DeviceSpan,
        /// Where it goes (of its shape).
        to: &'a DeviceSpan,
        /// What each diagonal entry's real part is multiplied by first (1: nothing).
        factor: f64,
        /// Where an overflow counts.
        watched: Watched,
    },
    /// `to` set to `from`, of its shape and precision (a copy within the device).
    Copy {
        /// The matrix copied.
        from: &'a DeviceSpan,
        /// Where it goes.
        to: &'a DeviceSpan,
    },
    /// `r` <- `r` - `a` `x` (one precision; `a` m x k, `x` k x n, `r` m x n): a refinement step's
    /// residual (cuBLAS ?gemm on a GPU).
    Product {
        /// The matrix.
        a: &'a DeviceSpan,
        /// The vectors it multiplies.
        x: &'a DeviceSpan,
        /// The right-hand sides, overwritten by the residuals.
        r: &'a DeviceSpan,
    },
    /// `b` <- the solution of `factor`'s system (one precision): a refinement step's correction
    /// (two cuBLAS ?trsm on a GPU). For [`FactorKind::Cholesky`], (L L^H)^-1 `b` with L the lower
    /// triangle of the square `factor`; for [`FactorKind::Lu`], U^-1 L^-1 `b` with L unit lower and
    /// U upper as LAPACK's ?getrf leaves them (the row interchanges applied to `b` before).
    Solve {
        /// The factor.
        factor: &'a DeviceSpan,
        /// Which factorisation made it.
        kind: FactorKind,
        /// The right-hand sides, overwritten by the solutions.
        b: &'a DeviceSpan,
    },
    /// The rows of `b` interchanged as LAPACK's ?laswp does (forward): row i with row `ipiv[i]`
    /// (0-based, >= i), for i in order; an LU's interchanges applied to right-hand sides before its
    /// [`SpanKernel::Solve`] (cuSOLVER's ?laswp on a GPU).
    Interchange {
        /// The rows interchanged.
        b: &'a DeviceSpan,
        /// The interchanges, at most `b`'s rows.
        ipiv: &'a [usize],
    },
}

/// Where a [`SpanKernel::Lower`] looks for an entry that overflowed the single precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watched {
    /// On and below the diagonal: what a Hermitian matrix's factorisation reads.
    LowerTriangle,
    /// Every entry: a general matrix's.
    Whole,
}

/// Which factorisation a [`SpanKernel::Solve`]'s factor comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FactorKind {
    /// Cholesky's L (lower triangle).
    Cholesky,
    /// LU's L (unit lower) and U (upper) in one matrix.
    Lu,
}

/// What a [`SpanKernel`] gives back.
#[derive(Debug, Clone, PartialEq)]
pub enum SpanOutput {
    /// Nothing: the matrix written is the result.
    Done,
    /// The column or row norms.
    Norms(Vec<f64>),
    /// The first entry that overflowed, if any.
    Overflow(Option<(usize, usize)>),
}

impl SpanOutput {
    /// The column or row norms ([`SpanKernel::ColumnNorms`]'s, [`SpanKernel::RowNorms`]'s; none for
    /// another kernel).
    pub fn norms(self) -> Vec<f64> {
        match self {
            Self::Norms(norms) => norms,
            _ => Vec::new(),
        }
    }

    /// The first entry that overflowed ([`SpanKernel::Lower`]'s; none for another kernel).
    pub fn overflow(self) -> Option<(usize, usize)> {
        match self {
            Self::Overflow(at) => at,
            _ => None,
        }
    }
}

impl SpanKernel<'_> {
    /// Whether it is one of hetla's compiled kernels (NVRTC's on a GPU: [`SpanKernel::Mirror`],
    /// [`SpanKernel::ColumnNorms`], [`SpanKernel::RowNorms`], [`SpanKernel::Lower`]); the others
    /// are copies and cuBLAS or cuSOLVER calls, which every GPU runs.
    pub fn compiled(&self) -> bool {
        matches!(
            self,
            Self::Mirror(_) | Self::ColumnNorms(_) | Self::RowNorms(_) | Self::Lower { .. }
        )
    }

    /// Runs it on host memory: the spans' addresses are host pointers (an emulated device's
    /// memory).
    ///
    /// # Safety
    /// The spans must be host memory holding their elements, disjoint; the span a kernel writes
    /// (`Mirror`'s, `to`) used by nothing else and the others unwritten during the call.
    pub unsafe fn run_on_host(self) -> Result<SpanOutput, KernelError> {
        // SAFETY (each view): the caller's contract.
        match self {
            Self::Mirror(span) => {
                mirror_lower(unsafe { span.host_view_mut() }).map(|()| SpanOutput::Done)
            }
            Self::ColumnNorms(span) => {
                column_norms(unsafe { span.host_view() }).map(SpanOutput::Norms)
            }
            Self::RowNorms(span) => row_norms(unsafe { span.host_view() }).map(SpanOutput::Norms),
            Self::Lower {
                from,
                to,
                factor,
                watched,
            } => {
                let (from, to) = unsafe { (from.host_view(), to.host_view_mut()) };
                lower_into(from, to, factor, watched).map(SpanOutput::Overflow)
            }
            Self::Copy { from, to } => {
                let (from, to) = unsafe { (from.host_view(), to.host_view_mut()) };
                to.copy_from(from, None).map(|()| SpanOutput::Done)
            }
            Self::Product { a, x, r } => {
                check_one_precision(&[a, x, r])?;
                let (a, x, r) = unsafe { (a.host_view(), x.host_view(), r.host_view_mut()) };
                crate::with_scalar!(a.precision(), T => {
                    let typed = (T::of_any_ref(a), T::of_any_ref(x), T::of_any_mut(r));
                    let (Some(a), Some(x), Some(r)) = typed else { unreachable!("one precision") };
                    check_product((a.nrows(), a.ncols()), (x.nrows(), x.ncols()), (r.nrows(), r.ncols()))?;
                    let minus_one = T::from_f64(-1.0);
                    faer::linalg::matmul::matmul(r, faer::Accum::Add, a, x, minus_one, faer::Par::Seq);
                });
                Ok(SpanOutput::Done)
            }
            Self::Solve { factor, kind, b } => {
                check_solve(factor, b)?;
                let (l, b) = unsafe { (factor.host_view(), b.host_view_mut()) };
                crate::with_scalar!(l.precision(), T => {
                    let (Some(l), Some(mut b)) = (T::of_any_ref(l), T::of_any_mut(b)) else {
                        unreachable!("one precision")
                    };
                    use faer::linalg::triangular_solve as solve;
                    let par = faer::Par::Seq;
                    match kind {
                        FactorKind::Cholesky => {
                            solve::solve_lower_triangular_in_place(l, b.as_mut(), par);
                            solve::solve_upper_triangular_in_place(l.adjoint(), b.as_mut(), par);
                        }
                        FactorKind::Lu => {
                            solve::solve_unit_lower_triangular_in_place(l, b.as_mut(), par);
                            solve::solve_upper_triangular_in_place(l, b.as_mut(), par);
                        }
                    }
                });
                Ok(SpanOutput::Done)
            }
            Self::Interchange { b, ipiv } => {
                check_interchanges(b, ipiv)?;
                let b = unsafe { b.host_view_mut() };
                crate::with_scalar!(b.precision(), T => {
                    let Some(b) = T::of_any_mut(b) else { unreachable!("its own precision") };
                    crate::swap_rows(b, ipiv);
                });
                Ok(SpanOutput::Done)
            }
        }
    }
}

/// An error unless `ipiv` are interchanges of `b`'s rows as LAPACK's ?laswp takes them: at most its
/// rows, `ipiv[i]` in i..rows.
pub fn check_interchanges(b: &DeviceSpan, ipiv: &[usize]) -> Result<(), KernelError> {
    let wrong = (ipiv.iter().enumerate()).find(|&(i, &p)| p < i || p >= b.rows);
    match (ipiv.len() <= b.rows, wrong) {
        (true, None) => Ok(()),
        (false, _) => Err(KernelError::Gpu {
            message: format!("{} interchanges of {} rows", ipiv.len(), b.rows),
        }),
        (true, Some((i, p))) => Err(KernelError::Gpu {
            message: format!(
                "interchange {i} swaps with row {p}, outside rows {i}..{}",
                b.rows
            ),
        }),
    }
}

/// An error unless `factor` is square, of one precision with `b` and of its rows.
pub fn check_solve(factor: &DeviceSpan, b: &DeviceSpan) -> Result<(), KernelError> {
    check_one_precision(&[factor, b])?;
    if factor.rows == factor.cols && b.rows == factor.rows {
        return Ok(());
    }
    Err(KernelError::Gpu {
        message: format!(
            "a solve with a {} x {} factor of {} right-hand-side rows",
            factor.rows, factor.cols, b.rows
        ),
    })
}

/// An error unless `spans` are of one precision.
pub fn check_one_precision(spans: &[&DeviceSpan]) -> Result<(), KernelError> {
    match spans.iter().find(|s| s.precision != spans[0].precision) {
        None => Ok(()),
        Some(other) => Err(KernelError::Gpu {
            message: format!(
                "a kernel on matrices in {} and {} (one precision expected)",
                spans[0].precision, other.precision
            ),
        }),
    }
}

/// An error unless R (m x n) -= A (m x k) X (k x n) has those shapes.
pub fn check_product(
    a: (usize, usize),
    x: (usize, usize),
    r: (usize, usize),
) -> Result<(), KernelError> {
    if a.1 == x.0 && (a.0, x.1) == r {
        return Ok(());
    }
    Err(KernelError::Gpu {
        message: format!("a product of {a:?} and {x:?} matrices into a {r:?} one"),
    })
}

/// Sets the strict upper triangle of the square `a` (d or z) to the adjoint of its strict lower
/// one.
pub fn mirror_lower(a: AnyMut<'_>) -> Result<(), KernelError> {
    match a {
        AnyMut::D(m) => mirror(m),
        AnyMut::Z(m) => mirror(m),
        other => Err(not_double("mirroring", other.precision())),
    }
}

fn mirror<T: Scalar>(mut a: MatMut<'_, T>) -> Result<(), KernelError> {
    let n = a.nrows();
    if a.ncols() != n {
        return Err(KernelError::Gpu {
            message: format!("mirroring takes a square matrix, not {n} x {}", a.ncols()),
        });
    }
    for j in 0..n {
        for i in 0..j {
            let v = a[(j, i)].to_c64();
            a[(i, j)] = T::from_parts(v.re, -v.im);
        }
    }
    Ok(())
}

/// The sums of the moduli of each column of `a` (d or z).
pub fn column_norms(a: AnyRef<'_>) -> Result<Vec<f64>, KernelError> {
    norms(a, false)
}

/// The sums of the moduli of each row of `a` (d or z).
pub fn row_norms(a: AnyRef<'_>) -> Result<Vec<f64>, KernelError> {
    norms(a, true)
}

/// The sums of the moduli of each column of `a` (d or z), or of each row (`rows`).
fn norms(a: AnyRef<'_>, rows: bool) -> Result<Vec<f64>, KernelError> {
    fn sums<T: Scalar>(a: MatRef<'_, T>, rows: bool) -> Vec<f64> {
        let mut sums = vec![0.0; if rows { a.nrows() } else { a.ncols() }];
        for j in 0..a.ncols() {
            for (i, v) in a.col(j).iter().enumerate() {
                sums[if rows { i } else { j }] += v.abs_f64();
            }
        }
        sums
    }
    match a {
        AnyRef::D(m) => Ok(sums(m, rows)),
        AnyRef::Z(m) => Ok(sums(m, rows)),
        other => Err(not_double("norms", other.precision())),
    }
}

/// Writes `from` (d or z) rounded to nearest in single precision into `to` (s or c, of its shape),
/// the real part of each diagonal entry multiplied by `factor` first; returns the first entry where
/// `watched` (column by column) that overflowed, if any.
pub fn lower_into(
    from: AnyRef<'_>,
    to: AnyMut<'_>,
    factor: f64,
    watched: Watched,
) -> Result<Option<(usize, usize)>, KernelError> {
    if from.shape() != to.shape() {
        return Err(KernelError::Gpu {
            message: format!(
                "rounding a {:?} matrix into a {:?} one",
                from.shape(),
                to.shape()
            ),
        });
    }
    match (from, to) {
        (AnyRef::D(f), AnyMut::S(t)) => Ok(lower_typed(f, t, factor, watched)),
        (AnyRef::Z(f), AnyMut::C(t)) => Ok(lower_typed(f, t, factor, watched)),
        (f, t) => Err(KernelError::Gpu {
            message: format!(
                "rounding takes d to s or z to c, not {} to {}",
                f.precision(),
                t.precision()
            ),
        }),
    }
}

fn lower_typed<W: Scalar, L: Scalar>(
    from: MatRef<'_, W>,
    mut to: MatMut<'_, L>,
    factor: f64,
    watched: Watched,
) -> Option<(usize, usize)> {
    let whole = watched == Watched::Whole;
    let mut overflow = None;
    for j in 0..from.ncols() {
        for i in 0..from.nrows() {
            let v = from[(i, j)].to_c64();
            let re = if i == j { v.re * factor } else { v.re };
            let (re, im) = (re as f32, v.im as f32);
            to[(i, j)] = L::from_parts(f64::from(re), f64::from(im));
            if overflow.is_none() && (whole || i >= j) && (re.is_infinite() || im.is_infinite()) {
                overflow = Some((i, j));
            }
        }
    }
    overflow
}

/// The error for a kernel given a matrix in another precision than d or z.
fn not_double(what: &str, precision: Precision) -> KernelError {
    KernelError::Gpu {
        message: format!("{what} takes a matrix in d or z, not {precision}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{c32, c64};
    use faer::Mat;

    #[test]
    fn the_host_twins_mirror_sum_and_round_as_the_gpu_kernels_do() {
        let mut a = Mat::from_fn(3, 3, |i, j| {
            c64::new((i * 3 + j) as f64, i as f64 - j as f64)
        });
        mirror_lower(AnyMut::Z(a.as_mut())).unwrap();
        assert_eq!(a[(0, 2)], c64::new(6.0, -2.0), "the adjoint of (2, 0)");
        assert_eq!(a[(1, 1)], c64::new(4.0, 0.0), "the diagonal kept");
        let sums = column_norms(AnyRef::Z(a.as_ref())).unwrap();
        assert_eq!(sums[0], 3.0_f64.hypot(1.0) + 6.0_f64.hypot(2.0));
        let mut low = Mat::<c32>::zeros(3, 3);
        a[(2, 1)] = c64::new(1e39, 0.0);
        let triangle = Watched::LowerTriangle;
        let rounded = lower_into(
            AnyRef::Z(a.as_ref()),
            AnyMut::C(low.as_mut()),
            2.0,
            triangle,
        );
        let overflow = rounded.unwrap();
        assert_eq!(overflow, Some((2, 1)));
        assert_eq!(
            low[(1, 1)],
            c32::new(8.0, 0.0),
            "the diagonal's real part raised"
        );
        assert_eq!(
            low[(1, 0)],
            c32::new(3.0, 1.0),
            "off the diagonal as it was"
        );
        let d = Mat::from_fn(2, 2, |i, j| (i + j) as f64 + 1.0 / 3.0);
        let mut s = Mat::<f32>::zeros(2, 2);
        let none = lower_into(AnyRef::D(d.as_ref()), AnyMut::S(s.as_mut()), 1.0, triangle).unwrap();
        assert_eq!((none, s[(0, 1)]), (None, (1.0 + 1.0 / 3.0) as f32));
        assert!(mirror_lower(AnyMut::S(s.as_mut())).is_err());
        assert!(
            lower_into(
                AnyRef::D(d.as_ref()),
                AnyMut::C(low.as_mut()),
                1.0,
                Watched::Whole
            )
            .is_err()
        );
        // Above the diagonal: an overflow of a general matrix, not of a Hermitian one's triangle.
        let mut above = Mat::from_fn(3, 3, |i, j| (1 + i + 3 * j) as f64);
        above[(0, 2)] = 1e39;
        let mut rounded = Mat::<f32>::zeros(3, 3);
        let mut at = |watched| {
            lower_into(
                AnyRef::D(above.as_ref()),
                AnyMut::S(rounded.as_mut()),
                1.0,
                watched,
            )
            .unwrap()
        };
        let found = (at(Watched::Whole), at(Watched::LowerTriangle));
        assert_eq!(found, (Some((0, 2)), None));
        assert_eq!(
            row_norms(AnyRef::D(above.as_ref())).unwrap()[1],
            2.0 + 5.0 + 8.0
        );
        assert_eq!(
            row_norms(AnyRef::D(above.as_ref())).unwrap()[0],
            1.0 + 4.0 + 1e39
        );
        assert!(row_norms(AnyRef::S(rounded.as_ref())).is_err());
    }

    #[test]
    fn the_interchanges_twin_swaps_rows_in_order_and_refuses_rows_outside() {
        let mut b = Mat::from_fn(4, 2, |i, j| (10 * i + j) as f64);
        let span = |b: &mut Mat<f64>| DeviceSpan {
            addr: b.as_ptr_mut() as u64,
            rows: b.nrows(),
            cols: b.ncols(),
            ld: b.col_stride() as usize,
            precision: Precision::D,
        };
        let on = span(&mut b);
        // SAFETY: `on` spans `b`, host memory used by nothing else during the calls.
        let run =
            |ipiv: &[usize]| unsafe { SpanKernel::Interchange { b: &on, ipiv }.run_on_host() };
        run(&[2, 3, 2]).unwrap();
        // Row 0 <-> 2, then row 1 <-> 3, then row 2 (once row 0) stays.
        assert_eq!(
            b.col(0).iter().copied().collect::<Vec<_>>(),
            [20.0, 30.0, 0.0, 10.0]
        );
        assert_eq!(b[(3, 1)], 11.0);
        for wrong in [&[4][..], &[1, 0], &[0, 1, 2, 3, 3]] {
            assert!(run(wrong).is_err(), "{wrong:?}");
        }
        assert_eq!(b[(0, 0)], 20.0, "a refused call touched nothing");
    }
}
