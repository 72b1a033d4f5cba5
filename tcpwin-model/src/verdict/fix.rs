//! A fix as data: the commands that lift a limit (each runs as printed, as root, on the host
//! where the tool ran: the namespace's prefix, the interface and every number filled in; or, for
//! a setting of the peer read from this end alone, on the peer's host), the socket option an
//! application must ask for, which end of the connection owns the setting, and what the kernel
//! will then allow — computed with the kernel's own arithmetic by the family that names the limit.
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// The end of a connection whose setting a fix changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FixEnd {
    Receiver,
    Sender,
}

/// What lifts a limit.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Fix {
    /// complete shell commands, in order; none when the setting lives in an application or on
    /// the peer
    pub commands: Vec<String>,
    /// the socket option the application must ask for, when the setting is its own
    pub app: Option<AppFix>,
    /// the rate the fix is sized for (`--target`, or the rate said in `sized_for`), bit/s
    pub sized_for_bps: Option<u64>,
    /// why that rate: "--target" or how it was chosen without one
    pub sized_for: Option<String>,
    /// the largest window the kernel will advertise after the fix (the handshake's window scale
    /// included), and what it allows at the base RTT, bit/s
    pub window: Option<u64>,
    pub ceiling_bps: Option<u64>,
    /// the fix applies to connections opened after it (the window scale and an SO_RCVBUF lock
    /// are set at connect/listen): the running one must be re-opened
    pub new_connections: bool,
    /// where the namespace is a Kubernetes pod's: the same per-namespace settings in the pod's
    /// own terms (`securityContext.sysctls`), which a restart keeps and the command does not
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// the end of the connection whose setting the fix changes (`receiver`, `sender`)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<FixEnd>,
    /// the commands run on the peer's host, this address (its end was not read here, so they
    /// carry no namespace prefix: run them where that end lives); None: on this host, each with
    /// its namespace's prefix (both ends read here included)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_peer: Option<IpAddr>,
}

/// The pod spec's form of a fix's per-namespace sysctls (`[prefix] sysctl -w net.ipv4.X=V`:
/// `net.core` settings are the host's, no pod can set them), or None when it has none.
pub fn pod_form(commands: &[String]) -> Option<String> {
    let items: Vec<String> = commands
        .iter()
        .filter_map(|c| {
            let (_, kv) = c.split_once("sysctl -w ")?;
            let (k, v) = kv.split_once('=')?;
            (k.starts_with("net.") && !k.starts_with("net.core.")).then(|| {
                format!(
                    "{{name: {k}, value: \"{}\"}}",
                    v.trim_matches(|c| c == '\'' || c == '"')
                )
            })
        })
        .collect();
    (!items.is_empty()).then(|| {
        format!(
            "in the pod's spec (the command above is lost when the pod restarts): securityContext.sysctls: [{}]; the kubelet must allow them (its safe list, or --allowed-unsafe-sysctls), else set them on the node",
            items.join(", ")
        )
    })
}

/// A socket option the application sets itself, and how the known programs set it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppFix {
    /// `SO_RCVBUF`, `SO_SNDBUF` or `TCP_WINDOW_CLAMP`
    pub option: String,
    /// the value to ask for (what `setsockopt` is given; the kernel doubles a buffer request)
    pub bytes: u64,
    /// how known programs ask for it
    pub how: Vec<String>,
    /// the program that owns the socket, when known
    pub process: Option<String>,
}

impl AppFix {
    /// `option` asked as `bytes` by the socket's owner `process`.
    pub fn new(option: &str, bytes: u64, process: Option<String>) -> AppFix {
        let how = match option {
            "SO_RCVBUF" => vec![
                format!("iperf3 -w {bytes}"),
                format!("nginx: listen ... rcvbuf={bytes}"),
            ],
            "SO_SNDBUF" => vec![
                format!("nginx: listen ... sndbuf={bytes}"),
                format!("iperf3 -w {bytes}"),
            ],
            "SO_MAX_PACING_RATE" => vec![
                format!("iperf3 --fq-rate {}", bytes.saturating_mul(8)),
                format!("setsockopt(SO_MAX_PACING_RATE, {bytes}) (bytes/s), or none"),
            ],
            _ => vec![format!("setsockopt({option}, {bytes})")],
        };
        AppFix {
            option: option.into(),
            bytes,
            how,
            process,
        }
    }
}

impl Fix {
    /// The fix in words, for the one-line text: the commands, the application's option, when
    /// it applies.
    pub fn words(&self) -> String {
        // a net.core setting is one for the whole host: said beside the command, not in it
        let mut parts: Vec<String> = self
            .commands
            .iter()
            .map(|c| {
                if c.contains(" net.core.") {
                    format!("{c} (global: every namespace)")
                } else {
                    c.clone()
                }
            })
            .collect();
        if let Some(a) = &self.app {
            parts.push(format!(
                "{}an {} request >= {} ({})",
                a.process
                    .as_ref()
                    .map(|p| format!("{p}: "))
                    .unwrap_or_default(),
                a.option,
                a.bytes,
                a.how.join("; ")
            ));
        }
        let mut s = parts.join("; ");
        if let (Some(p), false) = (self.on_peer, s.is_empty()) {
            s = format!("on the peer {p}: {s}");
        }
        if self.new_connections && !s.is_empty() {
            s.push_str(" (new connections)");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fix_says_its_commands_and_the_applications_option() {
        let f = Fix {
            commands: vec!["sysctl -w net.core.rmem_max=1048576".into()],
            app: Some(AppFix::new("SO_RCVBUF", 1048576, Some("iperf3".into()))),
            new_connections: true,
            ..Fix::default()
        };
        assert_eq!(
            f.words(),
            "sysctl -w net.core.rmem_max=1048576 (global: every namespace); iperf3: an SO_RCVBUF request >= 1048576 (iperf3 -w 1048576; nginx: listen ... rcvbuf=1048576) (new connections)"
        );
        let v = serde_json::to_value(&f).unwrap();
        assert_eq!(v["app"]["option"], "SO_RCVBUF");
        // a pod's namespaced sysctls in its spec's terms; the host's net.core ones not
        assert_eq!(pod_form(&f.commands), None);
        let p = pod_form(&[
            "nsenter -t 4242 -n sysctl -w net.ipv4.tcp_rmem='4096 131072 6291456'".into(),
            "sysctl -w net.core.rmem_max=8388608".into(),
        ])
        .unwrap();
        assert!(
            p.contains("securityContext.sysctls: [{name: net.ipv4.tcp_rmem, value: \"4096 131072 6291456\"}];"),
            "{p}"
        );
        assert_eq!(v["commands"][0], "sysctl -w net.core.rmem_max=1048576");
    }
}
