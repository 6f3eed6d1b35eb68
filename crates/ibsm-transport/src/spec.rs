//! `--fabric` strings: which fabric to talk to.

use std::path::PathBuf;
use std::time::Duration;

use ibsm_umad::PortSpec;

use ibsm_fabric::Topology;

use crate::device::MadDevice;
use crate::error::{SpecError, TransportError};
use crate::sim_device::SimDevice;
use crate::umad_device::UmadDevice;

/// Default switch count, CA count and radix of `gen:random:SEED`.
const RANDOM_DEFAULTS: (u32, u32, u32) = (16, 64, 16);

/// Which fabric to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FabricSpec {
    /// `sim:NETFILE`: the embedded simulator running an ibnetdiscover/ibsim net file.
    SimNet(PathBuf),
    /// `gen:fat-tree:K`: the embedded simulator running a 3-level fat tree of radix K.
    FatTree3(u32),
    /// `gen:fat-tree2:K`: the embedded simulator running a 2-level fat tree of radix K.
    FatTree2(u32),
    /// `gen:random:SEED[:SWITCHES:HCAS:RADIX]`: a seeded random irregular fabric
    /// (defaults 16 switches, 64 CAs, radix 16).
    Random {
        /// The generator seed.
        seed: u64,
        /// Number of switches.
        switches: u32,
        /// Number of CAs.
        hcas: u32,
        /// Ports per switch.
        radix: u32,
    },
    /// `umad[:CA[:PORT]]` (or `umadN`): the kernel (or umad2sim) device, as
    /// `ibsm_umad::PortSpec` reads it: CA is an ibdev name (`mlx5_0`, port 1 by
    /// default) or a umad index (`umad:0`); plain `umad` is umad0.
    Umad(PortSpec),
}

fn number<T: std::str::FromStr>(
    spec: &str,
    field: &'static str,
    value: &str,
) -> Result<T, SpecError>
where
    T::Err: std::fmt::Display,
{
    value.parse().map_err(|e: T::Err| SpecError::BadNumber {
        spec: spec.to_string(),
        field,
        value: value.to_string(),
        why: e.to_string(),
    })
}

impl FabricSpec {
    /// Parse a `--fabric` string.
    pub fn parse(s: &str) -> Result<FabricSpec, SpecError> {
        let malformed = |why| SpecError::Malformed {
            spec: s.to_string(),
            why,
        };
        if let Some(path) = s.strip_prefix("sim:") {
            if path.is_empty() {
                return Err(malformed("sim: needs a net file path"));
            }
            return Ok(FabricSpec::SimNet(PathBuf::from(path)));
        }
        if let Some(rest) = s.strip_prefix("gen:") {
            let parts: Vec<&str> = rest.split(':').collect();
            return match parts.as_slice() {
                ["fat-tree", k] => Ok(FabricSpec::FatTree3(number(s, "radix K", k)?)),
                ["fat-tree2", k] => Ok(FabricSpec::FatTree2(number(s, "radix K", k)?)),
                ["random", seed] => Ok(FabricSpec::Random {
                    seed: number(s, "seed", seed)?,
                    switches: RANDOM_DEFAULTS.0,
                    hcas: RANDOM_DEFAULTS.1,
                    radix: RANDOM_DEFAULTS.2,
                }),
                ["random", seed, sw, hcas, radix] => Ok(FabricSpec::Random {
                    seed: number(s, "seed", seed)?,
                    switches: number(s, "switch count", sw)?,
                    hcas: number(s, "CA count", hcas)?,
                    radix: number(s, "radix", radix)?,
                }),
                ["fat-tree" | "fat-tree2", ..] => {
                    Err(malformed("expected gen:fat-tree:K or gen:fat-tree2:K"))
                }
                ["random", ..] => Err(malformed(
                    "expected gen:random:SEED or gen:random:SEED:SWITCHES:HCAS:RADIX",
                )),
                _ => Err(SpecError::Unknown(s.to_string())),
            };
        }
        if s.starts_with("umad") {
            if s.matches(':').count() > 2 {
                return Err(malformed("expected umad, umadN, umad:CA or umad:CA:PORT"));
            }
            return PortSpec::parse(s)
                .map(FabricSpec::Umad)
                .map_err(|e| SpecError::Umad(e.to_string()));
        }
        Err(SpecError::Unknown(s.to_string()))
    }

    /// The topology an embedded-simulator spec simulates; `None` for umad.
    pub fn topology(&self) -> Result<Option<Topology>, SpecError> {
        let generated = |spec: String, r: Result<Topology, ibsm_fabric::gen::GenError>| {
            r.map(Some).map_err(|e| SpecError::Generate {
                spec,
                why: e.to_string(),
            })
        };
        match self {
            FabricSpec::SimNet(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| SpecError::Read {
                    path: path.clone(),
                    source,
                })?;
                ibsm_fabric::netfile::parse(&text)
                    .map(Some)
                    .map_err(|source| SpecError::NetFile {
                        path: path.clone(),
                        source,
                    })
            }
            FabricSpec::FatTree3(k) => generated(
                format!("gen:fat-tree:{k}"),
                ibsm_fabric::gen::fat_tree_3level(*k),
            ),
            FabricSpec::FatTree2(k) => generated(
                format!("gen:fat-tree2:{k}"),
                ibsm_fabric::gen::fat_tree_2level(*k),
            ),
            FabricSpec::Random {
                seed,
                switches,
                hcas,
                radix,
            } => generated(
                format!("gen:random:{seed}:{switches}:{hcas}:{radix}"),
                ibsm_fabric::gen::random(*seed, *switches, *hcas, *radix),
            ),
            FabricSpec::Umad(_) => Ok(None),
        }
    }

    /// Open a device on this fabric: for simulated fabrics, a fresh embedded
    /// simulator with the SM on the first CA port that has a cable.
    /// `request_timeout` is the kernel's response-tracking time for umad.
    pub fn open(
        &self,
        request_timeout: Duration,
    ) -> Result<Box<dyn MadDevice + Send>, TransportError> {
        match self {
            FabricSpec::Umad(spec) => Ok(Box::new(UmadDevice::open(spec, request_timeout)?)),
            _ => {
                let topology = self
                    .topology()?
                    .ok_or_else(|| TransportError::Sim("not a simulated fabric".into()))?;
                Ok(Box::new(SimDevice::on_first_ca(&topology)?))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        assert_eq!(
            FabricSpec::parse("sim:/tmp/x.net").unwrap(),
            FabricSpec::SimNet("/tmp/x.net".into())
        );
        assert_eq!(
            FabricSpec::parse("gen:fat-tree:8").unwrap(),
            FabricSpec::FatTree3(8)
        );
        assert_eq!(
            FabricSpec::parse("gen:fat-tree2:36").unwrap(),
            FabricSpec::FatTree2(36)
        );
        assert_eq!(
            FabricSpec::parse("gen:random:7").unwrap(),
            FabricSpec::Random {
                seed: 7,
                switches: 16,
                hcas: 64,
                radix: 16
            }
        );
        assert_eq!(
            FabricSpec::parse("gen:random:7:4:8:12").unwrap(),
            FabricSpec::Random {
                seed: 7,
                switches: 4,
                hcas: 8,
                radix: 12
            }
        );
        assert_eq!(
            FabricSpec::parse("umad").unwrap(),
            FabricSpec::Umad(PortSpec::FirstUp)
        );
        assert_eq!(
            FabricSpec::parse("umad:mlx5_0:2").unwrap(),
            FabricSpec::Umad(PortSpec::CaPort {
                ca: "mlx5_0".into(),
                port: 2
            })
        );
    }

    #[test]
    fn rejects_garbage_with_a_reason() {
        for bad in [
            "",
            "sim:",
            "gen:fat-tree",
            "gen:fat-tree:x",
            "gen:random:1:2",
            "gen:mesh:3",
            "umad:",
            "umad:a:b",
            "umad:a:0",
            "umad:a:1:2",
            "ibsim",
        ] {
            let err = FabricSpec::parse(bad).unwrap_err();
            assert!(!err.to_string().is_empty(), "{bad}");
        }
    }

    #[test]
    fn generator_refusals_are_errors() {
        let spec = FabricSpec::parse("gen:fat-tree:3").unwrap();
        assert!(matches!(spec.topology(), Err(SpecError::Generate { .. })));
    }

    #[test]
    fn missing_net_file_is_an_error() {
        let spec = FabricSpec::parse("sim:/nonexistent/ibsm.net").unwrap();
        assert!(matches!(spec.topology(), Err(SpecError::Read { .. })));
    }
}
