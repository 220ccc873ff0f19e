//! The OS floor: the few primitives every layer of vetto speaks — file
//! identity, modes, descriptors, errno and signals (`os`), a directory's
//! facts as the walks compare them (`lstat`), and writing outside the
//! sandbox without following what a job planted (`safe_fs`). Below
//! everything: it imports nothing of vetto's, and the platform backend
//! (`sandbox`), the only place that applies a plan, builds on it too.

// The Unix vocabulary the rest of vetto speaks, and Windows' answers to it.
#[cfg(unix)]
#[path = "os_unix.rs"]
pub mod os;
#[cfg(windows)]
#[path = "os_windows.rs"]
pub mod os;
// A directory's facts as the walks compare them, built from `os`'s answers.
#[cfg(any(unix, windows))]
mod lstat;
// Writing outside the sandbox without following what a job planted.
#[cfg(unix)]
#[path = "safe_fs_unix.rs"]
pub mod safe_fs;
#[cfg(windows)]
#[path = "safe_fs_windows.rs"]
pub mod safe_fs;
// Its refusals and parent rules, one definition for Unix and Windows.
mod safe_fs_common;
// The kernel's answers the host probe asks for (Landlock, seccomp, user
// namespaces); on other systems every answer is "not supported".
#[cfg(target_os = "linux")]
#[path = "caps_linux.rs"]
pub mod caps;
#[cfg(not(target_os = "linux"))]
#[path = "caps_other.rs"]
pub mod caps;
