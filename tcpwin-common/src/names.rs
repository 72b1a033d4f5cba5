//! Names of the maps and globals in the object, shared so a rename breaks the build, not the run.

pub const EVENTS: &str = "EVENTS";
pub const COUNTERS: &str = "COUNTERS";
pub const PKT_HIST: &str = "PKT_HIST";
pub const IF_SLOTS: &str = "IF_SLOTS";
pub const OWNED_INODES: &str = "OWNED_INODES";
pub const OWNED_PORTS: &str = "OWNED_PORTS";
pub const OWNED_CGROUPS: &str = "OWNED_CGROUPS";
pub const OWNED_TGIDS: &str = "OWNED_TGIDS";
pub const OFFSETS: &str = "OFFSETS";
pub const CONFIG: &str = "CONFIG";
pub const INIT_HOOKED: &str = "INIT_HOOKED";
/// the deferred `init`s' switch and the socket walk's cut-off (`init_defer::*`)
pub const INIT_DEFER: &str = "INIT_DEFER";
pub const INITS_WAITING: &str = "INITS_WAITING";
/// the `iter/tcp` program
pub const ITER_TCP: &str = "tcp_sockets";
/// the exporter's handshake counter and its map
pub const COUNT_STATES: &str = "count_states";
pub const ESTAB_COUNTS: &str = "ESTAB_COUNTS";
pub const CLOSED_SUMS: &str = "CLOSED_SUMS";
/// the exporter's per-packet hook (`--packet-histogram`)
pub const COUNT_PACKET: &str = "count_packet";
/// aya-log's ring buffer and level (`--ebpf-log`): `aya_log_ebpf`'s own symbols
pub const AYA_LOGS: &str = "AYA_LOGS";
pub const AYA_LOG_LEVEL: &str = "AYA_LOG_LEVEL";
