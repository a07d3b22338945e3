//! The matrix types hetla's calls accept: faer's (`MatRef`, `&Mat`, `MatMut`, `&mut Mat`), and with
//! feature `ndarray` ndarray's (`ArrayView2`, `&Array2`, `ArrayViewMut2`, `&mut Array2`), with
//! feature `nalgebra` nalgebra's (`DMatrixView`, `&DMatrix`, `DMatrixViewMut`, `&mut DMatrix`).
//! Results come back in the caller's kind of matrix ([`Matrix::Owned`]).
//!
//! Every view is read where it lies, whatever its strides (faer takes any strides): no copy is made
//! to read an input. What is copied is what a faer caller's call copies too: a factorisation of a
//! read-only matrix copies it into the factor, a solve writes its result into a new matrix (of the
//! caller's type, column-major: ndarray's in Fortran order). Two cases copy more, each said where
//! it happens: a matrix factored or solved in place whose columns are not contiguous (ndarray's
//! default C order, a transposed view) is copied into a column-major buffer and back, because the
//! tiles of a tiled run need contiguous columns.
//!
//! The complex types are faer's [`c32`](crate::c32) and [`c64`](crate::c64), which are
//! `num_complex::Complex<f32>` and `Complex<f64>`: the element types ndarray and nalgebra users
//! already have.

use faer::{Mat, MatMut, MatRef};
use hetla_kernels::Scalar;

use crate::Result;

/// A matrix hetla reads: a view of it, and the kind of matrix results come back in.
pub trait Matrix {
    /// The scalar type.
    type Elem: Scalar;
    /// The owned matrix of the same library, which results are returned in.
    type Owned;
    /// The matrix as a faer view (no copy).
    fn view(&self) -> MatRef<'_, Self::Elem>;
    /// A new column-major `rows x cols` matrix of the owned type, its entries written by `fill`.
    fn new_owned(
        rows: usize,
        cols: usize,
        fill: impl FnOnce(MatMut<'_, Self::Elem>) -> Result<()>,
    ) -> Result<Self::Owned>;
    /// A copy of `m` in the owned type (column-major).
    fn owned_copy(m: MatRef<'_, Self::Elem>) -> Result<Self::Owned> {
        Self::new_owned(m.nrows(), m.ncols(), |mut out| {
            out.copy_from(m);
            Ok(())
        })
    }
}

/// X = solve(B): a copy of the right-hand sides `b` (checked to have the `n` rows of the system) in
/// `b`'s owned type, solved in place by `solve` (every factor's `solve`).
pub(crate) fn solved<B: Matrix>(
    b: B,
    n: usize,
    solve: impl FnOnce(MatMut<'_, B::Elem>) -> Result<()>,
) -> Result<B::Owned> {
    let b = b.view();
    crate::check::check_rows(n, b.nrows())?;
    B::new_owned(b.nrows(), b.ncols(), |mut x| {
        x.copy_from(b);
        solve(x)
    })
}

/// A matrix hetla writes in place.
pub trait MatrixMut {
    /// The scalar type.
    type Elem: Scalar;
    /// The matrix as a writable faer view (no copy).
    fn view_mut(&mut self) -> MatMut<'_, Self::Elem>;
}

/// Runs `f` on `m` when its columns are contiguous, else on a column-major copy that is written
/// back afterwards (also after an error: what `f` wrote is what the caller sees, as in place).
pub(crate) fn column_major<T: Scalar, R>(
    m: MatMut<'_, T>,
    f: impl FnOnce(MatMut<'_, T>) -> Result<R>,
) -> Result<R> {
    if m.row_stride() == 1 || m.nrows() <= 1 {
        return f(m);
    }
    let mut copy = Mat::zeros(m.nrows(), m.ncols());
    crate::copy::copy(m.as_ref(), copy.as_mut());
    let result = f(copy.as_mut());
    crate::copy::copy(copy.as_ref(), m);
    result
}

/// faer's read-only matrices: a view, a borrowed matrix, an owned one.
macro_rules! faer_matrix {
    ($($ty:ty),*) => {$(
        impl<T: Scalar> Matrix for $ty {
            type Elem = T;
            type Owned = Mat<T>;
            fn view(&self) -> MatRef<'_, T> {
                self.as_ref()
            }
            fn new_owned(
                rows: usize,
                cols: usize,
                fill: impl FnOnce(MatMut<'_, T>) -> Result<()>,
            ) -> Result<Mat<T>> {
                let mut m = Mat::zeros(rows, cols);
                fill(m.as_mut())?;
                Ok(m)
            }
        }
    )*};
}

faer_matrix!(MatRef<'_, T>, &Mat<T>, Mat<T>);

impl<T: Scalar> MatrixMut for MatMut<'_, T> {
    type Elem = T;
    fn view_mut(&mut self) -> MatMut<'_, T> {
        self.as_mut()
    }
}

impl<T: Scalar> MatrixMut for &mut Mat<T> {
    type Elem = T;
    fn view_mut(&mut self) -> MatMut<'_, T> {
        self.as_mut()
    }
}

#[cfg(feature = "ndarray")]
mod with_ndarray {
    use ndarray::{ArrayBase, Data, DataMut, Ix2, ShapeBuilder};

    use super::*;

    /// Rows, columns and the strides in elements of an ndarray matrix.
    fn shape<S: Data>(a: &ArrayBase<S, Ix2>) -> (usize, usize, isize, isize) {
        let (rows, cols) = a.dim();
        let strides = a.strides();
        (rows, cols, strides[0], strides[1])
    }

    impl<T: Scalar, S: Data<Elem = T>> Matrix for ArrayBase<S, Ix2> {
        type Elem = T;
        type Owned = ndarray::Array2<T>;
        fn view(&self) -> MatRef<'_, T> {
            let (rows, cols, rs, cs) = shape(self);
            // SAFETY: ndarray guarantees that every (i, j) with i < rows, j < cols lies at
            // ptr + i rs + j cs inside the array's allocation, borrowed for the view's lifetime.
            unsafe { MatRef::from_raw_parts(self.as_ptr(), rows, cols, rs, cs) }
        }
        fn new_owned(
            rows: usize,
            cols: usize,
            fill: impl FnOnce(MatMut<'_, T>) -> Result<()>,
        ) -> Result<ndarray::Array2<T>> {
            let mut m = ndarray::Array2::from_elem((rows, cols).f(), T::from_f64(0.0));
            fill(MatrixMut::view_mut(&mut m))?;
            Ok(m)
        }
    }

    impl<T: Scalar, S: Data<Elem = T>> Matrix for &ArrayBase<S, Ix2> {
        type Elem = T;
        type Owned = ndarray::Array2<T>;
        fn view(&self) -> MatRef<'_, T> {
            <ArrayBase<S, Ix2> as Matrix>::view(*self)
        }
        fn new_owned(
            rows: usize,
            cols: usize,
            fill: impl FnOnce(MatMut<'_, T>) -> Result<()>,
        ) -> Result<ndarray::Array2<T>> {
            <ArrayBase<S, Ix2> as Matrix>::new_owned(rows, cols, fill)
        }
    }

    impl<T: Scalar, S: DataMut<Elem = T>> MatrixMut for ArrayBase<S, Ix2> {
        type Elem = T;
        fn view_mut(&mut self) -> MatMut<'_, T> {
            let (rows, cols, rs, cs) = shape(self);
            // SAFETY: as for `view`; the array is borrowed mutably for the view's lifetime and
            // ndarray's mutable arrays never alias two indices to one element.
            unsafe { MatMut::from_raw_parts_mut(self.as_mut_ptr(), rows, cols, rs, cs) }
        }
    }

    impl<T: Scalar, S: DataMut<Elem = T>> MatrixMut for &mut ArrayBase<S, Ix2> {
        type Elem = T;
        fn view_mut(&mut self) -> MatMut<'_, T> {
            <ArrayBase<S, Ix2> as MatrixMut>::view_mut(*self)
        }
    }
}

#[cfg(feature = "nalgebra")]
mod with_nalgebra {
    use nalgebra::{Dim, Matrix as NMatrix, RawStorage, RawStorageMut};

    use super::*;

    impl<T, R, C, S> Matrix for NMatrix<T, R, C, S>
    where
        T: Scalar + nalgebra::Scalar,
        R: Dim,
        C: Dim,
        S: RawStorage<T, R, C>,
    {
        type Elem = T;
        type Owned = nalgebra::DMatrix<T>;
        fn view(&self) -> MatRef<'_, T> {
            let (rows, cols) = self.shape();
            let (rs, cs) = self.strides();
            // SAFETY: nalgebra's storage holds every (i, j) with i < rows, j < cols at
            // ptr + i rs + j cs, borrowed for the view's lifetime.
            unsafe { MatRef::from_raw_parts(self.as_ptr(), rows, cols, rs as isize, cs as isize) }
        }
        fn new_owned(
            rows: usize,
            cols: usize,
            fill: impl FnOnce(MatMut<'_, T>) -> Result<()>,
        ) -> Result<nalgebra::DMatrix<T>> {
            let mut m = nalgebra::DMatrix::from_element(rows, cols, T::from_f64(0.0));
            fill(MatrixMut::view_mut(&mut m))?;
            Ok(m)
        }
    }

    impl<T, R, C, S> Matrix for &NMatrix<T, R, C, S>
    where
        T: Scalar + nalgebra::Scalar,
        R: Dim,
        C: Dim,
        S: RawStorage<T, R, C>,
    {
        type Elem = T;
        type Owned = nalgebra::DMatrix<T>;
        fn view(&self) -> MatRef<'_, T> {
            <NMatrix<T, R, C, S> as Matrix>::view(*self)
        }
        fn new_owned(
            rows: usize,
            cols: usize,
            fill: impl FnOnce(MatMut<'_, T>) -> Result<()>,
        ) -> Result<nalgebra::DMatrix<T>> {
            <NMatrix<T, R, C, S> as Matrix>::new_owned(rows, cols, fill)
        }
    }

    impl<T, R, C, S> MatrixMut for NMatrix<T, R, C, S>
    where
        T: Scalar + nalgebra::Scalar,
        R: Dim,
        C: Dim,
        S: RawStorageMut<T, R, C>,
    {
        type Elem = T;
        fn view_mut(&mut self) -> MatMut<'_, T> {
            let (rows, cols) = self.shape();
            let (rs, cs) = self.strides();
            // SAFETY: as for `view`, borrowed mutably; nalgebra's mutable storage never aliases
            // two indices to one element.
            unsafe {
                MatMut::from_raw_parts_mut(self.as_mut_ptr(), rows, cols, rs as isize, cs as isize)
            }
        }
    }

    impl<T, R, C, S> MatrixMut for &mut NMatrix<T, R, C, S>
    where
        T: Scalar + nalgebra::Scalar,
        R: Dim,
        C: Dim,
        S: RawStorageMut<T, R, C>,
    {
        type Elem = T;
        fn view_mut(&mut self) -> MatMut<'_, T> {
            <NMatrix<T, R, C, S> as MatrixMut>::view_mut(*self)
        }
    }
}
