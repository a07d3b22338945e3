//! Subcommands of the `hetla` binary that run on modelled platforms.

pub mod simulate;
pub mod sweep;
