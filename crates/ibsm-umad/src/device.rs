//! [`UmadPort`], an open `umadN`: opening the device file (and closing it without
//! `OwnedFd`, see `DeviceFd`), registering the two SMP agents on QP0 and, on request,
//! GSI agents on QP1 ([`GsiClass`]), sending with the header filled in, receiving with
//! `poll` + `read`, and the 0-hop start-up query. `issm` opens its file through the
//! same `open_device`.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::stat::Mode;

use ibsm_mad::{AttributeId, Method, Smp, SmpAttribute};

use crate::error::{Result, UmadError};
use ibsm_mad::MadAddress;

use crate::header::{
    decode_read, tid_of, Address, Dest, ReadError, Received, MAD_SIZE, MIN_WRITE_MAD,
    UMAD_HDR_SIZE, UMAD_READ_SIZE,
};
use crate::port::{PortSpec, DEFAULT_SYSFS_DIR};

/// `_IOWR(0x1b, 1, struct ib_user_mad_reg_req)` with the 28-byte reg_req.
pub const IB_USER_MAD_REGISTER_AGENT: u32 = 0xC01C_1B01;
/// Management class: LID-routed SMP.
pub const CLASS_SUBN_LID_ROUTED: u8 = 0x01;
/// Management class: directed-route SMP.
pub const CLASS_SUBN_DIRECTED_ROUTE: u8 = 0x81;
/// Management class: Subnet Administration (a GMP class, QP1).
pub const CLASS_SUBN_ADM: u8 = 0x03;
/// ClassVersion of Subnet Administration MADs (IBA 1.2+: 2).
pub const SA_CLASS_VERSION: u8 = 2;
/// Where device files live.
pub const DEFAULT_DEVICE_DIR: &str = "/dev/infiniband";

const SMP_METHODS: [u8; 4] = [
    0x01, /* Get */
    0x02, /* Set */
    0x05, /* Trap */
    0x07, /* TrapRepress */
];

/// The requests an SA receives: SubnAdmGet, SubnAdmSet, SubnAdmGetTable,
/// SubnAdmGetTraceTable, SubnAdmGetMulti, SubnAdmDelete. Responses cannot be in a
/// method mask (see [`GsiClass::methods`]).
const SA_METHODS: [u8; 6] = [
    0x01, /* Get */
    0x02, /* Set */
    0x12, /* GetTable */
    0x13, /* GetTraceTable */
    0x14, /* GetMulti */
    0x15, /* Delete */
];

/// A GSI (QP1) agent to register with [`UmadPort::register_gsi`]: which class and
/// class version it takes, and which request methods are delivered to it unsolicited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GsiClass {
    /// Management class (not 0x01/0x81: SMPs live on QP0).
    pub class: u8,
    /// ClassVersion the agent answers (the kernel routes requests by class *and*
    /// version: a request of another version finds no agent).
    pub class_version: u8,
    /// Request methods (0..=0x7F) delivered unsolicited. Responses to our own requests
    /// (GetResp 0x81, ReportResp 0x86, GetTableResp 0x92, ...) are never in the mask: the
    /// kernel routes a response by the upper 32 bits of its TID to the agent that sent
    /// the request, and hands it over only while that request is outstanding (sent with
    /// `timeout_ms > 0`); under ibsim, by the client id ibsim put in TID bits 63..48 and
    /// the agent id umad2sim put in bits 47..32. So a Report must be sent as a request
    /// with a timeout for its ReportResp to come back. RMPP ACKs to our GetTableResp
    /// segments come as method GetTable (0x12, the kernel's `format_ack` clears the
    /// response bit) and so arrive through the mask.
    pub methods: &'static [u8],
}

impl GsiClass {
    /// The Subnet Administrator: class 0x03, version 2, the SA's request methods.
    pub const SUBN_ADM: GsiClass = GsiClass {
        class: CLASS_SUBN_ADM,
        class_version: SA_CLASS_VERSION,
        methods: &SA_METHODS,
    };
}

/// Options for [`UmadPort::open`].
#[derive(Debug, Clone)]
pub struct UmadOptions {
    /// Directory of the device files (default `/dev/infiniband`).
    pub device_dir: PathBuf,
    /// `timeout_ms` put on requests by [`UmadPort::send`]: how long the kernel keeps a
    /// request open for its response (default 200 ms, like OpenSM's transaction timeout).
    pub request_timeout: Duration,
    /// `retries` put on requests by [`UmadPort::send`] (default 0: retries belong to the
    /// caller's transaction layer).
    pub request_retries: u32,
}

impl Default for UmadOptions {
    fn default() -> Self {
        UmadOptions {
            device_dir: PathBuf::from(DEFAULT_DEVICE_DIR),
            request_timeout: Duration::from_millis(200),
            request_retries: 0,
        }
    }
}

/// `struct ib_user_mad_reg_req` (27 bytes of fields, 28 with padding).
#[repr(C)]
#[derive(Debug, Default)]
struct RegReq {
    id: u32,
    method_mask: [u32; 4],
    qpn: u8,
    mgmt_class: u8,
    mgmt_class_version: u8,
    oui: [u8; 3],
    rmpp_version: u8,
}

const _: () = assert!(std::mem::size_of::<RegReq>() == 28);
// _IOWR(type 0x1b, nr 1, size 28): dir 3 << 30 | size << 16 | type << 8 | nr.
const _: () = assert!(IB_USER_MAD_REGISTER_AGENT == (3 << 30) | (28 << 16) | (0x1b << 8) | 1);

fn method_mask(methods: &[u8]) -> [u32; 4] {
    let mut mask = [0u32; 4];
    for &m in methods {
        let m = usize::from(m);
        if let Some(word) = mask.get_mut(m / 32) {
            *word |= 1 << (m % 32);
        }
    }
    mask
}

/// A device descriptor, closed on drop. Not `OwnedFd`: umad2sim's fake descriptors make
/// libc `close` report EBADF, which `OwnedFd`'s drop treats as an I/O-safety violation
/// and aborts the process. We close through libc `close` (umad2sim intercepts it) and
/// only log a failure.
#[derive(Debug)]
pub(crate) struct DeviceFd(RawFd);

impl DeviceFd {
    fn raw(&self) -> RawFd {
        self.0
    }
}

impl AsFd for DeviceFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: self.0 came from a successful open() and stays open until `self` is
        // dropped, which the borrow's lifetime (tied to &self) cannot outlive.
        unsafe { BorrowedFd::borrow_raw(self.0) }
    }
}

impl AsRawFd for DeviceFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

impl Drop for DeviceFd {
    fn drop(&mut self) {
        if let Err(e) = nix::unistd::close(self.0) {
            tracing::debug!(fd = self.0, error = %e, "close of umad descriptor reported an error");
        }
    }
}

pub(crate) fn open_device(path: &Path) -> Result<DeviceFd> {
    let fd: RawFd = nix::fcntl::open(
        path,
        OFlag::O_RDWR | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|errno| UmadError::Open {
        path: path.to_path_buf(),
        errno,
    })?;
    Ok(DeviceFd(fd))
}

/// An open `umadN` with agents for SMP classes 0x01 and 0x81 on QP0, and the GSI
/// agents registered with [`UmadPort::register_gsi`] on QP1. Blocking; use from one
/// thread (it is `Send`, so move it there).
#[derive(Debug)]
pub struct UmadPort {
    fd: DeviceFd,
    path: PathBuf,
    ca_index: u32,
    lid_agent: u32,
    dr_agent: u32,
    /// (class, agent id) of the GSI agents, at most a handful.
    gsi_agents: Vec<(u8, u32)>,
    opts: UmadOptions,
}

impl UmadPort {
    /// Open `<device_dir>/umad<ca_index>` and register the two SMP agents.
    pub fn open(ca_index: u32, opts: UmadOptions) -> Result<UmadPort> {
        let path = opts.device_dir.join(format!("umad{ca_index}"));
        let fd = open_device(&path)?;
        let smp = |class| GsiClass {
            class,
            class_version: 1,
            methods: &SMP_METHODS,
        };
        let lid_agent = register_agent(&fd, &path, 0, smp(CLASS_SUBN_LID_ROUTED))?;
        let dr_agent = register_agent(&fd, &path, 0, smp(CLASS_SUBN_DIRECTED_ROUTE))?;
        tracing::debug!(path = %path.display(), fd = fd.as_raw_fd(), lid_agent, dr_agent, "umad port open");
        Ok(UmadPort {
            fd,
            path,
            ca_index,
            lid_agent,
            dr_agent,
            gsi_agents: Vec::new(),
            opts,
        })
    }

    /// Register a GSI agent on QP1 for `class` (e.g. [`GsiClass::SUBN_ADM`]) and return
    /// its agent id; from then on [`UmadPort::send`] sends MADs of that class through it
    /// and [`UmadPort::recv`] returns the requests the mask selects and the responses to
    /// what it sent.
    ///
    /// Registered with `rmpp_version` 0: the caller does RMPP itself, and raw segments
    /// pass through in both directions (the crate doc has the kernel and umad2sim
    /// facts). Fails with `EINVAL` on a kernel when another agent on this port already
    /// holds one of these methods for the class and version (e.g. OpenSM's SA), and
    /// with [`UmadError::BadGsiClass`] for the SMP classes or a second agent of the
    /// same class on this descriptor (umad2sim keeps one agent per class and would
    /// silently replace the first).
    pub fn register_gsi(&mut self, class: GsiClass) -> Result<u32> {
        let bad = |why| UmadError::BadGsiClass {
            class: class.class,
            why,
        };
        if matches!(
            class.class,
            CLASS_SUBN_LID_ROUTED | CLASS_SUBN_DIRECTED_ROUTE
        ) {
            return Err(bad("SMP classes live on QP0 and are registered at open"));
        }
        if self.gsi_agents.iter().any(|&(c, _)| c == class.class) {
            return Err(bad("this port already has an agent for it"));
        }
        let id = register_agent(&self.fd, &self.path, 1, class)?;
        tracing::debug!(
            path = %self.path.display(),
            class = class.class,
            version = class.class_version,
            agent = id,
            "GSI agent registered"
        );
        self.gsi_agents.push((class.class, id));
        Ok(id)
    }

    /// Open the port a [`PortSpec`] names (resolving `CA:PORT` through sysfs).
    pub fn open_spec(spec: &PortSpec, opts: UmadOptions) -> Result<UmadPort> {
        let idx = spec.resolve(Path::new(DEFAULT_SYSFS_DIR))?;
        UmadPort::open(idx, opts)
    }

    /// The `N` of `umadN`.
    pub fn ca_index(&self) -> u32 {
        self.ca_index
    }

    /// The device path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The agent id registered for management class `class` (0x01, 0x81, or a GSI
    /// class registered with [`UmadPort::register_gsi`]).
    pub fn agent_id(&self, class: u8) -> Option<u32> {
        match class {
            CLASS_SUBN_LID_ROUTED => Some(self.lid_agent),
            CLASS_SUBN_DIRECTED_ROUTE => Some(self.dr_agent),
            _ => self
                .gsi_agents
                .iter()
                .find(|&&(c, _)| c == class)
                .map(|&(_, id)| id),
        }
    }

    /// Send a GMP to `to` (its LID, QP, SL, path bits and GRH go in the header's address
    /// block; the Q_Key and P_Key index cannot be chosen through this header, see
    /// [`Address`]). The MAD's class must have a GSI agent. Requests get the port's
    /// request timeout (so their responses are delivered), responses none. `mad` may be
    /// shorter than 256 bytes ([`UmadPort::send_with`]).
    pub fn send_gmp(&self, mad: &[u8], to: &MadAddress) -> Result<()> {
        self.send(mad, Dest::Address(Address::from(to)))
    }

    /// Send a MAD. Requests (method bit 7 clear) get the port's request timeout and
    /// retries so their response comes back; responses are sent with timeout 0.
    pub fn send(&self, mad: &[u8], dest: Dest) -> Result<()> {
        let is_response = mad.get(3).is_some_and(|m| m & 0x80 != 0);
        let (timeout, retries) = if is_response {
            (0, 0)
        } else {
            (
                u32::try_from(self.opts.request_timeout.as_millis())
                    .unwrap_or(u32::MAX)
                    .max(1),
                self.opts.request_retries,
            )
        };
        self.send_with(mad, dest, timeout, retries)
    }

    /// Send a MAD with an explicit kernel `timeout_ms` (0: expect no response) and
    /// `retries`. The write is the header and `mad` as given: [`MIN_WRITE_MAD`] to 256
    /// bytes ([`UmadError::MadLength`] otherwise). A shorter MAD is what an RMPP
    /// sender writes for its last segment: the kernel pads it to 256 bytes with zeros
    /// on the wire (an agent without kernel RMPP), umad2sim hands the reader exactly
    /// the bytes written.
    pub fn send_with(&self, mad: &[u8], dest: Dest, timeout_ms: u32, retries: u32) -> Result<()> {
        if !(MIN_WRITE_MAD..=MAD_SIZE).contains(&mad.len()) {
            return Err(UmadError::MadLength {
                path: self.path.clone(),
                len: mad.len(),
            });
        }
        let class = mad[1];
        let agent = self
            .agent_id(class)
            .ok_or(UmadError::UnsupportedClass { class })?;
        let mut buf = [0u8; UMAD_HDR_SIZE + MAD_SIZE];
        let mut hdr = [0u8; UMAD_HDR_SIZE];
        hdr[0..4].copy_from_slice(&agent.to_ne_bytes());
        hdr[8..12].copy_from_slice(&timeout_ms.to_ne_bytes());
        hdr[12..16].copy_from_slice(&retries.to_ne_bytes());
        // `length` is ignored by the kernel on send (the write size counts); fill it anyway.
        hdr[16..20].copy_from_slice(&(mad.len() as u32).to_ne_bytes());
        dest.address().encode(&mut hdr);
        buf[..UMAD_HDR_SIZE].copy_from_slice(&hdr);
        let end = UMAD_HDR_SIZE + mad.len();
        buf[UMAD_HDR_SIZE..end].copy_from_slice(mad);
        let buf = &buf[..end];
        let n = nix::unistd::write(self.fd.as_fd(), buf).map_err(|e| UmadError::Send {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        if n != buf.len() {
            return Err(UmadError::Send {
                path: self.path.clone(),
                reason: format!("short write: {n} of {} bytes", buf.len()),
            });
        }
        tracing::trace!(
            class,
            method = mad[3],
            tid = tid_of(mad),
            ?dest,
            "umad send"
        );
        Ok(())
    }

    /// Wait up to `timeout` for one MAD (a response, an unsolicited request, or a
    /// timed-out request with [`Received::is_timeout`]). `Ok(None)` when nothing came.
    pub fn recv(&self, timeout: Duration) -> Result<Option<Received>> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            // Rounded up: poll waits in whole milliseconds, and a fraction of one
            // rounded down to 0 would poll without waiting until the deadline (and a
            // poll that wakes a little early, as umad2sim's does, left such a fraction
            // at the end of most waits).
            let ms = u16::try_from(left.as_micros().div_ceil(1000)).unwrap_or(u16::MAX);
            let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
            let ready = match nix::poll::poll(&mut fds, PollTimeout::from(ms)) {
                Ok(n) => n > 0,
                Err(Errno::EINTR) => false,
                Err(errno) => {
                    return Err(UmadError::Recv {
                        path: self.path.clone(),
                        errno,
                    })
                }
            };
            if ready {
                let mut buf = [0u8; UMAD_READ_SIZE];
                if let Some(n) = self.read_once(&mut buf)? {
                    if let Some(r) = self.decode_read(&buf, n)? {
                        return Ok(Some(r));
                    }
                }
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
        }
    }

    /// One `read`. `None` when there was nothing to read. umad2sim reports "nothing" in
    /// three ways, all handled here: -1 with errno EAGAIN (kernel), a negative errno
    /// returned in band without touching errno, or a header-only read with status EAGAIN.
    fn read_once(&self, buf: &mut [u8; UMAD_HDR_SIZE + MAD_SIZE]) -> Result<Option<usize>> {
        // SAFETY: `buf` is a valid, exclusively borrowed buffer of exactly `buf.len()`
        // bytes for the duration of the call, and the descriptor is open (owned by self).
        let ret = unsafe { libc::read(self.fd.raw(), buf.as_mut_ptr().cast(), buf.len()) };
        let errno = match ret {
            -1 => Errno::last(),
            r if r < 0 => Errno::from_raw(i32::try_from(-r).unwrap_or(libc::EIO)),
            r => return Ok(Some(usize::try_from(r).unwrap_or(0).min(buf.len()))),
        };
        match errno {
            Errno::EAGAIN | Errno::EINTR => Ok(None),
            errno => Err(UmadError::Recv {
                path: self.path.clone(),
                errno,
            }),
        }
    }

    fn decode_read(
        &self,
        buf: &[u8; UMAD_HDR_SIZE + MAD_SIZE],
        n: usize,
    ) -> Result<Option<Received>> {
        let r = decode_read(buf.get(..n).unwrap_or(buf)).map_err(|e| match e {
            ReadError::Short { len } => UmadError::ShortRead {
                path: self.path.clone(),
                len,
            },
        })?;
        if let Some(r) = &r {
            tracing::trace!(
                class = r.mgmt_class(),
                method = r.method(),
                tid = r.tid(),
                status = r.status,
                lid = r.source.lid,
                "umad recv"
            );
        }
        Ok(r)
    }

    /// Start-up helper: a 0-hop directed-route SubnGet(`attr_id`, `attr_mod`) of the
    /// local port, waiting up to `timeout` for its GetResp, which is returned decoded
    /// (status checked: non-zero is an error). MADs that are not the answer are dropped
    /// (logged), so call it before the port is handed to the event loop. `tid` must be
    /// unique among your outstanding requests; only its low 32 bits come back unchanged.
    pub fn get_local(
        &self,
        attr_id: AttributeId,
        attr_mod: u32,
        tid: u64,
        timeout: Duration,
    ) -> Result<Smp> {
        let req = Smp::get_dr(&[], attr_id, attr_mod, tid).encode();
        let what = format!(
            "0-hop DR SubnGet({} {:#06x}, mod {attr_mod:#x}) on {}",
            attr_id.name().unwrap_or("attribute"),
            attr_id.0,
            self.path.display()
        );
        self.send(&req, Dest::Directed)?;
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(r) = self.recv(left)? else {
                return Err(UmadError::Query {
                    what,
                    reason: format!("no answer within {timeout:?}"),
                });
            };
            if (r.tid() & 0xffff_ffff) != (tid & 0xffff_ffff) {
                tracing::debug!(
                    tid = r.tid(),
                    method = r.method(),
                    "get_local: dropping unrelated MAD"
                );
                continue;
            }
            if r.is_timeout() {
                return Err(UmadError::Query {
                    what,
                    reason: "the request timed out".into(),
                });
            }
            if r.method() != Method::GET_RESP.0 {
                continue;
            }
            let smp = r.smp().map_err(|source| UmadError::Decode {
                what: what.clone(),
                source,
            })?;
            if smp.status != 0 {
                return Err(UmadError::Query {
                    what,
                    reason: format!("SMP status {:#06x}", smp.status),
                });
            }
            return Ok(smp);
        }
    }

    /// [`UmadPort::get_local`] decoded as attribute `A` (e.g. `NodeInfo`, `PortInfo`).
    pub fn get_local_attr<A: SmpAttribute>(
        &self,
        attr_mod: u32,
        tid: u64,
        timeout: Duration,
    ) -> Result<A> {
        let smp = self.get_local(A::ID, attr_mod, tid, timeout)?;
        smp.attribute::<A>().map_err(|source| UmadError::Decode {
            what: format!("attribute {:#06x} from {}", A::ID.0, self.path.display()),
            source,
        })
    }
}

/// `IB_USER_MAD_REGISTER_AGENT` for `class` on QP `qpn` (0 or 1), `rmpp_version` 0.
fn register_agent(fd: &DeviceFd, path: &Path, qpn: u8, class: GsiClass) -> Result<u32> {
    let mut req = RegReq {
        method_mask: method_mask(class.methods),
        qpn,
        mgmt_class: class.class,
        mgmt_class_version: class.class_version,
        // 0: no kernel RMPP; segments pass through raw (see the crate doc).
        rmpp_version: 0,
        ..RegReq::default()
    };
    // SAFETY: IB_USER_MAD_REGISTER_AGENT reads and writes exactly one
    // `struct ib_user_mad_reg_req` (28 bytes, `RegReq` is #[repr(C)] with the same layout,
    // size checked at compile time) through the pointer, which is valid and exclusive for
    // the duration of the call; `fd` is open.
    let rc = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            IB_USER_MAD_REGISTER_AGENT as libc::Ioctl,
            &mut req as *mut RegReq,
        )
    };
    if rc < 0 {
        return Err(UmadError::Register {
            path: path.to_path_buf(),
            class: class.class,
            errno: Errno::last(),
        });
    }
    Ok(req.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_mask_has_get_set_trap_trap_repress() {
        let m = method_mask(&SMP_METHODS);
        assert_eq!(m[0], (1 << 1) | (1 << 2) | (1 << 5) | (1 << 7));
        assert_eq!(&m[1..], &[0, 0, 0]);
    }

    #[test]
    fn sa_method_mask_has_the_sa_requests_and_no_responses() {
        let m = method_mask(GsiClass::SUBN_ADM.methods);
        // Get, Set in word 0; GetTable 0x12, GetTraceTable 0x13, GetMulti 0x14,
        // Delete 0x15 are bits 18..=21 of word 0 too.
        assert_eq!(
            m[0],
            (1 << 1) | (1 << 2) | (1 << 0x12) | (1 << 0x13) | (1 << 0x14) | (1 << 0x15)
        );
        assert_eq!(
            &m[1..],
            &[0, 0, 0],
            "no response method (>= 0x80) fits a mask"
        );
        // A method past 127 is dropped, not a panic.
        assert_eq!(method_mask(&[0x86, 0xFF]), [0; 4]);
    }
}
