//! What the live trace shows: the kinds of lines asked for (`--events`), and by default the
//! `rcv_ssthresh` steps folded into one line per socket (a transfer makes hundreds of them in its
//! first second; they are each in `--json`). Pure view state: records in, what to print out.
use std::collections::{BTreeMap, HashMap};

use tcpwin_common::flag;

use crate::{kind::EventKind, record::Record, verdict::Side};

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
