//! The connect broker: every `connect()` a confined command makes is decided, and performed, by
//! the supervisor — and without network its `bind()` and `listen()` too (see [`loopback`]).
//!
//! The command's seccomp filters send `connect` to the supervisor as a user notification
//! (`SECCOMP_RET_USER_NOTIF`, [`notify_program`]); the listener is created in the child between
//! fork and exec and handed to the supervisor over a socket pair ([`channel`], [`hand_over`]),
//! never reaching the command. For each notification the broker:
//! 1. takes a duplicate of the command's socket (`pidfd_getfd` on the thread group's leader);
//! 2. reads the socket's family from the socket itself (`SO_DOMAIN`) and the address from the
//!    command's memory **once** (`process_vm_readv`);
//! 3. checks the notification is still pending (`SECCOMP_IOCTL_NOTIF_ID_VALID`), so the pid
//!    read was not recycled;
//! 4. decides, and when allowed connects **its own copy** of the address on its duplicate —
//!    the same open file, so the connection is the command's — and returns the result.
//!
//! `SECCOMP_USER_NOTIF_FLAG_CONTINUE` is never used: after a "continue" the kernel re-reads both
//! the address and the descriptor table, which another thread of the command can change between
//! the check and the call (swapping the address, or `dup2`-ing a Unix socket over the checked
//! one). The broker acts only on what it checked.
//!
//! What is allowed:
//! - `AF_UNIX` pathname sockets whose file lies inside a writable root (workspace, TMPDIR) or is
//!   one of [`Policy::unix_sockets`]. The path is opened `O_PATH` relative to the calling
//!   thread's working directory (`/proc/<tid>/cwd`), checked to be a socket, located by its
//!   real path (`/proc/self/fd/N`), and connected through `/proc/self/fd/N`, so no rename or
//!   symlink swap can change which file is reached (and the 108-byte path limit does not apply).
//!   Abstract addresses are refused: the broker runs outside the command's Landlock domain, so
//!   it cannot let Landlock's abstract-socket scope decide, and a command rarely needs them.
//! - `AF_INET`/`AF_INET6` anywhere when [`Policy::network`] is on; otherwise only the exact
//!   address of the [`Policy::proxy`] and of the [`Policy::endpoint`], if any, and the command's own loopback listeners.
//!
//! A refused connect fails with `EACCES` ("Permission denied": a policy refusal that retry loops
//! should not spin on, unlike `ECONNREFUSED`) and appends a [`Report::NetworkDenied`] to the
//! command's report file. Without network, `socket()` for a non-stream Internet socket (DNS over
//! UDP, QUIC) is also brokered, so that refusal is reported too (host `udp`, port 0): a name
//! lookup with the network off is reported like a refused connection.
//!
//! The rest of the socket rules are plain seccomp refusals ([`refused_socket_calls`]):
//! `AF_UNIX` datagram sockets (an unconnected one can `sendto` any path, bypassing `connect`),
//! `MSG_FASTOPEN` sends (TCP fast open connects without `connect`), and without network every
//! family but `AF_UNIX` and `AF_INET`/`AF_INET6` TCP.

use super::Policy;
use super::incidents::{self, Report};
use super::loopback;
use seccompiler::{BackendError, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule};
use std::ffi::{CString, OsStr};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// `getsockopt(SOL_SOCKET, SO_DOMAIN)`: the socket's address family.
const SO_DOMAIN: libc::c_int = 39;
/// The `SECCOMP_RET_TRACE` data that marks, in seccompiler's output, the returns to turn into
/// `SECCOMP_RET_USER_NOTIF` (seccompiler has no such action).
const NOTIFY_MARK: u32 = 0x0b0c;
/// `sizeof(struct sockaddr_storage)`: the kernel refuses longer addresses.
const MAX_ADDRESS: usize = 128;
/// The socket types `AF_UNIX` maps to datagram semantics (`SOCK_RAW` is a `SOCK_DGRAM` there).
const UNIX_DATAGRAM_TYPES: [libc::c_int; 2] = [libc::SOCK_DGRAM, libc::SOCK_RAW];
/// Folders of system sockets the C library connects to on its own (name service caches,
/// `nss-systemd`, `nss-resolve`): refused like any other, but not reported, since nearly every
/// program probes them. They are the DNS and user-lookup channels the sandbox closes.
const QUIET_REFUSALS: &[&str] = &["/run/nscd", "/var/run/nscd", "/run/systemd/userdb", "/run/systemd/resolve"];
/// The low bits of `socket()`'s type argument that hold the type (the rest are flags).
const SOCK_TYPE_MASK: u64 = 0xf;

fn arg_eq(index: u8, value: u64) -> Result<SeccompCondition, BackendError> {
    SeccompCondition::new(index, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value)
}

fn arg_ne(index: u8, value: u64) -> Result<SeccompCondition, BackendError> {
    SeccompCondition::new(index, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, value)
}

fn type_is(value: libc::c_int) -> Result<SeccompCondition, BackendError> {
    SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::MaskedEq(SOCK_TYPE_MASK), value as u64)
}

/// The socket system calls the errno filter refuses (`EPERM`) for `policy`, keyed by number.
pub(super) fn refused_socket_calls(policy: &Policy) -> Result<Vec<(i64, Vec<SeccompRule>)>, BackendError> {
    let unix = libc::AF_UNIX as u64;
    let unix_datagram =
        || UNIX_DATAGRAM_TYPES.iter().map(|&t| SeccompRule::new(vec![arg_eq(0, unix)?, type_is(t)?])).collect::<Result<Vec<_>, _>>();
    let mut socket = unix_datagram()?;
    if !policy.network {
        let other_family = vec![arg_ne(0, unix)?, arg_ne(0, libc::AF_INET as u64)?, arg_ne(0, libc::AF_INET6 as u64)?];
        // Only TCP: an SCTP stream socket sets up an association on `sendmsg` or a socket
        // option, without `connect`.
        for family in [libc::AF_INET, libc::AF_INET6] {
            let not_tcp = [arg_ne(2, 0)?, arg_ne(2, libc::IPPROTO_TCP as u64)?];
            socket.push(SeccompRule::new([vec![arg_eq(0, family as u64)?, type_is(libc::SOCK_STREAM)?], not_tcp.to_vec()].concat())?);
            // Datagram sockets go to the broker, which refuses and reports them (a name lookup
            // starts with one): not refused here, where ERRNO would win over USER_NOTIF.
        }
        socket.push(SeccompRule::new(other_family)?);
    }
    let mut calls = vec![(libc::SYS_socket, socket), (libc::SYS_socketpair, unix_datagram()?)];
    if !policy.network {
        let fast_open = |index: u8| -> Result<Vec<SeccompRule>, BackendError> {
            let flag = libc::MSG_FASTOPEN as u64;
            Ok(vec![SeccompRule::new(vec![SeccompCondition::new(index, SeccompCmpArgLen::Dword, SeccompCmpOp::MaskedEq(flag), flag)?])?])
        };
        calls.extend([(libc::SYS_sendto, fast_open(3)?), (libc::SYS_sendmsg, fast_open(2)?), (libc::SYS_sendmmsg, fast_open(3)?)]);
    }
    Ok(calls)
}

/// `socket()` rules matching every type of `family` but a stream (datagrams, raw sockets).
fn internet_datagrams(family: libc::c_int) -> Result<Vec<SeccompRule>, BackendError> {
    (0..=SOCK_TYPE_MASK as libc::c_int)
        .filter(|&t| t != libc::SOCK_STREAM)
        .map(|kind| SeccompRule::new(vec![arg_eq(0, family as u64)?, type_is(kind)?]))
        .collect()
}

/// The filter whose matches go to the broker: every `connect`; without network `bind`,
/// `listen` and `socket()` for Internet sockets that are not streams. `guard` is put in front (the
/// x32 refusal on x86_64).
pub(super) fn notify_program(
    policy: &Policy,
    guard: impl IntoIterator<Item = seccompiler::sock_filter>,
) -> Result<BpfProgram, BackendError> {
    let mut rules = std::collections::BTreeMap::new();
    rules.insert(libc::SYS_connect, Vec::new());
    if !policy.network {
        rules.insert(libc::SYS_bind, Vec::new());
        rules.insert(libc::SYS_listen, Vec::new());
    }
    if !policy.network {
        let datagrams = [libc::AF_INET, libc::AF_INET6].into_iter().map(internet_datagrams).collect::<Result<Vec<_>, _>>()?;
        rules.insert(libc::SYS_socket, datagrams.concat());
    }
    let arch = std::env::consts::ARCH.try_into()?;
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Trace(NOTIFY_MARK), arch)?;
    let mut program: BpfProgram = filter.try_into()?;
    const RET: u16 = 0x06; // BPF_RET | BPF_K
    for insn in program.iter_mut().filter(|i| i.code == RET && i.k == libc::SECCOMP_RET_TRACE | NOTIFY_MARK) {
        insn.k = libc::SECCOMP_RET_USER_NOTIF;
    }
    program.splice(0..0, guard);
    Ok(program)
}

/// The socket pair the listener travels on: (the supervisor's end, the child's end). Both are
/// close-on-exec, so neither reaches the command.
pub(super) fn channel() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: socketpair writes two descriptors into `fds`.
    let ret = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors are fresh and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A `cmsghdr` with room for one descriptor, aligned as the kernel expects.
#[repr(C)]
struct OneFd {
    header: libc::cmsghdr,
    fd: RawFd,
    _pad: u32,
}

/// Sends `listener` over `channel` and closes it. For `pre_exec`: system calls only, no
/// allocation.
///
/// # Safety
/// `listener` must be a descriptor the caller owns.
pub(super) unsafe fn hand_over(channel: RawFd, listener: RawFd) -> io::Result<()> {
    let mut byte = 0u8;
    let mut iov = libc::iovec { iov_base: (&raw mut byte).cast(), iov_len: 1 };
    // SAFETY: plain structs filled in place; `msg` points at live locals during sendmsg.
    unsafe {
        let mut control: OneFd = std::mem::zeroed();
        control.header.cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        control.header.cmsg_level = libc::SOL_SOCKET;
        control.header.cmsg_type = libc::SCM_RIGHTS;
        control.fd = listener;
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = (&raw mut control).cast();
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as _;
        let sent = libc::sendmsg(channel, &msg, 0);
        libc::close(listener);
        if sent < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
    }
}

/// Receives the listener the child sent with [`hand_over`].
pub(super) fn receive(channel: &OwnedFd) -> io::Result<OwnedFd> {
    let mut byte = 0u8;
    let mut iov = libc::iovec { iov_base: (&raw mut byte).cast(), iov_len: 1 };
    // SAFETY: as in hand_over; the kernel writes at most msg_controllen bytes of control data.
    unsafe {
        let mut control: OneFd = std::mem::zeroed();
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = (&raw mut control).cast();
        msg.msg_controllen = std::mem::size_of::<OneFd>() as _;
        if libc::recvmsg(channel.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) < 0 {
            return Err(io::Error::last_os_error());
        }
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() || (*cmsg).cmsg_level != libc::SOL_SOCKET || (*cmsg).cmsg_type != libc::SCM_RIGHTS {
            return Err(io::Error::other("the command sent no seccomp listener"));
        }
        Ok(OwnedFd::from_raw_fd(std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>())))
    }
}

/// What the broker allows, fixed when the command starts.
pub(super) struct Broker {
    /// Canonical writable roots: any socket file inside is allowed.
    roots: Vec<PathBuf>,
    /// Canonical allowed socket files outside them.
    sockets: Vec<PathBuf>,
    network: bool,
    proxy: Option<SocketAddr>,
    /// The agent's model endpoint ([`Policy::endpoint`]).
    endpoint: Option<SocketAddr>,
    report: Option<PathBuf>,
    /// The command line, for reports.
    command: String,
    /// The inodes of the sockets the broker made listen (on loopback): the ones the command's
    /// clients may reach without network.
    listening: std::sync::Mutex<Vec<u64>>,
}

impl Broker {
    /// The broker for `policy`'s command `command`, reporting refusals to `report`.
    pub(super) fn new(policy: &Policy, report: Option<PathBuf>, command: String) -> Broker {
        let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        Broker {
            roots: policy.writable_roots().into_iter().map(canonical).collect(),
            sockets: policy.unix_sockets.iter().map(|p| canonical(p)).collect(),
            network: policy.network,
            proxy: policy.proxy,
            endpoint: policy.endpoint,
            report,
            command,
            listening: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Answers the notifications of `listener` on a thread of their own, each on a thread of
    /// its own (a connect may block), until the supervisor exits.
    pub(super) fn serve(self, listener: OwnedFd) -> io::Result<()> {
        let broker = Arc::new(self);
        let listener = Arc::new(listener);
        std::thread::Builder::new().name("connect-broker".into()).spawn(move || {
            block_stop_signals();
            loop {
                let Some(notification) = next(&listener) else { return };
                let (broker, shared) = (broker.clone(), listener.clone());
                let answered = std::thread::Builder::new().spawn(move || {
                    let answer = broker.answer(&shared, &notification);
                    respond(&shared, notification.id, answer);
                });
                if answered.is_err() {
                    respond(&listener, notification.id, Err(libc::EAGAIN));
                }
            }
        })?;
        Ok(())
    }

    /// The result of the brokered call: its return value, or an errno ([`CONTINUE`]: let the
    /// kernel run it).
    fn answer(&self, listener: &OwnedFd, n: &libc::seccomp_notif) -> Result<i64, i32> {
        match i64::from(n.data.nr) {
            libc::SYS_connect => self.connect(listener, n),
            libc::SYS_bind => self.bind(listener, n),
            libc::SYS_listen => self.listen(listener, n),
            libc::SYS_socket => Err(self.refuse("udp".into(), 0)),
            _ => Err(libc::ENOSYS),
        }
    }

    fn connect(&self, listener: &OwnedFd, n: &libc::seccomp_notif) -> Result<i64, i32> {
        let tid = n.pid as libc::pid_t;
        let [fd, address, length, ..] = n.data.args;
        let length = usize::try_from(length as u32 as i32).map_err(|_| libc::EINVAL)?;
        if length > MAX_ADDRESS {
            return Err(libc::EINVAL);
        }
        let socket = socket_of(tid, fd as RawFd)?;
        let address = read_memory(tid, address, length)?;
        if !still_pending(listener, n.id) {
            return Err(libc::EINTR);
        }
        let family = socket_option(&socket, SO_DOMAIN)?;
        match family {
            libc::AF_UNIX => self.connect_unix(tid, &socket, &address),
            libc::AF_INET | libc::AF_INET6 => self.connect_inet(&socket, &address),
            _ if self.network => connect_raw(&socket, &address),
            other => Err(self.refuse(format!("address family {other}"), 0)),
        }
    }

    fn connect_inet(&self, socket: &OwnedFd, address: &[u8]) -> Result<i64, i32> {
        if self.network {
            return connect_raw(socket, address);
        }
        match inet_address(address) {
            Some(target) if self.proxy.into_iter().chain(self.endpoint).any(|allowed| same_address(allowed, target)) => {
                connect_raw(socket, address)
            }
            Some(target) if target.ip().to_canonical().is_loopback() => self.connect_loopback(socket, address, target),
            Some(target) => Err(self.refuse(target.ip().to_string(), target.port())),
            None => Err(libc::EAFNOSUPPORT),
        }
    }

    /// A connect to a loopback address: through when one of the command's own listeners is
    /// there, `ECONNREFUSED` when nothing listens there, refused when another process does.
    fn connect_loopback(&self, socket: &OwnedFd, address: &[u8], target: SocketAddr) -> Result<i64, i32> {
        let ip = target.ip().to_canonical();
        let there = loopback::listeners(target.port());
        let ours = self.listening.lock().map(|inodes| there.iter().any(|(at, inode)| *at == ip && inodes.contains(inode)));
        if ours.unwrap_or(false) {
            return connect_raw(socket, address);
        }
        if there.iter().any(|(at, _)| *at == ip || at.is_unspecified()) {
            return Err(self.refuse(target.ip().to_string(), target.port()));
        }
        Err(libc::ECONNREFUSED)
    }

    /// `bind`: an Internet socket is bound by the broker, on loopback only
    /// ([`loopback::bind_target`]); any other goes on as the command asked ([`CONTINUE`]:
    /// Landlock decides about a Unix socket's file, and should another thread swap an
    /// Internet socket in meanwhile, `listen` still refuses it off loopback).
    fn bind(&self, listener: &OwnedFd, n: &libc::seccomp_notif) -> Result<i64, i32> {
        let tid = n.pid as libc::pid_t;
        let [fd, address, length, ..] = n.data.args;
        let length = usize::try_from(length as u32 as i32).map_err(|_| libc::EINVAL)?;
        let socket = socket_of(tid, fd as RawFd)?;
        let family = socket_option(&socket, SO_DOMAIN)?;
        if family != libc::AF_INET && family != libc::AF_INET6 {
            return Err(CONTINUE);
        }
        if length > MAX_ADDRESS {
            return Err(libc::EINVAL);
        }
        let address = read_memory(tid, address, length)?;
        if !still_pending(listener, n.id) {
            return Err(libc::EINTR);
        }
        let requested = inet_address(&address).filter(|a| a.is_ipv4() == (family == libc::AF_INET)).ok_or(libc::EAFNOSUPPORT)?;
        let Some(target) = loopback::bind_target(requested) else {
            return Err(self.refuse(requested.ip().to_string(), requested.port()));
        };
        if target.port() != 0 && target.port() < loopback::unprivileged_port_start() {
            return Err(libc::EACCES);
        }
        bind_raw(&socket, &loopback::socket_address(target))
    }

    /// `listen`: by the broker, on its duplicate; an Internet socket only on loopback (bound
    /// there first when unbound), and remembered as the command's.
    fn listen(&self, listener: &OwnedFd, n: &libc::seccomp_notif) -> Result<i64, i32> {
        let [fd, backlog, ..] = n.data.args;
        let socket = socket_of(n.pid as libc::pid_t, fd as RawFd)?;
        if !still_pending(listener, n.id) {
            return Err(libc::EINTR);
        }
        let family = socket_option(&socket, SO_DOMAIN)?;
        if family == libc::AF_INET || family == libc::AF_INET6 {
            let bound = local_address(&socket)?;
            if bound.ip().is_unspecified() && bound.port() == 0 {
                bind_raw(&socket, &loopback::socket_address(loopback::loopback_of(family)))?;
            } else if !bound.ip().to_canonical().is_loopback() {
                return Err(self.refuse(bound.ip().to_string(), bound.port()));
            }
        }
        // SAFETY: listen on a descriptor the broker owns.
        if unsafe { libc::listen(socket.as_raw_fd(), backlog as i32) } < 0 {
            return Err(errno());
        }
        if family == libc::AF_INET || family == libc::AF_INET6 {
            let inode = inode_of(&socket)?;
            if let Ok(mut inodes) = self.listening.lock() {
                inodes.push(inode);
            }
        }
        Ok(0)
    }

    fn connect_unix(&self, tid: libc::pid_t, socket: &OwnedFd, address: &[u8]) -> Result<i64, i32> {
        let family_len = std::mem::size_of::<libc::sa_family_t>();
        let family = address.get(..family_len).map(|f| libc::sa_family_t::from_ne_bytes(f.try_into().unwrap_or_default()));
        if family != Some(libc::AF_UNIX as libc::sa_family_t) || address.len() <= family_len {
            return Err(libc::EINVAL);
        }
        let path = &address[family_len..];
        if path[0] == 0 {
            let name = String::from_utf8_lossy(&path[1..]).trim_end_matches('\0').to_string();
            return Err(self.refuse(format!("@{name}"), 0));
        }
        let path = OsStr::from_bytes(path.split(|&b| b == 0).next().unwrap_or_default());
        let cwd = std::fs::read_link(format!("/proc/{tid}/cwd")).map_err(|_| libc::ESRCH)?;
        let requested = lexical(&cwd.join(path));
        let file = match open_path(tid, path) {
            Ok(file) => file,
            Err(errno) if self.allows(&requested) => return Err(errno),
            Err(_) => return Err(self.refuse_path(&requested)),
        };
        let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).map_err(|_| libc::EACCES)?;
        if !self.allows(&real) {
            return Err(self.refuse_path(&real));
        }
        if !is_socket(&file) {
            return Err(libc::ECONNREFUSED);
        }
        connect_unix_path(socket, format!("/proc/self/fd/{}", file.as_raw_fd()).as_bytes())
    }

    /// Whether a socket file at `path` (absolute, normalised) may be connected to.
    fn allows(&self, path: &Path) -> bool {
        self.roots.iter().any(|root| path.starts_with(root)) || self.sockets.iter().any(|socket| path == socket)
    }

    /// Refuses a Unix socket path, reporting it unless it is a [`QUIET_REFUSALS`] one.
    fn refuse_path(&self, path: &Path) -> i32 {
        if QUIET_REFUSALS.iter().any(|dir| path.starts_with(dir)) {
            return libc::EACCES;
        }
        self.refuse(path.display().to_string(), 0)
    }

    /// Reports a refused connection to `host`:`port`; returns the errno the command gets.
    fn refuse(&self, host: String, port: u16) -> i32 {
        if let Some(path) = &self.report {
            let _ = incidents::append(path, &Report::NetworkDenied { host, port, command: self.command.clone() });
        }
        libc::EACCES
    }
}

/// Blocks the signals the supervisor's main thread handles, so they are never delivered to a
/// broker thread (the main thread's `waitpid` must be the one interrupted).
fn block_stop_signals() {
    // SAFETY: a sigset built in place and handed to pthread_sigmask for this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGALRM, libc::SIGCHLD] {
            libc::sigaddset(&mut set, signal);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// The next notification; `None` once no process is left to notify (the listener hangs up) or
/// the listener is unusable.
fn next(listener: &OwnedFd) -> Option<libc::seccomp_notif> {
    loop {
        let mut ready = libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: poll reads and writes one pollfd.
        if unsafe { libc::poll(&mut ready, 1, -1) } < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            return None;
        }
        if ready.revents & libc::POLLIN == 0 {
            return None; // POLLHUP: every process under the filter is gone
        }
        // SAFETY: the kernel requires a zeroed struct and fills it in.
        let mut notification: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: NOTIF_RECV writes one seccomp_notif.
        if unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_RECV, &mut notification) } == 0 {
            return Some(notification);
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR | libc::ENOENT) => continue, // the caller went away before we read it
            _ => return None,
        }
    }
}

/// The "errno" that tells [`respond`] to let the kernel run the call as the command made it.
const CONTINUE: i32 = 0;

/// Answers notification `id`: the call returns `answer`'s value, or fails with its errno, or
/// runs as made ([`CONTINUE`]).
fn respond(listener: &OwnedFd, id: u64, answer: Result<i64, i32>) {
    let (val, error, flags) = match answer {
        Ok(value) => (value, 0, 0),
        Err(CONTINUE) => (0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32),
        Err(errno) => (0, -errno, 0),
    };
    let response = libc::seccomp_notif_resp { id, val, error, flags };
    // SAFETY: NOTIF_SEND reads one seccomp_notif_resp. ENOENT (the caller is gone) is ignored.
    unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND, &response) };
}

/// Whether notification `id` still waits for an answer (its process, hence its pid, is alive).
fn still_pending(listener: &OwnedFd, id: u64) -> bool {
    // SAFETY: NOTIF_ID_VALID reads one u64.
    unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0 }
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// A duplicate of descriptor `fd` of thread `tid`'s process (`pidfd_getfd` on its leader).
fn socket_of(tid: libc::pid_t, fd: RawFd) -> Result<OwnedFd, i32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).map_err(|_| libc::ESRCH)?;
    let tgid: libc::pid_t =
        status.lines().find_map(|line| line.strip_prefix("Tgid:")).and_then(|value| value.trim().parse().ok()).ok_or(libc::ESRCH)?;
    // SAFETY: pidfd_open returns a new descriptor or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, tgid, 0) };
    if pidfd < 0 {
        return Err(errno());
    }
    // SAFETY: the descriptor is fresh and ours.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
    // SAFETY: pidfd_getfd returns a new descriptor (close-on-exec) or -1.
    let socket = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if socket < 0 {
        let errno = errno();
        if matches!(errno, libc::EPERM | libc::ENOSYS) {
            explain_once(errno);
        }
        return Err(errno);
    }
    // SAFETY: as above.
    Ok(unsafe { OwnedFd::from_raw_fd(socket as RawFd) })
}

/// Says once, on the command's stderr (the supervisor's), why its connects fail when the
/// supervisor may not take its sockets.
fn explain_once(errno: i32) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !SAID.swap(true, std::sync::atomic::Ordering::SeqCst) {
        let cause = io::Error::from_raw_os_error(errno);
        #[allow(clippy::print_stderr)] // the one place to tell the command's reader
        {
            eprintln!(
                "dracode sandbox: connect() fails: the supervisor cannot take the command's socket (pidfd_getfd: {cause}); \
                 a container's seccomp profile may refuse pidfd_getfd"
            );
        }
    }
}

/// `length` bytes at `address` in thread `tid`'s memory, read once: `process_vm_readv`, or
/// `/proc/<tid>/mem` where a container's seccomp profile refuses that call.
fn read_memory(tid: libc::pid_t, address: u64, length: usize) -> Result<Vec<u8>, i32> {
    let mut buffer = vec![0u8; length];
    let local = libc::iovec { iov_base: buffer.as_mut_ptr().cast(), iov_len: length };
    let remote = libc::iovec { iov_base: address as *mut libc::c_void, iov_len: length };
    // SAFETY: the kernel writes at most `length` bytes into `buffer`.
    let read = unsafe { libc::process_vm_readv(tid, &local, 1, &remote, 1, 0) };
    if read >= 0 {
        return if read as usize == length { Ok(buffer) } else { Err(libc::EFAULT) };
    }
    if errno() != libc::EPERM && errno() != libc::ENOSYS {
        return Err(libc::EFAULT);
    }
    read_proc_mem(tid, address, length)
}

fn read_proc_mem(tid: libc::pid_t, address: u64, length: usize) -> Result<Vec<u8>, i32> {
    use std::os::unix::fs::FileExt;
    let mut buffer = vec![0u8; length];
    let mem = std::fs::File::open(format!("/proc/{tid}/mem")).map_err(|_| libc::EFAULT)?;
    mem.read_exact_at(&mut buffer, address).map_err(|_| libc::EFAULT)?;
    Ok(buffer)
}

fn socket_option(socket: &OwnedFd, option: libc::c_int) -> Result<libc::c_int, i32> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes one int.
    let ret = unsafe { libc::getsockopt(socket.as_raw_fd(), libc::SOL_SOCKET, option, (&raw mut value).cast(), &mut len) };
    if ret < 0 { Err(errno()) } else { Ok(value) }
}

/// Binds the broker's duplicate of the command's socket to `address` (the broker's copy).
fn bind_raw(socket: &OwnedFd, address: &[u8]) -> Result<i64, i32> {
    // SAFETY: `address` is `address.len()` readable bytes.
    let ret = unsafe { libc::bind(socket.as_raw_fd(), address.as_ptr().cast(), address.len() as libc::socklen_t) };
    if ret < 0 { Err(errno()) } else { Ok(0) }
}

/// The address `socket` is bound to (port 0 and the wildcard address when unbound).
fn local_address(socket: &OwnedFd) -> Result<SocketAddr, i32> {
    let mut bytes = [0u8; MAX_ADDRESS];
    let mut length = MAX_ADDRESS as libc::socklen_t;
    // SAFETY: getsockname writes at most `length` bytes into `bytes`.
    if unsafe { libc::getsockname(socket.as_raw_fd(), bytes.as_mut_ptr().cast(), &mut length) } < 0 {
        return Err(errno());
    }
    inet_address(&bytes[..(length as usize).min(MAX_ADDRESS)]).ok_or(libc::EAFNOSUPPORT)
}

/// The inode of `socket`, as `/proc/net/tcp` names it.
fn inode_of(socket: &OwnedFd) -> Result<u64, i32> {
    // SAFETY: fstat writes one struct stat.
    unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        if libc::fstat(socket.as_raw_fd(), &mut stat) < 0 {
            return Err(errno());
        }
        Ok(stat.st_ino)
    }
}

/// Connects the broker's duplicate of the command's socket to `address` (the broker's copy).
fn connect_raw(socket: &OwnedFd, address: &[u8]) -> Result<i64, i32> {
    // SAFETY: `address` is `address.len()` readable bytes.
    let ret = unsafe { libc::connect(socket.as_raw_fd(), address.as_ptr().cast(), address.len() as libc::socklen_t) };
    if ret < 0 { Err(errno()) } else { Ok(0) }
}

fn connect_unix_path(socket: &OwnedFd, path: &[u8]) -> Result<i64, i32> {
    // SAFETY: a zeroed sockaddr_un is valid; `path` is far shorter than sun_path.
    let mut address: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    address.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (slot, &byte) in address.sun_path.iter_mut().zip(path) {
        *slot = byte as libc::c_char;
    }
    let length = std::mem::size_of::<libc::sa_family_t>() + path.len() + 1;
    // SAFETY: `address` is a valid sockaddr_un of at least `length` bytes.
    let bytes = unsafe { std::slice::from_raw_parts((&raw const address).cast::<u8>(), length) };
    connect_raw(socket, bytes)
}

/// Opens `path` (`O_PATH`, following links) relative to thread `tid`'s working directory.
fn open_path(tid: libc::pid_t, path: &OsStr) -> Result<OwnedFd, i32> {
    let cwd = CString::new(format!("/proc/{tid}/cwd")).map_err(|_| libc::EINVAL)?;
    let path = CString::new(path.as_bytes()).map_err(|_| libc::EINVAL)?;
    // SAFETY: open/openat with valid C strings return a new descriptor or -1.
    unsafe {
        let dir = libc::open(cwd.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC);
        if dir < 0 {
            return Err(libc::ESRCH);
        }
        let dir = OwnedFd::from_raw_fd(dir);
        let file = libc::openat(dir.as_raw_fd(), path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
        if file < 0 { Err(errno()) } else { Ok(OwnedFd::from_raw_fd(file)) }
    }
}

fn is_socket(file: &OwnedFd) -> bool {
    // SAFETY: fstat writes one struct stat.
    unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        libc::fstat(file.as_raw_fd(), &mut stat) == 0 && stat.st_mode & libc::S_IFMT == libc::S_IFSOCK
    }
}

/// `path` with `.` and `..` resolved by name (for deciding about a path that does not exist).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// The Internet address in a `sockaddr_in`/`sockaddr_in6`, if it is one.
fn inet_address(bytes: &[u8]) -> Option<SocketAddr> {
    let family = libc::sa_family_t::from_ne_bytes(bytes.get(..2)?.try_into().ok()?);
    let port = u16::from_be_bytes(bytes.get(2..4)?.try_into().ok()?);
    match family as libc::c_int {
        libc::AF_INET => {
            let ip: [u8; 4] = bytes.get(4..8)?.try_into().ok()?;
            Some(SocketAddr::from((ip, port)))
        }
        // The kernel takes a `sockaddr_in6` without its last field (RFC 2133's 24 bytes).
        libc::AF_INET6 if bytes.len() >= 24 => {
            let ip: [u8; 16] = bytes.get(8..24)?.try_into().ok()?;
            Some(SocketAddr::from((ip, port)))
        }
        _ => None,
    }
}

/// Whether `target` is `proxy`, also as an IPv4-mapped IPv6 address.
fn same_address(proxy: SocketAddr, target: SocketAddr) -> bool {
    let canonical = |a: SocketAddr| (a.ip().to_canonical(), a.port());
    canonical(proxy) == canonical(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_notify_program_turns_the_marked_returns_into_user_notifications() {
        let policy = Policy::for_workspace(super::super::SandboxMode::WorkspaceWrite, Path::new("/ws"), None);
        let program = notify_program(&policy, []).unwrap();
        let returns: Vec<u32> = program.iter().filter(|i| i.code == 0x06).map(|i| i.k).collect();
        assert!(returns.contains(&libc::SECCOMP_RET_USER_NOTIF), "{returns:x?}");
        assert!(!returns.contains(&(libc::SECCOMP_RET_TRACE | NOTIFY_MARK)), "{returns:x?}");
    }

    #[test]
    fn sockets_are_allowed_inside_the_roots_and_by_exact_name_only() {
        let mut policy = Policy::for_workspace(super::super::SandboxMode::WorkspaceWrite, Path::new("/ws"), Some(Path::new("/t")));
        policy.unix_sockets = vec![PathBuf::from("/run/app/app.sock")];
        let report = tempfile::NamedTempFile::new().unwrap();
        let broker = Broker::new(&policy, Some(report.path().to_path_buf()), "sh -c x".into());
        for allowed in ["/ws/a.sock", "/ws/deep/b.sock", "/t/c.sock", "/run/app/app.sock"] {
            assert!(broker.allows(Path::new(allowed)), "{allowed}");
        }
        for denied in ["/ws2/a.sock", "/run/app/other.sock", "/run/app", "/var/run/docker.sock"] {
            assert!(!broker.allows(Path::new(denied)), "{denied}");
        }
        assert_eq!(broker.refuse_path(Path::new("/var/run/nscd/socket")), libc::EACCES);
        assert_eq!(broker.refuse_path(Path::new("/var/run/docker.sock")), libc::EACCES);
        let reports = std::fs::read_to_string(report.path()).unwrap();
        assert_eq!(reports.lines().count(), 1, "only docker.sock is reported: {reports}");
        assert!(reports.contains("\"host\":\"/var/run/docker.sock\"") && reports.contains("\"command\":\"sh -c x\""), "{reports}");
    }

    #[test]
    fn memory_is_read_either_way() {
        let data = *b"/some/socket/path";
        let me = std::process::id() as libc::pid_t;
        let address = data.as_ptr() as u64;
        assert_eq!(read_memory(me, address, data.len()).unwrap(), data);
        assert_eq!(read_proc_mem(me, address, data.len()).unwrap(), data);
        assert_eq!(read_memory(me, 8, 4), Err(libc::EFAULT));
    }

    #[test]
    fn addresses_are_read_as_the_kernel_lays_them_out() {
        let v4: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let mut bytes = vec![0u8; 16];
        bytes[..2].copy_from_slice(&(libc::AF_INET as libc::sa_family_t).to_ne_bytes());
        bytes[2..4].copy_from_slice(&8080u16.to_be_bytes());
        bytes[4..8].copy_from_slice(&[127, 0, 0, 1]);
        assert_eq!(inet_address(&bytes), Some(v4));
        assert!(same_address(v4, "[::ffff:127.0.0.1]:8080".parse().unwrap()));
        assert!(!same_address(v4, "127.0.0.1:8081".parse().unwrap()));
        assert_eq!(lexical(Path::new("/ws/a/../../etc/./x")), Path::new("/etc/x"));
    }
}
