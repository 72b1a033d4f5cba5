//! `--apply-fix`: a verdict's fix applied exactly as its JSON gives it — each command run as
//! printed (`bash -c`), the application's socket option given to the program as its own option
//! (an operator edits nginx's `listen ... sndbuf=`, iperf3's `-w`) — then the transfer run again
//! on the same path. A global sysctl a command changes is saved first and restored when the row
//! ends.
use std::process::Command;

use crate::{
    programs::{App, Client},
    sysctl::GlobalSysctl,
};
use anyhow::{bail, Context, Result};
use tcpwin_model::verdict::{AppFix, Fix};

use super::run::Setup;

/// `sysctl -w net.core.KEY=VALUE`: a global setting, saved before the command runs and restored
/// when the row ends.
fn global_sysctl(cmd: &str) -> Option<&str> {
    let (k, _) = cmd.strip_prefix("sysctl -w ")?.split_once('=')?;
    k.starts_with("net.core.").then_some(k)
}

/// Applies `fix` to the row's setup; returns what was done, in words.
pub(super) fn apply(fix: &Fix, st: &mut Setup) -> Result<Vec<String>> {
    let mut done = Vec::new();
    // a fix for the peer's host, read from this end alone, runs on that host: the namespace
    // that holds the address, as an operator pastes it there
    let on_peer = match fix.on_peer {
        None => None,
        Some(ip) => {
            let ip = ip.to_string();
            let pair = &st.pair;
            Some(if ip == pair.ip_a {
                pair.a.clone()
            } else if ip == pair.ip_b {
                pair.b.clone()
            } else {
                bail!("the fix is for the peer {ip}, which is neither end of the lab's path")
            })
        }
    };
    for cmd in &fix.commands {
        if let Some(k) = global_sysctl(cmd) {
            st.globals.push(GlobalSysctl::keep(k)?);
        }
        let out = match &on_peer {
            Some(ns) => crate::pair::Pair::exec(ns, "bash")
                .args(["-c", cmd])
                .output(),
            None => Command::new("bash").args(["-c", cmd]).output(),
        }
        .with_context(|| format!("running {cmd}"))?;
        if !out.status.success() {
            bail!(
                "the fix's command failed as printed: {cmd}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        done.push(match &on_peer {
            Some(ns) => format!("on the peer ({ns}): {cmd}"),
            None => cmd.clone(),
        });
        // the lab's veth is a NIC only with threaded NAPI (see Pair::threaded_napi): plumbing of
        // the lab, not part of the fix
        if cmd.contains(" gro on") {
            st.pair.threaded_napi()?;
        }
    }
    if let Some(a) = &fix.app {
        done.push(give_app(a, st)?);
    }
    Ok(done)
}

/// Gives the application's socket option to the row's program as its own option (iperf3's
/// `-w` and `--fq-rate`, nginx's `listen ... sndbuf=`/`rcvbuf=`, the Python client's options),
/// or to the lab's receiver; returns what was done, in words.
fn give_app(a: &AppFix, st: &mut Setup) -> Result<String> {
    let bytes = u32::try_from(a.bytes).context("a socket option over 4 GiB")?;
    Ok(match (a.option.as_str(), &mut st.app) {
        ("SO_RCVBUF" | "SO_SNDBUF", Some(App::Iperf3 { window, .. })) => {
            *window = Some(bytes);
            format!("iperf3 -w {bytes}")
        }
        ("SO_SNDBUF", Some(App::Nginx { sndbuf, .. })) => {
            *sndbuf = Some(bytes);
            format!("nginx: listen ... sndbuf={bytes}")
        }
        // iperf3's --fq-rate is its SO_MAX_PACING_RATE, in bit/s
        ("SO_MAX_PACING_RATE", Some(App::Iperf3 { fq_rate, .. })) => {
            let bps = a.bytes.saturating_mul(8);
            *fq_rate = Some(bps);
            format!("iperf3 --fq-rate {bps}")
        }
        ("SO_RCVBUF", Some(App::Upload { rcvbuf, .. })) => {
            *rcvbuf = Some(bytes);
            format!("nginx: listen ... rcvbuf={bytes}")
        }
        (
            "SO_RCVBUF",
            Some(App::Nginx {
                client: Client::Python { rcvbuf, .. },
                ..
            }),
        ) => {
            *rcvbuf = Some(bytes);
            format!("the Python client: SO_RCVBUF {bytes}")
        }
        (
            "TCP_WINDOW_CLAMP",
            Some(App::Nginx {
                client: Client::Python { clamp, .. },
                ..
            }),
        ) => {
            *clamp = Some(bytes);
            format!("the Python client: TCP_WINDOW_CLAMP {bytes}")
        }
        ("SO_RCVBUF", None) => {
            st.rcvbuf = Some(bytes);
            format!("the lab's receiver: --rcvbuf {bytes}")
        }
        // a clamp set before the handshake is asked again there, at the fix's value
        ("TCP_WINDOW_CLAMP", None) if st.listen_clamp.is_some() => {
            st.listen_clamp = Some(bytes);
            format!("the lab's receiver: --listen-clamp {bytes}")
        }
        ("TCP_WINDOW_CLAMP", None) => {
            st.window_clamp = Some(bytes);
            format!("the lab's receiver: --window-clamp {bytes}")
        }
        (o, app) => bail!(
            "the fix asks {o} of {}, which the lab cannot give it",
            app.map(|a| a.describe())
                .unwrap_or_else(|| "the lab's own endpoints".into())
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_global_sysctls_are_restored_settings() {
        assert_eq!(
            global_sysctl("sysctl -w net.core.rmem_max=2097152"),
            Some("net.core.rmem_max")
        );
        assert_eq!(
            global_sysctl("ip netns exec x sysctl -w net.ipv4.tcp_rmem='4096 131072 2515284'"),
            None
        );
        assert_eq!(
            global_sysctl("sysctl -w net.ipv4.tcp_window_scaling=1"),
            None
        );
    }
}
