//! Mixed-precision solves: factor in single precision, refine in double (LAPACK's dsposv and
//! zcposv, MAGMA's and SLATE's `posv_mixed`).
//!
//! The matrix is rounded to single precision ([`Refinable::Low`]: `f32` for `f64`, `c32` for `c64`)
//! and factored there by the tiled Cholesky, at single precision's rate. The solution of the low
//! factor is then refined in double: each step computes the residual R = B - A X on the original
//! matrix in double (its lower triangle, as the factorisation reads it), solves A D = R with the
//! low factor, and adds D to X. Once every column's residual satisfies ||r||_max <=
//! ||x||_max ||A||_inf sqrt(n) eps (dsposv's test, eps of double), it goes on while a step at least
//! halves the largest residual, so that the backward error reaches that of a solve in double rather
//! than stopping at the test's bound; it returns the solution with the smallest residual, and gives
//! up when the test is not met after [`MAX_ITERATIONS`] steps.
//!
//! Where classical refinement stalls or diverges (no smaller residual in 3 steps before the test is
//! met: condition numbers beyond about 1/eps of single), GMRES-IR takes over (Carson and Higham;
//! [`crate::gmres`]): each step solves A D = R by GMRES preconditioned with the low factor widened
//! to double, within a budget of 20 GMRES steps a column (about the memory traffic of dsgesv's 30
//! classical steps). Where the low Cholesky factorisation meets a non-positive pivot, the factor of
//! A with its diagonal raised by a few ulps of single (Higham and Pranesh) preconditions GMRES-IR
//! on A itself.
//!
//! It falls back to a factorisation in double, and says so in [`Refinement::path`], when: an entry
//! of A does not fit the low precision (overflow), the low factorisation fails (an exactly zero
//! pivot of LU; a non-positive pivot of Cholesky, also with its diagonal raised), or neither
//! refinement converges.
//!
//! Where it runs: on the platform's workers, refined on the host; or, on a platform with a GPU
//! whose budget holds A in double and the single factor, refined on that GPU
//! ([`Refinement::device`]): A is written into its memory once (or copied within it, for a matrix
//! already there), the single factor made and kept there (`cholesky/device.rs`, `lu/device.rs`;
//! their shared preparation, `device.rs`), and each step's residual (a GEMM on the resident A) and
//! solves (with the resident factor) run there, only the vectors crossing to the host, where their
//! precision changes.

use faer::{Mat, MatRef};
use hetla_kernels::{Op, Precision, Scalar, c32, c64};

use crate::check::{check_finite, check_hermitian_lower};
use crate::interop::Matrix;
use crate::run::direct;

pub(crate) mod device;
use crate::{Cholesky, Error, Result};

/// The most refinement steps before falling back to double (dsposv's ITERMAX).
pub const MAX_ITERATIONS: usize = 30;

/// A double precision with a single precision to factor in: `f64` (with `f32`) and `c64` (with
/// `c32`).
pub trait Refinable: Scalar {
    /// The single precision of the same kind.
    type Low: Scalar;
    /// `self` rounded to the low precision (infinite when it overflows).
    fn lower(self) -> Self::Low;
    /// The low value, widened exactly.
    fn widen(low: Self::Low) -> Self;
}

impl Refinable for f64 {
    type Low = f32;
    fn lower(self) -> f32 {
        self as f32
    }
    fn widen(low: f32) -> f64 {
        f64::from(low)
    }
}

impl Refinable for c64 {
    type Low = c32;
    fn lower(self) -> c32 {
        c32::new(self.re as f32, self.im as f32)
    }
    fn widen(low: c32) -> c64 {
        c64::new(f64::from(low.re), f64::from(low.im))
    }
}

/// Which way a refined solve went.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "path", rename_all = "snake_case")]
pub enum RefinementPath {
    /// Factored in single precision, refined to double accuracy.
    Mixed,
    /// Factored in the working precision and refined in it, residuals included (LAPACK's ?syrfs:
    /// the symmetric indefinite solve, [`crate::LdltFactor::solve_refined`]).
    Working,
    /// Refined in the working precision with the symmetric indefinite factor until its steps
    /// stalled above LAPACK's backward error, then solved by a Bunch-Kaufman factorisation of A in
    /// double precision and refined with it ([`crate::LdltFactor::solve_refined`]).
    BunchKaufman {
        /// The backward error ||A x - b||_1 / (||A||_1 ||x||_1), in units of the working
        /// precision's eps, at which the first factor's refinement stalled.
        stalled_at: f64,
    },
    /// Factored in single precision and refined to double accuracy by GMRES-IR, classical
    /// refinement having stalled: each step solves A D = R by GMRES preconditioned with the factor
    /// widened to double (Carson and Higham's GMRES-IR; [`Refinement::iterations`] counts the
    /// classical steps and these).
    GmresIr {
        /// GMRES steps (products with A) over every refinement step and column.
        gmres_steps: usize,
        /// How far the low Cholesky factorisation's diagonal was raised, in units of the low
        /// precision's eps times each diagonal entry, where the factorisation of A itself met a
        /// non-positive pivot (then classical refinement is not tried); 0: not raised.
        shift: f64,
    },
    /// Factored in double after the mixed path failed, for this reason.
    Fallback {
        /// Why single precision was not enough.
        reason: String,
    },
}

/// What a mixed-precision solve did.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Refinement {
    /// The path taken.
    #[serde(flatten)]
    pub path: RefinementPath,
    /// Refinement steps done in the mixed path (before a fallback, when there was one), or in the
    /// working precision.
    pub iterations: usize,
    /// The precision the matrix was factored in last.
    pub factored_in: Precision,
    /// Seconds of the factorisation in the low precision (every attempt: a raised diagonal's too),
    /// where the solve made one (not the fallback's in double); `None` where it made none (an entry
    /// that overflows the low precision, or the refinement of a factor given, as
    /// [`crate::LdltFactor::solve_refined`]'s). What tensor cores speed up, beside the solve's
    /// whole time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub factor_seconds: Option<f64>,
    /// The GPU the single factorisation and its refinement ran on, A and the factor kept in its
    /// memory (each step's residual and solves made there: [`Cholesky::solve_refined`] on a
    /// platform with a GPU whose budget holds them, [`Cholesky::solve_refined_device`]); `None`
    /// (null in JSON): on the platform's workers, refined on the host. A fallback's factorisation
    /// in double runs where the matrix is: on the platform's workers for a host matrix, on the GPU
    /// for a device one.
    pub device: Option<usize>,
}

impl Cholesky {
    /// Solves A X = B (A Hermitian positive definite, its lower triangle read) to double accuracy,
    /// factoring in single precision when that suffices: the solution and what was done (LAPACK's
    /// dsposv and zcposv, MAGMA's and SLATE's `posv_mixed`).
    ///
    /// The matrix is rounded to single precision ([`Refinable::Low`]: `f32` for `f64`, `c32` for
    /// `c64`) and factored there by the tiled Cholesky, at single precision's rate. The solution of
    /// the low factor is then refined in double: each step computes the residual R = B - A X on the
    /// original matrix in double (its lower triangle, as the factorisation reads it), solves A D =
    /// R with the low factor, and adds D to X. Once every column's residual satisfies ||r||_max
    /// <= ||x||_max ||A||_inf sqrt(n) eps (dsposv's test, eps of double), it goes on while a step
    /// at least halves the largest residual, so that the backward error reaches that of a solve in
    /// double; it returns the solution with the smallest residual, and gives up when the test is
    /// not met after 30 steps (dsposv's ITERMAX).
    ///
    /// Where classical refinement stalls, GMRES preconditioned by the factor widened to double
    /// refines instead (GMRES-IR, [`RefinementPath::GmresIr`]); where the low factorisation meets a
    /// non-positive pivot, the factor of A with its diagonal raised by a few ulps of single
    /// preconditions it. It falls back to a factorisation in double, and says so in
    /// [`Refinement::path`], when: an entry of A does not fit the low precision (overflow), the low
    /// factorisation fails also with its diagonal raised, or neither refinement converges (GMRES-IR
    /// within its budget of 20 GMRES steps a column).
    ///
    /// On a platform with a GPU (the one [`Cholesky::resident`] names, else the first) whose budget
    /// holds A in double, the single factor and a run's copies of either (about (3 x 8 + 4) n^2
    /// bytes for f64), the whole solve runs there ([`Refinement::device`]): A is written into the
    /// GPU's memory once, the single factor is made there (on the GPU alone, with the run's tensor
    /// math) and kept, and each step's residual and solves run there, only the vectors crossing to
    /// the host. Otherwise it factors on the platform's workers and refines on the host.
    ///
    /// Any [`Matrix`] (faer's, ndarray's, nalgebra's): X comes back in `b`'s kind of matrix.
    ///
    /// ```
    /// use faer::Mat;
    /// let n = 300;
    /// let a = Mat::from_fn(n, n, |i, j| if i == j { 4.0 } else { 1.0 / (1.0 + (i + j) as f64) });
    /// let b = Mat::<f64>::ones(n, 2);
    /// let (x, how) = hetla::Cholesky::new().solve_refined(a.as_ref(), b.as_ref())?;
    /// assert_eq!(how.path, hetla::RefinementPath::Mixed);
    /// assert!(how.iterations <= 10);
    /// # Ok::<(), hetla::Error>(())
    /// ```
    pub fn solve_refined<A, B>(&self, a: A, b: B) -> Result<(B::Owned, Refinement)>
    where
        A: Matrix,
        A::Elem: Refinable,
        B: Matrix<Elem = A::Elem>,
    {
        let (x, how) = self.refined(a.view(), b.view())?;
        Ok((B::owned_copy(x.as_ref())?, how))
    }

    fn refined<T: Refinable>(
        &self,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
    ) -> Result<(Mat<T>, Refinement)> {
        let n = a.nrows();
        crate::check::check_system("A", (n, a.ncols()), b.nrows())?;
        check_hermitian_lower("A", a)?;
        check_finite("B", b)?;
        let platform = self.resolve_platform()?;
        let cluster = self.clone().platform(platform.clone());
        if let Some(gpu) = self.refinement_gpu::<T>(&platform, a.nrows(), b.ncols()) {
            return cluster.refined_on_device(gpu, a, b);
        }
        let (low, overflow, norm) = lowered_lower(a);
        let system = System {
            b,
            norm,
            overflow: overflow.map(|(i, j)| (i, j, a[(i, j)].abs_f64())),
        };
        let mut first = Some(low);
        let factor_low = || {
            let attempt = |shift: f64| match first.take() {
                Some(low) if shift == 0.0 => cluster.factor_owned(low),
                _ => cluster.factor_owned(raised_lower(a, shift)),
            };
            let (factor, shift) = match factor_or_shift::<T, _>(attempt)? {
                Ok(found) => found,
                Err(reason) => return Ok(Err(reason)),
            };
            let factor = std::rc::Rc::new(factor);
            let (low, wide) = (factor.clone(), std::cell::OnceCell::new());
            let precondition = move |x: faer::MatMut<'_, T>| {
                let wide = wide.get_or_init(|| factor.converted(T::widen));
                wide.solve_in_place(x)
            };
            let solve_low = move |r: MatRef<'_, T::Low>| low.solve(r);
            Ok(Ok(LowFactor {
                solve_low,
                precondition,
                shift,
            }))
        };
        mixed_solve(
            system,
            factor_low,
            |x, b| residual(&platform, a, x, b),
            || cluster.factor(a)?.solve(b),
        )
    }
}

/// `gpu`, where the platform has it and its budget holds `copies` matrices of order `n` in the
/// working precision, the single factor and four n x `rhs` blocks of vectors (a mixed solve refined
/// on the GPU: A, its copies or the factor widened, the factor); else `None`.
pub(crate) fn gpu_holding<T: Refinable>(
    platform: &hetla_runtime::Platform,
    gpu: usize,
    (n, rhs): (usize, usize),
    copies: usize,
) -> Option<usize> {
    let worker = platform.devices().get(gpu)?;
    (refinement_bytes::<T>((n, rhs), copies)? <= worker.device.budget()).then_some(gpu)
}

/// The bytes [`gpu_holding`] asks a GPU's budget for (`None`: beyond `usize`).
pub(crate) fn refinement_bytes<T: Refinable>(
    (n, rhs): (usize, usize),
    copies: usize,
) -> Option<usize> {
    let (wide, low) = (T::PRECISION.bytes(), T::Low::PRECISION.bytes());
    n.checked_mul(n)?
        .checked_mul(copies * wide + low)?
        .checked_add(4 * n * rhs * wide)
}

/// The shifts tried, in units of the low precision's eps times each diagonal entry, when the low
/// Cholesky factorisation of A meets a non-positive pivot (Higham and Pranesh's remedy: the factor
/// of A + D, D diagonal and small, preconditions GMRES-IR on A itself).
const SHIFTS: [f64; 2] = [8.0, 256.0];

/// The low Cholesky factor of A by `attempt`(0) (A rounded to the low precision), and the shift 0;
/// where it meets a non-positive pivot, the factor by `attempt`(shift) of A with its diagonal
/// raised by the first of [`SHIFTS`] with which it is positive definite, and that shift; else why
/// none is (`Err`). `attempt` factors on the platform's workers or on a GPU (the refinement there).
pub(crate) fn factor_or_shift<T: Refinable, F>(
    mut attempt: impl FnMut(f64) -> Result<F>,
) -> Result<std::result::Result<(F, f64), String>> {
    let column = match attempt(0.0) {
        Ok(found) => return Ok(Ok((found, 0.0))),
        Err(Error::NotPositiveDefinite { column }) => column,
        Err(other) => return Err(other),
    };
    for shift in SHIFTS {
        match attempt(shift) {
            Ok(found) => return Ok(Ok((found, shift))),
            Err(Error::NotPositiveDefinite { .. }) => continue,
            Err(other) => return Err(other),
        }
    }
    Ok(Err(format!(
        "the {} factorisation met a non-positive pivot at column {column}, and again with its \
         diagonal raised by up to {} ulps",
        T::Low::PRECISION,
        SHIFTS.last().copied().unwrap_or(0.0)
    )))
}

/// The factor the real part of each diagonal entry of A is multiplied by before its rounding, for a
/// diagonal raised by `shift` units of the low precision's eps ([`SHIFTS`]; 1 for none).
pub(crate) fn raise_factor<T: Refinable>(shift: f64) -> f64 {
    1.0 + shift * T::Low::PRECISION.epsilon()
}

/// The lower triangle of A rounded to the low precision with its diagonal raised by `shift`
/// ([`raise_factor`]).
pub(crate) fn raised_lower<T: Refinable>(a: MatRef<'_, T>, shift: f64) -> Mat<T::Low> {
    let (mut low, _, _) = lowered_lower(a);
    let factor = raise_factor::<T>(shift);
    for i in 0..low.nrows() {
        low[(i, i)] = T::from_f64(a[(i, i)].re_f64() * factor).lower();
    }
    low
}

/// A low-precision factorisation as a mixed solve uses it: its solve in the low precision, its
/// solve widened to the working one (GMRES-IR's preconditioner), and the shift its diagonal needed
/// ([`SHIFTS`]; 0 when none: then classical refinement is tried first).
pub(crate) struct LowFactor<S, P> {
    pub solve_low: S,
    pub precondition: P,
    pub shift: f64,
}

/// The system of a mixed-precision solve: B, ||A||_inf, and the first entry of A that overflowed
/// the low precision (row, column, modulus).
pub(crate) struct System<'a, T> {
    pub b: MatRef<'a, T>,
    pub norm: f64,
    pub overflow: Option<(usize, usize, f64)>,
}

/// A mixed-precision solve of either factorisation, as the module doc describes it: `factor_low`
/// factors the rounded A and returns its solve and its solve widened to double (GMRES-IR's
/// preconditioner), or why the low precision is not enough; `residual(x, b)` is B - A X in double;
/// `solve_full` solves in double (the fallback).
pub(crate) fn mixed_solve<T: Refinable, S, P>(
    System { b, norm, overflow }: System<'_, T>,
    factor_low: impl FnOnce() -> Result<std::result::Result<LowFactor<S, P>, String>>,
    residual: impl Fn(MatRef<'_, T>, MatRef<'_, T>) -> Result<Mat<T>>,
    solve_full: impl FnOnce() -> Result<Mat<T>>,
) -> Result<(Mat<T>, Refinement)>
where
    S: Fn(MatRef<'_, T::Low>) -> Result<Mat<T::Low>>,
    P: Fn(faer::MatMut<'_, T>) -> Result<()>,
{
    let mut iterations = 0;
    let factor_seconds = std::cell::Cell::new(None);
    let low = |path, iterations| Refinement {
        path,
        iterations,
        factored_in: T::Low::PRECISION,
        factor_seconds: factor_seconds.get(),
        device: None,
    };
    let residual_of_b = |x: MatRef<'_, T>| residual(x, b);
    let factor_timed = || {
        let start = std::time::Instant::now();
        let factored = factor_low();
        factor_seconds.set(Some(start.elapsed().as_secs_f64()));
        factored
    };
    let reason = match overflow {
        Some((i, j, modulus)) => {
            format!("A({i}, {j}) = {modulus:e} overflows {}", T::Low::PRECISION)
        }
        None => match factor_timed()? {
            Err(reason) => reason,
            Ok(LowFactor {
                solve_low,
                precondition,
                shift,
            }) => {
                let classical =
                    |r: MatRef<'_, T>| Ok(Some(widened(solve_low(lowered(r).as_ref())?.as_ref())));
                // A shifted factor is a preconditioner, not a solve of A: GMRES-IR alone.
                if shift == 0.0 {
                    match refine(b, (norm, MAX_ITERATIONS), classical, residual_of_b)? {
                        Ok((x, steps)) => return Ok((x, low(RefinementPath::Mixed, steps))),
                        Err(steps) => iterations = steps,
                    }
                }
                let gmres_steps = std::cell::Cell::new(0);
                let zero = Mat::<T>::zeros(b.nrows(), 1);
                let product = |v: MatRef<'_, T>| Ok(-residual(v, zero.as_ref())?);
                let budget = GMRES_BUDGET * b.ncols();
                let correct = |r: MatRef<'_, T>| {
                    let left = budget.saturating_sub(gmres_steps.get());
                    if left < r.ncols() {
                        return Ok(None);
                    }
                    let mut d = Mat::<T>::zeros(r.nrows(), r.ncols());
                    for j in 0..r.ncols() {
                        let column = r.subcols(j, 1);
                        let most = GMRES_MOST.min(left / r.ncols());
                        let inner = (GMRES_TOLERANCE, most);
                        let (dj, done) =
                            crate::gmres::gmres(column, &product, &precondition, inner)?;
                        d.as_mut().subcols_mut(j, 1).copy_from(&dj);
                        gmres_steps.set(gmres_steps.get() + done.iterations);
                    }
                    Ok(Some(d))
                };
                match refine(b, (norm, GMRES_IR_STEPS), correct, residual_of_b)? {
                    Ok((x, steps)) => {
                        let path = RefinementPath::GmresIr {
                            gmres_steps: gmres_steps.get(),
                            shift,
                        };
                        return Ok((x, low(path, iterations + steps)));
                    }
                    Err(steps) => {
                        iterations += steps;
                        let before = if shift == 0.0 {
                            "classical refinement stalled or diverged, and".to_owned()
                        } else {
                            format!(
                                "the {} factorisation met a non-positive pivot, and with its \
                                 diagonal raised {shift} ulps,",
                                T::Low::PRECISION
                            )
                        };
                        format!(
                            "the refinement did not converge: {before} GMRES-IR did not converge \
                             in {GMRES_IR_STEPS} steps of at most {GMRES_BUDGET} GMRES steps a \
                             column in all"
                        )
                    }
                }
            }
        },
    };
    let how = Refinement {
        path: RefinementPath::Fallback { reason },
        iterations,
        factored_in: T::PRECISION,
        factor_seconds: factor_seconds.get(),
        device: None,
    };
    Ok((solve_full()?, how))
}

/// The most steps of GMRES-IR after classical refinement stalled.
pub const GMRES_IR_STEPS: usize = 10;
/// The fall of the preconditioned residual at which GMRES-IR's inner GMRES stops.
const GMRES_TOLERANCE: f64 = 1e-6;
/// The most GMRES steps a column of one GMRES-IR step takes.
const GMRES_MOST: usize = 50;

/// The most GMRES steps GMRES-IR spends on a column before it falls back to double. Each step reads
/// A and the widened factor (three passes over n^2 doubles, memory-bound: about 20 ms at n = 3000
/// on the 2 cores of Zen 4 this was measured on), so that a failed attempt costs about what
/// dsgesv's 30 classical steps (ITERMAX) of single solves cost before GMRES-IR (there about 0.4 s,
/// 1.3x the factorisation in double).
const GMRES_BUDGET: usize = 20;

/// The refinement of a solve in double (see the module doc): from X = 0, X += `correct`(R) with R =
/// `residual`(X) = B - A X, until dsposv's test with ||A||_inf = `norm` is met and a step no longer
/// halves the largest residual. The solution with the smallest residual and the steps it took, or
/// `Err(steps)` when the test was not met in `most` steps, or `correct` gave up (`None`). Classical
/// refinement corrects by the low factor's solve (widened(solve_low(lowered(R)))), GMRES-IR by
/// GMRES.
fn refine<T: Refinable>(
    b: MatRef<'_, T>,
    (norm, most): (f64, usize),
    correct: impl Fn(MatRef<'_, T>) -> Result<Option<Mat<T>>>,
    residual: impl Fn(MatRef<'_, T>) -> Result<Mat<T>>,
) -> Result<std::result::Result<(Mat<T>, usize), usize>> {
    let n = b.nrows();
    let bound = norm * (n as f64).sqrt() * T::PRECISION.epsilon();
    let mut x = Mat::<T>::zeros(n, b.ncols());
    let mut r = b.to_owned();
    // The solution with the smallest residual so far, and that residual.
    let mut best: Option<(Mat<T>, f64)> = None;
    let mut met = false;
    let (mut iterations, mut since_best) = (0, 0);
    loop {
        let Some(d) = correct(r.as_ref())? else {
            return Ok(Err(iterations));
        };
        faer::zip!(x.as_mut(), d.as_ref()).for_each(|faer::unzip!(x, d)| *x += *d);
        r = residual(x.as_ref())?;
        let norm = max_abs(r.as_ref());
        let halved = best.as_ref().is_none_or(|(_, b)| norm <= b / 2.0);
        since_best += 1;
        if best.as_ref().is_none_or(|(_, b)| norm < *b) {
            best = Some((x.clone(), norm));
            since_best = 0;
        }
        met |= converged(r.as_ref(), x.as_ref(), bound);
        if met && (!halved || iterations == most) {
            let (x, _) = best.expect("set by the first step");
            return Ok(Ok((x, iterations)));
        }
        // Diverging or stalled before the test: no use going on.
        if iterations == most || (!met && since_best >= STALLED) {
            return Ok(Err(iterations));
        }
        iterations += 1;
    }
}

/// Steps without a smaller residual after which a refinement that has not met its test stops.
const STALLED: usize = 3;

/// The most steps of a refinement in the working precision (LAPACK's ?syrfs ITMAX).
pub(crate) const MAX_WORKING_STEPS: usize = 5;

/// What a refinement in the working precision did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Refined {
    /// The steps that improved X.
    pub steps: usize,
    /// The largest of the columns' backward errors ||r_j||_1 / (||A||_1 ||x_j||_1) it left, in
    /// units of eps.
    pub backward_error: f64,
}

/// Refines the solution `x` of A X = B in A's own precision, as LAPACK's ?syrfs does but normwise:
/// R = `residual`(X) = B - A X, D = `solve`(R), X += D, for as long as a step at least halves the
/// residual and some column's backward error ||r_j||_1 / (||A||_1 ||x_j||_1) (`norm` = ||A||_1, the
/// measure LAPACK's dget02 scales) is above eps, at most [`MAX_WORKING_STEPS`] steps. `x` is left
/// with the smallest residual seen.
pub(crate) fn refine_working<T: Scalar>(
    mut x: faer::MatMut<'_, T>,
    norm: f64,
    solve: impl Fn(faer::MatMut<'_, T>) -> Result<()>,
    residual: impl Fn(MatRef<'_, T>) -> Result<Mat<T>>,
) -> Result<Refined> {
    let eps = T::PRECISION.epsilon();
    let sums = |m: MatRef<'_, T>| -> Vec<f64> {
        (0..m.ncols())
            .map(|j| m.col(j).iter().map(|v| v.abs_f64()).sum())
            .collect()
    };
    // The largest of the columns' ||r_j||_1 / ||x_j||_1.
    let error = |r: MatRef<'_, T>, x: MatRef<'_, T>| -> f64 {
        let (r, x) = (sums(r), sums(x));
        r.iter()
            .zip(&x)
            .map(|(r, x)| if *x > 0.0 { r / x } else { *r })
            .fold(0.0, f64::max)
    };
    let mut r = residual(x.as_ref())?;
    let mut largest = error(r.as_ref(), x.as_ref());
    let mut steps = 0;
    while steps < MAX_WORKING_STEPS && largest > norm * eps {
        let mut d = r;
        solve(d.as_mut())?;
        let next = x.to_owned() + d;
        r = residual(next.as_ref())?;
        let now = error(r.as_ref(), next.as_ref());
        if now < largest {
            x.copy_from(&next);
            steps += 1;
        }
        if now > largest / 2.0 {
            largest = largest.min(now);
            break;
        }
        largest = now;
    }
    let backward_error = if norm > 0.0 {
        largest / (norm * eps)
    } else {
        0.0
    };
    Ok(Refined {
        steps,
        backward_error,
    })
}

/// Solves the SPD (Hermitian positive definite) system A X = B to double accuracy with default
/// options, factoring in single precision when that suffices ([`Cholesky::solve_refined`]).
pub fn solve_spd_mixed<A, B>(a: A, b: B) -> Result<(B::Owned, Refinement)>
where
    A: Matrix,
    A::Elem: Refinable,
    B: Matrix<Elem = A::Elem>,
{
    Cholesky::new().solve_refined(a, b)
}

/// `m` rounded to the low precision.
pub(crate) fn lowered<T: Refinable>(m: MatRef<'_, T>) -> Mat<T::Low> {
    Mat::from_fn(m.nrows(), m.ncols(), |i, j| m[(i, j)].lower())
}

/// The low-precision `m` widened, exactly.
pub(crate) fn widened<T: Refinable>(m: MatRef<'_, T::Low>) -> Mat<T> {
    Mat::from_fn(m.nrows(), m.ncols(), |i, j| T::widen(m[(i, j)]))
}

/// The lower triangle of the square `a` rounded to the low precision (zeros above it: the
/// factorisation reads the lower triangle only), the first entry that overflowed (column by
/// column), and ||A||_inf of the Hermitian A it stands for (the largest row sum of moduli): one
/// pass over the triangle, columns spread over the rayon pool.
pub(crate) fn lowered_lower<T: Refinable>(
    a: MatRef<'_, T>,
) -> (Mat<T::Low>, Option<(usize, usize)>, f64) {
    use rayon::prelude::*;
    let n = a.nrows();
    let mut low = Mat::<T::Low>::zeros(n, n);
    let chunk = n.div_ceil(4 * rayon::current_num_threads()).max(1);
    let (overflow, rows) = low
        .par_col_chunks_mut(chunk)
        .enumerate()
        .map(|(c, mut part)| {
            let mut overflow = None;
            let mut rows = vec![0.0_f64; n];
            for dj in 0..part.ncols() {
                let j = c * chunk + dj;
                let src = a.col(j).subrows(j, n - j);
                let mut dst = part.as_mut().col_mut(dj).subrows_mut(j, n - j);
                for (d, (v, sum)) in dst
                    .as_mut()
                    .iter_mut()
                    .zip(src.iter().zip(rows[j..].iter_mut()))
                {
                    let x = v.lower();
                    *d = x;
                    *sum += v.abs_f64();
                }
                // The diagonal was counted once above; the strict lower part also counts
                // in row j (Hermitian: |a_ji| = |a_ij|).
                let below: f64 = src.iter().skip(1).map(|v| v.abs_f64()).sum();
                rows[j] += below;
                if overflow.is_none()
                    && let Some(i) = dst.as_ref().iter().position(|x| !x.finite())
                {
                    overflow = Some((j + i, j));
                }
            }
            (overflow, rows)
        })
        .reduce(
            || (None, vec![0.0; n]),
            |(o1, mut r1), (o2, r2)| {
                r1.iter_mut().zip(&r2).for_each(|(x, y)| *x += y);
                // The first overflow in column order.
                let o = match (o1, o2) {
                    (Some(p), Some(q)) => Some(if (p.1, p.0) <= (q.1, q.0) { p } else { q }),
                    (p, q) => p.or(q),
                };
                (o, r1)
            },
        );
    (low, overflow, rows.into_iter().fold(0.0, f64::max))
}

/// The largest modulus of an entry.
fn max_abs<T: Scalar>(m: MatRef<'_, T>) -> f64 {
    let mut max = 0.0_f64;
    for j in 0..m.ncols() {
        for i in 0..m.nrows() {
            max = max.max(m[(i, j)].abs_f64());
        }
    }
    max
}

/// Whether every column's residual is small: ||r_j||_max <= ||x_j||_max * bound.
fn converged<T: Scalar>(r: MatRef<'_, T>, x: MatRef<'_, T>, bound: f64) -> bool {
    let col_max = |m: MatRef<'_, T>, j: usize| {
        (0..m.nrows())
            .map(|i| m[(i, j)].abs_f64())
            .fold(0.0, f64::max)
    };
    (0..r.ncols()).all(|j| col_max(r, j) <= col_max(x, j) * bound)
}

/// Side of the square blocks of A the residual streams through: small enough that a block read for
/// A_IJ x_J is still in cache for A_IJ^H x_I (256 x 256 f64: 512 KiB).
const RESIDUAL_BLOCK: usize = 256;

/// R = B - A X for the Hermitian A whose lower triangle is given, in A's precision. A is read once,
/// by square blocks below the diagonal: each block A_IJ updates R_I with A_IJ X_J and R_J with
/// A_IJ^H X_I while it is in cache; a diagonal block is made whole (it is small) and applied once.
/// Columns of blocks are spread over the threads of the platform's first CPU cluster, each summing
/// into its own copy of R.
pub(crate) fn residual<T: Scalar>(
    platform: &crate::Platform,
    a: MatRef<'_, T>,
    x: MatRef<'_, T>,
    b: MatRef<'_, T>,
) -> Result<Mat<T>> {
    use rayon::prelude::*;
    let (n, k) = (a.nrows(), x.ncols());
    let flops = 2.0 * (n * n * k) as f64 * T::PRECISION.flop_factor();
    let seq = hetla_kernels::Par::Seq;
    // Adds -(A X) restricted to block column J to `acc`.
    let column = |backend: hetla_kernels::Backend, acc: &mut Mat<T>, j0: usize| {
        let w = RESIDUAL_BLOCK.min(n - j0);
        let diag = Mat::from_fn(w, w, |i, j| {
            if i >= j {
                a[(j0 + i, j0 + j)]
            } else {
                let v = a[(j0 + j, j0 + i)].to_c64().conj();
                T::from_parts(v.re, v.im)
            }
        });
        let xj = x.subrows(j0, w);
        backend.run(
            Op::Update,
            &[diag.as_ref(), xj],
            acc.as_mut().subrows_mut(j0, w),
            seq,
        )?;
        for i0 in (j0 + w..n).step_by(RESIDUAL_BLOCK) {
            let h = RESIDUAL_BLOCK.min(n - i0);
            let block = a.submatrix(i0, j0, h, w);
            backend.run(
                Op::Update,
                &[block, xj],
                acc.as_mut().subrows_mut(i0, h),
                seq,
            )?;
            let xi = x.subrows(i0, h);
            let acc_j = acc.as_mut().subrows_mut(j0, w);
            backend.run(Op::UpdateTrans, &[block, xi], acc_j, seq)?;
        }
        Ok::<_, hetla_kernels::KernelError>(())
    };
    let starts: Vec<usize> = (0..n).step_by(RESIDUAL_BLOCK).collect();
    let products = |backend: hetla_kernels::Backend| {
        starts
            .par_iter()
            .with_max_len(1)
            .try_fold(
                || Mat::<T>::zeros(n, k),
                |mut acc, &j0| column(backend, &mut acc, j0).map(|()| acc),
            )
            .try_reduce(
                || Mat::<T>::zeros(n, k),
                |mut x, y| {
                    faer::zip!(x.as_mut(), y.as_ref()).for_each(|faer::unzip!(x, y)| *x += *y);
                    Ok(x)
                },
            )
    };
    let minus_ax = match direct(platform, flops, |backend, _| products(backend)) {
        Some(result) => result?,
        // No CPU cluster: the products run on the calling thread.
        None => rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .map_err(|e| Error::Spawn {
                threads: 1,
                reason: e.to_string(),
            })?
            .install(|| products(platform.backend()))?,
    };
    let mut r = b.to_owned();
    faer::zip!(r.as_mut(), minus_ax.as_ref()).for_each(|faer::unzip!(r, m)| *r += *m);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_residual_uses_the_hermitian_matrix_of_the_lower_triangle() {
        let n = 700;
        let full = Mat::from_fn(n, n, |i, j| {
            let (lo, hi) = (i.min(j), i.max(j));
            let re = 1.0 / (1.0 + (lo + 2 * hi) as f64);
            let im = if i > j {
                0.25 / (1.0 + hi as f64)
            } else if i < j {
                -0.25 / (1.0 + hi as f64)
            } else {
                0.0
            };
            c64::new(re, im)
        });
        // Junk in the strict upper triangle of what the residual is given.
        let lower = Mat::from_fn(n, n, |i, j| {
            if i >= j {
                full[(i, j)]
            } else {
                c64::new(9.0, 9.0)
            }
        });
        let x = Mat::from_fn(n, 2, |i, j| c64::new((i + j) as f64 * 0.01, 1.0));
        let b = Mat::from_fn(n, 2, |i, _| c64::new(i as f64, -1.0));
        let platform = Cholesky::new().threads(1).resolve_platform().unwrap();
        let r = residual(&platform, lower.as_ref(), x.as_ref(), b.as_ref()).unwrap();
        let want = &b - &full * &x;
        let err = (&r - &want).norm_max();
        assert!(err < 1e-10, "{err}");
    }
}
