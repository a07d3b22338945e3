//! The `hetla` command line: parse, dispatch to a subcommand (`commands/`, one file each), and
//! report its result or error (text, or one JSON object with `--json`).

mod commands;
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
use commands::output::{emit, report_error, wants_json};
pub use error::{Error, Result};

#[global_allocator]
static ALLOCATOR: memory::CountingAllocator = memory::CountingAllocator;

/// Tiled Cholesky on a heterogeneous node: factor, time and check.
#[derive(Parser)]
#[command(name = "hetla", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
}

/// Exit status of a command line that does not parse (as clap's own).
const USAGE_EXIT: u8 = 2;

fn main() -> ExitCode {
    // Output into a closed pipe (`hetla info | head -1`) ends the process as it ends other
    // tools, by SIGPIPE, instead of a panic in `println!`.
    // SAFETY: setting a signal's disposition to its default has no preconditions; it is
    // done first, before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let json = wants_json();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) if json => {
            let message = e.render().to_string();
            let first = message.lines().next().unwrap_or_default();
            let first = first.strip_prefix("error: ").unwrap_or(first);
            report_error(true, "usage", first);
            return ExitCode::from(USAGE_EXIT);
        }
        Err(e) => e.exit(),
    };
    let result = match &cli.command {
        Command::Cholesky(args) => commands::cholesky::run(args).map(|r| {
            r.iter()
                .for_each(|r| emit(args.json, r, commands::cholesky::print))
        }),
        Command::Calibrate(args) => {
            calibrate_cmd(args).map(|r| emit(args.json, &r, print_calibrate))
        }
        Command::Info(args) => info(args).map(|r| emit(args.json, &r, print_info)),
        Command::Bound(args) => bound_cmd(args).map(|r| emit(args.json, &r, print_bound)),
        Command::Simulate(args) => {
            commands::simulate::run(args).map(|r| emit(args.json, &r, commands::simulate::print))
        }
        Command::Sweep(args) => {
            commands::sweep::run(args).map(|r| emit(args.json, &r, commands::sweep::print))
        }
        Command::Batch(args) => {
            commands::batch::run(args).map(|r| emit(args.json, &r, commands::batch::print))
        }
        Command::Qr(args) => {
            commands::qr::run(args).map(|r| emit(args.json, &r, commands::qr::print))
        }
        Command::Lu(args) => {
            commands::lu::run(args).map(|r| emit(args.json, &r, commands::lu::print))
        }
        Command::Gemm(args) => {
            commands::gemm::run(args).map(|r| emit(args.json, &r, commands::gemm::print))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            report_error(json, e.kind(), &e.to_string());
            ExitCode::FAILURE
        }
    }
}
