//! The tracer's verdicts: once a second it reads the traced sockets through the socket iterator
//! (in their own namespaces), judges each over the last interval, and reports a verdict when the
//! binding limit changes, and a final one when the socket closes or the trace ends.
use std::collections::{BTreeMap, HashMap};

use anyhow::Result;
use aya::Ebpf;
use tcpwin_common::Offsets;
use tcpwin_model::{
    facts::SockFacts,
    recording::SampleLine,
    schema::{VerdictLine, VerdictTag},
    verdict::{verdict, Input},
};

use super::snapshot;
use crate::{
    host::netns::{self, Netns},
    kernel::iter,
};

struct Judged {
    facts: SockFacts,
    /// the last verdict reported (none before the first interval)
    last: Option<VerdictLine>,
}

pub struct Judges {
    hz: Option<u32>,
    offsets: Offsets,
    namespaces: HashMap<u64, Netns>,
    per: HashMap<u64, Judged>,
    /// sockets by their final verdict
    pub finals: BTreeMap<String, u64>,
}

fn line(f: &SockFacts, cookie: u64, last: bool, v: tcpwin_model::verdict::Verdict) -> VerdictLine {
    VerdictLine {
        event: VerdictTag::Verdict,
        ts_ns: f.ts_ns,
        cookie,
        netns: f.netns,
        laddr: f.laddr,
        lport: f.lport,
        raddr: f.raddr,
        rport: f.rport,
        last,
        verdict: v,
    }
}

impl Judges {
    pub fn new(hz: Option<u32>, offsets: Offsets) -> Judges {
        Judges {
            hz,
            offsets,
            namespaces: HashMap::new(),
            per: HashMap::new(),
            finals: BTreeMap::new(),
        }
    }

    /// The namespace with this inode (named, or one a process lives in), looked up again when
    /// unknown: a namespace created during the trace.
    fn namespace(&mut self, inode: u64) -> Option<Netns> {
        if !self.namespaces.contains_key(&inode) {
            if let Ok(all) = netns::resolve(Some("all")) {
                self.namespaces = all.into_iter().map(|n| (n.inode, n)).collect();
            }
        }
        self.namespaces.get(&inode).cloned()
    }

    /// Judges the live traced sockets `(cookie, netns)`; returns the verdicts that changed and a
    /// sample of every socket read (a recording's time series).
    pub fn tick(
        &mut self,
        bpf: &mut Ebpf,
        live: &[(u64, u32)],
    ) -> Result<(Vec<VerdictLine>, Vec<SampleLine>)> {
        let mut by_ns: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for (c, ns) in live {
            by_ns.entry(*ns).or_default().push(*c);
        }
        let mut out = Vec::new();
        let mut samples = Vec::new();
        for (ns, cookies) in by_ns {
            // a namespace gone since: its sockets are closing, their close reports them
            let Some(target) = self.namespace(ns as u64) else {
                continue;
            };
            let keep = |f: &SockFacts| f.cookie.is_some_and(|c| cookies.contains(&c));
            let (offsets, hz) = (self.offsets, self.hz);
            let mut facts = || -> Result<Vec<SockFacts>> {
                let ts = crate::host::monotonic_ns();
                Ok(snapshot::record_facts(&iter::read(bpf)?, &offsets, hz, ts))
            };
            let seen = match snapshot::read_with(&mut facts, &[target], &keep) {
                Ok(s) => s,
                Err(_) => continue,
            };
            for s in seen {
                let Some(cookie) = s.facts.cookie else {
                    continue;
                };
                let Some(j) = self.per.get_mut(&cookie) else {
                    // the first reading has no interval yet: nothing to judge over
                    samples.push(SampleLine::new(&s.facts, cookie, None));
                    self.per.insert(
                        cookie,
                        Judged {
                            facts: s.facts,
                            last: None,
                        },
                    );
                    continue;
                };
                let v = verdict(&Input {
                    now: &s.facts,
                    before: Some(&j.facts),
                    host: &s.host,
                    target_bps: None,
                });
                samples.push(SampleLine::new(&s.facts, cookie, Some(&v)));
                let l = line(&s.facts, cookie, false, v);
                if j.last.as_ref().map(|p| p.verdict.limit) != Some(l.verdict.limit) {
                    out.push(l.clone());
                }
                j.facts = s.facts;
                j.last = Some(l);
            }
        }
        Ok((out, samples))
    }

    /// The socket closed: its last verdict, as final.
    pub fn close(&mut self, cookie: u64) -> Option<VerdictLine> {
        let mut l = self.per.remove(&cookie)?.last?;
        l.last = true;
        *self.finals.entry(l.verdict.limit.id().into()).or_default() += 1;
        Some(l)
    }

    /// The trace ends: the last verdict of every socket still open, as final.
    pub fn finish(&mut self) -> Vec<VerdictLine> {
        let cookies: Vec<u64> = self.per.keys().copied().collect();
        cookies.into_iter().filter_map(|c| self.close(c)).collect()
    }
}
