//! Everything that talks to the kernel's BPF side (the only aya user): the `Kernel` a command
//! opens once (its BTF, parsed once per process, and the object to load), the object and
//! privileges, struct layouts from BTF, attaching hooks (and the `Backend` choice), the tracer's
//! programs, the socket iterator, maps, the ring buffer.
pub mod attach;
pub mod btf;
pub mod cache;
pub mod fnv;
pub mod iter;
pub mod log;
pub mod maps;
pub mod object;
pub mod ring;
pub mod tracer;

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use anyhow::Result;

/// The kernel the programs go into, pictured once: its release and tick rate (`CONFIG_HZ`,
/// read once, when first asked: a command that turns no jiffies into time does not pay for
/// decompressing the kernel's config), where its BTF is (parsed once per process, see `btf::kernel_btf`) and which eBPF
/// object to load (the one built into the binary, or `--obj`). Made once from a command's flags
/// and handed to whatever loads programs, reads layouts or turns jiffies into time: the tracer,
/// the socket iterator, the readings, the audit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    btf: PathBuf,
    obj: Option<PathBuf>,
    release: String,
    hz: std::sync::OnceLock<Option<u32>>,
}

impl Default for Kernel {
    /// The running kernel, with the object built into the binary.
    fn default() -> Self {
        Kernel::new(PathBuf::from(btf::VMLINUX), None)
    }
}

impl Kernel {
    pub fn new(btf: PathBuf, obj: Option<PathBuf>) -> Kernel {
        Kernel {
            btf,
            obj,
            release: crate::host::kconfig::release(),
            hz: std::sync::OnceLock::new(),
        }
    }

    /// Its release (`uname -r`), empty where it cannot be read.
    pub fn release(&self) -> &str {
        &self.release
    }

    /// Its tick rate (`CONFIG_HZ`), None where its config cannot be read: jiffies to time.
    pub fn hz(&self) -> Option<u32> {
        *self.hz.get_or_init(crate::host::kconfig::hz)
    }

    /// The object to load instead of the built-in one (`--obj`).
    pub fn obj(&self) -> Option<&Path> {
        self.obj.as_deref()
    }

    /// Its BTF, parsed (once per process) with the layout the programs read at.
    pub fn btf(&self) -> Result<Arc<btf::KernelBtf>> {
        cache::kernel_btf(&self.btf)
    }

    /// Whether it has `tcp_sock.scaling_ratio` (6.6+).
    pub fn has_scaling_ratio(&self) -> Result<bool> {
        cache::has_scaling_ratio(&self.btf)
    }

    /// Whether the socket iterator loaded for it may be kept between commands (`cache`).
    pub fn cacheable(&self) -> bool {
        cache::applies(&self.btf, self.obj())
    }
}
