//! Readings that combine the kernel and the host, shared by several commands: the sockets of
//! some namespaces with their limits (`snapshot`), the host audited (`audit`), and the traced
//! sockets judged once a second (`traced`). Below the commands, above `kernel` and `host`.
pub mod audit;
pub mod peer;
pub mod scope;
pub mod snapshot;
pub mod traced;
