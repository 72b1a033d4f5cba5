//! `tcpwin-trace top`'s state: the rows of the latest snapshot, each socket's recent history
//! (for the sparklines), the last ratio change, the sort, the filter and the selection; keys
//! turn into state changes here. Pure: snapshots and keys in, what to draw out.
use std::collections::{HashMap, VecDeque};

use tcpwin_model::{
    facts::SockFacts,
    schema::SocketId,
    verdict::{Limit, Side, Verdict},
};

/// Points kept per sparkline (one per refresh).
pub const HISTORY: usize = 120;
/// The tracer's events kept for the events pane (`--trace`).
pub const EVENTS: usize = 500;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortKey {
    Rate,
    /// rate / ceiling: the closest to its window's ceiling first
    WindowLimited,
    Ratio,
}

impl SortKey {
    pub fn name(self) -> &'static str {
        match self {
            SortKey::Rate => "rate",
            SortKey::WindowLimited => "window-limited",
            SortKey::Ratio => "ratio",
        }
    }

    fn next(self) -> SortKey {
        match self {
            SortKey::Rate => SortKey::WindowLimited,
            SortKey::WindowLimited => SortKey::Ratio,
            SortKey::Ratio => SortKey::Rate,
        }
    }
}

/// One socket as a row.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// the row's key (rows are sockets with a cookie)
    pub cookie: u64,
    pub id: SocketId,
    pub netns: String,
    pub pid: Option<u32>,
    pub comm: Option<String>,
    /// the owner's workload, short (`podman:web`, `default/web-5d9f/nginx`, `nginx.service`)
    pub workload: Option<String>,
    pub rate_bps: Option<u64>,
    pub rtt_us: Option<u32>,
    pub window: Option<u64>,
    pub ceiling_bps: Option<u64>,
    pub scaling_ratio: Option<u8>,
    /// the last change seen while watching: (from, to)
    pub ratio_change: Option<(u8, u8)>,
    pub window_clamp: Option<u32>,
    pub rcv_ssthresh: Option<u32>,
    pub sk_rcvbuf: Option<u32>,
    pub limit: Limit,
    /// which way data flows on it
    pub side: Side,
    pub setting: Option<String>,
}

impl Row {
    fn window_use(&self) -> f64 {
        match (self.rate_bps, self.ceiling_bps) {
            (Some(r), Some(c)) if c > 0 => r as f64 / c as f64,
            (Some(r), Some(_)) if r > 0 => f64::INFINITY,
            _ => 0.0,
        }
    }
}

/// A socket's recent values, oldest first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    pub window: VecDeque<u64>,
    pub rcv_ssthresh: VecDeque<u64>,
    pub scaling_ratio: VecDeque<u64>,
    pub rate: VecDeque<u64>,
}

fn keep(q: &mut VecDeque<u64>, v: Option<u64>) {
    if let Some(v) = v {
        q.push_back(v);
        if q.len() > HISTORY {
            q.pop_front();
        }
    }
}

/// A key, as the terminal layer reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Up,
    Down,
    Enter,
    Esc,
    Backspace,
    CtrlC,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    None,
    Quit,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TopState {
    pub rows: Vec<Row>,
    pub history: HashMap<u64, History>,
    last_ratio: HashMap<u64, (u8, Option<(u8, u8)>)>,
    pub sort: SortKey,
    /// applied filter: a number matches a port or the pid, text a substring of comm or address
    pub filter: String,
    /// the filter being typed after `/` (None: not editing)
    pub editing: Option<String>,
    /// selected socket (by cookie, so the selection follows it when rows move)
    pub selected: Option<u64>,
    /// the host's check summary, one line per entry
    pub header: Vec<String>,
    pub refreshes: u64,
    /// the refresh interval, ms (shown in the header)
    pub interval_ms: u64,
    /// `--trace`: the tracer's latest events (socket, line), and its loss counters
    pub tracing: bool,
    pub events: VecDeque<(Option<u64>, String)>,
    pub events_received: u64,
    pub events_lost: u64,
}

impl Default for TopState {
    fn default() -> Self {
        TopState {
            rows: Vec::new(),
            history: HashMap::new(),
            last_ratio: HashMap::new(),
            sort: SortKey::Rate,
            filter: String::new(),
            editing: None,
            selected: None,
            header: Vec::new(),
            refreshes: 0,
            interval_ms: 1000,
            tracing: false,
            events: VecDeque::new(),
            events_received: 0,
            events_lost: 0,
        }
    }
}

impl TopState {
    /// A new snapshot: every socket with its verdict over the last interval and namespace name.
    pub fn update(&mut self, sockets: Vec<(SockFacts, Verdict, String)>) {
        self.refreshes += 1;
        let mut rows = Vec::with_capacity(sockets.len());
        let mut alive = std::collections::HashSet::new();
        for (f, v, ns) in sockets {
            let Some(cookie) = f.id.cookie else { continue };
            alive.insert(cookie);
            let change = match (f.scaling_ratio, self.last_ratio.get(&cookie)) {
                (Some(now), Some((before, change))) if now != *before => Some((*before, now)),
                (_, Some((_, change))) => *change,
                _ => None,
            };
            if let Some(r) = f.scaling_ratio {
                self.last_ratio.insert(cookie, (r, change));
            }
            let h = self.history.entry(cookie).or_default();
            keep(&mut h.window, v.window);
            keep(&mut h.rcv_ssthresh, f.rcv_ssthresh.map(u64::from));
            keep(&mut h.scaling_ratio, f.scaling_ratio.map(u64::from));
            keep(&mut h.rate, v.rate_bps);
            rows.push(Row {
                cookie,
                id: f.id.clone(),
                netns: ns,
                pid: f.pid,
                comm: f.comm.clone(),
                workload: f.workload.as_ref().map(|w| w.short()).filter(|w| w != "-"),
                rate_bps: v.rate_bps,
                rtt_us: v.rtt_us.or(f.srtt_us),
                window: v.window,
                ceiling_bps: v.ceiling_bps,
                scaling_ratio: f.scaling_ratio,
                ratio_change: change,
                window_clamp: f.window_clamp,
                rcv_ssthresh: f.rcv_ssthresh,
                sk_rcvbuf: f.sk_rcvbuf,
                limit: v.limit,
                side: v.side,
                setting: v.setting.clone(),
            });
        }
        // closed sockets leave
        self.history.retain(|c, _| alive.contains(c));
        self.last_ratio.retain(|c, _| alive.contains(c));
        self.rows = rows;
        if self
            .selected
            .is_none_or(|s| !self.visible().iter().any(|r| r.cookie == s))
        {
            self.selected = self.visible().first().map(|r| r.cookie);
        }
    }

    fn matches(&self, r: &Row) -> bool {
        let f = self.filter.trim();
        if f.is_empty() {
            return true;
        }
        if let Ok(n) = f.parse::<u32>() {
            return r.id.lport as u32 == n || r.id.rport as u32 == n || r.pid == Some(n);
        }
        r.comm.as_deref().is_some_and(|c| c.contains(f))
            || r.id.local().contains(f)
            || r.id.remote().contains(f)
            || r.netns.contains(f)
    }

    /// The rows shown: filtered, sorted (ties by cookie, so the order is stable).
    pub fn visible(&self) -> Vec<&Row> {
        let mut v: Vec<&Row> = self.rows.iter().filter(|r| self.matches(r)).collect();
        v.sort_by(|a, b| {
            let k = match self.sort {
                SortKey::Rate => b.rate_bps.unwrap_or(0).cmp(&a.rate_bps.unwrap_or(0)),
                SortKey::WindowLimited => b.window_use().total_cmp(&a.window_use()),
                SortKey::Ratio => a
                    .scaling_ratio
                    .unwrap_or(u8::MAX)
                    .cmp(&b.scaling_ratio.unwrap_or(u8::MAX)),
            };
            k.then(a.cookie.cmp(&b.cookie))
        });
        v
    }

    /// One of the tracer's events.
    pub fn push_event(&mut self, cookie: Option<u64>, line: String) {
        self.events_received += 1;
        self.events.push_back((cookie, line));
        if self.events.len() > EVENTS {
            self.events.pop_front();
        }
    }

    /// The newest `n` events of the selected socket (all sockets' when it has none), oldest
    /// first.
    pub fn recent_events(&self, n: usize) -> Vec<&str> {
        let sel = self.selected;
        let mine: Vec<&str> = self
            .events
            .iter()
            .filter(|(c, _)| sel.is_some() && *c == sel)
            .map(|(_, l)| l.as_str())
            .collect();
        let v = if mine.is_empty() {
            self.events.iter().map(|(_, l)| l.as_str()).collect()
        } else {
            mine
        };
        v[v.len().saturating_sub(n)..].to_vec()
    }

    pub fn selected_row(&self) -> Option<&Row> {
        let s = self.selected?;
        self.rows.iter().find(|r| r.cookie == s)
    }

    /// The other end of `r`'s connection, where it was read too (another namespace, or a
    /// peer's exporter): the row with the same four-tuple, reversed.
    pub fn other_end(&self, r: &Row) -> Option<&Row> {
        let want = tcpwin_model::id::other_end(&r.id);
        self.rows
            .iter()
            .find(|x| x.cookie != r.cookie && x.id.tuple() == want)
    }

    fn move_selection(&mut self, down: bool) {
        let v: Vec<u64> = self.visible().iter().map(|r| r.cookie).collect();
        if v.is_empty() {
            self.selected = None;
            return;
        }
        let i = self
            .selected
            .and_then(|s| v.iter().position(|c| *c == s))
            .unwrap_or(0);
        let j = if down {
            (i + 1).min(v.len() - 1)
        } else {
            i.saturating_sub(1)
        };
        self.selected = Some(v[j]);
    }

    /// One key: the state changes it makes, and whether to quit.
    pub fn key(&mut self, k: Key) -> Action {
        if k == Key::CtrlC {
            return Action::Quit;
        }
        if let Some(text) = self.editing.as_mut() {
            match k {
                Key::Enter => {
                    self.filter = self.editing.take().unwrap_or_default();
                    self.selected = self.visible().first().map(|r| r.cookie);
                }
                Key::Esc => self.editing = None,
                Key::Backspace => {
                    text.pop();
                }
                Key::Char(c) if !c.is_control() && text.len() < 64 => text.push(c),
                _ => {}
            }
            return Action::None;
        }
        match k {
            Key::Char('q') => return Action::Quit,
            Key::Char('s') => self.sort = self.sort.next(),
            Key::Char('r') => self.sort = SortKey::Rate,
            Key::Char('w') => self.sort = SortKey::WindowLimited,
            Key::Char('o') => self.sort = SortKey::Ratio,
            Key::Char('/') => self.editing = Some(self.filter.clone()),
            Key::Esc => self.filter.clear(),
            Key::Up | Key::Char('k') => self.move_selection(false),
            Key::Down | Key::Char('j') => self.move_selection(true),
            _ => {}
        }
        Action::None
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use tcpwin_model::verdict::{Limit, Side};

    pub fn verdict(rate: u64, ceiling: u64, limit: Limit) -> Verdict {
        Verdict {
            limit,
            side: Side::Receiving,
            basis: tcpwin_model::verdict::Basis::Interval,
            window_limited: Some(rate * 10 >= ceiling * 7),
            rate_bps: Some(rate),
            rtt_us: Some(20_000),
            window: Some(ceiling * 20_000 / 8_000_000),
            ceiling_bps: Some(ceiling),
            target_bps: None,
            bdp_bytes: None,
            rwnd_limited_share: None,
            setting: None,
            suggested: None,
            ..Verdict::unknown(Side::Receiving)
        }
    }

    pub fn facts(cookie: u64, lport: u16, ratio: u8, pid: u32) -> SockFacts {
        SockFacts {
            id: SocketId {
                cookie: Some(cookie),
                netns: None,
                laddr: Some("10.0.0.2".parse().unwrap()),
                lport,
                raddr: Some("10.0.0.1".parse().unwrap()),
                rport: 40000 + lport,
            },
            scaling_ratio: Some(ratio),
            rcv_ssthresh: Some(100_000),
            window_clamp: Some(200_000),
            pid: Some(pid),
            comm: Some(format!("app{pid}")),
            ..Default::default()
        }
    }

    fn snapshot(ratio_a: u8) -> Vec<(SockFacts, Verdict, String)> {
        vec![
            (
                facts(1, 5201, ratio_a, 10),
                verdict(900_000_000, 1_000_000_000, Limit::AutotuneMax),
                "ns".into(),
            ),
            (
                facts(2, 443, 229, 20),
                verdict(10_000_000, 1_000_000_000, Limit::NotWindowLimited),
                "ns".into(),
            ),
            (
                facts(3, 8080, 160, 30),
                verdict(50_000_000, 60_000_000, Limit::LowRatio),
                "ns".into(),
            ),
        ]
    }

    #[test]
    fn sorts_filter_and_selection_follow_keys() {
        let mut s = TopState::default();
        s.update(snapshot(128));
        let order = |s: &TopState| s.visible().iter().map(|r| r.cookie).collect::<Vec<_>>();
        assert_eq!(order(&s), vec![1, 3, 2], "by rate");
        assert_eq!(s.selected, Some(1));
        s.key(Key::Char('w'));
        assert_eq!(order(&s), vec![1, 3, 2], "by window use: 0.9, 0.83, 0.01");
        s.key(Key::Char('o'));
        assert_eq!(
            order(&s),
            vec![1, 3, 2],
            "by ratio, lowest first: 128, 160, 229"
        );
        s.key(Key::Down);
        assert_eq!(s.selected, Some(3));
        // filter by port, typed after /
        for k in [
            Key::Char('/'),
            Key::Char('4'),
            Key::Char('4'),
            Key::Char('3'),
            Key::Enter,
        ] {
            assert_eq!(s.key(k), Action::None);
        }
        assert_eq!(order(&s), vec![2]);
        assert_eq!(s.selected, Some(2), "the selection moves into the filter");
        // by pid, and by comm text
        s.filter = "30".into();
        assert_eq!(order(&s), vec![3]);
        s.filter = "app1".into();
        assert_eq!(order(&s), vec![1]);
        s.key(Key::Esc);
        assert_eq!(order(&s).len(), 3);
        // q quits, but not while typing a filter
        s.key(Key::Char('/'));
        assert_eq!(s.key(Key::Char('q')), Action::None);
        assert_eq!(s.editing.as_deref(), Some("q"));
        s.key(Key::Esc);
        assert_eq!(s.key(Key::Char('q')), Action::Quit);
        assert_eq!(s.key(Key::CtrlC), Action::Quit);
    }

    /// A row names its owner's workload where it has one (a container's, a pod's, a unit's).
    #[test]
    fn rows_name_the_workload() {
        let mut s = TopState::default();
        let mut snap = snapshot(128);
        snap[0].0.workload = tcpwin_model::workload::from_cgroup(
            "0::/machine.slice/libpod-f2557d61c3a14e1f8e6b0a9d7c5b3e1f2a4c6e8b0d1f3a5c7e9b1d3f5a7c9e1b.scope\n",
        )
        .map(Box::new);
        s.update(snap);
        let by_port = |p: u16| s.visible().into_iter().find(|r| r.id.lport == p).unwrap();
        assert_eq!(
            by_port(5201).workload.as_deref(),
            Some("podman:f2557d61c3a1")
        );
        assert_eq!(by_port(443).workload, None);
    }

    #[test]
    fn events_follow_the_selection() {
        let mut s = TopState::default();
        s.update(snapshot(128));
        s.push_event(Some(1), "a1".into());
        s.push_event(Some(2), "b1".into());
        s.push_event(Some(1), "a2".into());
        assert_eq!(
            s.recent_events(5),
            vec!["a1", "a2"],
            "the selected socket's"
        );
        s.selected = Some(3);
        assert_eq!(
            s.recent_events(2),
            vec!["b1", "a2"],
            "none for it: everyone's, newest"
        );
        for i in 0..EVENTS + 3 {
            s.push_event(None, i.to_string());
        }
        assert_eq!(s.events.len(), EVENTS);
        assert_eq!(s.events_received, EVENTS as u64 + 6);
    }

    #[test]
    fn history_and_ratio_changes_are_kept_per_socket() {
        let mut s = TopState::default();
        s.update(snapshot(128));
        s.update(snapshot(229));
        s.update(snapshot(229));
        let r = s.rows.iter().find(|r| r.cookie == 1).unwrap();
        assert_eq!(
            r.ratio_change,
            Some((128, 229)),
            "the last change stays shown"
        );
        assert_eq!(
            s.history[&1].scaling_ratio,
            VecDeque::from(vec![128, 229, 229])
        );
        assert_eq!(s.history[&1].rate.len(), 3);
        for _ in 0..HISTORY + 5 {
            s.update(snapshot(229));
        }
        assert_eq!(s.history[&1].scaling_ratio.len(), HISTORY);
        // a socket that closed leaves its history
        let mut one = snapshot(229);
        one.truncate(1);
        s.update(one);
        assert!(!s.history.contains_key(&2));
    }
}
