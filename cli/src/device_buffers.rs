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

/// Calls `f` with A and X in GPU 0's memory (as [`in_gpu_memory`]; A copied back when `a_back`, X
/// always), timed as a call: what `f` gave and its seconds, the copies around it not timed (a solve
/// of device matrices, `--resident` with `--precision ds`).
pub fn timed_in_gpu_memory<T: Scalar, R>(
    platform: &Platform,
    ((a, a_back), x): ((MatMut<'_, T>, bool), MatMut<'_, T>),
    f: impl FnOnce(&mut DeviceMatrix<'_, T>, &mut DeviceMatrix<'_, T>) -> hetla::Result<R>,
) -> hetla::Result<(R, f64)> {
    in_gpu_memory(platform, &mut [(a, a_back), (x, true)], |on_device| {
        let (a, x) = on_device.split_at_mut(1);
        let start = std::time::Instant::now();
        let out = f(&mut a[0], &mut x[0])?;
        Ok((out, start.elapsed().as_secs_f64()))
    })
}

/// [`in_gpu_memory`] on a real GPU: each matrix copied, column-major and packed (as bytes, which
/// every precision has), into a buffer of GPU 0. A packed column-major matrix (the generated ones)
/// is copied straight from and back into its own memory: at n = 32768 the first H100 run spent 26 s
/// a call on host-side packing and fresh 8.6 GB vectors (lease 4), for a 0.28 s factorisation.
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
        let buffer = match contiguous(m.as_ref()) {
            Some(elements) => stream.clone_htod(as_bytes(elements)),
            None => stream.clone_htod(as_bytes(&packed(m.as_ref()))),
        };
        buffers.push(buffer.map_err(|e| gpu("copying a matrix to GPU 0", e))?);
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
        let (rows, cols) = (m.nrows(), m.ncols());
        // Straight into a packed matrix; through a packed copy into another, once the copy ended.
        let mut packed = Vec::new();
        let target = match contiguous(m.as_ref()).is_some() {
            // SAFETY: a packed column-major matrix's rows x cols elements are one slice, borrowed
            // mutably through `m` until the copy has ended (synchronised below).
            true => unsafe { std::slice::from_raw_parts_mut(m.as_ptr_mut(), rows * cols) },
            false => {
                packed = vec![T::from_f64(0.0); rows * cols];
                &mut packed[..]
            }
        };
        stream
            .memcpy_dtoh(buffer, as_bytes_mut(target))
            .and_then(|()| stream.synchronize())
            .map_err(|e| gpu("copying a matrix from GPU 0", e))?;
        if !packed.is_empty() {
            m.copy_from(faer::MatRef::from_column_major_slice(&packed, rows, cols));
        }
    }
    Ok(result)
}

/// `m`'s elements as one column-major slice, when it is packed (leading dimension = rows).
#[cfg(feature = "cuda")]
fn contiguous<'a, T: Scalar>(m: faer::MatRef<'a, T>) -> Option<&'a [T]> {
    let (rows, cols) = (m.nrows(), m.ncols());
    (m.row_stride() == 1 && m.col_stride() == rows as isize).then(|| {
        // SAFETY: a packed column-major matrix's rows x cols elements are one slice, borrowed
        // for `m`'s lifetime.
        unsafe { std::slice::from_raw_parts(m.as_ptr(), rows * cols) }
    })
}

/// The bytes of initialised scalars (plain numbers with no padding).
#[cfg(feature = "cuda")]
fn as_bytes<T: Scalar>(elements: &[T]) -> &[u8] {
    // SAFETY: scalars are plain numbers with no padding; every byte is initialised.
    unsafe { std::slice::from_raw_parts(elements.as_ptr().cast(), size_of_val(elements)) }
}

/// [`as_bytes`] for writing: any bytes written make valid scalars (plain numbers).
#[cfg(feature = "cuda")]
fn as_bytes_mut<T: Scalar>(elements: &mut [T]) -> &mut [u8] {
    // SAFETY: as `as_bytes`; every bit pattern is a valid float.
    unsafe { std::slice::from_raw_parts_mut(elements.as_mut_ptr().cast(), size_of_val(elements)) }
}

/// `m`'s elements, column after column.
#[cfg(feature = "cuda")]
fn packed<T: Scalar>(m: faer::MatRef<'_, T>) -> Vec<T> {
    (0..m.ncols())
        .flat_map(|j| m.col(j).iter().copied().collect::<Vec<_>>())
        .collect()
}
