//! Stage 2: the block tridiagonal T of stage 1 factored by LU with partial pivoting in block steps
//! (LAPACK's ?gbtrf with the band's blocks: what ?sytrf_aa_2stage does), its solves and
//! determinant, and T's inertia (Sylvester's law makes it A's).
//!
//! Step k factors the panel of block rows k and k+1 in block column k; its interchanges stay within
//! those rows, so U gains one block of fill: block row k of U spans block columns k, k+1 and k+2.
//! The rows of step k+1 are the updated block row k+1 (carried, with a zero block for column k+3)
//! and T's block row k+2. Each step is a task of stage 1's graph ([`BandLu::step`],
//! `Op::LdltBand`), the factor made of the steps when the run ends ([`BandLu::from_steps`]).

use faer::linalg::matmul::matmul;
use faer::linalg::triangular_solve::{
    solve_unit_lower_triangular_in_place, solve_upper_triangular_in_place,
};
use faer::reborrow::*;
use faer::{Accum, Mat, MatMut, MatRef, Par};
use hetla_kernels::{Backend, Scalar, c64, swap_rows};

use super::aasen::Blocks;
use crate::Result;

/// One block step: the panel's LU (rows k and k+1 by column k: L's unit lower trapezoid below the
/// diagonal, U(k, k) on and above it), its interchanges (local to the two block rows), and U's
/// block row k right of the diagonal block (columns k+1 and k+2).
#[derive(Debug, Clone)]
struct Step<T> {
    panel: Mat<T>,
    swaps: Vec<usize>,
    right: Mat<T>,
}

/// T = P L U, in block steps (see the module documentation).
#[derive(Debug, Clone)]
pub(crate) struct BandLu<T> {
    blocks: Blocks,
    steps: Vec<Step<T>>,
    /// The first column whose pivot is exactly zero, if any (LAPACK's info - 1).
    pub singular: Option<usize>,
}

/// The blocks of T a block step reads: T(k, k) (only step 0 reads it: later steps have it, updated,
/// in the previous step's carry), T(k+1, k), T(k+1, k+1) and T(k+2, k+1), those below and right of
/// the last block absent.
pub(crate) struct StepBlocks<'a, T> {
    pub diag: MatRef<'a, T>,
    pub sub: Option<MatRef<'a, T>>,
    pub next_diag: Option<MatRef<'a, T>>,
    pub next_sub: Option<MatRef<'a, T>>,
}

/// What block step k leaves: its part of the factor, the first exactly zero pivot among its columns
/// (a column of T), and block row k+1 as the step has updated it, from column k+1 on (the next
/// step's first block row).
#[derive(Debug)]
pub(crate) struct Stepped<T> {
    step: Step<T>,
    zero: Option<usize>,
    pub carry: Mat<T>,
}

impl<T: Scalar> BandLu<T> {
    /// Block step k of T's LU (see the module documentation): `carry` is what step k - 1 left
    /// (`None` for step 0), `t` the blocks of T it reads. The steps run in order; the graph of
    /// [`Algorithm::Ldlt`](crate::Algorithm::Ldlt) runs each as a task as soon as its blocks of T
    /// are made.
    pub fn step(
        blocks: Blocks,
        k: usize,
        carry: Option<&Mat<T>>,
        t: StepBlocks<'_, T>,
        backend: Backend,
        par: Par,
    ) -> Result<Stepped<T>> {
        let count = blocks.count();
        let size = |k: usize| if k < count { blocks.size(k) } else { 0 };
        let (top, bottom) = (size(k), size(k + 1));
        let width = top + bottom + size(k + 2);
        let mut m = Mat::<T>::zeros(top + bottom, width);
        match carry {
            Some(carry) => m.as_mut().submatrix_mut(0, 0, top, width).copy_from(carry),
            None => {
                m.as_mut().submatrix_mut(0, 0, top, top).copy_from(t.diag);
                if let Some(sub) = t.sub {
                    m.as_mut()
                        .submatrix_mut(0, top, top, bottom)
                        .copy_from(sub.adjoint());
                }
            }
        }
        if let (Some(sub), Some(next)) = (t.sub, t.next_diag) {
            let mut row = m.as_mut().subrows_mut(top, bottom);
            row.rb_mut().subcols_mut(0, top).copy_from(sub);
            row.rb_mut().subcols_mut(top, bottom).copy_from(next);
            if let Some(next_sub) = t.next_sub {
                row.subcols_mut(top + bottom, size(k + 2))
                    .copy_from(next_sub.adjoint());
            }
        }
        let mut swaps = vec![0; top];
        let zero = backend.lu_panel(m.as_mut().subcols_mut(0, top), &mut swaps, par)?;
        let (left, mut rest) = m.as_mut().split_at_col_mut(top);
        swap_rows(rest.rb_mut(), &swaps);
        let (mut u_row, below) = rest.split_at_row_mut(top);
        let (l11, l21) = left.rb().split_at_row(top);
        solve_unit_lower_triangular_in_place(l11, u_row.rb_mut(), par);
        matmul(below, Accum::Add, l21, u_row.rb(), T::from_f64(-1.0), par);
        // The next step's first block row: block row k+1 from column k+1 on, and a zero block for
        // column k+3.
        let mut carry = Mat::<T>::zeros(bottom, bottom + size(k + 2) + size(k + 3));
        carry
            .as_mut()
            .subcols_mut(0, bottom + size(k + 2))
            .copy_from(m.as_ref().submatrix(top, top, bottom, bottom + size(k + 2)));
        Ok(Stepped {
            step: Step {
                panel: m.as_ref().subcols(0, top).to_owned(),
                swaps,
                right: m.as_ref().submatrix(0, top, top, width - top).to_owned(),
            },
            zero: zero.map(|c| blocks.start(k) + c),
            carry,
        })
    }

    /// The factor of T from its block steps, in order.
    pub fn from_steps(blocks: Blocks, stepped: Vec<Stepped<T>>) -> Self {
        let singular = stepped.iter().find_map(|s| s.zero);
        Self {
            blocks,
            steps: stepped.into_iter().map(|s| s.step).collect(),
            singular,
        }
    }

    /// X <- T^-1 X (T nonsingular: the caller checks [`BandLu::singular`]).
    pub fn solve(&self, mut x: MatMut<'_, T>, par: Par) {
        let b = &self.blocks;
        for (k, step) in self.steps.iter().enumerate() {
            let top = b.size(k);
            let rows = step.panel.nrows();
            let mut xk = x.rb_mut().subrows_mut(b.start(k), rows);
            swap_rows(xk.rb_mut(), &step.swaps);
            let (l11, l21) = step.panel.as_ref().split_at_row(top);
            let (mut head, tail) = xk.split_at_row_mut(top);
            solve_unit_lower_triangular_in_place(l11, head.rb_mut(), par);
            matmul(tail, Accum::Add, l21, head.rb(), T::from_f64(-1.0), par);
        }
        for (k, step) in self.steps.iter().enumerate().rev() {
            let (start, top) = (b.start(k), b.size(k));
            let (mut head, after) = x
                .rb_mut()
                .subrows_mut(start, b.n - start)
                .split_at_row_mut(top);
            let cols = step.right.ncols();
            if cols > 0 {
                let known = after.rb().subrows(0, cols);
                matmul(
                    head.rb_mut(),
                    Accum::Add,
                    step.right.as_ref(),
                    known,
                    T::from_f64(-1.0),
                    par,
                );
            }
            let u = step.panel.as_ref().subrows(0, top);
            solve_upper_triangular_in_place(u, head, par);
        }
    }

    /// log |det T| and the sign of det T (T Hermitian: its determinant is real): 0 with a zero
    /// pivot, when the logarithm is minus infinity.
    pub fn log_abs_det(&self) -> (f64, f64) {
        let mut log = 0.0;
        let mut phase = c64::new(1.0, 0.0);
        for (k, step) in self.steps.iter().enumerate() {
            for i in 0..self.blocks.size(k) {
                let u = step.panel[(i, i)].to_c64();
                let modulus = u.norm();
                if modulus == 0.0 {
                    return (f64::NEG_INFINITY, 0.0);
                }
                log += modulus.ln();
                phase *= u / modulus;
                if step.swaps[i] != i {
                    phase = -phase;
                }
            }
        }
        (log, phase.re.signum())
    }
}

/// The inertia of a matrix: its counts of positive, negative and zero eigenvalues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inertia {
    /// Positive eigenvalues.
    pub positive: usize,
    /// Negative eigenvalues.
    pub negative: usize,
    /// Zero eigenvalues (within a rounding of the matrix's scale: |lambda| <= eps ||A||_1).
    pub zero: usize,
}

/// The signs of the block tridiagonal Hermitian T's eigenvalues (diagonal blocks `diag`,
/// subdiagonal blocks `sub`), as the sum of its Schur complements' (Haynsworth): S_0 = T(0, 0), S_k
/// = T(k, k) - T(k, k-1) S_{k-1}^-1 T(k, k-1)^H, each by its eigenvalues; only an exactly zero one
/// counts as zero (the caller has decided A has none). When a complement is nearly singular (its
/// smallest eigenvalue below sqrt(eps) times its largest), the recursion would lose the signs it
/// counts, and they are T's eigenvalues' instead (dense: O(n^3)).
pub(crate) fn inertia<T: Scalar>(
    blocks: Blocks,
    diag: &[Mat<T>],
    sub: &[Mat<T>],
) -> Result<Inertia> {
    let eps = T::PRECISION.epsilon();
    let mut counts = Inertia {
        positive: 0,
        negative: 0,
        zero: 0,
    };
    let Some(first) = diag.first() else {
        return Ok(counts);
    };
    let mut s = widen(first.as_ref());
    for k in 0..diag.len() {
        let Some((values, v)) = hetla_kernels::hermitian_eigen(s.as_ref()) else {
            return dense_inertia(blocks, diag, sub);
        };
        let largest = values.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
        let smallest = values.iter().fold(f64::INFINITY, |m, v| m.min(v.abs()));
        if k + 1 < diag.len() && smallest <= eps.sqrt() * largest {
            return dense_inertia(blocks, diag, sub);
        }
        count(&values, 0.0, &mut counts);
        if k + 1 == diag.len() {
            break;
        }
        // S_{k+1} = T(k+1, k+1) - T(k+1, k) V Lambda^-1 V^H T(k+1, k)^H.
        let c = widen(sub[k].as_ref());
        let cv = &c * &v;
        let scaled = Mat::<c64>::from_fn(cv.nrows(), cv.ncols(), |i, j| cv[(i, j)] / values[j]);
        let mut next = widen(diag[k + 1].as_ref());
        matmul(
            next.as_mut(),
            Accum::Add,
            scaled.as_ref(),
            cv.adjoint(),
            c64::new(-1.0, 0.0),
            Par::Seq,
        );
        super::aasen::hermitian_part(next.as_mut());
        s = next;
    }
    Ok(counts)
}

/// `m` in c64, the precision the inertia's eigensolvers and factorisations run in.
fn widen<T: Scalar>(m: MatRef<'_, T>) -> Mat<c64> {
    Mat::from_fn(m.nrows(), m.ncols(), |i, j| m[(i, j)].to_c64())
}

/// T's inertia from the eigenvalues of T assembled dense.
fn dense_inertia<T: Scalar>(blocks: Blocks, diag: &[Mat<T>], sub: &[Mat<T>]) -> Result<Inertia> {
    let mut t = Mat::<c64>::zeros(blocks.n, blocks.n);
    for (k, d) in diag.iter().enumerate() {
        let s = blocks.start(k);
        for j in 0..d.ncols() {
            for i in 0..d.nrows() {
                t[(s + i, s + j)] = d[(i, j)].to_c64();
            }
        }
        if let Some(c) = sub.get(k) {
            let below = blocks.start(k + 1);
            for j in 0..c.ncols() {
                for i in 0..c.nrows() {
                    let x = c[(i, j)].to_c64();
                    t[(below + i, s + j)] = x;
                    t[(s + j, below + i)] = x.conj();
                }
            }
        }
    }
    eigen_inertia(t, "eigenvalues of T", 0.0)
}

/// The inertia of the Hermitian matrix whose lower triangle is `a`'s, from its eigenvalues (in
/// double precision, O(n^3)), those of modulus at most `tolerance` counted as zeros.
pub(crate) fn hermitian_inertia<T: Scalar>(a: MatRef<'_, T>, tolerance: f64) -> Result<Inertia> {
    eigen_inertia(widen(a), "eigenvalues of A", tolerance)
}

/// The inertia of `m` (its lower triangle read) from its eigenvalues; `what` names them in the
/// error of an eigensolver that does not converge.
fn eigen_inertia(m: Mat<c64>, what: &'static str, tolerance: f64) -> Result<Inertia> {
    let values = hetla_kernels::hermitian_eigenvalues(m.as_ref())
        .ok_or(crate::Error::NoConvergence { what })?;
    let mut counts = Inertia {
        positive: 0,
        negative: 0,
        zero: 0,
    };
    count(&values, tolerance, &mut counts);
    Ok(counts)
}

/// Adds the signs of `values` to `counts`, those of modulus at most `tolerance` as zeros.
fn count(values: &[f64], tolerance: f64, counts: &mut Inertia) {
    for &v in values {
        if v.abs() <= tolerance {
            counts.zero += 1;
        } else if v > 0.0 {
            counts.positive += 1;
        } else {
            counts.negative += 1;
        }
    }
}
