//! The `hetla` command line as a library: the binary (`src/main.rs`) parses and dispatches through
//! [`main_with_args`], and other front ends (the Python package's `hetla.simulate`, `bound`,
//! `sweep`, `info`) run the same commands through [`run_json`], getting each report as the JSON
//! text `--json` prints, with the same keys. Subcommands live in `commands/`, one file each.

mod commands;
mod device_buffers;
mod error;
mod gantt;
mod memory;
mod peers;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use commands::bound::{BoundArgs, bound_cmd, print_bound};
use commands::calibrate::{CalibrateArgs, calibrate_cmd, print_calibrate};
use commands::cholesky::CholeskyArgs;
use commands::info::{InfoArgs, info, print_info};
use commands::output::report_error;
pub use error::{Error, Result};
pub use memory::CountingAllocator;
use serde::Serialize;

/// Tiled Cholesky on a heterogeneous node: factor, time and check.
#[derive(Parser)]
#[command(name = "hetla", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Run a cluster's threads unpinned, with a warning, where the OS refuses to pin them to their
    /// cores (a container's cpuset): without it a refused pin is an error, since a floating
    /// thread's rates are not its core's. Also `HETLA_ALLOW_UNPINNED=1`.
    #[arg(long, global = true)]
    allow_unpinned: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Factor a generated random SPD matrix; print seconds, Gflop/s and the scaled residual.
    Cholesky(CholeskyArgs),
    /// Time the tile kernels on each cluster class and store the performance models.
    Calibrate(CalibrateArgs),
    /// Show the topology, the clusters a spec makes and the kernel backends built in.
    Info(InfoArgs),
    /// Lower bounds (critical path, area, mixed) on the Cholesky makespan on a modelled platform,
    /// computed without running anything.
    Bound(BoundArgs),
    /// Simulate the Cholesky factorisation on a modelled platform (virtual clock, same scheduler
    /// and data layer as real runs) and report it next to its bounds.
    Simulate(commands::simulate::SimulateArgs),
    /// Simulate (or run) every combination of cluster specs, GPU counts, orders and tile sizes;
    /// write results.csv, results.json and SVG plots.
    Sweep(commands::sweep::SweepArgs),
    /// Multiply matrices (C <- alpha op(A) op(B) + beta C) with a chosen allocation strategy;
    /// report time, bytes moved and their lower bound. `--platform` simulates.
    Gemm(Box<commands::gemm::GemmArgs>),
    /// Solve many small generated SPD systems at once (one per core at a time, over every cluster);
    /// print seconds, Gflop/s and the backward error, `--compare` beside faer in a loop and in a
    /// rayon par_iter.
    Batch(commands::batch::BatchArgs),
    /// Factor a generated random matrix by LU with partial pivoting; print seconds, Gflop/s, the
    /// scaled residual and the growth, `--compare` beside faer's and OpenBLAS's own LU.
    Lu(commands::lu::LuArgs),
    /// Factor a generated random m x n matrix by tiled Householder QR (flat or binary reduction
    /// trees); print seconds, Gflop/s and LAPACK's QR ratios, `--compare` beside faer's and
    /// OpenBLAS's own QR, `--lstsq K` least squares beside theirs.
    Qr(commands::qr::QrArgs),
    /// Factor a generated symmetric indefinite matrix by Aasen's algorithm (A = Q^T L T L^H Q);
    /// print seconds, Gflop/s, LAPACK's ratios and the inertia, `--compare` beside faer's
    /// Bunch-Kaufman and OpenBLAS's ?sytrf and ?sytrf_aa_2stage.
    Ldlt(commands::ldlt::LdltArgs),
    /// Rank cluster shapes, tiles and schedulers for a factorisation by their simulated makespan on
    /// a modelled machine (this one by default, calibrated on first use); `--verify K` runs the K
    /// best and the default for real.
    Tune(commands::tune::TuneArgs),
}

/// Exit status of a command line that does not parse (as clap's own).
const USAGE_EXIT: u8 = 2;

/// Where a command's reports go: printed (text or `--json`), or collected as JSON text.
trait Reports {
    /// One report: its JSON text (or why it has none), and how to print it as text.
    fn report(&mut self, json: bool, text: serde_json::Result<String>, human: &dyn Fn());
}

/// Hands `report` to `out`, with its text printer.
fn put<T: Serialize>(out: &mut dyn Reports, json: bool, report: &T, human: impl Fn(&T)) {
    out.report(json, serde_json::to_string(report), &|| human(report));
}

/// Runs the parsed command, handing each report to `out`.
fn dispatch(command: &Command, out: &mut dyn Reports) -> Result<()> {
    match command {
        Command::Cholesky(args) => commands::cholesky::run(args).map(|r| {
            r.iter()
                .for_each(|r| put(out, args.json, r, commands::cholesky::print))
        }),
        Command::Calibrate(args) => {
            calibrate_cmd(args).map(|r| put(out, args.json, &r, print_calibrate))
        }
        Command::Info(args) => info(args).map(|r| put(out, args.json, &r, print_info)),
        Command::Bound(args) => bound_cmd(args).map(|r| put(out, args.json, &r, print_bound)),
        Command::Simulate(args) => commands::simulate::run(args)
            .map(|r| put(out, args.json, &r, commands::simulate::print)),
        Command::Sweep(args) => {
            commands::sweep::run(args).map(|r| put(out, args.json, &r, commands::sweep::print))
        }
        Command::Batch(args) => {
            commands::batch::run(args).map(|r| put(out, args.json, &r, commands::batch::print))
        }
        Command::Qr(args) => commands::qr::run(args).map(|r| {
            r.iter()
                .for_each(|r| put(out, args.json, r, commands::qr::print))
        }),
        Command::Lu(args) => commands::lu::run(args).map(|r| {
            r.iter()
                .for_each(|r| put(out, args.json, r, commands::lu::print))
        }),
        Command::Ldlt(args) => {
            commands::ldlt::run(args).map(|r| put(out, args.json, &r, commands::ldlt::print))
        }
        Command::Gemm(args) => {
            commands::gemm::run(args).map(|r| put(out, args.json, &r, commands::gemm::print))
        }
        Command::Tune(args) => {
            commands::tune::run(args).map(|r| put(out, args.json, &r, commands::tune::print))
        }
    }
}

/// Exit status of a run whose results failed their residual check: its reports are printed in full
/// (they say which check and by how much), but the status says the results are not to be used.
const CHECK_EXIT: u8 = 3;

/// Prints each report as the command line asked: JSON with `--json`, else text; remembers where a
/// report's residual check failed.
#[derive(Default)]
struct Printed {
    /// Where a report says `"residual_ok": false` (its field path, `run` or `lstsq[1]`).
    failed_checks: Vec<String>,
}

/// The field paths, below `path`, of every object in `value` with `"residual_ok": false`: each
/// report that checks its results carries that field (the run's, each grid's, each least-squares
/// solve's).
fn failed_checks(value: &serde_json::Value, path: &str, found: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(fields) => {
            if fields.get("residual_ok") == Some(&serde_json::Value::Bool(false)) {
                found.push(if path.is_empty() { "the report" } else { path }.to_owned());
            }
            for (name, field) in fields {
                let below = if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}.{name}")
                };
                failed_checks(field, &below, found);
            }
        }
        serde_json::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                failed_checks(item, &format!("{path}[{i}]"), found);
            }
        }
        _ => {}
    }
}

impl Reports for Printed {
    fn report(&mut self, json: bool, text: serde_json::Result<String>, human: &dyn Fn()) {
        if let Some(value) = text
            .as_ref()
            .ok()
            .and_then(|t| serde_json::from_str(t).ok())
        {
            failed_checks(&value, "", &mut self.failed_checks);
        }
        match text {
            Ok(text) if json => println!("{text}"),
            // Reports hold numbers and strings only; should one not serialise, say so on
            // stderr rather than panic.
            Err(e) if json => eprintln!("error: the report could not be written as JSON: {e}"),
            _ => human(),
        }
    }
}

/// Collects each report's JSON text.
struct Collected(Vec<serde_json::Result<String>>);

impl Reports for Collected {
    fn report(&mut self, _json: bool, text: serde_json::Result<String>, _human: &dyn Fn()) {
        self.0.push(text);
    }
}

/// Runs the command line `args` (the program name first, as `std::env::args`), printing its reports
/// and errors as the `hetla` binary does, and returns the process's exit status.
pub fn main_with_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> ExitCode {
    let args: Vec<_> = args.into_iter().collect();
    let json = args.iter().skip(1).any(|a| a == "--json");
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) if json => {
            report_error(true, "usage", &usage_message(&e));
            return ExitCode::from(USAGE_EXIT);
        }
        Err(e) => e.exit(),
    };
    let mut printed = Printed::default();
    if cli.allow_unpinned {
        hetla_clusters::allow_unpinned(true);
    }
    match dispatch(&cli.command, &mut printed) {
        Ok(()) if printed.failed_checks.is_empty() => ExitCode::SUCCESS,
        Ok(()) => {
            eprintln!(
                "error: the residual check failed ({}: ratio at or above {}, printed above as TOO \
                 LARGE): the results are not accurate to LAPACK's test threshold",
                printed.failed_checks.join(", "),
                hetla::check::RESIDUAL_THRESHOLD
            );
            ExitCode::from(CHECK_EXIT)
        }
        Err(e) => {
            report_error(json, e.kind(), &e.to_string());
            ExitCode::FAILURE
        }
    }
}

/// The first line of a parse error, without clap's "error: ".
fn usage_message(e: &clap::Error) -> String {
    let message = e.render().to_string();
    let first = message.lines().next().unwrap_or_default();
    first.strip_prefix("error: ").unwrap_or(first).to_owned()
}

/// Why [`run_json`] has no reports: the kind of error (as `--json` errors name it: "usage",
/// "invalid_option", ...) and its message.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The error's kind.
    pub kind: &'static str,
    /// What was wrong and what would be right.
    pub message: String,
}

/// Runs the subcommand `args` (without the program name: `["simulate", "--n", "9600"]`) and returns
/// each of its reports as the JSON text `--json` prints. Nothing is printed, but for what a command
/// itself writes (progress on a terminal, warnings on stderr, the files it is asked to write).
pub fn run_json<S: AsRef<std::ffi::OsStr>>(
    args: &[S],
) -> std::result::Result<Vec<String>, Failure> {
    let argv = std::iter::once(std::ffi::OsStr::new("hetla")).chain(args.iter().map(AsRef::as_ref));
    let cli = Cli::try_parse_from(argv).map_err(|e| Failure {
        kind: "usage",
        message: usage_message(&e),
    })?;
    let mut out = Collected(Vec::new());
    if cli.allow_unpinned {
        hetla_clusters::allow_unpinned(true);
    }
    dispatch(&cli.command, &mut out).map_err(|e| Failure {
        kind: e.kind(),
        message: e.to_string(),
    })?;
    // A report that does not serialise (they hold numbers and strings only) is the call's error,
    // not a report of its own.
    out.0
        .into_iter()
        .collect::<serde_json::Result<_>>()
        .map_err(|e| Failure {
            kind: "json",
            message: format!("the report could not be written as JSON: {e}"),
        })
}

#[cfg(test)]
mod tests {
    use super::failed_checks;

    #[test]
    fn every_failed_residual_check_of_a_report_is_found_with_its_place() {
        let report = serde_json::json!({
            "run": { "residual": 76.0, "residual_ok": false },
            "lstsq": [{ "residual_ok": true }, { "residual_ok": false }],
            "residual_ok": false,
        });
        let mut found = Vec::new();
        failed_checks(&report, "", &mut found);
        found.sort();
        assert_eq!(found, ["lstsq[1]", "run", "the report"]);
        let mut none = Vec::new();
        failed_checks(
            &serde_json::json!({ "run": { "residual_ok": true } }),
            "",
            &mut none,
        );
        assert!(none.is_empty());
    }
}
