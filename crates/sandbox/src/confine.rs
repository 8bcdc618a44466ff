//! The Linux confinement itself: a Landlock ruleset and a seccomp program built from a
//! [`Policy`] before the fork, and [`Confinement::apply`], which the child runs between fork and
//! exec using raw system calls only (async-signal-safe: no allocation, no lock).

use super::rules::{Cover, Hidden, cover};
use super::{Policy, SandboxError};
use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, Scope,
};
use seccompiler::{BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, sock_filter};
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

/// Devices every command may write (`> /dev/null` is everywhere in build scripts).
const WRITABLE_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];
/// POSIX shared memory and named semaphores (`shm_open`, `sem_open`: Python's
/// `multiprocessing.Lock()`): writable in every mode. Shared by every process of the user, so
/// it is a channel between tasks (see docs/src/security.md).
const SHARED_MEMORY: &str = "/dev/shm";

/// The Landlock ABI from which signals and abstract unix sockets can be scoped.
const ABI_SCOPES: u32 = 6;
/// The Landlock ABI from which `truncate(2)` is checked; before it, seccomp refuses the call.
const ABI_TRUNCATE: u32 = 3;

/// The Landlock ABI version the kernel offers, if any.
pub(super) fn landlock_abi() -> Option<u32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_long = 1;
    // SAFETY: with a null attribute, size 0 and the VERSION flag the call only returns a number.
    let abi = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, LANDLOCK_CREATE_RULESET_VERSION) };
    u32::try_from(abi).ok().filter(|&v| v >= 1)
}

/// Whether seccomp filters returning an errno can be installed.
pub(super) fn seccomp_available() -> bool {
    const SECCOMP_GET_ACTION_AVAIL: libc::c_long = 2;
    let action: u32 = libc::SECCOMP_RET_ERRNO;
    // SAFETY: the kernel reads one u32 from a valid pointer.
    unsafe { libc::syscall(libc::SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action as *const u32) == 0 }
}

/// A ruleset and a filter ready to be applied in a freshly forked child.
pub(super) struct Confinement {
    ruleset: OwnedFd,
    filter: Vec<libc::sock_filter>,
    /// The filter whose matches go to the connect broker ([`super::broker`]).
    notify: Vec<libc::sock_filter>,
}

impl Confinement {
    /// Builds the confinement for `policy`; `protected` are the pids the command may not signal
    /// (the supervisor and dracode), whatever the Landlock ABI.
    pub(super) fn build(policy: &Policy, protected: &[libc::pid_t]) -> Result<Confinement, SandboxError> {
        policy.check_supported()?;
        let abi = landlock_abi().ok_or_else(|| SandboxError::Setup("Landlock disappeared".into()))?;
        let ruleset = ruleset(policy, abi).map_err(|e| SandboxError::Setup(format!("landlock: {e}")))?;
        let seccomp = |e: seccompiler::BackendError| SandboxError::Setup(format!("seccomp: {e}"));
        let program = seccomp_program(policy, abi < ABI_TRUNCATE, protected).map_err(seccomp)?;
        let notify = super::broker::notify_program(policy, refuse_x32()).map_err(seccomp)?;
        let raw = |p: BpfProgram| p.iter().map(|i| libc::sock_filter { code: i.code, jt: i.jt, jf: i.jf, k: i.k }).collect();
        Ok(Confinement { ruleset, filter: raw(program), notify: raw(notify) })
    }

    /// Confines the calling process for good: no new privileges, no capabilities, the Landlock
    /// ruleset, the seccomp filters. Returns the connect broker's listener (close-on-exec).
    ///
    /// # Safety
    /// Meant for `pre_exec`: it only makes system calls on memory owned by `self`.
    pub(super) unsafe fn apply(&self) -> std::io::Result<std::os::fd::RawFd> {
        // SAFETY: every call below is a plain system call with integer arguments or pointers to
        // memory that lives as long as `self`; none allocates or takes a lock.
        unsafe {
            check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
            drop_capabilities()?;
            check(libc::syscall(libc::SYS_landlock_restrict_self, self.ruleset.as_raw_fd(), 0) as libc::c_int)?;
            let prog =
                libc::sock_fprog { len: self.filter.len() as libc::c_ushort, filter: self.filter.as_ptr() as *mut libc::sock_filter };
            check(libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0, &prog as *const libc::sock_fprog) as libc::c_int)?;
            let prog =
                libc::sock_fprog { len: self.notify.len() as libc::c_ushort, filter: self.notify.as_ptr() as *mut libc::sock_filter };
            let flags = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER;
            let listener = libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, flags, &prog as *const libc::sock_fprog);
            check(listener as libc::c_int)?;
            Ok(listener as std::os::fd::RawFd)
        }
    }
}

fn check(ret: libc::c_int) -> std::io::Result<()> {
    if ret < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) }
}

/// Empties every capability set. The bounding set and the securebits need `CAP_SETPCAP`,
/// which only a privileged caller has; without it there is nothing there to drop, since
/// `no_new_privs` already stops execve from granting file capabilities or setuid.
///
/// # Safety
/// Async-signal-safe system calls only.
unsafe fn drop_capabilities() -> std::io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    // keep_caps locked off, no_setuid_fixup, noroot (uid 0 gains nothing at exec), each locked.
    const SECURE_BITS: libc::c_ulong = 0b11_1111;
    // SAFETY: see the caller; `header` and `data` are valid for the kernel to read.
    unsafe {
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                break; // EINVAL past the last capability, EPERM without CAP_SETPCAP.
            }
        }
        libc::prctl(libc::PR_SET_SECUREBITS, SECURE_BITS, 0, 0, 0);
        libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
        let header = Header { version: CAPABILITY_VERSION_3, pid: 0 };
        let data = [Data { effective: 0, permitted: 0, inheritable: 0 }; 2];
        check(libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr()) as libc::c_int)
    }
}

/// The crate's name for the kernel's ABI `version` (capped at the newest it knows).
fn abi_of(version: u32) -> ABI {
    match version {
        1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        5 => ABI::V5,
        6 => ABI::V6,
        7 => ABI::V7,
        8 => ABI::V8,
        _ => ABI::V9,
    }
}

/// The Landlock ruleset: read the readable allowlist (with hidden paths cut out), write the
/// writable roots and a few devices. Every right the kernel knows is handled, so anything not
/// granted is denied.
fn ruleset(policy: &Policy, version: u32) -> Result<OwnedFd, LandlockError> {
    let created = rules(policy, version)?;
    Option::<OwnedFd>::from(created).ok_or(LandlockError::NotCreated)
}

/// Why the Landlock ruleset could not be built.
#[derive(Debug, thiserror::Error)]
enum LandlockError {
    /// The crate (or the kernel through it) refused a step.
    #[error(transparent)]
    Rules(#[from] landlock::RulesetError),
    /// The kernel returned no ruleset.
    #[error("the kernel did not create a ruleset")]
    NotCreated,
}

fn rules(policy: &Policy, version: u32) -> Result<RulesetCreated, landlock::RulesetError> {
    let abi = abi_of(version);
    let all = AccessFs::from_all(abi);
    let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::HardRequirement).handle_access(all)?;
    if version >= ABI_SCOPES {
        ruleset = ruleset.scope(Scope::Signal | Scope::AbstractUnixSocket)?;
    }
    let mut created = ruleset.create()?;
    let hidden = Hidden::resolve(&policy.hidden);
    let (mut reads, mut writes) = (Cover::default(), Cover::default());
    for root in &policy.readable {
        cover(root, &hidden, &mut reads);
    }
    for root in policy.writable_roots() {
        cover(root, &hidden, &mut writes);
    }
    let device = (AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev) & all;
    let grants = (reads.passages.iter().map(|p| (p.as_path(), AccessFs::ReadDir.into())))
        .chain(reads.whole.iter().map(|p| (p.as_path(), AccessFs::from_read(abi))))
        .chain(writes.whole.iter().map(|p| (p.as_path(), all)))
        .chain(WRITABLE_DEVICES.iter().map(|p| (Path::new(*p), device)))
        .chain([(Path::new(SHARED_MEMORY), all)])
        .chain(super::READABLE_DEVICES.iter().map(|p| (Path::new(*p), AccessFs::ReadFile.into())));
    for (path, access) in grants {
        created = grant(created, path, access, abi)?;
    }
    Ok(created)
}

/// Adds a rule giving `access` beneath `path`; a path that vanished since it was listed is
/// skipped, and a file gets only the rights that apply to files.
fn grant(created: RulesetCreated, path: &Path, access: BitFlags<AccessFs>, abi: ABI) -> Result<RulesetCreated, landlock::RulesetError> {
    let Ok(fd) = PathFd::new(path) else { return Ok(created) };
    let is_dir = std::fs::metadata(path).is_ok_and(|m| m.is_dir());
    let access = if is_dir { access } else { access & AccessFs::from_file(abi) };
    if access.is_empty() {
        return Ok(created);
    }
    created.add_rule(PathBeneath::new(fd, access))
}

/// The seccomp program: refuse (`EPERM`) debugging other processes, `io_uring`, signals aimed
/// at a `protected` process or its group (so a command cannot kill its supervisor and leave
/// orphans, nor kill dracode, even where Landlock cannot scope signals), `kill(-1)`, joining a
/// protected process group, `truncate(2)` when Landlock cannot check it (`no_truncate`),
/// typing into a terminal (`TIOCSTI`, `TIOCLINUX`), the calls of [`other_processes`], and the
/// socket calls of [`super::broker::refused_socket_calls`].
fn seccomp_program(policy: &Policy, no_truncate: bool, protected: &[libc::pid_t]) -> Result<BpfProgram, seccompiler::BackendError> {
    let pid = |p: libc::pid_t| u64::from(p as u32);
    let arg_is = |index: u8, value: u64| -> Result<SeccompRule, seccompiler::BackendError> {
        SeccompRule::new(vec![SeccompCondition::new(index, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value)?])
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for nr in [
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_pidfd_send_signal,
    ] {
        rules.insert(nr, Vec::new());
    }
    let mut kill = vec![arg_is(0, pid(-1))?];
    for &p in protected {
        kill.extend([arg_is(0, pid(p))?, arg_is(0, pid(-p))?]);
    }
    rules.insert(libc::SYS_kill, kill);
    let first_arg_protected = || protected.iter().map(|&p| arg_is(0, pid(p))).collect::<Result<Vec<_>, _>>();
    for nr in [libc::SYS_tkill, libc::SYS_tgkill, libc::SYS_rt_sigqueueinfo, libc::SYS_rt_tgsigqueueinfo] {
        rules.insert(nr, first_arg_protected()?);
    }
    rules.insert(libc::SYS_setpgid, protected.iter().map(|&p| arg_is(1, pid(p))).collect::<Result<Vec<_>, _>>()?);
    rules.extend(other_processes()?);
    if no_truncate {
        rules.insert(libc::SYS_truncate, Vec::new());
    }
    #[allow(clippy::unnecessary_cast)] // the ioctl numbers' type differs between C libraries
    let typing = [libc::TIOCSTI as u64, libc::TIOCLINUX as u64];
    rules.insert(libc::SYS_ioctl, typing.into_iter().map(|request| arg_is(1, request)).collect::<Result<Vec<_>, _>>()?);
    rules.extend(super::broker::refused_socket_calls(policy)?);
    let arch = std::env::consts::ARCH.try_into()?;
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)?;
    let mut program: BpfProgram = filter.try_into()?;
    if cfg!(target_arch = "x86_64") {
        program.splice(0..0, refuse_x32());
    }
    Ok(program)
}

/// The calls that act on another process's resource limits, scheduling, memory or files, or on
/// state that outlives the command (the keyring, SysV IPC): refused, so a command cannot set its
/// supervisor's (or dracode's) file size limit to zero and have it killed by `SIGXFSZ`, nor
/// leave a channel to the next task. On itself (pid 0, as `ulimit`, `nice`, `prlimit CMD`,
/// `taskset CMD`, `ionice CMD` and `setrlimit` call them) a command keeps them all. POSIX shared
/// memory (`/dev/shm`, which Python's `multiprocessing` needs) is files, not these calls.
fn other_processes() -> Result<Vec<(i64, Vec<SeccompRule>)>, seccompiler::BackendError> {
    let arg_ne = |index: u8, value: u64| SeccompCondition::new(index, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, value);
    let not_self = || -> Result<Vec<SeccompRule>, seccompiler::BackendError> { Ok(vec![SeccompRule::new(vec![arg_ne(0, 0)?])?]) };
    // setpriority(which, who) and ioprio_set(which, who): only (this process, 0).
    let only_self = |which: u64| -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
        Ok(vec![SeccompRule::new(vec![arg_ne(0, which)?])?, SeccompRule::new(vec![arg_ne(1, 0)?])?])
    };
    const IOPRIO_WHO_PROCESS: u64 = 1;
    let mut rules =
        vec![(libc::SYS_setpriority, only_self(libc::PRIO_PROCESS as u64)?), (libc::SYS_ioprio_set, only_self(IOPRIO_WHO_PROCESS)?)];
    for nr in [
        libc::SYS_prlimit64,
        libc::SYS_sched_setaffinity,
        libc::SYS_sched_setscheduler,
        libc::SYS_sched_setparam,
        libc::SYS_sched_setattr,
        libc::SYS_migrate_pages,
        libc::SYS_move_pages,
    ] {
        rules.push((nr, not_self()?));
    }
    for nr in [
        libc::SYS_process_madvise,
        libc::SYS_process_mrelease,
        libc::SYS_kcmp,
        libc::SYS_pidfd_getfd,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_keyctl,
        libc::SYS_shmget,
        libc::SYS_shmat,
        libc::SYS_shmdt,
        libc::SYS_shmctl,
        libc::SYS_semget,
        libc::SYS_semop,
        libc::SYS_semtimedop,
        libc::SYS_semctl,
        libc::SYS_msgget,
        libc::SYS_msgsnd,
        libc::SYS_msgrcv,
        libc::SYS_msgctl,
    ] {
        rules.push((nr, Vec::new()));
    }
    Ok(rules)
}

/// On x86_64 the x32 ABI reaches the same system calls with bit 30 set in their number, which a
/// filter keyed on x86_64 numbers would let through: refuse every x32 call up front.
fn refuse_x32() -> [sock_filter; 3] {
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    const LOAD_NR: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS, offset 0 = seccomp_data.nr
    const JGE: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const RET: u16 = 0x06; // BPF_RET | BPF_K
    [
        sock_filter { code: LOAD_NR, jt: 0, jf: 0, k: 0 },
        sock_filter { code: JGE, jt: 0, jf: 1, k: X32_SYSCALL_BIT },
        sock_filter { code: RET, jt: 0, jf: 0, k: libc::SECCOMP_RET_ERRNO | libc::EPERM as u32 },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seccomp_program_builds_for_this_architecture() {
        let mut policy = Policy::for_workspace(super::super::SandboxMode::WorkspaceWrite, Path::new("/ws"), None);
        let closed = seccomp_program(&policy, false, &[100, 200]).unwrap();
        policy.network = true;
        let open = seccomp_program(&policy, false, &[100, 200]).unwrap();
        assert!(closed.len() > open.len(), "the socket rule adds instructions");
        if cfg!(target_arch = "x86_64") {
            assert_eq!(closed[..3], refuse_x32());
        }
    }
}
