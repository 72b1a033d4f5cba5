//! `tcpwin-trace top` drawn with ratatui: the host's check summary, one row per socket, the
//! selected socket's sparklines, a key line. Narrow terminals (under 120 columns, down to 80)
//! move the owner, window_clamp, rcv_ssthresh and sk_rcvbuf from the table into the detail pane;
//! the socket cell leads with the ports, so a cut falls on the address.
use ratatui::{
    layout::{Constraint, Layout, Rect},
    style::{Modifier, Style},
    text::Line,
    widgets::{Block, Paragraph, Row as TRow, Sparkline, Table, TableState},
    Frame,
};
use tcpwin_model::{
    check::{CheckReport, Era},
    verdict::Side,
};

use self::state::{Row, TopState};

pub mod state;

/// The smallest terminal `top` draws in.
pub const MIN_SIZE: (u16, u16) = (80, 24);
const WIDE: u16 = 120;

/// 1.1M, 640K, 512
pub fn short_bytes(v: u64) -> String {
    match v {
        v if v >= 1 << 30 => format!("{:.1}G", v as f64 / (1u64 << 30) as f64),
        v if v >= 10 << 20 => format!("{}M", v >> 20),
        v if v >= 1 << 20 => format!("{:.1}M", v as f64 / (1u64 << 20) as f64),
        v if v >= 1 << 10 => format!("{}K", v >> 10),
        v => v.to_string(),
    }
}

/// 893M, 1.2G (bit/s)
pub fn short_rate(v: u64) -> String {
    match v {
        v if v >= 1_000_000_000 => format!("{:.1}G", v as f64 / 1e9),
        v if v >= 1_000_000 => format!("{}M", v / 1_000_000),
        v if v >= 1_000 => format!("{}k", v / 1_000),
        v => v.to_string(),
    }
}

pub fn short_rtt(us: u32) -> String {
    if us >= 10_000 {
        format!("{}ms", us / 1000)
    } else if us >= 1000 {
        format!("{:.1}ms", us as f64 / 1000.0)
    } else {
        format!("{us}us")
    }
}

fn dash<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| "-".into())
}

fn ratio_cell(r: &Row) -> String {
    match (r.scaling_ratio, r.ratio_change) {
        (Some(now), Some((from, _))) => format!("{now}<{from}"),
        (Some(now), None) => now.to_string(),
        _ => "-".into(),
    }
}

/// The ports first, with the direction data flows (what tells a transfer from its control
/// connection), then the peer's address (IPv4-mapped addresses as IPv4): a narrow cell cuts the
/// address, never the ports.
fn socket_cell(r: &Row) -> String {
    let dir = Side::arrow(Some(r.side));
    format!(
        "{}{dir}{} {}",
        r.id.lport,
        r.id.rport,
        r.id.raddr
            .map(|a| a.to_canonical().to_string())
            .unwrap_or_else(|| "?".into())
    )
}

/// The host's check, as header lines: the kernel's era and the caps, then the interfaces' GRO
/// and MTU; short enough for 80 columns.
pub fn header_lines(r: &CheckReport) -> Vec<String> {
    let l = &r.limits;
    let mut v = vec![format!(
        "kernel {} ({}) tcp_rmem[2] {} rmem_max {} wscale {}",
        r.kernel.split('-').next().unwrap_or(&r.kernel),
        match r.era {
            Era::MeasuredRatio => "measured ratio",
            Era::AdvWinScale => "tcp_adv_win_scale",
        },
        dash(l.tcp_rmem.map(|t| t[2]), short_bytes),
        dash(l.rmem_max, short_bytes),
        match l.tcp_window_scaling {
            Some(true) => "on",
            Some(false) => "OFF",
            None => "?",
        }
    )];
    let ifs: Vec<String> = r
        .interfaces
        .iter()
        .map(|i| {
            format!(
                "{} gro {} mtu {}",
                i.name,
                match i.gro {
                    Some(true) => "on",
                    Some(false) => "off",
                    None => "?",
                },
                dash(i.mtu, |m| m.to_string())
            )
        })
        .collect();
    v.push(ifs.join(", "));
    v
}

fn owner_cell(r: &Row) -> String {
    let who = match (r.pid, &r.comm) {
        (Some(p), Some(c)) => format!("{p}/{c}"),
        (Some(p), None) => p.to_string(),
        _ => "-".into(),
    };
    match &r.workload {
        Some(w) => format!("{who} {w}"),
        None => who,
    }
}

pub fn draw(f: &mut Frame, s: &TopState) {
    let area = f.area();
    let header_h = (s.header.len() as u16 + 1).min(4);
    let events_h = if s.tracing { 5 } else { 0 };
    let [head, table, events, detail, keys] = Layout::vertical([
        Constraint::Length(header_h),
        Constraint::Min(5),
        Constraint::Length(events_h),
        Constraint::Length(7),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_header(f, head, s);
    draw_table(f, table, s, area.width >= WIDE);
    if s.tracing {
        let lines: Vec<Line> = s
            .recent_events(events_h as usize - 1)
            .into_iter()
            .map(Line::from)
            .collect();
        f.render_widget(
            Paragraph::new(lines).block(Block::new().title(format!(
                "events ({} received, {} lost)",
                s.events_received, s.events_lost
            ))),
            events,
        );
    }
    draw_detail(f, detail, s, area.width >= WIDE);
    let keys_text = match &s.editing {
        Some(t) => format!("filter (port, pid or text; Enter applies, Esc cancels): {t}_"),
        None => format!(
            "q quit  up/down select  s sort ({})  / filter{}",
            s.sort.name(),
            if s.filter.is_empty() {
                String::new()
            } else {
                format!(" [{}] Esc clears", s.filter)
            }
        ),
    };
    f.render_widget(
        Paragraph::new(keys_text).style(Style::new().add_modifier(Modifier::REVERSED)),
        keys,
    );
}

fn draw_header(f: &mut Frame, area: Rect, s: &TopState) {
    let mut lines = vec![Line::from(format!(
        "tcpwin-trace top: {} sockets, {} shown, every {:.1} s",
        s.rows.len(),
        s.visible().len(),
        s.interval_ms as f64 / 1000.0
    ))];
    lines.extend(s.header.iter().map(|h| Line::from(h.as_str())));
    f.render_widget(Paragraph::new(lines), area);
}

fn draw_table(f: &mut Frame, area: Rect, s: &TopState, wide: bool) {
    let visible = s.visible();
    // narrow: the owner moves to the detail pane, so the limit is never cut
    let mut head = vec!["socket"];
    let mut widths = vec![Constraint::Length(if wide { 34 } else { 24 })];
    if wide {
        // with containers on the host, the owner names its workload too
        let workloads = visible.iter().any(|r| r.workload.is_some());
        head.push(if workloads {
            "pid/comm workload"
        } else {
            "pid/comm"
        });
        // as wide as the longest owner shown (a pod's container names both), 40 to 64
        let longest = visible
            .iter()
            .map(|r| owner_cell(r).chars().count())
            .max()
            .unwrap_or(0);
        widths.push(Constraint::Length(if workloads {
            longest.clamp(40, 64) as u16
        } else {
            12
        }));
    }
    head.extend(["rate", "rtt", "wnd", "ceil", "ratio"]);
    widths.extend([
        Constraint::Length(6),
        Constraint::Length(5),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(7),
    ]);
    if wide {
        head.extend(["clamp", "ssthr", "rcvbuf"]);
        widths.extend([
            Constraint::Length(6),
            Constraint::Length(6),
            Constraint::Length(6),
        ]);
    }
    head.push("limit");
    widths.push(Constraint::Fill(1));
    let rows = visible.iter().map(|r| {
        let mut c = vec![socket_cell(r)];
        if wide {
            c.push(owner_cell(r));
        }
        c.extend([
            dash(r.rate_bps, short_rate),
            dash(r.rtt_us, short_rtt),
            dash(r.window, short_bytes),
            dash(r.ceiling_bps, short_rate),
            ratio_cell(r),
        ]);
        if wide {
            c.push(dash(r.window_clamp, |v| short_bytes(v as u64)));
            c.push(dash(r.rcv_ssthresh, |v| short_bytes(v as u64)));
            c.push(dash(r.sk_rcvbuf, |v| short_bytes(v as u64)));
        }
        c.push(r.limit.id().to_string());
        TRow::new(c)
    });
    let table = Table::new(rows, widths)
        .header(TRow::new(head).style(Style::new().add_modifier(Modifier::BOLD)))
        .column_spacing(1)
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED));
    let mut state = TableState::default().with_selected(
        s.selected
            .and_then(|c| visible.iter().position(|r| r.cookie == c)),
    );
    f.render_stateful_widget(table, area, &mut state);
}

fn draw_detail(f: &mut Frame, area: Rect, s: &TopState, wide: bool) {
    let Some(r) = s.selected_row() else {
        f.render_widget(
            Paragraph::new("no socket selected").block(Block::bordered().title("detail")),
            area,
        );
        return;
    };
    let title = format!(
        "{} [{}] {}",
        r.id.flow(Side::arrow(Some(r.side))),
        r.netns,
        r.limit.id()
    );
    let mut first = r.setting.clone().unwrap_or_default();
    if !wide {
        first = format!(
            "{} clamp {} ssthresh {} rcvbuf {} | {first}",
            owner_cell(r),
            dash(r.window_clamp, |v| short_bytes(v as u64)),
            dash(r.rcv_ssthresh, |v| short_bytes(v as u64)),
            dash(r.sk_rcvbuf, |v| short_bytes(v as u64))
        );
    }
    let block = Block::bordered().title(title);
    let inner = block.inner(area);
    f.render_widget(block, area);
    // the other end of the connection, where it was read too (--netns all, --peer): its facts
    let other = s.other_end(r).map(|o| {
        format!(
            "other end [{}] {}: clamp {} ssthresh {} rcvbuf {} rate {}",
            o.netns,
            Side::arrow(Some(o.side)),
            dash(o.window_clamp, |v| short_bytes(v as u64)),
            dash(o.rcv_ssthresh, |v| short_bytes(v as u64)),
            dash(o.sk_rcvbuf, |v| short_bytes(v as u64)),
            dash(o.rate_bps, short_rate)
        )
    });
    let [setting, peer, sparks] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(other.is_some() as u16),
        Constraint::Min(1),
    ])
    .areas(inner);
    f.render_widget(Paragraph::new(first), setting);
    if let Some(o) = other {
        f.render_widget(Paragraph::new(o), peer);
    }
    let h = s.history.get(&r.cookie).cloned().unwrap_or_default();
    let cols = Layout::horizontal([Constraint::Ratio(1, 4); 4]).split(sparks);
    let last = |q: &std::collections::VecDeque<u64>, fmt: fn(u64) -> String| {
        q.back().map(|v| fmt(*v)).unwrap_or_else(|| "-".into())
    };
    for (i, (name, q, fmt)) in [
        ("window", &h.window, short_bytes as fn(u64) -> String),
        ("ssthresh", &h.rcv_ssthresh, short_bytes),
        ("ratio", &h.scaling_ratio, |v: u64| v.to_string()),
        ("rate", &h.rate, short_rate),
    ]
    .into_iter()
    .enumerate()
    {
        let data: Vec<u64> = q.iter().copied().collect();
        // the newest points, as many as fit
        let w = cols[i].width as usize;
        let data = &data[data.len().saturating_sub(w)..];
        f.render_widget(
            Sparkline::default()
                .block(Block::new().title(format!("{name} {}", last(q, fmt))))
                .data(data),
            cols[i],
        );
    }
}

#[cfg(test)]
mod tests {
    use ratatui::{backend::TestBackend, Terminal};
    use tcpwin_model::{
        facts::SockFacts,
        verdict::{Limit, Side, Verdict},
    };

    use super::*;

    fn sample(
        cookie: u64,
        lport: u16,
        ratio: u8,
        rate: u64,
        limit: Limit,
    ) -> (SockFacts, Verdict, String) {
        (
            SockFacts {
                id: tcpwin_model::schema::SocketId {
                    cookie: Some(cookie),
                    netns: None,
                    laddr: Some("10.0.0.2".parse().unwrap()),
                    lport,
                    raddr: Some("10.0.0.1".parse().unwrap()),
                    rport: 40000,
                },
                scaling_ratio: Some(ratio),
                window_clamp: Some(663_552),
                rcv_ssthresh: Some(524_288),
                sk_rcvbuf: Some(1 << 20),
                pid: Some(4242),
                comm: Some("iperf3".into()),
                ..Default::default()
            },
            Verdict {
                limit,
                side: Side::Receiving,
                basis: tcpwin_model::verdict::Basis::Interval,
                window_limited: Some(true),
                rate_bps: Some(rate),
                rtt_us: Some(18_000),
                window: Some(663_552),
                ceiling_bps: Some(294_912_000),
                target_bps: None,
                bdp_bytes: None,
                rwnd_limited_share: None,
                setting: Some("tcp_rmem max 1048576 caps the buffer".into()),
                suggested: None,
                ..Verdict::unknown(Side::Receiving)
            },
            "lab".into(),
        )
    }

    fn render(s: &TopState, w: u16, h: u16) -> Vec<String> {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        t.draw(|f| draw(f, s)).unwrap();
        let buf = t.backend().buffer().clone();
        (0..h)
            .map(|y| {
                (0..w)
                    .map(|x| buf[(x, y)].symbol().to_string())
                    .collect::<String>()
            })
            .collect()
    }

    /// With both ends read (`--netns all`, `--peer`), the detail pane of one shows the other's
    /// facts on a line of its own.
    #[test]
    fn the_detail_shows_the_other_end() {
        let mut s = TopState::default();
        let (rf, rv, _) = sample(1, 5201, 229, 280_000_000, Limit::AutotuneMax);
        let mut sf = rf.clone();
        sf.id = tcpwin_model::schema::SocketId {
            cookie: Some(9),
            netns: None,
            laddr: rf.id.raddr,
            lport: rf.id.rport,
            raddr: rf.id.laddr,
            rport: rf.id.lport,
        };
        sf.sk_rcvbuf = Some(131_072);
        let sv = Verdict {
            side: Side::Sending,
            ..rv.clone()
        };
        s.update(vec![(rf, rv, "b".into()), (sf, sv, "peer:10.0.0.1".into())]);
        s.selected = Some(1);
        let lines = render(&s, 120, 30);
        let other = lines
            .iter()
            .find(|l| l.contains("other end [peer:10.0.0.1] ->"))
            .unwrap_or_else(|| panic!("{lines:#?}"));
        assert!(other.contains("rcvbuf 128K"), "{other}");
        s.selected = Some(9);
        let lines = render(&s, 120, 30);
        assert!(
            lines.iter().any(|l| l.contains("other end [b] <-")),
            "{lines:#?}"
        );
    }

    #[test]
    fn rows_detail_and_keys_at_80x24() {
        let mut s = TopState::default();
        s.header = vec!["kernel 6.18 (measured scaling_ratio)".into()];
        s.update(vec![
            sample(1, 5201, 128, 280_000_000, Limit::AutotuneMax),
            sample(2, 443, 229, 5_000_000, Limit::NotWindowLimited),
        ]);
        s.update(vec![
            sample(1, 5201, 158, 285_000_000, Limit::AutotuneMax),
            sample(2, 443, 229, 5_000_000, Limit::NotWindowLimited),
        ]);
        let lines = render(&s, 80, 24);
        assert!(
            lines[0].starts_with("tcpwin-trace top: 2 sockets, 2 shown"),
            "{lines:#?}"
        );
        assert!(lines[1].starts_with("kernel 6.18"), "{lines:#?}");
        let header = lines.iter().position(|l| l.starts_with("socket")).unwrap();
        // by rate: the 285 Mbit/s socket first, its ratio's last change shown, its verdict
        let first = &lines[header + 1];
        // the ports lead, with the direction; the verdict is never cut at 80 columns
        assert!(first.starts_with("5201<-40000 10.0.0.1"), "{first}");
        for cell in ["285M", "18ms", "648K", "294M", "158<128", "autotune-max"] {
            assert!(first.contains(cell), "{cell} not in {first}");
        }
        assert!(lines[header + 2].starts_with("443<-40000"), "{lines:#?}");
        assert!(
            lines[header + 2].contains("not-window-limited"),
            "{}",
            lines[header + 2]
        );
        assert!(lines[0].contains("every 1.0 s"), "{}", lines[0]);
        // narrow: clamp, ssthresh and rcvbuf in the detail pane, with the selected socket
        let d = lines
            .iter()
            .position(|l| l.contains("10.0.0.2:5201 <- 10.0.0.1:40000"))
            .unwrap();
        assert!(
            lines[d + 1]
                .contains("4242/iperf3 clamp 648K ssthresh 512K rcvbuf 1.0M | tcp_rmem max"),
            "{}",
            lines[d + 1]
        );
        assert!(
            lines
                .iter()
                .any(|l| l.contains("ratio 158") && l.contains("rate 285M")),
            "{lines:#?}"
        );
        assert!(lines[23].starts_with("q quit"), "{}", lines[23]);
        // wide: the columns are in the table
        let wide = render(&s, 140, 30);
        let h = wide.iter().position(|l| l.starts_with("socket")).unwrap();
        assert!(
            wide[h].contains("clamp") && wide[h].contains("rcvbuf"),
            "{}",
            wide[h]
        );
        assert!(wide[h + 1].contains("1.0M"), "{}", wide[h + 1]);
        assert!(wide[h + 1].contains("4242/iperf3"), "{}", wide[h + 1]);
        // typing a filter shows on the key line; applying it leaves one row
        for k in ['/', '4', '4', '3'] {
            s.key(state::Key::Char(k));
        }
        assert!(render(&s, 80, 24)[23].contains("filter (port, pid or text"));
        s.key(state::Key::Enter);
        let f = render(&s, 80, 24);
        assert!(f[0].contains("2 sockets, 1 shown"), "{}", f[0]);
        assert!(f[23].contains("[443]"), "{}", f[23]);
    }

    /// The header fits 80 columns with every cap's value; an IPv4-mapped peer reads as IPv4.
    #[test]
    fn header_and_cells_fit_80_columns() {
        let r = CheckReport {
            kernel: "6.18.44-fc-v657".into(),
            era: Era::MeasuredRatio,
            ratio: 128,
            ratio_source: String::new(),
            limits: tcpwin_model::facts::HostLimits {
                tcp_rmem: Some([4096, 131072, 33554432]),
                rmem_max: Some(4194304),
                tcp_window_scaling: Some(true),
                ..Default::default()
            },
            interfaces: Vec::new(),
            notes: Vec::new(),
            bdp: None,
            bdp_bytes: None,
            fits: Vec::new(),
        };
        let h = header_lines(&r);
        assert!(h[0].len() <= 80, "{}", h[0]);
        assert!(
            h[0].contains("rmem_max 4.0M") && h[0].contains("tcp_rmem[2] 32M"),
            "{}",
            h[0]
        );
        let mut s = TopState::default();
        let mut one = sample(1, 5202, 229, 1_000_000, Limit::NotWindowLimited);
        one.0.id.raddr = Some("::ffff:10.99.3.17".parse().unwrap());
        s.update(vec![one]);
        let lines = render(&s, 140, 30);
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("5202<-40000 10.99.3.17")),
            "{lines:#?}"
        );
    }

    #[test]
    fn short_units() {
        assert_eq!(short_bytes(663_552), "648K");
        assert_eq!(short_bytes(1 << 20), "1.0M");
        assert_eq!(short_bytes(64 << 20), "64M");
        assert_eq!(short_rate(1_200_000_000), "1.2G");
        assert_eq!(short_rtt(620), "620us");
        assert_eq!(short_rtt(18_000), "18ms");
    }

    /// One direction rule: the row and the detail pane draw a sending socket with `->` alike,
    /// as `ss` and the trace do.
    #[test]
    fn the_row_and_the_detail_agree_on_the_direction() {
        let mut s = TopState::default();
        let mut send = sample(1, 5201, 229, 280_000_000, Limit::Sndbuf);
        send.1.side = Side::Sending;
        s.update(vec![send.clone()]);
        s.update(vec![send]);
        let lines = render(&s, 80, 24);
        let header = lines.iter().position(|l| l.starts_with("socket")).unwrap();
        assert!(lines[header + 1].starts_with("5201->40000"), "{lines:#?}");
        assert!(
            lines
                .iter()
                .any(|l| l.contains("10.0.0.2:5201 -> 10.0.0.1:40000")),
            "{lines:#?}"
        );
        assert!(!lines.iter().any(|l| l.contains(" <- ")), "{lines:#?}");
    }
}
