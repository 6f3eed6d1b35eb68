//! The SMInfo poller's timeline: each change of an SM's state as the poller saw it
//! on the wire, the time with no MASTER and with two within a window of it, and its
//! picture, `timeline.svg` (one lane per SM).
//!
//! Pure functions over the recorded changes, no I/O: the session (`session.rs`)
//! records them, the cycles measure with them.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use ibsm_proto::demo::v1 as dpb;
use ibsm_proto::v1 as pb;

pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// One change the poller saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub at: u64,
    pub seq: u64,
    pub name: String,
    /// `None`: no SMInfo answer.
    pub state: Option<&'static str>,
}

pub(super) fn state_of(s: &dpb::SmInfoSample) -> Option<&'static str> {
    if !s.answered {
        return None;
    }
    Some(match pb::SmState::try_from(s.state) {
        Ok(pb::SmState::Master) => "MASTER",
        Ok(pb::SmState::Standby) => "STANDBY",
        Ok(pb::SmState::Discovering) => "DISCOVERING",
        _ => "NOTACTIVE",
    })
}

/// Time with no MASTER, the longest such stretch, time with two or more MASTERs and
/// the number of separate stretches with two or more, within `[from, to)`, from a
/// change timeline (states hold until the next change).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gaps {
    pub none_total: u64,
    pub none_max: u64,
    pub dual: u64,
    pub dual_windows: u64,
}

/// Walks a change timeline (states hold until the next change) and calls `f(start,
/// end, states)` for each stretch within `[from, to)` over which no state changes.
fn for_each_stretch<'a>(
    changes: &'a [Change],
    from: u64,
    to: u64,
    mut f: impl FnMut(u64, u64, &BTreeMap<&'a str, Option<&'a str>>),
) {
    let mut sorted: Vec<&Change> = changes.iter().collect();
    sorted.sort_by_key(|c| (c.at, c.seq));
    let mut state: BTreeMap<&str, Option<&str>> = BTreeMap::new();
    let mut i = 0;
    while i < sorted.len() {
        let t = sorted.get(i).map_or(0, |c| c.at);
        while let Some(c) = sorted.get(i).filter(|c| c.at == t) {
            state.insert(c.name.as_str(), c.state);
            i += 1;
        }
        let next = sorted.get(i).map_or(to, |c| c.at.min(to));
        let (a, b) = (t.max(from), next.min(to));
        if b > a {
            f(a, b, &state);
        }
    }
}

/// See [`Gaps`].
pub fn master_gaps_windows(changes: &[Change], from: u64, to: u64) -> Gaps {
    let (mut none_total, mut none_max, mut run, mut dual) = (0u64, 0u64, 0u64, 0u64);
    let (mut windows, mut in_dual) = (0u64, false);
    for_each_stretch(changes, from, to, |a, b, state| {
        let masters = state.values().filter(|s| **s == Some("MASTER")).count();
        let d = b - a;
        if masters > 1 && !in_dual {
            windows += 1;
        }
        in_dual = masters > 1;
        if masters == 0 {
            none_total += d;
            run += d;
            none_max = none_max.max(run);
        } else {
            run = 0;
            if masters > 1 {
                dual += d;
            }
        }
    });
    Gaps {
        none_total,
        none_max,
        dual,
        dual_windows: windows,
    }
}

/// The stretches with two or more MASTERs within `[from, to)`: (start, end, the SMs
/// MASTER then), adjacent stretches with the same SMs joined.
pub fn dual_windows(changes: &[Change], from: u64, to: u64) -> Vec<(u64, u64, Vec<String>)> {
    let mut out: Vec<(u64, u64, Vec<String>)> = Vec::new();
    for_each_stretch(changes, from, to, |a, b, state| {
        let masters: Vec<String> = state
            .iter()
            .filter(|(_, s)| **s == Some("MASTER"))
            .map(|(n, _)| n.to_string())
            .collect();
        if masters.len() < 2 {
            return;
        }
        match out.last_mut() {
            Some(last) if last.1 == a && last.2 == masters => last.1 = b,
            _ => out.push((a, b, masters)),
        }
    });
    out
}

/// The SVG timeline: one lane per SM, a rectangle per state interval.
pub fn svg(
    names: &[String],
    changes: &[Change],
    from: u64,
    to: u64,
    marks: &[(u64, String)],
) -> String {
    let (left, width, lane_h, top) = (90.0_f64, 1000.0_f64, 28.0_f64, 30.0_f64);
    let span = to.saturating_sub(from).max(1) as f64;
    let x = |t: u64| left + (t.saturating_sub(from).min(to - from.min(to))) as f64 / span * width;
    let color = |s: Option<&str>| match s {
        Some("MASTER") => "#2e7d32",
        Some("STANDBY") => "#1565c0",
        Some("DISCOVERING") => "#ef6c00",
        Some(_) => "#9e9e9e",
        None => "#eeeeee",
    };
    let height = top + lane_h * names.len() as f64 + 40.0;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" font-family=\"monospace\" font-size=\"11\">\n<text x=\"4\" y=\"14\">SMInfo as the fabric poller saw it, {} ms (green MASTER, blue STANDBY, orange DISCOVERING, grey other, light: no answer)</text>\n",
        left + width + 20.0,
        to.saturating_sub(from)
    );
    for (i, name) in names.iter().enumerate() {
        let y = top + lane_h * i as f64;
        out.push_str(&format!(
            "<g class=\"lane\" data-sm=\"{name}\">\n<text x=\"4\" y=\"{}\">{name}</text>\n",
            y + 17.0
        ));
        let mut mine: Vec<&Change> = changes.iter().filter(|c| &c.name == name).collect();
        mine.sort_by_key(|c| (c.at, c.seq));
        for (k, c) in mine.iter().enumerate() {
            let end = mine.get(k + 1).map_or(to, |n| n.at).min(to);
            let start = c.at.max(from);
            if end <= start {
                continue;
            }
            out.push_str(&format!(
                "<rect x=\"{:.1}\" y=\"{y}\" width=\"{:.1}\" height=\"{}\" fill=\"{}\"><title>{name} {} {} ms</title></rect>\n",
                x(start),
                (x(end) - x(start)).max(0.5),
                lane_h - 6.0,
                color(c.state),
                c.state.unwrap_or("no answer"),
                end - start
            ));
        }
        out.push_str("</g>\n");
    }
    for (t, label) in marks {
        let xx = x(*t);
        out.push_str(&format!(
            "<line x1=\"{xx:.1}\" y1=\"{}\" x2=\"{xx:.1}\" y2=\"{}\" stroke=\"#c62828\"/><text x=\"{xx:.1}\" y=\"{}\" fill=\"#c62828\">{}</text>\n",
            top - 4.0,
            top + lane_h * names.len() as f64,
            top + lane_h * names.len() as f64 + 14.0,
            xml_escape(label)
        ));
    }
    out.push_str("</svg>\n");
    out
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ch(at: u64, seq: u64, name: &str, state: Option<&'static str>) -> Change {
        Change {
            at,
            seq,
            name: name.into(),
            state,
        }
    }

    #[test]
    fn gaps_and_dual_masters() {
        let t = vec![
            ch(0, 1, "a", Some("MASTER")),
            ch(0, 2, "b", Some("STANDBY")),
            ch(100, 3, "a", None),
            ch(150, 4, "b", Some("DISCOVERING")),
            ch(400, 5, "b", Some("MASTER")),
            ch(500, 6, "a", Some("MASTER")),
            ch(520, 7, "b", Some("STANDBY")),
        ];
        let g = master_gaps_windows(&t, 0, 1000);
        assert_eq!(
            (g.none_total, g.none_max, g.dual, g.dual_windows),
            (300, 300, 20, 1)
        );
        // Clipped to a window.
        let g = master_gaps_windows(&t, 200, 450);
        assert_eq!((g.none_total, g.none_max, g.dual), (200, 200, 0));
        // Nothing seen yet is not "no master": the timeline starts at the first round.
        assert_eq!(master_gaps_windows(&[], 0, 10), Gaps::default());
        // Two separate stretches with two masters are two windows.
        let mut two = t.clone();
        two.push(ch(600, 8, "b", Some("MASTER")));
        two.push(ch(610, 9, "b", Some("STANDBY")));
        assert_eq!(master_gaps_windows(&two, 0, 1000).dual_windows, 2);
    }

    #[test]
    fn svg_has_a_lane_per_sm() {
        let t = vec![
            ch(0, 1, "sm1", Some("MASTER")),
            ch(50, 2, "sm2", Some("STANDBY")),
            ch(60, 3, "sm1", None),
        ];
        let names = vec!["sm1".to_string(), "sm2".to_string(), "sm3".to_string()];
        let s = svg(&names, &t, 0, 100, &[(60, "#1 <kill>".into())]);
        assert_eq!(s.matches("class=\"lane\"").count(), 3);
        assert!(s.contains("#2e7d32") && s.contains("&lt;kill&gt;"));
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn gaps_and_dual_windows_read_the_same_stretches() {
        let ch = |at, seq, name: &str, state| Change {
            at,
            seq,
            name: name.into(),
            state,
        };
        let changes = vec![
            ch(0, 0, "a", Some("MASTER")),
            ch(0, 1, "b", Some("STANDBY")),
            ch(100, 2, "a", None),
            ch(150, 3, "b", Some("MASTER")),
            ch(200, 4, "a", Some("MASTER")),
            ch(260, 5, "a", Some("STANDBY")),
        ];
        let g = master_gaps_windows(&changes, 0, 300);
        assert_eq!(
            g,
            Gaps {
                none_total: 50,
                none_max: 50,
                dual: 60,
                dual_windows: 1
            }
        );
        assert_eq!(
            dual_windows(&changes, 0, 300),
            vec![(200, 260, vec!["a".to_string(), "b".to_string()])]
        );
        // A window cuts the stretches: from 220 only 40 ms of two masters remain.
        assert_eq!(master_gaps_windows(&changes, 220, 300).dual, 40);
        assert_eq!(
            dual_windows(&changes, 220, 250),
            vec![(220, 250, vec!["a".to_string(), "b".to_string()])]
        );
    }
}
