//! Who a partition names: membership, OpenSM's port groups (`ALL`, `ALL_CAS`,
//! `ALL_SWITCHES`, `ALL_ROUTERS`, `SELF`) and the end port a P_Key table is built
//! for. A leaf file: `config` (the partition types) and `program` (the P_Key
//! tables) both use it.

/// Membership of a port in a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Membership {
    /// Full member (P_Key bit 15 set): may talk to every member.
    Full,
    /// Limited member: may talk to full members only.
    Limited,
}

/// A set of end ports named by kind, resolved against each sweep's topology
/// (OpenSM's partitions.conf keywords).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortGroup {
    /// `ALL`: every end port (CA and router ports, switch port 0s).
    All,
    /// `ALL_CAS`: every channel adapter port.
    AllCas,
    /// `ALL_SWITCHES`: every switch's management port 0.
    AllSwitches,
    /// `ALL_ROUTERS`: every router port.
    AllRouters,
    /// `SELF`: the port this SM runs on.
    SmPort,
}

impl PortGroup {
    /// The partitions.conf keyword.
    pub fn keyword(self) -> &'static str {
        match self {
            PortGroup::All => "ALL",
            PortGroup::AllCas => "ALL_CAS",
            PortGroup::AllSwitches => "ALL_SWITCHES",
            PortGroup::AllRouters => "ALL_ROUTERS",
            PortGroup::SmPort => "SELF",
        }
    }

    /// Whether `port` is in the group.
    pub fn contains(self, port: &EndPort) -> bool {
        match self {
            PortGroup::All => true,
            PortGroup::AllCas => port.kind == EndPortKind::Ca,
            PortGroup::AllSwitches => port.kind == EndPortKind::Switch,
            PortGroup::AllRouters => port.kind == EndPortKind::Router,
            PortGroup::SmPort => port.is_sm,
        }
    }
}

/// A port group with its membership. `after` orders it among the partition's
/// explicit members: it comes after the first `after` of them (a later entry that
/// names the same port wins, as in OpenSM, where a port named again is moved).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GroupMember {
    /// The ports.
    pub group: PortGroup,
    /// Full or limited.
    pub membership: Membership,
    /// How many explicit members precede it.
    pub after: usize,
}

/// The kind of node an end port belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EndPortKind {
    /// A channel adapter port.
    Ca,
    /// A switch's port 0.
    Switch,
    /// A router port.
    Router,
}

/// An end port a P_Key table is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EndPort {
    /// Its PortGUID.
    pub guid: u64,
    /// Its node's kind.
    pub kind: EndPortKind,
    /// True for the port this SM runs on.
    pub is_sm: bool,
}
