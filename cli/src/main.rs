//! The `hetla` binary: the command line of the `hetla_cli` library, with its counting allocator.

use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: hetla_cli::CountingAllocator = hetla_cli::CountingAllocator;

fn main() -> ExitCode {
    // Output into a closed pipe (`hetla info | head -1`) ends the process as it ends other
    // tools, by SIGPIPE, instead of a panic in `println!`.
    // SAFETY: setting a signal's disposition to its default has no preconditions; it is
    // done first, before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    hetla_cli::main_with_args(std::env::args_os())
}
