//! hetla's own elementwise kernels on matrices in a GPU's memory, for what cuBLAS and cuSOLVER do
//! not do: a mixed solve's preparation on the device (A made whole from its lower triangle, its
//! column norms, and A rounded to single precision). Written in CUDA C ([`SOURCE`]), compiled once
//! a process by NVRTC (libnvrtc, loaded like the other libraries: [`crate::cuda_libs::nvrtc`]) and
//! loaded once a GPU. Where NVRTC is missing they are refused with the reason, and the caller does
//! the work on the host instead.
//!
//! Every kernel runs on the host-to-device stream (after the copies queued there, which the runs'
//! imports and hetla's writes are) and is waited for.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaFunction, CudaModule, LaunchConfig, PushKernelArg};

use super::{BlasStatus, CudaScalar, GpuContext, In, Out, blas, gpu_error, int, lock};
use crate::elementwise::{FactorKind, SpanKernel, SpanOutput, Watched};
use crate::with_scalar;
use crate::{DeviceSpan, KernelError, Precision, Scalar};

/// The kernels, over `double` (f64) and `double2` (c64) matrices, column-major with leading
/// dimensions in elements.
///
/// - `hetla_mirror_{d,z}(a, lda, n)`: the strict upper triangle of the n x n `a` set to the adjoint
///   of its strict lower one, by 32 x 32 blocks through shared memory (reads and writes coalesced).
/// - `hetla_column_norms_{d,z}(a, lda, rows, cols, sums)`: `sums[j]` = sum of the moduli of column
///   j, a block a column.
/// - `hetla_row_norms_{d,z}(a, lda, rows, cols, sums)`: `sums[i]` = sum of the moduli of row i, a
///   block of 32 x 8 threads for 32 rows (each warp reads 32 consecutive rows of a column, the 8
///   warps every 8th column, summed through shared memory).
/// - `hetla_lower(a, lda, low, ldl, rows, cols, parts, factor, whole, overflow)`: `low` = `a`
///   rounded to nearest in single precision, over `rows * parts` doubles a column (parts 2 for
///   complex), the real part of each diagonal entry multiplied by `factor` first (a raised
///   diagonal: 1 leaves it as it is, bit for bit); `overflow` (initially all ones) keeps the
///   smallest column-major index of an entry that became infinite, anywhere when `whole` is 1, else
///   on or below the diagonal.
pub const SOURCE: &str = r#"
struct cplx { double x, y; };
__device__ double modulus(double v) { return fabs(v); }
__device__ double modulus(cplx v) { return hypot(v.x, v.y); }
__device__ double adjoint(double v) { return v; }
__device__ cplx adjoint(cplx v) { cplx w; w.x = v.x; w.y = -v.y; return w; }

template <typename T>
__device__ void mirror(T* a, unsigned long long lda, unsigned long long n) {
    __shared__ T tile[32][33];
    unsigned long long bx = blockIdx.x, by = blockIdx.y;
    if (by < bx) return;
    for (unsigned int k = threadIdx.y; k < 32; k += blockDim.y) {
        unsigned long long row = by * 32 + threadIdx.x, col = bx * 32 + k;
        if (row < n && col < n) tile[k][threadIdx.x] = a[row + col * lda];
    }
    __syncthreads();
    for (unsigned int k = threadIdx.y; k < 32; k += blockDim.y) {
        unsigned long long row = bx * 32 + threadIdx.x, col = by * 32 + k;
        if (row < col && col < n) a[row + col * lda] = adjoint(tile[threadIdx.x][k]);
    }
}

template <typename T>
__device__ void column_norms(const T* a, unsigned long long lda, unsigned long long rows,
                             unsigned long long cols, double* sums) {
    __shared__ double part[256];
    for (unsigned long long j = blockIdx.x; j < cols; j += gridDim.x) {
        double s = 0.0;
        for (unsigned long long i = threadIdx.x; i < rows; i += blockDim.x) s += modulus(a[i + j * lda]);
        part[threadIdx.x] = s;
        __syncthreads();
        for (unsigned int w = blockDim.x / 2; w > 0; w /= 2) {
            if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
            __syncthreads();
        }
        if (threadIdx.x == 0) sums[j] = part[0];
        __syncthreads();
    }
}

template <typename T>
__device__ void row_norms(const T* a, unsigned long long lda, unsigned long long rows,
                          unsigned long long cols, double* sums) {
    __shared__ double part[8][33];
    unsigned long long i = blockIdx.x * 32ull + threadIdx.x;
    double s = 0.0;
    if (i < rows)
        for (unsigned long long j = threadIdx.y; j < cols; j += 8) s += modulus(a[i + j * lda]);
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && i < rows) {
        for (unsigned int k = 1; k < 8; ++k) s += part[k][threadIdx.x];
        sums[i] = s;
    }
}

extern "C" __global__ void hetla_mirror_d(double* a, unsigned long long lda, unsigned long long n) {
    mirror(a, lda, n);
}
extern "C" __global__ void hetla_mirror_z(cplx* a, unsigned long long lda, unsigned long long n) {
    mirror(a, lda, n);
}
extern "C" __global__ void hetla_column_norms_d(const double* a, unsigned long long lda,
        unsigned long long rows, unsigned long long cols, double* sums) {
    column_norms(a, lda, rows, cols, sums);
}
extern "C" __global__ void hetla_column_norms_z(const cplx* a, unsigned long long lda,
        unsigned long long rows, unsigned long long cols, double* sums) {
    column_norms(a, lda, rows, cols, sums);
}
extern "C" __global__ void hetla_row_norms_d(const double* a, unsigned long long lda,
        unsigned long long rows, unsigned long long cols, double* sums) { row_norms(a, lda, rows, cols, sums); }
extern "C" __global__ void hetla_row_norms_z(const cplx* a, unsigned long long lda,
        unsigned long long rows, unsigned long long cols, double* sums) { row_norms(a, lda, rows, cols, sums); }
extern "C" __global__ void hetla_lower(const double* a, unsigned long long lda, float* low,
        unsigned long long ldl, unsigned long long rows, unsigned long long cols,
        unsigned int parts, double factor, unsigned int whole, unsigned long long* overflow) {
    unsigned long long height = rows * parts;
    for (unsigned long long j = blockIdx.y; j < cols; j += gridDim.y) {
        for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
             i < height; i += (unsigned long long)gridDim.x * blockDim.x) {
            double v = a[i + j * lda * parts];
            if (i == j * parts) v = v * factor;
            float f = (float)v;
            low[i + j * ldl * parts] = f;
            if (isinf(f) && (whole || i / parts >= j)) atomicMin(overflow, j * rows + i / parts);
        }
    }
}
"#;

/// The PTX of [`SOURCE`], compiled once a process by NVRTC, or why it could not be.
pub fn ptx() -> Result<&'static str, KernelError> {
    static PTX: OnceLock<Result<String, String>> = OnceLock::new();
    let compiled = PTX.get_or_init(|| {
        let nvrtc = crate::cuda_libs::nvrtc();
        if !nvrtc.loaded() {
            return Err(nvrtc
                .error
                .clone()
                .unwrap_or_else(|| "NVRTC not loaded".into()));
        }
        let options = cudarc::nvrtc::CompileOptions {
            name: Some("hetla_elementwise.cu".into()),
            ..Default::default()
        };
        match cudarc::nvrtc::compile_ptx_with_opts(SOURCE, options) {
            Ok(ptx) => Ok(ptx.to_src()),
            Err(e) => Err(format!("NVRTC could not compile hetla's kernels: {e:?}")),
        }
    });
    compiled.as_deref().map_err(|why| KernelError::Gpu {
        message: format!("hetla's elementwise kernels are not available: {why}"),
    })
}

/// The kernel `name` of [`SOURCE`] on `gpu`, its module loaded once a GPU.
fn function(gpu: &GpuContext, name: &str) -> Result<CudaFunction, KernelError> {
    static MODULES: OnceLock<Mutex<HashMap<usize, Arc<CudaModule>>>> = OnceLock::new();
    let modules = MODULES.get_or_init(Mutex::default);
    let module = {
        let mut modules = lock(modules);
        match modules.get(&gpu.index) {
            Some(module) => module.clone(),
            None => {
                let ptx = cudarc::nvrtc::Ptx::from_src(ptx()?);
                let module = gpu
                    .ctx
                    .load_module(ptx)
                    .map_err(|e| gpu_error("loading hetla's elementwise kernels", e))?;
                modules.insert(gpu.index, module.clone());
                module
            }
        }
    };
    module
        .load_function(name)
        .map_err(|e| gpu_error(&format!("finding the kernel {name}"), e))
}

/// The kernel's name for `precision`'s suffix (`d` or `z`), or the error for another precision.
fn suffixed(name: &str, precision: Precision) -> Result<String, KernelError> {
    match precision {
        Precision::D => Ok(format!("{name}_d")),
        Precision::Z => Ok(format!("{name}_z")),
        other => Err(KernelError::Gpu {
            message: format!("{name} takes a matrix in d or z, not {other}"),
        }),
    }
}

impl GpuContext {
    /// Whether hetla's elementwise kernels run on this GPU (compiled and loaded), else why not.
    pub fn elementwise(&self) -> Result<(), KernelError> {
        function(self, "hetla_lower").map(|_| ())
    }

    /// Runs `kernel` on this GPU's memory and waits for it.
    ///
    /// # Safety
    /// The kernel's spans must be memory of this GPU ([`GpuContext::check_span`]), disjoint; the
    /// span it writes used by nothing else and the others unwritten during the call.
    pub unsafe fn run_span_kernel(
        &self,
        kernel: SpanKernel<'_>,
    ) -> Result<SpanOutput, KernelError> {
        // SAFETY (each call): the caller's contract.
        match kernel {
            SpanKernel::Mirror(span) => {
                unsafe { self.mirror_lower(span) }.map(|()| SpanOutput::Done)
            }
            SpanKernel::ColumnNorms(span) => {
                unsafe { self.norms(span, false) }.map(SpanOutput::Norms)
            }
            SpanKernel::RowNorms(span) => unsafe { self.norms(span, true) }.map(SpanOutput::Norms),
            SpanKernel::Lower {
                from,
                to,
                factor,
                watched,
            } => unsafe { self.lower_span(from, to, factor, watched) }.map(SpanOutput::Overflow),
            SpanKernel::Copy { from, to } => {
                unsafe { self.copy_span(from, to) }.map(|()| SpanOutput::Done)
            }
            SpanKernel::Product { a, x, r } => {
                unsafe { self.span_product(a, x, r) }.map(|()| SpanOutput::Done)
            }
            SpanKernel::Solve { factor, kind, b } => {
                unsafe { self.span_solve(factor, kind, b) }.map(|()| SpanOutput::Done)
            }
            SpanKernel::Interchange { b, ipiv } => {
                unsafe { self.span_interchange(b, ipiv) }.map(|()| SpanOutput::Done)
            }
        }
    }

    /// Sets the strict upper triangle of the square `span` (d or z) to the adjoint of its strict
    /// lower one; returns when done.
    ///
    /// # Safety
    /// `span` must be memory of this GPU ([`GpuContext::check_span`]) that nothing else uses during
    /// the call.
    unsafe fn mirror_lower(&self, span: &DeviceSpan) -> Result<(), KernelError> {
        let n = span.rows;
        if n != span.cols {
            return Err(KernelError::Gpu {
                message: format!("mirroring takes a square matrix, not {n} x {}", span.cols),
            });
        }
        let function = function(self, &suffixed("hetla_mirror", span.precision)?)?;
        if n == 0 {
            return Ok(());
        }
        let blocks = u32::try_from(n.div_ceil(32)).map_err(|_| too_large(n))?;
        let config = LaunchConfig {
            grid_dim: (blocks, blocks, 1),
            block_dim: (32, 8, 1),
            shared_mem_bytes: 0,
        };
        let (addr, ld, n) = (span.addr, span.ld as u64, n as u64);
        self.bind()?;
        let mut launch = self.h2d.launch_builder(&function);
        launch.arg(&addr).arg(&ld).arg(&n);
        // SAFETY: the arguments are the kernel's (a device pointer to n x n elements with leading
        // dimension ld, the caller's contract); its blocks write disjoint strict-upper blocks.
        unsafe { launch.launch(config) }.map_err(|e| gpu_error("hetla_mirror", e))?;
        self.wait_h2d("hetla_mirror")
    }

    /// The sums of the moduli of each column of `span` (d or z), or of each row (`rows`).
    ///
    /// # Safety
    /// `span` must be memory of this GPU ([`GpuContext::check_span`]) that nothing writes during
    /// the call.
    unsafe fn norms(&self, span: &DeviceSpan, rows: bool) -> Result<Vec<f64>, KernelError> {
        // Column sums: a block of 256 threads a column; row sums: a block of 32 x 8 for 32 rows.
        let (name, count) = match rows {
            false => ("hetla_column_norms", span.cols),
            true => ("hetla_row_norms", span.rows),
        };
        let function = function(self, &suffixed(name, span.precision)?)?;
        if span.rows == 0 || span.cols == 0 {
            return Ok(vec![0.0; count]);
        }
        let (blocks, block_dim) = match rows {
            false => (count.min(65535), (256, 1, 1)),
            true => (count.div_ceil(32), (32, 8, 1)),
        };
        let mut sums = (self.h2d.alloc_zeros::<f64>(count))
            .map_err(|e| gpu_error(&format!("allocating the sums of {name}"), e))?;
        let config = LaunchConfig {
            grid_dim: (u32::try_from(blocks).map_err(|_| too_large(count))?, 1, 1),
            block_dim,
            shared_mem_bytes: 0,
        };
        let (addr, ld) = (span.addr, span.ld as u64);
        let (m, n) = (span.rows as u64, span.cols as u64);
        self.bind()?;
        let mut launch = self.h2d.launch_builder(&function);
        launch.arg(&addr).arg(&ld).arg(&m).arg(&n).arg(&mut sums);
        // SAFETY: the kernel reads the span's elements (the caller's contract) and writes `count`
        // sums into `sums`, which holds them.
        unsafe { launch.launch(config) }.map_err(|e| gpu_error(name, e))?;
        self.read_back(&sums, name)
    }

    /// Writes `from` (d or z) rounded to single precision into `to` (s or c, of its shape), the
    /// real part of each diagonal entry multiplied by `factor` first; returns the first entry where
    /// `watched` (column by column) that overflowed, if any.
    ///
    /// # Safety
    /// Both spans must be memory of this GPU ([`GpuContext::check_span`]), `to` used by nothing
    /// else and `from` unwritten during the call.
    unsafe fn lower_span(
        &self,
        from: &DeviceSpan,
        to: &DeviceSpan,
        factor: f64,
        watched: Watched,
    ) -> Result<Option<(usize, usize)>, KernelError> {
        let parts: u32 = match (from.precision, to.precision) {
            (Precision::D, Precision::S) => 1,
            (Precision::Z, Precision::C) => 2,
            (f, t) => {
                return Err(KernelError::Gpu {
                    message: format!("rounding takes d to s or z to c, not {f} to {t}"),
                });
            }
        };
        if (from.rows, from.cols) != (to.rows, to.cols) {
            return Err(KernelError::Gpu {
                message: format!(
                    "rounding a {} x {} matrix into a {} x {} one",
                    from.rows, from.cols, to.rows, to.cols
                ),
            });
        }
        let function = function(self, "hetla_lower")?;
        if from.rows == 0 || from.cols == 0 {
            return Ok(None);
        }
        let mut overflow = self
            .h2d
            .clone_htod(&[u64::MAX])
            .map_err(|e| gpu_error("allocating the overflow flag", e))?;
        let height = (from.rows * parts as usize).div_ceil(256).clamp(1, 1024) as u32;
        let config = LaunchConfig {
            grid_dim: (height, from.cols.clamp(1, 65535) as u32, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let (a, lda, low, ldl) = (from.addr, from.ld as u64, to.addr, to.ld as u64);
        let (rows, cols) = (from.rows as u64, from.cols as u64);
        let whole = u32::from(watched == Watched::Whole);
        self.bind()?;
        let mut launch = self.h2d.launch_builder(&function);
        launch
            .arg(&a)
            .arg(&lda)
            .arg(&low)
            .arg(&ldl)
            .arg(&rows)
            .arg(&cols)
            .arg(&parts)
            .arg(&factor)
            .arg(&whole)
            .arg(&mut overflow);
        // SAFETY: the kernel reads `from`'s and writes `to`'s elements (the caller's contract,
        // shapes checked above) and the one flag.
        unsafe { launch.launch(config) }.map_err(|e| gpu_error("hetla_lower", e))?;
        let flag = self.read_back(&overflow, "hetla_lower")?;
        Ok(match flag[0] {
            u64::MAX => None,
            index => {
                let index = index as usize;
                Some((index % from.rows, index / from.rows))
            }
        })
    }

    /// R <- R - A X on spans of one precision: one cuBLAS ?gemm on the priority lane, waited for.
    ///
    /// # Safety
    /// As [`GpuContext::run_span_kernel`].
    unsafe fn span_product(
        &self,
        a: &DeviceSpan,
        x: &DeviceSpan,
        r: &DeviceSpan,
    ) -> Result<(), KernelError> {
        use crate::elementwise::{check_one_precision, check_product};
        use blas::cublasOperation_t::CUBLAS_OP_N as N;
        check_one_precision(&[a, x, r])?;
        check_product((a.rows, a.cols), (x.rows, x.cols), (r.rows, r.cols))?;
        if r.rows == 0 || r.cols == 0 || a.cols == 0 {
            return Ok(());
        }
        let shape = (int(r.rows)?, int(r.cols)?, int(a.cols)?);
        let lds = (int(a.ld)?, int(x.ld)?, int(r.ld)?);
        self.on_priority_lane("cuBLAS ?gemm (a residual)", |h| {
            with_scalar!(a.precision, T => {
                let (one, minus_one) = (T::from_f64(1.0), T::from_f64(-1.0));
                let reads = (
                    In { ptr: a.addr as *const T, ld: lds.0 },
                    In { ptr: x.addr as *const T, ld: lds.1 },
                );
                let c = Out { ptr: r.addr as *mut T, ld: lds.2 };
                // SAFETY: the spans are this GPU's memory of their shapes (the caller's contract,
                // shapes checked above), on the handle's stream; the scalars are host values.
                unsafe { T::gemm(h, (N, N), shape, (minus_one, one), reads, c) }
            })
        })
    }

    /// B <- the solution of `factor`'s system ([`SpanKernel::Solve`]) on spans of one precision:
    /// two cuBLAS ?trsm on the priority lane, waited for.
    ///
    /// # Safety
    /// As [`GpuContext::run_span_kernel`].
    unsafe fn span_solve(
        &self,
        factor: &DeviceSpan,
        kind: FactorKind,
        b: &DeviceSpan,
    ) -> Result<(), KernelError> {
        use blas::cublasDiagType_t::{CUBLAS_DIAG_NON_UNIT as NON_UNIT, CUBLAS_DIAG_UNIT as UNIT};
        use blas::cublasFillMode_t::{
            CUBLAS_FILL_MODE_LOWER as LOWER, CUBLAS_FILL_MODE_UPPER as UPPER,
        };
        use blas::cublasOperation_t::CUBLAS_OP_N as N;
        use blas::cublasSideMode_t::CUBLAS_SIDE_LEFT as LEFT;
        crate::elementwise::check_solve(factor, b)?;
        if b.rows == 0 || b.cols == 0 {
            return Ok(());
        }
        let shape = (int(b.rows)?, int(b.cols)?);
        let (ldl, ldb) = (int(factor.ld)?, int(b.ld)?);
        self.on_priority_lane("cuBLAS ?trsm (a refinement's solve)", |h| {
            with_scalar!(factor.precision, T => {
                // Cholesky: L, then L^H; LU: L with a unit diagonal, then U.
                let steps = match kind {
                    FactorKind::Cholesky => [(N, None), (T::ADJOINT, None)],
                    FactorKind::Lu => [(N, Some((LOWER, UNIT))), (N, Some((UPPER, NON_UNIT)))],
                };
                let one = T::from_f64(1.0);
                let l = In { ptr: factor.addr as *const T, ld: ldl };
                let rhs = Out { ptr: b.addr as *mut T, ld: ldb };
                let mut status = BlasStatus::CUBLAS_STATUS_SUCCESS;
                for (op, triangle) in steps {
                    if status.result().is_ok() {
                        // SAFETY: as in `span_product`; the calls run in order on the handle's
                        // stream.
                        status = unsafe { T::trsm(h, (LEFT, op), triangle, shape, one, l, rhs) };
                    }
                }
                status
            })
        })
    }

    /// The rows of `b` interchanged by cuSOLVER's ?laswp on the priority lane, the interchanges
    /// (0-based) uploaded 1-based first; returns when done.
    ///
    /// # Safety
    /// As [`GpuContext::run_span_kernel`]'s.
    unsafe fn span_interchange(&self, b: &DeviceSpan, ipiv: &[usize]) -> Result<(), KernelError> {
        use cudarc::driver::DevicePtr;
        crate::elementwise::check_interchanges(b, ipiv)?;
        if ipiv.is_empty() || b.cols == 0 {
            return Ok(());
        }
        let one_based = (ipiv.iter())
            .map(|&p| int(p + 1))
            .collect::<Result<Vec<i32>, _>>()?;
        let (k, cols, ld) = (int(ipiv.len())?, int(b.cols)?, int(b.ld)?);
        self.bind()?;
        let lane = &self.lanes[0];
        let scratch = lock(&lane.scratch);
        let pivots = (lane.stream.clone_htod(&one_based))
            .map_err(|e| gpu_error("copying the interchanges to the GPU", e))?;
        let (pp, read) = pivots.device_ptr(&lane.stream);
        let status = with_scalar!(b.precision, T => {
            let rows = Out { ptr: b.addr as *mut T, ld };
            // SAFETY: `b` is memory of this GPU of its shape (the caller's contract), `pivots` k
            // 1-based rows of it (checked above) in device memory kept until the stream is waited
            // for below; the solver handle's stream is the lane's, after the interchanges' copy.
            unsafe { T::laswp(lane.solver.0, cols, rows, (k, pp as *const i32)) }
        });
        drop(read);
        let waited = lane.stream.synchronize();
        drop((scratch, pivots));
        status
            .result()
            .map_err(|e| gpu_error(&format!("cuSOLVER {}laswp", b.precision), e))?;
        waited.map_err(|e| gpu_error("waiting for cuSOLVER ?laswp", e))
    }

    /// Runs `call` with the priority lane's cuBLAS handle (its workspaces held), checks its status
    /// (`what` names it in an error) and waits for the lane's stream.
    fn on_priority_lane(
        &self,
        what: &str,
        call: impl FnOnce(blas::cublasHandle_t) -> BlasStatus,
    ) -> Result<(), KernelError> {
        self.bind()?;
        let lane = &self.lanes[0];
        let scratch = lock(&lane.scratch);
        let status = call(lane.blas.0);
        drop(scratch);
        status.result().map_err(|e| gpu_error(what, e))?;
        lane.stream
            .synchronize()
            .map_err(|e| gpu_error(&format!("waiting for {what}"), e))
    }

    /// `out`, what the kernel `what` queued last on the host-to-device stream wrote, copied to the
    /// host once it is done.
    fn read_back<T: cudarc::driver::DeviceRepr>(
        &self,
        out: &cudarc::driver::CudaSlice<T>,
        what: &str,
    ) -> Result<Vec<T>, KernelError> {
        let host = self
            .h2d
            .clone_dtoh(out)
            .map_err(|e| gpu_error(&format!("copying what {what} wrote"), e))?;
        self.wait_h2d(what)?;
        Ok(host)
    }

    /// Waits for the host-to-device stream, `what` named in an error.
    fn wait_h2d(&self, what: &str) -> Result<(), KernelError> {
        self.h2d
            .synchronize()
            .map_err(|e| gpu_error(&format!("waiting for {what}"), e))
    }
}

/// The error for a matrix too large for a kernel's grid.
fn too_large(n: usize) -> KernelError {
    KernelError::Gpu {
        message: format!("a matrix of {n} rows or columns is too large for hetla's kernels"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NVRTC compiles the kernels where it is found (skipped, saying so, where it is not).
    #[test]
    fn nvrtc_compiles_the_elementwise_kernels_where_it_is_found() {
        let nvrtc = crate::cuda_libs::nvrtc();
        if !nvrtc.loaded() {
            eprintln!("skipped: {}", nvrtc.error.clone().unwrap_or_default());
            return;
        }
        let ptx = ptx().unwrap();
        for name in [
            "hetla_mirror_d",
            "hetla_mirror_z",
            "hetla_column_norms_d",
            "hetla_column_norms_z",
            "hetla_row_norms_d",
            "hetla_row_norms_z",
            "hetla_lower",
        ] {
            assert!(ptx.contains(&format!(".entry {name}")), "{name} missing");
        }
        // Where HETLA_PTX_OUT names a file, the PTX goes there (for ptxas to assemble by hand).
        if let Some(path) = std::env::var_os("HETLA_PTX_OUT") {
            std::fs::write(path, ptx).unwrap();
        }
    }
}
