//! The tuned configurations of this machine: for a factorisation, a precision and an order, the
//! cluster shape, tile and scheduler `hetla tune` found fastest here, kept beside the performance
//! models (`tuned-<backend>.json` in [`PerfModels::default_dir`]) so that a builder whose user set
//! none of them takes them ([`Tuned::lookup`]).
//!
//! The store knows nothing of factorisations: an entry names its factorisation by the library's own
//! type for them (`F`, serialised by its name: "cholesky", "lu"). A lookup takes the entry of the
//! factorisation and precision whose order is nearest the one asked for, by ratio, within a factor
//! of two (a choice made at 4096 serves 2048 to 8192, not 1024); none, and the builder keeps its
//! own defaults. A file that cannot be read or parsed is no file: defaults are never worse than
//! without tuning because of a broken cache.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use hetla_clusters::ClusterSpec;
use hetla_kernels::{Backend, Precision};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::{Error, PerfModels, Result, SchedulerKind, write_atomic};

/// One tuned configuration of a factorisation named by an `F`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TunedChoice<F> {
    /// The factorisation.
    pub factorization: F,
    /// The precision it was tuned in.
    pub precision: Precision,
    /// The order it was tuned at.
    pub n: usize,
    /// The cluster spec ("2x1").
    pub clusters: String,
    /// The tile (block width).
    pub tile: usize,
    /// The scheduler ("mct", "eager", "ws", "dmda").
    pub scheduler: String,
}

/// A tuned configuration ready for a builder: its clusters, tile and scheduler.
#[derive(Debug, Clone, PartialEq)]
pub struct Tuned {
    /// Clusters.
    pub clusters: ClusterSpec,
    /// Tile.
    pub tile: usize,
    /// Scheduler.
    pub scheduler: SchedulerKind,
}

impl Tuned {
    /// The file of `backend`'s tuned configurations in `dir`.
    pub fn file_in(dir: &Path, backend: Backend) -> PathBuf {
        dir.join(format!("tuned-{backend}.json"))
    }

    /// The configurations in the file at `path` (none when it is missing or cannot be parsed). The
    /// file is read again only when its modification time or size changed since the last read (a
    /// builder looks it up at every call: that costs a `stat`).
    pub fn load<F: DeserializeOwned>(path: &Path) -> Vec<TunedChoice<F>> {
        cached_text(path)
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default()
    }

    /// Adds `choice` to the file at `path`, replacing an entry of the same factorisation, precision
    /// and order (atomically: readers see the old file or the new one).
    pub fn save<F: TunedKey>(path: &Path, choice: TunedChoice<F>) -> Result<()> {
        choice
            .clusters
            .parse::<ClusterSpec>()
            .map_err(|e| Error::InvalidOption {
                option: "clusters",
                reason: e.to_string(),
            })?;
        choice
            .scheduler
            .parse::<SchedulerKind>()
            .map_err(|reason| Error::InvalidOption {
                option: "scheduler",
                reason,
            })?;
        let mut all = Self::load::<F>(path);
        all.retain(|c| {
            (&c.factorization, c.precision, c.n)
                != (&choice.factorization, choice.precision, choice.n)
        });
        all.push(choice);
        all.sort_by(|a, b| (&a.factorization, a.n).cmp(&(&b.factorization, b.n)));
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))?;
        }
        let text = serde_json::to_string_pretty(&all).map_err(|e| Error::output(path, e))?;
        write_atomic(path, text.as_bytes())
    }

    /// The configuration of `factorization` in `precision` tuned nearest order `n` (within a factor
    /// of two) among `choices`.
    pub fn nearest<F: PartialEq>(
        choices: &[TunedChoice<F>],
        factorization: &F,
        n: usize,
        precision: Precision,
    ) -> Option<Tuned> {
        let distance = |c: &TunedChoice<F>| (c.n as f64 / n.max(1) as f64).log2().abs();
        choices
            .iter()
            .filter(|c| &c.factorization == factorization && c.precision == precision)
            .filter(|c| distance(c) <= 1.0)
            .min_by(|a, b| distance(a).total_cmp(&distance(b)))
            .and_then(|c| {
                Some(Tuned {
                    clusters: c.clusters.parse().ok()?,
                    tile: c.tile,
                    scheduler: c.scheduler.parse().ok()?,
                })
            })
            .filter(|t| t.tile > 0)
    }

    /// The configuration `hetla tune` saved on this machine for `factorization` on `backend` in
    /// `precision` nearest order `n`, from the file in the performance models' default directory.
    pub fn lookup<F: TunedKey>(
        backend: Backend,
        factorization: &F,
        n: usize,
        precision: Precision,
    ) -> Option<Tuned> {
        let path = Self::file_in(&PerfModels::default_dir()?, backend);
        Self::nearest(&Self::load::<F>(&path), factorization, n, precision)
    }
}

/// The text of the file at `path`, kept with its modification time, size and (on Unix) inode: read
/// again when any changed. [`Tuned::save`] replaces the file by a new one (a new inode), so a save
/// is seen even within the clock's granularity (a jiffy); only a file rewritten in place to the
/// same size within one tick is read stale, until it changes again (a tuned choice is a matter of
/// speed, never of results).
fn cached_text(path: &Path) -> Option<Arc<str>> {
    type Stamp = (SystemTime, u64, u64);
    static READ: Mutex<Vec<(PathBuf, Stamp, Arc<str>)>> = Mutex::new(Vec::new());
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    let stamp = (meta.modified().ok()?, meta.len(), inode);
    let mut read = READ.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, _, text)) = read.iter().find(|(p, s, _)| p == path && *s == stamp) {
        return Some(text.clone());
    }
    let text: Arc<str> = std::fs::read_to_string(path).ok()?.into();
    read.retain(|(p, _, _)| p != path);
    read.push((path.to_path_buf(), stamp, text.clone()));
    Some(text)
}

/// What names a factorisation in the store: serialised by its name, ordered for the file.
pub trait TunedKey: Serialize + DeserializeOwned + Ord {}

impl<F: Serialize + DeserializeOwned + Ord> TunedKey for F {}

#[cfg(test)]
mod tests {
    use super::*;

    fn choice(n: usize, clusters: &str) -> TunedChoice<String> {
        TunedChoice {
            factorization: "lu".into(),
            precision: Precision::D,
            n,
            clusters: clusters.into(),
            tile: 256,
            scheduler: "eager".into(),
        }
    }

    #[test]
    fn the_nearest_order_within_a_factor_of_two() {
        let all = [choice(2048, "2x1"), choice(8192, "1x2")];
        let near =
            |n| Tuned::nearest(&all, &"lu".into(), n, Precision::D).map(|t| t.clusters.to_string());
        assert_eq!(near(2048).as_deref(), Some("2x1"));
        assert_eq!(near(3000).as_deref(), Some("2x1"));
        assert_eq!(near(6000).as_deref(), Some("1x2"));
        assert_eq!(near(1024).as_deref(), Some("2x1"));
        assert_eq!(near(1000), None);
        assert_eq!(near(20000), None);
        assert_eq!(Tuned::nearest(&all, &"qr".into(), 2048, Precision::D), None);
        assert_eq!(Tuned::nearest(&all, &"lu".into(), 2048, Precision::S), None);
    }

    #[test]
    fn saving_replaces_the_same_order_and_a_broken_file_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = Tuned::file_in(dir.path(), Backend::Faer);
        assert!(Tuned::load::<String>(&path).is_empty());
        Tuned::save(&path, choice(2048, "2x1")).unwrap();
        Tuned::save(&path, choice(4096, "2x1")).unwrap();
        Tuned::save(&path, choice(2048, "1x2")).unwrap();
        let all = Tuned::load::<String>(&path);
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].clusters, "1x2");
        assert!(Tuned::save(&path, choice(2048, "2y1")).is_err());
        std::fs::write(&path, "{ not json").unwrap();
        assert!(Tuned::load::<String>(&path).is_empty());
    }
}
