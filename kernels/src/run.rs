//! The tile kernels: [`Backend::run`] and the parallel kernels it dispatches to, each split into
//! sequential pieces on the caller's pool (`split`) above a size.

use faer::{Conj, MatMut, MatRef, Par};

use crate::any::each_precision;
use crate::backend::Backend;
use crate::erased::{AnyMat, AnyMut, AnyRef};
use crate::error::KernelError;
use crate::faer_impl;
use crate::op::{Blas, CpuCall, KernelArgs, Op, PanelFound, PanelSlot, ReflectorSlot, Solve};
use crate::par::threads;
use crate::product::Product;
use crate::scalar::{Scalar, adjoint_conj};
use crate::split::POTRF_SPLIT_FROM;

impl Backend {
    /// The body of [`Self::run`], compiled in this crate for each scalar (see `compiled`).
    pub(crate) fn run_impl<T: Scalar>(
        self,
        op: Op,
        reads: &[MatRef<'_, T>],
        write: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        let mut shapes: Vec<_> = reads.iter().map(|m| (m.nrows(), m.ncols())).collect();
        shapes.push((write.nrows(), write.ncols()));
        op.check_shapes(&shapes)
            .map_err(|reason| KernelError::Operands { op, reason })?;
        self.ensure_available()?;
        let plain = Conj::No;
        // An operand used as its adjoint: the transposed view, conjugated.
        fn adjoint<T: Scalar>(m: MatRef<'_, T>) -> (MatRef<'_, T>, Conj) {
            (m.transpose(), adjoint_conj::<T>())
        }
        match op.codelet().cpu {
            CpuCall::Potrf => self.potrf(write, par),
            CpuCall::Blas(Blas::Solve(Solve::RightAdjoint)) => self.trsm(reads[0], write, par),
            CpuCall::Blas(Blas::Solve(Solve::Left)) => self.solve_lower(reads[0], false, write, par),
            CpuCall::Blas(Blas::Solve(Solve::LeftAdjoint)) => {
                self.solve_lower(reads[0], true, write, par)
            }
            CpuCall::Blas(Blas::Solve(solve @ (Solve::LeftUnitLower | Solve::LeftUpper))) => {
                self.split_left_solve(reads[0], solve, write, par)
            }
            CpuCall::Blas(Blas::RankK) => self.syrk(reads[0], write, par),
            CpuCall::Blas(Blas::Product(p)) => {
                let a = if p.trans_a {
                    adjoint(reads[0])
                } else {
                    (reads[0], plain)
                };
                let b = if p.trans_b {
                    adjoint(reads[1])
                } else {
                    (reads[1], plain)
                };
                self.product(Product::new(a, b, p.alpha(), p.beta()), write, par)
            }
            CpuCall::Blas(Blas::Add) => {
                faer::zip!(write, reads[0]).for_each(|faer::unzip!(y, x)| *y += *x);
                Ok(())
            }
            CpuCall::Inverse => self.run_potri(op, op.flops(&shapes), reads, write, par),
            CpuCall::UnitInverse => self.invert_unit_factor(write, par).map(|_| ()),
            // LU's kernels read or write row interchanges, which no tile holds: they are called
            // with them (`lu_panel`, `lu_update`, `lu_swap`).
            CpuCall::Pivoted => Err(KernelError::Operands {
                op,
                reason: "LU's kernels take the panel's row interchanges: call Backend::lu_panel, lu_update or lu_swap".into(),
            }),
            // Aasen's read the matrix through a permutation, which no tile holds.
            CpuCall::Aasen => Err(KernelError::Operands {
                op,
                reason: "the symmetric indefinite family's kernels read the matrix through its permutation: they run through the family's work".into(),
            }),
            // QR's write or read the T's of their block reflectors, which no tile holds.
            CpuCall::Reflectors => Err(KernelError::Operands {
                op,
                reason: "QR's kernels take the block reflectors' T's: call Backend::qr_tile, qr_apply, qr_stacked or qr_stacked_apply".into(),
            }),
        }
    }

    /// [`Backend::run`] on tiles whose precision is known at run time only: every operand must have
    /// the written tile's precision (an error names the one that has not).
    pub fn run_any(
        self,
        op: Op,
        reads: &[AnyRef<'_>],
        write: AnyMut<'_>,
        par: Par,
    ) -> Result<(), KernelError> {
        fn typed<T: Scalar>(
            backend: Backend,
            op: Op,
            reads: &[AnyRef<'_>],
            write: MatMut<'_, T>,
            par: Par,
        ) -> Result<(), KernelError> {
            let reads = reads
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    T::of_any_ref(*r).ok_or_else(|| KernelError::Operands {
                        op,
                        reason: format!(
                            "operand {i} is in precision {} but the written tile is in {}",
                            r.precision(),
                            T::PRECISION
                        ),
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            backend.run(op, &reads, write, par)
        }
        each_precision!(write, AnyMut, w => typed(self, op, reads, w, par))
    }

    /// QR's panel with its arguments ([`KernelArgs::QrPanel`]), as a device's twin: the block
    /// column's rows from the step's first factored in block reflectors of `inner` columns (the
    /// panel's width if less), their T's left in the slot.
    fn qr_panel_with(
        self,
        reads: &[AnyRef<'_>],
        write: AnyMut<'_>,
        (first, inner, found): (usize, usize, &ReflectorSlot),
        par: Par,
    ) -> Result<(), KernelError> {
        fn typed<T: Scalar>(
            backend: Backend,
            (first, inner, found): (usize, usize, &ReflectorSlot),
            c: MatMut<'_, T>,
            par: Par,
        ) -> Result<(), KernelError> {
            let rows = first_row(Op::Geqrt, first, c.nrows())?;
            let k = rows.min(c.ncols());
            let mut t = faer::Mat::<T>::zeros(inner.min(k).max(1), k);
            backend.qr_tile(c.subrows_mut(first, rows), t.as_mut(), par)?;
            found.fill(std::sync::Arc::new(T::any_mat(t)));
            Ok(())
        }
        if !reads.is_empty() {
            return Err(KernelError::Operands {
                op: Op::Geqrt,
                reason: format!("the panel reads no tile, given {}", reads.len()),
            });
        }
        let args = (first, inner, found);
        each_precision!(write, AnyMut, w => typed(self, args, w, par))
    }

    /// [`Backend::run_any`] with what the kernel takes besides its tiles: LU's update and
    /// interchanges ([`KernelArgs::Pivots`]) on the rows of the panel and the block column from the
    /// step's first, LU's panel ([`KernelArgs::Panel`]) on the block column's rows from the step's
    /// first, what it found left in its slot; QR's panel ([`KernelArgs::QrPanel`]) likewise, its
    /// T's left in its slot; any other operation with [`KernelArgs::None`] as `run_any` runs it.
    pub fn run_any_with(
        self,
        op: Op,
        reads: &[AnyRef<'_>],
        write: AnyMut<'_>,
        args: &KernelArgs,
        par: Par,
    ) -> Result<(), KernelError> {
        let (first, ipiv) = match (op.codelet().cpu, args) {
            (_, KernelArgs::None) => return self.run_any(op, reads, write, par),
            (CpuCall::Pivoted, KernelArgs::Pivots { first, ipiv }) if op != Op::LuPanel => {
                (*first, ipiv)
            }
            (CpuCall::Pivoted, KernelArgs::Panel { first, found }) if op == Op::LuPanel => {
                fn typed<T: Scalar>(
                    backend: Backend,
                    (first, found): (usize, &PanelSlot),
                    c: MatMut<'_, T>,
                    par: Par,
                ) -> Result<(), KernelError> {
                    let rows = first_row(Op::LuPanel, first, c.nrows())?;
                    let mut ipiv = vec![0; c.ncols()];
                    let zero = backend.lu_panel(c.subrows_mut(first, rows), &mut ipiv, par)?;
                    found.fill(PanelFound { ipiv, zero });
                    Ok(())
                }
                if !reads.is_empty() {
                    return Err(KernelError::Operands {
                        op,
                        reason: format!("the panel reads no tile, given {}", reads.len()),
                    });
                }
                return each_precision!(write, AnyMut, w => typed(self, (*first, found), w, par));
            }
            (
                CpuCall::Reflectors,
                KernelArgs::QrPanel {
                    first,
                    inner,
                    found,
                },
            ) if op == Op::Geqrt => {
                return self.qr_panel_with(reads, write, (*first, *inner, found), par);
            }
            (CpuCall::Reflectors, KernelArgs::Reflectors { first, t }) if op == Op::Unmqr => {
                fn typed<T: Scalar>(
                    backend: Backend,
                    (first, t, v): (usize, &AnyMat, AnyRef<'_>),
                    c: MatMut<'_, T>,
                    par: Par,
                ) -> Result<(), KernelError> {
                    let t = operand::<T>(Op::Unmqr, "the T's", t.as_ref())?;
                    let v = operand::<T>(Op::Unmqr, "the panel", v)?;
                    let rows = first_row(Op::Unmqr, first, c.nrows())?;
                    // A panel that holds only the rows from the step's first starts there.
                    let v = match v.nrows() == c.nrows() {
                        true => v.subrows(first, rows),
                        false => v,
                    };
                    backend.qr_apply(v, t, c.subrows_mut(first, rows), true, par)
                }
                let [v] = reads else {
                    return Err(KernelError::Operands {
                        op,
                        reason: format!("expected the panel alone as a read, got {}", reads.len()),
                    });
                };
                let args = (*first, &**t, *v);
                return each_precision!(write, AnyMut, w => typed(self, args, w, par));
            }
            (CpuCall::Aasen, args) => {
                return self.aasen_columns((op, args), (reads, write), par);
            }
            (_, args) => {
                return Err(KernelError::Operands {
                    op,
                    reason: format!("{op} takes no arguments besides its tiles, given {args:?}"),
                });
            }
        };
        fn typed<T: Scalar>(
            backend: Backend,
            (op, panel): (Op, AnyRef<'_>),
            (first, ipiv): (usize, &[usize]),
            c: MatMut<'_, T>,
            par: Par,
        ) -> Result<(), KernelError> {
            let panel = operand::<T>(op, "the panel", panel)?;
            if first > panel.nrows() {
                return Err(KernelError::Operands {
                    op,
                    reason: format!(
                        "the step's first row {first} lies below the panel ({} rows)",
                        panel.nrows(),
                    ),
                });
            }
            let rows = first_row(op, first, c.nrows())?;
            let (panel, c) = (
                panel.subrows(first, panel.nrows() - first),
                c.subrows_mut(first, rows),
            );
            match op {
                Op::LuUpdate => backend.lu_update(panel, ipiv, c, par),
                _ => backend.lu_swap(panel, ipiv, c),
            }
        }
        let [panel] = reads else {
            return Err(KernelError::Operands {
                op,
                reason: format!(
                    "expected the panel alone as a read, got {} reads",
                    reads.len()
                ),
            });
        };
        each_precision!(write, AnyMut, w => typed(self, (op, *panel), (first, ipiv), w, par))
    }

    /// The body of [`Self::matmul`], compiled in this crate for each scalar (see `compiled`).
    pub(crate) fn matmul_impl<T: Scalar>(
        self,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        c: MatMut<'_, T>,
        alpha: f64,
        beta: f64,
        par: Par,
    ) -> Result<(), KernelError> {
        self.product(
            Product::new((a, Conj::No), (b, Conj::No), alpha, beta),
            c,
            par,
        )
    }

    /// [`Backend::matmul`] with operands conjugated where their `Conj` says so.
    pub(crate) fn product<T: Scalar>(
        self,
        p: Product<'_, T>,
        c: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        self.ensure_available()?;
        if p.a.0.ncols() == 0 || p.alpha == 0.0 {
            faer_impl::scale(c, p.beta);
            return Ok(());
        }
        self.split_matmul(p, c, par)
    }

    /// The body of [`Self::potrf`], compiled in this crate for each scalar (see `compiled`).
    pub(crate) fn potrf_impl<T: Scalar>(
        self,
        a: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        self.ensure_available()?;
        if threads(par) == 1 || a.nrows() < POTRF_SPLIT_FROM {
            self.potrf_seq(a)
        } else {
            self.split_potrf(a, par)
        }
    }

    /// The body of [`Self::syrk`], compiled in this crate for each scalar (see `compiled`).
    pub(crate) fn syrk_impl<T: Scalar>(
        self,
        a: MatRef<'_, T>,
        c: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        self.ensure_available()?;
        if a.ncols() == 0 {
            return Ok(());
        }
        self.split_syrk(a, c, par)
    }

    /// C <- C - A B. A and B may be transposed views (`.transpose()`, not conjugated): the BLAS
    /// backend passes them as transpose flags, faer packs a transposed B into column-major scratch
    /// (its fast layout).
    pub fn gemm_sub<T: Scalar>(
        self,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        c: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        self.matmul(a, b, c, -1.0, 1.0, par)
    }
}

/// The rows of a block column of `rows` from the step's `first` on (what a device's LU and QR
/// kernels work on); an error when `first` lies below the block column.
fn first_row(op: Op, first: usize, rows: usize) -> Result<usize, KernelError> {
    rows.checked_sub(first)
        .ok_or_else(|| KernelError::Operands {
            op,
            reason: format!(
                "the step's first row {first} lies below the block column ({rows} rows)"
            ),
        })
}

/// `x` (`what`, read by `op`) in the written block column's precision `T`; an error naming both
/// precisions otherwise.
pub(crate) fn operand<'a, T: Scalar>(
    op: Op,
    what: &str,
    x: AnyRef<'a>,
) -> Result<MatRef<'a, T>, KernelError> {
    T::of_any_ref(x).ok_or_else(|| KernelError::Operands {
        op,
        reason: format!(
            "{what} is in precision {} but the block column in {}",
            x.precision(),
            T::PRECISION
        ),
    })
}
