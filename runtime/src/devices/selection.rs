//! Which GPUs a platform uses, and opening them.

use std::sync::Arc;

#[cfg(feature = "cuda")]
use super::cuda::CudaDevice;
use super::device::Device;
use super::emulated::EmulatedDevice;
use crate::{Error, Result};

/// The most GPUs (indices 0 to 63, or emulated devices) a selection may name: each one runs a host
/// thread, and no node has more.
pub const MAX_GPUS: usize = 64;

/// Which GPUs a platform uses (`--gpus`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum GpuSelection {
    /// Every GPU the driver reports (none on a machine without a driver or device).
    #[default]
    All,
    /// No GPU.
    None,
    /// These GPUs, by index.
    List(Vec<usize>),
    /// `count` emulated devices ([`EmulatedDevice`]): the GPU code paths on any machine, for tests
    /// and demonstrations.
    Emulated(usize),
}

impl std::str::FromStr for GpuSelection {
    type Err = Error;

    /// `all`, `none`, indices (`0,1`, `0-3`), or `emulated:K` (`emulated` is one).
    fn from_str(text: &str) -> Result<Self> {
        let s = text.trim().to_ascii_lowercase();
        let invalid = |reason: String| Error::InvalidOption {
            option: "gpus",
            reason,
        };
        match s.as_str() {
            "all" => return Ok(Self::All),
            "none" => return Ok(Self::None),
            "emulated" => return Ok(Self::Emulated(1)),
            _ => {}
        }
        if let Some(count) = s.strip_prefix("emulated:") {
            return count
                .parse::<usize>()
                .ok()
                .filter(|&k| (1..=MAX_GPUS).contains(&k))
                .map(Self::Emulated)
                .ok_or_else(|| {
                    invalid(format!(
                        "{text:?}: expected emulated:K with K a whole number from 1 to {MAX_GPUS} (each device runs a host thread)"
                    ))
                });
        }
        hetla_clusters::parse_cpu_list(&s)
            .ok()
            .filter(|list| list.iter().all(|&i| i < MAX_GPUS))
            .map(Self::List)
            .ok_or(())
            .map_err(|_| {
                invalid(format!(
                    "{text:?}: expected all, none, GPU indices below {MAX_GPUS} (\"0,1\", \"0-3\") or emulated:K"
                ))
            })
    }
}

impl std::fmt::Display for GpuSelection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::All => f.write_str("all"),
            Self::None => f.write_str("none"),
            Self::List(list) => f.write_str(&hetla_clusters::format_cpu_list(list)),
            Self::Emulated(k) => write!(f, "emulated:{k}"),
        }
    }
}

impl GpuSelection {
    /// The GPUs of `found` (discovery's list, [`hetla_clusters::gpus`]) the selection names, by
    /// CUDA ordinal (a device the driver cannot open is left out of discovery, so positions and
    /// ordinals may differ); none for `None` and `Emulated`. Errors name a GPU that is not there.
    pub fn select(
        &self,
        found: Vec<hetla_clusters::GpuInfo>,
    ) -> Result<Vec<hetla_clusters::GpuInfo>> {
        match self {
            Self::All => Ok(found),
            Self::None | Self::Emulated(_) => Ok(Vec::new()),
            Self::List(list) => list
                .iter()
                .map(|&i| {
                    found.iter().find(|g| g.index == i).cloned().ok_or_else(|| {
                        let ordinals: Vec<usize> = found.iter().map(|g| g.index).collect();
                        Error::InvalidOption {
                            option: "gpus",
                            reason: format!(
                                "there is no GPU {i}: this machine has {} usable ({}; `hetla info` lists them)",
                                ordinals.len(),
                                if ordinals.is_empty() {
                                    "none".to_owned()
                                } else {
                                    format!("ordinals {ordinals:?}")
                                }
                            ),
                        }
                    })
                })
                .collect(),
        }
    }

    /// Opens the selected devices, each with a memory budget of `budget` bytes (`None`: 90% of a
    /// GPU's free memory; an emulated device then has no limit). Errors name a GPU that does not
    /// exist or cannot be opened.
    pub fn open(&self, budget: Option<usize>) -> Result<Vec<Arc<dyn Device>>> {
        // The streams are asked for only where a device opens (a machine without GPUs ignores
        // them under `--gpus all`, as it ignores the option).
        match self {
            Self::None | Self::Emulated(0) => Ok(Vec::new()),
            Self::Emulated(k) => {
                let (budget, streams) = (budget.unwrap_or(usize::MAX), compute_streams()?);
                let device = || EmulatedDevice::new(budget).with_compute_streams(streams);
                Ok((0..*k)
                    .map(|_| Arc::new(device()) as Arc<dyn Device>)
                    .collect())
            }
            Self::All | Self::List(_) => {
                let gpus = self.select(hetla_clusters::gpus())?;
                if gpus.is_empty() {
                    return Ok(Vec::new());
                }
                let streams = compute_streams()?;
                gpus.iter()
                    .map(|g| open_gpu(g.index, budget, streams))
                    .collect()
            }
        }
    }
}

/// The environment variable that sets how many compute streams each device runs its kernels on (its
/// `--gpus` devices, real or emulated): 1 by default, until a lease measures what more streams give
/// (`scripts/gpu-check.sh`).
pub const STREAMS_VAR: &str = "HETLA_GPU_STREAMS";

/// The most compute streams a device may be given.
pub const MAX_STREAMS: usize = 16;

/// The compute streams [`STREAMS_VAR`] asks for (1 when unset); an error for anything but a number
/// from 1 to [`MAX_STREAMS`].
fn compute_streams() -> Result<usize> {
    let Ok(value) = std::env::var(STREAMS_VAR) else {
        return Ok(1);
    };
    parse_streams(&value).map_err(|reason| Error::InvalidOption {
        option: STREAMS_VAR,
        reason,
    })
}

/// A count of compute streams per GPU written `value`: a number from 1 to [`MAX_STREAMS`], else why
/// not (as `HETLA_GPU_STREAMS` and `hetla simulate --streams` read it).
pub fn parse_streams(value: &str) -> std::result::Result<usize, String> {
    match value.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_STREAMS).contains(&n) => Ok(n),
        _ => Err(format!(
            "{value:?} is not a number of compute streams from 1 to {MAX_STREAMS}"
        )),
    }
}

#[cfg(feature = "cuda")]
fn open_gpu(index: usize, budget: Option<usize>, streams: usize) -> Result<Arc<dyn Device>> {
    Ok(Arc::new(CudaDevice::open(index, budget, streams)?))
}

#[cfg(not(feature = "cuda"))]
fn open_gpu(index: usize, _budget: Option<usize>, _streams: usize) -> Result<Arc<dyn Device>> {
    Err(Error::InvalidOption {
        option: "gpus",
        reason: format!("GPU {index} needs a build with the `cuda` feature"),
    })
}
