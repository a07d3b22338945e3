//! The product's options: what it computes (transposes, scalars), its tile, its strategy and where
//! its operands start.

use hetla_factorizations::MatMul;
use hetla_runtime::{HostMemory, WriteBack};

use super::strategy::Strategy;
use crate::{Error, Result};

/// Where an operand lives when the product starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Placement {
    /// Host memory (the caller's matrix).
    #[default]
    Host,
    /// Already in the memory of device `i` (see the module documentation).
    Device(usize),
}

/// Configures general matrix products C <- alpha op(A) op(B) + beta C.
///
/// ```
/// use faer::Mat;
/// let platform = hetla::Platform::new(&hetla::ClusterSpec::Auto, hetla::Backend::Faer)?;
/// let a = Mat::from_fn(30, 20, |i, j| (i + 2 * j) as f64);
/// let b = Mat::from_fn(20, 10, |i, j| (i as f64 - j as f64));
/// let mut c = Mat::<f64>::zeros(30, 10);
/// hetla::Gemm::new().tile(8).run(&platform, a.as_ref(), b.as_ref(), c.as_mut())?;
/// let expected = &a * &b;
/// assert!((&c - &expected).norm_max() < 1e-10);
/// // The same product on the process-wide platform `solve_spd` uses.
/// let mut d = Mat::<f64>::zeros(30, 10);
/// hetla::Gemm::new().run_shared(a.as_ref(), b.as_ref(), d.as_mut())?;
/// assert!((&d - &expected).norm_max() < 1e-10);
/// # Ok::<(), hetla::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gemm {
    /// op(A) = A^T.
    pub(super) trans_a: bool,
    /// op(B) = B^T.
    pub(super) trans_b: bool,
    /// Factor of the product (default 1).
    pub(super) alpha: f64,
    /// Factor of the old C (default 0: C is overwritten, never read).
    pub(super) beta: f64,
    /// Tile side (default: chosen by the model).
    pub(super) tile: Option<usize>,
    /// Allocation strategy (default `auto`).
    pub(super) strategy: Strategy,
    /// Where A, B and C start.
    pub(super) placement: [Placement; 3],
    /// How the host matrices meet the GPUs' copies.
    pub(super) host_memory: HostMemory,
    /// A, B and C live on the device of `placement` for the whole product ([`Gemm::resident`]).
    pub(super) resident: bool,
}

impl Default for Gemm {
    fn default() -> Self {
        Self {
            trans_a: false,
            trans_b: false,
            alpha: 1.0,
            beta: 0.0,
            tile: None,
            strategy: Strategy::Auto,
            placement: [Placement::Host; 3],
            host_memory: HostMemory::Staged,
            resident: false,
        }
    }
}

impl Gemm {
    /// How the host matrices meet a GPU's copies ([`HostMemory`]; default [`HostMemory::Staged`]):
    /// packed into page-locked staging buffers, or A, B and C page-locked for the run and copied
    /// straight by the GPU's DMA engines. Nothing changes without a GPU.
    pub fn host_memory(mut self, host_memory: HostMemory) -> Self {
        self.host_memory = host_memory;
        self
    }

    /// C <- A B (alpha 1, beta 0), tile and strategy chosen by the model.
    pub fn new() -> Self {
        Self::default()
    }

    /// Transposes: op(A) = A^T when `a`, op(B) = B^T when `b`.
    pub fn transpose(mut self, a: bool, b: bool) -> Self {
        self.trans_a = a;
        self.trans_b = b;
        self
    }

    /// The scalars alpha and beta.
    pub fn scalars(mut self, alpha: f64, beta: f64) -> Self {
        self.alpha = alpha;
        self.beta = beta;
        self
    }

    /// A fixed tile side.
    pub fn tile(self, tile: usize) -> Self {
        self.tile_or_model(Some(tile))
    }

    /// A fixed tile side, or (`None`) the one the model chooses.
    pub fn tile_or_model(mut self, tile: Option<usize>) -> Self {
        self.tile = tile;
        self
    }

    /// The allocation strategy.
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// Where A, B and C start.
    pub fn placement(mut self, a: Placement, b: Placement, c: Placement) -> Self {
        self.placement = [a, b, c];
        self
    }

    /// Times the product as a call on matrices already in the memory of GPU `gpu` is timed: A, B
    /// and C placed there before the run's clock starts, and C left there when it stops
    /// ([`hetla_runtime::WriteBack::Resident`]); C's copy back into the caller's matrix is made
    /// after the clock (`Placement::Device` for all three, by contrast, times it). Replaces
    /// [`Gemm::placement`]. A, B and C must fit the GPU's budget together.
    pub fn resident(mut self, gpu: usize) -> Self {
        self.placement = [Placement::Device(gpu); 3];
        self.resident = true;
        self
    }

    /// When a run of this product writes C back to host memory: after its clock for a resident
    /// product, else the runtime's default.
    pub fn write_back(&self) -> WriteBack {
        if self.resident {
            WriteBack::Resident
        } else {
            WriteBack::default()
        }
    }

    /// Whether op(A) and op(B) are transposes.
    pub fn transposes(&self) -> (bool, bool) {
        (self.trans_a, self.trans_b)
    }

    /// alpha and beta.
    pub fn factors(&self) -> (f64, f64) {
        (self.alpha, self.beta)
    }

    pub(super) fn params(&self) -> MatMul {
        MatMul::new(self.trans_a, self.trans_b, self.alpha, self.beta)
    }

    /// Checks the options against a machine with `devices` devices.
    pub(super) fn check(&self, devices: usize) -> Result<()> {
        if self.tile == Some(0) {
            return Err(Error::InvalidOption {
                option: "tile",
                reason: "the tile side must be at least 1".into(),
            });
        }
        for (name, value) in [("alpha", self.alpha), ("beta", self.beta)] {
            if !value.is_finite() {
                return Err(Error::InvalidOption {
                    option: if name == "alpha" { "alpha" } else { "beta" },
                    reason: format!("{name} must be finite, got {value}"),
                });
            }
        }
        if self.resident && devices == 0 {
            return Err(Error::InvalidOption {
                option: "resident",
                reason: "a resident product needs a GPU, and the platform has none".into(),
            });
        }
        for p in self.placement {
            if let Placement::Device(d) = p
                && d >= devices
            {
                return Err(Error::InvalidOption {
                    option: "placement",
                    reason: format!(
                        "operand placed on device {d}, but the platform has {devices} device(s)"
                    ),
                });
            }
        }
        Ok(())
    }

    /// (m, n, k) from the stored shapes of A, B and C; errors name the operand.
    pub(super) fn dimensions(
        &self,
        a: (usize, usize),
        b: (usize, usize),
        c: (usize, usize),
    ) -> Result<(usize, usize, usize)> {
        let p = self.params();
        let (m, k) = p.op_a(a);
        let (kb, n) = p.op_b(b);
        let mismatch = |reason: String| {
            Err(Error::InvalidOption {
                option: "shapes",
                reason,
            })
        };
        if kb != k {
            return mismatch(format!(
                "op(A) is {m}x{k} but op(B) is {kb}x{n}: the inner dimensions differ"
            ));
        }
        if c != (m, n) {
            return mismatch(format!("C is {}x{} but op(A) op(B) is {m}x{n}", c.0, c.1));
        }
        Ok((m, n, k))
    }
}
