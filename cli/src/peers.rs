//! The peers a run is compared with (`hetla cholesky --compare`): single-call Cholesky
//! factorisations of whole matrices by faer and by LAPACK's dpotrf through OpenBLAS, and a DGEMM of
//! the same order as the practical peak of the machine. Each uses all the given threads its own way
//! (a rayon pool for faer, OpenBLAS's threads), as a user calling the library directly would.

#[cfg(feature = "cuda")]
use faer::prelude::ReborrowMut;
use std::time::Instant;

use faer::{Mat, MatMut};
use hetla::{Backend, Precision, Scalar};

use crate::{Error, Result};

/// One peer's rate.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PeerRate {
    /// The peer ("faer-llt", "openblas-dpotrf", "faer-dgemm", ...).
    pub name: String,
    /// Seconds of the call (the best of the timed calls with `--repeat`).
    pub seconds: f64,
    /// Gflop/s (n^3/3 flops for a Cholesky, 2n^3 for a DGEMM), from `seconds`.
    pub gflops: f64,
    /// The median of the timed calls' seconds (`seconds` for one call).
    pub median_seconds: f64,
    /// How many calls were timed.
    pub runs: usize,
}

/// The times of repeated runs: the best, the median and how many.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Timings {
    /// The shortest run, seconds.
    pub best: f64,
    /// The median run (the mean of the two middle ones for an even count), seconds.
    pub median: f64,
    /// Timed runs.
    pub runs: usize,
}

/// Runs `f` as `--repeat` asks: with `Some(r)` one untimed warm-up and then `r` timed runs (at
/// least one), with `None` a single cold run. `f` returns its result and the seconds it measured
/// (so that it can leave set-up such as copying a matrix untimed). Returns the result of the
/// fastest run and the timings.
pub fn repeat<T>(
    runs: Option<usize>,
    mut f: impl FnMut() -> Result<(T, f64)>,
) -> Result<(T, Timings)> {
    if runs.is_some() {
        f()?;
    }
    let runs = runs.unwrap_or(1).max(1);
    let mut best: Option<(T, f64)> = None;
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let (value, seconds) = f()?;
        times.push(seconds);
        if best.as_ref().is_none_or(|(_, b)| seconds < *b) {
            best = Some((value, seconds));
        }
    }
    let (value, _) = best.expect("at least one run");
    Ok((value, timings(&mut times)))
}

/// The best, the median and the count of `times` (at least one).
pub fn timings(times: &mut [f64]) -> Timings {
    times.sort_by(f64::total_cmp);
    let runs = times.len();
    let median = (times[(runs - 1) / 2] + times[runs / 2]) / 2.0;
    Timings {
        best: times[0],
        median,
        runs,
    }
}

impl PeerRate {
    /// The peer's rate over repeated calls: `flops` at the best time, with the median.
    pub fn from_timings(name: &str, timings: Timings, flops: f64) -> Self {
        PeerRate {
            name: name.to_owned(),
            seconds: timings.best,
            gflops: flops / timings.best / 1e9,
            median_seconds: timings.median,
            runs: timings.runs,
        }
    }
}

/// A rayon pool of `threads` threads for a peer (faer's calls run inside it).
pub fn pool(threads: usize) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::Spawn {
            threads,
            reason: e.to_string(),
        })
}

fn rate(name: &str, seconds: f64, flops: f64) -> PeerRate {
    PeerRate {
        name: name.to_owned(),
        seconds,
        gflops: flops / seconds / 1e9,
        median_seconds: seconds,
        runs: 1,
    }
}

/// The peer name of a library's own Cholesky in a precision: "faer-llt", or LAPACK's routine
/// through OpenBLAS ("openblas-dpotrf", "openblas-zpotrf").
pub fn cholesky_peer_name(backend: Backend, precision: Precision) -> String {
    match backend {
        Backend::Faer => "faer-llt".to_owned(),
        Backend::OpenBlas => format!("openblas-{precision}potrf"),
    }
}

/// Times a library's own in-place Cholesky of the whole matrix (one call: faer on a pool of
/// `threads`, LAPACK ?potrf on OpenBLAS's own threads), in the matrix's precision.
pub fn library_cholesky<T: Scalar>(
    backend: Backend,
    a: MatMut<'_, T>,
    threads: usize,
) -> Result<PeerRate> {
    let name = cholesky_peer_name(backend, T::PRECISION);
    let n = a.nrows();
    let pool = pool(threads)?;
    let start = Instant::now();
    pool.install(|| backend.library_potrf(a, hetla_kernels::par_for(threads)))
        .map_err(|source| Error::Peer {
            name: name.clone(),
            source,
        })?;
    Ok(rate(
        &name,
        start.elapsed().as_secs_f64(),
        (n as f64).powi(3) / 3.0 * T::PRECISION.flop_factor(),
    ))
}

/// Times a library's own call on each available backend, as the peers of a run of `flops`: faer's
/// on a pool of `cores` threads, OpenBLAS's on its own threads called from this thread as a user's
/// program would (its recursive routines need more stack than a rayon worker has). Each run works
/// on fresh operands from `fresh` (made untimed), `runs` as [`repeat`]'s; `name` names a backend's
/// peer ("faer-lu", "openblas-dgetrf"), or is `None` for a backend without one; `call` runs it.
pub fn library_peers<S: Send>(
    fresh: impl Fn() -> S,
    cores: usize,
    runs: Option<usize>,
    flops: f64,
    name: impl Fn(Backend) -> Option<String>,
    call: impl Fn(Backend, S, hetla::Par) -> Result<(), hetla_kernels::KernelError> + Sync,
) -> Result<Vec<PeerRate>> {
    let pool = pool(cores)?;
    let mut rates = Vec::new();
    for backend in Backend::available() {
        let Some(name) = name(backend) else {
            continue;
        };
        let ((), t) = repeat(runs, || {
            let operands = fresh();
            let start = Instant::now();
            let par = hetla::Par::rayon(cores);
            let result = match backend {
                Backend::Faer => pool.install(|| call(backend, operands, par)),
                Backend::OpenBlas => call(backend, operands, par),
            };
            result.map_err(|source| Error::Peer {
                name: name.clone(),
                source,
            })?;
            Ok(((), start.elapsed().as_secs_f64()))
        })?;
        rates.push(PeerRate::from_timings(&name, t, flops));
    }
    Ok(rates)
}

/// Times a library's own inverse of the whole SPD matrix, factorisation included (faer's llt +
/// inverse on a pool of `threads`, LAPACK ?potrf + ?potri on OpenBLAS's threads); seconds.
pub fn library_inverse<T: Scalar>(
    backend: Backend,
    a: MatMut<'_, T>,
    threads: usize,
) -> Result<f64> {
    let pool = pool(threads)?;
    let start = Instant::now();
    pool.install(|| backend.library_inverse(a, hetla_kernels::par_for(threads)))
        .map_err(|source| Error::Peer {
            name: format!("{backend} inverse"),
            source,
        })?;
    Ok(start.elapsed().as_secs_f64())
}

/// Times C <- C - A B with n x n column-major matrices (each library's fast layout) in precision
/// `T` through `backend`'s own parallel product on `threads` threads ("faer-dgemm",
/// "openblas-sgemm").
pub fn gemm<T: Scalar>(backend: Backend, n: usize, threads: usize) -> Result<PeerRate> {
    let a = Mat::from_fn(n, n, |i, j| {
        T::from_f64(((i * 7 + j * 3) % 11) as f64 / 11.0)
    });
    let b = Mat::from_fn(n, n, |i, j| {
        T::from_f64(((i * 5 + j * 3) % 13) as f64 / 13.0)
    });
    let mut c = Mat::<T>::zeros(n, n);
    let pool = pool(threads)?;
    let start = Instant::now();
    pool.install(|| {
        backend.library_gemm_sub(
            a.as_ref(),
            b.as_ref(),
            c.as_mut(),
            hetla_kernels::par_for(threads),
        )
    })?;
    Ok(rate(
        &format!("{}-{}gemm", backend.name(), T::PRECISION),
        start.elapsed().as_secs_f64(),
        2.0 * (n as f64).powi(3) * T::PRECISION.flop_factor(),
    ))
}

/// The timings of a device peer's calls, warmed up and timed on the device.
#[cfg(feature = "cuda")]
fn device_timings(times: Vec<f64>) -> Timings {
    let mut times = times;
    times.sort_by(f64::total_cmp);
    let runs = times.len().max(1);
    let at = |i: usize| times.get(i).copied().unwrap_or(f64::NAN);
    Timings {
        best: at(0),
        median: (at((runs - 1) / 2) + at(runs / 2)) / 2.0,
        runs,
    }
}

/// Whether `platform` has a real GPU (not only emulated devices): the GPU peers and the check on
/// the GPU need one.
pub fn real_gpu(platform: &hetla::Platform) -> bool {
    platform
        .devices()
        .iter()
        .any(|d| d.device.name() != "emulated")
}

/// cuSOLVER's `call` as `--compare` asks for it (`asked`: its GPU peers, a CUDA GPU in `platform`,
/// a precision the call takes): its three rates ([`cusolver`]) on GPU 0, `runs` times each (once
/// without `--repeat`); none otherwise.
#[cfg(feature = "cuda")]
pub fn cusolver_asked<T: Scalar>(
    (asked, platform): (bool, &hetla::Platform),
    call: Cusolver,
    (a, runs, flops): (faer::MatRef<'_, T>, Option<usize>, f64),
) -> Result<Vec<PeerRate>> {
    if !asked || !real_gpu(platform) || call.check_precision(T::PRECISION).is_err() {
        return Ok(Vec::new());
    }
    Ok(cusolver(call, a, 0, runs.unwrap_or(1), flops)?.to_vec())
}

/// What a cuSOLVER peer computes.
#[cfg(feature = "cuda")]
pub use hetla_kernels::cuda::SolverPeer as Cusolver;

/// cuSOLVER's `call` (the matrix's precision) on GPU `index`, timed three ways after one warm-up
/// call each, best and median of `runs`: on the matrix already in device memory (its copy there not
/// timed: the reference of the GPU issue's targets; the kernels by their events); as a program
/// calls it on a matrix in host memory (`a` copied in from pageable memory as it lies, the calls,
/// the result copied back out, each call timed whole by the wall clock); and the same from
/// page-locked host memory, as a program that allocates its matrices page-locked does (the copies
/// by DMA at the link's rate; the locking not timed). No cuSOLVER call starts before its whole
/// matrix is on the device, so the copies cannot overlap the factorisation: page-locked copies are
/// the best a cuSOLVER user can do on one GPU. `flops`: the count hetla's rate of the same work
/// uses.
#[cfg(feature = "cuda")]
pub fn cusolver<T: Scalar>(
    call: Cusolver,
    a: faer::MatRef<'_, T>,
    index: usize,
    runs: usize,
    flops: f64,
) -> Result<[PeerRate; 3]> {
    let name = match call {
        Cusolver::Potrf => format!("cusolver-{}potrf", T::PRECISION),
        Cusolver::Inverse => format!("cusolver-{0}potrf+{0}potri", T::PRECISION),
        Cusolver::Getrf => format!("cusolver-{}getrf", T::PRECISION),
        Cusolver::Sytrf => format!("cusolver-{}sytrf", T::PRECISION),
        Cusolver::Geqrf => format!("cusolver-{}geqrf", T::PRECISION),
        Cusolver::Gels { .. } => {
            let apply = if T::PRECISION.is_complex() {
                "unmqr"
            } else {
                "ormqr"
            };
            format!("cusolver-{0}geqrf+{0}{apply}+{0}trsm", T::PRECISION)
        }
        // cuSOLVER's names: <working><lower>gesv, X for TF32, B for BF16 (Y and E for c64).
        Cusolver::Irs { math, .. } => {
            let lower = match (T::PRECISION.is_complex(), math) {
                (false, hetla::TensorMath::Off) => "s",
                (false, hetla::TensorMath::Tf32) => "x",
                (false, hetla::TensorMath::Bf16) => "b",
                (true, hetla::TensorMath::Off) => "c",
                (true, hetla::TensorMath::Tf32) => "y",
                (true, hetla::TensorMath::Bf16) => "e",
            };
            format!("cusolver-{}{lower}gesv", T::PRECISION)
        }
    };
    device_peer::<T>(index, (&name, flops), a.shape(), |gpu, mut out| {
        Ok([
            gpu.time_resident_solver(call, a, runs)?,
            gpu.time_host_solver(call, a, out.rb_mut(), runs)?,
            gpu.page_locked(&[a], out, |m, o| gpu.time_host_solver(call, m[0], o, runs))?,
        ])
    })
}

/// cuBLAS's ?gemm C = A B (the matrices' precision) on GPU `index`, timed as [`cusolver`]: with A,
/// B and C in device memory, from pageable host memory (A and B copied in, the product, C copied
/// out, each call timed whole), and the same from page-locked host memory.
#[cfg(feature = "cuda")]
pub fn cublas_gemm<T: Scalar>(
    a: faer::MatRef<'_, T>,
    b: faer::MatRef<'_, T>,
    index: usize,
    runs: usize,
) -> Result<[PeerRate; 3]> {
    let name = format!("cublas-{}gemm", T::PRECISION);
    let flops = 2.0 * a.nrows() as f64 * a.ncols() as f64 * b.ncols() as f64;
    let flops = flops * T::PRECISION.flop_factor();
    device_peer::<T>(
        index,
        (&name, flops),
        (a.nrows(), b.ncols()),
        |gpu, mut c| {
            Ok([
                gpu.time_resident_gemm(a, b, runs)?,
                gpu.time_host_gemm(a, b, c.rb_mut(), runs)?,
                gpu.page_locked(&[a, b], c, |m, c| gpu.time_host_gemm(m[0], m[1], c, runs))?,
            ])
        },
    )
}

/// A GPU peer on GPU `index`: `time` gets the device and a host output of `shape` and returns the
/// seconds of the resident calls, of the calls from pageable host memory and of those from
/// page-locked host memory, which become the rates "`name`-resident", "`name`-from-host" and
/// "`name`-page-locked" of `flops`.
#[cfg(feature = "cuda")]
fn device_peer<T: Scalar>(
    index: usize,
    (name, flops): (&str, f64),
    shape: (usize, usize),
    time: impl FnOnce(
        &hetla_kernels::cuda::GpuContext,
        faer::MatMut<'_, T>,
    ) -> std::result::Result<[Vec<f64>; 3], hetla_kernels::KernelError>,
) -> Result<[PeerRate; 3]> {
    let gpu = hetla_kernels::cuda::GpuContext::new(index)?;
    let mut out = faer::Mat::<T>::zeros(shape.0, shape.1);
    let [resident, from_host, locked] = time(&gpu, out.as_mut())?;
    let rate =
        |how, times| PeerRate::from_timings(&format!("{name}-{how}"), device_timings(times), flops);
    Ok([
        rate("resident", resident),
        rate("from-host", from_host),
        rate("page-locked", locked),
    ])
}
