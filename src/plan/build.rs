//! The tier ladder: choose a tier and translate the policy for it.

use super::{Plan, Refusal, TierRequest};
use crate::host::HostCaps;
use crate::policy::Policy;

/// Inputs to planning that come from the invocation rather than the policy.
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    pub allow_degraded: bool,
    /// The caller's environment, scrubbed into the job's.
    pub env: Vec<(String, String)>,
}

pub fn build(
    _policy: &Policy,
    _host: &HostCaps,
    _request: TierRequest,
    _options: &BuildOptions,
) -> Result<Plan, Refusal> {
    Err(Refusal {
        tier: None,
        rule: "everything".into(),
        missing: super::KernelFeature::NotImplemented,
        detail: String::new(),
        hint: "wait for the next commit".into(),
    })
}
