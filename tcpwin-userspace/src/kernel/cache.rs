//! The socket iterator kept loaded between commands: what makes `ss`, `check` and `top`'s first
//! frame as quick as `ss`.
//!
//! Loading the iterator means parsing the kernel's BTF twice over (the layout resolver, then aya
//! for the program's attach point) and verifying the program: about 200 ms and 40 MiB, every
//! time. The first command that loads it also pins the iterator's link in bpffs
//! (`/sys/fs/bpf/tcpwin-trace/<entry>/iter_tcp`, mounting bpffs there as `bpftool` does when it
//! is not) and writes the layout it was loaded with beside (`/run/tcpwin-trace/<entry>.json`).
//! The next command reads the pinned link like a file: no BTF parse, no load, no verifier.
//!
//! Never needed for correctness, never read as truth unchecked: an entry is named after the
//! tool's version, a hash of the embedded eBPF object and a hash of the running kernel's BTF;
//! before use, the layout file must name the same (and its format), and the pinned object must be
//! an iterator link running the program id the file recorded. Anything else (an older build's
//! entry, another kernel's, a file or pin that is not ours) is ignored and replaced by a fresh
//! load. `TCPWIN_TRACE_CACHE=off` never reads nor writes one; `tcpwin-trace cache --clear`
//! removes every entry (both directories are the tool's own, under /run and bpffs: a reboot
//! clears them too).
use std::{
    io::Read,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context, Result};
use aya::{
    programs::{
        links::{FdLink, LinkType, PinnedLink},
        Iter,
    },
    Ebpf,
};
use serde::{Deserialize, Serialize};
use tcpwin_common::{names, Offsets};

use super::{
    btf::{kernel_btf_with, KernelBtf, Layout, VMLINUX},
    fnv::Fnv,
};

/// Where the pinned links live (bpffs).
pub const PIN_DIR: &str = "/sys/fs/bpf/tcpwin-trace";
/// Where the layouts they were loaded with live (tmpfs: gone at reboot, like the pins).
pub const LAYOUT_DIR: &str = "/run/tcpwin-trace";
/// The layout file's format; a file of another is not read.
const FORMAT: u32 = 1;
/// Off switch (`TCPWIN_TRACE_CACHE=off`).
pub const ENV: &str = "TCPWIN_TRACE_CACHE";

/// What the layout file records.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub format: u32,
    /// `tcpwin-trace`'s version
    pub tool: String,
    /// hex hashes of the embedded eBPF object and of the kernel BTF the layout came from
    pub object: String,
    pub btf: String,
    /// the pinned link's program
    pub prog_id: u32,
    /// `tcpwin_common::Offsets` as the programs were given them
    pub offsets: Vec<u8>,
    pub absent: Vec<(String, String)>,
}

/// A usable entry: the layout and the pinned iterator to read.
pub struct Cached {
    pub layout: Layout,
    pin: PathBuf,
}

impl Cached {
    /// The iterator's records (`iter::parse_records`) for the calling thread's network
    /// namespace: reading the pinned link runs the iterator there.
    pub fn read(&self) -> Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.open()?
            .read_to_end(&mut bytes)
            .with_context(|| self.reading())?;
        Ok(bytes)
    }

    /// The pinned iterator opened: each read runs it on in the calling thread's namespace.
    pub fn open(&self) -> Result<std::fs::File> {
        std::fs::File::open(&self.pin).with_context(|| self.reading())
    }

    fn reading(&self) -> String {
        format!("reading the pinned socket iterator {}", self.pin.display())
    }
}

/// Whether this command may use (and leave) an entry: the running kernel's BTF, the embedded
/// object, no `--ebpf-log` (its lines need the object loaded by this process), not switched off.
pub(super) fn applies(btf_path: &Path, obj: Option<&Path>) -> bool {
    obj.is_none() && super::log::level() == super::log::LogLevel::Off && enabled(btf_path)
}

/// Whether layouts of `btf_path` may be kept: the running kernel's BTF, not switched off.
fn enabled(btf_path: &Path) -> bool {
    btf_path == Path::new(VMLINUX) && std::env::var(ENV).map_or(true, |v| v != "off")
}

/// The layout this build resolved before for the running kernel (the tracer's attach skips the
/// BTF walk with it); `None` when there is no valid entry.
pub fn layout_for(btf_path: &Path) -> Option<Layout> {
    if !enabled(btf_path) {
        return None;
    }
    let (name, object, btf) = key().ok()?;
    let e = read_entry(&paths(&name).1).ok()?;
    check(&e, &object, &btf).ok()?;
    Some(layout_of(&e))
}

/// Records a layout just resolved for the running kernel, when no entry has one: without a
/// pinned iterator (program 0), which `ss` adds (and so replaces the file) when it pins one.
pub fn keep_layout(btf_path: &Path, layout: &Layout) {
    if !enabled(btf_path) {
        return;
    }
    let Ok((name, object, btf)) = key() else {
        return;
    };
    let file = paths(&name).1;
    if read_entry(&file).is_ok_and(|e| check(&e, &object, &btf).is_ok()) {
        return;
    }
    let _ = std::fs::create_dir_all(LAYOUT_DIR)
        .map_err(anyhow::Error::from)
        .and_then(|()| write_entry(&file, &entry(layout, object, btf, 0)));
}

fn read_entry(file: &Path) -> Result<Entry> {
    let text = std::fs::read_to_string(file).context("no layout file")?;
    serde_json::from_str(&text).context("the layout file does not parse")
}

fn entry(layout: &Layout, object: String, btf: String, prog_id: u32) -> Entry {
    // SAFETY: Offsets is plain data; its bytes are copied out.
    let offsets = unsafe {
        std::slice::from_raw_parts(
            &layout.offsets as *const Offsets as *const u8,
            std::mem::size_of::<Offsets>(),
        )
    }
    .to_vec();
    Entry {
        format: FORMAT,
        tool: env!("CARGO_PKG_VERSION").into(),
        object,
        btf,
        prog_id,
        offsets,
        absent: layout.absent.clone(),
    }
}

/// Written whole, then renamed: a reader never sees half a file.
fn write_entry(file: &Path, e: &Entry) -> Result<()> {
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(e)?)?;
    std::fs::rename(&tmp, file)?;
    Ok(())
}

/// The layout an entry records (`check` compared the offsets' size).
fn layout_of(e: &Entry) -> Layout {
    let mut offsets = Offsets::absent();
    // SAFETY: Offsets is plain data (u32 fields, repr(C)) of e.offsets.len() bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(
            e.offsets.as_ptr(),
            &mut offsets as *mut Offsets as *mut u8,
            std::mem::size_of::<Offsets>(),
        )
    };
    Layout {
        offsets,
        absent: e.absent.clone(),
    }
}

/// The entry's name: the tool, the object and the kernel's BTF it belongs to.
fn key() -> Result<(String, String, String)> {
    // hashed at build time (build.rs): the embedded bytes are not even paged in
    let object = env!("TCPWIN_EBPF_OBJ_FNV").to_string();
    let mut h = Fnv::default();
    let mut f = std::fs::File::open(VMLINUX).with_context(|| format!("opening {VMLINUX}"))?;
    // a multiple of 8: the words line up across reads
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = read_full(&mut f, &mut buf)?;
        if n == 0 {
            break;
        }
        h.write(&buf[..n]);
    }
    let btf = format!("{:016x}", h.0);
    // bpffs refuses names with a dot
    let version = env!("CARGO_PKG_VERSION").replace('.', "_");
    let name = format!("v{FORMAT}-{version}-{object}-{btf}");
    Ok((name, object, btf))
}

/// Fills `buf` unless the file ends first: how many bytes were read.
fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

fn paths(name: &str) -> (PathBuf, PathBuf) {
    (
        Path::new(PIN_DIR).join(name).join("iter_tcp"),
        Path::new(LAYOUT_DIR).join(format!("{name}.json")),
    )
}

/// The entry for this tool, object and kernel, checked; `Err` says why there is none usable.
pub fn lookup() -> Result<Cached> {
    let (name, object, btf) = key()?;
    let (pin, file) = paths(&name);
    let e = read_entry(&file)?;
    check(&e, &object, &btf)?;
    pinned_as_recorded(&pin, &e)?;
    Ok(Cached {
        layout: layout_of(&e),
        pin,
    })
}

/// The kernel's BTF parsed for loading programs, with the layout this build resolved for this
/// kernel before when there is one (the walk over its types is most of a load's time), else
/// resolved and kept for the next command.
pub(super) fn kernel_btf(btf_path: &Path) -> Result<std::sync::Arc<KernelBtf>> {
    let (k, resolved) = kernel_btf_with(btf_path, || layout_for(btf_path))?;
    if resolved {
        keep_layout(btf_path, &k.layout);
    }
    Ok(k)
}

/// Whether the kernel at `btf_path` has `tcp_sock.scaling_ratio` (6.6+): from this kernel's
/// entry when there is one, else from its BTF.
pub(super) fn has_scaling_ratio(btf_path: &Path) -> Result<bool> {
    if applies(btf_path, None) {
        if let Ok(c) = lookup() {
            return Ok(c.layout.has_scaling_ratio());
        }
    }
    Ok(kernel_btf(btf_path)?.layout.has_scaling_ratio())
}

/// The layout file belongs to this tool, object and kernel, in this format.
pub fn check(e: &Entry, object: &str, btf: &str) -> Result<()> {
    if e.format != FORMAT {
        bail!("format {} (this build reads {FORMAT})", e.format);
    }
    if e.tool != env!("CARGO_PKG_VERSION") {
        bail!("made by tcpwin-trace {}", e.tool);
    }
    if e.object != object {
        bail!("made with another eBPF object");
    }
    if e.btf != btf {
        bail!("made for another kernel (its BTF differs)");
    }
    if e.offsets.len() != std::mem::size_of::<Offsets>() {
        bail!("its offsets are {} bytes", e.offsets.len());
    }
    Ok(())
}

/// The iterator link pinned at `pin` runs the program the entry recorded.
fn pinned_as_recorded(pin: &Path, e: &Entry) -> Result<()> {
    let prog_id = pinned_prog_id(pin)?;
    if prog_id != e.prog_id {
        bail!(
            "the pinned link runs program {prog_id}, the layout file recorded {}",
            e.prog_id
        );
    }
    Ok(())
}

/// The program of the iterator link pinned at `pin` (an error if it is anything else).
fn pinned_prog_id(pin: &Path) -> Result<u32> {
    let link = PinnedLink::from_pin(pin).context("nothing pinned")?;
    let link: FdLink = link.into();
    let info = link.info().context("the pinned object is not a link")?;
    match info.link_type() {
        Ok(LinkType::Iter) => Ok(info.program_id()),
        _ => bail!("the pinned link is not an iterator"),
    }
}

/// Pins the iterator of `bpf` (loaded with `layout` for the running kernel) and records the
/// layout, replacing the tool's other entries. Best effort: the caller goes on without it.
pub fn store(bpf: &mut Ebpf, layout: &Layout) -> Result<()> {
    let (name, object, btf) = key()?;
    let (pin, file) = paths(&name);
    mount_bpffs()?;
    clear()?;
    std::fs::create_dir_all(pin.parent().expect("an entry directory"))
        .with_context(|| format!("creating {}", pin.display()))?;
    std::fs::create_dir_all(LAYOUT_DIR).with_context(|| format!("creating {LAYOUT_DIR}"))?;
    let prog: &mut Iter = bpf
        .program_mut(names::ITER_TCP)
        .context("iter/tcp program")?
        .try_into()?;
    let link = prog.attach().context("attaching the socket iterator")?;
    let link: FdLink = prog.take_link(link)?.try_into()?;
    let prog_id = link.info().context("reading the link's info")?.program_id();
    link.pin(&pin).context("pinning the socket iterator")?;
    write_entry(&file, &entry(layout, object, btf, prog_id))
}

/// bpffs at /sys/fs/bpf, mounted if it is not (as `bpftool` does to pin).
fn mount_bpffs() -> Result<()> {
    use nix::sys::statfs::{statfs, BPF_FS_MAGIC};
    let at = c"/sys/fs/bpf";
    if statfs(at).is_ok_and(|s| s.filesystem_type() == BPF_FS_MAGIC) {
        return Ok(());
    }
    // SAFETY: valid C strings; no data.
    let rc = unsafe {
        libc::mount(
            c"bpf".as_ptr(),
            at.as_ptr(),
            c"bpf".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        bail!(
            "mounting bpffs at /sys/fs/bpf: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// Removes every entry (pins and layout files); returns what was removed.
pub fn clear() -> Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    for dir in [PIN_DIR, LAYOUT_DIR] {
        let Ok(rd) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let r = if p.is_dir() {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
            r.with_context(|| format!("removing {}", p.display()))?;
            removed.push(p);
        }
        let _ = std::fs::remove_dir(dir);
    }
    Ok(removed)
}

/// What is there, and whether this build would use it (for `tcpwin-trace cache`).
pub fn status() -> Vec<String> {
    let mut lines = Vec::new();
    let current = key().ok();
    if let Ok(rd) = std::fs::read_dir(LAYOUT_DIR) {
        for e in rd.flatten() {
            let p = e.path();
            let text = std::fs::read_to_string(&p);
            let verdict = match (&current, text.map(|t| serde_json::from_str::<Entry>(&t))) {
                (Some((name, object, btf)), Ok(Ok(entry))) => {
                    let (pin, file) = paths(name);
                    // the same checks as `lookup`
                    match check(&entry, object, btf) {
                        Err(why) => format!("ignored: {why:#}"),
                        Ok(()) if p != file => "not this build's".to_string(),
                        Ok(()) if entry.prog_id == 0 => {
                            "in use: the layout (no iterator pinned yet)".to_string()
                        }
                        Ok(()) => match pinned_as_recorded(&pin, &entry) {
                            Ok(()) => "in use".to_string(),
                            Err(why) => format!("ignored: {why:#}"),
                        },
                    }
                }
                (Some(_), Ok(Err(_))) => "ignored: does not parse".to_string(),
                _ => "unreadable".to_string(),
            };
            lines.push(format!("{}: {verdict}", p.display()));
        }
    }
    if let Ok(rd) = std::fs::read_dir(PIN_DIR) {
        for e in rd.flatten() {
            lines.push(format!(
                "{}/iter_tcp: pinned socket iterator",
                e.path().display()
            ));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        Entry {
            format: FORMAT,
            tool: env!("CARGO_PKG_VERSION").into(),
            object: "aa".into(),
            btf: "bb".into(),
            prog_id: 7,
            offsets: vec![0; std::mem::size_of::<Offsets>()],
            absent: vec![],
        }
    }

    #[test]
    fn an_entry_is_used_only_by_its_tool_object_and_kernel() {
        assert!(check(&entry(), "aa", "bb").is_ok());
        let why = |e: Entry| format!("{:#}", check(&e, "aa", "bb").unwrap_err());
        assert!(why(Entry {
            format: 0,
            ..entry()
        })
        .contains("format"));
        assert!(why(Entry {
            tool: "0.0.1".into(),
            ..entry()
        })
        .contains("tcpwin-trace 0.0.1"));
        assert!(why(Entry {
            object: "cc".into(),
            ..entry()
        })
        .contains("eBPF object"));
        assert!(why(Entry {
            btf: "cc".into(),
            ..entry()
        })
        .contains("another kernel"));
        assert!(why(Entry {
            offsets: vec![0; 3],
            ..entry()
        })
        .contains("3 bytes"));
    }
}
