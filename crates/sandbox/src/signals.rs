//! Signals and process checks the core needs, with the `unsafe` they take kept here: a signal
//! to a whole process group, whether a process still runs, and a signal's disposition at
//! start-up.

/// Sends `signal` to every process of group `pgid` (a group of dracode's own making: a
/// command's or a background process's, never dracode's). A group that is gone is no error;
/// pgid 0 or 1 (dracode's own group, init's) is never signalled.
pub fn signal_group(pgid: i32, signal: i32) {
    if pgid <= 1 {
        return;
    }
    // SAFETY: killpg passes no memory. The group is a child's own (`process_group(0)`); the
    // only race is the id's reuse after the whole group is gone.
    unsafe {
        libc::killpg(pgid, signal);
    }
}

/// True when process `pid` exists (also when it is another user's: `EPERM`).
pub fn process_exists(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 sends nothing; it only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM) }
}

/// Ignores `signal` in this process (`SIGIO`, `SIGPIPE`). Call at start-up, before any thread.
pub fn ignore(signal: i32) {
    // SAFETY: changes this process's disposition of `signal`; called before any thread exists.
    unsafe {
        libc::signal(signal, libc::SIG_IGN);
    }
}

/// Gives `signal` back its default action in this process. Call at start-up, before any thread.
pub fn restore_default(signal: i32) {
    // SAFETY: changes this process's disposition of `signal`; called before any thread exists.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_exists_and_a_reaped_child_does_not() {
        assert!(process_exists(std::process::id() as i32));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        assert!(!process_exists(pid));
        assert!(!process_exists(0) && !process_exists(-1));
    }
}
