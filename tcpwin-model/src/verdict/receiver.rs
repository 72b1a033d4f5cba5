//! What a receiver's cap is judged from (the socket, its namespace's limits, the window, the
//! sizing) and what each family finds: shared by `scale`, `buffer` and `ratio`, asked by `caps`.
//! The kernel's arithmetic a fix is sized with lives here: the window scale the handshake will
//! choose, the window a buffer gives at a ratio, the commands run in the socket's namespace.
use std::net::IpAddr;

use tcpwin_common::formula::{handshake_wscale, max_scaled_window, space_from_win, win_from_space};

use super::{
    fix::Fix,
    limit::Limit,
    sizing::{ceiling_bps, Sizing},
};
use crate::facts::{HostLimits, SockFacts};

/// The scaling ratio a socket starts with before it measures one (`TCP_DEFAULT_SCALING_RATIO`,
/// 6.10+): what the handshake's window and an SO_RCVBUF socket's first clamp are computed with.
pub(super) const INITIAL_RATIO: u8 = 128;

/// A cap found: its limit, the setting, the fix as data and in words, and the window after the
/// fix / the window now.
pub(super) struct Found {
    pub limit: Limit,
    pub setting: String,
    pub text: String,
    pub fix: Option<Fix>,
    pub gain: Option<f64>,
}

/// What every cap is judged from.
pub(super) struct Ctx<'a> {
    pub f: &'a SockFacts,
    pub h: &'a HostLimits,
    /// the window judged
    pub w: u64,
    pub clamp: u32,
    pub wscale_ok: bool,
    /// the negotiated scale (0 without scaling)
    pub shift: u8,
    /// the base RTT the fixes are sized at, and the sizing (None: no RTT sample yet)
    pub base: Option<u32>,
    pub sizing: Option<Sizing>,
    pub ratio: Option<u8>,
    pub rcvbuf: Option<u64>,
    pub target: Option<u64>,
    /// the sending end's namespace limits, where that end was read too
    pub peer_host: Option<&'a HostLimits>,
}

impl Ctx<'_> {
    /// The window a fix gives for the rate sized for: its BDP at the base RTT, with headroom.
    pub fn need(&self) -> Option<u64> {
        self.sizing.as_ref().map(|s| s.window())
    }

    /// The rate sized for's bandwidth-delay product at the base RTT: the least window that
    /// carries it.
    pub fn bdp(&self) -> Option<u64> {
        self.sizing.as_ref().map(|s| s.bdp())
    }

    /// How the sizing is said ("for 1 Gbit/s at 18 ms ...", or "once an RTT sample exists").
    pub fn words(&self) -> String {
        self.sizing
            .as_ref()
            .map(|s| s.words())
            .unwrap_or_else(|| "once an RTT sample exists".into())
    }

    /// The buffer a window needs at the measured ratio.
    pub fn buffer_for(&self, win: u64) -> Option<u64> {
        self.ratio.and_then(|r| space_from_win(win, r))
    }

    /// The peer's address, as the routes are looked up with.
    pub fn peer(&self) -> Option<IpAddr> {
        self.f.id.raddr
    }

    /// A command run in the socket's namespace (a per-namespace setting).
    pub fn here(&self, cmd: String) -> String {
        match &self.h.run_in {
            Some(p) => format!("{p} {cmd}"),
            None => cmd,
        }
    }

    /// The tcp_rmem triple, as the kernel reads it (the defaults of old kernels when unread).
    pub fn tcp_rmem(&self) -> [u64; 3] {
        self.h.tcp_rmem.unwrap_or([4096, 131072, 6291456])
    }

    /// The scale a new autotuned connection gets with `tcp_rmem[2]` = `rmem2` (and the host's
    /// rmem_max), under a route clamp of `clamp` (0: none).
    pub fn autotuned_wscale(&self, rmem2: u64, clamp: u64) -> u8 {
        let t = self.tcp_rmem();
        handshake_wscale(
            win_from_space(t[1], INITIAL_RATIO),
            rmem2,
            self.h.rmem_max.unwrap_or(0),
            clamp,
        )
    }

    /// A fix filled in with what the kernel will allow after it: the window a buffer of
    /// `buffer` gives at `ratio` (the measured one unless the fix changes it), within what
    /// scale `wscale` can express, and that window's rate at the base RTT.
    pub fn finish(&self, mut fix: Fix, buffer: u64, ratio: Option<u8>, wscale: u8) -> Fix {
        let r = ratio.or(self.ratio).unwrap_or(INITIAL_RATIO);
        // tcp_init_buffer_space keeps a segment of the buffer's window in reserve
        let reserve = self.f.advmss.unwrap_or(0) as u64;
        let window = win_from_space(buffer, r)
            .saturating_sub(reserve)
            .min(max_scaled_window(wscale));
        fix.window = Some(window);
        fix.ceiling_bps = self.base.map(|b| ceiling_bps(window, b));
        if let Some(s) = &self.sizing {
            fix.sized_for_bps = Some(s.rate());
            fix.sized_for = Some(s.why());
        }
        fix
    }

    /// A finished fix whose window is also held to `cap` (a clamp it asks for).
    pub fn within(&self, mut fix: Fix, cap: u64) -> Fix {
        if let Some(w) = fix.window.as_mut() {
            *w = (*w).min(cap);
            fix.ceiling_bps = self.base.map(|b| ceiling_bps(*w, b));
        }
        fix
    }

    /// The window after a fix over the window now.
    pub fn gain(&self, fix: &Fix) -> Option<f64> {
        fix.window.map(|w| w as f64 / self.w.max(1) as f64)
    }

    /// A cap found, its gain from its fix; `text` None: the sizing's words and the fix's.
    pub fn found(
        &self,
        limit: Limit,
        setting: String,
        fix: Option<Fix>,
        text: Option<String>,
    ) -> Found {
        let text = text.unwrap_or_else(|| match &fix {
            Some(f) => format!("{}: {}", self.words(), f.words()),
            None => self.words(),
        });
        Found {
            limit,
            setting,
            gain: fix.as_ref().and_then(|f| self.gain(f)),
            text,
            fix,
        }
    }
}
