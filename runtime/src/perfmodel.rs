//! History-based performance models: the mean and deviation of observed kernel durations per
//! (operation, operand shapes, resource class), persisted as JSON.
//!
//! A key with fewer than [`MIN_SAMPLES`] samples is *uncalibrated*: schedulers then place the task
//! so that it gets measured (see `scheduler::Mct`) and use a flop-based guess meanwhile. Models are
//! loaded when a [`crate::Platform`] is built and written back by [`crate::Platform::save_models`];
//! the file is per kernel backend, because faer and OpenBLAS kernels have different speeds on the
//! same cores.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use hetla_kernels::{Op, Precision};
use serde::{Deserialize, Serialize};

use crate::link::LinkModel;
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
    /// A GPU, by its device name ("NVIDIA H100 80GB HBM3", "K40m").
    Gpu {
        /// The device name (`model` in files and JSON, as written by earlier versions).
        #[serde(rename = "model")]
        name: String,
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
            Self::Gpu { name } => write!(f, "gpu-{name}"),
        }
    }
}

/// What a model is about: an operation on operands of given shapes (rows, cols), in the operation's
/// operand order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelKey {
    /// The operation.
    pub op: Op,
    /// Operand shapes, reads first and the written tile last.
    pub shapes: Vec<(usize, usize)>,
    /// The precision the kernel computes in (models of f32 and f64 kernels differ).
    pub precision: Precision,
}

impl KernelKey {
    /// Whether an operand has no rows or no columns (a task on an empty tile, as LDL^T's band chain
    /// has at its end): such a kernel does no work worth a model, and model files refuse its key,
    /// so [`PerfModels`] keeps none of its samples.
    pub fn has_empty_operand(&self) -> bool {
        self.shapes
            .iter()
            .any(|&(rows, cols)| rows == 0 || cols == 0)
    }

    /// The key of a graph task whose tiles have the shapes `shape` gives. A matrix product tile
    /// ([`Op::MatMul`]) shares the model of the Cholesky GEMM tile of the same sizes (m x k, n x k
    /// -> m x n): the same flops on the same BLAS call, whatever the transposes and scalars, so
    /// calibrated GEMM rates serve both.
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
                    op: Op::GemmNt,
                    shapes: vec![(m, k), (n, k), (m, n)],
                    precision: Precision::D,
                }
            }
            op => Self {
                op,
                shapes,
                precision: Precision::D,
            },
        }
    }

    /// The same key in another precision (keys are made in f64 by default).
    pub fn in_precision(self, precision: Precision) -> Self {
        Self { precision, ..self }
    }

    /// Real flops of the kernel (4 times the real count for a complex precision).
    pub fn flops(&self) -> f64 {
        self.op.flops(&self.shapes) * self.precision.flop_factor()
    }

    /// The flops modelled rates (Gflop/s per kernel) are quoted in: the operation's
    /// [`Op::leading_flops`] (Cojean et al.'s leading terms for POTRF and SYRK, the entries moved
    /// for row interchanges, else the exact count), times 4 in a complex precision.
    pub fn leading_flops(&self) -> f64 {
        self.op.leading_flops(&self.shapes) * self.precision.flop_factor()
    }

    /// The key of `op` on square b x b tiles.
    pub fn square(op: Op, b: usize) -> Self {
        Self {
            op,
            shapes: vec![(b, b); op.operands()],
            precision: Precision::D,
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
    /// Absent in files written before other precisions than f64 existed.
    #[serde(default)]
    precision: Precision,
    class: ResourceClass,
    samples: u64,
    mean_s: f64,
    m2: f64,
    /// Written for people reading the file; recomputed from m2 on load.
    deviation_s: f64,
    /// Whether the entry holds only the samples of calibrations (`hetla calibrate`, a tile choice),
    /// which are also in the entry of the same key without the flag. Absent in files written before
    /// calibrations were kept apart.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    calibration: bool,
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
#[derive(Debug, Clone, Default)]
pub struct PerfModels {
    entries: HashMap<(KernelKey, ResourceClass), Stats>,
    /// The calibrations' samples alone (also counted in `entries`): kernels timed by themselves on
    /// every worker of a class at once, the same way for every tile size, unlike the samples of
    /// runs, whose conditions vary with the run. A tile choice compares these.
    calibrations: HashMap<(KernelKey, ResourceClass), Stats>,
    /// Host-device links by GPU model name, as `hetla calibrate` measured them.
    links: BTreeMap<String, LinkModel>,
    /// The samples recorded since the models were loaded or last saved: what a save adds to the
    /// file, whatever other processes wrote to it meanwhile.
    fresh: HashMap<(KernelKey, ResourceClass), Stats>,
    /// The calibration samples among them.
    fresh_calibrations: HashMap<(KernelKey, ResourceClass), Stats>,
    /// Links measured since then.
    fresh_links: BTreeMap<String, LinkModel>,
}

/// Two sets are equal when they hold the same statistics and links (whatever is unsaved).
impl PartialEq for PerfModels {
    fn eq(&self, other: &Self) -> bool {
        self.entries == other.entries
            && self.calibrations == other.calibrations
            && self.links == other.links
    }
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
        if key.has_empty_operand() {
            return;
        }
        let k = (key.clone(), class.clone());
        self.fresh.entry(k.clone()).or_default().record(seconds);
        self.entries.entry(k).or_default().record(seconds);
    }

    /// The calibrations' statistics of a key on a class (see [`PerfModels::record_calibration`]).
    pub fn calibration(&self, key: &KernelKey, class: &ResourceClass) -> Option<&Stats> {
        self.calibrations.get(&(key.clone(), class.clone()))
    }

    /// Records one duration timed by a calibration: it joins the key's statistics and, kept apart,
    /// its calibrations' ([`PerfModels::calibration`]).
    pub fn record_calibration(&mut self, key: &KernelKey, class: &ResourceClass, seconds: f64) {
        if key.has_empty_operand() {
            return;
        }
        self.record(key, class, seconds);
        let k = (key.clone(), class.clone());
        self.fresh_calibrations
            .entry(k.clone())
            .or_default()
            .record(seconds);
        self.calibrations.entry(k).or_default().record(seconds);
    }

    /// Adds the samples of `stats` to a key.
    pub fn merge(&mut self, key: KernelKey, class: ResourceClass, stats: &Stats) {
        if key.has_empty_operand() {
            return;
        }
        let k = (key, class);
        self.fresh.entry(k.clone()).or_default().merge(stats);
        self.entries.entry(k).or_default().merge(stats);
    }

    /// The measured link of a GPU model, if any.
    pub fn link(&self, model: &str) -> Option<&LinkModel> {
        self.links.get(model)
    }

    /// Stores the measured link of a GPU model.
    pub fn set_link(&mut self, model: &str, link: LinkModel) {
        self.links.insert(model.to_owned(), link);
        self.fresh_links.insert(model.to_owned(), link);
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

    /// Loads models from `path`; a missing file is an empty set. A file that cannot be parsed is
    /// moved aside (`<file>.corrupt-<time>`, kept for the user) and the set is empty; entries whose
    /// values cannot be right (no samples, a mean that is not a positive duration, a negative or
    /// non-finite m2, shapes that do not fit the operation) are left out. Each of these is a
    /// warning on stderr; only a file that exists but cannot be read at all is an error.
    pub fn load(path: &Path) -> Result<Self> {
        let _lock = StoreLock::acquire(path)?;
        let (models, warnings) = Self::read_checked(path)?;
        for w in warnings {
            eprintln!("warning: {w}");
        }
        Ok(models)
    }

    /// Reads `path` (the caller holds its lock): the models and the warnings.
    fn read_checked(path: &Path) -> Result<(Self, Vec<String>)> {
        let text = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Self::new(), vec![])),
            Err(e) => return Err(Error::io("read", path, e)),
        };
        let file = std::str::from_utf8(&text)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str::<File>(t).map_err(|e| e.to_string()))
            .and_then(|f| match f.format {
                1 => Ok(f),
                other => Err(format!("format {other}, this hetla reads format 1")),
            });
        let file = match file {
            Ok(file) => file,
            Err(reason) => {
                let kept = match move_aside(path) {
                    Ok(aside) => format!("moved to {}", aside.display()),
                    Err(e) => format!("could not be moved aside ({e}); the next save replaces it"),
                };
                return Ok((
                    Self::new(),
                    vec![format!(
                        "performance models in {} are corrupt ({reason}); {kept}; starting from empty models",
                        path.display()
                    )],
                ));
            }
        };
        let mut models = Self::new();
        let mut dropped = Vec::new();
        for e in file.models {
            match checked_entry(&e) {
                Ok((key, stats)) => {
                    let map = if e.calibration {
                        &mut models.calibrations
                    } else {
                        &mut models.entries
                    };
                    map.entry((key, e.class)).or_default().merge(&stats);
                }
                Err(reason) => {
                    dropped.push(format!("{} {:?} on {}: {reason}", e.op, e.shapes, e.class))
                }
            }
        }
        for (model, link) in file.links {
            let ok = [Some(link.h2d), Some(link.d2h), link.p2p]
                .into_iter()
                .flatten()
                .all(|r| {
                    r.latency_us.is_finite()
                        && r.latency_us >= 0.0
                        && r.gb_per_s.is_finite()
                        && r.gb_per_s > 0.0
                });
            if ok {
                models.links.insert(model, link);
            } else {
                dropped.push(format!(
                    "the link of {model}: latency must be >= 0 and bandwidth > 0"
                ));
            }
        }
        let warnings = match dropped.first() {
            None => Vec::new(),
            Some(first) => vec![format!(
                "performance models in {}: {} entr{} left out because {} cannot be right (the first: {first}); the next save drops them",
                path.display(),
                dropped.len(),
                if dropped.len() == 1 { "y" } else { "ies" },
                if dropped.len() == 1 {
                    "its values"
                } else {
                    "their values"
                },
            )],
        };
        Ok((models, warnings))
    }

    /// Adds the samples recorded since the last load or save to the file at `path` (directories
    /// created), under an exclusive lock on `<path>.lock`: what other processes saved meanwhile is
    /// read and kept, so concurrent runs never lose a sample. The file is replaced atomically;
    /// afterwards these models are the file's. Returns the warnings of reading the file (a corrupt
    /// one is moved aside first).
    pub fn save(&mut self, path: &Path, backend: &str) -> Result<Vec<String>> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::io("create the folder", dir, e))?;
        }
        let _lock = StoreLock::acquire(path)?;
        let (mut merged, warnings) = Self::read_checked(path)?;
        merge_into(&mut merged.entries, &self.fresh);
        merge_into(&mut merged.calibrations, &self.fresh_calibrations);
        for (model, link) in &self.fresh_links {
            merged.links.insert(model.clone(), *link);
        }
        let all = merged.entries.iter().map(|e| (e, false));
        let calibrations = merged.calibrations.iter().map(|e| (e, true));
        let mut models: Vec<Entry> = all
            .chain(calibrations)
            .map(|(((key, class), s), calibration)| Entry {
                op: key.op.name().to_owned(),
                shapes: key.shapes.iter().map(|&(r, c)| [r, c]).collect(),
                precision: key.precision,
                class: class.clone(),
                samples: s.samples,
                mean_s: s.mean,
                m2: s.m2,
                deviation_s: s.deviation(),
                calibration,
            })
            .collect();
        models.sort_by(|a, b| {
            (&a.op, &a.shapes, a.precision, &a.class, a.calibration).cmp(&(
                &b.op,
                &b.shapes,
                b.precision,
                &b.class,
                b.calibration,
            ))
        });
        let file = File {
            format: 1,
            backend: backend.to_owned(),
            models,
            links: merged.links.clone(),
        };
        let text = serde_json::to_string_pretty(&file).map_err(|e| model_error(path, e))?;
        crate::files::write_atomic(path, text.as_bytes())?;
        *self = merged;
        Ok(warnings)
    }
}

/// Adds each entry of `fresh` to the same key's statistics in `into`.
fn merge_into(
    into: &mut HashMap<(KernelKey, ResourceClass), Stats>,
    fresh: &HashMap<(KernelKey, ResourceClass), Stats>,
) {
    for (k, stats) in fresh {
        into.entry(k.clone()).or_default().merge(stats);
    }
}

/// An entry's key and statistics, or why its values cannot be right.
fn checked_entry(e: &Entry) -> std::result::Result<(KernelKey, Stats), String> {
    let op = Op::from_name(&e.op).ok_or_else(|| format!("unknown operation {:?}", e.op))?;
    if e.shapes.len() != op.operands() || e.shapes.iter().any(|s| s[0] == 0 || s[1] == 0) {
        return Err(format!(
            "{} operand shapes with positive sides expected",
            op.operands()
        ));
    }
    if e.samples == 0 {
        return Err("no samples".into());
    }
    if !(e.mean_s.is_finite() && e.mean_s > 0.0) {
        return Err(format!("mean {} s is not a positive duration", e.mean_s));
    }
    if !(e.m2.is_finite() && e.m2 >= 0.0) {
        return Err(format!("m2 {} is not a finite sum of squares >= 0", e.m2));
    }
    let key = KernelKey {
        op,
        shapes: e.shapes.iter().map(|s| (s[0], s[1])).collect(),
        precision: e.precision,
    };
    Ok((
        key,
        Stats {
            samples: e.samples,
            mean: e.mean_s,
            m2: e.m2,
        },
    ))
}

/// Renames a corrupt file to `<file>.corrupt-<unix seconds>` (a free name) and returns it.
fn move_aside(path: &Path) -> std::io::Result<PathBuf> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let mut aside = path.with_file_name(format!("{name}.corrupt-{secs}"));
    let mut i = 1;
    while aside.exists() {
        aside = path.with_file_name(format!("{name}.corrupt-{secs}-{i}"));
        i += 1;
    }
    std::fs::rename(path, &aside)?;
    Ok(aside)
}

/// An exclusive lock on `<models file>.lock`, held while a process reads, merges and writes the
/// file (the lock file itself stays: removing it would race with the next locker).
struct StoreLock(std::fs::File);

impl StoreLock {
    fn acquire(path: &Path) -> Result<Option<Self>> {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let lock_path = path.with_file_name(format!("{name}.lock"));
        let file = match std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
        {
            Ok(f) => f,
            // A directory that does not exist (nothing to read yet) or that cannot be
            // written (a read-only store: loading still works, unlocked).
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound
                        | std::io::ErrorKind::PermissionDenied
                        | std::io::ErrorKind::ReadOnlyFilesystem
                ) =>
            {
                return Ok(None);
            }
            Err(e) => return Err(Error::io("lock", &lock_path, e)),
        };
        file.lock().map_err(|e| Error::io("lock", &lock_path, e))?;
        Ok(Some(Self(file)))
    }
}

impl Drop for StoreLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

fn model_error(path: &Path, reason: impl std::fmt::Display) -> Error {
    Error::PerfModel {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}
