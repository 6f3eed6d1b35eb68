//! Tool checks: where the lab's programs (ibsim, OpenSM, infiniband-diags), the
//! umad2sim preload library and ibsim-utils' example net files are. A missing one is a
//! [`LabError::ToolMissing`] naming the package to install, never a skip.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::{LabError, Result};
/// Where Debian's ibsim-utils installs the umad2sim preload library.
pub const UMAD2SIM_LIB: &str = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so";

/// Environment variable: when set to `1`, the lab is mandatory (CI). Lab helpers fail
/// either way; the variable only makes the error text say so.
pub const REQUIRE_LAB_ENV: &str = "IBSM_REQUIRE_LAB";

const INSTALL_HINT: &str = "apt-get install -y ibsim-utils opensm infiniband-diags";

fn lab_required() -> bool {
    std::env::var(REQUIRE_LAB_ENV).is_ok_and(|v| v == "1")
}

fn missing(name: &str) -> LabError {
    LabError::ToolMissing {
        name: name.to_string(),
        hint: INSTALL_HINT,
        required: if lab_required() {
            " (IBSM_REQUIRE_LAB=1: the fabric lab is mandatory here)"
        } else {
            ""
        },
    }
}

fn is_executable(p: &Path) -> bool {
    fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Find `name` (a program, e.g. `ibnetdiscover`) in `PATH`, then in `/usr/sbin` and
/// `/sbin` (infiniband-diags and OpenSM live there and `PATH` may lack them).
/// Returns an error, never a skip, when it is missing. A `name` with a `/` is checked
/// as a path.
pub fn require_tool(name: &str) -> Result<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return if is_executable(&p) {
            Ok(p)
        } else {
            Err(missing(name))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let extra = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from);
    std::env::split_paths(&path)
        .chain(extra)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
        .ok_or_else(|| missing(name))
}

/// Check that the umad2sim preload library exists.
pub fn require_umad2sim() -> Result<PathBuf> {
    let p = PathBuf::from(UMAD2SIM_LIB);
    if p.is_file() {
        Ok(p)
    } else {
        Err(missing(UMAD2SIM_LIB))
    }
}

/// Check the whole lab at once: ibsim, umad2sim, OpenSM and the diags the tests use.
pub fn require_lab() -> Result<()> {
    require_umad2sim()?;
    for t in [
        "ibsim",
        "opensm",
        "ibnetdiscover",
        "ibroute",
        "sminfo",
        "smpquery",
        "smpdump",
        "saquery",
    ] {
        require_tool(t)?;
    }
    Ok(())
}

/// Directory of the example net files shipped with ibsim-utils.
pub const NET_EXAMPLES: &str = "/usr/share/doc/ibsim-utils/net-examples";

/// Path of an example net file (`net.2sw2path4hca`, ...) from ibsim-utils; errors if
/// it is not installed.
pub fn example_net(name: &str) -> Result<PathBuf> {
    let p = Path::new(NET_EXAMPLES).join(name);
    if p.is_file() {
        Ok(p)
    } else {
        Err(missing(&p.display().to_string()))
    }
}
