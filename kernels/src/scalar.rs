//! The scalar types hetla computes in: `f32`, `f64`, [`c32`] and [`c64`] (LAPACK's s, d, c and z),
//! and their [`Precision`] tag.
//!
//! Every kernel, tile and graph is written once over [`Scalar`]. For complex types the matrices are
//! Hermitian: where a real algorithm transposes, a complex one takes the conjugate transpose (POTRF
//! gives L L^H, SYRK is HERK, the Cholesky GEMM is C - A B^H, the backward substitution solves with
//! L^H, and a [`MatMul`](crate::MatMul) "transposed" operand is its adjoint). For real types the
//! two are the same, so one meaning covers all four.

use std::fmt;
use std::str::FromStr;

use faer::traits::ComplexField;
use faer::{Mat, MatMut, MatRef};

use crate::erased::{AnyMat, AnyMut, AnyRef};
pub use faer::{c32, c64};

/// One of the four precisions, named by LAPACK's letter.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
pub enum Precision {
    /// `f32`.
    #[serde(rename = "s")]
    S,
    /// `f64`, the default.
    #[default]
    #[serde(rename = "d")]
    D,
    /// Complex `f32` ([`c32`]).
    #[serde(rename = "c")]
    C,
    /// Complex `f64` ([`c64`]).
    #[serde(rename = "z")]
    Z,
}

impl Precision {
    /// Every precision, in LAPACK's order.
    pub const ALL: [Precision; 4] = [Precision::S, Precision::D, Precision::C, Precision::Z];

    /// LAPACK's letter: "s", "d", "c" or "z".
    pub fn letter(self) -> &'static str {
        match self {
            Precision::S => "s",
            Precision::D => "d",
            Precision::C => "c",
            Precision::Z => "z",
        }
    }

    /// Bytes of one element.
    pub fn bytes(self) -> usize {
        match self {
            Precision::S => 4,
            Precision::D | Precision::C => 8,
            Precision::Z => 16,
        }
    }

    /// Whether elements are complex.
    pub fn is_complex(self) -> bool {
        matches!(self, Precision::C | Precision::Z)
    }

    /// Real flops per flop of the real algorithm: 4 for complex (a complex multiply-add is 4 real
    /// multiplications and 4 additions where a real one is 1 and 1), 1 for real. LAPACK Working
    /// Note 41 counts complex operations this way, as hetla's reports do.
    pub fn flop_factor(self) -> f64 {
        if self.is_complex() { 4.0 } else { 1.0 }
    }

    /// The unit roundoff of the real type (2^-24 or 2^-53).
    pub fn epsilon(self) -> f64 {
        match self {
            Precision::S | Precision::C => f64::from(f32::EPSILON),
            Precision::D | Precision::Z => f64::EPSILON,
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.letter())
    }
}

/// A precision name that is none of s, d, c, z.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown precision `{0}`: expected s (f32), d (f64), c (complex f32) or z (complex f64)")]
pub struct UnknownPrecision(pub String);

impl FromStr for Precision {
    type Err = UnknownPrecision;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        Self::ALL
            .into_iter()
            .find(|p| p.letter().eq_ignore_ascii_case(t))
            .ok_or_else(|| UnknownPrecision(s.to_string()))
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for super::c32 {}
    impl Sealed for super::c64 {}
}

/// A scalar hetla computes in: `f32`, `f64`, [`c32`] or [`c64`] (sealed). The arithmetic is faer's
/// [`ComplexField`]; this adds the tag and the conversions hetla needs.
pub trait Scalar:
    ComplexField
    + Copy
    + Send
    + Sync
    + PartialEq
    + fmt::Debug
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Neg<Output = Self>
    + std::ops::AddAssign
    + std::ops::SubAssign
    + std::ops::MulAssign
    + 'static
    + sealed::Sealed
    + crate::compiled::Compiled<Self>
{
    /// The precision of the type.
    const PRECISION: Precision;

    /// The real number `x`, rounded to this type.
    fn from_f64(x: f64) -> Self {
        Self::from_f64_impl(x)
    }

    /// `re + i im` (`im` dropped for a real type).
    fn from_parts(re: f64, im: f64) -> Self;

    /// The value as a complex `f64` (exact: every precision widens to it).
    fn to_c64(self) -> c64;

    /// |x|, in f64.
    fn abs_f64(self) -> f64 {
        let z = self.to_c64();
        if z.im == 0.0 {
            z.re.abs()
        } else {
            z.re.hypot(z.im)
        }
    }

    /// The real part, in f64.
    fn re_f64(self) -> f64 {
        self.to_c64().re
    }

    /// Whether the value is finite (both parts, for a complex one).
    fn finite(self) -> bool {
        let z = self.to_c64();
        z.re.is_finite() && z.im.is_finite()
    }

    /// The view with its precision known at run time only.
    fn any_ref(m: MatRef<'_, Self>) -> AnyRef<'_>;
    /// The writable view with its precision known at run time only.
    fn any_mut(m: MatMut<'_, Self>) -> AnyMut<'_>;
    /// The matrix with its precision known at run time only.
    fn any_mat(m: Mat<Self>) -> AnyMat;
    /// The typed view, when `m` is of this precision.
    fn of_any_ref(m: AnyRef<'_>) -> Option<MatRef<'_, Self>>;
    /// The typed writable view, when `m` is of this precision.
    fn of_any_mut(m: AnyMut<'_>) -> Option<MatMut<'_, Self>>;
}

/// The conversions between a scalar's matrices and the [`AnyRef`] family, variant `$v`.
macro_rules! erased {
    ($v:ident) => {
        fn any_ref(m: MatRef<'_, Self>) -> AnyRef<'_> {
            AnyRef::$v(m)
        }
        fn any_mut(m: MatMut<'_, Self>) -> AnyMut<'_> {
            AnyMut::$v(m)
        }
        fn any_mat(m: Mat<Self>) -> AnyMat {
            AnyMat::$v(m)
        }
        fn of_any_ref(m: AnyRef<'_>) -> Option<MatRef<'_, Self>> {
            match m {
                AnyRef::$v(m) => Some(m),
                _ => None,
            }
        }
        fn of_any_mut(m: AnyMut<'_>) -> Option<MatMut<'_, Self>> {
            match m {
                AnyMut::$v(m) => Some(m),
                _ => None,
            }
        }
    };
}

impl Scalar for f32 {
    const PRECISION: Precision = Precision::S;
    erased!(S);
    fn from_parts(re: f64, _: f64) -> Self {
        re as f32
    }
    fn to_c64(self) -> c64 {
        c64::new(f64::from(self), 0.0)
    }
}

impl Scalar for f64 {
    const PRECISION: Precision = Precision::D;
    erased!(D);
    fn from_parts(re: f64, _: f64) -> Self {
        re
    }
    fn to_c64(self) -> c64 {
        c64::new(self, 0.0)
    }
}

impl Scalar for c32 {
    const PRECISION: Precision = Precision::C;
    erased!(C);
    fn from_parts(re: f64, im: f64) -> Self {
        c32::new(re as f32, im as f32)
    }
    fn to_c64(self) -> c64 {
        c64::new(f64::from(self.re), f64::from(self.im))
    }
}

impl Scalar for c64 {
    const PRECISION: Precision = Precision::Z;
    erased!(Z);
    fn from_parts(re: f64, im: f64) -> Self {
        c64::new(re, im)
    }
    fn to_c64(self) -> c64 {
        self
    }
}

/// Whether the conjugate transpose needs a conjugation on this type (complex types).
pub(crate) fn adjoint_conj<T: Scalar>() -> faer::Conj {
    if T::PRECISION.is_complex() {
        faer::Conj::Yes
    } else {
        faer::Conj::No
    }
}

/// Sets the imaginary parts of a square block's diagonal to zero (nothing for a real type): a
/// Hermitian matrix's diagonal is real, and kernels that write one (HERK, LAUUM) make it exactly
/// so, as BLAS does; LAPACK's ?potrf reads only the real part.
pub fn real_diagonal<T: Scalar>(mut m: faer::MatMut<'_, T>) {
    if T::PRECISION.is_complex() {
        for k in 0..m.nrows().min(m.ncols()) {
            let re = m[(k, k)].re_f64();
            m[(k, k)] = T::from_f64(re);
        }
    }
}

/// Runs `$body` with the type `$t` bound to the scalar of `$precision` (a [`Precision`]): `f32`,
/// `f64`, [`c32`] or [`c64`]. The one place a precision chosen at run time becomes a type, so that
/// a command or a calibration written once over [`Scalar`] is not followed by four hand-written
/// match arms:
///
/// ```
/// use hetla_kernels::{Precision, Scalar, with_scalar};
/// fn bytes<T: Scalar>() -> usize { size_of::<T>() }
/// assert_eq!(with_scalar!(Precision::Z, T => bytes::<T>()), 16);
/// ```
#[macro_export]
macro_rules! with_scalar {
    ($precision:expr, $t:ident => $body:expr) => {
        match $precision {
            $crate::Precision::S => {
                type $t = f32;
                $body
            }
            $crate::Precision::D => {
                type $t = f64;
                $body
            }
            $crate::Precision::C => {
                type $t = $crate::c32;
                $body
            }
            $crate::Precision::Z => {
                type $t = $crate::c64;
                $body
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precisions_parse_and_size() {
        for p in Precision::ALL {
            assert_eq!(p.letter().parse::<Precision>().unwrap(), p);
        }
        assert_eq!("Z".parse::<Precision>().unwrap(), Precision::Z);
        let err = "q".parse::<Precision>().unwrap_err().to_string();
        assert!(
            err.contains("`q`") && err.contains("z (complex f64)"),
            "{err}"
        );
        assert_eq!(
            Precision::ALL.map(Precision::bytes),
            [
                size_of::<f32>(),
                size_of::<f64>(),
                size_of::<c32>(),
                size_of::<c64>()
            ]
        );
        assert_eq!(<c32 as Scalar>::PRECISION.flop_factor(), 4.0);
        assert_eq!(c32::from_parts(1.5, -2.0).to_c64(), c64::new(1.5, -2.0));
        assert_eq!(f32::from_parts(1.5, -2.0).to_c64(), c64::new(1.5, 0.0));
        assert_eq!(c64::new(3.0, 4.0).abs_f64(), 5.0);
        assert!(!c64::new(1.0, f64::NAN).finite());
    }
}
