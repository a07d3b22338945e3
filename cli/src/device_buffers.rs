//! The matrices of a `--resident` run put in GPU 0's memory, as a program whose matrices live there
//! hands them to hetla ([`hetla::DeviceMatrix`]): copied into buffers of a real GPU and back out
//! around the call (neither timed), or, on an emulated device, left where they are (its memory is
//! host memory).

use faer::MatMut;
use faer::reborrow::ReborrowMut;
use hetla::{DeviceMatrix, Platform, Scalar};

/// Calls `f` with `matrices` in GPU 0's memory (see the module documentation), and copies back into
/// each matrix whose flag is set what `f` left in its buffer.
pub fn in_gpu_memory<T: Scalar, R>(
    platform: &Platform,
    matrices: &mut [(MatMut<'_, T>, bool)],
    f: impl FnOnce(&mut [DeviceMatrix<'_, T>]) -> hetla::Result<R>,
) -> hetla::Result<R> {
    #[cfg(feature = "cuda")]
    if crate::peers::real_gpu(platform) {
        return in_gpu_buffers(matrices, f);
    }
    let _ = platform;
    let mut on_device = matrices
        .iter_mut()
        .map(|(m, _)| DeviceMatrix::emulated(m.rb_mut()))
        .collect::<hetla::Result<Vec<_>>>()?;
    f(&mut on_device)
}

/// [`in_gpu_memory`] on a real GPU: each matrix copied, column-major and packed (as bytes, which
/// every precision has), into a buffer of GPU 0.
#[cfg(feature = "cuda")]
fn in_gpu_buffers<T: Scalar, R>(
    matrices: &mut [(MatMut<'_, T>, bool)],
    f: impl FnOnce(&mut [DeviceMatrix<'_, T>]) -> hetla::Result<R>,
) -> hetla::Result<R> {
    use hetla::cudarc::driver::{CudaContext, CudaSlice, DriverError};
    let gpu = |what: &str, e: DriverError| {
        hetla::Error::Kernel(hetla_kernels::KernelError::Gpu {
            message: format!("{what}: {e:?}"),
        })
    };
    let ctx = CudaContext::new(0).map_err(|e| gpu("opening GPU 0", e))?;
    let stream = ctx.default_stream();
    let mut buffers: Vec<CudaSlice<u8>> = Vec::new();
    for (m, _) in matrices.iter() {
        let packed = packed(m.as_ref());
        // SAFETY: `packed` holds initialised scalars, plain numbers with no padding.
        let bytes = unsafe {
            std::slice::from_raw_parts(packed.as_ptr().cast::<u8>(), size_of_val(&packed[..]))
        };
        buffers.push(
            stream
                .clone_htod(bytes)
                .map_err(|e| gpu("copying a matrix to GPU 0", e))?,
        );
    }
    let shapes: Vec<(usize, usize)> = matrices
        .iter()
        .map(|(m, _)| (m.nrows(), m.ncols()))
        .collect();
    let mut on_device = buffers
        .iter_mut()
        .zip(&shapes)
        .map(|(buffer, &(rows, cols))| DeviceMatrix::<T>::cuda(buffer, rows, cols, rows.max(1)))
        .collect::<hetla::Result<Vec<_>>>()?;
    let result = f(&mut on_device)?;
    drop(on_device);
    for ((m, back), buffer) in matrices.iter_mut().zip(&buffers) {
        if !*back {
            continue;
        }
        let bytes = stream
            .clone_dtoh(buffer)
            .map_err(|e| gpu("copying a matrix from GPU 0", e))?;
        let (rows, cols) = (m.nrows(), m.ncols());
        let mut packed = vec![T::from_f64(0.0); rows * cols];
        // SAFETY: `bytes` holds the rows x cols scalars of T copied in above (as f left them).
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                packed.as_mut_ptr().cast::<u8>(),
                bytes.len(),
            );
        }
        m.copy_from(faer::MatRef::from_column_major_slice(&packed, rows, cols));
    }
    Ok(result)
}

/// `m`'s elements, column after column.
#[cfg(feature = "cuda")]
fn packed<T: Scalar>(m: faer::MatRef<'_, T>) -> Vec<T> {
    (0..m.ncols())
        .flat_map(|j| m.col(j).iter().copied().collect::<Vec<_>>())
        .collect()
}
