//! `hetla cholesky`: factor a generated SPD matrix on this machine in a precision (`factor.rs`),
//! solve one system factored in single and refined in double precision (`mixed.rs`,
//! `--precision ds`), or factor across the ranks of an MPI job (`grid.rs`, `--grid`); the arguments
//! they share are `args.rs`'s.

mod args;
mod factor;
mod grid;
mod mixed;

pub use args::CholeskyArgs;

use serde::Serialize;

/// What `hetla cholesky` reports: a factorisation, a mixed solve, or a distributed run.
#[derive(Serialize)]
#[serde(untagged)]
pub enum CholeskyOutput {
    /// `--precision s|d|c|z`.
    Factor(Box<factor::CholeskyReport>),
    /// `--precision ds`.
    Mixed(Box<mixed::MixedReport>),
    /// `--grid`, on rank 0.
    Grid(Box<grid::GridReport>),
}

/// Runs `hetla cholesky`: the report, or none on the ranks of a distributed run other than rank 0.
pub fn run(args: &CholeskyArgs) -> crate::Result<Option<CholeskyOutput>> {
    let mixed = args.precision.is_mixed();
    if mixed && args.precision.working.is_complex() {
        return Err(crate::Error::InvalidOption {
            option: "precision",
            reason: "hetla cholesky times the real mixed solve (ds); the complex one is hetla::solve_spd_mixed on c64 from Rust, or hetla lu --precision zc".into(),
        });
    }
    if args.inverse && (args.grid.is_some() || mixed) {
        return Err(crate::Error::InvalidOption {
            option: "inverse",
            reason: "the inverse is timed on one node in one precision: drop --grid or give --precision s, d, c or z".into(),
        });
    }
    if let (Some(tail), true) = (args.tail.tail(), args.grid.is_some() || mixed) {
        return Err(crate::Error::InvalidOption {
            option: "tail-tile",
            reason: format!(
                "a tail ({tail}) is a plan of one node in one precision: drop --tail-tile and \
                 --tail-from, or --grid and --precision ds"
            ),
        });
    }
    if mixed {
        refuse_what_mixed_ignores(args)?;
    }
    super::args::check_tensor_math(args.tensor_math, args.precision, None)?;
    if let Some(grid) = args.grid {
        let report = grid::run(args, grid)?;
        return Ok(report.map(|r| CholeskyOutput::Grid(Box::new(r))));
    }
    let report = match args.precision.single() {
        Some(p) => hetla_kernels::with_scalar!(p, T => factor::factor::<T>(args)?),
        // --precision ds (zc is refused above).
        None => return mixed::run(args).map(|r| Some(CholeskyOutput::Mixed(Box::new(r)))),
    };
    Ok(Some(CholeskyOutput::Factor(Box::new(report))))
}

/// The mixed solve (`--precision ds`) is the library's `solve_refined` (`solve_refined_device` with
/// `--resident`) beside a plain f64 factor and solve: it writes no trace, times only the GPU's
/// peers, and takes the library's storage and host memory. An option it would not honour is refused
/// before any work, naming it.
fn refuse_what_mixed_ignores(args: &CholeskyArgs) -> crate::Result<()> {
    let given = [
        ("--trace", args.traces.trace.is_some()),
        ("--gantt", args.traces.gantt.is_some()),
        ("--compare cpu", args.compare.is_some_and(|c| c.cpu())),
        ("--huge-pages", args.huge_pages),
        ("--storage", args.storage != hetla::Storage::Auto),
        (
            "--host-memory",
            args.host_memory != hetla::HostMemory::default(),
        ),
    ];
    let ignored: Vec<&str> = (given.iter())
        .filter(|(_, on)| *on)
        .map(|(name, _)| *name)
        .collect();
    if ignored.is_empty() {
        return Ok(());
    }
    Err(crate::Error::InvalidOption {
        option: "precision",
        reason: format!(
            "--precision ds times the mixed solve (Cholesky::solve_refined, or \
             solve_refined_device with --resident) beside the f64 one, which write no trace, time \
             only the GPU's peers (--compare gpu) and use the library's storage and host memory: \
             drop {}, or give --precision s, d, c or z",
            ignored.join(", ")
        ),
    })
}

/// Prints a report as a table.
pub fn print(output: &CholeskyOutput) {
    match output {
        CholeskyOutput::Factor(r) => factor::print(r),
        CholeskyOutput::Mixed(r) => mixed::print(r),
        CholeskyOutput::Grid(r) => grid::print(r),
    }
}
