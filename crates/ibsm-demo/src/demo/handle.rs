//! [`DemoHandle`]: what the Demo service holds, fronting either demo (embedded or on
//! ibsim) without keeping it alive.

use std::sync::{Arc, Weak};

use super::shared::DemoShared;
use super::types::{DemoError, MemberInfo, Selector};

/// What the Demo gRPC service holds: a weak reference, so servers do not keep the
/// demo alive (and no reference cycle forms). Either the embedded demo or the one on
/// ibsim ([`crate::ibsim`]); the service asks [`DemoHandle::ibsim`] first.
#[derive(Clone)]
pub struct DemoHandle(Backend);

#[derive(Clone)]
enum Backend {
    Embedded(Weak<DemoShared>),
    Ibsim(Weak<crate::ibsim::IbsimShared>),
}

impl std::fmt::Debug for DemoHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DemoHandle")
    }
}

impl DemoHandle {
    fn get(&self) -> Result<Arc<DemoShared>, DemoError> {
        match &self.0 {
            Backend::Embedded(w) => w
                .upgrade()
                .ok_or_else(|| DemoError::Unavailable("the demo is shutting down".into())),
            Backend::Ibsim(_) => Err(DemoError::FailedPrecondition(
                "this demo runs on ibsim; the embedded fabric's drills do not apply".into(),
            )),
        }
    }

    /// The handle of the embedded demo.
    pub(super) fn of_embedded(shared: Weak<DemoShared>) -> DemoHandle {
        DemoHandle(Backend::Embedded(shared))
    }

    /// The handle of a demo on ibsim.
    pub(crate) fn of_ibsim(shared: Weak<crate::ibsim::IbsimShared>) -> DemoHandle {
        DemoHandle(Backend::Ibsim(shared))
    }

    /// `Some` when this demo runs on ibsim (its members are separate processes).
    pub fn ibsim(&self) -> Option<Result<Arc<crate::ibsim::IbsimShared>, DemoError>> {
        match &self.0 {
            Backend::Embedded(_) => None,
            Backend::Ibsim(w) => Some(
                w.upgrade()
                    .ok_or_else(|| DemoError::Unavailable("the demo is shutting down".into())),
            ),
        }
    }

    /// See [`Demo::members`].
    pub fn members(&self) -> Result<Vec<MemberInfo>, DemoError> {
        Ok(self.get()?.members())
    }

    /// See [`Demo::kill`].
    pub async fn kill(&self, sel: &Selector) -> Result<MemberInfo, DemoError> {
        self.get()?.kill(sel).await
    }

    /// See [`Demo::restart`].
    pub async fn restart(&self, name: &str) -> Result<MemberInfo, DemoError> {
        self.get()?.restart(name).await
    }

    /// What the fabric-side SMInfo poller saw after `after_seq`.
    pub fn poll_sm_info(&self, after_seq: u64) -> Result<crate::poller::PollView, DemoError> {
        let shared = self.get()?;
        let p = shared.poller.lock().unwrap_or_else(|p| p.into_inner());
        p.as_ref().map(|p| p.since(after_seq)).ok_or_else(|| {
            DemoError::FailedPrecondition(
                "the demo fabric has no spare CA port for the SMInfo poller (it needs 4 CA ports)"
                    .into(),
            )
        })
    }

    /// Take the cable of member `name`'s CA port down (`up = false`) or up again.
    pub fn set_link(&self, name: &str, up: bool) -> Result<MemberInfo, DemoError> {
        let shared = self.get()?;
        let i = shared.find(&Selector::Name(name.to_string()))?;
        let members = shared.members.lock().unwrap_or_else(|p| p.into_inner());
        let m = members
            .get(i)
            .ok_or_else(|| DemoError::NotFound("member vanished".into()))?;
        let (node, port) = (m.node, m.port);
        shared
            .sim
            .with_sim(|s| {
                if up {
                    s.link_up(node, port)
                } else {
                    s.link_down(node, port)
                }
            })
            .map_err(|e| DemoError::Unavailable(format!("simulator: {e}")))?
            .map_err(|e| DemoError::FailedPrecondition(format!("link of {name}: {e}")))?;
        tracing::warn!(sm = %name, up, "demo drill: cable of the instance's port set");
        Ok(m.info())
    }

    /// Cut (`isolated = true`) or heal the Raft traffic of the member `sel` names,
    /// through its replica's fault switch. Its SM keeps running: only replication is
    /// cut, so a MASTER stays MASTER and reports itself degraded.
    pub fn set_raft_isolation(
        &self,
        sel: &Selector,
        isolated: bool,
    ) -> Result<MemberInfo, DemoError> {
        let shared = self.get()?;
        let i = shared.find(sel)?;
        let members = shared.members.lock().unwrap_or_else(|p| p.into_inner());
        let m = members
            .get(i)
            .ok_or_else(|| DemoError::NotFound("member vanished".into()))?;
        m.repl.replica().fault_switch().set_isolated(isolated);
        tracing::warn!(sm = %m.name, isolated, "demo drill: Raft traffic of the instance set");
        Ok(m.info())
    }
}
