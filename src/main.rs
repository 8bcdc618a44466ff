//! The `dracode` binary. Everything it does is in the library: [`dracode::cli`] parses the
//! command line and dispatches; [`dracode::engine`] runs batches.

fn main() -> std::process::ExitCode {
    few_malloc_arenas();
    dracode::cli::main()
}

/// glibc gives each thread that allocates an arena of its own, up to eight per core, and keeps
/// what each arena freed for later: a quarter of a 1,000-task run's peak memory
/// (`docs/src/performance.md`). The run's threads are few (the runtime's workers and at most
/// eight blocking threads), so two arenas serve them.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn few_malloc_arenas() {
    // SAFETY: the first statement of `main`, before any other thread exists; `mallopt` only
    // sets a tunable of the allocator.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Other C libraries keep their own defaults.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn few_malloc_arenas() {}
