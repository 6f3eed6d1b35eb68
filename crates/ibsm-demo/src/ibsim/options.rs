//! What `ibsmd demo --fabric ibsim:` is started with, and the limits it runs under.

use std::path::PathBuf;
use std::time::Duration;

/// The `--fabric` prefix that selects this demo.
pub const IBSIM_PREFIX: &str = "ibsim:";

/// How long the members may take to open their gRPC ports at start.
pub(super) const MEMBER_START: Duration = Duration::from_secs(60);

/// How long the demo waits for a member's own Demo service (Raft isolation).
pub(super) const MEMBER_RPC: Duration = Duration::from_secs(5);

/// How long one infiniband-diags command may run.
pub(super) const DIAG_TIMEOUT: Duration = Duration::from_secs(30);

/// Log filter of the member processes.
pub(super) const MEMBER_LOG: &str = "info,openraft=warn,ibsm_core::election=warn";

/// Options of [`IbsimDemo::start`].
#[derive(Debug, Clone)]
pub struct IbsimDemoOptions {
    /// The ibsim net file (needs 4 HCA ports with a cable: 3 SMs and the poller).
    pub netfile: PathBuf,
    /// First gRPC port: members on base..base+2, the Demo service on base+3
    /// (0: ephemeral ports).
    pub base_port: u16,
    /// Where the members' replicas and logs go (`None`: ibsim's temp dir, removed at
    /// stop).
    pub data_dir: Option<PathBuf>,
    /// The `ibsmd` binary the members and the poller run (normally this one).
    pub ibsmd: PathBuf,
}
