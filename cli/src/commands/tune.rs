//! `hetla tune`: the cluster shape, tile and scheduler that run a factorisation fastest, ranked by
//! the simulated makespan on a modelled machine (`hetla_lab::tune`), and with `--verify K` the K
//! best and the default configuration run for real on this machine, predicted beside measured.
//!
//! `--platform this` (the default) is this machine: its kernels' rates inside runs of the family,
//! on clusters of 1, 2, 4, ... and all cores, measured on first use at the tiles the question needs
//! and kept in `platform-<backend>.toml` beside the performance models (`hetla_lab::this_machine`),
//! so the second question about the same family costs only the simulations.

use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use hetla::{ClusterSpec, Precision};
use hetla_lab::{
    Candidate, Family, PlatformModel, Question, THIS_MACHINE_TILES, TuneSpace, predict,
    this_machine, tune, with_bounds,
};
use serde::Serialize;

use super::args::{PlatformArgs, parse_positive};
use super::output::progress_bar;
use crate::Error;

/// The `--platform` value that means this machine.
const THIS: &str = "this";

#[derive(Args)]
pub struct TuneArgs {
    /// The factorisation (inverse: Cholesky then the inverse, timed together).
    #[arg(long, default_value_t = Family::Cholesky, value_parser = super::args::family())]
    pub factorization: Family,
    /// Order of the matrix (its columns, for QR).
    #[arg(long, value_parser = parse_positive)]
    pub n: usize,
    /// Rows of the matrix, for QR (default: square).
    #[arg(long, value_parser = parse_positive)]
    pub m: Option<usize>,
    /// The precision of the kernels: s, d, c or z.
    #[arg(long, default_value = "d")]
    pub precision: Precision,
    /// `this` (this machine: its kernels calibrated inside runs on first use and kept beside the
    /// performance models), a preset (sirocco, knl, a100x8, h200, h100, xeon16, xeon16-target) or a
    /// TOML platform file.
    #[arg(long, default_value = THIS)]
    pub platform: String,
    /// GPUs taking part (a modelled platform's; this machine's families are tuned on its CPU
    /// clusters).
    #[arg(long, default_value_t = 0)]
    pub gpus: usize,
    /// Runners-up printed after the pick.
    #[arg(long, default_value_t = 5)]
    pub show: usize,
    /// Runs the K best candidates and the default configuration for real on this machine
    /// (alternating, --repeat times each) and prints each prediction beside its measurement.
    #[arg(long, default_value_t = 0)]
    pub verify: usize,
    /// Runs every cluster shape and tile of the space for real on this machine (with the pick's
    /// scheduler), beside the default configuration: the sweep the pick is judged against.
    #[arg(long)]
    pub sweep: bool,
    /// Leaves this machine's tuned defaults as they are (by default the choice, the fastest
    /// measured configuration with --verify or --sweep, else the pick, becomes what the library's
    /// builders take for this factorisation near this order when their user sets nothing).
    #[arg(long)]
    pub no_save: bool,
    /// Real runs of each verified configuration (best and median reported; 1 to 100).
    #[arg(long, default_value_t = 3, value_parser = parse_repeat)]
    pub repeat: usize,
    #[command(flatten)]
    pub real: PlatformArgs,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

fn parse_repeat(s: &str) -> Result<usize, String> {
    match parse_positive(s)? {
        r if r <= 100 => Ok(r),
        r => Err(format!("at most 100 runs, got {r}")),
    }
}

/// One configuration run for real beside its prediction.
#[derive(Serialize)]
pub struct Verified {
    /// "pick", "runner-up" or "default".
    pub role: &'static str,
    /// The configuration and its prediction (none when the model has no rate at its tile).
    pub candidate: Candidate,
    /// Measured seconds of each run, in order.
    pub seconds: Vec<f64>,
    /// The best of them, milliseconds.
    pub best_ms: f64,
    /// Their median, milliseconds.
    pub median_ms: f64,
    /// Predicted over the best measured (1: exact; < 1: the prediction is optimistic).
    pub predicted_over_best: Option<f64>,
}

#[derive(Serialize)]
pub struct TuneReport {
    pub factorization: Family,
    pub platform: String,
    pub m: usize,
    pub n: usize,
    pub precision: Precision,
    pub gpus: usize,
    /// Configurations simulated.
    pub tried: usize,
    /// Cluster shapes, tiles and schedulers tried.
    pub clusters: Vec<String>,
    pub tiles: Vec<usize>,
    pub schedulers: Vec<&'static str>,
    /// The fastest prediction, with its bounds.
    pub pick: Candidate,
    /// The next ones, fastest first.
    pub runners_up: Vec<Candidate>,
    /// This machine: what a user who sets nothing gets, predicted (its prediction is absent when
    /// the model has no rate at its tile).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<Candidate>,
    /// Family runs made to calibrate this machine first (0: the file had every rate).
    pub calibration_runs: usize,
    /// With --verify or --sweep: the real runs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub verified: Vec<Verified>,
    /// With --verify or --sweep: the configuration with the best measured time, and the pick's best
    /// time over it (1: the pick was the fastest measured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fastest_measured: Option<Candidate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pick_over_fastest: Option<f64>,
    /// The file this machine's tuned defaults were saved to (this machine, square matrices, unless
    /// --no-save; the inverse's tile and scheduler serve `Factor::inverse`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saved: Option<String>,
    /// Wall-clock seconds of the command.
    pub seconds: f64,
}

pub fn run(args: &TuneArgs) -> crate::Result<TuneReport> {
    let start = Instant::now();
    let family = args.factorization;
    let n = args.n;
    let m = family.check_rows(args.m, n)?;
    let this = args.platform == THIS;
    if this && args.gpus > 0 {
        return Err(Error::InvalidOption {
            option: "gpus",
            reason: "this machine's families are tuned on its CPU clusters (its GPUs' kernels of LU, QR and the inverse are not built): give --gpus 0, or a modelled platform".into(),
        });
    }
    if !this && (args.verify > 0 || args.sweep) {
        return Err(Error::InvalidOption {
            option: "verify",
            reason: format!(
                "real runs verify this machine's predictions: give --platform this, not {:?}",
                args.platform
            ),
        });
    }
    let (model, calibration_runs) = machine_model(args, m)?;
    let q = Question {
        model: &model,
        family,
        m,
        n,
        precision: args.precision,
        gpus: args.gpus,
    };
    let space = TuneSpace::for_model(&q)?;
    let ranked = tune(&q, &space)?;
    let tried = ranked.len();
    let mut shown = ranked.into_iter().take(1 + args.show.max(args.verify));
    let pick = with_bounds(&q, shown.next().expect("tune returns at least one"))?;
    let runners_up = shown
        .map(|c| with_bounds(&q, c))
        .collect::<hetla_lab::Result<Vec<_>>>()?;
    let default = match this {
        true => Some(default_candidate(&q, &args.real)?),
        false => None,
    };
    let verified = match &default {
        Some(default) if args.verify > 0 || args.sweep => {
            let configs = to_verify(args, &q, &space, [&pick, default], &runners_up)?;
            verify(&q, &args.real, configs, args.repeat)?
        }
        _ => Vec::new(),
    };
    let fastest = verified
        .iter()
        .min_by(|x, y| x.best_ms.total_cmp(&y.best_ms));
    let pick_over_fastest = verified
        .first()
        .zip(fastest)
        .map(|(p, f)| p.best_ms / f.best_ms);
    let fastest_measured = fastest.map(|f| f.candidate.clone());
    // Tuned configurations are of square matrices.
    let saved = match this && !args.no_save && m == n {
        true => {
            let chosen = fastest_measured.as_ref().unwrap_or(&pick);
            Some(save_choice(&args.real, &q, chosen)?)
        }
        false => None,
    };
    Ok(TuneReport {
        factorization: family,
        platform: model.name.clone(),
        m,
        n,
        precision: args.precision,
        gpus: args.gpus,
        tried,
        clusters: space.clusters.iter().map(ToString::to_string).collect(),
        tiles: space.tiles,
        schedulers: space.schedulers.iter().map(|s| s.name()).collect(),
        pick,
        runners_up: runners_up.into_iter().take(args.show).collect(),
        default,
        calibration_runs,
        verified,
        fastest_measured,
        pick_over_fastest,
        saved,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// The model of `--platform`: a preset or a file, or this machine's (calibrated first where it
/// lacks the tiles the question needs); and how many runs that calibration took.
fn machine_model(args: &TuneArgs, m: usize) -> crate::Result<(PlatformModel, usize)> {
    if args.platform != THIS {
        return Ok((PlatformModel::resolve(&args.platform)?, 0));
    }
    let (family, n) = (args.factorization, args.n);
    let tiles: Vec<usize> = THIS_MACHINE_TILES
        .into_iter()
        .filter(|&b| {
            m.min(n) >= hetla_lab::MIN_TILES_PER_SIDE * b
                && m.max(n).div_ceil(b) <= hetla_lab::MAX_TILES_PER_SIDE
        })
        .collect();
    if tiles.is_empty() {
        let (min, max) = (hetla_lab::MIN_TILES_PER_SIDE, hetla_lab::MAX_TILES_PER_SIDE);
        let (first, last) = (
            THIS_MACHINE_TILES[0],
            THIS_MACHINE_TILES[THIS_MACHINE_TILES.len() - 1],
        );
        return Err(hetla::Error::InvalidOption {
            option: "n",
            reason: format!(
                "{m}x{n} is cut into {min} to {max} tiles per side by none of the tiles this machine is calibrated at ({first} to {last}): give an order from {} to {}",
                min * first,
                max * last
            ),
        }
        .into());
    }
    let path = this_machine_file(&args.real)?;
    let bar = progress_bar(0);
    bar.set_message(format!("calibrating {family}"));
    let mut runs = 0;
    let model = this_machine(
        &path,
        args.real.backend,
        family,
        &tiles,
        args.precision,
        |steps| {
            runs = steps;
            bar.set_length(steps as u64)
        },
        || bar.inc(1),
    )?;
    bar.finish_and_clear();
    Ok((model, runs))
}

/// The configurations to run for real: the pick, `--verify`'s runners-up, with `--sweep` every
/// cluster shape and tile of `space` (the pick's scheduler), then the default; each once.
fn to_verify(
    args: &TuneArgs,
    q: &Question<'_>,
    space: &TuneSpace,
    [pick, default]: [&Candidate; 2],
    runners_up: &[Candidate],
) -> crate::Result<Vec<(&'static str, Candidate)>> {
    let mut configs = vec![("pick", pick.clone())];
    let verify = args.verify.saturating_sub(1);
    configs.extend(
        runners_up
            .iter()
            .take(verify)
            .map(|c| ("runner-up", c.clone())),
    );
    if args.sweep {
        for clusters in &space.clusters {
            for &tile in &space.tiles {
                let c = predict(q, clusters, tile, pick.scheduler)?;
                if !configs.iter().any(|(_, x)| same(x, &c)) {
                    configs.push(("sweep", c));
                }
            }
        }
    }
    configs.push(("default", default.clone()));
    Ok(configs)
}

/// Whether two candidates are the same configuration.
fn same(x: &Candidate, y: &Candidate) -> bool {
    (&x.clusters, x.tile, x.scheduler) == (&y.clusters, y.tile, y.scheduler)
}

/// Saves `chosen` as this machine's tuned configuration of the question's factorisation, precision
/// and order; the file's path.
fn save_choice(real: &PlatformArgs, q: &Question<'_>, chosen: &Candidate) -> crate::Result<String> {
    let dir = this_machine_file(real)?
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default();
    let path = hetla_runtime::Tuned::file_in(&dir, real.backend);
    hetla_runtime::Tuned::save(
        &path,
        hetla_runtime::TunedChoice {
            factorization: q.family,
            precision: q.precision,
            n: q.n,
            clusters: chosen.clusters.clone(),
            tile: chosen.tile,
            scheduler: chosen.scheduler.name().into(),
        },
    )?;
    Ok(path.display().to_string())
}

/// This machine's platform file: `platform-<backend>.toml` in the performance models' directory.
fn this_machine_file(real: &PlatformArgs) -> crate::Result<std::path::PathBuf> {
    let dir = real
        .perfmodel_dir
        .clone()
        .or_else(hetla_runtime::PerfModels::default_dir)
        .ok_or_else(|| Error::InvalidOption {
            option: "perfmodel-dir",
            reason: "this machine has no user cache directory: give --perfmodel-dir".into(),
        })?;
    Ok(dir.join(format!("platform-{}.toml", real.backend)))
}

/// What a user who sets nothing gets on this machine (the family's default clusters, tile and
/// scheduler), predicted when the model has rates at its tile (else no prediction: 0 ms, which
/// reports leave out).
fn default_candidate(q: &Question<'_>, real: &PlatformArgs) -> crate::Result<Candidate> {
    let spec = q.family.default_clusters();
    let scheduler = q.family.default_scheduler();
    let platform = Arc::new(real.cpu_platform(&spec)?);
    let tile = q.family.default_tile(&platform, q.m, q.n, q.precision);
    // The default spec resolved on this machine, as the model's shapes are named.
    let resolved = resolved_grid(&platform).unwrap_or(spec);
    Ok(match predict(q, &resolved, tile, scheduler) {
        Ok(c) => c,
        Err(_) => Candidate {
            clusters: resolved.to_string(),
            gpus: 0,
            tile,
            scheduler,
            predicted_ms: 0.0,
            gflops: 0.0,
            bounds: None,
        },
    })
}

/// A platform's clusters as a grid spec ("1x2") when they are all of one size.
fn resolved_grid(platform: &hetla::Platform) -> Option<ClusterSpec> {
    let sizes: Vec<usize> = platform.clusters().iter().map(|c| c.size()).collect();
    let size = *sizes.first()?;
    sizes
        .iter()
        .all(|&s| s == size)
        .then_some(ClusterSpec::Grid {
            count: sizes.len(),
            size,
        })
}

/// Runs each configuration `repeat` times, alternating between them (so that a drift of the
/// machine's speed reaches all alike), and reports each beside its prediction.
fn verify(
    q: &Question<'_>,
    real: &PlatformArgs,
    configs: Vec<(&'static str, Candidate)>,
    repeat: usize,
) -> crate::Result<Vec<Verified>> {
    let mut platforms = Vec::with_capacity(configs.len());
    for (_, c) in &configs {
        let spec: ClusterSpec = c.clusters.parse().map_err(|e| Error::InvalidOption {
            option: "clusters",
            reason: format!("{e}"),
        })?;
        platforms.push(Arc::new(real.cpu_platform(&spec)?));
    }
    let bar = progress_bar(configs.len() * repeat);
    let mut seconds = vec![Vec::with_capacity(repeat); configs.len()];
    for r in 0..repeat {
        for (i, (_, c)) in configs.iter().enumerate() {
            bar.set_message(format!("{} tile {} {}", c.clusters, c.tile, c.scheduler));
            let run = q.family.run(
                &platforms[i],
                (q.m, q.n),
                c.tile,
                c.scheduler,
                q.precision,
                42 + r as u64,
            )?;
            seconds[i].push(run.seconds);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(configs
        .into_iter()
        .zip(seconds)
        .map(|((role, candidate), seconds)| {
            let mut sorted = seconds.clone();
            sorted.sort_by(f64::total_cmp);
            let best_ms = sorted[0] * 1e3;
            let median_ms = sorted[sorted.len() / 2] * 1e3;
            let predicted_over_best =
                (candidate.predicted_ms > 0.0).then(|| candidate.predicted_ms / best_ms);
            Verified {
                role,
                candidate,
                seconds,
                best_ms,
                median_ms,
                predicted_over_best,
            }
        })
        .collect())
}

pub fn print(r: &TuneReport) {
    let shape = if r.m == r.n {
        format!("n = {}", r.n)
    } else {
        format!("{} x {}", r.m, r.n)
    };
    println!(
        "hetla tune: {} {shape}, precision {} on {} with {} GPU(s): {} configurations simulated in {:.1} s{}",
        r.factorization.title(),
        r.precision,
        r.platform,
        r.gpus,
        r.tried,
        r.seconds,
        match r.calibration_runs {
            0 => String::new(),
            k => format!(" (after {k} calibration runs)"),
        }
    );
    println!(
        "  space     clusters {}; tiles {:?}; schedulers {}",
        r.clusters.join(", "),
        r.tiles,
        r.schedulers.join(", ")
    );
    println!(
        "  {:<10} {:>9} {:>6} {:>9} {:>12} {:>9} {:>10} {:>6}",
        "", "clusters", "tile", "scheduler", "predicted ms", "Gflop/s", "mixed ms", "eff."
    );
    let row = |label: &str, c: &Candidate| {
        let (mixed, eff) = c.bounds.map_or((String::new(), String::new()), |b| {
            (format!("{:.1}", b.mixed_ms), format!("{:.3}", b.efficiency))
        });
        let predicted = predicted_text(c.predicted_ms);
        println!(
            "  {label:<10} {:>9} {:>6} {:>9} {predicted:>12} {:>9.1} {mixed:>10} {eff:>6}",
            c.clusters,
            c.tile,
            c.scheduler.name(),
            c.gflops
        );
    };
    row("pick", &r.pick);
    for c in &r.runners_up {
        row("", c);
    }
    if let Some(d) = &r.default {
        row("default", d);
    }
    if !r.verified.is_empty() {
        println!(
            "  verified  {:<10} {:>9} {:>6} {:>9} {:>12} {:>10} {:>10} {:>9}",
            "",
            "clusters",
            "tile",
            "scheduler",
            "predicted ms",
            "best ms",
            "median ms",
            "pred/best"
        );
        for v in &r.verified {
            let c = &v.candidate;
            let predicted = predicted_text(c.predicted_ms);
            println!(
                "            {:<10} {:>9} {:>6} {:>9} {predicted:>12} {:>10.1} {:>10.1} {:>9}",
                v.role,
                c.clusters,
                c.tile,
                c.scheduler.name(),
                v.best_ms,
                v.median_ms,
                v.predicted_over_best
                    .map_or("-".into(), |x| format!("{x:.3}"))
            );
        }
    }
    if let Some(path) = &r.saved {
        println!(
            "  saved     as this machine's default for {} near n = {} ({path})",
            r.factorization.title(),
            r.n
        );
    }
    if let (Some(f), Some(ratio)) = (&r.fastest_measured, r.pick_over_fastest) {
        println!(
            "  measured  fastest: {} tile {} {}; the pick's best time is {ratio:.3}x the fastest's",
            f.clusters,
            f.tile,
            f.scheduler.name()
        );
    }
}

/// A candidate's predicted milliseconds as a table shows them, or "(no rate)" when the model has
/// none at its tile.
fn predicted_text(ms: f64) -> String {
    if ms > 0.0 {
        format!("{ms:.1}")
    } else {
        "(no rate)".into()
    }
}
