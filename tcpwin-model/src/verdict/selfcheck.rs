//! The judge's own check: a verdict whose why, fix and facts disagree is refused. Each rule
//! holds one part of a verdict against the reading it was judged from (the receiver's and the
//! sender's facts, the host's limits), never against the judge's own reasoning:
//! - `premise`: the limit named rests on facts the reading shows (scaling not negotiated, a
//!   locked buffer, a clamp below the buffer's window, the window at the scale's ceiling);
//! - `lifts`: a fix gives a larger window than the one it lifts;
//! - `changes`: a fix changes something (a command, the application's option); re-opening the
//!   connection alone gets the same window again;
//! - `never-lowers`: a fix's sysctl never sets a value below the host's current one;
//! - `app-choice`: an application's own choice (its SO_RCVBUF, its TCP_WINDOW_CLAMP) is fixed in
//!   the application, never by a host setting alone;
//! - `scale-chooser`: a window scale is blamed on the host's caps only when the caps give that
//!   scale now.
//!
//! The judge runs it over every verdict it gives: a contradiction keeps the limit (the facts
//! that named it stand) but drops the fix it cannot stand behind, and is said in the verdict
//! (`refused`), so the lab counts them over every reading it takes.
use tcpwin_common::formula::{handshake_wscale, max_scaled_window, win_from_space};

use super::{limit::Limit, types::Verdict};
use crate::facts::{HostLimits, SockFacts};

/// A rule a verdict broke, and how.
#[derive(Clone, Debug, PartialEq)]
pub struct Contradiction {
    pub rule: &'static str,
    pub detail: String,
}

impl std::fmt::Display for Contradiction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.rule, self.detail)
    }
}

/// What a verdict is checked against: the connection's ends as read, each with its own
/// namespace's limits (a fix runs in the namespace of the end whose setting it changes), and
/// the limits of the socket judged, for an end not read.
pub struct Reading<'a> {
    pub receiver: Option<(&'a SockFacts, &'a HostLimits)>,
    pub sender: Option<(&'a SockFacts, &'a HostLimits)>,
    pub host: &'a HostLimits,
}

impl Reading<'_> {
    /// The limits of the namespace whose setting a fix of `limit` changes: the sender's for the
    /// sending host's limits, the receiver's for the rest.
    fn host_of(&self, limit: Limit) -> &HostLimits {
        let end = match limit.class() {
            super::limit::Class::Sender => self.sender,
            _ => self.receiver,
        };
        end.map_or(self.host, |(_, h)| h)
    }
}

/// Every rule `v` breaks against `r` (its primary limit, and each factor's fix).
pub fn contradictions(v: &Verdict, r: &Reading) -> Vec<Contradiction> {
    let mut out = Vec::new();
    if let Some((f, h)) = r.receiver {
        if v.limit.is_receiver_cap() {
            premise(v.limit, v.window, f, &mut out);
            scale_chooser(v.limit, v.setting.as_deref(), f, h, &mut out);
        }
    }
    let window = v.window;
    let factors = v
        .factors
        .iter()
        .map(|x| (x.limit, &x.fix, Some(x.setting.as_str())));
    let fixes = std::iter::once((v.limit, &v.fix, v.setting.as_deref())).chain(factors);
    for (limit, fix, setting) in fixes.filter_map(|(l, f, s)| Some((l, f.as_ref()?, s))) {
        // a fix that lifts a window is held to the window it lifts
        if limit.is_window() {
            if let (Some(now), Some(after)) = (window, fix.window) {
                if after <= now {
                    out.push(Contradiction {
                        rule: "lifts",
                        detail: format!(
                            "{limit}: the fix allows a window of {after} B, the window now is {now} B"
                        ),
                    });
                }
            }
        }
        if fix.commands.is_empty() && fix.app.is_none() && fix.new_connections {
            out.push(Contradiction {
                rule: "changes",
                detail: format!(
                    "{limit}: the fix re-opens the connection and changes nothing: a new one gets the same window"
                ),
            });
        }
        for c in &fix.commands {
            if let Some(d) = lowers(c, r.host_of(limit)) {
                out.push(Contradiction {
                    rule: "never-lowers",
                    detail: format!("{limit}: `{c}` {d}"),
                });
            }
        }
        let app_choice = match limit {
            Limit::RcvbufLocked => {
                // an SO_RCVBUF capped by rmem_max is the host's cap as much as the
                // application's: the request stays the application's
                setting.is_some_and(|s| s.contains("SO_RCVBUF"))
            }
            Limit::WindowClamp => setting.is_some_and(|s| s.contains("TCP_WINDOW_CLAMP")),
            _ => false,
        };
        if app_choice && fix.app.is_none() {
            out.push(Contradiction {
                rule: "app-choice",
                detail: format!(
                    "{limit}: the application's own setting, fixed by {:?} without the application's change",
                    fix.commands
                ),
            });
        }
    }
    out
}

/// The facts a receiver's cap rests on.
fn premise(limit: Limit, window: Option<u64>, f: &SockFacts, out: &mut Vec<Contradiction>) {
    let miss = |what: String| Contradiction {
        rule: "premise",
        detail: format!("{limit}: {what}"),
    };
    match limit {
        Limit::WscaleOff if f.wscale_ok == Some(true) => {
            out.push(miss("window scaling was negotiated (wscale_ok)".into()))
        }
        Limit::ScaleCap => {
            let cap = max_scaled_window(f.rcv_wscale.unwrap_or(0));
            if f.wscale_ok == Some(false) {
                out.push(miss("window scaling was not negotiated".into()));
            } else if f.window_clamp.is_some_and(|c| (c as u64) < cap) {
                out.push(miss(format!(
                    "window_clamp {} is below 65535 << {} = {cap}: the clamp holds the window, not the scale",
                    f.window_clamp.unwrap_or(0),
                    f.rcv_wscale.unwrap_or(0)
                )));
            } else if window.is_some_and(|w| w != cap) {
                out.push(miss(format!(
                    "the window judged ({} B) is not the scale's ceiling {cap}",
                    window.unwrap_or(0)
                )));
            }
        }
        Limit::RcvbufLocked if f.rcvbuf_locked == Some(false) => {
            out.push(miss("the receive buffer is not locked".into()))
        }
        Limit::AutotuneMax if f.rcvbuf_locked == Some(true) => out.push(miss(
            "the receive buffer is locked: autotuning does not size it".into(),
        )),
        Limit::WindowClamp => {
            if let (Some(c), Some(b), Some(r)) = (f.window_clamp, f.sk_rcvbuf, f.scaling_ratio) {
                let bw = win_from_space(b as u64, r);
                if c as u64 >= bw {
                    out.push(miss(format!(
                        "window_clamp {c} is not below the {bw} the buffer allows"
                    )));
                }
            }
        }
        _ => {}
    }
}

/// A scale blamed on the host's caps that give a larger one now.
fn scale_chooser(
    limit: Limit,
    setting: Option<&str>,
    f: &SockFacts,
    h: &HostLimits,
    out: &mut Vec<Contradiction>,
) {
    let (Some(setting), Some(shift), Some(t)) = (setting, f.rcv_wscale, h.tcp_rmem) else {
        return;
    };
    if limit != Limit::ScaleCap || !setting.contains("the host's caps") {
        return;
    }
    // an unlocked socket's scale: from the largest of the space offered and the caps
    let now = handshake_wscale(win_from_space(t[1], 128), t[2], h.rmem_max.unwrap_or(0), 0);
    // the why that says the caps did not choose it names them too
    if now > shift && !setting.contains(&format!("give new connections {now}")) {
        out.push(Contradiction {
            rule: "scale-chooser",
            detail: format!(
                "scale {shift} blamed on the host's caps, which give new connections {now} now"
            ),
        });
    }
}

/// Why a command lowers a setting below the host's value, if it does.
fn lowers(cmd: &str, h: &HostLimits) -> Option<String> {
    let (_, rest) = cmd.split_once("sysctl -w ")?;
    let (key, value) = rest.split_once('=')?;
    let nums: Vec<u64> = value
        .trim_matches(|c| c == '\'' || c == '"')
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    let (now, new): (Vec<u64>, Vec<u64>) = match key {
        "net.core.rmem_max" => (h.rmem_max.into_iter().collect(), nums),
        "net.core.wmem_max" => (h.wmem_max.into_iter().collect(), nums),
        "net.ipv4.tcp_rmem" => (h.tcp_rmem.map(Vec::from).unwrap_or_default(), nums),
        "net.ipv4.tcp_wmem" => (h.tcp_wmem.map(Vec::from).unwrap_or_default(), nums),
        _ => return None,
    };
    now.iter()
        .zip(&new)
        .find(|(a, b)| b < a)
        .map(|(a, b)| format!("sets {b} below the host's {a}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::{fix::AppFix, fix::Fix, types::Side};

    fn host() -> HostLimits {
        HostLimits {
            rmem_max: Some(425_984),
            wmem_max: Some(425_984),
            tcp_rmem: Some([4096, 131072, 33554432]),
            tcp_wmem: Some([4096, 16384, 4194304]),
            ..Default::default()
        }
    }

    fn receiver(shift: u8) -> SockFacts {
        SockFacts {
            wscale_ok: Some(true),
            rcv_wscale: Some(shift),
            rcvbuf_locked: Some(false),
            sk_rcvbuf: Some(4 << 20),
            scaling_ratio: Some(229),
            window_clamp: Some(win_from_space(4 << 20, 229) as u32),
            ..Default::default()
        }
    }

    fn verdict(limit: Limit, window: u64, setting: &str, fix: Fix) -> Verdict {
        Verdict {
            limit,
            window: Some(window),
            setting: Some(setting.into()),
            fix: Some(fix),
            ..Verdict::unknown(Side::Receiving)
        }
    }

    fn rules(v: &Verdict, f: &SockFacts) -> Vec<&'static str> {
        let h = host();
        contradictions(
            v,
            &Reading {
                receiver: Some((f, &h)),
                sender: None,
                host: &h,
            },
        )
        .into_iter()
        .map(|c| c.rule)
        .collect()
    }

    /// The screen: scale 2 blamed on caps that give 10, and a bare re-open as the fix.
    #[test]
    fn a_scale_blamed_on_caps_that_give_more_and_a_bare_reopen_are_refused() {
        let f = receiver(2);
        let v = verdict(
            Limit::ScaleCap,
            65535 << 2,
            "the host's caps when the connection opened (tcp_rmem[2], rmem_max) gave it window scale 2",
            Fix {
                new_connections: true,
                window: Some(3_000_000),
                ..Fix::default()
            },
        );
        assert_eq!(rules(&v, &f), ["scale-chooser", "changes"]);
        // the why that says the caps give 10 now, with the application's clamp as the fix
        let v = verdict(
            Limit::ScaleCap,
            65535 << 2,
            "the handshake chose window scale 2, yet this host's caps (...) give new connections 10: ...",
            Fix {
                app: Some(AppFix::new("TCP_WINDOW_CLAMP", 800_000, None)),
                new_connections: true,
                window: Some(800_000),
                ..Fix::default()
            },
        );
        assert!(rules(&v, &f).is_empty(), "{:?}", rules(&v, &f));
    }

    #[test]
    fn a_limit_without_its_premise_is_refused() {
        let mut f = receiver(7);
        let fix = Fix {
            app: Some(AppFix::new("SO_RCVBUF", 4 << 20, None)),
            new_connections: true,
            window: Some(8 << 20),
            ..Fix::default()
        };
        let v = verdict(Limit::RcvbufLocked, 1 << 20, "SO_RCVBUF set", fix.clone());
        assert_eq!(rules(&v, &f), ["premise"]);
        f.rcvbuf_locked = Some(true);
        assert!(rules(&v, &f).is_empty());
        // scaling negotiated: not wscale-off
        let v = verdict(Limit::WscaleOff, 65535, "window scaling off", fix.clone());
        assert_eq!(rules(&v, &f), ["premise"]);
        // a clamp under the scale's ceiling holds the window, not the scale
        f.window_clamp = Some(100_000);
        let v = verdict(Limit::ScaleCap, 65535 << 7, "a route", fix.clone());
        assert_eq!(rules(&v, &f), ["premise"]);
        // a clamp at the buffer's window is no clamp of its own
        let f = receiver(7);
        let v = verdict(
            Limit::WindowClamp,
            1 << 20,
            "TCP_WINDOW_CLAMP set by the application",
            fix,
        );
        assert_eq!(rules(&v, &f), ["premise"]);
    }

    #[test]
    fn a_fix_that_lifts_nothing_or_lowers_a_setting_is_refused() {
        let mut f = receiver(7);
        f.rcvbuf_locked = Some(true);
        let v = verdict(
            Limit::AutotuneMax,
            1 << 20,
            "autotuning at tcp_rmem[2]",
            Fix {
                commands: vec!["sysctl -w net.ipv4.tcp_rmem='4096 131072 1048576'".into()],
                window: Some(900_000),
                ..Fix::default()
            },
        );
        assert_eq!(rules(&v, &f), ["premise", "lifts", "never-lowers"]);
        // raising it is fine
        let f = receiver(7);
        let v = verdict(
            Limit::AutotuneMax,
            1 << 20,
            "autotuning at tcp_rmem[2]",
            Fix {
                commands: vec![
                    "ip netns exec b sysctl -w net.ipv4.tcp_rmem='4096 131072 67108864'".into(),
                ],
                window: Some(40 << 20),
                ..Fix::default()
            },
        );
        assert!(rules(&v, &f).is_empty());
    }

    /// A sender's fix runs in the sender's namespace: held to its tcp_wmem (256 KiB there), not
    /// to the receiver's (4 MiB), whichever end was judged.
    #[test]
    fn a_fix_is_held_to_the_namespace_it_runs_in() {
        let f = receiver(7);
        let rh = host();
        let sh = HostLimits {
            tcp_wmem: Some([4096, 16384, 262_144]),
            ..host()
        };
        let s = SockFacts::default();
        let v = Verdict {
            limit: Limit::Sndbuf,
            fix: Some(Fix {
                commands: vec![
                    "ip netns exec a sysctl -w net.ipv4.tcp_wmem='4096 16384 1887096'".into(),
                ],
                ..Fix::default()
            }),
            ..Verdict::unknown(Side::Receiving)
        };
        let read = |sender_host: &HostLimits| {
            contradictions(
                &v,
                &Reading {
                    receiver: Some((&f, &rh)),
                    sender: Some((&s, sender_host)),
                    host: &rh,
                },
            )
        };
        assert!(read(&sh).is_empty());
        assert_eq!(read(&rh)[0].rule, "never-lowers");
    }

    #[test]
    fn an_applications_choice_is_fixed_in_the_application() {
        let mut f = receiver(7);
        f.rcvbuf_locked = Some(true);
        let v = verdict(
            Limit::RcvbufLocked,
            1 << 20,
            "SO_RCVBUF set by the application (sk_rcvbuf 2097152)",
            Fix {
                commands: vec!["sysctl -w net.core.rmem_max=8388608".into()],
                new_connections: true,
                window: Some(8 << 20),
                ..Fix::default()
            },
        );
        assert_eq!(rules(&v, &f), ["app-choice"]);
    }
}
