//! Notice (0x0002): the payload of SubnTrap and SubnTrapRepress, with typed
//! DataDetails for the traps an SM acts on.
//!
//! In an SMP the Notice is the first 64 bytes of the IBA Notice attribute (IBA
//! 13.4.8.2): the trailing IssuerGID does not fit in the SMP data field and is only
//! present in SA-carried notices.

use super::{load, rd16, rd24, rd32, rd64, wr16, wr24, wr32, wr64, SmpAttribute};
use crate::attr::CapabilityMask;
use crate::attribute_id::AttributeId;
use crate::error::MadError;

open_enum! {
    /// Notice.Type (7 bits).
    NoticeType: 0x7F {
        /// 0: fatal.
        Fatal = 0,
        /// 1: urgent.
        Urgent = 1,
        /// 2: security.
        Security = 2,
        /// 3: subnet management.
        SubnetManagement = 3,
        /// 4: informational.
        Informational = 4,
        /// 0x7F: empty notice.
        Empty = 0x7F,
    }
}

/// Notice.ProducerType (24 bits) of a generic notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ProducerType(pub u32);

impl ProducerType {
    /// Channel adapter.
    pub const CA: ProducerType = ProducerType(1);
    /// Switch.
    pub const SWITCH: ProducerType = ProducerType(2);
    /// Router.
    pub const ROUTER: ProducerType = ProducerType(3);
    /// Class manager (e.g. the SM).
    pub const CLASS_MANAGER: ProducerType = ProducerType(4);
}

/// Bytes 0..6 of a Notice after the IsGeneric bit: generic or vendor-specific.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NoticeProducer {
    /// IsGeneric = 1: ProducerType (24) and TrapNumber (16).
    Generic {
        /// ProducerType.
        producer_type: ProducerType,
        /// TrapNumber.
        trap_number: u16,
    },
    /// IsGeneric = 0: VendorID (24) and DeviceID (16).
    Vendor {
        /// VendorID.
        vendor_id: u32,
        /// DeviceID.
        device_id: u16,
    },
}

/// Notice, SMP-sized (64 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Notice {
    /// Type (byte 0 bits 6:0; bit 7 is IsGeneric, implied by `producer`).
    pub notice_type: NoticeType,
    /// Generic or vendor fields (bytes 1..6).
    pub producer: NoticeProducer,
    /// IssuerLID (6..8).
    pub issuer_lid: u16,
    /// NoticeToggle (byte 8 bit 7).
    pub notice_toggle: bool,
    /// NoticeCount (15 bits).
    pub notice_count: u16,
    /// DataDetails (10..64), raw; [`Notice::details`] types them.
    pub data_details: [u8; 54],
}

impl Notice {
    /// Bytes of the attribute in an SMP.
    pub const WIRE_LEN: usize = 64;

    /// A generic notice carrying `details` (TrapNumber taken from them).
    pub fn generic(
        notice_type: NoticeType,
        producer_type: ProducerType,
        issuer_lid: u16,
        details: &TrapDetails,
    ) -> Notice {
        Notice {
            notice_type,
            producer: NoticeProducer::Generic {
                producer_type,
                trap_number: details.trap_number(),
            },
            issuer_lid,
            notice_toggle: false,
            notice_count: 0,
            data_details: details.encode(),
        }
    }

    /// TrapNumber for generic notices.
    pub fn trap_number(&self) -> Option<u16> {
        match self.producer {
            NoticeProducer::Generic { trap_number, .. } => Some(trap_number),
            NoticeProducer::Vendor { .. } => None,
        }
    }

    /// Typed DataDetails of a generic notice whose trap this crate knows
    /// (64..=67, 128..=131, 144, 145); `None` for vendor notices and other traps.
    pub fn details(&self) -> Option<TrapDetails> {
        TrapDetails::decode(self.trap_number()?, &self.data_details)
    }
}

impl SmpAttribute for Notice {
    const ID: AttributeId = AttributeId::NOTICE;

    fn decode(data: &[u8]) -> Result<Self, MadError> {
        let b = load(data, Self::WIRE_LEN, "Notice")?;
        let producer = if b[0] & 0x80 != 0 {
            NoticeProducer::Generic {
                producer_type: ProducerType(rd24(&b, 1)),
                trap_number: rd16(&b, 4),
            }
        } else {
            NoticeProducer::Vendor {
                vendor_id: rd24(&b, 1),
                device_id: rd16(&b, 4),
            }
        };
        let mut data_details = [0u8; 54];
        data_details.copy_from_slice(&b[10..]);
        Ok(Notice {
            notice_type: NoticeType::from(b[0] & 0x7F),
            producer,
            issuer_lid: rd16(&b, 6),
            notice_toggle: b[8] & 0x80 != 0,
            notice_count: rd16(&b, 8) & 0x7FFF,
            data_details,
        })
    }

    fn encode(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        let (generic, a, n) = match self.producer {
            NoticeProducer::Generic {
                producer_type,
                trap_number,
            } => (true, producer_type.0, trap_number),
            NoticeProducer::Vendor {
                vendor_id,
                device_id,
            } => (false, vendor_id, device_id),
        };
        b[0] = (u8::from(generic) << 7) | u8::from(self.notice_type);
        wr24(&mut b, 1, a & 0x00FF_FFFF);
        wr16(&mut b, 4, n);
        wr16(&mut b, 6, self.issuer_lid);
        wr16(
            &mut b,
            8,
            (u16::from(self.notice_toggle) << 15) | (self.notice_count & 0x7FFF),
        );
        b[10..].copy_from_slice(&self.data_details);
        b
    }
}

/// Trap 144 DataDetails: a port's CapabilityMask (or another local attribute) changed.
/// OpenSM also sends it from a standby SM whose priority beats the master's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Trap144 {
    /// LIDADDR of the port (bytes 2..4).
    pub lid: u16,
    /// OtherLocalChanges (byte 5 bit 0).
    pub other_local_changes: bool,
    /// The new CapabilityMask (bytes 6..10).
    pub capability_mask: CapabilityMask,
    /// ChangeFlags (bytes 10..12), see the `CHANGE_*` consts.
    pub change_flags: u16,
    /// The new CapabilityMask2 (bytes 12..14).
    pub capability_mask2: u16,
}

impl Trap144 {
    /// ChangeFlags: NodeDescription changed.
    pub const CHANGE_NODE_DESCRIPTION: u16 = 0x0001;
    /// ChangeFlags: LinkWidthEnabled changed.
    pub const CHANGE_LINK_WIDTH_ENABLED: u16 = 0x0002;
    /// ChangeFlags: LinkSpeedEnabled changed.
    pub const CHANGE_LINK_SPEED_ENABLED: u16 = 0x0004;
    /// ChangeFlags: the SM priority changed (a standby that should become master).
    pub const CHANGE_SM_PRIORITY: u16 = 0x0008;
    /// ChangeFlags: HierarchyInfo changed.
    pub const CHANGE_HIERARCHY_INFO: u16 = 0x0010;
    /// ChangeFlags: CapabilityMask2 changed.
    pub const CHANGE_CAPABILITY_MASK2: u16 = 0x0020;
}

/// Typed DataDetails of the generic traps an SM handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TrapDetails {
    /// 64: GID now in service (GID at DataDetails 6..22).
    GidInService {
        /// The port GID.
        gid: [u8; 16],
    },
    /// 65: GID out of service.
    GidOutOfService {
        /// The port GID.
        gid: [u8; 16],
    },
    /// 66: multicast group created.
    McGroupCreated {
        /// The MGID.
        gid: [u8; 16],
    },
    /// 67: multicast group deleted.
    McGroupDeleted {
        /// The MGID.
        gid: [u8; 16],
    },
    /// 128: link state of at least one port of a switch changed.
    LinkStateChange {
        /// LIDADDR of the switch (DataDetails 0..2).
        lid: u16,
    },
    /// 129: local link integrity threshold reached.
    LinkIntegrityThreshold {
        /// LIDADDR (2..4).
        lid: u16,
        /// PORTNO (4).
        port_num: u8,
    },
    /// 130: excessive buffer overrun threshold reached.
    ExcessiveBufferOverrun {
        /// LIDADDR (2..4).
        lid: u16,
        /// PORTNO (4).
        port_num: u8,
    },
    /// 131: flow control update watchdog fired.
    FlowControlUpdateWatchdog {
        /// LIDADDR (2..4).
        lid: u16,
        /// PORTNO (4).
        port_num: u8,
    },
    /// 144: CapabilityMask / local attributes changed.
    CapabilityMaskChanged(Trap144),
    /// 145: SystemImageGUID changed.
    SystemImageGuidChanged {
        /// LIDADDR (2..4).
        lid: u16,
        /// The new SystemImageGUID (6..14).
        system_image_guid: u64,
    },
}

impl TrapDetails {
    /// The TrapNumber these details belong to.
    pub const fn trap_number(&self) -> u16 {
        match self {
            TrapDetails::GidInService { .. } => 64,
            TrapDetails::GidOutOfService { .. } => 65,
            TrapDetails::McGroupCreated { .. } => 66,
            TrapDetails::McGroupDeleted { .. } => 67,
            TrapDetails::LinkStateChange { .. } => 128,
            TrapDetails::LinkIntegrityThreshold { .. } => 129,
            TrapDetails::ExcessiveBufferOverrun { .. } => 130,
            TrapDetails::FlowControlUpdateWatchdog { .. } => 131,
            TrapDetails::CapabilityMaskChanged(_) => 144,
            TrapDetails::SystemImageGuidChanged { .. } => 145,
        }
    }

    /// Decodes the 54-byte DataDetails of trap `trap_number`; `None` for traps this
    /// crate does not type (reserved bytes are ignored).
    pub fn decode(trap_number: u16, d: &[u8; 54]) -> Option<TrapDetails> {
        let mut b = [0u8; 64];
        b[..54].copy_from_slice(d);
        let gid = || {
            let mut g = [0u8; 16];
            g.copy_from_slice(&b[6..22]);
            g
        };
        Some(match trap_number {
            64 => TrapDetails::GidInService { gid: gid() },
            65 => TrapDetails::GidOutOfService { gid: gid() },
            66 => TrapDetails::McGroupCreated { gid: gid() },
            67 => TrapDetails::McGroupDeleted { gid: gid() },
            128 => TrapDetails::LinkStateChange { lid: rd16(&b, 0) },
            129 => TrapDetails::LinkIntegrityThreshold {
                lid: rd16(&b, 2),
                port_num: b[4],
            },
            130 => TrapDetails::ExcessiveBufferOverrun {
                lid: rd16(&b, 2),
                port_num: b[4],
            },
            131 => TrapDetails::FlowControlUpdateWatchdog {
                lid: rd16(&b, 2),
                port_num: b[4],
            },
            144 => TrapDetails::CapabilityMaskChanged(Trap144 {
                lid: rd16(&b, 2),
                other_local_changes: b[5] & 0x01 != 0,
                capability_mask: CapabilityMask(rd32(&b, 6)),
                change_flags: rd16(&b, 10),
                capability_mask2: rd16(&b, 12),
            }),
            145 => TrapDetails::SystemImageGuidChanged {
                lid: rd16(&b, 2),
                system_image_guid: rd64(&b, 6),
            },
            _ => return None,
        })
    }

    /// Encodes into a 54-byte DataDetails field, reserved bytes zero.
    pub fn encode(&self) -> [u8; 54] {
        let mut b = [0u8; 64];
        match *self {
            TrapDetails::GidInService { gid }
            | TrapDetails::GidOutOfService { gid }
            | TrapDetails::McGroupCreated { gid }
            | TrapDetails::McGroupDeleted { gid } => b[6..22].copy_from_slice(&gid),
            TrapDetails::LinkStateChange { lid } => wr16(&mut b, 0, lid),
            TrapDetails::LinkIntegrityThreshold { lid, port_num }
            | TrapDetails::ExcessiveBufferOverrun { lid, port_num }
            | TrapDetails::FlowControlUpdateWatchdog { lid, port_num } => {
                wr16(&mut b, 2, lid);
                b[4] = port_num;
            }
            TrapDetails::CapabilityMaskChanged(t) => {
                wr16(&mut b, 2, t.lid);
                b[5] = u8::from(t.other_local_changes);
                wr32(&mut b, 6, t.capability_mask.0);
                wr16(&mut b, 10, t.change_flags);
                wr16(&mut b, 12, t.capability_mask2);
            }
            TrapDetails::SystemImageGuidChanged {
                lid,
                system_image_guid,
            } => {
                wr16(&mut b, 2, lid);
                wr64(&mut b, 6, system_image_guid);
            }
        }
        let mut out = [0u8; 54];
        out.copy_from_slice(&b[..54]);
        out
    }
}
