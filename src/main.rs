//! The `dracode` binary. Everything it does is in the library: [`dracode::cli`] parses the
//! command line and dispatches; [`dracode::engine`] runs batches.

fn main() -> std::process::ExitCode {
    dracode::cli::main()
}
