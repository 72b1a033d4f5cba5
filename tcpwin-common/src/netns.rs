//! Into a network namespace, the one way the product, the lab and the tests enter one:
//! `setns(CLONE_NEWNET)` (nix), for the calling thread, or for a program before it starts. The
//! mount namespace stays the caller's, as `nsenter --net` keeps it: the program sees the host's
//! `/sys` (the BTF, the pinned programs in bpffs), not a sysfs of the namespace's devices.
use std::{
    fs::File,
    io,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::Command,
};

/// Where `ip netns add NAME` binds a named namespace.
pub fn path_of(name: &str) -> PathBuf {
    Path::new("/run/netns").join(name)
}

/// Moves the calling thread (only it) into the network namespace open as `ns` (the kernel
/// checks that it is one: EINVAL otherwise; EPERM without CAP_SYS_ADMIN).
pub fn enter_thread(ns: &File) -> io::Result<()> {
    nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).map_err(io::Error::from)
}

/// Moves the calling thread into the namespace named `name` (`ip netns add`); the error says
/// which step failed (the namespace's file, or setns).
pub fn enter_named(name: &str) -> io::Result<()> {
    let path = path_of(name);
    let f = File::open(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    enter_thread(&f).map_err(|e| io::Error::new(e.kind(), format!("setns {}: {e}", path.display())))
}

/// `program` to run inside the network namespace bound at `ns` (a path: `/run/netns/NAME`, or
/// `/proc/PID/ns/net`): the child enters it before exec, so a namespace that is gone, or a
/// caller without CAP_SYS_ADMIN, fails the spawn (ENOENT, EPERM).
pub fn command(ns: &Path, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let path = std::ffi::CString::new(ns.as_os_str().as_encoded_bytes()).unwrap_or_default();
    let mut c = Command::new(program);
    // SAFETY: the closure runs in the forked child before exec and makes two system calls,
    // open(2) on a path prepared before the fork and setns(2): no allocation, no lock, both
    // async-signal-safe.
    unsafe {
        c.pre_exec(move || {
            use nix::fcntl::{open, OFlag};
            let fd = open(
                path.as_c_str(),
                OFlag::O_RDONLY | OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            )?;
            nix::sched::setns(fd, nix::sched::CloneFlags::CLONE_NEWNET)?;
            Ok(())
        });
    }
    c
}

/// `program` inside the namespace named `name` (`ip netns add`).
pub fn command_named(name: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
    command(&path_of(name), program)
}
