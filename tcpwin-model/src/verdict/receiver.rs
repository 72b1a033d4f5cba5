//! What a receiver's cap is judged from (the socket, its namespace's limits, the window, the
//! sizing) and what each family finds: shared by `scale`, `buffer` and `ratio`, asked by `caps`.
use tcpwin_common::formula::{space_from_win, win_from_space};

use super::{
    sizing::{ceiling_bps, fmt_rate, per_rate},
    Limit,
};
use crate::facts::{HostLimits, SockFacts};

/// A cap found: its limit, the setting, the fix, and the window after the fix / the window now.
pub(super) struct Found {
    pub limit: Limit,
    pub setting: String,
    pub fix: String,
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
    /// the base RTT the fixes are sized at
    pub base: Option<u32>,
    /// the window the rate sized for needs at the base RTT
    pub need: Option<u64>,
    /// how the sizing is said ("for 1 Gbit/s at 18 ms ...", or "once an RTT sample exists")
    pub words: String,
    pub ratio: Option<u8>,
    pub rcvbuf: Option<u64>,
    pub target: Option<u64>,
}

impl Ctx<'_> {
    /// The buffer a window needs at the measured ratio.
    pub fn buffer_for(&self, win: u64) -> Option<u64> {
        self.ratio.and_then(|r| space_from_win(win, r))
    }

    /// A buffer fix: with a target the command sized for it (only when it raises the setting),
    /// without one the buffer each unit of rate needs and the command to write it in.
    pub fn sized(&self, current: u64, cmd: &dyn Fn(&str) -> String) -> String {
        let r = self.ratio.unwrap_or(0);
        let base_s = self.base.unwrap_or(0);
        let unit = per_rate(base_s);
        let nb = self.need.and_then(|n| self.buffer_for(n));
        let allows = self
            .ratio
            .filter(|_| base_s > 0)
            .map(|r| fmt_rate(ceiling_bps(win_from_space(current, r), base_s)));
        let words = &self.words;
        match (self.target, nb) {
            (Some(_), Some(nb)) if nb > current => {
                format!("{words}: at ratio {r} the buffer must be {nb}: {}", cmd(&nb.to_string()))
            }
            (Some(_), Some(_)) => format!("{words}: the buffer ({current}) already allows it"),
            (None, Some(nb)) => format!(
                "{words}: at ratio {r} each {} needs {nb} B of buffer ({current} allows {} at the base RTT): {} with BYTES >= rate / {} x {nb}",
                fmt_rate(unit),
                allows.unwrap_or_else(|| "?".into()),
                cmd("BYTES"),
                fmt_rate(unit),
            ),
            _ => words.clone(),
        }
    }
}
