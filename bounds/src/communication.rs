//! Lower bounds on data movement for matrix multiplication, and the split of work among
//! heterogeneous processors that makes them finish together.
//!
//! - Per device with m tile buffers (Dongarra et al. (2007), section 3.2): by the Loomis-Whitney
//!   inequality, a window of m consecutive tile transfers gives access to at most sqrt(8/27)
//!   m^{3/2} tile updates. G updates therefore need at least G / (sqrt(8/27) sqrt(m)) - m
//!   transfers, that is G sqrt(27/(8m)) - m. The maximum re-use layout (mu^2 C tiles, mu B tiles,
//!   one A tile, 1 + mu + mu^2 <= m) moves 2rs + 2rst/mu tiles for an r x t by t x s product,
//!   within sqrt(32/27) of the bound when t and mu are large.
//! - Static partitions of C (Eyraud-Dubois and Lambert (2018), PERI-SUM): the processor that owns a
//!   zone of C loads, at every step of the inner dimension, the rows of A and the columns of B its
//!   zone touches, the zone's half-perimeter. A zone of area a has half-perimeter at least 2
//!   sqrt(a) (at least r + a/r when a side is capped at r), so a partition in proportion to
//!   relative speeds s_k of a unit square costs at least sum_k 2 sqrt(s_k).
//! - Heterogeneous work split (Ballard et al. (2011)): processor i with time per flop gamma_i, time
//!   per word beta_i, time per message alpha_i and fast memory M_i words spends at least F_i
//!   (gamma_i + beta_i / (8 sqrt M_i) + alpha_i / (8 M_i^{3/2})) on F_i matrix-product flops. The
//!   costs are linear in F_i, so the split of G flops minimising the last finish time makes them
//!   all finish together: F_i proportional to 1 / cost_i, and T >= G / sum_j (1 / cost_j).

use crate::error::BoundsError;

/// Fewest tile transfers (sent to or received from a device) with which a device holding at most
/// `buffers` tiles performs `updates` tile updates C_ij += A_ik B_kj: updates * sqrt(27 / (8 m)) -
/// m, and never below zero.
pub fn device_transfers_lower_bound(updates: f64, buffers: usize) -> Result<f64, BoundsError> {
    if buffers < 3 {
        return Err(BoundsError::InvalidArgument(format!(
            "a device needs at least 3 tile buffers (one of each of A, B, C), got {buffers}"
        )));
    }
    let m = buffers as f64;
    Ok((updates * (27.0 / (8.0 * m)).sqrt() - m).max(0.0))
}

/// Fewest tile transfers (sent to or received from a device) with which a device holding at most
/// `buffers` tiles performs `updates` symmetric tile updates C_ij -= L_ik L_jk^H (Cholesky's SYRK
/// and GEMM tasks: both factors are tiles of one matrix L, so a tile of L in memory serves as
/// either) and overwrites `written` tiles of a matrix that starts and ends in host memory.
///
/// - By the Loomis-Whitney inequality, a window of m consecutive transfers sees at most 2m tiles,
///   N_L of L and N_C of C, and at most sqrt(N_L^2 N_C) <= sqrt(32/27) m^{3/2} updates (at N_L =
///   4m/3): updates sqrt(27 / (32 m)) - m transfers.
/// - Copies in: every tile the updates touch moves to the device at least once, U updates touching
///   at least (27/4)^{1/3} U^{2/3} tiles (the same inequality), and so does every tile it
///   overwrites after reading it (a factorisation's are all read first). Copies out: the last value
///   the device gives each tile it overwrites leaves it at least once (to host memory, or to the
///   next node that reads it). The two kinds are distinct copies: their sum.
///
/// The larger of the two, never below zero.
pub fn symmetric_device_transfers_lower_bound(
    updates: f64,
    buffers: usize,
    written: usize,
) -> Result<f64, BoundsError> {
    if buffers < 2 {
        return Err(BoundsError::InvalidArgument(format!(
            "a device needs at least 2 tile buffers (one of L, one of C), got {buffers}"
        )));
    }
    let m = buffers as f64;
    let window = updates * (27.0 / (32.0 * m)).sqrt() - m;
    let touched = (27.0_f64 / 4.0).cbrt() * updates.powf(2.0 / 3.0);
    let written = written as f64;
    Ok(window.max(touched.max(written) + written).max(0.0))
}

/// The largest mu with 1 + mu + mu^2 <= `buffers`: the side of the square of C tiles the maximum
/// re-use layout keeps on a device (one A tile, a row of mu B tiles, mu^2 C tiles).
pub fn max_reuse_mu(buffers: usize) -> Result<usize, BoundsError> {
    if buffers < 3 {
        return Err(BoundsError::InvalidArgument(format!(
            "the maximum re-use layout needs at least 3 tile buffers, got {buffers}"
        )));
    }
    // 1 + mu + mu^2 <= B  <=>  (2 mu + 1)^2 <= 4 B - 3: closed form, in u128 so that any
    // budget (an unlimited device counts usize::MAX tiles) is one square root, not a loop.
    let mu = ((4 * buffers as u128 - 3).isqrt() - 1) / 2;
    Ok(usize::try_from(mu).unwrap_or(usize::MAX))
}

/// Tiles the maximum re-use algorithm moves for an `r x t` by `t x s` tile product when mu divides
/// `r` and `s`: every C tile is sent and returned once (2rs), and each of the rs/mu^2 squares of C
/// receives t rows of mu B tiles and t columns of mu A tiles (2rst/mu).
pub fn max_reuse_transfers(r: usize, s: usize, t: usize, mu: usize) -> f64 {
    let (r, s, t, mu) = (r as f64, s as f64, t as f64, mu as f64);
    2.0 * r * s + 2.0 * r * s * t / mu
}

/// Smallest half-perimeter (width + height) of a zone of the given area inside a `rows x cols`
/// rectangle: 2 sqrt(area), or short side + area / short side when the square would not fit.
pub fn half_perimeter_lower_bound(area: f64, rows: f64, cols: f64) -> f64 {
    let short = rows.min(cols);
    let side = area.sqrt();
    if side <= short {
        2.0 * side
    } else {
        short + area / short
    }
}

/// Lower bound on the sum of half-perimeters of a partition of a `rows x cols` rectangle in which
/// processor k owns the share `speeds[k] / sum(speeds)` of the area (PERI-SUM; sum_k 2 sqrt(s_k)
/// for the unit square). Multiplied by the inner dimension in tiles, it bounds the A and B tiles a
/// static partition of C loads.
pub fn peri_sum_lower_bound(speeds: &[f64], rows: f64, cols: f64) -> Result<f64, BoundsError> {
    let total = positive_total(speeds, "speeds")?;
    Ok(speeds
        .iter()
        .map(|&s| half_perimeter_lower_bound(s / total * rows * cols, rows, cols))
        .sum())
}

/// A split of work among processors and the time it takes.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkSplit {
    /// Work given to each processor.
    pub work: Vec<f64>,
    /// Time at which they all finish: a lower bound on the makespan.
    pub time: f64,
}

/// Splits `total` work among processors that take `costs[i]` time per unit of work so that all
/// finish at the same time, which minimises the last finish time.
pub fn equal_finish_split(costs: &[f64], total: f64) -> Result<WorkSplit, BoundsError> {
    if costs.iter().any(|&c| !c.is_finite() || c <= 0.0) {
        return Err(BoundsError::InvalidArgument(format!(
            "costs per unit of work must be finite and > 0, got {costs:?}"
        )));
    }
    let speeds: Vec<f64> = costs.iter().map(|c| 1.0 / c).collect();
    let speed = positive_total(&speeds, "costs")?;
    if !total.is_finite() || total < 0.0 {
        return Err(BoundsError::InvalidArgument(format!(
            "the total work must be finite and >= 0, got {total}"
        )));
    }
    Ok(WorkSplit {
        work: speeds.iter().map(|s| total * s / speed).collect(),
        time: total / speed,
    })
}

/// A processor of Ballard et al.'s (2011) heterogeneous model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Processor {
    /// Seconds per flop (gamma).
    pub seconds_per_flop: f64,
    /// Seconds per word moved over its link (beta).
    pub seconds_per_word: f64,
    /// Seconds per message (alpha).
    pub seconds_per_message: f64,
    /// Fast memory, in words (M).
    pub memory_words: f64,
}

impl Processor {
    /// Least time per matrix-product flop, counting the words and messages the serial bounds force
    /// for each flop: gamma + beta / (8 sqrt M) + alpha / (8 M^{3/2}).
    pub fn matmul_cost_per_flop(&self) -> f64 {
        let m = self.memory_words;
        self.seconds_per_flop
            + self.seconds_per_word / (8.0 * m.sqrt())
            + self.seconds_per_message / (8.0 * m * m.sqrt())
    }
}

/// The sum of `values`, which must be finite, non-negative and not all zero.
fn positive_total(values: &[f64], what: &str) -> Result<f64, BoundsError> {
    if values.iter().any(|&v| !v.is_finite() || v < 0.0) {
        return Err(BoundsError::InvalidArgument(format!(
            "{what} must be finite and >= 0, got {values:?}"
        )));
    }
    let total: f64 = values.iter().sum();
    if total <= 0.0 {
        return Err(BoundsError::InvalidArgument(format!(
            "{what} must have a positive sum, got {values:?}"
        )));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_bound_follows_the_loomis_whitney_ratio() {
        // m = 27/8 * 4 would give ratio 1/2; take m = 24: sqrt(27/192) = 0.375.
        let b = device_transfers_lower_bound(1000.0, 24).unwrap();
        assert!((b - (1000.0 * (27.0f64 / 192.0).sqrt() - 24.0)).abs() < 1e-12);
        assert_eq!(device_transfers_lower_bound(1.0, 24).unwrap(), 0.0);
        assert!(device_transfers_lower_bound(10.0, 2).is_err());
        // Symmetric updates: half the product's rate per window, and the tiles touched.
        let sym = symmetric_device_transfers_lower_bound(1e6, 24, 0).unwrap();
        assert!(
            (sym - (1e6 * (27.0f64 / 768.0).sqrt() - 24.0)).abs() < 1e-6,
            "{sym}"
        );
        let touched = symmetric_device_transfers_lower_bound(1000.0, 1 << 20, 0).unwrap();
        assert!((touched - 6.75f64.cbrt() * 100.0).abs() < 1e-9, "{touched}");
        // Overwritten tiles come in and go out: Cholesky of 24 x 24 tiles on one device, whose
        // 2300 updates touch at least 329 tiles, and whose 300 lower tiles come in and go out.
        let touched = 6.75f64.cbrt() * 2300f64.powf(2.0 / 3.0);
        let whole = symmetric_device_transfers_lower_bound(2300.0, 230, 300).unwrap();
        assert!((whole - (touched + 300.0)).abs() < 1e-9, "{whole}");
        // More tiles overwritten than the updates must touch: each in and out.
        assert_eq!(
            symmetric_device_transfers_lower_bound(100.0, 230, 300),
            Ok(600.0)
        );
        assert!(symmetric_device_transfers_lower_bound(10.0, 1, 0).is_err());
    }

    #[test]
    fn max_reuse_mu_is_the_largest_fitting_side_for_any_budget() {
        for buffers in 3..20_000usize {
            let mu = max_reuse_mu(buffers).unwrap();
            assert!(1 + mu + mu * mu <= buffers, "{buffers}");
            assert!(1 + (mu + 1) + (mu + 1) * (mu + 1) > buffers, "{buffers}");
        }
        // An unlimited device: one square root, not 2^31 iterations.
        let mu = max_reuse_mu(usize::MAX).unwrap() as u128;
        assert!(1 + mu + mu * mu <= usize::MAX as u128);
        assert!(1 + (mu + 1) + (mu + 1) * (mu + 1) > usize::MAX as u128);
    }

    #[test]
    fn max_reuse_stays_within_sqrt_32_27_of_the_bound() {
        // Dongarra et al. (2007), Figure 2: m = 21 gives mu = 4.
        assert_eq!(max_reuse_mu(21).unwrap(), 4);
        assert_eq!(max_reuse_mu(20).unwrap(), 3);
        assert_eq!(max_reuse_mu(3).unwrap(), 1);
        // A large product on m = 1 + mu + mu^2 buffers: ratio -> sqrt(32/27) (1 + 1/mu)...
        let mu = 100;
        let m = 1 + mu + mu * mu;
        let (r, s, t) = (100 * mu, 100 * mu, 1_000_000);
        let moved = max_reuse_transfers(r, s, t, mu);
        let bound = device_transfers_lower_bound((r * s * t) as f64, m).unwrap();
        let ratio = moved / bound;
        assert!(ratio >= 1.0);
        assert!(
            (ratio - (32.0f64 / 27.0).sqrt()).abs() < 0.01,
            "ratio {ratio}"
        );
    }

    #[test]
    fn peri_sum_on_the_unit_square() {
        let b = peri_sum_lower_bound(&[1.0, 1.0, 2.0], 1.0, 1.0).unwrap();
        let expected = 2.0 * (0.25f64.sqrt() * 2.0 + 0.5f64.sqrt());
        assert!((b - expected).abs() < 1e-12);
        // One processor owns the whole square: half-perimeter 2.
        assert!((peri_sum_lower_bound(&[3.0], 1.0, 1.0).unwrap() - 2.0).abs() < 1e-12);
        // A thin rectangle caps the side: all of a 2 x 50 matrix is 2 + 50.
        assert!((peri_sum_lower_bound(&[1.0], 2.0, 50.0).unwrap() - 52.0).abs() < 1e-12);
        assert!(peri_sum_lower_bound(&[0.0, 0.0], 1.0, 1.0).is_err());
        assert!(peri_sum_lower_bound(&[1.0, -1.0], 1.0, 1.0).is_err());
    }

    #[test]
    fn equal_finish_split_balances_and_is_optimal() {
        // Costs 1 and 3 per unit: speeds 1 and 1/3, 12 units -> 9 and 3, both done at 9.
        let split = equal_finish_split(&[1.0, 3.0], 12.0).unwrap();
        assert!((split.work[0] - 9.0).abs() < 1e-12 && (split.work[1] - 3.0).abs() < 1e-12);
        assert!((split.time - 9.0).abs() < 1e-12);
        // Any other split finishes later on one processor.
        for moved in [-1.0, 1.0] {
            let end = ((9.0 + moved) * 1.0f64).max((3.0 - moved) * 3.0);
            assert!(end > split.time);
        }
        assert!(equal_finish_split(&[1.0, 0.0], 1.0).is_err());
        assert!(equal_finish_split(&[1.0], f64::NAN).is_err());
    }

    #[test]
    fn matmul_cost_adds_the_forced_traffic() {
        let gpu = Processor {
            seconds_per_flop: 1e-12,
            seconds_per_word: 1e-9,
            seconds_per_message: 1e-5,
            memory_words: 1e8,
        };
        let expected = 1e-12 + 1e-9 / (8.0 * 1e4) + 1e-5 / (8.0 * 1e12);
        assert!((gpu.matmul_cost_per_flop() - expected).abs() < 1e-24);
    }
}
