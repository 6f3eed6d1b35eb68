//! ibsm-umad: the Linux user MAD interface (`/dev/infiniband/umadN`, `issmN`) through
//! nix/libc, without libibumad. The same code runs on a real kernel and under ibsim's
//! umad2sim preload (`/work/shared/notes/fabric-lab.md` has the facts).
//!
//! Why it looks like this:
//!
//! - **Blocking, for a dedicated thread.** umad2sim hands out fake descriptors (1024+
//!   for umad, 2048+ for issm) that are not kernel fds, so epoll/tokio `AsyncFd` cannot
//!   watch them. [`UmadPort::recv`] is `poll()` + `read()` with a timeout. A read that
//!   finds nothing is not an error: the kernel says EAGAIN, umad2sim returns `-EAGAIN`
//!   in band (errno untouched) or a bare header with status EAGAIN; all three mean "poll
//!   again". Run it on its own thread.
//! - **Closing.** Descriptors are not `OwnedFd`: closing a fake descriptor may report
//!   EBADF, which `OwnedFd` turns into an abort. We close with libc `close` ourselves.
//! - **Only libc symbols umad2sim intercepts.** Devices are opened with
//!   `nix::fcntl::open` (libc `open`), not `std::fs::File::open` (which calls `open64`,
//!   not intercepted). I/O goes through `read`/`write`/`poll`/`ioctl`/`close`.
//! - **56-byte header, never `IB_USER_MAD_ENABLE_PKEY`.** Each read/write is the
//!   `ib_user_mad_hdr_old` layout (agent id, status, timeout_ms, retries, length, then a
//!   36-byte address block) followed by the 256-byte MAD. umad2sim assumes this layout.
//! - **Two agents on QP0**: class 0x81 (directed route) and 0x01 (LID routed), class
//!   version 1, method mask Get/Set/Trap/TrapRepress so unsolicited *requests* arrive
//!   (SubnGet/Set(SMInfo) from other SMs, traps). Responses (GetResp 0x81) cannot be in
//!   the 128-bit mask (it holds methods 0..=127); the kernel delivers them to the agent
//!   that sent the request, matched by TID, as long as the request was sent with a
//!   non-zero `timeout_ms`. [`UmadPort::send`] picks the agent from the MAD's class byte.
//! - **TIDs.** The upper 32 bits of a request's TID are replaced on the way out (by the
//!   kernel with the agent's id, under ibsim with the client id); only the low 32 bits
//!   are yours. Match responses on the low 32 bits.
//! - **Timeouts.** A request sent with `timeout_ms > 0` that gets no answer comes back
//!   from `read` with `status = ETIMEDOUT` (110) and the request's own bytes
//!   ([`Received::is_timeout`]). Responses are sent with `timeout_ms = 0`.
//! - **Directed route.** DR SMPs are sent to the permissive LID 0xFFFF (the kernel's SMI
//!   wants that) with DrSLID = DrDLID = 0xFFFF and hop pointer 0 in the MAD; ibsim
//!   checks those strictly. [`Dest::Directed`] fills the address block for you.
//! - **IsSM.** Opening `issmN` ([`open_issm`]) sets PortInfo.CapabilityMask.IsSM on the
//!   port; dropping the handle closes it and clears the bit.
//! - **Which port.** `umadN` is one CA port. [`PortSpec`] parses `umad0`, `0`,
//!   `umad:CA:PORT` / `CA:PORT` (e.g. `umad:mlx5_0:1`); a CA/port pair is resolved
//!   through sysfs (`/sys/class/infiniband_mad/umadN/{ibdev,port}`) on a real kernel.
//!   Under umad2sim the sysfs is faked for libibumad only (std cannot read it), so use
//!   `umad0` and learn the local node and port with a 0-hop DR SubnGet(NodeInfo) and
//!   (PortInfo) ([`UmadPort::get_local`]).
//!
//! MADs cross this API as raw 256-byte arrays (that is what the device reads and
//! writes, and what a transaction layer matches TIDs on); `ibsm_mad::Smp` encodes and
//! decodes them ([`Received::smp`], [`UmadPort::get_local_attr`]).
//! What a `read` returned is decoded by the pure [`decode_read`] (no device), so the
//! header handling is unit-tested and fuzzed (`fuzz/fuzz_targets/umad_read.rs`).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::stat::Mode;

use ibsm_mad::{AttributeId, MadError, Method, Smp, SmpAttribute};

/// Size of a MAD.
pub const MAD_SIZE: usize = 256;
/// Size of the `ib_user_mad` header without pkey_index (the layout we always use).
pub const UMAD_HDR_SIZE: usize = 56;
/// `_IOWR(0x1b, 1, struct ib_user_mad_reg_req)` with the 28-byte reg_req.
pub const IB_USER_MAD_REGISTER_AGENT: u32 = 0xC01C_1B01;
/// The permissive LID: destination of every directed-route SMP.
pub const PERMISSIVE_LID: u16 = 0xFFFF;
/// `status` of a request the kernel gave up on.
pub const STATUS_TIMEOUT: u32 = libc::ETIMEDOUT as u32;
/// Management class: LID-routed SMP.
pub const CLASS_SUBN_LID_ROUTED: u8 = 0x01;
/// Management class: directed-route SMP.
pub const CLASS_SUBN_DIRECTED_ROUTE: u8 = 0x81;
/// Where device files live.
pub const DEFAULT_DEVICE_DIR: &str = "/dev/infiniband";
/// Where the kernel describes umad devices.
pub const DEFAULT_SYSFS_DIR: &str = "/sys/class/infiniband_mad";

const METHODS: [u8; 4] = [
    0x01, /* Get */
    0x02, /* Set */
    0x05, /* Trap */
    0x07, /* TrapRepress */
];

/// Errors of the umad interface; each says what, on which device, and why.
#[derive(Debug, thiserror::Error)]
pub enum UmadError {
    /// `open` of a device file failed.
    #[error("opening {path}: {errno}")]
    Open { path: PathBuf, errno: Errno },
    /// `IB_USER_MAD_REGISTER_AGENT` failed.
    #[error("registering an agent for class {class:#04x} on {path}: {errno}")]
    Register {
        path: PathBuf,
        class: u8,
        errno: Errno,
    },
    /// `write` failed or was short.
    #[error("sending a MAD on {path}: {reason}")]
    Send { path: PathBuf, reason: String },
    /// `poll` or `read` failed.
    #[error("receiving on {path}: {errno}")]
    Recv { path: PathBuf, errno: Errno },
    /// `read` returned fewer bytes than a header.
    #[error("short read on {path}: {len} bytes, need at least {UMAD_HDR_SIZE}")]
    ShortRead { path: PathBuf, len: usize },
    /// The MAD's management class has no agent here.
    #[error("no agent for management class {class:#04x} (only 0x01 and 0x81 are registered)")]
    UnsupportedClass { class: u8 },
    /// A port spec could not be parsed or resolved.
    #[error("port spec {spec:?}: {reason}")]
    PortSpec { spec: String, reason: String },
    /// A synchronous query got no usable answer.
    #[error("{what}: {reason}")]
    Query { what: String, reason: String },
    /// An answer did not decode as an SMP / the expected attribute.
    #[error("{what}: {source}")]
    Decode {
        what: String,
        #[source]
        source: MadError,
    },
}

/// Result type of this crate.
pub type Result<T, E = UmadError> = std::result::Result<T, E>;

/// Where to send a MAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    /// Directed route: the address block carries the permissive LID 0xFFFF; the path
    /// is in the SMP itself.
    Directed,
    /// LID routed to this LID, QP0.
    Lid(u16),
    /// Full control of the address block.
    Address(Address),
}

/// The address block of the umad header (what the kernel sends to / received from).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Address {
    pub qpn: u32,
    pub qkey: u32,
    pub lid: u16,
    pub sl: u8,
    pub path_bits: u8,
    pub grh_present: bool,
    pub gid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub gid: [u8; 16],
    pub flow_label: u32,
}

impl Address {
    fn encode(&self, b: &mut [u8; UMAD_HDR_SIZE]) {
        b[20..24].copy_from_slice(&self.qpn.to_be_bytes());
        b[24..28].copy_from_slice(&self.qkey.to_be_bytes());
        b[28..30].copy_from_slice(&self.lid.to_be_bytes());
        b[30] = self.sl;
        b[31] = self.path_bits;
        b[32] = u8::from(self.grh_present);
        b[33] = self.gid_index;
        b[34] = self.hop_limit;
        b[35] = self.traffic_class;
        b[36..52].copy_from_slice(&self.gid);
        b[52..56].copy_from_slice(&self.flow_label.to_be_bytes());
    }

    fn decode(b: &[u8; UMAD_HDR_SIZE]) -> Address {
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[36..52]);
        Address {
            qpn: be32(b, 20),
            qkey: be32(b, 24),
            lid: u16::from_be_bytes([b[28], b[29]]),
            sl: b[30],
            path_bits: b[31],
            grh_present: b[32] != 0,
            gid_index: b[33],
            hop_limit: b[34],
            traffic_class: b[35],
            gid,
            flow_label: be32(b, 52),
        }
    }
}

fn tid_of(m: &[u8; MAD_SIZE]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&m[8..16]);
    u64::from_be_bytes(w)
}

fn be32(b: &[u8; UMAD_HDR_SIZE], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(w)
}

fn ne32(b: &[u8; UMAD_HDR_SIZE], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_ne_bytes(w)
}

impl Dest {
    fn address(self) -> Address {
        match self {
            Dest::Directed => Address {
                lid: PERMISSIVE_LID,
                ..Address::default()
            },
            Dest::Lid(lid) => Address {
                lid,
                ..Address::default()
            },
            Dest::Address(a) => a,
        }
    }
}

/// A MAD read from the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The 256 MAD bytes (for a timeout: the request that timed out).
    pub mad: [u8; MAD_SIZE],
    /// Header status: 0, or [`STATUS_TIMEOUT`] when the kernel gave up on a request.
    pub status: u32,
    /// Agent id from the header. On a kernel, the agent it arrived on (see
    /// [`UmadPort::agent_id`]); under umad2sim a response carries ibsim's client id
    /// instead, so do not route on it.
    pub agent_id: u32,
    /// Header `length` field.
    pub length: u32,
    /// Where it came from (LID, QP, SL...). For DR SMPs the LID is usually 0xFFFF or 0.
    pub source: Address,
}

impl Received {
    /// The kernel timed out the request in [`Received::mad`].
    pub fn is_timeout(&self) -> bool {
        self.status == STATUS_TIMEOUT
    }

    /// Management class byte of the MAD.
    pub fn mgmt_class(&self) -> u8 {
        self.mad[1]
    }

    /// Method byte of the MAD.
    pub fn method(&self) -> u8 {
        self.mad[3]
    }

    /// The MAD's TID (on a request we sent, the upper 32 bits are the agent's, set by
    /// the kernel or ibsim).
    pub fn tid(&self) -> u64 {
        tid_of(&self.mad)
    }

    /// Decode the MAD as an SMP.
    pub fn smp(&self) -> Result<Smp, MadError> {
        Smp::decode(&self.mad)
    }
}

/// Size of one read or write on the device: the header and a MAD.
pub const UMAD_READ_SIZE: usize = UMAD_HDR_SIZE + MAD_SIZE;

/// Why the bytes of a `read` are not a MAD (the device-free half of
/// [`UmadError::ShortRead`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// Fewer bytes than the 56-byte header.
    #[error("short read: {len} bytes, need at least {UMAD_HDR_SIZE}")]
    Short { len: usize },
}

/// Decode what one `read` of a umad descriptor returned (`bytes` is exactly the bytes
/// read). Pure, so it is unit-tested and fuzzed without a device. `Ok(None)` is
/// umad2sim's "no packet" (a header with status EAGAIN and less than a MAD header
/// behind it). A MAD shorter than 256 bytes is zero-filled; bytes past
/// [`UMAD_READ_SIZE`] are ignored (a read never returns more).
pub fn decode_read(bytes: &[u8]) -> Result<Option<Received>, ReadError> {
    let Some(hdr) = bytes
        .get(..UMAD_HDR_SIZE)
        .and_then(|h| <&[u8; UMAD_HDR_SIZE]>::try_from(h).ok())
    else {
        return Err(ReadError::Short { len: bytes.len() });
    };
    let n = bytes.len().min(UMAD_READ_SIZE);
    let status = ne32(hdr, 4);
    if n < UMAD_HDR_SIZE + 24 && status == libc::EAGAIN as u32 {
        return Ok(None);
    }
    let mut mad = [0u8; MAD_SIZE];
    let body = bytes.get(UMAD_HDR_SIZE..n).unwrap_or(&[]);
    mad[..body.len()].copy_from_slice(body);
    Ok(Some(Received {
        mad,
        status,
        agent_id: ne32(hdr, 0),
        length: ne32(hdr, 16),
        source: Address::decode(hdr),
    }))
}

impl Received {
    /// The bytes a `read` returns for this MAD (timeout_ms and retries 0):
    /// [`decode_read`] of them gives `self` back. Tests and fuzzing use it; the device
    /// writes with [`UmadPort::send_with`].
    pub fn encode(&self) -> [u8; UMAD_READ_SIZE] {
        let mut hdr = [0u8; UMAD_HDR_SIZE];
        hdr[0..4].copy_from_slice(&self.agent_id.to_ne_bytes());
        hdr[4..8].copy_from_slice(&self.status.to_ne_bytes());
        hdr[16..20].copy_from_slice(&self.length.to_ne_bytes());
        self.source.encode(&mut hdr);
        let mut out = [0u8; UMAD_READ_SIZE];
        out[..UMAD_HDR_SIZE].copy_from_slice(&hdr);
        out[UMAD_HDR_SIZE..].copy_from_slice(&self.mad);
        out
    }
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

fn method_mask() -> [u32; 4] {
    let mut mask = [0u32; 4];
    for m in METHODS {
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
struct DeviceFd(RawFd);

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

fn open_device(path: &Path) -> Result<DeviceFd> {
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

/// An open `umadN` with agents for SMP classes 0x01 and 0x81 on QP0. Blocking; use
/// from one thread (it is `Send`, so move it there).
#[derive(Debug)]
pub struct UmadPort {
    fd: DeviceFd,
    path: PathBuf,
    ca_index: u32,
    lid_agent: u32,
    dr_agent: u32,
    opts: UmadOptions,
}

impl UmadPort {
    /// Open `<device_dir>/umad<ca_index>` and register the two SMP agents.
    pub fn open(ca_index: u32, opts: UmadOptions) -> Result<UmadPort> {
        let path = opts.device_dir.join(format!("umad{ca_index}"));
        let fd = open_device(&path)?;
        let lid_agent = register_agent(&fd, &path, CLASS_SUBN_LID_ROUTED)?;
        let dr_agent = register_agent(&fd, &path, CLASS_SUBN_DIRECTED_ROUTE)?;
        tracing::debug!(path = %path.display(), fd = fd.as_raw_fd(), lid_agent, dr_agent, "umad port open");
        Ok(UmadPort {
            fd,
            path,
            ca_index,
            lid_agent,
            dr_agent,
            opts,
        })
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

    /// The agent id registered for management class `class` (0x01 or 0x81).
    pub fn agent_id(&self, class: u8) -> Option<u32> {
        match class {
            CLASS_SUBN_LID_ROUTED => Some(self.lid_agent),
            CLASS_SUBN_DIRECTED_ROUTE => Some(self.dr_agent),
            _ => None,
        }
    }

    /// Send a MAD. Requests (method bit 7 clear) get the port's request timeout and
    /// retries so their response comes back; responses are sent with timeout 0.
    pub fn send(&self, mad: &[u8; MAD_SIZE], dest: Dest) -> Result<()> {
        let is_response = mad[3] & 0x80 != 0;
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
    /// `retries`.
    pub fn send_with(
        &self,
        mad: &[u8; MAD_SIZE],
        dest: Dest,
        timeout_ms: u32,
        retries: u32,
    ) -> Result<()> {
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
        hdr[16..20].copy_from_slice(&(MAD_SIZE as u32).to_ne_bytes());
        dest.address().encode(&mut hdr);
        buf[..UMAD_HDR_SIZE].copy_from_slice(&hdr);
        buf[UMAD_HDR_SIZE..].copy_from_slice(mad);
        let n = nix::unistd::write(self.fd.as_fd(), &buf).map_err(|e| UmadError::Send {
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
            let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
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

fn register_agent(fd: &DeviceFd, path: &Path, class: u8) -> Result<u32> {
    let mut req = RegReq {
        method_mask: method_mask(),
        qpn: 0,
        mgmt_class: class,
        mgmt_class_version: 1,
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
            class,
            errno: Errno::last(),
        });
    }
    Ok(req.id)
}

/// An open `issmN`: while it lives, the port advertises IsSM in
/// PortInfo.CapabilityMask. Dropping it closes the file and clears the bit.
#[derive(Debug)]
pub struct IssmHandle {
    _fd: DeviceFd,
    path: PathBuf,
}

impl IssmHandle {
    /// The device path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for IssmHandle {
    fn drop(&mut self) {
        tracing::debug!(path = %self.path.display(), "closing issm: IsSM cleared");
    }
}

/// Open `/dev/infiniband/issm<ca_index>` (set IsSM on that port).
pub fn open_issm(ca_index: u32) -> Result<IssmHandle> {
    open_issm_in(Path::new(DEFAULT_DEVICE_DIR), ca_index)
}

/// [`open_issm`] with another device directory.
pub fn open_issm_in(device_dir: &Path, ca_index: u32) -> Result<IssmHandle> {
    let path = device_dir.join(format!("issm{ca_index}"));
    let fd = open_device(&path)?;
    tracing::debug!(path = %path.display(), "issm open: IsSM set");
    Ok(IssmHandle { _fd: fd, path })
}

/// Which umad device to use.
///
/// Accepted forms: `umadN` or `N` (device index), `umad:CA:PORT` or `CA:PORT`
/// (e.g. `umad:mlx5_0:1`), `umad:CA` (port 1) and `umad` (umad0). `umad:N` is the index
/// `N`. A CA name is resolved through sysfs, which exists only on a real kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortSpec {
    /// `umadN`.
    Index(u32),
    /// A CA (ibdev name) and its port number.
    CaPort { ca: String, port: u8 },
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
            return Ok(PortSpec::Index(0));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_mask_has_get_set_trap_trap_repress() {
        let m = method_mask();
        assert_eq!(m[0], (1 << 1) | (1 << 2) | (1 << 5) | (1 << 7));
        assert_eq!(&m[1..], &[0, 0, 0]);
    }

    #[test]
    fn address_block_round_trips() {
        let a = Address {
            qpn: 1,
            qkey: 0x8001_0000,
            lid: 0x1234,
            sl: 3,
            path_bits: 1,
            grh_present: true,
            gid_index: 2,
            hop_limit: 64,
            traffic_class: 5,
            gid: [7; 16],
            flow_label: 0xabcde,
        };
        let mut h = [0u8; UMAD_HDR_SIZE];
        a.encode(&mut h);
        assert_eq!(Address::decode(&h), a);
        // LID is big-endian at offset 28.
        assert_eq!(&h[28..30], &[0x12, 0x34]);
        let mut h = [0u8; UMAD_HDR_SIZE];
        Dest::Directed.address().encode(&mut h);
        assert_eq!(&h[28..30], &[0xff, 0xff]);
    }

    #[test]
    fn read_decodes_the_header_and_zero_fills_a_short_mad() {
        let mut b = vec![0u8; UMAD_HDR_SIZE + 40];
        b[0..4].copy_from_slice(&7u32.to_ne_bytes());
        b[4..8].copy_from_slice(&STATUS_TIMEOUT.to_ne_bytes());
        b[16..20].copy_from_slice(&256u32.to_ne_bytes());
        b[28..30].copy_from_slice(&0x0012u16.to_be_bytes());
        b[UMAD_HDR_SIZE + 1] = CLASS_SUBN_DIRECTED_ROUTE;
        b[UMAD_HDR_SIZE + 3] = 0x81;
        b[UMAD_HDR_SIZE + 39] = 0xAB;
        let r = decode_read(&b).expect("a header").expect("a MAD");
        assert_eq!(r.agent_id, 7);
        assert!(r.is_timeout());
        assert_eq!(r.length, 256);
        assert_eq!(r.source.lid, 0x12);
        assert_eq!(r.mgmt_class(), CLASS_SUBN_DIRECTED_ROUTE);
        assert_eq!(r.method(), 0x81);
        assert_eq!(r.mad[39], 0xAB);
        assert!(r.mad[40..].iter().all(|&x| x == 0));
        assert_eq!(decode_read(&r.encode()), Ok(Some(r)));
    }

    #[test]
    fn read_shorter_than_a_header_is_an_error() {
        assert_eq!(decode_read(&[0; 55]), Err(ReadError::Short { len: 55 }));
        assert_eq!(decode_read(&[]), Err(ReadError::Short { len: 0 }));
    }

    #[test]
    fn umad2sim_eagain_header_is_no_packet() {
        let mut b = [0u8; UMAD_HDR_SIZE];
        b[4..8].copy_from_slice(&(libc::EAGAIN as u32).to_ne_bytes());
        assert_eq!(decode_read(&b), Ok(None));
        // With a whole MAD behind it the status is the MAD's, not "nothing".
        let mut full = [0u8; UMAD_READ_SIZE];
        full[..UMAD_HDR_SIZE].copy_from_slice(&b);
        assert!(matches!(decode_read(&full), Ok(Some(_))));
    }

    #[test]
    fn port_specs() {
        assert_eq!(PortSpec::parse("umad").ok(), Some(PortSpec::Index(0)));
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

            #[test]
            fn read_decode_never_panics_and_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
                match decode_read(&bytes) {
                    Err(ReadError::Short { len }) => prop_assert!(len < UMAD_HDR_SIZE),
                    Ok(None) => prop_assert!(bytes.len() < UMAD_HDR_SIZE + 24),
                    Ok(Some(r)) => {
                        let n = bytes.len().min(UMAD_READ_SIZE);
                        prop_assert_eq!(&r.mad[..n - UMAD_HDR_SIZE], &bytes[UMAD_HDR_SIZE..n]);
                        prop_assert_eq!(decode_read(&r.encode()), Ok(Some(r)));
                    }
                }
            }

            #[test]
            fn address_round_trips(qpn: u32, qkey: u32, lid: u16, sl: u8, path_bits: u8, grh_present: bool,
                                   gid_index: u8, hop_limit: u8, traffic_class: u8, gid: [u8; 16], flow_label: u32) {
                let a = Address { qpn, qkey, lid, sl, path_bits, grh_present, gid_index, hop_limit, traffic_class, gid, flow_label };
                let mut h = [0u8; UMAD_HDR_SIZE];
                a.encode(&mut h);
                prop_assert_eq!(Address::decode(&h), a);
                // The agent/status/timeout/retries/length words are not touched.
                prop_assert_eq!(&h[..20], &[0u8; 20]);
            }
        }
    }
}
