//! [`LinkWidth`] and [`LinkSpeed`], the active rate of a port, with their PortInfo
//! encodings and the names net files use. Leaf value types: ports carry them and
//! the net file code reads and writes them.

use std::fmt;

/// Link width, as PortInfo.LinkWidthActive encodes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LinkWidth {
    /// 1x
    X1,
    /// 2x
    X2,
    /// 4x (the common cable, and what ibsim assumes).
    #[default]
    X4,
    /// 8x
    X8,
    /// 12x
    X12,
}

impl LinkWidth {
    /// The PortInfo.LinkWidthActive bit for this width.
    pub fn to_iba(self) -> u8 {
        match self {
            LinkWidth::X1 => 1,
            LinkWidth::X4 => 2,
            LinkWidth::X8 => 4,
            LinkWidth::X12 => 8,
            LinkWidth::X2 => 16,
        }
    }

    /// Decode a PortInfo.LinkWidthActive value (exactly one bit set).
    pub fn from_iba(v: u8) -> Option<LinkWidth> {
        match v {
            1 => Some(LinkWidth::X1),
            2 => Some(LinkWidth::X4),
            4 => Some(LinkWidth::X8),
            8 => Some(LinkWidth::X12),
            16 => Some(LinkWidth::X2),
            _ => None,
        }
    }

    /// Number of lanes.
    pub fn lanes(self) -> u8 {
        match self {
            LinkWidth::X1 => 1,
            LinkWidth::X2 => 2,
            LinkWidth::X4 => 4,
            LinkWidth::X8 => 8,
            LinkWidth::X12 => 12,
        }
    }

    /// Width from a lane count, as written in net files ("4x").
    pub fn from_lanes(n: u8) -> Option<LinkWidth> {
        match n {
            1 => Some(LinkWidth::X1),
            2 => Some(LinkWidth::X2),
            4 => Some(LinkWidth::X4),
            8 => Some(LinkWidth::X8),
            12 => Some(LinkWidth::X12),
            _ => None,
        }
    }
}

impl fmt::Display for LinkWidth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x", self.lanes())
    }
}

/// Link speed. SDR/DDR/QDR live in PortInfo.LinkSpeedActive; FDR and later in
/// PortInfo.LinkSpeedExtActive (FDR10 is a vendor extension, kept for net files).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LinkSpeed {
    /// 2.5 Gb/s per lane (ibsim's default).
    #[default]
    Sdr,
    /// 5 Gb/s
    Ddr,
    /// 10 Gb/s
    Qdr,
    /// 10.3125 Gb/s (Mellanox extension)
    Fdr10,
    /// 14.0625 Gb/s
    Fdr,
    /// 25.78125 Gb/s
    Edr,
    /// 53.125 Gb/s
    Hdr,
    /// 106.25 Gb/s
    Ndr,
}

impl LinkSpeed {
    /// All speeds, in increasing order.
    pub const ALL: [LinkSpeed; 8] = [
        LinkSpeed::Sdr,
        LinkSpeed::Ddr,
        LinkSpeed::Qdr,
        LinkSpeed::Fdr10,
        LinkSpeed::Fdr,
        LinkSpeed::Edr,
        LinkSpeed::Hdr,
        LinkSpeed::Ndr,
    ];

    /// The name used in net files and by ibnetdiscover ("SDR", "QDR"...).
    pub fn name(self) -> &'static str {
        match self {
            LinkSpeed::Sdr => "SDR",
            LinkSpeed::Ddr => "DDR",
            LinkSpeed::Qdr => "QDR",
            LinkSpeed::Fdr10 => "FDR10",
            LinkSpeed::Fdr => "FDR",
            LinkSpeed::Edr => "EDR",
            LinkSpeed::Hdr => "HDR",
            LinkSpeed::Ndr => "NDR",
        }
    }

    /// Parse a name as [`LinkSpeed::name`] prints it (case-insensitive).
    pub fn from_name(s: &str) -> Option<LinkSpeed> {
        LinkSpeed::ALL
            .into_iter()
            .find(|sp| sp.name().eq_ignore_ascii_case(s))
    }

    /// PortInfo.LinkSpeedActive: 1 = SDR, 2 = DDR, 4 = QDR. For FDR and later
    /// the base field reads SDR and the real speed is in
    /// [`LinkSpeed::speed_ext_active`].
    pub fn speed_active(self) -> u8 {
        match self {
            LinkSpeed::Ddr => 2,
            LinkSpeed::Qdr | LinkSpeed::Fdr10 => 4,
            _ => 1,
        }
    }

    /// PortInfo.LinkSpeedExtActive: 0 = none, 1 = FDR, 2 = EDR, 4 = HDR, 8 = NDR.
    pub fn speed_ext_active(self) -> u8 {
        match self {
            LinkSpeed::Fdr => 1,
            LinkSpeed::Edr => 2,
            LinkSpeed::Hdr => 4,
            LinkSpeed::Ndr => 8,
            _ => 0,
        }
    }
}

impl fmt::Display for LinkSpeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
