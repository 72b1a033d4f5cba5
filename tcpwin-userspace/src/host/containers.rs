//! The container runtimes' own files on this node, for names the cgroup path does not carry:
//! podman's `containers.json`, docker's `config.v2.json`, the kubelet's container log links
//! (`/var/log/containers/POD_NAMESPACE_CONTAINER-ID.log`). Never a network call, never a
//! runtime's socket; a file that is absent or unreadable names nothing.
use std::{collections::HashMap, fs};

use tcpwin_model::workload::{
    docker_name, kubelet_log_names, podman_names, podman_pod_names, Names,
};

/// podman's metadata, for root's containers (rootless ones keep theirs in the user's home).
const PODMAN: &str = "/var/lib/containers/storage/overlay-containers/containers.json";
/// podman's events log (with `events_logger = "file"`): the pods' names; only its last part is
/// read, a log that grows for months is not read whole at every scan
const PODMAN_EVENTS: &str = "/run/libpod/events/events.log";
const EVENTS_TAIL: u64 = 4 << 20;
const DOCKER: &str = "/var/lib/docker/containers";
const KUBELET_LOGS: &str = "/var/log/containers";

/// Every container this node's runtimes name, by full id.
pub fn names() -> HashMap<String, Names> {
    let mut out: HashMap<String, Names> = HashMap::new();
    if let Ok(json) = fs::read_to_string(PODMAN) {
        out.extend(podman_names(&json));
    }
    if let Some(log) = tail(PODMAN_EVENTS, EVENTS_TAIL) {
        out.extend(podman_pod_names(&log));
    }
    for e in fs::read_dir(DOCKER).into_iter().flatten().flatten() {
        let id = e.file_name().to_string_lossy().to_string();
        if let Some(name) = fs::read_to_string(e.path().join("config.v2.json"))
            .ok()
            .and_then(|j| docker_name(&j))
        {
            out.entry(id).or_default().name = Some(name);
        }
    }
    // the kubelet's names win: a pod's container is named by its pod spec, not by the runtime
    for e in fs::read_dir(KUBELET_LOGS).into_iter().flatten().flatten() {
        if let Some((id, n)) = kubelet_log_names(&e.file_name().to_string_lossy()) {
            out.insert(id, n);
        }
    }
    out
}

/// The last `n` bytes of a file as text (from the first whole line), or None.
fn tail(path: &str, n: u64) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let from = len.saturating_sub(n);
    f.seek(SeekFrom::Start(from)).ok()?;
    let mut b = Vec::new();
    f.read_to_end(&mut b).ok()?;
    let text = String::from_utf8_lossy(&b).into_owned();
    Some(if from > 0 {
        text.split_once('\n')
            .map(|(_, rest)| rest.to_string())
            .unwrap_or_default()
    } else {
        text
    })
}
