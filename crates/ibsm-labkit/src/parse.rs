//! Parsers of ibsim's text: the header lines of a net file ([`net_file_size`]) and the
//! console's `Attached` listing ([`parse_attached`]), with the console prompt they
//! and the console share. Pure functions of a string, so they are unit-tested and
//! fuzzed without a simulator.
pub(crate) const PROMPT: &str = "sim> ";

/// Node/switch/port counts read from a net file's header lines
/// (`Switch 8 "name"`, `Hca 2 "name"`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetFileSize {
    pub nodes: u32,
    pub switches: u32,
    /// Declared ports plus one management port per node.
    pub ports: u32,
}

/// Count nodes, switches and ports of an ibsim net file (only header lines are read;
/// anything unparsable is ignored, ibsim itself will complain about it).
pub fn net_file_size(text: &str) -> NetFileSize {
    let mut s = NetFileSize::default();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let kind = words.next().unwrap_or("");
        let is_switch = kind.eq_ignore_ascii_case("switch");
        if !(is_switch
            || ["hca", "ca", "router"]
                .iter()
                .any(|k| kind.eq_ignore_ascii_case(k)))
        {
            continue;
        }
        let ports = words
            .next()
            .and_then(|w| w.parse::<u32>().ok())
            .unwrap_or(0);
        s.nodes = s.nodes.saturating_add(1);
        s.switches = s.switches.saturating_add(u32::from(is_switch));
        s.ports = s.ports.saturating_add(ports.saturating_add(1));
    }
    s
}

/// A client attached to ibsim, as listed by the `Attached` console command
/// (`Client 0: pid 4202 connected at "Hca2" port 0x100004, lid 1, qp 0 SM`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachedClient {
    /// ibsim's client number, the argument of `X <n>`.
    pub id: u32,
    pub pid: u32,
    /// Node id from the net file, e.g. `Hca2`.
    pub node: String,
    /// The whole line, for diagnostics (`... SM` at the end marks an issm client).
    pub line: String,
}

/// Parse the output of ibsim's `Attached` command. Lines that do not look like a client
/// are skipped.
pub fn parse_attached(text: &str) -> Vec<AttachedClient> {
    text.lines().filter_map(parse_attached_line).collect()
}

fn parse_attached_line(line: &str) -> Option<AttachedClient> {
    let rest = line
        .trim_start_matches([' ', '\0'])
        .trim_start_matches(PROMPT)
        .trim_start();
    let rest = rest.strip_prefix("Client ")?;
    let (id, rest) = rest.split_once(':')?;
    let id = id.trim().parse().ok()?;
    let rest = rest.trim_start().strip_prefix("pid ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let pid = digits.parse().ok()?;
    let node = rest
        .split_once('"')
        .and_then(|(_, r)| r.split_once('"'))
        .map(|(n, _)| n.to_string())
        .unwrap_or_default();
    Some(AttachedClient {
        id,
        pid,
        node,
        line: line.trim_matches([' ', '\0']).to_string(),
    })
}
