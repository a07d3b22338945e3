//! The kernels of tiled Householder QR, on every backend and precision (PLASMA's tile kernels, in
//! LAPACK's conventions): the QR of a tile ([`Backend::qr_tile`], LAPACK ?geqrt), of a triangle
//! stacked on a tile or on another triangle ([`Backend::qr_stacked`], ?tpqrt with l = 0 or l = n:
//! PLASMA's TSQRT and TTQRT), and the application of their orthogonal factors to other tiles, Q or
//! Q^H from the left ([`Backend::qr_apply`], ?gemqrt: UNMQR; [`Backend::qr_stacked_apply`],
//! ?tpmqrt: TSMQR and TTMQR).
//!
//! **Reflectors.** Each column's reflector is H = I - tau v v^H with H^H [alpha; x] = [beta; 0],
//! beta real (LAPACK ?larfg). A factored tile holds R on and above its diagonal and the reflectors'
//! vectors below it, their unit first entries implied. After a stacked QR the top triangle holds
//! the new R (its strict lower part is left as it was: a tile's own reflectors can live there) and
//! the bottom tile the vectors' lower parts; the vectors' top parts are columns of the identity,
//! never stored. With l = n (two triangles) only the bottom tile's upper triangle is read and
//! written: its strict lower part may hold the reflectors of the bottom tile's own QR.
//!
//! **Block reflectors.** The reflectors come in blocks of `ib` columns (the inner block), each
//! block Q_j = I - V T V^H with T upper triangular (LAPACK ?larft, forward, columnwise). The T's of
//! a tile are stored side by side in an `ib` x k matrix, block j in columns [j ib, j ib + ib) and
//! its first rows (LAPACK's layout for ?geqrt's T), zeros below each block's diagonal: `ib` is the
//! number of rows of the T matrix handed in. Q = Q_1 Q_2 ... : Q^H C applies the blocks in order,
//! each as C <- C - V T^H (V^H C); Q C in reverse order with T.
//!
//! The factorisations work column by column inside an inner block (level 2, on the calling thread)
//! and apply each block to the columns right of it with three products (level 3) on the backend's
//! split kernels (the cluster's threads, see `split`); applications are level 3 throughout. One
//! code for faer and OpenBLAS, over their matrix products.

use faer::linalg::matmul::dot::inner_prod;
use faer::reborrow::{Reborrow, ReborrowMut};
use faer::{ColMut, ColRef, Conj, Mat, MatMut, MatRef, Par, RowMut};

use crate::backend::Backend;
use crate::error::KernelError;
use crate::op::{Op, Stack};
use crate::product::Product;
use crate::scalar::{Scalar, adjoint_conj};

fn conj<T: Scalar>(x: T) -> T {
    faer::traits::ComplexField::conj_impl(&x)
}

fn zero<T: Scalar>() -> T {
    T::from_f64(0.0)
}

/// sqrt(sum of |x_i|^2) without overflow or underflow on the way (scaled by the largest entry).
fn norm2(values: &[f64]) -> f64 {
    if values.iter().any(|v| v.is_nan()) {
        return f64::NAN;
    }
    let scale = values.iter().fold(0.0_f64, |s, &v| s.max(v));
    if scale == 0.0 || !scale.is_finite() {
        return scale;
    }
    scale
        * values
            .iter()
            .map(|v| (v / scale) * (v / scale))
            .sum::<f64>()
            .sqrt()
}

/// ||x||_2 without overflow or underflow on the way (faer's scaled sum of squares, LAPACK ?nrm2's
/// method), as f64.
fn column_norm<T: Scalar>(x: ColRef<'_, T>) -> f64 {
    T::from_real_impl(&x.norm_l2()).re_f64()
}

/// The reflector of `alpha` over `x` (LAPACK ?larfg): on return `alpha` is beta and `x` is v's tail
/// (v = [1; x]); returns tau (0 when there is nothing to annihilate: H = I).
fn reflector<T: Scalar>(alpha: &mut T, mut x: ColMut<'_, T>) -> T {
    let xnorm = column_norm(x.rb());
    let a = alpha.to_c64();
    if xnorm == 0.0 && a.im == 0.0 {
        return zero();
    }
    let mut beta = norm2(&[a.re.abs(), a.im.abs(), xnorm]);
    if a.re >= 0.0 {
        beta = -beta;
    }
    let tau = ((beta - a.re) / beta, -a.im / beta);
    // x <- x / (alpha - beta), by the reciprocal when it is finite.
    let (dr, di) = (a.re - beta, a.im);
    let d2 = dr * dr + di * di;
    let inverse = (dr / d2, -di / d2);
    if inverse.0.is_finite() && inverse.1.is_finite() && d2 > 0.0 {
        let s = T::from_parts(inverse.0, inverse.1);
        for v in x.rb_mut().iter_mut() {
            *v *= s;
        }
    } else {
        let d = T::from_parts(dr, di);
        for v in x.rb_mut().iter_mut() {
            *v /= d;
        }
    }
    *alpha = T::from_parts(beta, 0.0);
    T::from_parts(tau.0, tau.1)
}

/// The T of one block from its reflectors' vectors `v` (dense, r x jb, as they multiply) and their
/// taus (LAPACK ?larft, forward, columnwise): T[c, c] = tau_c, T[..c, c] = -tau_c T[..c, ..c] (V[:,
/// ..c]^H v_c).
fn block_t<T: Scalar>(
    backend: Backend,
    v: MatRef<'_, T>,
    taus: &[T],
) -> Result<Mat<T>, KernelError> {
    let jb = taus.len();
    // Z = V^H V once (level 3); T's columns from it.
    let mut z = Mat::<T>::zeros(jb, jb);
    if v.nrows() > 0 {
        let vhv = Product::new(
            (v.transpose(), adjoint_conj::<T>()),
            (v, faer::Conj::No),
            1.0,
            0.0,
        );
        backend.matmul_seq(vhv, z.as_mut())?;
    }
    Ok(t_from_gram(z.as_ref(), taus))
}

/// The T of one block from its reflectors' Gram matrix Z = V^H V (jb x jb) and their taus (LAPACK
/// ?larft, forward, columnwise).
fn t_from_gram<T: Scalar>(z: MatRef<'_, T>, taus: &[T]) -> Mat<T> {
    let jb = taus.len();
    // Column c: T[..c, c] = -tau_c T[..c, ..c] Z[..c, c], the triangular product one column of T
    // at a time (each an axpy on a contiguous column).
    let mut t = Mat::<T>::zeros(jb, jb);
    for c in 0..jb {
        let (done, mut rest) = t.as_mut().split_at_col_mut(c);
        let mut column = rest.rb_mut().col_mut(0);
        for p in 0..c {
            let scale = -(taus[c] * z[(p, c)]);
            let source = done.rb().col(p).subrows(0, p + 1);
            faer::zip!(column.rb_mut().subrows_mut(0, p + 1), source)
                .for_each(|faer::unzip!(x, y)| *x += *y * scale);
        }
        column[c] = taus[c];
    }
    t
}

/// The T's of a factored panel's block reflectors (`ib` x k, LAPACK's layout for ?geqrt's T) from
/// what a device's ?geqrf leaves: the panel's first k rows `head` (its reflectors' unit lower
/// diagonal blocks, R above them), `below` (`ib` x k: block j's Gram matrix of the reflectors' rows
/// below its diagonal block, V[j0 + jb.., j0..j0 + jb]^H V[j0 + jb.., j0..j0 + jb], in its columns
/// and first rows) and the k `taus`. Each block's Gram matrix is `below`'s plus its diagonal
/// block's D^H D, D unit lower triangular; its T as [`Backend::qr_tile`] makes it.
pub fn reflector_ts<T: Scalar>(
    head: MatRef<'_, T>,
    below: MatRef<'_, T>,
    taus: &[T],
    ib: usize,
) -> Result<Mat<T>, KernelError> {
    const OP: Op = Op::Geqrt;
    let k = taus.len();
    expect_shape(OP, "the panel's head", (head.nrows(), head.ncols()), (k, k))?;
    let ib = inner_block(OP, ib, k)?;
    expect_shape(
        OP,
        "the Gram matrices",
        (below.nrows(), below.ncols()),
        (ib, k),
    )?;
    let mut t = Mat::<T>::zeros(ib, k);
    for j0 in (0..k).step_by(ib) {
        let jb = ib.min(k - j0);
        let d = unit_lower(head.submatrix(j0, j0, jb, jb), 0, jb);
        let mut z = below.submatrix(0, j0, jb, jb).to_owned();
        // Z += D^H D.
        for c in 0..jb {
            for r in 0..jb {
                let rows = r.max(c)..jb;
                let sum = rows.fold(zero::<T>(), |acc, p| acc + conj(d[(p, r)]) * d[(p, c)]);
                z[(r, c)] += sum;
            }
        }
        let block = t_from_gram(z.as_ref(), &taus[j0..j0 + jb]);
        write_t(t.as_mut(), j0, block.as_ref());
    }
    Ok(t)
}

/// Applies H^H = I - conj(tau) v v^H, v = [1; `below_v`] (the 1 at row `top`'s), to the columns
/// `top` (their entries in the row of v's 1) and `below` (their rows of `below_v`), one column at a
/// time (level 2, on the calling thread, no allocation: a panel's columns are short and many): w_j
/// = top_j + below_v^H below_j, x_j = conj(tau) w_j, top_j -= x_j, below_j -= below_v x_j.
fn reflect<T: Scalar>(
    tau: T,
    below_v: ColRef<'_, T>,
    mut top: RowMut<'_, T>,
    mut below: MatMut<'_, T>,
) {
    if tau == zero::<T>() {
        return;
    }
    let scale = conj(tau);
    for j in 0..top.ncols() {
        let mut column = below.rb_mut().col_mut(j);
        let w = top[j] + inner_prod(below_v.transpose(), Conj::Yes, column.rb(), Conj::No);
        let x = scale * w;
        top[j] -= x;
        faer::zip!(column.rb_mut(), below_v).for_each(|faer::unzip!(c, v)| *c -= *v * x);
    }
}

/// Block `j0 .. j0 + jb` of a tile's T matrix, as a dense upper triangular jb x jb matrix.
fn read_t<T: Scalar>(t: MatRef<'_, T>, j0: usize, jb: usize) -> Mat<T> {
    let mut block = Mat::zeros(jb, jb);
    block
        .as_mut()
        .copy_from_triangular_upper(t.submatrix(0, j0, jb, jb));
    block
}

/// Stores `block` (jb x jb, upper triangular) as block `j0` of `t`, zeros below it.
fn write_t<T: Scalar>(mut t: MatMut<'_, T>, j0: usize, block: MatRef<'_, T>) {
    let jb = block.ncols();
    for j in 0..jb {
        for i in 0..t.nrows() {
            t[(i, j0 + j)] = if i <= j && i < jb {
                block[(i, j)]
            } else {
                zero()
            };
        }
    }
}

/// Columns `j0 .. j0 + jb` of a factored tile's reflectors from row j0 down, dense: the unit
/// diagonal and the zeros above it written out.
fn unit_lower<T: Scalar>(v: MatRef<'_, T>, j0: usize, jb: usize) -> Mat<T> {
    let rows = v.nrows() - j0;
    let mut dense = Mat::zeros(rows, jb);
    dense
        .as_mut()
        .copy_from_strict_triangular_lower(v.submatrix(j0, j0, rows, jb));
    dense
        .as_mut()
        .diagonal_mut()
        .column_vector_mut()
        .fill(T::from_f64(1.0));
    dense
}

/// Columns `j0 .. j0 + jb` of a stacked QR's bottom reflectors, dense over the rows the last of
/// them covers, zeros where a column covers fewer (a triangle's strict lower part is never read).
fn stacked_lower<T: Scalar>(v: MatRef<'_, T>, stack: Stack, j0: usize, jb: usize) -> Mat<T> {
    let rows = stack.rows(v.nrows(), j0 + jb - 1);
    Mat::from_fn(rows, jb, |r, c| {
        if r < stack.rows(v.nrows(), j0 + c) {
            v[(r, j0 + c)]
        } else {
            zero()
        }
    })
}

/// The first columns of the inner blocks of k reflectors in blocks of `ib`, in the order their
/// block reflectors apply: ascending for Q^H, descending for Q.
fn block_order(k: usize, ib: usize, adjoint: bool) -> Vec<usize> {
    let mut blocks: Vec<usize> = (0..k).step_by(ib).collect();
    if !adjoint {
        blocks.reverse();
    }
    blocks
}

/// The inner block size of a T matrix of `rows` rows, checked.
fn inner_block(op: Op, t_rows: usize, k: usize) -> Result<usize, KernelError> {
    if t_rows == 0 && k > 0 {
        return Err(operands(
            op,
            "T has no rows: its rows are the inner block size".into(),
        ));
    }
    Ok(t_rows.max(1))
}

fn operands(op: Op, reason: String) -> KernelError {
    KernelError::Operands { op, reason }
}

fn expect_shape(
    op: Op,
    what: &str,
    got: (usize, usize),
    want: (usize, usize),
) -> Result<(), KernelError> {
    if got == want {
        Ok(())
    } else {
        Err(operands(
            op,
            format!(
                "{what} is {}x{}, expected {}x{}",
                got.0, got.1, want.0, want.1
            ),
        ))
    }
}

impl Backend {
    /// The body of [`Self::qr_tile`], compiled in this crate for each scalar (see `compiled`).
    pub(crate) fn qr_tile_impl<T: Scalar>(
        self,
        mut a: MatMut<'_, T>,
        mut t: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        const OP: Op = Op::Geqrt;
        self.ensure_available()?;
        let (m, n) = (a.nrows(), a.ncols());
        let k = m.min(n);
        expect_shape(OP, "T", (t.nrows(), t.ncols()), (t.nrows(), k))?;
        let ib = inner_block(OP, t.nrows(), k)?;
        for j0 in (0..k).step_by(ib) {
            let jb = ib.min(k - j0);
            let mut taus = Vec::with_capacity(jb);
            for c in j0..j0 + jb {
                let (mut head, mut below) = a.rb_mut().split_at_row_mut(c + 1);
                let tau = reflector(&mut head[(c, c)], below.rb_mut().col_mut(c));
                // H^H on the block's columns right of c: rows c.. (v = [1; below[:, c]]).
                let w = j0 + jb - c - 1;
                let (left, right) = below.split_at_col_mut(c + 1);
                let top = head.submatrix_mut(c, c + 1, 1, w).row_mut(0);
                reflect(tau, left.rb().col(c), top, right.subcols_mut(0, w));
                taus.push(tau);
            }
            let v = unit_lower(a.rb(), j0, jb);
            let block = block_t(self, v.as_ref(), &taus)?;
            if j0 + jb < n {
                let c = a.rb_mut().submatrix_mut(j0, j0 + jb, m - j0, n - j0 - jb);
                self.apply_block(v.as_ref(), block.as_ref(), None, c, true, par)?;
            }
            write_t(t.rb_mut(), j0, block.as_ref());
        }
        Ok(())
    }

    /// The body of [`Self::qr_apply`], compiled in this crate for each scalar (see `compiled`).
    pub(crate) fn qr_apply_impl<T: Scalar>(
        self,
        v: MatRef<'_, T>,
        t: MatRef<'_, T>,
        mut c: MatMut<'_, T>,
        adjoint: bool,
        par: Par,
    ) -> Result<(), KernelError> {
        const OP: Op = Op::Unmqr;
        self.ensure_available()?;
        let (m, k) = (v.nrows(), t.ncols());
        if k > v.ncols().min(m) {
            return Err(operands(
                OP,
                format!(
                    "T has {k} columns, more than the {}x{} tile has reflectors",
                    m,
                    v.ncols()
                ),
            ));
        }
        expect_shape(OP, "C", (c.nrows(), c.ncols()), (m, c.ncols()))?;
        let ib = inner_block(OP, t.nrows(), k)?;
        let order = block_order(k, ib, adjoint);
        for j0 in order {
            let jb = ib.min(k - j0);
            let vb = unit_lower(v, j0, jb);
            let tb = read_t(t, j0, jb);
            let rows = c.nrows() - j0;
            let cb = c.rb_mut().subrows_mut(j0, rows);
            self.apply_block(vb.as_ref(), tb.as_ref(), None, cb, adjoint, par)?;
        }
        Ok(())
    }

    /// The body of [`Self::qr_stacked`], compiled in this crate for each scalar (see `compiled`).
    pub(crate) fn qr_stacked_impl<T: Scalar>(
        self,
        mut r: MatMut<'_, T>,
        mut b: MatMut<'_, T>,
        stack: Stack,
        mut t: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        let op = stack.factor_op();
        self.ensure_available()?;
        let n = r.ncols();
        expect_shape(op, "R", (r.nrows(), r.ncols()), (n, n))?;
        expect_shape(op, "B", (b.nrows(), b.ncols()), (b.nrows(), n))?;
        expect_shape(op, "T", (t.nrows(), t.ncols()), (t.nrows(), n))?;
        let ib = inner_block(op, t.nrows(), n)?;
        let m = b.nrows();
        for j0 in (0..n).step_by(ib) {
            let jb = ib.min(n - j0);
            let mut taus = Vec::with_capacity(jb);
            for c in j0..j0 + jb {
                let rows = stack.rows(m, c);
                let tau = reflector(&mut r[(c, c)], b.rb_mut().col_mut(c).subrows_mut(0, rows));
                // Columns right of c in the block: their rows 0..rows of B cover column c's
                // (a triangle's later columns are longer).
                let w = j0 + jb - c - 1;
                let (left, right) = b.rb_mut().subrows_mut(0, rows).split_at_col_mut(c + 1);
                let top = r.rb_mut().submatrix_mut(c, c + 1, 1, w).row_mut(0);
                reflect(tau, left.rb().col(c), top, right.subcols_mut(0, w));
                taus.push(tau);
            }
            let v = stacked_lower(b.rb(), stack, j0, jb);
            let block = block_t(self, v.as_ref(), &taus)?;
            if j0 + jb < n {
                let cols = n - j0 - jb;
                let top = r.rb_mut().submatrix_mut(j0, j0 + jb, jb, cols);
                let bottom = b.rb_mut().submatrix_mut(0, j0 + jb, v.nrows(), cols);
                self.apply_block(v.as_ref(), block.as_ref(), Some(top), bottom, true, par)?;
            }
            write_t(t.rb_mut(), j0, block.as_ref());
        }
        Ok(())
    }

    /// The body of [`Self::qr_stacked_apply`], compiled in this crate for each scalar (see
    /// `compiled`).
    pub(crate) fn qr_stacked_apply_impl<T: Scalar>(
        self,
        v: MatRef<'_, T>,
        stack: Stack,
        t: MatRef<'_, T>,
        (mut a1, mut a2): (MatMut<'_, T>, MatMut<'_, T>),
        adjoint: bool,
        par: Par,
    ) -> Result<(), KernelError> {
        let op = stack.apply_op();
        self.ensure_available()?;
        let (m, k) = (v.nrows(), t.ncols());
        expect_shape(op, "V", (v.nrows(), v.ncols()), (m, k))?;
        expect_shape(op, "A1", (a1.nrows(), a1.ncols()), (k, a1.ncols()))?;
        expect_shape(op, "A2", (a2.nrows(), a2.ncols()), (m, a1.ncols()))?;
        let ib = inner_block(op, t.nrows(), k)?;
        let order = block_order(k, ib, adjoint);
        for j0 in order {
            let jb = ib.min(k - j0);
            let vb = stacked_lower(v, stack, j0, jb);
            let tb = read_t(t, j0, jb);
            let top = a1.rb_mut().subrows_mut(j0, jb);
            let bottom = a2.rb_mut().subrows_mut(0, vb.nrows());
            self.apply_block(vb.as_ref(), tb.as_ref(), Some(top), bottom, adjoint, par)?;
        }
        Ok(())
    }

    /// One block reflector I - V T V^H (its adjoint I - V T^H V^H when `adjoint`) applied from the
    /// left to C, or, with `top`, to [top; C] where the vectors' top parts are the identity (a
    /// stacked QR's): W = top + V^H C, W <- op(T) W, top -= W, C -= V W.
    fn apply_block<T: Scalar>(
        self,
        v: MatRef<'_, T>,
        t: MatRef<'_, T>,
        top: Option<MatMut<'_, T>>,
        mut c: MatMut<'_, T>,
        adjoint: bool,
        par: Par,
    ) -> Result<(), KernelError> {
        let (jb, cols) = (v.ncols(), c.ncols());
        if cols == 0 || jb == 0 {
            return Ok(());
        }
        let adj = adjoint_conj::<T>();
        let no = faer::Conj::No;
        let mut w = match &top {
            Some(top) => top.rb().to_owned(),
            None => Mat::<T>::zeros(jb, cols),
        };
        if v.nrows() > 0 {
            let beta = if top.is_some() { 1.0 } else { 0.0 };
            let vhc = Product::new((v.transpose(), adj), (c.rb(), no), 1.0, beta);
            self.split_matmul(vhc, w.as_mut(), par)?;
        }
        let mut tw = Mat::<T>::zeros(jb, cols);
        let op_t = if adjoint {
            (t.transpose(), adj)
        } else {
            (t, no)
        };
        self.split_matmul(
            Product::new(op_t, (w.as_ref(), no), 1.0, 0.0),
            tw.as_mut(),
            par,
        )?;
        if let Some(mut top) = top {
            for j in 0..cols {
                for i in 0..jb {
                    top[(i, j)] -= tw[(i, j)];
                }
            }
        }
        if v.nrows() > 0 {
            self.split_matmul(Product::subtract(v, tw.as_ref()), c.rb_mut(), par)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{norm1, random};
    use crate::{c32, c64};

    fn eps<T: Scalar>() -> f64 {
        T::PRECISION.epsilon()
    }

    /// A device panel's T's from its head, its blocks' Gram matrices below their diagonal blocks
    /// and its taus (what `reflector_ts` receives) are the ones the host's QR of the same panel
    /// made, taus being each T block's diagonal.
    fn reflector_ts_case<T: Scalar>(m: usize, n: usize, ib: usize) {
        let mut f = random::<T>(m, n, (m * 13 + n * 3 + ib) as u64);
        let k = m.min(n);
        let ib = ib.min(k).max(1);
        let mut t = Mat::<T>::zeros(ib, k);
        Backend::Faer
            .qr_tile(f.as_mut(), t.as_mut(), Par::Seq)
            .unwrap();
        let taus: Vec<T> = (0..k).map(|c| t[(c % ib, c)]).collect();
        let mut below = Mat::<T>::zeros(ib, k);
        for j0 in (0..k).step_by(ib) {
            let jb = ib.min(k - j0);
            let v = f.as_ref().submatrix(j0 + jb, j0, m - j0 - jb, jb);
            let mut z = below.as_mut().submatrix_mut(0, j0, jb, jb);
            for c in 0..jb {
                for r in 0..jb {
                    z[(r, c)] = (0..v.nrows())
                        .map(|p| conj(v[(p, r)]) * v[(p, c)])
                        .fold(zero(), |a, b| a + b);
                }
            }
        }
        let head = f.as_ref().submatrix(0, 0, k, k);
        let made = reflector_ts(head, below.as_ref(), &taus, ib).unwrap();
        let mut diff = made.clone();
        diff -= &t;
        let error = norm1(diff.as_ref()) / norm1(t.as_ref()).max(1.0);
        assert!(
            error < 50.0 * eps::<T>(),
            "{} {m}x{n} ib {ib}: T's differ by {error:e}",
            T::PRECISION
        );
        let wrong = reflector_ts(head, below.as_ref(), &taus[1..], ib).unwrap_err();
        assert!(wrong.to_string().contains("head"), "{wrong}");
    }

    #[test]
    fn a_device_panels_ts_from_its_gram_matrices_are_the_hosts_in_every_precision() {
        for (m, n, ib) in [
            (60, 24, 8),
            (45, 20, 7),
            (24, 24, 5),
            (9, 4, 32),
            (30, 1, 1),
        ] {
            reflector_ts_case::<f64>(m, n, ib);
            reflector_ts_case::<f32>(m, n, ib);
            reflector_ts_case::<c64>(m, n, ib);
            reflector_ts_case::<c32>(m, n, ib);
        }
    }

    #[test]
    fn the_application_with_its_arguments_is_the_one_of_the_rows_from_the_steps_first() {
        use crate::{AnyMat, KernelArgs};
        let (m, b, ib, first) = (40, 8, 3, 12);
        let mut panel = random::<f64>(m, b, 3);
        let rows = m - first;
        let mut t = Mat::<f64>::zeros(ib, b);
        Backend::Faer
            .qr_tile(
                panel.as_mut().subrows_mut(first, rows),
                t.as_mut(),
                Par::Seq,
            )
            .unwrap();
        let c = random::<f64>(m, 5, 4);
        let mut expected = c.clone();
        let v = panel.as_ref().subrows(first, rows);
        let below = expected.as_mut().subrows_mut(first, rows);
        Backend::Faer
            .qr_apply(v, t.as_ref(), below, true, Par::Seq)
            .unwrap();
        let args = KernelArgs::Reflectors {
            first,
            t: std::sync::Arc::new(AnyMat::D(t.clone())),
        };
        // The whole block column, and a panel that holds only the rows from the step's first.
        for v in [panel.as_ref(), panel.as_ref().subrows(first, rows)] {
            let mut out = AnyMat::D(c.clone());
            Backend::Faer
                .run_any_with(Op::Unmqr, &[f64::any_ref(v)], out.as_mut(), &args, Par::Seq)
                .unwrap();
            assert!(f64::of_any_ref(out.as_ref()).unwrap() == expected.as_ref());
        }
        let mut out = AnyMat::D(c.clone());
        let single = KernelArgs::Reflectors {
            first,
            t: std::sync::Arc::new(AnyMat::S(Mat::zeros(ib, b))),
        };
        let reads = [f64::any_ref(panel.as_ref())];
        let err = (Backend::Faer.run_any_with(Op::Unmqr, &reads, out.as_mut(), &single, Par::Seq))
            .unwrap_err();
        assert!(err.to_string().contains("precision s"), "{err}");
    }

    #[test]
    fn zero_columns_nan_and_bad_shapes() {
        // A zero column gives tau = 0 (H = I) and a zero in R.
        let mut a = Mat::<f64>::zeros(6, 3);
        a[(0, 0)] = 2.0;
        a[(5, 2)] = 1.0;
        let mut t = Mat::<f64>::zeros(2, 3);
        Backend::Faer
            .qr_tile(a.as_mut(), t.as_mut(), Par::Seq)
            .unwrap();
        assert_eq!(t[(0, 1)], 0.0);
        assert_eq!(a[(1, 1)], 0.0);
        // A NaN shows in R.
        let mut a = random::<f64>(5, 5, 3);
        a[(3, 2)] = f64::NAN;
        let mut t = Mat::<f64>::zeros(2, 5);
        Backend::Faer
            .qr_tile(a.as_mut(), t.as_mut(), Par::Seq)
            .unwrap();
        assert!(a[(2, 2)].is_nan());
        let err = Backend::Faer
            .qr_tile(
                Mat::<f64>::zeros(5, 5).as_mut(),
                Mat::<f64>::zeros(2, 4).as_mut(),
                Par::Seq,
            )
            .unwrap_err()
            .to_string();
        assert!(err.contains("T is 2x4, expected 2x5"), "{err}");
        let err = Backend::Faer
            .qr_stacked(
                Mat::<f64>::zeros(4, 4).as_mut(),
                Mat::<f64>::zeros(6, 3).as_mut(),
                Stack::OnTile,
                Mat::<f64>::zeros(2, 4).as_mut(),
                Par::Seq,
            )
            .unwrap_err()
            .to_string();
        assert!(err.contains("B is 6x3, expected 6x4"), "{err}");
        // Entries near overflow: the norm is scaled, R's diagonal is finite.
        let mut a = Mat::<f64>::from_fn(4, 2, |i, j| 1e300 * (1.0 + (i + j) as f64));
        let mut t = Mat::<f64>::zeros(2, 2);
        Backend::Faer
            .qr_tile(a.as_mut(), t.as_mut(), Par::Seq)
            .unwrap();
        assert!(a[(0, 0)].is_finite() && a[(1, 1)].is_finite(), "{:?}", a);
    }
}
