//! The public generic kernels of [`Backend`]: each forwards to its scalar's [`Compiled`] method,
//! compiled in this crate (the list and why: the `compiled` module).

use faer::{MatMut, MatRef, Par};

use crate::backend::Backend;
use crate::compiled::{Compiled, entry_points};
use crate::error::KernelError;
use crate::op::{Op, Stack};
use crate::scalar::Scalar;

/// The public methods of [`Backend`] from the list of `entry_points!`.
macro_rules! forward {
    ($( $(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty => $compiled:ident, $body:ident; )*) => {
        impl Backend {
            $(
                $(#[$doc])*
                #[inline]
                pub fn $name<T: Scalar>(self, $($arg: $ty),*) -> $ret {
                    <T as Compiled<T>>::$compiled(self, $($arg),*)
                }
            )*
        }
    };
}

entry_points!(forward);
