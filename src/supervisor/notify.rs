//! The notification server, as the supervisor sees it: the backend's
//! server and the plan's vocabulary for what it decided.

pub use crate::plan::notify::{Decision, EgressBroker, NotifyEvent, Reason, is_violation};
pub use crate::sandbox::notify_server::{EntryChanges, NotifyServer, SharedCreations, serve};
