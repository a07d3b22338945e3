//! Finding the CUDA libraries without `LD_LIBRARY_PATH`.
//!
//! cudarc opens `libcublas.so.13` and `libcusolver.so.12` by bare name, so the system loader finds
//! them only in its default folders or where `LD_LIBRARY_PATH` points; CUDA installed from Python
//! wheels (`site-packages/nvidia/cu13/lib`) or in a toolkit folder is missed. Before cudarc opens
//! anything, [`libraries`] opens the libraries cuBLAS and cuSOLVER need, **by absolute path and in
//! dependency order** (nvJitLink, cuBLASLt, cuBLAS, cuSPARSE, cuSOLVER), from the first folder of
//! [`search_dirs`] that holds each. The loader then hands cudarc's later
//! `dlopen("libcublas.so.13")` the library already loaded under that name. A library found in no
//! folder is left to the loader's default search.
//!
//! Folders, in order:
//! 1. `HETLA_CUDA_LIB_DIR` (one folder, or several separated by `:`);
//! 2. `CUDA_HOME/lib64`, then `CUDA_PATH/lib64`;
//! 3. `/usr/local/cuda/lib64`;
//! 4. the `nvidia/*/lib` folders of the Python environments in use: `VIRTUAL_ENV`, `CONDA_PREFIX`,
//!    and the environment of each `bin` folder on `PATH`
//!    (`<prefix>/lib/python3.*/site-packages/nvidia/*/lib`).
//!
//! The driver (`libcuda.so.1`) comes with the kernel driver, in the loader's folders: it is only
//! looked for there (a toolkit's `stubs/libcuda.so` must never be loaded).
//!
//! The real libraries load without a GPU or a driver, so `hetla info` can say on any machine which
//! ones were found, where, and their versions, or why not.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The libraries cuBLAS and cuSOLVER need, in the order they must be loaded: (name, file).
pub const LIBRARIES: [(&str, &str); 5] = [
    ("nvJitLink", "libnvJitLink.so.13"),
    ("cuBLASLt", "libcublasLt.so.13"),
    ("cuBLAS", "libcublas.so.13"),
    ("cuSPARSE", "libcusparse.so.12"),
    ("cuSOLVER", "libcusolver.so.12"),
];

/// The environment variable that names the folder of the CUDA libraries first.
pub const LIB_DIR_VAR: &str = "HETLA_CUDA_LIB_DIR";

/// One library: where it was loaded from and its version, or why it was not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaLibrary {
    /// Its name ("cuBLAS").
    pub name: &'static str,
    /// The file opened ("libcublas.so.13").
    pub file: &'static str,
    /// The file it was loaded from (`None` when not loaded).
    pub path: Option<PathBuf>,
    /// "major.minor.patch" as the library reports it (cuBLAS and cuSOLVER), when loaded.
    pub version: Option<String>,
    /// Why it was not loaded, or what failed before it was (`None` when all went well).
    pub error: Option<String>,
}

impl CudaLibrary {
    /// Whether the library is loaded.
    pub fn loaded(&self) -> bool {
        self.path.is_some()
    }
}

/// The folders searched, in order (see the module documentation), given the environment variable
/// lookup `var`; each once, only those that exist.
pub fn search_dirs(var: impl Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(list) = var(LIB_DIR_VAR) {
        dirs.extend(std::env::split_paths(&list));
    }
    for root in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(root) = var(root) {
            dirs.push(PathBuf::from(root).join("lib64"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    let mut prefixes: Vec<PathBuf> = ["VIRTUAL_ENV", "CONDA_PREFIX"]
        .into_iter()
        .filter_map(|v| var(v).map(PathBuf::from))
        .collect();
    if let Some(path) = var("PATH") {
        prefixes.extend(
            std::env::split_paths(&path)
                .filter(|bin| bin.file_name().is_some_and(|n| n == "bin"))
                .filter_map(|bin| bin.parent().map(Path::to_path_buf)),
        );
    }
    for prefix in prefixes {
        dirs.extend(wheel_dirs(&prefix));
    }
    let mut unique: Vec<PathBuf> = Vec::new();
    for dir in dirs {
        if dir.is_dir() && !unique.contains(&dir) {
            unique.push(dir);
        }
    }
    unique
}

/// The `lib/python3.*/site-packages/nvidia/*/lib` folders of a Python environment, sorted.
fn wheel_dirs(prefix: &Path) -> Vec<PathBuf> {
    let sorted = |dir: &Path| -> Vec<PathBuf> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|r| r.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        entries.sort();
        entries
    };
    let mut out = Vec::new();
    for python in sorted(&prefix.join("lib")) {
        let is_python = python
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("python3"));
        if !is_python {
            continue;
        }
        for package in sorted(&python.join("site-packages").join("nvidia")) {
            let lib = package.join("lib");
            if lib.is_dir() {
                out.push(lib);
            }
        }
    }
    out
}

/// The first of `dirs` that holds `file`.
pub fn locate(file: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    dirs.iter().map(|d| d.join(file)).find(|p| p.is_file())
}

/// Opens the libraries of [`LIBRARIES`] in order from `dirs` (else by name, through the loader's
/// own search) and keeps them open for the life of the process.
pub fn load_from(dirs: &[PathBuf]) -> Vec<CudaLibrary> {
    LIBRARIES
        .iter()
        .map(|&(name, file)| load_one((name, file), dirs))
        .collect()
}

/// Opens the library `file` from the first of `dirs` that holds it, else by name, and keeps it open
/// for the life of the process.
fn load_one((name, file): (&'static str, &'static str), dirs: &[PathBuf]) -> CudaLibrary {
    let mut library = CudaLibrary {
        name,
        file,
        path: None,
        version: None,
        error: None,
    };
    if let Some(path) = locate(file, dirs) {
        // SAFETY: loading a CUDA library runs its initialisers, which have no preconditions; no
        // symbol is used here.
        match unsafe { libloading::Library::new(&path) } {
            Ok(lib) => {
                std::mem::forget(lib);
                library.path = Some(path);
                return library;
            }
            Err(e) => library.error = Some(format!("{}: {}", path.display(), describe(&e))),
        }
    }
    // SAFETY: as above.
    match unsafe { libloading::Library::new(file) } {
        Ok(lib) => {
            std::mem::forget(lib);
            library.path = Some(loaded_path(file).unwrap_or_else(|| file.into()));
            library.error = None;
        }
        Err(e) => {
            let searched: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
            let before = library
                .error
                .take()
                .map(|e| format!("{e}; "))
                .unwrap_or_default();
            library.error = Some(format!(
                "{before}not in {} nor where the system loader looks ({}); set {LIB_DIR_VAR} to \
                 the folder that holds {file}",
                if searched.is_empty() {
                    "any searched folder".to_owned()
                } else {
                    searched.join(", ")
                },
                describe(&e)
            ));
        }
    }
    library
}

/// NVRTC, the run-time compiler of hetla's own kernels (`cuda::elementwise`), loaded once like the
/// libraries of [`LIBRARIES`] but not needed by them: without it a GPU still works, and the work of
/// those kernels is done on the host.
pub fn nvrtc() -> &'static CudaLibrary {
    static NVRTC: OnceLock<CudaLibrary> = OnceLock::new();
    NVRTC.get_or_init(|| load_one(NVRTC_LIBRARY, &search_dirs(|v| std::env::var_os(v))))
}

/// NVRTC's (name, file).
pub const NVRTC_LIBRARY: (&str, &str) = ("NVRTC", "libnvrtc.so.13");

/// A loading error with the loader's own message (libloading keeps it as the source).
fn describe(e: &libloading::Error) -> String {
    match std::error::Error::source(e) {
        Some(source) => format!("{e}: {source}"),
        None => e.to_string(),
    }
}

/// Where the loader found an already loaded `file` (from `/proc/self/maps`).
fn loaded_path(file: &str) -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| Path::new(p).file_name().is_some_and(|n| n == file))
        .map(PathBuf::from)
}

/// The CUDA libraries of this process, loaded once (see the module documentation), with the
/// versions cuBLAS and cuSOLVER report.
pub fn libraries() -> &'static [CudaLibrary] {
    static LIBRARIES: OnceLock<Vec<CudaLibrary>> = OnceLock::new();
    LIBRARIES.get_or_init(|| {
        let dirs = search_dirs(|v| std::env::var_os(v));
        let mut libs = load_from(&dirs);
        for lib in libs.iter_mut().filter(|l| l.loaded()) {
            lib.version = match lib.name {
                "cuBLAS" => version(|part, value| {
                    use cudarc::cublas::sys::{self as blas, libraryPropertyType as P};
                    let kind = [P::MAJOR_VERSION, P::MINOR_VERSION, P::PATCH_LEVEL][part];
                    // SAFETY: cuBLAS is loaded; the call only writes `value`.
                    let status = unsafe { blas::cublasGetProperty(kind, value) };
                    status == blas::cublasStatus_t::CUBLAS_STATUS_SUCCESS
                }),
                "cuSOLVER" => version(|part, value| {
                    use cudarc::cusolver::sys::{self as solver, libraryPropertyType as P};
                    let kind = [P::MAJOR_VERSION, P::MINOR_VERSION, P::PATCH_LEVEL][part];
                    // SAFETY: cuSOLVER is loaded; the call only writes `value`.
                    let status = unsafe { solver::cusolverGetProperty(kind, value) };
                    status == solver::cusolverStatus_t::CUSOLVER_STATUS_SUCCESS
                }),
                _ => None,
            };
        }
        libs
    })
}

/// "major.minor.patch" from a library's `GetProperty` call (`get(part, value)`, part 0 to 2 for the
/// major, minor and patch numbers).
fn version(get: impl Fn(usize, *mut std::ffi::c_int) -> bool) -> Option<String> {
    let mut parts = [0; 3];
    for (i, part) in parts.iter_mut().enumerate() {
        if !get(i, part) {
            return None;
        }
    }
    Some(format!("{}.{}.{}", parts[0], parts[1], parts[2]))
}

/// The driver library: where the loader found it, or why it was not.
pub fn driver() -> CudaLibrary {
    let mut driver = CudaLibrary {
        name: "CUDA driver",
        file: "libcuda.so.1",
        path: None,
        version: None,
        error: None,
    };
    // SAFETY: loading the driver library runs its initialisers, which have no
    // preconditions; no symbol is used here.
    match unsafe { libloading::Library::new(driver.file) } {
        Ok(lib) => {
            std::mem::forget(lib);
            driver.path = Some(loaded_path(driver.file).unwrap_or_else(|| driver.file.into()));
        }
        Err(e) => {
            driver.error = Some(format!(
                "not where the system loader looks ({}): no NVIDIA driver on this machine",
                describe(&e)
            ))
        }
    }
    driver
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake tree: a toolkit, a virtual environment on PATH with two wheel folders, and a conda
    /// prefix; returns (root, the variables).
    fn tree() -> (tempfile::TempDir, Vec<(&'static str, OsString)>) {
        let root = tempfile::tempdir().unwrap();
        let p = |s: &str| root.path().join(s);
        for d in [
            "first",
            "toolkit/lib64",
            "venv/bin",
            "venv/lib/python3.12/site-packages/nvidia/cu13/lib",
            "venv/lib/python3.12/site-packages/nvidia/cublas/lib",
            "venv/lib/python3.12/site-packages/nvidia/nolib",
            "conda/lib/python3.11/site-packages/nvidia/cu13/lib",
        ] {
            std::fs::create_dir_all(p(d)).unwrap();
        }
        let path = std::env::join_paths([p("venv/bin"), PathBuf::from("/usr/bin")]).unwrap();
        let vars = vec![
            (LIB_DIR_VAR, p("first").into_os_string()),
            ("CUDA_HOME", p("toolkit").into_os_string()),
            ("CONDA_PREFIX", p("conda").into_os_string()),
            ("PATH", path),
        ];
        (root, vars)
    }

    fn lookup<'a>(vars: &'a [(&'static str, OsString)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn folders_are_searched_in_the_documented_order() {
        let (root, vars) = tree();
        let dirs = search_dirs(lookup(&vars));
        let rel: Vec<String> = dirs
            .iter()
            .filter_map(|d| d.strip_prefix(root.path()).ok())
            .map(|d| d.display().to_string())
            .collect();
        assert_eq!(
            rel,
            [
                "first",
                "toolkit/lib64",
                "conda/lib/python3.11/site-packages/nvidia/cu13/lib",
                "venv/lib/python3.12/site-packages/nvidia/cu13/lib",
                "venv/lib/python3.12/site-packages/nvidia/cublas/lib",
            ]
        );
        // Folders that do not exist are left out, and each folder comes once.
        let twice = [
            (LIB_DIR_VAR, vars[0].1.clone()),
            ("CUDA_HOME", OsString::from("/no/such")),
        ];
        let mut with_dup = vars.clone();
        with_dup.extend(twice);
        assert_eq!(search_dirs(lookup(&with_dup)).len(), dirs.len());
    }

    #[test]
    fn the_first_folder_holding_a_library_wins_and_a_bad_file_says_where_it_was() {
        let (root, vars) = tree();
        let dirs = search_dirs(lookup(&vars));
        let wheel = root
            .path()
            .join("venv/lib/python3.12/site-packages/nvidia/cu13/lib");
        let toolkit = root.path().join("toolkit/lib64");
        std::fs::write(wheel.join("libcublas.so.13"), b"not a library").unwrap();
        assert_eq!(
            locate("libcublas.so.13", &dirs),
            Some(wheel.join("libcublas.so.13"))
        );
        std::fs::write(toolkit.join("libcublas.so.13"), b"not a library").unwrap();
        assert_eq!(
            locate("libcublas.so.13", &dirs),
            Some(toolkit.join("libcublas.so.13"))
        );
        assert_eq!(locate("libcusolver.so.12", &dirs), None);
        // The fake file cannot be loaded: the error names it (and, unless the system has
        // cuBLAS, the folders searched and the variable to set).
        let cublas = load_from(&dirs)
            .into_iter()
            .find(|l| l.name == "cuBLAS")
            .unwrap();
        if !cublas.loaded() {
            let error = cublas.error.unwrap();
            assert!(error.contains("toolkit/lib64/libcublas.so.13"), "{error}");
            assert!(error.contains(LIB_DIR_VAR), "{error}");
        }
    }

    /// The real CUDA 13 libraries from Python wheels load with no `LD_LIBRARY_PATH`: run in an
    /// environment made with `python3 -m venv V && V/bin/pip install nvidia-cublas nvidia-cusolver`
    /// (about 1.4 GB), as `VIRTUAL_ENV=V cargo test -p hetla-kernels -- --ignored real_wheels`.
    #[test]
    #[ignore = "needs the CUDA 13 wheels in $VIRTUAL_ENV"]
    fn real_wheels_load_by_absolute_path() {
        let venv = PathBuf::from(std::env::var_os("VIRTUAL_ENV").expect("VIRTUAL_ENV"));
        // Cargo sets LD_LIBRARY_PATH for tests (its own folders): none of them holds CUDA.
        let loader = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
        assert!(!loader.contains(&*venv.to_string_lossy()), "{loader}");
        for lib in libraries() {
            let path = lib.path.as_ref().unwrap_or_else(|| panic!("{lib:?}"));
            assert!(path.starts_with(&venv), "{lib:?}");
        }
        let cublas = libraries().iter().find(|l| l.name == "cuBLAS").unwrap();
        assert!(
            cublas
                .version
                .as_deref()
                .is_some_and(|v| v.starts_with("13.")),
            "{cublas:?}"
        );
        // cudarc now finds them by name.
        // SAFETY: only checks that the libraries open.
        assert!(unsafe { cudarc::cublas::sys::is_culib_present() });
        assert!(unsafe { cudarc::cusolver::sys::is_culib_present() });
    }
}
