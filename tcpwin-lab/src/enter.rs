//! A thread entering a network namespace: the sockets it opens then live there (the delay
//! line's, the endpoints', the bench's), while the rest of the process stays where it was.

/// Moves the calling thread (only it) into the network namespace open as `ns`.
pub fn enter_thread(ns: &std::fs::File) -> std::io::Result<()> {
    nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).map_err(std::io::Error::from)
}
