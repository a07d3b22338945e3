//! Where the tile kernels are compiled: in this crate, once for each scalar.
//!
//! Rust compiles a generic function in the crate that names its type argument, at that crate's
//! optimisation level. Each public generic entry point of [`Backend`] (and [`swap_rows`]) is
//! therefore a one-line forward to a method of [`Compiled`], a sealed supertrait of [`Scalar`]
//! implemented below for `f32`, `f64`, [`c32`] and [`c64`], whose methods are not inlined
//! across crates: the kernel (its checks, splitting, packing and the faer code it instantiates)
//! is compiled here four times, with this crate's optimisation, instead of again in `hetla`, the
//! laboratory, the command line and every test crate. Debug builds keep the kernels optimised
//! ([profile.dev.package.hetla-kernels] in the workspace's Cargo.toml) this way; before, a
//! kernel named from `hetla` ran at `hetla`'s opt-level 0, ten times slower, and the test crates
//! compiled it over and over.
//!
//! An entry point is `fn name(arguments with Self for the scalar) -> result => body;`, the body a
//! generic function of this crate that infers the scalar from its arguments.
//!
//! [`swap_rows`]: crate::swap_rows
//! [`Scalar`]: crate::Scalar

use faer::{MatMut, MatRef, Par, c32, c64};

use crate::backend::Backend;
use crate::error::KernelError;
use crate::op::Op;
use crate::qr::Stack;

macro_rules! compiled {
    (@for $t:ty { $( fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? => $body:path; )* }) => {
        impl Compiled for $t {
            $(
                #[inline(never)]
                fn $name($($arg: $ty),*) $(-> $ret)? {
                    $body($($arg),*)
                }
            )*
        }
    };
    ($( fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? => $body:path; )*) => {
        /// The kernels' entry points for one scalar type, compiled in this crate (see the module).
        pub trait Compiled: Sized {
            $( #[doc = concat!("`", stringify!($body), "` for this scalar.")] fn $name($($arg: $ty),*) $(-> $ret)?; )*
        }
        compiled!(@for f32 { $( fn $name($($arg: $ty),*) $(-> $ret)? => $body; )* });
        compiled!(@for f64 { $( fn $name($($arg: $ty),*) $(-> $ret)? => $body; )* });
        compiled!(@for c32 { $( fn $name($($arg: $ty),*) $(-> $ret)? => $body; )* });
        compiled!(@for c64 { $( fn $name($($arg: $ty),*) $(-> $ret)? => $body; )* });
    };
}

compiled! {
    fn compiled_run(backend: Backend, op: Op, reads: &[MatRef<'_, Self>], write: MatMut<'_, Self>, par: Par) -> Result<(), KernelError> => Backend::run_impl;
    fn compiled_matmul(backend: Backend, a: MatRef<'_, Self>, b: MatRef<'_, Self>, c: MatMut<'_, Self>, alpha: f64, beta: f64, par: Par) -> Result<(), KernelError> => Backend::matmul_impl;
    fn compiled_potrf(backend: Backend, a: MatMut<'_, Self>, par: Par) -> Result<(), KernelError> => Backend::potrf_impl;
    fn compiled_trsm(backend: Backend, l: MatRef<'_, Self>, b: MatMut<'_, Self>, par: Par) -> Result<(), KernelError> => Backend::trsm_impl;
    fn compiled_syrk(backend: Backend, a: MatRef<'_, Self>, c: MatMut<'_, Self>, par: Par) -> Result<(), KernelError> => Backend::syrk_impl;
    fn compiled_solve_lower(backend: Backend, l: MatRef<'_, Self>, adjoint: bool, x: MatMut<'_, Self>, par: Par) -> Result<(), KernelError> => Backend::solve_lower_impl;
    fn compiled_lu_panel(backend: Backend, a: MatMut<'_, Self>, ipiv: &mut [usize], par: Par) -> Result<Option<usize>, KernelError> => Backend::lu_panel_impl;
    fn compiled_lu_update(backend: Backend, panel: MatRef<'_, Self>, ipiv: &[usize], c: MatMut<'_, Self>, par: Par) -> Result<(), KernelError> => Backend::lu_update_impl;
    fn compiled_lu_swap(backend: Backend, panel: MatRef<'_, Self>, ipiv: &[usize], c: MatMut<'_, Self>) -> Result<(), KernelError> => Backend::lu_swap_impl;
    fn compiled_swap_rows(c: MatMut<'_, Self>, ipiv: &[usize]) => crate::lu::swap_rows_impl;
    fn compiled_qr_tile(backend: Backend, a: MatMut<'_, Self>, t: MatMut<'_, Self>, par: Par) -> Result<(), KernelError> => Backend::qr_tile_impl;
    fn compiled_qr_apply(backend: Backend, v: MatRef<'_, Self>, t: MatRef<'_, Self>, c: MatMut<'_, Self>, adjoint: bool, par: Par) -> Result<(), KernelError> => Backend::qr_apply_impl;
    fn compiled_qr_stacked(backend: Backend, r: MatMut<'_, Self>, b: MatMut<'_, Self>, stack: Stack, t: MatMut<'_, Self>, par: Par) -> Result<(), KernelError> => Backend::qr_stacked_impl;
    fn compiled_qr_stacked_apply(backend: Backend, v: MatRef<'_, Self>, stack: Stack, t: MatRef<'_, Self>, pair: (MatMut<'_, Self>, MatMut<'_, Self>), adjoint: bool, par: Par) -> Result<(), KernelError> => Backend::qr_stacked_apply_impl;
    fn compiled_invert_unit_factor(backend: Backend, a: MatMut<'_, Self>, par: Par) -> Result<bool, KernelError> => Backend::invert_unit_factor_impl;
    fn compiled_trsm_by_inverse(backend: Backend, lu: MatRef<'_, Self>, b: MatMut<'_, Self>, par: Par) -> Result<(), KernelError> => Backend::trsm_by_inverse_impl;
}
