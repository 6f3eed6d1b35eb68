//! `ibsmd sminfo-poll`: the judge process on a spare HCA of ibsim, and its `--target`
//! arguments.

use std::time::{Duration, Instant};

use ibsm_transport::{FabricSpec, UmadDevice};

use crate::poller::{PollLine, SmInfoPoller};

/// `--target` value of `ibsmd sminfo-poll`: `NAME=P1,P2,...`.
pub fn format_target(name: &str, path: &[u8]) -> String {
    let p: Vec<String> = path.iter().map(u8::to_string).collect();
    format!("{name}={}", p.join(","))
}

/// Parse `NAME=P1,P2,...` (a directed route: egress ports, the first one ours).
pub fn parse_target(s: &str) -> Result<(String, Vec<u8>), String> {
    let (name, path) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected NAME=P1,P2,... (a directed route)"))?;
    if name.is_empty() {
        return Err(format!("{s:?}: empty name"));
    }
    let ports = path
        .split(',')
        .map(|p| {
            p.trim()
                .parse::<u8>()
                .map_err(|e| format!("{s:?}: port {p:?}: {e}"))
        })
        .collect::<Result<Vec<u8>, String>>()?;
    if ports.is_empty() || ports.len() > 63 || ports.first() == Some(&0) {
        return Err(format!(
            "{s:?}: a directed route has 1..=63 hops and starts at our port (not 0)"
        ));
    }
    Ok((name.to_string(), ports))
}

/// `ibsmd sminfo-poll`: poll `targets` from this process's umad port (run it under
/// umad2sim with `SIM_HOST` set) and print one [`PollLine`] per change, plus a
/// heartbeat per second, until stdout closes.
pub fn run_sminfo_poll(fabric: &FabricSpec, targets: Vec<(String, Vec<u8>)>) -> anyhow::Result<()> {
    use std::io::Write;
    let FabricSpec::Umad(port) = fabric else {
        anyhow::bail!("sminfo-poll reads SMInfo through umad: give --fabric umad[:CA[:PORT]]");
    };
    if targets.is_empty() {
        anyhow::bail!("sminfo-poll needs at least one --target NAME=PATH");
    }
    let dev = UmadDevice::open(port, Duration::from_millis(200))?;
    let poller = SmInfoPoller::start_on_device(Box::new(dev), targets)?;
    let mut cursor = 0;
    let mut beat = Instant::now();
    let stdout = std::io::stdout();
    loop {
        std::thread::sleep(crate::poller::INTERVAL);
        let v = poller.since(cursor);
        let mut out = stdout.lock();
        for s in &v.samples {
            serde_json::to_writer(&mut out, &PollLine::of_sample(s, v.rounds))?;
            out.write_all(b"\n")?;
        }
        cursor = v.next_seq;
        if beat.elapsed() >= Duration::from_secs(1) {
            beat = Instant::now();
            serde_json::to_writer(
                &mut out,
                &PollLine {
                    rounds: v.rounds,
                    sample: None,
                },
            )?;
            out.write_all(b"\n")?;
        }
        // A closed pipe (the demo is gone) ends the poller.
        out.flush()?;
    }
}
