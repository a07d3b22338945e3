//! How many threads a kernel runs on.

use faer::Par;

/// The parallelism for `threads` threads of the current pool: sequential for one thread (no rayon
/// overhead), rayon otherwise.
pub fn par_for(threads: usize) -> Par {
    if threads > 1 {
        Par::rayon(threads)
    } else {
        Par::Seq
    }
}

/// The number of threads `par` asks for.
pub(crate) fn threads(par: Par) -> usize {
    match par {
        Par::Seq => 1,
        Par::Rayon(n) => n.get(),
    }
}
