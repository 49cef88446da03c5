//! `ripple`: see `ripple --help`.

use ripple_cli::allocator;

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if allocator::budget_asked(&args) {
        // SAFETY: the process has started no thread yet (nothing runs before `main` but the
        // runtime's set-up, which starts none).
        unsafe { allocator::give_back_freed_memory() };
    }
    ripple_cli::cli::main_with(args)
}
