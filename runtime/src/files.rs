//! Output files (traces, charts, tables, platform files, performance models) written so that
//! nothing is ever half-written and a run never fails at its end for a path known at its start.
//!
//! - [`check_writable`] proves, before the work starts, that a file can be created in the output's
//!   directory (it creates and removes a temporary file there), and that the path is not a
//!   directory.
//! - [`check_distinct`] refuses two outputs of one command on the same file.
//! - [`write_atomic`] writes a temporary file in the same directory, syncs it and renames it over
//!   the target: readers see the old file or the new one, never a part; a failure removes the
//!   temporary file.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The directory a file is created in ("." for a bare file name).
fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// An error unless `path` can be written: not a directory, its directory exists, and a file can be
/// created in it. `what` names the option ("--trace").
pub fn check_writable(what: &str, path: &Path) -> Result<()> {
    let fail = |reason: String| Error::output(path, format!("{what}: {reason}"));
    if path.as_os_str().is_empty() {
        return Err(fail("the path is empty".into()));
    }
    if path.is_dir() {
        return Err(fail("is a directory; give a file name".into()));
    }
    let dir = directory_of(path);
    if !dir.is_dir() {
        return Err(fail(format!(
            "directory {} does not exist; create it first",
            dir.display()
        )));
    }
    tempfile::Builder::new()
        .prefix(".hetla-probe")
        .tempfile_in(dir)
        .map(drop)
        .map_err(|e| fail(format!("cannot create a file in {}: {e}", dir.display())))
}

/// An error when two of `outputs` (option name, path) name the same file.
pub fn check_distinct(outputs: &[(&str, &Path)]) -> Result<()> {
    let canonical = |p: &Path| -> PathBuf {
        // The file may not exist yet: canonicalise its directory.
        let dir = std::fs::canonicalize(directory_of(p)).unwrap_or_else(|_| directory_of(p).into());
        dir.join(p.file_name().unwrap_or_default())
    };
    for (i, (a, pa)) in outputs.iter().enumerate() {
        for (b, pb) in &outputs[i + 1..] {
            if canonical(pa) == canonical(pb) {
                return Err(Error::output(
                    pa,
                    format!("{a} and {b} name the same file; give each its own"),
                ));
            }
        }
    }
    Ok(())
}

/// Writes `bytes` to `path` atomically (temporary file in the same directory, fsync, rename); on
/// any failure the previous file is untouched and no temporary file is left.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let fail = |e: std::io::Error| Error::io("write", path, e);
    let dir = directory_of(path);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let prefix = format!(".{name}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    // A new file gets the permissions `File::create` would give (0666 less the umask), not
    // tempfile's private 0600.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut tmp = builder.tempfile_in(dir).map_err(fail)?;
    tmp.write_all(bytes).map_err(fail)?;
    // An existing file keeps its permissions.
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = tmp.as_file().set_permissions(meta.permissions());
    }
    tmp.as_file().sync_all().map_err(fail)?;
    tmp.persist(path).map_err(|e| fail(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_writes_replace_whole_files_and_leave_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        write_atomic(&path, b"first").unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "only the file itself is left");
        // A target that is a directory fails and leaves nothing behind.
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        assert!(write_atomic(&sub, b"x").is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn a_failed_write_keeps_the_systems_error_as_its_source() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no-such-dir").join("out.json");
        let err = write_atomic(&path, b"x").unwrap_err();
        assert_eq!(err.kind(), "io");
        let source = std::error::Error::source(&err).expect("a source");
        let io = std::error::Error::source(source)
            .and_then(|e| e.downcast_ref::<std::io::Error>())
            .expect("the io::Error itself");
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
        assert!(err.to_string().starts_with("cannot write "), "{err}");
    }

    #[test]
    fn outputs_are_checked_before_the_work() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-such-dir").join("t.json");
        let err = check_writable("--trace", &missing).unwrap_err().to_string();
        assert!(
            err.contains("--trace") && err.contains("does not exist"),
            "{err}"
        );
        let err = check_writable("--gantt", dir.path())
            .unwrap_err()
            .to_string();
        assert!(err.contains("is a directory"), "{err}");
        assert!(check_writable("--trace", &dir.path().join("t.json")).is_ok());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let a = dir.path().join("x.svg");
        let b = dir.path().join(".").join("x.svg");
        assert!(check_distinct(&[("--trace", &a), ("--gantt", &b)]).is_err());
        assert!(check_distinct(&[("--trace", &a), ("--gantt", &dir.path().join("y"))]).is_ok());
    }
}
