//! What the live trace shows: the kinds of lines asked for (`--events`), and by default the
//! `rcv_ssthresh` steps folded into one line per socket (a transfer makes hundreds of them in its
//! first second; they are each in `--json`). Pure view state: records in, what to print out.
use std::collections::{BTreeMap, HashMap};

use tcpwin_common::flag;

use tcpwin_model::{decode::Record, kind::EventKind, timeline::Last, verdict::Side};

/// The names `--events` accepts: the event kinds and `verdict`.
pub const EVENT_NAMES: [&str; 6] = ["init", "ratio", "space", "seen", "close", "verdict"];
/// What a person watches, when `--events` is not given.
pub const DEFAULT_EVENTS: [&str; 5] = ["init", "ratio", "space", "close", "verdict"];

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shown {
    names: Vec<String>,
    /// fold rcv_ssthresh-only steps (the default; `--events` shows exactly what it names)
    pub fold: bool,
}

impl Shown {
    /// From `--events` (None: every kind for `--json`, a program's input; for the text, the
    /// default set, folding).
    pub fn new(events: Option<&[String]>, json: bool) -> Shown {
        match events {
            Some(e) => Shown {
                names: e.to_vec(),
                fold: false,
            },
            None if json => Shown {
                names: EVENT_NAMES.iter().map(|s| s.to_string()).collect(),
                fold: false,
            },
            None => Shown {
                names: DEFAULT_EVENTS.iter().map(|s| s.to_string()).collect(),
                fold: true,
            },
        }
    }

    pub fn event(&self, k: EventKind) -> bool {
        self.names.iter().any(|n| n == k.name())
    }

    pub fn verdicts(&self) -> bool {
        self.names.iter().any(|n| n == "verdict")
    }

    /// A `space` event that moved only `rcv_ssthresh` / `rcvq_space`, to fold.
    pub fn folds(&self, r: &Record) -> bool {
        let e = &r.ev;
        self.fold
            && r.kind == EventKind::Space
            && r.has(flag::PREV)
            && e.window_clamp == e.prev_window_clamp
            && e.sk_rcvbuf == e.prev_sk_rcvbuf
            && e.scaling_ratio == e.prev_scaling_ratio
    }
}

/// A change as the text reports it: from the values the trace last reported of the socket
/// (`before`, what the timeline held before `r`), not from the ones the kernel side last saw.
/// Two observers report one socket, the hooks and the iterator's readings: a change the kernel
/// made unhooked is read by the iterator (and reported from it), and the next hook that fires
/// reports the same change again from the values it had seen before it. Told as steps from what
/// was printed, each change is printed once, whichever observer came first. None: the record
/// changes nothing already reported (a `space` or `ratio` record only; the others say where the
/// socket stands, and are always shown).
pub fn as_step(r: &Record, before: Option<&Last>) -> Option<Record> {
    let Some(b) = before else {
        return Some(r.clone());
    };
    if !matches!(r.kind, EventKind::Space | EventKind::Ratio) || !r.has(flag::PREV) {
        return Some(r.clone());
    }
    let mut s = r.clone();
    let e = &mut s.ev;
    e.prev_window_clamp = b.window_clamp;
    e.prev_rcv_ssthresh = b.rcv_ssthresh;
    e.prev_sk_rcvbuf = b.sk_rcvbuf;
    e.prev_rcvq_space = b.rcvq_space;
    if let Some(ratio) = b.scaling_ratio {
        e.prev_scaling_ratio = ratio;
    }
    let moved = e.window_clamp != e.prev_window_clamp
        || e.rcv_ssthresh != e.prev_rcv_ssthresh
        || e.sk_rcvbuf != e.prev_sk_rcvbuf
        || e.rcvq_space != e.prev_rcvq_space
        || s.scaling_ratio() != b.scaling_ratio;
    moved.then_some(s)
}

/// A socket's folded steps: the first and the last.
#[derive(Clone, Debug, PartialEq)]
pub struct Fold {
    pub first: Record,
    pub last: Record,
    pub steps: u64,
}

impl Fold {
    /// `rcv_ssthresh` from before the first step to after the last.
    pub fn range(&self) -> (u32, u32) {
        (self.first.ev.prev_rcv_ssthresh, self.last.ev.rcv_ssthresh)
    }
}

/// Folded steps per socket, until printed.
#[derive(Debug, Default)]
pub struct Folds {
    per: BTreeMap<u64, Fold>,
}

impl Folds {
    /// A folded step; one that moved only `rcvq_space` (nothing the text shows) is left out.
    pub fn add(&mut self, r: &Record) {
        if r.ev.rcv_ssthresh == r.ev.prev_rcv_ssthresh {
            return;
        }
        let key = r.cookie().unwrap_or(0);
        match self.per.get_mut(&key) {
            Some(f) => {
                f.last = r.clone();
                f.steps += 1;
            }
            None => {
                self.per.insert(
                    key,
                    Fold {
                        first: r.clone(),
                        last: r.clone(),
                        steps: 1,
                    },
                );
            }
        }
    }

    /// The socket's folded steps, to print before its next line (none when they ended where
    /// they began: nothing to say).
    pub fn take(&mut self, cookie: Option<u64>) -> Option<Fold> {
        self.per
            .remove(&cookie.unwrap_or(0))
            .filter(|f| f.range().0 != f.range().1)
    }

    /// Every socket's, in time order of their last step (those that moved).
    pub fn take_all(&mut self) -> Vec<Fold> {
        let mut v: Vec<Fold> = std::mem::take(&mut self.per)
            .into_values()
            .filter(|f| f.range().0 != f.range().1)
            .collect();
        v.sort_by_key(|f| f.last.ev.ts_ns);
        v
    }
}

/// One line-maker of a verdict tick, by its index in its own list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// a record a hook sent
    Record(usize),
    /// a socket read by the iterator (the changes no hook reported)
    Reading(usize),
    /// a verdict made of a reading
    Verdict(usize),
}

/// A verdict tick's lines in time order: the records the hooks sent (`records`, their times in
/// the ring's order, which they keep), the readings and the verdicts, each by its time. The
/// namespaces are read one after another (milliseconds apart on a busy machine), so a hook's
/// record can fall between two readings, and a verdict of the first before it. At one time, a
/// record comes before a reading (the reading finds what the hook reported) and a reading before
/// the verdict made of it.
pub fn in_time_order(records: &[u64], readings: &[u64], verdicts: &[u64]) -> Vec<Next> {
    let by_time = |ts: &[u64]| {
        let mut i: Vec<usize> = (0..ts.len()).collect();
        i.sort_by_key(|&k| ts[k]);
        i
    };
    let (readings_i, verdicts_i) = (by_time(readings), by_time(verdicts));
    let (mut r, mut g, mut v) = (0, 0, 0);
    let mut out = Vec::with_capacity(records.len() + readings.len() + verdicts.len());
    loop {
        let heads = [
            records.get(r).map(|&t| (t, 0)),
            readings_i.get(g).map(|&k| (readings[k], 1)),
            verdicts_i.get(v).map(|&k| (verdicts[k], 2)),
        ];
        let Some((_, which)) = heads.iter().flatten().min().copied() else {
            return out;
        };
        match which {
            0 => {
                out.push(Next::Record(r));
                r += 1;
            }
            1 => {
                out.push(Next::Reading(readings_i[g]));
                g += 1;
            }
            _ => {
                out.push(Next::Verdict(verdicts_i[v]));
                v += 1;
            }
        }
    }
}

/// Which way data flows on each socket, for the text's arrow (`<-`, `->`, `<>` unknown). A verdict
/// that says receiving or sending decides; before the first one, a socket whose scaling_ratio moved
/// has received data (the ratio is measured from arriving packets); a later idle verdict keeps
/// the way data last flowed, so a socket's lines do not switch from `<-` to `<>` when its transfer
/// ends. Kept for live sockets: a `close` forgets it.
#[derive(Debug, Default)]
pub struct Directions {
    known: HashMap<u64, Side>,
}

impl Directions {
    /// Notes what the record and the socket's verdict (`judged`, its last one) tell, and the side
    /// to draw for this record.
    pub fn side(&mut self, r: &Record, judged: Option<Side>) -> Option<Side> {
        let Some(c) = r.cookie() else {
            return judged;
        };
        match judged {
            Some(s @ (Side::Receiving | Side::Sending)) => {
                self.known.insert(c, s);
            }
            _ if r.kind == EventKind::Ratio => {
                self.known.entry(c).or_insert(Side::Receiving);
            }
            _ => {}
        }
        let side = self.of(Some(c), judged);
        if r.kind == EventKind::Close {
            self.known.remove(&c);
        }
        side
    }

    /// The side to draw for a socket's line that is not one record (its folded steps).
    pub fn of(&self, cookie: Option<u64>, judged: Option<Side>) -> Option<Side> {
        match judged {
            Some(Side::Receiving | Side::Sending) => judged,
            _ => cookie.and_then(|c| self.known.get(&c).copied()).or(judged),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpwin_common::{kind, Event};

    fn space(ts: u64, ssthresh: (u32, u32), clamp: (u32, u32)) -> Record {
        Record {
            ev: Event {
                ts_ns: ts,
                kind: kind::SPACE,
                cookie: 7,
                flags: flag::PREV | flag::COOKIE,
                prev_rcv_ssthresh: ssthresh.0,
                rcv_ssthresh: ssthresh.1,
                prev_window_clamp: clamp.0,
                window_clamp: clamp.1,
                ..Event::default()
            },
            kind: EventKind::Space,
            laddr: "10.0.0.2".parse().unwrap(),
            raddr: "10.0.0.1".parse().unwrap(),
            comm: None,
        }
    }

    #[test]
    fn ssthresh_steps_fold_by_default_and_show_when_asked() {
        assert!(
            Shown::new(None, true).event(EventKind::Seen),
            "--json: every kind"
        );
        let d = Shown::new(None, false);
        assert!(d.event(EventKind::Init) && d.verdicts() && !d.event(EventKind::Seen));
        let step = space(1, (100, 200), (500, 500));
        let clamp = space(2, (200, 300), (500, 800));
        assert!(d.folds(&step));
        assert!(!d.folds(&clamp), "a clamp change is shown");
        let asked = Shown::new(Some(&["space".to_string()]), false);
        assert!(!asked.folds(&step) && !asked.verdicts() && asked.event(EventKind::Space));
        let mut f = Folds::default();
        f.add(&step);
        f.add(&space(3, (200, 900), (500, 500)));
        let fold = f.take(Some(7)).unwrap();
        assert_eq!((fold.steps, fold.range()), (2, (100, 900)));
        assert!(f.take_all().is_empty());
        // a step that moved nothing the text shows (rcvq_space only), and steps that end
        // where they began: no line that changes nothing
        f.add(&space(4, (900, 900), (500, 500)));
        assert!(f.take(Some(7)).is_none());
        f.add(&space(5, (900, 1000), (500, 500)));
        f.add(&space(6, (1000, 900), (500, 500)));
        assert!(f.take_all().is_empty());
    }

    /// The sequence a loaded run printed twice (`rcv_ssthresh=2655097->2694559 (3 steps ...)`
    /// then `2682115->2694559 (1 step ...)`): the kernel moved rcv_ssthresh unhooked, the
    /// iterator's reading reported it, and the next hook reported it again from the value it had
    /// seen. Replayed through the timeline, in either order, each step is printed once.
    #[test]
    fn a_step_two_observers_report_is_printed_once() {
        use tcpwin_model::timeline::Sockets;
        let mut catch_up = space(909_457, (2_682_115, 2_694_559), (3_000_000, 3_000_000));
        catch_up.ev.hook = tcpwin_common::hook::ITER_CATCH_UP;
        let hooked = [
            space(116_252, (2_655_097, 2_670_000), (3_000_000, 3_000_000)),
            space(500_000, (2_670_000, 2_682_115), (3_000_000, 3_000_000)),
        ];
        let late_hook = space(915_770, (2_682_115, 2_694_559), (3_000_000, 3_000_000));
        let replay = |order: &[Record]| {
            let mut socks = Sockets::default();
            let mut folds = Folds::default();
            let shown = Shown::new(None, false);
            let mut printed = 0;
            for r in order {
                let mut r = r.clone();
                let before = socks.update(&mut r);
                if let Some(step) = as_step(&r, before.as_ref()) {
                    assert!(shown.folds(&step));
                    folds.add(&step);
                    printed += 1;
                }
            }
            (printed, folds.take_all())
        };
        for order in [
            [&hooked[..], &[catch_up.clone(), late_hook.clone()]].concat(),
            [&hooked[..], &[late_hook.clone(), catch_up.clone()]].concat(),
        ] {
            let (steps, folds) = replay(&order);
            assert_eq!(steps, 3, "{order:?}");
            assert_eq!(folds.len(), 1);
            assert_eq!(folds[0].range(), (2_655_097, 2_694_559));
            assert_eq!(folds[0].steps, 3);
        }
        // a socket first seen: its record as it came; a record that only says where the socket
        // stands (close) is always shown
        assert_eq!(as_step(&late_hook, None), Some(late_hook.clone()));
        let mut close = late_hook.clone();
        close.kind = EventKind::Close;
        let mut socks = Sockets::default();
        socks.update(&mut late_hook.clone());
        let before = socks.update(&mut close.clone());
        assert_eq!(as_step(&close, before.as_ref()), Some(close));
    }

    #[test]
    fn a_tick_is_applied_in_time_order() {
        use Next::*;
        // the failing trace's shape: namespace A read at 10, B at 19; a hook of B's socket at
        // 17, another at 25 (after both readings); the verdicts at their readings' times
        let order = in_time_order(&[5, 17, 25], &[19, 10], &[19, 10]);
        assert_eq!(
            order,
            [
                Record(0),
                Reading(1),
                Verdict(1),
                Record(1),
                Reading(0),
                Verdict(0),
                Record(2)
            ]
        );
        // at one time: the record, then the reading, then its verdict
        assert_eq!(
            in_time_order(&[7], &[7], &[7]),
            [Record(0), Reading(0), Verdict(0)]
        );
        // records keep the ring's order (a few hundred ns apart across CPUs)
        assert_eq!(in_time_order(&[9, 8], &[], &[]), [Record(0), Record(1)]);
        assert!(in_time_order(&[], &[], &[]).is_empty());
    }

    #[test]
    fn a_socket_keeps_the_way_its_data_flowed() {
        let mut d = Directions::default();
        let mut ratio = space(1, (100, 200), (500, 800));
        ratio.kind = EventKind::Ratio;
        let step = space(2, (200, 300), (800, 800));
        let mut close = space(3, (300, 300), (800, 800));
        close.kind = EventKind::Close;
        // not known yet, nor judged
        assert_eq!(d.side(&step, None), None);
        // a ratio change: data arrived; the socket's later lines say so before any verdict
        assert_eq!(d.side(&ratio, None), Some(Side::Receiving));
        assert_eq!(d.side(&step, None), Some(Side::Receiving));
        assert_eq!(d.of(Some(7), None), Some(Side::Receiving));
        // an idle verdict after the transfer keeps the way data flowed
        assert_eq!(d.side(&step, Some(Side::Idle)), Some(Side::Receiving));
        // a verdict that names a side decides, and is kept
        assert_eq!(d.side(&step, Some(Side::Sending)), Some(Side::Sending));
        assert_eq!(d.side(&ratio, Some(Side::Idle)), Some(Side::Sending));
        // the close is drawn with it, then the socket is forgotten
        assert_eq!(d.side(&close, None), Some(Side::Sending));
        assert_eq!(d.of(Some(7), Some(Side::Idle)), Some(Side::Idle));
        assert!(d.known.is_empty());
    }
}
