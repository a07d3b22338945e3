//! Tiles whose precision is known at run time only: [`AnyRef`], [`AnyMut`] and the owned
//! [`AnyMat`], one variant per [`Precision`].
//!
//! Computing code is generic over [`Scalar`]; code that *moves* tiles without computing on them (a
//! device's uploads, downloads and replicas, behind a trait object that cannot have generic
//! methods) takes these instead. A typed view goes in with [`Scalar::any_ref`] and comes back out
//! with [`Scalar::of_any_ref`]; [`Backend::run_any`](crate::Backend::run_any) runs a kernel on them
//! once it has checked that every operand has one precision.

use faer::{Mat, MatMut, MatRef};

use crate::erased::{AnyMat, AnyMut, AnyRef};
use crate::error::KernelError;
use crate::scalar::{Precision, Scalar};

/// Applies `$body` to the typed matrix inside any variant of `$ty` (the same code for each
/// precision: generic calls resolve per variant).
macro_rules! each_precision {
    ($value:expr, $ty:ident, $m:ident => $body:expr) => {
        match $value {
            $ty::S($m) => $body,
            $ty::D($m) => $body,
            $ty::C($m) => $body,
            $ty::Z($m) => $body,
        }
    };
}
pub(crate) use each_precision;

impl AnyRef<'_> {
    /// Its precision.
    pub fn precision(&self) -> Precision {
        each_precision!(self, AnyRef, m => precision_of(m))
    }

    /// (rows, columns).
    pub fn shape(&self) -> (usize, usize) {
        each_precision!(self, AnyRef, m => (m.nrows(), m.ncols()))
    }

    /// The host bytes it spans (see [`crate::HostRange::of_matrix`]).
    pub fn host_range(&self) -> crate::HostRange {
        each_precision!(self, AnyRef, m => crate::HostRange::of_matrix(m.as_ptr(), m.nrows(), m.ncols(), m.col_stride()))
    }
}

impl AnyMut<'_> {
    /// Its precision.
    pub fn precision(&self) -> Precision {
        each_precision!(self, AnyMut, m => precision_of(&m.as_ref()))
    }

    /// (rows, columns).
    pub fn shape(&self) -> (usize, usize) {
        each_precision!(self, AnyMut, m => (m.nrows(), m.ncols()))
    }

    /// The host bytes it spans (see [`crate::HostRange::of_matrix`]).
    pub fn host_range(&self) -> crate::HostRange {
        each_precision!(self, AnyMut, m => crate::HostRange::of_matrix(m.as_ptr(), m.nrows(), m.ncols(), m.col_stride()))
    }

    /// Copies `src` (same precision and shape) into it, by columns over the copy threads `threads`
    /// when given ([`crate::copy_by_columns`]).
    pub fn copy_from(
        self,
        src: AnyRef<'_>,
        threads: Option<&hetla_clusters::CopyThreads>,
    ) -> Result<(), KernelError> {
        check_copy(self.precision(), self.shape(), src.precision(), src.shape())?;
        each_precision!(self, AnyMut, dst => copy_typed(dst, src, threads))
    }
}

impl AnyMat {
    /// A `rows x cols` matrix of zeros in `precision`.
    pub fn zeros(precision: Precision, rows: usize, cols: usize) -> Self {
        crate::with_scalar!(precision, T => Mat::<T>::zeros(rows, cols).into())
    }

    /// Its precision.
    pub fn precision(&self) -> Precision {
        self.as_ref().precision()
    }

    /// (rows, columns).
    pub fn shape(&self) -> (usize, usize) {
        self.as_ref().shape()
    }

    /// A view of it.
    pub fn as_ref(&self) -> AnyRef<'_> {
        each_precision!(self, AnyMat, m => erase_ref(m.as_ref()))
    }

    /// A writable view of it.
    pub fn as_mut(&mut self) -> AnyMut<'_> {
        each_precision!(self, AnyMat, m => erase_mut(m.as_mut()))
    }
}

fn erase_ref<S: Scalar>(m: MatRef<'_, S>) -> AnyRef<'_> {
    S::any_ref(m)
}

fn erase_mut<S: Scalar>(m: MatMut<'_, S>) -> AnyMut<'_> {
    S::any_mut(m)
}

impl<'a, S: Scalar> From<MatRef<'a, S>> for AnyRef<'a> {
    fn from(m: MatRef<'a, S>) -> Self {
        S::any_ref(m)
    }
}

impl<'a, S: Scalar> From<MatMut<'a, S>> for AnyMut<'a> {
    fn from(m: MatMut<'a, S>) -> Self {
        S::any_mut(m)
    }
}

impl<S: Scalar> From<Mat<S>> for AnyMat {
    fn from(m: Mat<S>) -> Self {
        S::any_mat(m)
    }
}

fn precision_of<S: Scalar>(_: &MatRef<'_, S>) -> Precision {
    S::PRECISION
}

/// Copies `src` into `dst` when it has `dst`'s precision (checked by the caller, and again here).
fn copy_typed<S: Scalar>(
    dst: MatMut<'_, S>,
    src: AnyRef<'_>,
    threads: Option<&hetla_clusters::CopyThreads>,
) -> Result<(), KernelError> {
    let from = src.precision();
    let src = S::of_any_ref(src).ok_or_else(|| KernelError::Gpu {
        message: format!(
            "a copy from a tile in {from} into a tile in {}",
            S::PRECISION
        ),
    })?;
    crate::copy_by_columns(dst, src, threads);
    Ok(())
}

fn check_copy(
    to: Precision,
    to_shape: (usize, usize),
    from: Precision,
    from_shape: (usize, usize),
) -> Result<(), KernelError> {
    if to != from {
        return Err(KernelError::Gpu {
            message: format!("a copy from a tile in {from} into a tile in {to}"),
        });
    }
    if to_shape != from_shape {
        return Err(KernelError::Gpu {
            message: format!(
                "a copy from a {}x{} tile into a {}x{} tile",
                from_shape.0, from_shape.1, to_shape.0, to_shape.1
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scalar::c32;

    #[test]
    fn tiles_keep_their_precision_through_erasure_and_copies_check_it() {
        let a = Mat::<c32>::from_fn(3, 2, |i, j| c32::new(i as f32, j as f32));
        let erased: AnyRef<'_> = a.as_ref().into();
        assert_eq!((erased.precision(), erased.shape()), (Precision::C, (3, 2)));
        assert!(f32::of_any_ref(erased).is_none());
        assert!(c32::of_any_ref(erased).unwrap() == a.as_ref());
        let mut b = AnyMat::zeros(Precision::C, 3, 2);
        b.as_mut().copy_from(erased, None).unwrap();
        assert!(c32::of_any_mut(b.as_mut()).unwrap().as_ref() == a.as_ref());
        let mut wrong = AnyMat::zeros(Precision::Z, 3, 2);
        let err = wrong
            .as_mut()
            .copy_from(erased, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("in c") && err.contains("in z"), "{err}");
        let mut small = AnyMat::zeros(Precision::C, 2, 2);
        let err = small
            .as_mut()
            .copy_from(erased, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("3x2") && err.contains("2x2"), "{err}");
    }
}
