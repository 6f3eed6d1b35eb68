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
//!
//! The files: `header` (the umad header, [`Dest`], [`Received`] and [`decode_read`]:
//! pure, no device), `error` ([`UmadError`]), `device` ([`UmadPort`]: opening `umadN`,
//! registering the agents, send and receive, the 0-hop start-up query), `issm`
//! ([`IssmHandle`]) and `port` ([`PortSpec`] and its sysfs lookup). This file holds
//! only this doc and the re-exports, so every `ibsm_umad::X` path is the crate root's.

mod device;
mod error;
mod header;
mod issm;
mod port;

pub use device::{
    UmadOptions, UmadPort, CLASS_SUBN_DIRECTED_ROUTE, CLASS_SUBN_LID_ROUTED, DEFAULT_DEVICE_DIR,
    IB_USER_MAD_REGISTER_AGENT,
};
pub use error::{Result, UmadError};
pub use header::{
    decode_read, Address, Dest, ReadError, Received, MAD_SIZE, PERMISSIVE_LID, STATUS_TIMEOUT,
    UMAD_HDR_SIZE, UMAD_READ_SIZE,
};
pub use issm::{open_issm, open_issm_in, IssmHandle};
pub use port::{PortSpec, DEFAULT_SYSFS_DIR};
