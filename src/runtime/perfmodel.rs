//! History-based performance models: the mean and deviation of observed kernel durations
//! per (operation, operand shapes, resource class), persisted as JSON.
//!
//! A key with fewer than [`MIN_SAMPLES`] samples is *uncalibrated*: schedulers then place
//! the task so that it gets measured (see `scheduler::Mct`) and use a flop-based guess
//! meanwhile. Models are loaded when a [`crate::Platform`] is built and written back by
//! [`crate::Platform::save_models`]; the file is per kernel backend, because faer and
//! OpenBLAS kernels have different speeds on the same cores.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use hetla_kernels::Op;
use serde::{Deserialize, Serialize};

use crate::model::LinkModel;
use crate::{Error, Result};

/// Samples a key needs before its mean is trusted.
pub const MIN_SAMPLES: u64 = 3;

/// The environment variable that overrides the model directory.
pub const PERFMODEL_DIR_ENV: &str = "HETLA_PERFMODEL_DIR";

/// The kind of resource a performance model describes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ResourceClass {
    /// A CPU cluster of `cores` cores running one kernel at a time.
    CpuCluster {
        /// Cores of the cluster.
        cores: usize,
    },
    /// A GPU of the given model.
    Gpu {
        /// The device name.
        model: String,
    },
}

/// Distinct classes with how often each occurs, in order of first appearance.
pub fn count_classes(
    classes: impl IntoIterator<Item = ResourceClass>,
) -> Vec<(ResourceClass, usize)> {
    let mut counted: Vec<(ResourceClass, usize)> = Vec::new();
    for class in classes {
        match counted.iter_mut().find(|(c, _)| *c == class) {
            Some((_, count)) => *count += 1,
            None => counted.push((class, 1)),
        }
    }
    counted
}

impl std::fmt::Display for ResourceClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::CpuCluster { cores } => write!(f, "cpu-cluster-{cores}"),
            Self::Gpu { model } => write!(f, "gpu-{model}"),
        }
    }
}

/// What a model is about: an operation on operands of given shapes (rows, cols), in the
/// operation's operand order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelKey {
    /// The operation.
    pub op: Op,
    /// Operand shapes, reads first and the written tile last.
    pub shapes: Vec<(usize, usize)>,
}

impl KernelKey {
    /// The key of a graph task whose tiles have the shapes `shape` gives. A matrix
    /// product tile ([`Op::MatMul`]) shares the model of the Cholesky GEMM tile of the same
    /// sizes (m x k, n x k -> m x n): the same flops on the same BLAS call, whatever the
    /// transposes and scalars, so calibrated GEMM rates serve both.
    pub fn of_task(
        task: &hetla_factorizations::Task,
        shape: impl Fn(hetla_factorizations::TileRef) -> (usize, usize),
    ) -> Self {
        let shapes: Vec<(usize, usize)> = task.accesses.iter().map(|a| shape(a.tile)).collect();
        match task.op {
            Op::MatMul(p) if shapes.len() == 3 => {
                let (m, k) = p.op_a(shapes[0]);
                let n = p.op_b(shapes[1]).1;
                Self {
                    op: Op::Gemm,
                    shapes: vec![(m, k), (n, k), (m, n)],
                }
            }
            op => Self { op, shapes },
        }
    }

    /// The key of `op` on square b x b tiles.
    pub fn square(op: Op, b: usize) -> Self {
        Self {
            op,
            shapes: vec![(b, b); op.reads() + 1],
        }
    }
}

/// Running mean and deviation of durations (Welford's update), in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Number of samples.
    pub samples: u64,
    /// Mean duration.
    pub mean: f64,
    /// Sum of squared deviations from the mean.
    pub m2: f64,
}

impl Stats {
    /// Adds one observed duration.
    pub fn record(&mut self, seconds: f64) {
        self.samples += 1;
        let delta = seconds - self.mean;
        self.mean += delta / self.samples as f64;
        self.m2 += delta * (seconds - self.mean);
    }

    /// Sample standard deviation (0 below two samples).
    pub fn deviation(&self) -> f64 {
        if self.samples < 2 {
            0.0
        } else {
            (self.m2 / (self.samples - 1) as f64).sqrt()
        }
    }

    /// The mean, once there are [`MIN_SAMPLES`] samples.
    pub fn calibrated_mean(&self) -> Option<f64> {
        (self.samples >= MIN_SAMPLES).then_some(self.mean)
    }

    /// Merges another set of samples (parallel Welford).
    pub fn merge(&mut self, other: &Stats) {
        if other.samples == 0 {
            return;
        }
        let n = self.samples + other.samples;
        let delta = other.mean - self.mean;
        let mean = self.mean + delta * other.samples as f64 / n as f64;
        self.m2 += other.m2 + delta * delta * self.samples as f64 * other.samples as f64 / n as f64;
        self.mean = mean;
        self.samples = n;
    }
}

/// One line of the JSON file.
#[derive(Serialize, Deserialize)]
struct Entry {
    op: String,
    shapes: Vec<[usize; 2]>,
    class: ResourceClass,
    samples: u64,
    mean_s: f64,
    m2: f64,
    /// Written for people reading the file; recomputed from m2 on load.
    deviation_s: f64,
}

#[derive(Serialize, Deserialize)]
struct File {
    format: u32,
    backend: String,
    models: Vec<Entry>,
    /// Link models by GPU model name (absent in files written before GPUs existed).
    #[serde(default)]
    links: BTreeMap<String, LinkModel>,
}

/// A set of performance models.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PerfModels {
    entries: HashMap<(KernelKey, ResourceClass), Stats>,
    /// Host-device links by GPU model name, as `hetla calibrate` measured them.
    links: BTreeMap<String, LinkModel>,
}

impl PerfModels {
    /// No models.
    pub fn new() -> Self {
        Self::default()
    }

    /// The statistics of a key on a class, if any sample was recorded.
    pub fn get(&self, key: &KernelKey, class: &ResourceClass) -> Option<&Stats> {
        self.entries.get(&(key.clone(), class.clone()))
    }

    /// Records one observed duration.
    pub fn record(&mut self, key: &KernelKey, class: &ResourceClass, seconds: f64) {
        self.entries
            .entry((key.clone(), class.clone()))
            .or_default()
            .record(seconds);
    }

    /// Adds the samples of `stats` to a key.
    pub fn merge(&mut self, key: KernelKey, class: ResourceClass, stats: &Stats) {
        self.entries.entry((key, class)).or_default().merge(stats);
    }

    /// Replaces the statistics of a key.
    pub fn set(&mut self, key: KernelKey, class: ResourceClass, stats: Stats) {
        self.entries.insert((key, class), stats);
    }

    /// The measured link of a GPU model, if any.
    pub fn link(&self, model: &str) -> Option<&LinkModel> {
        self.links.get(model)
    }

    /// Stores the measured link of a GPU model.
    pub fn set_link(&mut self, model: &str, link: LinkModel) {
        self.links.insert(model.to_owned(), link);
    }

    /// Number of (key, class) entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The default directory: `$HETLA_PERFMODEL_DIR`, else `<user cache dir>/hetla/perfmodels`.
    pub fn default_dir() -> Option<PathBuf> {
        match std::env::var_os(PERFMODEL_DIR_ENV) {
            Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir)),
            _ => dirs::cache_dir().map(|d| d.join("hetla").join("perfmodels")),
        }
    }

    /// The file holding a backend's models in `dir`.
    pub fn file_in(dir: &Path, backend: &str) -> PathBuf {
        dir.join(format!("perfmodels-{backend}.json"))
    }

    /// Loads models from `path`; a missing file is an empty set.
    pub fn load(path: &Path) -> Result<Self> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::new()),
            Err(e) => return Err(model_error(path, e)),
        };
        let file: File = serde_json::from_str(&text).map_err(|e| model_error(path, e))?;
        let mut models = Self::new();
        for e in file.models {
            let op = Op::from_name(&e.op)
                .ok_or_else(|| model_error(path, format!("unknown operation {:?}", e.op)))?;
            let key = KernelKey {
                op,
                shapes: e.shapes.iter().map(|s| (s[0], s[1])).collect(),
            };
            let stats = Stats {
                samples: e.samples,
                mean: e.mean_s,
                m2: e.m2,
            };
            models.merge(key, e.class, &stats);
        }
        models.links = file.links;
        Ok(models)
    }

    /// Writes the models to `path` (directories created), through a temporary file renamed
    /// into place so that an interrupted write never leaves a truncated file.
    pub fn save(&self, path: &Path, backend: &str) -> Result<()> {
        let mut models: Vec<Entry> = self
            .entries
            .iter()
            .map(|((key, class), s)| Entry {
                op: key.op.name().to_owned(),
                shapes: key.shapes.iter().map(|&(r, c)| [r, c]).collect(),
                class: class.clone(),
                samples: s.samples,
                mean_s: s.mean,
                m2: s.m2,
                deviation_s: s.deviation(),
            })
            .collect();
        models.sort_by(|a, b| (&a.op, &a.shapes, &a.class).cmp(&(&b.op, &b.shapes, &b.class)));
        let file = File {
            format: 1,
            backend: backend.to_owned(),
            models,
            links: self.links.clone(),
        };
        let text = serde_json::to_string_pretty(&file).map_err(|e| model_error(path, e))?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| model_error(path, e))?;
        }
        let tmp = path.with_extension(format!("json.tmp{}", std::process::id()));
        std::fs::write(&tmp, text).map_err(|e| model_error(path, e))?;
        std::fs::rename(&tmp, path).map_err(|e| model_error(path, e))
    }
}

fn model_error(path: &Path, reason: impl std::fmt::Display) -> Error {
    Error::PerfModel {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}
