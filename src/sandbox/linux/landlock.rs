//! `LandlockPlan` → a Landlock domain on this thread. Every right the plan
//! promises is a hard requirement: a kernel that cannot enforce it makes
//! this an error, never a silent partial ruleset.

use enumflags2::BitFlags;
use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetError, RulesetStatus, Scope,
};

use crate::plan::fs::LandlockPlan;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LandlockError {
    #[error("Landlock ABI {0} is not known to this build")]
    UnknownAbi(u8),
    #[error("invalid access rights {0:#x} in the plan")]
    Rights(u64),
    #[error("cannot create the Landlock ruleset: {0}")]
    Ruleset(#[from] RulesetError),
    #[error("cannot open {path} for a Landlock rule: {source}")]
    Open {
        path: std::path::PathBuf,
        source: landlock::PathFdError,
    },
    #[error("Landlock is only partly enforced by this kernel ({0:?})")]
    NotFullyEnforced(RulesetStatus),
}

fn abi(v: u8) -> Result<ABI, LandlockError> {
    Ok(match v {
        1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        5 => ABI::V5,
        6 => ABI::V6,
        7 => ABI::V7,
        other => return Err(LandlockError::UnknownAbi(other)),
    })
}

/// Restrict the calling thread (and its future children) to `plan`.
pub fn restrict(plan: &LandlockPlan) -> Result<(), LandlockError> {
    let _ = abi(plan.abi)?;
    let handled: BitFlags<AccessFs> =
        BitFlags::from_bits(plan.handled_fs).map_err(|_| LandlockError::Rights(plan.handled_fs))?;
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(handled)?;
    if plan.deny_tcp {
        ruleset = ruleset.handle_access(AccessNet::from_all(ABI::V4))?;
    }
    if plan.scope {
        ruleset = ruleset.scope(Scope::AbstractUnixSocket | Scope::Signal)?;
    }
    let mut created = ruleset.create()?;
    for rule in &plan.rules {
        let access: BitFlags<AccessFs> =
            BitFlags::from_bits(rule.access).map_err(|_| LandlockError::Rights(rule.access))?;
        let fd = match PathFd::new(&rule.path) {
            Ok(fd) => fd,
            // Gone since planning, or absent from the FULL tier's view:
            // not granting it is the safe side.
            Err(landlock::PathFdError::OpenCall { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                continue;
            }
            Err(source) => {
                return Err(LandlockError::Open {
                    path: rule.path.clone(),
                    source,
                });
            }
        };
        created = created.add_rule(PathBeneath::new(fd, access))?;
    }
    let status = created.restrict_self()?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(LandlockError::NotFullyEnforced(status.ruleset));
    }
    Ok(())
}
