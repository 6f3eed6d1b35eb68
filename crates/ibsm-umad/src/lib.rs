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
//!   36-byte address block) followed by the MAD: 256 bytes, or on a write as few as
//!   [`MIN_WRITE_MAD`] (an RMPP sender's last segment). umad2sim assumes this layout.
//! - **Two agents on QP0**: class 0x81 (directed route) and 0x01 (LID routed), class
//!   version 1, method mask Get/Set/Trap/TrapRepress so unsolicited *requests* arrive
//!   (SubnGet/Set(SMInfo) from other SMs, traps). Responses (GetResp 0x81) cannot be in the
//!   128-bit mask (it holds methods 0..=127); the kernel delivers them to the agent
//!   that sent the request, matched by TID, as long as the request was sent with a
//!   non-zero `timeout_ms`. [`UmadPort::send`] picks the agent from the MAD's class byte.
//! - **GSI agents on QP1, on request.** [`UmadPort::register_gsi`] adds one per GMP
//!   class, e.g. [`GsiClass::SUBN_ADM`]: the Subnet Administrator, class 0x03, class
//!   version 2, requests Get 0x01, Set 0x02, GetTable 0x12, GetTraceTable 0x13, GetMulti
//!   0x14, Delete 0x15 (what an SA receives; responses to our own requests, ReportResp
//!   0x86 among them, come by TID as above). Not registered by [`UmadPort::open`]: a tool
//!   that only sweeps must keep working on a port where another SA (OpenSM's) holds the
//!   class. [`UmadPort::send_gmp`] sends to a [`ibsm_mad::MadAddress`] through
//!   [`Dest::Address`]; [`Received::source_address`] is where a GMP came from, the address
//!   its answer goes to (the header never reports a Q_Key, so it fills in the GSI one;
//!   [`Address`] lists what each side puts in the address block).
//! - **RMPP: `rmpp_version` 0, raw segments, on a kernel and under umad2sim alike.**
//!   The SA segments its GetTableResp and handles ACKs itself, so both must pass raw
//!   segments. Facts from the sources:
//!   * Kernel (`drivers/infiniband/core/user_mad.c`, `mad.c`, `mad_rmpp.c`): only 0 and
//!     1 are accepted, and 1 only for RMPP classes. Kernel RMPP is on when
//!     `ib_mad_kernel_rmpp_agent()`: `rmpp_version != 0` and no `IB_MAD_USER_RMPP` flag
//!     (the legacy REGISTER_AGENT ioctl has no flags). With 0, `ib_umad_write` copies the
//!     bytes written as they are (no segmentation; a write shorter than 256 bytes, as
//!     an RMPP sender's last segment, is padded with zeros to a whole MAD on the wire,
//!     and one shorter than the class's header is refused), and a write whose RMPP header has the
//!     Active flag skips the duplicate-TID check, so all segments of one response (one
//!     TID) can be in flight; on receive there is no reassembly, every segment reaches
//!     the reader on its own. A response segment with no outstanding request (every
//!     segment after the first of a multi-segment answer to our own request) is still
//!     delivered when its RMPP Active flag is set ("user rmpp is in effect" in
//!     `ib_mad_complete_recv`), else dropped. With 1 the kernel would segment our
//!     writes and reassemble our reads itself. A requester with kernel RMPP (`saquery`
//!     registers class 0x03 with rmpp_version 1) ACKs each window with the data
//!     segment's header and the response bit flipped (`format_ack`): the ACK of a
//!     GetTableResp (0x92) is method 0x12 and arrives at the SA through the method
//!     mask, as an unsolicited request with RMPPType ACK.
//!   * umad2sim (ibsim 0.10, `umad2sim/umad2sim.c`): `register_agent` stores
//!     `rmpp_version` and the method mask and uses neither. Every MAD, segment or not,
//!     crosses as one packet of the length written (at most 256 bytes; the reader's
//!     `read` returns that length), both ways, and ibsim has no RMPP either; that is
//!     why GetTable answers reach `saquery` truncated under umad2sim (it expects the
//!     kernel to reassemble; `/work/shared/notes/fabric-lab.md`).
//!   * A GMP Get or Set that no agent on the port claims is answered by the kernel
//!     itself with GetResp status 0x000C (`generate_unmatched_resp` in `mad.c`); ibsim
//!     drops it instead (below).
//! - **How ibsim delivers a GMP** (ibsim 0.10 `ibsim/sim_mad.c` `process_packet`,
//!   `ibsim/ibsim.c` `find_client`, `umad2sim/umad2sim.c`):
//!   * ibsim answers only SMPs (0x01/0x81) and PerfMgt (0x04) itself; a MAD of any other
//!     class (ClassVersion up to 2) is LID-routed like a LID-routed SMP, through the
//!     switches' LinearForwardingTables, every port crossed LinkUp *and* Active, and
//!     handed to a client at the destination port.
//!   * Which client (`find_client`): a response goes to the client whose id ibsim put in
//!     TID bits 63..48 of the request; a request to QP 0 or 1 goes **only to the
//!     client with IsSM set** (`issmN` open, or `SIM_SET_ISSM`), so an SA under ibsim
//!     must hold `issmN` open; requests to QPs > 1 match the QP a client connected with,
//!     which umad2sim always sends as 0, so they reach nobody. No taker: the MAD is
//!     dropped and comes straight back to its sender with status 110 (ETIMEDOUT). Only
//!     an HCA's first port has clients (`node_get_port(node, 0)`). Observed too
//!     (`crates/ibsm-transport/tests/ibsim_sa.rs`): with class 0x03 registered but no
//!     `issm0` open, `saquery -c` aimed at us exits at once with status 110 and nothing
//!     arrives; with `issm0` open the Get arrives.
//!   * Inside the client process umad2sim queues the MAD on the descriptor that
//!     registered its class (`agent_fds[class]`, one agent per class; a second
//!     registration replaces the first), so class 0x03 must be registered: for an
//!     unregistered class the slot holds -1, and `get_fd_data(-1)` (its range check
//!     never rejects) hands back another descriptor's queue or none, in which case the
//!     receiver thread dereferences NULL. The read's address
//!     block: `lid` = the sender's port LID (umad2sim sends SLID 0, ibsim fills it in),
//!     `qpn` = the QP the sender's agent registered on (1 for `saquery`), `qkey` 0,
//!     `sl` 0, no GRH. A request's TID keeps its low 32 bits, bits 47..32 are the
//!     sending agent (umad2sim), 63..48 the ibsim client: answer with the TID unchanged.
//!   * What we write: DLID = `addr.lid`, destination QP = `addr.qpn`, source QP = our
//!     agent's QP (1), SLID 0 (ibsim fills in our port's LID).
//!   * MulticastForwardingTable (0x1B): SubnGet/Set on switches (`do_multicastforwtbl`),
//!     AttributeModifier bits 31..28 = position (16 ports each), bits 8..0 = block of 32
//!     MLIDs; a block past 31 (1024 MLIDs, compiled in) or a position >= (NumPorts + 16)
//!     / 16 reads as zeros with status 0, and a Set there is ignored without an error.
//!     SwitchInfo.MulticastFDBCap is 1024 (`ibsim -M` changes it). ibsim does **not**
//!     forward multicast: a DLID >= 0xC000 is looked up in the linear table, which
//!     refuses LIDs above LinearFDBTop, so it is dropped.
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
//!   `umad:CA:PORT` / `CA:PORT` (e.g. `umad:mlx5_0:1`), and `umad` (the first port
//!   whose link is up, as OpenSM without `-g`; umad0 when sysfs says nothing); a
//!   CA/port pair is resolved through sysfs
//!   (`/sys/class/infiniband_mad/umadN/{ibdev,port}`) on a real kernel.
//!   Under umad2sim the sysfs is faked for libibumad only (std cannot read it), so use
//!   `umad0` and learn the local node and port with a 0-hop DR SubnGet(NodeInfo) and
//!   (PortInfo) ([`UmadPort::get_local`]).
//!
//! MADs cross this API as raw 256-byte arrays (that is what the device reads, and
//! what a transaction layer matches TIDs on; a send takes a slice, at most 256 bytes
//! and usually all of them); `ibsm_mad::Smp` encodes and
//! decodes them ([`Received::smp`], [`UmadPort::get_local_attr`]).
//! What a `read` returned is decoded by the pure [`decode_read`] (no device), so the
//! header handling is unit-tested and fuzzed (`fuzz/fuzz_targets/umad_read.rs`).
//!
//! The files: `header` (the umad header, [`Dest`], [`Received`] and [`decode_read`]:
//! pure, no device; also the [`Address`] <-> [`ibsm_mad::MadAddress`] mapping), `error`
//! ([`UmadError`]), `device` ([`UmadPort`]: opening `umadN`, registering the SMP and GSI
//! agents ([`GsiClass`]), send and receive, the 0-hop start-up query), `issm`
//! ([`IssmHandle`]) and `port` ([`PortSpec`] and its sysfs lookup). This file holds
//! only this doc and the re-exports, so every `ibsm_umad::X` path is the crate root's.

mod device;
mod error;
mod header;
mod issm;
mod port;

pub use device::{
    GsiClass, UmadOptions, UmadPort, CLASS_SUBN_ADM, CLASS_SUBN_DIRECTED_ROUTE,
    CLASS_SUBN_LID_ROUTED, DEFAULT_DEVICE_DIR, IB_USER_MAD_REGISTER_AGENT, SA_CLASS_VERSION,
};
pub use error::{Result, UmadError};
pub use header::{
    decode_read, Address, Dest, ReadError, Received, MAD_SIZE, MIN_WRITE_MAD, PERMISSIVE_LID,
    STATUS_TIMEOUT, UMAD_HDR_SIZE, UMAD_READ_SIZE,
};
pub use issm::{open_issm, open_issm_in, IssmHandle};
pub use port::{PortSpec, DEFAULT_SYSFS_DIR};
