//! Enabled link rates, as ibsim keeps them per port: width, speed and extended-speed
//! masks set by the `width=`/`speed=`/`extspeed=` defaults, the `w=`/`s=`/`e=` port
//! options and ibnetdiscover's `lid N <w>x<SPEED>` annotation, and the active rate the
//! two ends of a cable settle on. The parser fills them in; the writer uses the speed
//! masks for router port options.

use super::scan::{atoi, skip_ws};
use crate::topology::{LinkSpeed, LinkWidth};

const W_1X: u8 = 1;
pub(super) const W_4X: u8 = 2;
const W_8X: u8 = 4;
const W_12X: u8 = 8;
const W_2X: u8 = 16;
pub(super) const S_SDR: u8 = 1;
pub(super) const S_DDR: u8 = 2;
pub(super) const S_QDR: u8 = 4;
const E_FDR: u8 = 1;
const E_EDR: u8 = 2;
const E_HDR: u8 = 4;
const E_NDR: u8 = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Enabled {
    pub(super) width: u8,
    pub(super) speed: u8,
    pub(super) ext: u8,
    pub(super) fdr10: bool,
}

impl Enabled {
    /// Apply an ibnetdiscover `lid N <w>x<SPEED>` annotation (starting at
    /// "lid"). Like ibsim, a part that does not parse leaves the port as is.
    pub(super) fn apply_annotation(&mut self, s: &str) {
        let Some(rest) = s.strip_prefix("lid") else {
            return;
        };
        let Some((_rlid, rest)) = atoi(rest) else {
            return;
        };
        let Some((width, rest)) = atoi(rest) else {
            return;
        };
        let Some(rest) = rest.strip_prefix('x') else {
            return;
        };
        let rest = skip_ws(rest);
        let token: String = rest
            .chars()
            .take_while(|c| !c.is_ascii_whitespace())
            .take(9)
            .collect();
        if token.is_empty() {
            return;
        }
        match width {
            12 => self.width = W_1X | W_4X | W_12X,
            8 => self.width = W_8X,
            4 => self.width = W_1X | W_4X,
            2 => self.width = W_2X,
            1 => self.width = W_1X,
            _ => tracing::debug!(width, "net file: unknown link width ignored, as ibsim does"),
        }
        // ibsim compares the token as a prefix of each name, in this order.
        const ORDER: [&str; 8] = ["SDR", "DDR", "QDR", "FDR", "EDR", "HDR", "NDR", "FDR10"];
        let all = S_SDR | S_DDR | S_QDR;
        match ORDER
            .iter()
            .position(|name| name.starts_with(token.as_str()))
        {
            Some(0) => self.speed = S_SDR,
            Some(1) => self.speed = S_SDR | S_DDR,
            Some(2) => self.speed = all,
            Some(3) => (self.speed, self.ext, self.fdr10) = (all, E_FDR, true),
            Some(4) => (self.speed, self.ext, self.fdr10) = (all, E_FDR | E_EDR, true),
            Some(5) => (self.speed, self.ext, self.fdr10) = (all, E_FDR | E_EDR | E_HDR, true),
            Some(6) => {
                (self.speed, self.ext, self.fdr10) = (all, E_FDR | E_EDR | E_HDR | E_NDR, true)
            }
            Some(_) => (self.speed, self.fdr10) = (all, true),
            None => tracing::debug!(%token, "net file: unknown link speed ignored, as ibsim does"),
        }
    }

    /// The active width of a cable between ports enabling `self` and `other`.
    pub(super) fn active_width(self, other: Enabled) -> Option<LinkWidth> {
        let w = self.width & other.width;
        [
            (W_12X, LinkWidth::X12),
            (W_8X, LinkWidth::X8),
            (W_4X, LinkWidth::X4),
            (W_2X, LinkWidth::X2),
            (W_1X, LinkWidth::X1),
        ]
        .into_iter()
        .find(|(bit, _)| w & bit != 0)
        .map(|(_, lw)| lw)
    }

    /// The active speed of a cable between ports enabling `self` and `other`.
    pub(super) fn active_speed(self, other: Enabled) -> Option<LinkSpeed> {
        let base = self.speed & other.speed;
        let base = if base & S_QDR != 0 {
            LinkSpeed::Qdr
        } else if base & S_DDR != 0 {
            LinkSpeed::Ddr
        } else if base & S_SDR != 0 {
            LinkSpeed::Sdr
        } else {
            return None;
        };
        let ext = self.ext & other.ext;
        Some(if ext & E_NDR != 0 {
            LinkSpeed::Ndr
        } else if ext & E_HDR != 0 {
            LinkSpeed::Hdr
        } else if ext & E_EDR != 0 {
            LinkSpeed::Edr
        } else if ext & E_FDR != 0 {
            LinkSpeed::Fdr
        } else if self.fdr10 && other.fdr10 {
            LinkSpeed::Fdr10
        } else {
            base
        })
    }
}
