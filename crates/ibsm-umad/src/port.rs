//! [`PortSpec`]: which umad device to use, parsed from `umadN`, `N`, `umad:CA:PORT`
//! or `CA:PORT`, and a CA/port pair resolved through sysfs
//! (`/sys/class/infiniband_mad/umadN/{ibdev,port}`). No device is opened here.

use std::path::Path;

use crate::error::{Result, UmadError};

/// Where the kernel describes umad devices.
pub const DEFAULT_SYSFS_DIR: &str = "/sys/class/infiniband_mad";

/// Which umad device to use.
///
/// Accepted forms: `umadN` or `N` (device index), `umad:CA:PORT` or `CA:PORT`
/// (e.g. `umad:mlx5_0:1`), `umad:CA` (port 1) and `umad` (the first port whose link is
/// up, as OpenSM picks one without `-g`). `umad:N` is the index `N`. A CA name and
/// `umad` are resolved through sysfs, which exists only on a real kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortSpec {
    /// `umadN`.
    Index(u32),
    /// A CA (ibdev name) and its port number.
    CaPort { ca: String, port: u8 },
    /// `umad`: the umad device of lowest index whose port's link is up (state INIT,
    /// ARMED or ACTIVE in `/sys/class/infiniband/<ibdev>/ports/<port>/state`), as
    /// OpenSM chooses its port when given no GUID; umad0 when sysfs says nothing
    /// (no sysfs, as under umad2sim, or no port up).
    FirstUp,
}

impl Default for PortSpec {
    fn default() -> Self {
        PortSpec::Index(0)
    }
}

impl std::str::FromStr for PortSpec {
    type Err = UmadError;

    fn from_str(s: &str) -> Result<PortSpec> {
        PortSpec::parse(s)
    }
}

impl PortSpec {
    /// Parse a spec (see the type's docs).
    pub fn parse(spec: &str) -> Result<PortSpec> {
        let bad = |reason: &str| UmadError::PortSpec {
            spec: spec.to_string(),
            reason: reason.to_string(),
        };
        let s = spec.trim();
        let rest = if s == "umad" {
            return Ok(PortSpec::FirstUp);
        } else if let Some(r) = s.strip_prefix("umad:") {
            r
        } else if let Some(n) = s.strip_prefix("umad") {
            return n
                .parse()
                .map(PortSpec::Index)
                .map_err(|_| bad("expected umadN with a decimal N"));
        } else {
            s
        };
        match rest.split_once(':') {
            None if rest.is_empty() => Err(bad("empty")),
            None => match rest.parse::<u32>() {
                Ok(n) => Ok(PortSpec::Index(n)),
                Err(_) => Ok(PortSpec::CaPort {
                    ca: rest.to_string(),
                    port: 1,
                }),
            },
            Some((ca, port)) => {
                if ca.is_empty() {
                    return Err(bad("empty CA name"));
                }
                let port = port
                    .parse::<u8>()
                    .ok()
                    .filter(|p| *p >= 1)
                    .ok_or_else(|| bad("port must be a number 1..=255"))?;
                Ok(PortSpec::CaPort {
                    ca: ca.to_string(),
                    port,
                })
            }
        }
    }

    /// The umad index this spec names; `CaPort` is looked up in `sysfs_dir`
    /// (`/sys/class/infiniband_mad`: `umadN/ibdev` and `umadN/port`).
    pub fn resolve(&self, sysfs_dir: &Path) -> Result<u32> {
        let (ca, port) = match self {
            PortSpec::Index(n) => return Ok(*n),
            PortSpec::FirstUp => {
                return Ok(first_up(sysfs_dir, Path::new(IB_SYSFS_DIR)).unwrap_or(0));
            }
            PortSpec::CaPort { ca, port } => (ca, *port),
        };
        let err = |reason: String| UmadError::PortSpec {
            spec: format!("umad:{ca}:{port}"),
            reason,
        };
        let entries = std::fs::read_dir(sysfs_dir)
            .map_err(|e| err(format!("reading {}: {e}", sysfs_dir.display())))?;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(idx) = name
                .to_str()
                .and_then(|n| n.strip_prefix("umad"))
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let read = |f: &str| {
                std::fs::read_to_string(entry.path().join(f)).map(|s| s.trim().to_string())
            };
            if let (Ok(dev), Ok(p)) = (read("ibdev"), read("port")) {
                if dev == *ca && p.parse::<u8>().ok() == Some(port) {
                    return Ok(idx);
                }
            }
        }
        Err(err(format!(
            "no umad device for that CA and port under {}",
            sysfs_dir.display()
        )))
    }
}

/// Where the kernel describes CAs and their ports' states.
pub const IB_SYSFS_DIR: &str = "/sys/class/infiniband";

/// The lowest umad index whose port's link is up (`<ib_dir>/<ibdev>/ports/<port>/state`
/// is not `1: DOWN`), if sysfs names one.
fn first_up(umad_dir: &Path, ib_dir: &Path) -> Option<u32> {
    let mut found: Vec<(u32, std::path::PathBuf)> = std::fs::read_dir(umad_dir)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let idx = e.file_name().to_str()?.strip_prefix("umad")?.parse().ok()?;
            Some((idx, e.path()))
        })
        .collect();
    found.sort();
    found.into_iter().find_map(|(idx, dir)| {
        let read = |p: &Path| {
            std::fs::read_to_string(p)
                .ok()
                .map(|s| s.trim().to_string())
        };
        let dev = read(&dir.join("ibdev"))?;
        let port = read(&dir.join("port"))?;
        let state = read(&ib_dir.join(&dev).join("ports").join(&port).join("state"))?;
        // "1: DOWN", "2: INIT", "3: ARMED", "4: ACTIVE" ("5: ACTIVE_DEFER").
        let n: u8 = state.split(':').next()?.trim().parse().ok()?;
        (n >= 2).then_some(idx)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_specs() {
        assert_eq!(PortSpec::parse("umad").ok(), Some(PortSpec::FirstUp));
        assert_eq!(PortSpec::parse("umad3").ok(), Some(PortSpec::Index(3)));
        assert_eq!(PortSpec::parse("umad:2").ok(), Some(PortSpec::Index(2)));
        assert_eq!(PortSpec::parse("7").ok(), Some(PortSpec::Index(7)));
        assert_eq!(
            PortSpec::parse("umad:mlx5_0:2").ok(),
            Some(PortSpec::CaPort {
                ca: "mlx5_0".into(),
                port: 2
            })
        );
        assert_eq!(
            PortSpec::parse("mlx4_1").ok(),
            Some(PortSpec::CaPort {
                ca: "mlx4_1".into(),
                port: 1
            })
        );
        for bad in [
            "",
            "umadx",
            "umad:mlx5_0:0",
            "umad:mlx5_0:x",
            "umad::1",
            "umad:mlx5_0:256",
        ] {
            assert!(PortSpec::parse(bad).is_err(), "{bad:?} must be rejected");
        }
    }

    #[test]
    fn resolves_ca_port_through_sysfs() {
        let dir = std::env::temp_dir().join(format!("ibsm-umad-sysfs-{}", std::process::id()));
        for (n, dev, port) in [(0, "mlx5_0", 1), (1, "mlx5_0", 2), (2, "mlx5_1", 1)] {
            let d = dir.join(format!("umad{n}"));
            std::fs::create_dir_all(&d).expect("mkdir");
            std::fs::write(d.join("ibdev"), format!("{dev}\n")).expect("write");
            std::fs::write(d.join("port"), format!("{port}\n")).expect("write");
        }
        let spec = PortSpec::CaPort {
            ca: "mlx5_0".into(),
            port: 2,
        };
        assert_eq!(spec.resolve(&dir).ok(), Some(1));
        let spec = PortSpec::CaPort {
            ca: "mlx5_1".into(),
            port: 1,
        };
        assert_eq!(spec.resolve(&dir).ok(), Some(2));
        let spec = PortSpec::CaPort {
            ca: "mlx5_9".into(),
            port: 1,
        };
        assert!(spec.resolve(&dir).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn plain_umad_is_the_first_port_whose_link_is_up() {
        let dir = std::env::temp_dir().join(format!("ibsm-umad-up-{}", std::process::id()));
        let (umad, ib) = (dir.join("infiniband_mad"), dir.join("infiniband"));
        for (n, dev, port, state) in [
            (0, "mlx5_0", 1, "1: DOWN"),
            (1, "mlx5_0", 2, "2: INIT"),
            (2, "mlx5_1", 1, "4: ACTIVE"),
        ] {
            let d = umad.join(format!("umad{n}"));
            std::fs::create_dir_all(&d).expect("mkdir");
            std::fs::write(d.join("ibdev"), format!("{dev}\n")).expect("write");
            std::fs::write(d.join("port"), format!("{port}\n")).expect("write");
            let p = ib.join(dev).join("ports").join(port.to_string());
            std::fs::create_dir_all(&p).expect("mkdir");
            std::fs::write(p.join("state"), format!("{state}\n")).expect("write");
        }
        assert_eq!(first_up(&umad, &ib), Some(1), "umad0's link is down");
        std::fs::write(ib.join("mlx5_0/ports/2/state"), "1: DOWN\n").expect("write");
        assert_eq!(first_up(&umad, &ib), Some(2));
        std::fs::write(ib.join("mlx5_1/ports/1/state"), "1: DOWN\n").expect("write");
        assert_eq!(first_up(&umad, &ib), None, "no port up");
        assert_eq!(
            first_up(&dir.join("none"), &ib),
            None,
            "no sysfs (umad2sim)"
        );
        assert_eq!(PortSpec::FirstUp.resolve(&dir.join("none")).ok(), Some(0));
        let _ = std::fs::remove_dir_all(&dir);
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn parse_never_panics_and_index_forms_round_trip(s in ".{0,24}", n in 0u32..1000) {
                let _ = PortSpec::parse(&s);
                prop_assert_eq!(PortSpec::parse(&format!("umad{n}")).ok(), Some(PortSpec::Index(n)));
                prop_assert_eq!(PortSpec::parse(&format!("umad:{n}")).ok(), Some(PortSpec::Index(n)));
            }

            #[test]
            fn ca_port_round_trips(ca in "[a-z][a-z0-9_]{0,12}", port in 1u8..=255) {
                prop_assume!(ca != "umad" && !ca.starts_with("umad"));
                let spec = PortSpec::parse(&format!("umad:{ca}:{port}"));
                prop_assert_eq!(spec.ok(), Some(PortSpec::CaPort { ca, port }));
            }

        }
    }
}
