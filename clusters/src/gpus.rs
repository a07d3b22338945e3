//! GPU discovery: the CUDA devices of this machine, their names and memory.
//!
//! The driver library is loaded at run time (cudarc, feature `cuda`, on by default), so a machine
//! without a driver, without a device, or a build without the feature, simply has no GPUs: [`gpus`]
//! returns an empty list and nothing panics.

/// One GPU as the driver describes it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GpuInfo {
    /// Its index (CUDA ordinal), as `--gpus 0,1` names it.
    pub index: usize,
    /// Its name ("NVIDIA H100 80GB HBM3").
    pub name: String,
    /// Total memory in bytes.
    pub memory_bytes: usize,
    /// Free memory in bytes when asked.
    pub free_bytes: usize,
}

/// Whether the CUDA driver library can be loaded (always `false` without feature `cuda`).
pub fn driver_present() -> bool {
    #[cfg(feature = "cuda")]
    {
        // SAFETY: only opens the library by name to see whether it loads.
        unsafe { cudarc::driver::sys::is_culib_present() }
    }
    #[cfg(not(feature = "cuda"))]
    false
}

/// The GPUs of this machine in ordinal order; empty without a driver or a device. A device the
/// driver cannot open is left out.
pub fn gpus() -> Vec<GpuInfo> {
    #[cfg(feature = "cuda")]
    {
        use cudarc::driver::CudaContext;
        if !driver_present() {
            return Vec::new();
        }
        let count = CudaContext::device_count().map_or(0, |n| usize::try_from(n).unwrap_or(0));
        (0..count)
            .filter_map(|index| {
                let ctx = CudaContext::new(index).ok()?;
                let (free_bytes, memory_bytes) = ctx.mem_get_info().ok()?;
                Some(GpuInfo {
                    index,
                    name: ctx.name().ok()?,
                    memory_bytes,
                    free_bytes,
                })
            })
            .collect()
    }
    #[cfg(not(feature = "cuda"))]
    Vec::new()
}

#[cfg(test)]
mod tests {
    #[test]
    fn discovery_never_panics_and_is_consistent() {
        let gpus = super::gpus();
        if !super::driver_present() {
            assert!(gpus.is_empty());
        }
        // Ordinals increase; a device the driver cannot open is left out, so they may skip.
        assert!(gpus.windows(2).all(|w| w[0].index < w[1].index));
        for gpu in &gpus {
            assert!(gpu.free_bytes <= gpu.memory_bytes);
        }
    }
}
