//! Where the laboratory's examples that remake a page of docs/ read and write: `--out FILE` when
//! given, else the page in the repository whose root is the current directory (as `cargo run` from
//! the root leaves it). An example run elsewhere without `--out` refuses with what to give, rather
//! than writing into the source tree it was built from.

use std::path::{Path, PathBuf};

/// The repository's root (the current directory, which must hold `docs/` when the example
/// `reads_root` or no `--out` is given) and the file to write: `--out FILE` from the command line,
/// else `page` (a path under the root, "docs/fidelity.md").
pub fn root_and_output(page: &str, reads_root: bool) -> hetla_lab::Result<(PathBuf, PathBuf)> {
    let bad = |reason: String| hetla_lab::Error::InvalidOption {
        option: "out",
        reason,
    };
    let mut args = std::env::args().skip(1);
    let mut out = None;
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--out", Some(file)) => out = Some(PathBuf::from(file)),
            _ => {
                return Err(bad(format!(
                    "unexpected argument {arg:?}: the only option is --out FILE (default {page})"
                )));
            }
        }
    }
    let root = std::env::current_dir().map_err(|e| bad(format!("no current directory: {e}")))?;
    if (reads_root || out.is_none()) && !root.join("docs").is_dir() {
        return Err(bad(format!(
            "{} holds no docs/: run from the repository's root (it reads the recorded rows there) \
             and give --out FILE to write elsewhere than {page}",
            root.display()
        )));
    }
    let out = out.unwrap_or_else(|| root.join(Path::new(page)));
    Ok((root, out))
}
