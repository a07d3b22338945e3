//! The subcommands of the `hetla` binary, one file each, and what they share: argument groups
//! ([`args`]) and the way they report ([`output`]).

pub mod args;
pub mod batch;
pub mod bound;
pub mod calibrate;
pub mod cholesky;
pub mod gemm;
pub mod grid_job;
pub mod info;
pub mod ldlt;
pub mod lu;
pub mod output;
#[cfg(test)]
mod parsers;
pub mod qr;
pub mod report;
pub mod simulate;
pub mod sweep;
pub mod tune;
