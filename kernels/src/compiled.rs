//! Where the tile kernels are compiled: in this crate, once for each scalar.
//!
//! Rust compiles a generic function in the crate that names its type argument, at that crate's
//! optimisation level. The public generic kernels of [`Backend`] (and [`swap_rows`]) are therefore
//! one-line forwards (made in `entry`) to the methods of [`Compiled`], a sealed supertrait of
//! [`Scalar`] implemented below for `f32`, `f64`, [`c32`] and [`c64`], whose methods are not
//! inlined across crates: the kernel (its checks, splitting, packing and the faer code it
//! instantiates) is compiled here four times, with this crate's optimisation, instead of again in
//! `hetla`, the laboratory, the command line and every test crate. Debug builds keep the kernels
//! optimised ([profile.dev.package.hetla-kernels] in the workspace's Cargo.toml) this way; before,
//! a kernel named from `hetla` ran at `hetla`'s opt-level 0, ten times slower, and the test crates
//! compiled it over and over.
//!
//! `entry_points!` is the one list of these kernels: each entry is the public method's
//! documentation, its signature without `self` (`T` the scalar), and the name of its body, a
//! generic method of [`Backend`] in the kernel family's file (`run`, `lu`, `qr`, `inverse`). The
//! list is handed to `declare!` here (the trait and its four implementations) and to `forward!` in
//! `entry` (the public methods): a kernel added to the list gets both. The trait is declared here,
//! beside the types its signatures name only, and the forwards live above [`Scalar`], so that no
//! module imports one that imports it.
//!
//! [`swap_rows`]: crate::swap_rows
//! [`Scalar`]: crate::Scalar
//! [`c32`]: faer::c32
//! [`c64`]: faer::c64

use faer::{MatMut, MatRef, Par};

use crate::backend::Backend;
use crate::error::KernelError;
use crate::op::{Op, Stack};

/// Hands the list of the kernels compiled in this crate to the macro `$then` (see the module).
macro_rules! entry_points {
    ($then:ident) => {
        $then! {
            /// Runs `op` on its operands: `reads` (in the order [`Op`] documents) and the tile it
            /// overwrites, in any precision (complex: the Hermitian forms, see [`crate::Scalar`]).
            /// Checks counts and shapes first, so a mistake is an error, not a panic.
            fn run(op: Op, reads: &[MatRef<'_, T>], write: MatMut<'_, T>, par: Par) -> Result<(), KernelError> => compiled_run, run_impl;
            /// C <- alpha A B + beta C. A and B may be transposed views (plain transposes, not
            /// conjugated). With beta = 0 the old C is not read; with an empty inner dimension or
            /// alpha = 0 only the scaling happens. With `Par::Rayon(p)` the product runs as `p`
            /// sequential pieces on the current rayon pool (see the `split` module).
            fn matmul(a: MatRef<'_, T>, b: MatRef<'_, T>, c: MatMut<'_, T>, alpha: f64, beta: f64, par: Par) -> Result<(), KernelError> => compiled_matmul, matmul_impl;
            /// A <- L, the lower Cholesky factor (A = L L^H) of the square tile A (upper triangle
            /// untouched).
            fn potrf(a: MatMut<'_, T>, par: Par) -> Result<(), KernelError> => compiled_potrf, potrf_impl;
            /// B <- B L^-H with L lower triangular.
            fn trsm(l: MatRef<'_, T>, b: MatMut<'_, T>, par: Par) -> Result<(), KernelError> => compiled_trsm, split_trsm;
            /// C <- C - A A^H on the lower triangle of C (SYRK; HERK for a complex type).
            fn syrk(a: MatRef<'_, T>, c: MatMut<'_, T>, par: Par) -> Result<(), KernelError> => compiled_syrk, syrk_impl;
            /// X <- L^-1 X, or X <- L^-H X when `adjoint`, with L lower triangular.
            fn solve_lower(l: MatRef<'_, T>, adjoint: bool, x: MatMut<'_, T>, par: Par) -> Result<(), KernelError> => compiled_solve_lower, split_solve_lower;
            /// A <- its LU factorisation with partial pivoting (P A = L U, L unit lower trapezoidal
            /// stored below the diagonal, U upper triangular), A m x b with m >= b; `ipiv` (b
            /// entries) receives the interchanges (0-based: row i was swapped with row `ipiv[i]` >=
            /// i). Returns the first column whose pivot is exactly zero (LAPACK's info - 1), the
            /// factorisation completed as LAPACK completes it; `None` when every pivot is non-zero.
            fn lu_panel(a: MatMut<'_, T>, ipiv: &mut [usize], par: Par) -> Result<Option<usize>, KernelError> => compiled_lu_panel, lu_panel_impl;
            /// The update of `c` (m x c) by the factored panel `panel` (m x b) and its interchanges
            /// `ipiv`: rows interchanged, C_1 <- L_11^-1 C_1, C_2 <- C_2 - L_21 C_1
            /// ([`Op::LuUpdate`]).
            fn lu_update(panel: MatRef<'_, T>, ipiv: &[usize], c: MatMut<'_, T>, par: Par) -> Result<(), KernelError> => compiled_lu_update, lu_update_impl;
            /// `c`'s rows interchanged as the factored panel `panel`'s were ([`Op::LuSwap`]; the
            /// panel is read for its shape only, the interchanges are `ipiv`).
            fn lu_swap(panel: MatRef<'_, T>, ipiv: &[usize], c: MatMut<'_, T>) -> Result<(), KernelError> => compiled_lu_swap, lu_swap_impl;
            /// A <- its QR factorisation (LAPACK ?geqrt; PLASMA's GEQRT): R on and above the
            /// diagonal, the reflectors below it; `t` (ib x min(m, n)) receives the block
            /// reflectors' T's, ib its rows.
            fn qr_tile(a: MatMut<'_, T>, t: MatMut<'_, T>, par: Par) -> Result<(), KernelError> => compiled_qr_tile, qr_tile_impl;
            /// C <- Q^H C (`adjoint`) or Q C, Q the orthogonal factor of a tile factored by
            /// [`Backend::qr_tile`] (`v`: its reflectors below the diagonal, m x k; `t`: its T's,
            /// ib x k); C has m rows (LAPACK ?gemqrt from the left; PLASMA's UNMQR).
            fn qr_apply(v: MatRef<'_, T>, t: MatRef<'_, T>, c: MatMut<'_, T>, adjoint: bool, par: Par) -> Result<(), KernelError> => compiled_qr_apply, qr_apply_impl;
            /// The QR of `r` (n x n upper triangular: PLASMA's A_kk after its own QR) stacked on
            /// `b` (m x n, or its upper triangle for [`Stack::OnTriangle`]), LAPACK ?tpqrt
            /// (PLASMA's TSQRT and TTQRT): the new R overwrites `r`'s upper triangle (its strict
            /// lower part is neither read nor written), the reflectors' bottom parts overwrite `b`
            /// (for a triangle, its upper triangle only), `t` (ib x n) receives the T's.
            fn qr_stacked(r: MatMut<'_, T>, b: MatMut<'_, T>, stack: Stack, t: MatMut<'_, T>, par: Par) -> Result<(), KernelError> => compiled_qr_stacked, qr_stacked_impl;
            /// [a1; a2] <- Q^H [a1; a2] (`adjoint`) or Q [a1; a2] (the pair of tiles given as one
            /// operand), Q the orthogonal factor of a stacked QR ([`Backend::qr_stacked`]: `v` its
            /// bottom reflectors, m x k, `t` its T's, ib x k); `a1` has k rows (those of the
            /// triangle's tile), `a2` m (LAPACK ?tpmqrt from the left; PLASMA's TSMQR and TTMQR).
            fn qr_stacked_apply(v: MatRef<'_, T>, stack: Stack, t: MatRef<'_, T>, pair: (MatMut<'_, T>, MatMut<'_, T>), adjoint: bool, par: Par) -> Result<(), KernelError> => compiled_qr_stacked_apply, qr_stacked_apply_impl;
            /// On a square tile whose lower triangle holds a Cholesky factor L (from
            /// [`Backend::potrf`]): writes U = L1^-H into its strict upper triangle when cond_1(L1)
            /// <= [`INVERSE_MAX_CONDITION`](crate::INVERSE_MAX_CONDITION), and says whether it did (the lower triangle is left as it is
            /// either way). The inversion runs on `par`.
            fn invert_unit_factor(a: MatMut<'_, T>, par: Par) -> Result<bool, KernelError> => compiled_invert_unit_factor, invert_unit_factor_impl;
            /// B <- B L^-H from a tile `lu` holding L in its lower triangle and U = L1^-H in its
            /// strict upper triangle (as [`Backend::invert_unit_factor`] left it): B <- (B U) D^-1,
            /// the rows of B in bands on `par`.
            fn trsm_by_inverse(lu: MatRef<'_, T>, b: MatMut<'_, T>, par: Par) -> Result<(), KernelError> => compiled_trsm_by_inverse, trsm_by_inverse_impl;
            /// The singular values of `a` (any shape) in non-increasing order, in `a`'s real
            /// precision (faer's SVD without vectors, whichever the backend); `None` when the SVD
            /// does not converge.
            fn singular_values(a: MatRef<'_, T>) -> Option<Vec<<T as faer::traits::ComplexField>::Real>> => compiled_singular_values, singular_values_impl;
        }
    };
}
pub(crate) use entry_points;

/// The trait [`Compiled`] and its implementation for each scalar, from `entry_points!`.
macro_rules! declare {
    ($( $(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty => $compiled:ident, $body:ident; )*) => {
        /// The kernels' entry points for one scalar type `T` (implemented for `T` itself only),
        /// compiled in this crate (see the module).
        pub trait Compiled<T: faer::traits::ComplexField> {
            $(
                #[doc = concat!("[`Backend::", stringify!($name), "`] for this scalar.")]
                fn $compiled(backend: Backend, $($arg: $ty),*) -> $ret;
            )*
            /// [`swap_rows`](crate::swap_rows) for this scalar.
            fn compiled_swap_rows(c: MatMut<'_, T>, ipiv: &[usize]);
        }
        declare!(@for scalar_f32 f32 { $( fn $compiled($($arg: $ty),*) -> $ret => $body; )* });
        declare!(@for scalar_f64 f64 { $( fn $compiled($($arg: $ty),*) -> $ret => $body; )* });
        declare!(@for scalar_c32 faer::c32 { $( fn $compiled($($arg: $ty),*) -> $ret => $body; )* });
        declare!(@for scalar_c64 faer::c64 { $( fn $compiled($($arg: $ty),*) -> $ret => $body; )* });
    };
    (@for $module:ident $scalar:ty { $( fn $compiled:ident($($arg:ident: $ty:ty),*) -> $ret:ty => $body:ident; )* }) => {
        mod $module {
            use faer::{MatMut, MatRef, Par};

            use crate::backend::Backend;
            use crate::compiled::Compiled;
            use crate::error::KernelError;
            use crate::op::{Op, Stack};

            /// The scalar the list's signatures name.
            type T = $scalar;

            impl Compiled<T> for T {
                $(
                    #[inline(never)]
                    fn $compiled(backend: Backend, $($arg: $ty),*) -> $ret {
                        backend.$body($($arg),*)
                    }
                )*

                #[inline(never)]
                fn compiled_swap_rows(c: MatMut<'_, T>, ipiv: &[usize]) {
                    Backend::swap_rows_impl(c, ipiv)
                }
            }
        }
    };
}

entry_points!(declare);
