//! Subcommands of the `hetla` binary that run on modelled platforms.

pub mod gemm;
pub mod simulate;
pub mod sweep;
