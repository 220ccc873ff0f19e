//! The parent side: waits for the job, forwards signals, enforces limits and
//! answers seccomp notifications.

pub mod notify;

use crate::exit::Outcome;
use crate::plan::Plan;
use crate::sandbox::Spawned;

pub fn run(_child: Spawned, _plan: &Plan) -> Outcome {
    Outcome::ExecFailed(crate::exit::REFUSED)
}
