//! Aasen's kernels on block columns, the ones its block-column graph runs on GPUs too: a panel's
//! interchanges on an earlier block column ([`Op::LdltSwap`] with [`KernelArgs::Pivots`]), a term
//! of the update of the step's block column ([`Op::LdltColumnUpdate`]) and the terms of H's block
//! column ([`Op::LdltColumnHessenberg`]). Their operands are whole block columns (n rows): the
//! arguments name the rows each works on, checked here once for the CPU and the GPUs
//! ([`aasen_call`]).

use faer::{Conj, MatMut, MatRef, Par};

use crate::any::each_precision;
use crate::backend::Backend;
use crate::erased::{AnyMat, AnyMut, AnyRef};
use crate::error::KernelError;
use crate::lu::swap_rows;
use crate::op::Shape;
use crate::op::{KernelArgs, Op};
use crate::product::Product;
use crate::run::operand;
use crate::scalar::{Scalar, adjoint_conj};

/// One of Aasen's block-column kernels with its rows checked against its operands: `l` the block
/// column read (the panel, for the interchanges), `c` the one written.
#[derive(Debug, Clone, Copy)]
pub(crate) enum AasenCall<'a> {
    /// c's rows from `first` swapped as `ipiv` says (local to them, row i with `ipiv[i] >= i`).
    Swap { first: usize, ipiv: &'a [usize] },
    /// c[first..] -= l[first..] c[block..block + l's columns].
    Update { first: usize, block: usize },
    /// c[top..top + t's rows] += t l[source..source + c's columns]^H.
    Hessenberg {
        t: &'a AnyMat,
        top: usize,
        source: usize,
    },
}

/// The call `op` with `args` makes on the block columns of shapes `l` (read) and `c` (written), or
/// the error that says which row or shape is wrong.
pub(crate) fn aasen_call<'a>(
    op: Op,
    args: &'a KernelArgs,
    l: Shape,
    c: Shape,
) -> Result<AasenCall<'a>, KernelError> {
    let bad = |reason: String| Err(KernelError::Operands { op, reason });
    if l.0 != c.0 {
        return bad(format!(
            "the block columns have {} and {} rows: the same expected",
            l.0, c.0
        ));
    }
    let rows = c.0;
    match (op, args) {
        (Op::LdltSwap, KernelArgs::Pivots { first, ipiv }) => {
            let below = rows.saturating_sub(*first);
            if *first > rows || ipiv.len() > below {
                return bad(format!(
                    "{} interchanges from row {first} of a block column of {rows} rows",
                    ipiv.len()
                ));
            }
            if let Some((i, p)) = ipiv.iter().enumerate().find(|&(i, &p)| p < i || p >= below) {
                return bad(format!(
                    "interchange {i} names row {p}: rows {i}..{below} are the ones it may swap"
                ));
            }
            Ok(AasenCall::Swap {
                first: *first,
                ipiv,
            })
        }
        (Op::LdltColumnUpdate, &KernelArgs::AasenUpdate { first, block }) => {
            if first > rows || block + l.1 > first {
                return bad(format!(
                    "rows {first}.. less a product with rows {block}..{} of {rows}: the block \
                     must lie above the rows updated",
                    block + l.1
                ));
            }
            Ok(AasenCall::Update { first, block })
        }
        (Op::LdltColumnHessenberg, KernelArgs::AasenHessenberg { t, top, source }) => {
            let (r, w) = t.shape();
            if w != l.1 || top + r > rows || source + c.1 > rows {
                return bad(format!(
                    "T {r}x{w} into rows {top}..{} of a block column {rows}x{} with L's rows \
                     {source}..{} of a block column {rows}x{}: T as wide as L, the rows inside",
                    top + r,
                    c.1,
                    source + c.1,
                    l.1
                ));
            }
            Ok(AasenCall::Hessenberg {
                t,
                top: *top,
                source: *source,
            })
        }
        (_, args) => bad(format!(
            "{op} on block columns takes its rows as arguments, given {args:?}"
        )),
    }
}

impl Backend {
    /// One of Aasen's block-column kernels (see the module documentation) on the CPU, `reads` the
    /// block column read (the panel, for the interchanges), `write` the one written.
    pub(crate) fn aasen_columns(
        self,
        (op, args): (Op, &KernelArgs),
        (reads, write): (&[AnyRef<'_>], AnyMut<'_>),
        par: Par,
    ) -> Result<(), KernelError> {
        fn typed<T: Scalar>(
            (backend, par): (Backend, Par),
            (op, args, l): (Op, &KernelArgs, AnyRef<'_>),
            c: MatMut<'_, T>,
        ) -> Result<(), KernelError> {
            let l = operand::<T>(op, "the block column read", l)?;
            let shape = |m: MatRef<'_, T>| (m.nrows(), m.ncols());
            match aasen_call(op, args, shape(l), shape(c.as_ref()))? {
                AasenCall::Swap { first, ipiv } => {
                    let rows = c.nrows() - first;
                    swap_rows(c.subrows_mut(first, rows), ipiv);
                    Ok(())
                }
                AasenCall::Update { first, block } => {
                    let (above, below) = c.split_at_row_mut(first);
                    let x = above.as_ref().subrows(block, l.ncols());
                    let l = l.subrows(first, below.nrows());
                    backend.product(Product::subtract(l, x), below, par)
                }
                AasenCall::Hessenberg { t, top, source } => {
                    let t = operand::<T>(op, "T", t.as_ref())?;
                    let l = l.subrows(source, c.ncols());
                    let h = c.subrows_mut(top, t.nrows());
                    let p = Product::new(
                        (t, Conj::No),
                        (l.transpose(), adjoint_conj::<T>()),
                        1.0,
                        1.0,
                    );
                    backend.product(p, h, par)
                }
            }
        }
        let [l] = reads else {
            return Err(KernelError::Operands {
                op,
                reason: format!("expected one block column read, got {}", reads.len()),
            });
        };
        each_precision!(write, AnyMut, w => typed((self, par), (op, args, *l), w))
    }
}
