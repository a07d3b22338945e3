//! The general matrix product C <- alpha op(A) op(B) + beta C on a heterogeneous node:
//! model-driven tiling, static and dynamic allocation, and the data it moves measured
//! against lower bounds.
//!
//! One call ([`Gemm::run`] on a real [`Platform`], [`Gemm::simulate`] on a modelled one)
//! goes through the same steps:
//! 1. **Machine.** The run's workers with, for each, the seconds of one T x T x T GEMM tile
//!    at candidate tile sizes (calibrated models, or the platform model's rates), the
//!    capacity of each memory node and the host-device link.
//! 2. **Tile size** (unless given): for each candidate T, Anastasiadis's (2024) data-reuse pipeline
//!    model (its Eq. 2.5) on each memory node's share of the r x s x t subkernels, shares
//!    in proportion to speed (the heterogeneous split that makes all finish together,
//!    Ballard et al. (2011)): a node's time is `max(t_h2d, t_exec) k_in + t_exec (k - k_in) + t_in +
//!    t_out`, where k_in counts the tiles it must fetch (A and B strips of a square zone:
//!    2 sqrt(area) t, plus its C tiles) beyond the first subkernel's. The predicted time is
//!    the slowest node's; the smallest wins (ties to the larger tile). Ragged tiles count
//!    as full ones, which penalises padding, as Anastasiadis's (2024) C_padding does.
//! 3. **Strategy** (see [`Strategy`]); `auto` picks, from the same model, `dmda` without
//!    devices (no copies to save), `max-reuse` when some device cannot hold its PERI-SUM
//!    share's working set (A and B strips and C zone), else `peri-sum` with EffectiveSteal
//!    (Eyraud-Dubois and Lambert's (2018) best).
//! 4. **Run** on the runtime (real threads or the simulator), with the static plan or MCT.
//!    Device workers overlap copies and kernels (uploads on their own stream, prefetch of
//!    the next two planned tasks), reuse resident tiles, and evict LRU (or, for
//!    max-reuse, exactly what the plan releases).
//! 5. **Accounting**: bytes per link and per device from the trace, against lower bounds:
//!    for each device that performed G tile updates, at least max(3 G^{2/3}, G
//!    sqrt(27/(8m)) - m) tiles (Loomis-Whitney: the A, B and C tiles G updates touch, all
//!    starting in host memory; and Dongarra et al.'s (2007) bound with m tile buffers). The report also
//!    gives the bound for the work split that equalises finish times and, for static
//!    partitions, the PERI-SUM bound of the planned shares.
//!
//! Placements: an operand marked [`Placement::Device`] is copied to that device before
//! the clock starts (not timed, not counted); A and B stay valid on the host too, C's
//! only valid copy is then the device's. The result is always written back into the
//! caller's C (inside the timed run). Bounds that assume host-resident operands are then
//! reported as 0 for what was placed.

mod cost;
pub mod partition;
mod plan;
mod report;
pub mod strategy;

use cost::{Machine, choose_tile, known_gemm_tiles, predict};
use plan::Planned;
pub use report::{BytesMoved, GemmReport};

use faer::{MatMut, MatRef};
use hetla_bounds::communication::{
    device_transfers_lower_bound, equal_finish_split, half_perimeter_lower_bound,
};
use hetla_clusters::ClusterSpec;
use hetla_factorizations::{MATMUL_A, MATMUL_B, MATMUL_C, MatMul, MatMulTiling, Mode, TileRef};
use serde::Serialize;

pub use partition::Discretisation;
pub use strategy::{Processor, Strategy};

use crate::model::Modelled;
use crate::tile_work::{TileWork, run_error};
use crate::{Backend, Error, Result, Scalar, TiledMatrix};
use hetla_runtime::{HOST, MemoryNode};
use hetla_runtime::{
    KernelKey, Platform, ResourceClass, ResourceKind, RunOptions, SchedulerKind, Trace, WorkerInfo,
    execute,
};
use hetla_runtime::{SimOptions, SimWork, simulate};

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
    trans_a: bool,
    /// op(B) = B^T.
    trans_b: bool,
    /// Factor of the product (default 1).
    alpha: f64,
    /// Factor of the old C (default 0: C is overwritten, never read).
    beta: f64,
    /// Tile side (default: chosen by the model).
    tile: Option<usize>,
    /// Allocation strategy (default `auto`).
    strategy: Strategy,
    /// Where A, B and C start.
    placement: [Placement; 3],
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
        }
    }
}

impl Gemm {
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

    /// Whether op(A) and op(B) are transposes.
    pub fn transposes(&self) -> (bool, bool) {
        (self.trans_a, self.trans_b)
    }

    /// alpha and beta.
    pub fn factors(&self) -> (f64, f64) {
        (self.alpha, self.beta)
    }

    fn params(&self) -> MatMul {
        MatMul::new(self.trans_a, self.trans_b, self.alpha, self.beta)
    }

    /// Checks the options against a machine with `devices` devices.
    fn check(&self, devices: usize) -> Result<()> {
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

    /// Computes C <- alpha op(A) op(B) + beta C on the process-wide platform that
    /// `solve_spd` and `Cholesky::new()` use ([`Platform::shared`]: `auto` clusters, faer
    /// kernels), built on first use.
    pub fn run_shared<T: Scalar>(
        &self,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        c: MatMut<'_, T>,
    ) -> Result<GemmReport> {
        let platform = Platform::shared(&ClusterSpec::default(), Backend::default())?;
        self.run(&platform, a, b, c)
    }

    /// Computes C <- alpha op(A) op(B) + beta C on `platform`, in any precision (for a
    /// complex type a transposed operand is its adjoint, see [`crate::Scalar`]).
    pub fn run<T: Scalar>(
        &self,
        platform: &Platform,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        c: MatMut<'_, T>,
    ) -> Result<GemmReport> {
        self.run_traced(platform, a, b, c).map(|(report, _)| report)
    }

    /// As [`Gemm::run`], with the trace of the run (empty when there was nothing to
    /// multiply).
    pub fn run_traced<T: Scalar>(
        &self,
        platform: &Platform,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        mut c: MatMut<'_, T>,
    ) -> Result<(GemmReport, Trace)> {
        self.check(platform.devices().len())?;
        let precision = T::PRECISION;
        let (m, n, k) = self.dimensions(
            (a.nrows(), a.ncols()),
            (b.nrows(), b.ncols()),
            (c.nrows(), c.ncols()),
        )?;
        if k == 0 || m == 0 || n == 0 {
            // Nothing to multiply: C <- beta C (BLAS's quick return).
            platform.backend().matmul(
                faer::Mat::<T>::zeros(m, 0).as_ref(),
                faer::Mat::<T>::zeros(0, n).as_ref(),
                c.as_mut(),
                self.alpha,
                self.beta,
                faer::Par::Seq,
            )?;
            let empty = Trace::new(platform.workers().to_vec(), Vec::new(), 0.0);
            return Ok((self.empty_report(precision, (m, n, k)), empty));
        }
        let models = platform.models();
        let workers = platform.workers();
        let tile_seconds = |w: usize, tile: usize| {
            models
                .get(
                    &KernelKey::square(hetla_kernels::Op::GemmNt, tile).in_precision(precision),
                    &workers[w].class,
                )
                .and_then(|s| s.calibrated_mean())
        };
        let links = platform.links();
        let copy_seconds =
            |node: MemoryNode, bytes: usize| hetla_runtime::copy_seconds(&links, HOST, node, bytes);
        let mut capacities = vec![None];
        capacities.extend(platform.devices().iter().map(|d| Some(d.device.budget())));
        let known_tiles = known_gemm_tiles(&models, workers, precision);
        let machine = Machine {
            workers,
            capacities,
            tile_seconds: &tile_seconds,
            copy_seconds: &copy_seconds,
            known_tiles,
            precision,
        };
        let (tiling, options, planned) = self.plan(&machine, m, n, k)?;
        let mut graph = hetla_factorizations::matmul(&tiling);
        graph.scale_flops(precision.flop_factor());
        let ta = TiledMatrix::read_only(a, tiling.a.tile(), "A")?;
        let tb = TiledMatrix::read_only(b, tiling.b.tile(), "B")?;
        let tc = TiledMatrix::new(c, tiling.c.tile(), "C")?;
        let work = TileWork {
            graph: &graph,
            matrices: &[&ta, &tb, &tc],
            backend: platform.backend(),
        };
        let trace = execute(platform, &work, &options).map_err(|e| run_error(&graph, None, e))?;
        Ok((self.report(&machine, &tiling, &planned, &trace), trace))
    }

    /// Simulates C <- alpha op(A) op(B) + beta C of shape (m, n, k) on a modelled machine.
    pub fn simulate(
        &self,
        machine: &Modelled<'_>,
        shape: (usize, usize, usize),
        options: &SimOptions,
    ) -> Result<GemmReport> {
        self.simulate_traced(machine, shape, options)
            .map(|(report, _)| report)
    }

    /// [`Gemm::simulate`], with the simulated run's trace.
    pub fn simulate_traced(
        &self,
        machine: &Modelled<'_>,
        (m, n, k): (usize, usize, usize),
        options: &SimOptions,
    ) -> Result<(GemmReport, Trace)> {
        let (model, gpus, machine_precision) = (machine.model, machine.gpus, machine.precision);
        model.check_precision(machine_precision)?;
        let platform = machine.sim_platform()?;
        self.check(gpus)?;
        if m == 0 || n == 0 || k == 0 {
            return Err(Error::InvalidOption {
                option: "m/n/k",
                reason: "a simulated product needs m, n and k of at least 1".into(),
            });
        }
        let workers = platform.workers.clone();
        let tile_seconds = |w: usize, tile: usize| {
            model.duration(
                &KernelKey::square(hetla_kernels::Op::GemmNt, tile).in_precision(machine_precision),
                tile,
                &workers[w].class,
            )
        };
        let copy_seconds =
            |node: MemoryNode, bytes: usize| platform.copy_seconds(HOST, node, bytes);
        let mut known_tiles = model.tiles();
        known_tiles.retain(|&t| {
            workers.iter().all(|w| {
                let op = hetla_kernels::Op::GemmNt;
                model.rate(op, t, machine_precision, &w.class).is_some()
            })
        });
        let machine = Machine {
            workers: &workers,
            capacities: platform.capacities.clone(),
            tile_seconds: &tile_seconds,
            copy_seconds: &copy_seconds,
            known_tiles,
            precision: machine_precision,
        };
        let (tiling, run, planned) = self.plan(&machine, m, n, k)?;
        let mut graph = hetla_factorizations::matmul(&tiling);
        graph.scale_flops(machine_precision.flop_factor());
        let keys: Vec<KernelKey> = graph
            .tasks()
            .iter()
            .map(|task| {
                KernelKey::of_task(task, |t| {
                    tiling
                        .tiling(t.matrix)
                        .map_or((0, 0), |x| x.tile_shape(t.row, t.col))
                })
                .in_precision(machine_precision)
            })
            .collect();
        let tile_bytes = |t: TileRef| {
            let (rows, cols) = tiling
                .tiling(t.matrix)
                .map_or((0, 0), |x| x.tile_shape(t.row, t.col));
            rows * cols * machine_precision.bytes()
        };
        let tile = tiling.c.tile();
        let duration = |key: &KernelKey, class: &ResourceClass| model.duration(key, tile, class);
        let work = SimWork {
            graph: &graph,
            keys: &keys,
            tile_bytes: &tile_bytes,
            duration: &duration,
        };
        // The strategy's scheduler, plan and placement; the caller's restrictions and beta.
        let options = SimOptions {
            run: RunOptions {
                scheduler: run.scheduler,
                plan: run.plan,
                placement: run.placement,
                ..options.run.clone()
            },
            ..options.clone()
        };
        let trace = simulate(&platform, &work, &options)?;
        Ok((self.report(&machine, &tiling, &planned, &trace), trace))
    }

    /// (m, n, k) from the stored shapes of A, B and C; errors name the operand.
    fn dimensions(
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
