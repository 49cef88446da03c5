//! `ripple`: see `ripple --help`.

fn main() -> std::process::ExitCode {
    ripple_cli::cli::main_with(std::env::args())
}
