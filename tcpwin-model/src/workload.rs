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
    /// the podman pod's id (64 hex digits) the container runs in, beside its other containers
    /// (the pod's infra container holds the network namespace they share)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_id: Option<String>,
    /// the systemd unit (`nginx.service`, `session-3.scope`) outside a container
    #[serde(default)]
    pub unit: Option<String>,
    /// the container's name, where the runtime's metadata on this node gives it
    #[serde(default)]
    pub name: Option<String>,
    /// the pod's name: a Kubernetes pod's, where the node's kubelet logs name it (and its
    /// namespace below), or a podman pod's, where podman's events log names it
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// the cgroup path it was read from (the v2 line's, else the first that named a container)
    pub cgroup: String,
}

impl Workload {
    /// In a few characters, for a column: `podman:3c097e5a1b2c`, `pod 5d1c...:containerd:ab12...`,
    /// `nginx.service`, or `-`.
    pub fn short(&self) -> String {
        let id = |i: &String| i.chars().take(12).collect::<String>();
        if let (Some(ns), Some(pod)) = (&self.namespace, &self.pod) {
            return match &self.name {
                Some(c) => format!("{ns}/{pod}/{c}"),
                None => format!("{ns}/{pod}"),
            };
        }
        // a podman pod's container: the container named as one, the pod beside it
        if let (Some(r), Some(c), Some(p)) = (&self.runtime, &self.container_id, &self.pod_id) {
            let pod = self.pod.clone().unwrap_or_else(|| id(p));
            return format!("{r}:{pod}/{}", self.name.clone().unwrap_or_else(|| id(c)));
        }
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

/// What the container runtime's own files on this node say of a container (never a network call):
/// its name, and for a Kubernetes container its pod and namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Names {
    pub name: Option<String>,
    pub pod: Option<String>,
    pub namespace: Option<String>,
}

impl Workload {
    /// The names the runtime's metadata gives this workload's container, where it has them.
    pub fn name_with(&mut self, names: &std::collections::HashMap<String, Names>) {
        // a podman pod is named by its id too
        if let Some(n) = self.pod_id.as_ref().and_then(|id| names.get(id)) {
            self.pod = n.name.clone().or(self.pod.take());
        }
        let Some(n) = self.container_id.as_ref().and_then(|id| names.get(id)) else {
            return;
        };
        self.name = n.name.clone().or(self.name.take());
        self.pod = n.pod.clone().or(self.pod.take());
        self.namespace = n.namespace.clone().or(self.namespace.take());
    }

    /// Whether `--container X` names this workload: its name, or its id or a prefix of it (at
    /// least 4 hex digits, as `docker`/`podman` accept).
    pub fn is_container(&self, x: &str) -> bool {
        let by_id = is_id_prefix(x)
            && self
                .container_id
                .as_ref()
                .is_some_and(|id| id.starts_with(x));
        by_id || self.name.as_deref() == Some(x)
    }

    /// Whether `--cgroup PATH` holds this workload: its cgroup path is PATH or under it (PATH
    /// as `/proc/PID/cgroup` writes it, or under `/sys/fs/cgroup`).
    pub fn in_cgroup(&self, path: &str) -> bool {
        let p = path.strip_prefix("/sys/fs/cgroup").unwrap_or(path);
        let p = p.trim_end_matches('/');
        if p.is_empty() {
            return true;
        }
        self.cgroup == p
            || self
                .cgroup
                .strip_prefix(p)
                .is_some_and(|rest| rest.starts_with('/'))
    }
}

/// `--container ID|NAME` or `--cgroup PATH`: the workloads whose sockets a command reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selector {
    Container(String),
    Cgroup(String),
}

impl Selector {
    pub fn holds(&self, w: &Workload) -> bool {
        match self {
            Selector::Container(x) => w.is_container(x),
            Selector::Cgroup(p) => w.in_cgroup(p),
        }
    }

    /// As the command line said it: `container web`, `cgroup /system.slice/nginx.service`.
    pub fn describe(&self) -> String {
        match self {
            Selector::Container(x) => format!("container {x}"),
            Selector::Cgroup(p) => format!("cgroup {p}"),
        }
    }

    /// Whether matching needs the runtimes' names (a container named, not an id).
    pub fn needs_names(&self) -> bool {
        matches!(self, Selector::Container(x) if !is_id_prefix(x))
    }
}

/// A container id or its prefix as docker and podman take one: 4 hex digits or more.
fn is_id_prefix(x: &str) -> bool {
    x.len() >= 4 && x.chars().all(|c| c.is_ascii_hexdigit())
}

/// podman's `containers.json` (`/var/lib/containers/storage/overlay-containers/`): id -> name.
pub fn podman_names(json: &str) -> Vec<(String, Names)> {
    #[derive(Deserialize)]
    struct C {
        id: String,
        #[serde(default)]
        names: Vec<String>,
    }
    serde_json::from_str::<Vec<C>>(json)
        .unwrap_or_default()
        .into_iter()
        .map(|c| {
            (
                c.id,
                Names {
                    name: c.names.into_iter().next(),
                    ..Names::default()
                },
            )
        })
        .collect()
}

/// docker's `config.v2.json` (`/var/lib/docker/containers/ID/`): its `Name` (`/web` -> `web`).
pub fn docker_name(json: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct C {
        #[serde(rename = "Name")]
        name: String,
    }
    let c: C = serde_json::from_str(json).ok()?;
    Some(c.name.trim_start_matches('/').to_string()).filter(|n| !n.is_empty())
}

/// The kubelet's container log link (`/var/log/containers/POD_NAMESPACE_CONTAINER-ID.log`):
/// the container's id, name, pod and namespace. Pod and namespace names hold no `_` (DNS
/// labels), a container name no `_` either.
pub fn kubelet_log_names(file: &str) -> Option<(String, Names)> {
    let stem = file.strip_suffix(".log")?;
    let (rest, id) = stem.rsplit_once('-')?;
    hex_id(id).filter(|h| h.len() == id.len())?;
    let mut f = rest.splitn(3, '_');
    let (pod, ns, container) = (f.next()?, f.next()?, f.next()?);
    if [pod, ns, container].iter().any(|x| x.is_empty()) {
        return None;
    }
    Some((
        id.to_string(),
        Names {
            name: Some(container.to_string()),
            pod: Some(pod.to_string()),
            namespace: Some(ns.to_string()),
        },
    ))
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

/// The podman pod a container's cgroup sits in, from the segments above it: a 64-hex segment
/// under `libpod_parent` (cgroupfs), or `machine-libpod_pod_<id>.slice` (systemd).
fn podman_pod_of(above: &[&str]) -> Option<String> {
    let last = above.last()?;
    if let Some(rest) = last
        .strip_suffix(".slice")
        .and_then(|s| s.rsplit_once("libpod_pod_"))
        .map(|(_, id)| id)
    {
        return hex_id(rest).filter(|id| id.len() == rest.len());
    }
    let parent = above.len().checked_sub(2).map(|i| above[i])?;
    (parent == "libpod_parent")
        .then(|| hex_id(last).filter(|id| id.len() == last.len()))
        .flatten()
}

/// podman's events log (`/run/libpod/events/events.log`, with `events_logger = "file"`): each
/// pod's id and name, from its `create` event.
pub fn podman_pod_names(log: &str) -> Vec<(String, Names)> {
    #[derive(Deserialize)]
    struct Event {
        #[serde(rename = "ID", default)]
        id: String,
        #[serde(rename = "Name", default)]
        name: String,
        #[serde(rename = "Status", default)]
        status: String,
        #[serde(rename = "Type", default)]
        kind: String,
    }
    log.lines()
        .filter(|l| l.contains("\"pod\""))
        .filter_map(|l| serde_json::from_str::<Event>(l).ok())
        .filter(|e| e.kind == "pod" && e.status == "create" && hex_id(&e.id).is_some())
        .map(|e| {
            (
                e.id,
                Names {
                    name: Some(e.name).filter(|n| !n.is_empty()),
                    ..Names::default()
                },
            )
        })
        .collect()
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
        // the deepest segment that names a container is the container: a podman pod's cgroup
        // (`/libpod_parent/<pod id>/libpod-<container id>`) names the pod above it
        for (i, seg) in segs.iter().enumerate().rev() {
            let parent = if i > 0 { segs[i - 1] } else { "" };
            if let Some((runtime, id)) = container_of(seg, parent) {
                return Some(Workload {
                    runtime: Some(runtime),
                    container_id: Some(id),
                    pod_uid: segs[..i].iter().rev().find_map(|s| pod_of(s)),
                    pod_id: podman_pod_of(&segs[..i]),
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
    fn runtime_metadata_names_containers() {
        let json = format!(
            r#"[{{"id":"{ID}","names":["web"],"image":"x","layer":"y"}},{{"id":"ab","names":[]}}]"#
        );
        let got = podman_names(&json);
        assert_eq!(got[0].0, ID);
        assert_eq!(got[0].1.name.as_deref(), Some("web"));
        assert_eq!(got[1].1.name, None);
        assert!(podman_names("not json").is_empty());
        assert_eq!(
            docker_name(r#"{"ID":"x","Name":"/db","State":{}}"#).as_deref(),
            Some("db")
        );
        let (id, n) =
            kubelet_log_names(&format!("nginx-7d9f8b6c5-x2kqz_default_nginx-{ID}.log")).unwrap();
        assert_eq!(id, ID);
        assert_eq!(
            n,
            Names {
                name: Some("nginx".into()),
                pod: Some("nginx-7d9f8b6c5-x2kqz".into()),
                namespace: Some("default".into()),
            }
        );
        assert_eq!(kubelet_log_names("kube-proxy.log"), None);
        assert_eq!(kubelet_log_names(&format!("a_b-{ID}.log")), None);
        // a workload named from them, selected by name or id prefix, shown by pod
        let mut w = from_cgroup(&format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{ID}.scope\n",
            UID.replace('-', "_")
        ))
        .unwrap();
        w.name_with(&[(id, n)].into_iter().collect());
        assert_eq!(w.short(), "default/nginx-7d9f8b6c5-x2kqz/nginx");
        assert!(w.is_container("nginx") && w.is_container(&ID[..12]));
        assert!(!w.is_container("ngin") && !w.is_container("f25"));
        assert!(w.in_cgroup("/sys/fs/cgroup/kubepods.slice/"));
        assert!(w.in_cgroup("/kubepods.slice/kubepods-burstable.slice"));
        assert!(!w.in_cgroup("/kubepods.sli"));
        assert!(w.in_cgroup("/"));
    }

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

    /// A podman pod's two containers (cgroupfs: the pod's id the parent of each container's
    /// cgroup; systemd: a `machine-libpod_pod_<id>.slice`): each is named as a container, the
    /// pod beside it, its name from podman's events log; either is selected by its own name or
    /// id, not by the pod's.
    #[test]
    fn a_podman_pods_containers_are_containers() {
        const POD: &str = "789ea7488af815001e16520c030d6f50a17db9444daa36880e6e2bbb694cf856";
        const WEB: &str = "de540e09a11ff51150ca66543983a8d868f87ad1485898f51a4257cdfe90e2ad";
        let text = format!(
            "9:name=systemd:/libpod_parent/{POD}/libpod-{WEB}\n0::/libpod_parent/{POD}/libpod-{WEB}\n"
        );
        let mut w = from_cgroup(&text).unwrap();
        assert_eq!(w.container_id.as_deref(), Some(WEB));
        assert_eq!(w.pod_id.as_deref(), Some(POD));
        assert_eq!(w.short(), "podman:789ea7488af8/de540e09a11f");
        let log = format!(
            "{{\"ID\":\"{POD}\",\"Name\":\"tp1\",\"Status\":\"create\",\"Time\":\"2026-12-05T13:02:15Z\",\"Type\":\"pod\",\"Attributes\":null}}\n{{\"ID\":\"{WEB}\",\"Name\":\"tpweb\",\"Status\":\"create\",\"Type\":\"container\"}}\nnot json\n"
        );
        let mut names: std::collections::HashMap<String, Names> =
            podman_pod_names(&log).into_iter().collect();
        assert_eq!(names.len(), 1);
        names.insert(
            WEB.into(),
            Names {
                name: Some("tpweb".into()),
                ..Names::default()
            },
        );
        w.name_with(&names);
        assert_eq!(w.short(), "podman:tp1/tpweb");
        assert!(w.is_container("tpweb") && w.is_container(&WEB[..12]));
        assert!(!w.is_container("tp1") && !w.is_container(&POD[..12]));
        let w = from_cgroup(&format!(
            "0::/machine.slice/machine-libpod_pod_{POD}.slice/libpod-{WEB}.scope/container\n"
        ))
        .unwrap();
        assert_eq!(
            (w.container_id.as_deref(), w.pod_id.as_deref()),
            (Some(WEB), Some(POD))
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
