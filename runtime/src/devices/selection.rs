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
        match self {
            Self::None => Ok(Vec::new()),
            Self::Emulated(k) => {
                let budget = budget.unwrap_or(usize::MAX);
                Ok((0..*k)
                    .map(|_| Arc::new(EmulatedDevice::new(budget)) as Arc<dyn Device>)
                    .collect())
            }
            Self::All | Self::List(_) => self
                .select(hetla_clusters::gpus())?
                .iter()
                .map(|g| open_gpu(g.index, budget))
                .collect(),
        }
    }
}

#[cfg(feature = "cuda")]
fn open_gpu(index: usize, budget: Option<usize>) -> Result<Arc<dyn Device>> {
    Ok(Arc::new(CudaDevice::open(index, budget)?))
}

#[cfg(not(feature = "cuda"))]
fn open_gpu(index: usize, _budget: Option<usize>) -> Result<Arc<dyn Device>> {
    Err(Error::InvalidOption {
        option: "gpus",
        reason: format!("GPU {index} needs a build with the `cuda` feature"),
    })
}
