//! Whose a socket is, from its owner's cgroup (`/proc/PID/cgroup`): the container and its
//! runtime (podman, docker, containerd, CRI-O), the Kubernetes pod's UID, or the systemd unit.
//! Read from the node's own files, never from a network call; every cgroup line is looked at
//! (cgroup v1, v2 and hybrid hierarchies name the same leaf in different controllers).
use serde::{Deserialize, Serialize};

/// A socket owner's workload.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    /// `podman`, `docker`, `containerd`, `crio` (None: not in a container)
    #[serde(default)]
    pub runtime: Option<String>,
    /// the container's full id (64 hex digits)
    #[serde(default)]
    pub container_id: Option<String>,
    /// the Kubernetes pod's UID (dashes, as `kube_pod_info{uid}` has it)
    #[serde(default)]
    pub pod_uid: Option<String>,
    /// the systemd unit (`nginx.service`, `session-3.scope`) outside a container
    #[serde(default)]
    pub unit: Option<String>,
    /// the container's name, where the runtime's metadata on this node gives it
    #[serde(default)]
    pub name: Option<String>,
    /// the cgroup path it was read from (the v2 line's, else the first that named a container)
    pub cgroup: String,
}

impl Workload {
    /// In a few characters, for a column: `podman:3c097e5a1b2c`, `pod 5d1c...:containerd:ab12...`,
    /// `nginx.service`, or `-`.
    pub fn short(&self) -> String {
        let id = |i: &String| i.chars().take(12).collect::<String>();
        match (&self.runtime, &self.container_id, &self.pod_uid) {
            (Some(r), Some(c), Some(p)) => {
                format!(
                    "pod {}:{r}:{}",
                    p.chars().take(8).collect::<String>(),
                    id(c)
                )
            }
            (Some(r), Some(c), None) => match &self.name {
                Some(n) => format!("{r}:{n}"),
                None => format!("{r}:{}", id(c)),
            },
            _ => self.unit.clone().unwrap_or_else(|| "-".into()),
        }
    }
}

/// A 64-hex-digit container id at the start of `s`.
fn hex_id(s: &str) -> Option<String> {
    let id: String = s.chars().take_while(|c| c.is_ascii_hexdigit()).collect();
    (id.len() == 64).then_some(id)
}

/// The container a cgroup path's segment names: `libpod-ID(.scope)`, `docker-ID.scope`,
/// `cri-containerd-ID.scope`, `crio-ID.scope`; or a bare 64-hex segment under `docker/`,
/// `libpod_parent/` or a pod's (cgroupfs drivers).
fn container_of(segment: &str, parent: &str) -> Option<(String, String)> {
    for (prefix, runtime) in [
        ("libpod-conmon-", ""),
        ("libpod-", "podman"),
        ("docker-", "docker"),
        ("cri-containerd-", "containerd"),
        ("crio-conmon-", ""),
        ("crio-", "crio"),
    ] {
        if let Some(rest) = segment.strip_prefix(prefix) {
            // the runtime's monitor (conmon) is not the container
            if runtime.is_empty() {
                return None;
            }
            return hex_id(rest).map(|id| (runtime.to_string(), id));
        }
    }
    let id = hex_id(segment).filter(|id| id.len() == segment.len())?;
    let runtime = if parent == "docker" {
        "docker"
    } else if parent.starts_with("libpod") {
        "podman"
    } else if parent.starts_with("pod") {
        // kubepods/<qos>/pod<uid>/<id>: the runtime is not in the path
        "cri"
    } else {
        return None;
    };
    Some((runtime.to_string(), id))
}

/// `pod<uid>` (cgroupfs) or `kubepods-<qos>-pod<uid_with_underscores>.slice` (systemd).
fn pod_of(segment: &str) -> Option<String> {
    let s = segment.strip_suffix(".slice").unwrap_or(segment);
    let at = s.rfind("pod")?;
    let uid = s[at + 3..].replace('_', "-");
    let ok = uid.len() == 36 && uid.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    ok.then_some(uid)
}

/// A socket owner's workload from its `/proc/PID/cgroup` text (None when the text names no
/// cgroup at all).
pub fn from_cgroup(text: &str) -> Option<Workload> {
    let paths: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ':');
            let (id, _ctl, path) = (f.next()?, f.next()?, f.next()?);
            Some((id, path))
        })
        .collect();
    if paths.is_empty() {
        return None;
    }
    // the v2 line first (`0::/...`), then every v1 controller's
    let mut ordered: Vec<&str> = paths
        .iter()
        .filter(|(id, _)| *id == "0")
        .map(|(_, p)| *p)
        .collect();
    ordered.extend(paths.iter().filter(|(id, _)| *id != "0").map(|(_, p)| *p));
    for path in &ordered {
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        for (i, seg) in segs.iter().enumerate() {
            let parent = if i > 0 { segs[i - 1] } else { "" };
            if let Some((runtime, id)) = container_of(seg, parent) {
                return Some(Workload {
                    runtime: Some(runtime),
                    container_id: Some(id),
                    pod_uid: segs[..i].iter().rev().find_map(|s| pod_of(s)),
                    cgroup: path.to_string(),
                    ..Workload::default()
                });
            }
        }
    }
    // no container: the unit of the v2 path (or the first v1 path that names one)
    let unit = ordered.iter().find_map(|p| {
        p.rsplit('/')
            .find(|s| s.ends_with(".service") || s.ends_with(".scope"))
            .map(|s| (s.to_string(), p.to_string()))
    });
    Some(match unit {
        Some((u, p)) => Workload {
            unit: Some(u),
            cgroup: p,
            ..Workload::default()
        },
        None => Workload {
            cgroup: ordered[0].to_string(),
            ..Workload::default()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "f2557d61c3a14e1f8e6b0a9d7c5b3e1f2a4c6e8b0d1f3a5c7e9b1d3f5a7c9e1b";
    const UID: &str = "5d1c2b3a-4e5f-6789-abcd-ef0123456789";

    #[test]
    fn podman_systemd_and_cgroupfs() {
        let w = from_cgroup(&format!("0::/machine.slice/libpod-{ID}.scope/container\n")).unwrap();
        assert_eq!(w.runtime.as_deref(), Some("podman"));
        assert_eq!(w.container_id.as_deref(), Some(ID));
        assert_eq!(w.pod_uid, None);
        assert_eq!(w.short(), "podman:f2557d61c3a1");
        // cgroupfs manager, hybrid hierarchy: the id is in the v1 lines, the v2 line is `/`
        let text = format!("9:name=systemd:/libpod_parent/libpod-{ID}\n4:memory:/libpod_parent/libpod-{ID}\n0::/\n");
        let w = from_cgroup(&text).unwrap();
        assert_eq!(w.container_id.as_deref(), Some(ID));
        assert_eq!(w.cgroup, format!("/libpod_parent/libpod-{ID}"));
        // conmon, podman's monitor, is not the container
        let w = from_cgroup(&format!("0::/machine.slice/libpod-conmon-{ID}.scope\n")).unwrap();
        assert_eq!(w.container_id, None);
        assert_eq!(
            w.unit.as_deref(),
            Some(&*format!("libpod-conmon-{ID}.scope"))
        );
    }

    #[test]
    fn kubernetes_pods_with_either_driver() {
        let systemd = format!(
            "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice/cri-containerd-{ID}.scope\n",
            UID.replace('-', "_")
        );
        let w = from_cgroup(&systemd).unwrap();
        assert_eq!(w.runtime.as_deref(), Some("containerd"));
        assert_eq!(w.pod_uid.as_deref(), Some(UID));
        assert_eq!(w.short(), "pod 5d1c2b3a:containerd:f2557d61c3a1");
        let crio = format!(
            "0::/kubepods.slice/kubepods-pod{}.slice/crio-{ID}.scope\n",
            UID.replace('-', "_")
        );
        assert_eq!(from_cgroup(&crio).unwrap().runtime.as_deref(), Some("crio"));
        let cgroupfs = format!("4:memory:/kubepods/burstable/pod{UID}/{ID}\n");
        let w = from_cgroup(&cgroupfs).unwrap();
        assert_eq!(
            (w.runtime.as_deref(), w.pod_uid.as_deref()),
            (Some("cri"), Some(UID))
        );
        let docker = format!("0::/system.slice/docker-{ID}.scope\n");
        assert_eq!(
            from_cgroup(&docker).unwrap().runtime.as_deref(),
            Some("docker")
        );
        let docker_v1 = format!("3:cpu:/docker/{ID}\n");
        assert_eq!(
            from_cgroup(&docker_v1).unwrap().runtime.as_deref(),
            Some("docker")
        );
    }

    #[test]
    fn outside_a_container_the_unit() {
        let w = from_cgroup("0::/system.slice/nginx.service\n").unwrap();
        assert_eq!(w.unit.as_deref(), Some("nginx.service"));
        assert_eq!(w.short(), "nginx.service");
        let w = from_cgroup("0::/user.slice/user-0.slice/session-3.scope\n").unwrap();
        assert_eq!(w.unit.as_deref(), Some("session-3.scope"));
        // this machine's kind: hybrid, nothing named
        let w = from_cgroup("4:memory:/process_api/7928d89a\n0::/\n").unwrap();
        assert_eq!(
            (w.unit, w.container_id, w.cgroup.as_str()),
            (None, None, "/")
        );
        assert_eq!(from_cgroup(""), None);
        // a 64-hex segment with no runtime or pod above it is not taken for a container
        let w = from_cgroup(&format!("0::/some/{ID}\n")).unwrap();
        assert_eq!(w.container_id, None);
    }
}
