//! What a run needs against what the machine has, checked before any work starts.
//!
//! Every factorisation and product refuses, before it allocates anything, a need the machine cannot
//! meet: with [`check_memory`]'s error ("needs 12.8 GiB, 9.1 GiB available") rather than an abort
//! in the allocator hours later. A caller that allocates its own matrices before calling hetla (the
//! `hetla` command, a benchmark) checks them the same way: [`matrix_bytes`] for each,
//! [`check_memory`] for their sum, [`check_cholesky`] for a Cholesky graph with them.
//!
//! A Cholesky graph of order n in tiles of b has T(T+1)(T+2)/6 tasks (T = ceil(n/b)), its solve
//! T(T+1) R (R tiles of right-hand sides), a product graph r s t; each task costs the graph, the
//! scheduler, the trace and the bounds about 4 KiB (measured: 0.8 KiB at 44k tasks, 1.6 KiB at
//! 333k, so twice that for headroom), and no graph may have over 5 million tasks (beyond, the
//! scheduler and the bounds would run for hours). A graph split over the ranks of a grid costs each
//! rank 16 KiB more (its share's graph and tables, and in a simulation its engine, registry and
//! links, empty). What is available is Linux's `MemAvailable`, lowered to the cgroup's limit when
//! there is one (elsewhere nothing is refused). All counts are computed in `u128`, so no size
//! overflows before it is checked. [`mapped_bytes`] says what hetla holds outside the heap (its
//! huge-page mappings), which a heap-counting allocator does not see.

pub use crate::pages::mapped_bytes;
use crate::{Error, Result};

/// Memory one task costs across graph, scheduler, trace and bounds (an upper estimate).
pub(crate) const TASK_BYTES: u128 = 4096;

/// Tasks no run may exceed, whatever the memory: beyond it the scheduler and the bounds would run
/// for hours.
pub(crate) const MAX_TASKS: u128 = 5_000_000;

/// Memory one rank of a split graph costs beyond its tasks (an upper estimate: measured, 3.3 KiB
/// per node of a simulation of 100 000 sirocco nodes with 4 GPUs each).
pub(crate) const RANK_BYTES: u128 = 16 << 10;

/// Bytes of an `rows x cols` matrix of f64 (scale by [`Precision::bytes`](crate::Precision::bytes)
/// / 8 for another precision), saturating rather than overflowing.
pub fn matrix_bytes(rows: usize, cols: usize) -> u128 {
    (rows as u128 * cols as u128).saturating_mul(8)
}

/// Tasks of the tiled Cholesky graph of order `n` in tiles of `tile` (`tile >= 1`).
pub(crate) fn cholesky_tasks(n: usize, tile: usize) -> u128 {
    let t = n.div_ceil(tile.max(1)) as u128;
    // Saturates (at 3e38) for orders beyond any memory.
    t.saturating_mul(t + 1).saturating_mul(t + 2) / 6
}

/// Bytes the host may still allocate: `MemAvailable` of /proc/meminfo, lowered to what the cgroup
/// (v2) leaves below its limit; `None` when neither can be read.
pub(crate) fn available_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("MemAvailable:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kib| kib * 1024)
    });
    let read = |f: &str| {
        std::fs::read_to_string(format!("/sys/fs/cgroup/{f}"))
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
    };
    let cgroup =
        read("memory.max").map(|max| max.saturating_sub(read("memory.current").unwrap_or(0)));
    match (meminfo, cgroup) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Formats bytes in GiB (MiB below 1 GiB).
pub(crate) fn format_bytes(bytes: u128) -> String {
    let units = ["MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut value = bytes as f64 / (1u64 << 20) as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value >= 1024.0 {
        return format!("{:.1e} bytes", bytes as f64);
    }
    format!("{value:.1} {}", units[unit])
}

/// Needs below this are not checked: reading the available memory costs more than a small
/// factorisation (`solve_spd` at n = 64 takes about 10 us).
const UNCHECKED_BELOW: u128 = 256 << 20;

/// An error unless `bytes` fit in the memory available now ([`Error::TooLarge`] naming `what`, the
/// need and what is available); needs under 256 MiB pass unchecked.
///
/// ```
/// use hetla::limits::{check_memory, matrix_bytes};
/// assert!(check_memory("one matrix of order 1000", matrix_bytes(1000, 1000)).is_ok());
/// if cfg!(target_os = "linux") {
///     assert!(check_memory("a matrix of order 2^40", matrix_bytes(1 << 40, 1 << 40)).is_err());
/// }
/// ```
pub fn check_memory(what: &str, bytes: u128) -> Result<()> {
    if bytes < UNCHECKED_BELOW {
        return Ok(());
    }
    match available_memory() {
        Some(available) if bytes > available as u128 => Err(Error::TooLarge {
            what: what.to_owned(),
            reason: format!(
                "needs {}, {} available",
                format_bytes(bytes),
                format_bytes(available as u128)
            ),
        }),
        _ => Ok(()),
    }
}

/// An error unless a graph of `tasks` tasks (plus `extra` bytes of matrices) can be built and run
/// here; `what` names the graph ("the Cholesky graph of n = 3000 in tiles of 8").
pub(crate) fn check_graph(what: &str, tasks: u128, extra: u128) -> Result<()> {
    if tasks > MAX_TASKS {
        return Err(Error::TooLarge {
            what: what.to_owned(),
            reason: format!(
                "{tasks} tasks, more than the {MAX_TASKS} a run may have: use larger tiles"
            ),
        });
    }
    check_memory(
        &format!("{what} ({tasks} tasks)"),
        tasks.saturating_mul(TASK_BYTES).saturating_add(extra),
    )
}

/// An error unless the Cholesky graph of order `n` in tiles of `tile` (with `extra` bytes of
/// matrices beside it) can be built and run here: more than 5 million tasks ("use larger tiles"),
/// or more memory than is available, or a tile of 0.
pub fn check_cholesky(n: usize, tile: usize, extra: u128) -> Result<()> {
    if tile == 0 {
        return Err(Error::ZeroTileSize);
    }
    check_graph(
        &format!("the Cholesky graph of n = {n} in tiles of {tile}"),
        cholesky_tasks(n, tile),
        extra,
    )
}

/// Tasks of the forward and backward substitutions with a factor of order `n` of `rhs` right-hand
/// sides, in tiles of `tile` (`tile >= 1`).
pub(crate) fn solve_tasks(n: usize, rhs: usize, tile: usize) -> u128 {
    let t = n.div_ceil(tile.max(1)) as u128;
    let r = rhs.div_ceil(tile.max(1)) as u128;
    t.saturating_mul(t + 1).saturating_mul(r)
}

/// [`check_graph`] for the solve graph of a factor of order `n` with `rhs` right-hand sides in
/// tiles of `tile`.
pub(crate) fn check_solve(n: usize, rhs: usize, tile: usize) -> Result<()> {
    if tile == 0 {
        return Err(Error::ZeroTileSize);
    }
    check_graph(
        &format!("the solve graph of n = {n} with {rhs} right-hand sides in tiles of {tile}"),
        solve_tasks(n, rhs, tile),
        0,
    )
}

/// An error unless a graph of `tasks` tasks split over `ranks` ranks (a distributed run, or its
/// simulation) fits this machine: the ranks' own state ([`RANK_BYTES`] each) besides the tasks'.
pub(crate) fn check_split(ranks: usize, tasks: usize) -> Result<()> {
    check_memory(
        &format!("a graph of {tasks} tasks split over {ranks} ranks"),
        (ranks as u128)
            .saturating_mul(RANK_BYTES)
            .saturating_add((tasks as u128).saturating_mul(TASK_BYTES)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_do_not_overflow_and_huge_needs_are_refused() {
        assert_eq!(cholesky_tasks(3000, 8), 375 * 376 * 377 / 6);
        assert_eq!(cholesky_tasks(1, 960), 1);
        let huge = cholesky_tasks(usize::MAX, 1);
        assert!(huge > MAX_TASKS);
        let err = check_cholesky(3000, 8, 0).unwrap_err().to_string();
        assert!(
            err.contains("8859500 tasks") && err.contains("larger tiles"),
            "{err}"
        );
        let err = check_memory("a test", u128::MAX / 2)
            .unwrap_err()
            .to_string();
        assert!(err.contains("needs") && err.contains("available"), "{err}");
        assert!(check_cholesky(4096, 512, matrix_bytes(4096, 4096)).is_ok());
        // A billion ranks of 16 KiB are 16 TiB: refused everywhere.
        let err = check_split(1 << 30, 220).unwrap_err().to_string();
        assert!(
            err.contains("1073741824 ranks") && err.contains("needs"),
            "{err}"
        );
        assert!(check_split(4, 220).is_ok());
        assert_eq!(solve_tasks(100, 30, 10), 10 * 11 * 3);
        assert!(check_solve(usize::MAX, 1, 1).is_err());
    }
}
