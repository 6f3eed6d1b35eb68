//! ibsm-labkit: test-only helpers for the fabric lab (ibsim + umad2sim + OpenSM +
//! infiniband-diags). Read `/work/shared/notes/fabric-lab.md` for the facts this crate
//! is built on; the short version of *why* it looks the way it does:
//!
//! - **One simulator per test.** [`Ibsim::start`] gives every instance its own temp dir
//!   and its own `IBSIM_SOCKNAME` (`ibsm<pid>-<counter>-<random>`), so tests run in
//!   parallel (`cargo test` threads and several test binaries at once). ibsim binds
//!   abstract unix sockets `@<sockname>:ctl` etc.; readiness is "stdout printed the
//!   `Network simulator ready.` banner and the first `sim> ` prompt, and
//!   `/proc/net/unix` lists `@<sockname>:ctl`".
//! - **Console on a FIFO, without `-n`.** ibsim's `-n` flag means *no console*: it then
//!   never reads stdin, so console commands would be lost. Without `-n` and with stdin at
//!   EOF the console spins a core. So ibsim runs *without* `-n`, with stdin a FIFO
//!   (`<dir>/console`) whose write end [`Ibsim`] keeps open for its whole life. You can
//!   also `echo Dump > <dir>/console` by hand while debugging (set `IBSM_LAB_KEEP=1` to
//!   keep the temp dir after the test).
//! - **Console output is a file.** ibsim's stdout goes to `<dir>/ibsim.out`. A console
//!   command's answer is whatever ibsim prints between our write and its next `sim> `
//!   prompt; commands are serialized by a mutex so parallel threads sharing one
//!   `Ibsim` never interleave. Never truncate that file: ibsim writes at its own offset.
//! - **Dead clients.** ibsim does not notice that a client died (a SIGKILLed SM keeps its
//!   port registration, IsSM and a client slot) until it forwards a MAD to it: then the
//!   write is refused and ibsim drops it ("client N seems to be dead - disconnecting" on
//!   its stderr; the MAD is lost, so the sender times out). [`Ibsim::reap_dead_clients`]
//!   does what a real kernel does on process exit: it lists `Attached` clients and
//!   sends `X <n>` for each whose pid is gone (or a zombie).
//! - **Clients.** [`Ibsim::command`] / [`Ibsim::command_on`] return a
//!   `std::process::Command` with `LD_PRELOAD=umad2sim`, `IBSIM_SOCKNAME` and `SIM_HOST`
//!   set, for infiniband-diags, OpenSM and our own binaries. [`run_with_timeout`] runs one
//!   with a deadline so a wedged client fails the test instead of hanging it.
//! - **Never skip.** A missing tool is an error ([`require_tool`], [`LabError::ToolMissing`]),
//!   never a silent pass. `IBSM_REQUIRE_LAB=1` (CI) changes nothing here because we
//!   already fail; it is reported in the error text so the reader knows why.
//! - **Cleanup.** Dropping [`Ibsim`] SIGKILLs ibsim and every process started through
//!   [`Ibsim::spawn`] or [`OpenSm::start`] that is still running; [`OpenSm`] and
//!   [`ChildGuard`] also kill their process on their own drop (also on panic unwinding).
//!   A long-running owner that may itself be SIGKILLed (`ibsmd demo --fabric ibsim:`,
//!   the one non-test user) sets [`IbsimOptions::die_with_parent`] and calls
//!   [`die_with_parent`] on its clients' commands: `PR_SET_PDEATHSIG` then kills them
//!   with it. [`ChildGuard::take_stdout`] lets it read a client's piped stdout.
//!
//! - **The SA judge.** [`Ibsim::saquery`] runs `saquery` from a chosen HCA and parses
//!   its records into `(field, value)` lists exactly as printed ([`SaRecord`],
//!   [`SaTable`]); [`compare`] / [`compare_by_key`] list every field where two SAs'
//!   answers differ ([`Difference`]); [`Ibsim::ibroute_mft`] reads a switch's MFT
//!   (`ibroute -M`); [`OpenSmOptions::guid2lid`] starts OpenSM with fixed LIDs, so
//!   ibsm's SA and OpenSM's can be asked the same questions about the same LIDs.
//!   What saquery can see through umad2sim (the first 224 bytes of the first MAD of
//!   each answer: one NodeRecord, two PortInfoRecords, 21 LinkRecords, ...) is in
//!   `sa_record.rs`; where its queries go (the caller's MasterSMLID, no option to aim
//!   elsewhere) in `saquery.rs`; saquery's failures in `sa_error.rs`; the guid2lid
//!   format OpenSM really reads (an empty line after every entry) in `osm_files.rs`.
//!
//! # Files
//!
//! `error.rs` holds [`LabError`], `parse.rs` the pure parsers of ibsim's text, `tools.rs`
//! the tool checks, `files.rs` the temp dirs and output files, `child.rs` the child
//! processes (guards, deadlines, death signal), `ibsim.rs` the ibsim process, `console.rs`
//! its console commands, `clients.rs` the umad2sim commands of its clients,
//! `osm_files.rs` OpenSM's guid2lid file and `opensm.rs` OpenSM; the SA judge is
//! `sa_record.rs` (saquery's output as records), `sa_error.rs` (its failures, and
//! below `error.rs`), `sa_compare.rs`, `saquery.rs` (the runner) and `mft.rs`
//! (`ibroute -M`). `ibsmd.rs` starts an `ibsmd` binary on a node ([`Ibsmd`]: the
//! caller passes the path, this crate does not depend on the daemon) and waits for
//! its `subnet up`; `lids.rs` reads the LIDs a master gave back from the fabric
//! (`ibnetdiscover -p`, [`Ibsim::port_lids`]) as the guid2lid OpenSM takes
//! ([`guid2lid_of`]). Each builds only on the ones before it.

mod child;
mod clients;
mod console;
mod error;
mod files;
mod ibsim;
mod ibsmd;
mod lids;
mod mft;
mod opensm;
mod osm_files;
mod parse;
mod pkeys;
mod sa_compare;
mod sa_error;
mod sa_record;
mod saquery;
mod tools;

#[cfg(test)]
mod tests;

pub use child::{die_with_parent, pid_alive, run_ok, run_with_timeout, ChildGuard};
pub use error::{LabError, Result};
pub use files::KEEP_ENV;
pub use ibsim::{Ibsim, IbsimOptions};
pub use ibsmd::{grpc_addr_in_log, start_replicated_cluster, Ibsmd, IbsmdOptions, IBSMD_SUBNET_UP};
pub use lids::{guid2lid_of, parse_ibnetdiscover_ports, PortLid};
pub use mft::{parse_ibroute_mft, SwitchMft};
pub use opensm::{OpenSm, OpenSmOptions};
pub use osm_files::{format_guid2lid, parse_guid2lid, Guid2LidEntry};
pub use parse::{net_file_size, parse_attached, AttachedClient, NetFileSize};
pub use pkeys::parse_smpquery_pkeys;
pub use sa_compare::{compare, compare_by_key, compare_records, render, Difference};
pub use sa_error::{classify_saquery, SaqueryError};
pub use sa_record::{
    parse_number, parse_saquery, record_size, SaRecord, SaTable, SA_DATA_DELIVERED, SA_DATA_OFFSET,
    SA_DATA_PER_MAD, SR_UNDELIVERED_FIELDS, UMAD2SIM_MAD_BYTES,
};
pub use saquery::{PathQuery, Saquery, SaqueryOutput, IBSM_SA_RESEND_SPAN, SAQUERY_TIMEOUT};
pub use tools::{
    example_net, require_lab, require_tool, require_umad2sim, NET_EXAMPLES, REQUIRE_LAB_ENV,
    UMAD2SIM_LIB,
};
