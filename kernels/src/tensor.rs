//! Tensor-core products: how a GPU computes the products of single-precision tiles.
//!
//! A GPU's tensor cores multiply f32 (and complex f32) matrices several times faster than its FP32
//! units when the operands are first rounded to a shorter mantissa: TF32 (10 bits, f32's exponent;
//! 7.4x the FP32 rate on an H100 or H200, dense) or BF16 (7 bits, f32's exponent; 14.8x), the
//! products accumulated in f32 (cuBLAS's compute types `CUBLAS_COMPUTE_32F_FAST_TF32` and
//! `CUBLAS_COMPUTE_32F_FAST_16BF` on f32 operands). Both keep f32's exponent range, so no scaling
//! is needed (FP16's five exponent bits would overflow at 65504: not offered).
//!
//! [`TensorMath`] is a run's choice. It applies to the general products of single-precision tiles
//! on a GPU ([`TensorMath::applies`]): Cholesky's trailing GEMM, LU's trailing update (its TRSM
//! stays in f32) and the tile products of a matrix product; SYRK, TRSM and the panels stay in f32
//! (cuBLAS's SYRK takes no compute type), f64 and complex f64 tiles are never touched (as cuBLAS's
//! math modes touch single precision alone). An emulated device computes the same products with its
//! operands rounded to nearest in the short mantissa and f32 accumulation
//! ([`Backend::run_any_with_math`]), so that accuracy and refinement are tested without a GPU.

use faer::{MatMut, MatRef};

use crate::backend::Backend;
use crate::erased::{AnyMat, AnyMut, AnyRef};
use crate::error::KernelError;
use crate::op::{KernelArgs, Op};
use crate::product::Product;
use crate::scalar::{Precision, Scalar};
use crate::{Par, c32};

/// How a GPU computes the products of single-precision tiles (see the module documentation).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum TensorMath {
    /// In f32 on the FP32 units, exactly as on a CPU.
    #[default]
    Off,
    /// Operands rounded to TF32 (10 mantissa bits), products accumulated in f32.
    Tf32,
    /// Operands rounded to BF16 (7 mantissa bits), products accumulated in f32.
    Bf16,
}

impl TensorMath {
    /// Every choice, off first.
    pub const ALL: [TensorMath; 3] = [TensorMath::Off, TensorMath::Tf32, TensorMath::Bf16];

    /// The name the CLI, reports and model files use: "off", "tf32", "bf16".
    pub fn name(self) -> &'static str {
        match self {
            TensorMath::Off => "off",
            TensorMath::Tf32 => "tf32",
            TensorMath::Bf16 => "bf16",
        }
    }

    /// Explicit mantissa bits the operands keep (23: f32's own).
    pub fn mantissa_bits(self) -> u32 {
        match self {
            TensorMath::Off => 23,
            TensorMath::Tf32 => 10,
            TensorMath::Bf16 => 7,
        }
    }

    /// The unit roundoff of the operands' rounding, 2^-(bits + 1).
    pub fn unit_roundoff(self) -> f64 {
        0.5f64.powi(self.mantissa_bits() as i32 + 1)
    }

    /// Whether `op` on tiles of `precision` computes its product this way: a product of single
    /// precision tiles (Cholesky's GEMM, a matrix product's tile, LU's trailing update) with the
    /// math on.
    pub fn applies(self, op: Op, precision: Precision) -> bool {
        self != TensorMath::Off
            && matches!(precision, Precision::S | Precision::C)
            && matches!(op, Op::GemmNt | Op::MatMul(_) | Op::LuUpdate)
    }

    /// `x` rounded to nearest (ties to even) in the short mantissa; infinities and NaNs unchanged,
    /// a value that rounds past f32's largest becomes infinite.
    pub fn round(self, x: f32) -> f32 {
        let drop = 23 - self.mantissa_bits();
        if drop == 0 || !x.is_finite() {
            return x;
        }
        let bits = x.to_bits();
        let half = (1u32 << (drop - 1)) - 1 + ((bits >> drop) & 1);
        f32::from_bits(bits.wrapping_add(half) & !((1u32 << drop) - 1))
    }

    /// Rounds every entry of a single-precision tile ([`TensorMath::round`], real and imaginary
    /// parts apart); f64 and complex f64 tiles are left as they are.
    pub fn round_tile(self, tile: AnyMut<'_>) {
        match tile {
            AnyMut::S(mut m) => {
                for j in 0..m.ncols() {
                    for i in 0..m.nrows() {
                        m[(i, j)] = self.round(m[(i, j)]);
                    }
                }
            }
            AnyMut::C(mut m) => {
                for j in 0..m.ncols() {
                    for i in 0..m.nrows() {
                        let z = m[(i, j)];
                        m[(i, j)] = c32::new(self.round(z.re), self.round(z.im));
                    }
                }
            }
            AnyMut::D(_) | AnyMut::Z(_) => {}
        }
    }
}

impl std::fmt::Display for TensorMath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for TensorMath {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown tensor math {s:?}: expected off, tf32 or bf16"))
    }
}

impl Backend {
    /// [`Backend::run_any_with`] with the products [`TensorMath::applies`] to computed as a GPU's
    /// tensor cores compute them under `math`: the product's operands rounded
    /// ([`TensorMath::round_tile`]) and accumulated in f32 (an emulated device's kernels).
    pub fn run_any_with_math(
        self,
        (op, math): (Op, TensorMath),
        reads: &[AnyRef<'_>],
        write: AnyMut<'_>,
        (args, par): (&KernelArgs, Par),
    ) -> Result<(), KernelError> {
        if !math.applies(op, write.precision()) {
            return self.run_any_with(op, reads, write, args, par);
        }
        if let (Op::LuUpdate, KernelArgs::Pivots { first, ipiv }, [panel]) = (op, args, reads) {
            let call = (*first, ipiv.as_slice(), math);
            return match (panel, write) {
                (AnyRef::S(p), AnyMut::S(c)) => self.lu_update_rounded(*p, c, call),
                (AnyRef::C(p), AnyMut::C(c)) => self.lu_update_rounded(*p, c, call),
                // Mismatched operands: the plain kernel says what is wrong.
                (_, write) => self.run_any_with(op, reads, write, args, par),
            };
        }
        let rounded: Vec<AnyMat> = reads
            .iter()
            .map(|&r| {
                let mut copy = AnyMat::zeros(r.precision(), r.shape().0, r.shape().1);
                copy.as_mut().copy_from(r, None)?;
                math.round_tile(copy.as_mut());
                Ok(copy)
            })
            .collect::<Result<_, KernelError>>()?;
        let views: Vec<AnyRef<'_>> = rounded.iter().map(AnyMat::as_ref).collect();
        self.run_any_with(op, &views, write, args, par)
    }

    /// LU's update of the block column `c` by the factored `panel` ([`Op::LuUpdate`] from the
    /// step's row `first`, its interchanges `ipiv`) with the product C_2 - L_21 C_1 of rounded
    /// operands, one core.
    fn lu_update_rounded<T: Scalar>(
        self,
        panel: MatRef<'_, T>,
        c: MatMut<'_, T>,
        (first, ipiv, math): (usize, &[usize], TensorMath),
    ) -> Result<(), KernelError> {
        let op = Op::LuUpdate;
        let rows = c.nrows().checked_sub(first).ok_or(KernelError::Operands {
            op,
            reason: format!(
                "the step's first row {first} lies below the block column ({} rows)",
                c.nrows()
            ),
        })?;
        if panel.nrows() != c.nrows() || first + ipiv.len() > c.nrows() {
            return Err(KernelError::Operands {
                op,
                reason: format!(
                    "a panel {}x{} with {} interchanges from row {first} on a block column {}x{}",
                    panel.nrows(),
                    panel.ncols(),
                    ipiv.len(),
                    c.nrows(),
                    c.ncols()
                ),
            });
        }
        let (panel, mut c) = (panel.subrows(first, rows), c.subrows_mut(first, rows));
        let b = panel.ncols();
        // The swaps and the solve as the plain kernel does them (a panel of its first b rows, no
        // interchange left to apply), then the product of the rounded operands.
        crate::swap_rows(c.as_mut(), ipiv);
        let identity: Vec<usize> = (0..b).collect();
        let (mut c1, c2) = c.split_at_row_mut(b);
        self.lu_update(panel.subrows(0, b), &identity, c1.as_mut(), Par::Seq)?;
        if rows > b {
            let mut l21 = panel.subrows(b, rows - b).to_owned();
            let mut x = c1.as_ref().to_owned();
            math.round_tile(l21.as_mut().into());
            math.round_tile(x.as_mut().into());
            self.matmul_seq(Product::subtract(l21.as_ref(), x.as_ref()), c2)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::Mat;

    #[test]
    fn rounding_keeps_the_short_mantissa_to_nearest_ties_to_even() {
        let tf32 = TensorMath::Tf32;
        // 1 + 2^-11 is a tie between 1 and 1 + 2^-10: even (1) wins; 1 + 3 * 2^-11 rounds up.
        assert_eq!(tf32.round(1.0 + 0.5f32.powi(11)), 1.0);
        assert_eq!(
            tf32.round(1.0 + 3.0 * 0.5f32.powi(11)),
            1.0 + 0.5f32.powi(9)
        );
        assert_eq!(
            TensorMath::Bf16.round(1.0 + 0.5f32.powi(8) * 1.5),
            1.0 + 0.5f32.powi(7)
        );
        assert_eq!(TensorMath::Off.round(0.1), 0.1);
        assert_eq!(tf32.round(-0.1), -tf32.round(0.1));
        assert!(tf32.round(f32::MAX).is_infinite());
        assert!(tf32.round(f32::NAN).is_nan());
        for x in [0.1f32, 3.7, -123.456, 1e-30, 6.02e23] {
            let (r, u) = (TensorMath::Bf16.round(x), TensorMath::Bf16.unit_roundoff());
            assert!(((r - x) / x).abs() as f64 <= u, "{x} -> {r}");
            assert_eq!(
                r.to_bits() & ((1 << 16) - 1),
                0,
                "{x} -> {r} keeps low bits"
            );
        }
    }

    #[test]
    fn only_single_precision_products_are_rounded() {
        let m = TensorMath::Tf32;
        assert!(m.applies(Op::GemmNt, Precision::S) && m.applies(Op::LuUpdate, Precision::C));
        assert!(!m.applies(Op::GemmNt, Precision::D) && !m.applies(Op::Syrk, Precision::S));
        assert!(!TensorMath::Off.applies(Op::GemmNt, Precision::S));
        assert_eq!("bf16".parse::<TensorMath>(), Ok(TensorMath::Bf16));
        assert!("fp16".parse::<TensorMath>().unwrap_err().contains("tf32"));
    }

    /// The emulated products carry the short mantissa's error, the plain ones f32's; LU's update
    /// with rounding keeps its swaps and solve exact.
    #[test]
    fn emulated_products_carry_the_short_mantissas_error() {
        let n = 64;
        let a = Mat::<f32>::from_fn(n, n, |i, j| ((i * 7 + j * 13) % 17) as f32 / 17.0 + 0.01);
        let b = Mat::<f32>::from_fn(n, n, |i, j| ((i * 5 + j * 3) % 11) as f32 / 11.0 + 0.02);
        let exact = Mat::<f64>::from_fn(n, n, |i, j| {
            -(0..n)
                .map(|k| f64::from(a[(i, k)]) * f64::from(b[(j, k)]))
                .sum::<f64>()
        });
        let error = |math: TensorMath| {
            let mut c = Mat::<f32>::zeros(n, n);
            let reads = [a.as_ref().into(), b.as_ref().into()];
            let run = (&KernelArgs::None, Par::Seq);
            Backend::Faer
                .run_any_with_math((Op::GemmNt, math), &reads, c.as_mut().into(), run)
                .unwrap();
            (0..n)
                .flat_map(|j| (0..n).map(move |i| (i, j)))
                .map(|(i, j)| (f64::from(c[(i, j)]) - exact[(i, j)]).abs() / exact[(i, j)].abs())
                .fold(0.0, f64::max)
        };
        let (off, tf32, bf16) = (
            error(TensorMath::Off),
            error(TensorMath::Tf32),
            error(TensorMath::Bf16),
        );
        assert!(off < 1e-5, "f32 error {off}");
        assert!(
            tf32 > 10.0 * off && tf32 < 4.0 * TensorMath::Tf32.unit_roundoff(),
            "{tf32}"
        );
        assert!(
            bf16 > 4.0 * tf32 && bf16 < 4.0 * TensorMath::Bf16.unit_roundoff(),
            "{bf16}"
        );

        // LU's update: the rounded run differs from the plain one below the panel only.
        let (m, w) = (48, 8);
        let mut panel = Mat::<f32>::from_fn(m, w, |i, j| {
            if i == j {
                2.0
            } else {
                0.1 + (i + j) as f32 * 0.01
            }
        });
        let mut ipiv = vec![0; w];
        Backend::Faer
            .lu_panel(panel.as_mut(), &mut ipiv, Par::Seq)
            .unwrap();
        let c0 = Mat::<f32>::from_fn(m, 5, |i, j| 1.0 / (1.0 + i as f32 + 3.0 * j as f32));
        let args = KernelArgs::Pivots { first: 0, ipiv };
        let update = |math| {
            let mut c = c0.clone();
            Backend::Faer
                .run_any_with_math(
                    (Op::LuUpdate, math),
                    &[panel.as_ref().into()],
                    c.as_mut().into(),
                    (&args, Par::Seq),
                )
                .unwrap();
            c
        };
        let (plain, rounded) = (update(TensorMath::Off), update(TensorMath::Tf32));
        let top = (0..5).flat_map(|j| (0..w).map(move |i| (i, j)));
        assert!(
            top.into_iter()
                .all(|(i, j)| plain[(i, j)] == rounded[(i, j)])
        );
        let below = (0..5)
            .flat_map(|j| (w..m).map(move |i| (i, j)))
            .map(|(i, j)| (plain[(i, j)] - rounded[(i, j)]).abs())
            .fold(0.0f32, f32::max);
        assert!(below > 0.0 && below < 1e-2, "{below}");
    }
}
