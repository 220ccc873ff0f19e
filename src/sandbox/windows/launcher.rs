//! The Windows AppContainer launcher: applies a [`LaunchPlan`] and decides
//! nothing. The order, top to bottom:
//!
//! 1. encode the command line, the environment and the working directory
//!    (refused before anything on the host changes);
//! 2. create the session's AppContainer profile (deleted at the end);
//! 3. add an allow ACE for its SID on each granted path (removed at the
//!    end, on every path out: [`Grants`] is a guard);
//! 4. the Job Object with the plan's limits, killing the tree on close;
//! 5. the process, suspended, with `SECURITY_CAPABILITIES` (the container
//!    SID, the plan's capabilities) and LPAC (no `ALL APPLICATION
//!    PACKAGES`), inheriting only its three standard handles;
//! 6. into the job, then resumed: nothing of it runs outside the job;
//! 7. wait (`--timeout`: the job is terminated), then the job is
//!    terminated anyway, so nothing the job started outlives it.

use std::ffi::{OsStr, OsString};
use std::os::windows::ffi::OsStrExt;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::ptr::{null, null_mut};

use windows_sys::Win32::Foundation::{
    DUPLICATE_SAME_ACCESS, DuplicateHandle, ERROR_ALREADY_EXISTS, ERROR_SUCCESS, GetLastError,
    HANDLE, INVALID_HANDLE_VALUE, LocalFree, WAIT_OBJECT_0, WAIT_TIMEOUT,
};
use windows_sys::Win32::Security::Authorization::{
    ConvertStringSidToSidW, DENY_ACCESS, EXPLICIT_ACCESS_W, GRANT_ACCESS, GetNamedSecurityInfoW,
    NO_MULTIPLE_TRUSTEE, REVOKE_ACCESS, SE_FILE_OBJECT, SetEntriesInAclW, SetNamedSecurityInfoW,
    TRUSTEE_IS_SID, TRUSTEE_IS_UNKNOWN, TRUSTEE_W,
};
use windows_sys::Win32::Security::Isolation::{
    CreateAppContainerProfile, DeleteAppContainerProfile,
};
use windows_sys::Win32::Security::{
    ACL, DACL_SECURITY_INFORMATION, FreeSid, NO_INHERITANCE, PSECURITY_DESCRIPTOR, PSID,
    SECURITY_CAPABILITIES, SID_AND_ATTRIBUTES, SUB_CONTAINERS_AND_OBJECTS_INHERIT,
};
use windows_sys::Win32::Storage::FileSystem::{
    DELETE, FILE_ALL_ACCESS, FILE_APPEND_DATA, FILE_DELETE_CHILD, FILE_GENERIC_EXECUTE,
    FILE_GENERIC_READ, FILE_GENERIC_WRITE, FILE_WRITE_ATTRIBUTES, FILE_WRITE_DATA, FILE_WRITE_EA,
    WRITE_DAC, WRITE_OWNER,
};
use windows_sys::Win32::System::Console::{
    GetStdHandle, STD_ERROR_HANDLE, STD_INPUT_HANDLE, STD_OUTPUT_HANDLE, SetConsoleCtrlHandler,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_ACTIVE_PROCESS,
    JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION, JOB_OBJECT_LIMIT_JOB_MEMORY,
    JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, JOBOBJECT_EXTENDED_LIMIT_INFORMATION,
    JobObjectExtendedLimitInformation, SetInformationJobObject, TerminateJobObject,
};
use windows_sys::Win32::System::SystemServices::SE_GROUP_ENABLED;
use windows_sys::Win32::System::Threading::{
    CREATE_SUSPENDED, CREATE_UNICODE_ENVIRONMENT, CreateProcessW, DeleteProcThreadAttributeList,
    EXTENDED_STARTUPINFO_PRESENT, GetCurrentProcess, GetExitCodeProcess,
    InitializeProcThreadAttributeList, LPPROC_THREAD_ATTRIBUTE_LIST,
    PROC_THREAD_ATTRIBUTE_ALL_APPLICATION_PACKAGES_POLICY, PROC_THREAD_ATTRIBUTE_HANDLE_LIST,
    PROC_THREAD_ATTRIBUTE_SECURITY_CAPABILITIES, PROCESS_INFORMATION, ResumeThread,
    STARTF_USESTDHANDLES, STARTUPINFOEXW, TerminateProcess, UpdateProcThreadAttribute,
    WaitForSingleObject,
};
use windows_sys::Win32::System::WindowsProgramming::PROCESS_CREATION_ALL_APPLICATION_PACKAGES_OPT_OUT;

use super::appcontainer::{
    AceEntry, AceMode, EncodeError, JobLimits, LaunchError, ace_for, capability_sid, command_line,
    deny_ace_for, environment_block, exec_failure_status, job_flag, mask, profile_name,
};
use crate::exit::Outcome;
use crate::plan::appcontainer::{DenyAccess, GrantAccess, LaunchPlan};

// The pure plan's numbers are Windows' own.
const _: () = {
    assert!(mask::FILE_GENERIC_READ == FILE_GENERIC_READ);
    assert!(mask::FILE_GENERIC_WRITE == FILE_GENERIC_WRITE);
    assert!(mask::FILE_GENERIC_EXECUTE == FILE_GENERIC_EXECUTE);
    assert!(mask::DELETE == DELETE);
    assert!(mask::FILE_ALL_ACCESS == FILE_ALL_ACCESS);
    assert!(mask::FILE_WRITE_DATA == FILE_WRITE_DATA);
    assert!(mask::FILE_APPEND_DATA == FILE_APPEND_DATA);
    assert!(mask::FILE_WRITE_EA == FILE_WRITE_EA);
    assert!(mask::FILE_DELETE_CHILD == FILE_DELETE_CHILD);
    assert!(mask::FILE_WRITE_ATTRIBUTES == FILE_WRITE_ATTRIBUTES);
    assert!(mask::WRITE_DAC == WRITE_DAC);
    assert!(mask::WRITE_OWNER == WRITE_OWNER);
    assert!(job_flag::ACTIVE_PROCESS == JOB_OBJECT_LIMIT_ACTIVE_PROCESS);
    assert!(job_flag::JOB_MEMORY == JOB_OBJECT_LIMIT_JOB_MEMORY);
    assert!(job_flag::DIE_ON_UNHANDLED_EXCEPTION == JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION);
    assert!(job_flag::KILL_ON_JOB_CLOSE == JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE);
};

/// `HRESULT_FROM_WIN32(ERROR_ALREADY_EXISTS)`.
const HRESULT_ALREADY_EXISTS: i32 =
    i32::from_ne_bytes((0x8007_0000 | ERROR_ALREADY_EXISTS).to_ne_bytes());

/// How long the job's own process is waited for once its job is
/// terminated (a hang guard: termination is immediate).
const AFTER_TERMINATE_MS: u32 = 30_000;

fn last_error() -> u32 {
    // SAFETY: reads the calling thread's last-error value; no arguments.
    unsafe { GetLastError() }
}

/// `s` as a NUL-terminated UTF-16 string, refused if it holds a NUL.
fn wide(s: &OsStr, index: usize) -> Result<Vec<u16>, EncodeError> {
    let mut w: Vec<u16> = s.encode_wide().collect();
    if w.contains(&0) {
        return Err(EncodeError::Nul { index });
    }
    w.push(0);
    Ok(w)
}

/// Run the job under the plan; its outcome, or why it did not run.
pub fn run(plan: &LaunchPlan, command: &[OsString]) -> Result<Outcome, LaunchError> {
    // 1. Everything that can be refused without touching the host.
    let args: Vec<Vec<u16>> = command.iter().map(|a| a.encode_wide().collect()).collect();
    let mut line = command_line(&args)?;
    line.push(0);
    let env = environment_block(&plan.env.vars)?;
    let cwd = wide(plan.cwd.as_os_str(), 0)?;
    let limits = JobLimits::from_plan(&plan.grants);
    let program = command
        .first()
        .map(|p| crate::text::escape(&p.to_string_lossy()).into_owned())
        .unwrap_or_default();

    // 2. The session's container.
    let nonce = crate::sys::safe_fs::random_hex(8).map_err(|e| LaunchError::Random {
        reason: e.to_string(),
    })?;
    let profile = Profile::create(&profile_name(std::process::id(), &nonce))?;

    // 3. The output directories the root would not let the job create,
    //    then the grants, removed when `grants` drops (before `profile`).
    for dir in &plan.prepare_dirs {
        if let Err(e) = std::fs::create_dir(dir) {
            eprintln!(
                "vetto: warning: cannot create {}: {e}",
                crate::text::escape_path(dir)
            );
        }
    }
    let mut grants = Grants {
        sid: profile.sid,
        placed: Vec::new(),
    };
    let mut missing = Vec::new();
    for g in &plan.grants.grants {
        let Ok(meta) = std::fs::metadata(&g.path) else {
            missing.push(crate::text::escape_path(&g.path).into_owned());
            continue;
        };
        grants.add(&ace_for(g, meta.is_dir()), access_label(g.access))?;
    }
    if !missing.is_empty() {
        eprintln!(
            "vetto: AppContainer: {} granted path(s) do not exist, nothing granted there: {}",
            missing.len(),
            missing.join(", ")
        );
    }
    for d in &plan.grants.denies {
        // The plan saw it; a path gone since cannot be left unguarded.
        let meta = std::fs::metadata(&d.path).map_err(|e| LaunchError::Grant {
            path: d.path.clone(),
            access: deny_label(d.access),
            op: "metadata",
            code: e.raw_os_error().map_or(0, |c| c.unsigned_abs()),
        })?;
        grants.add(&deny_ace_for(d, meta.is_dir()), deny_label(d.access))?;
    }
    let capabilities = CapabilitySids::new(&plan.grants.capabilities)?;

    // 4. The job.
    let job = Job::create(&limits)?;

    // 5. The process, suspended.
    let stdio = InheritedStdio::duplicate()?;
    let mut security = SECURITY_CAPABILITIES {
        AppContainerSid: profile.sid,
        Capabilities: capabilities.entries.as_ptr().cast_mut(),
        CapabilityCount: u32::try_from(capabilities.entries.len()).unwrap_or(0),
        Reserved: 0,
    };
    if capabilities.entries.is_empty() {
        security.Capabilities = null_mut();
    }
    let lpac_policy: u32 = PROCESS_CREATION_ALL_APPLICATION_PACKAGES_OPT_OUT;
    let mut attributes = AttributeList::new(3)?;
    attributes.set(
        PROC_THREAD_ATTRIBUTE_SECURITY_CAPABILITIES,
        (&raw const security).cast(),
        std::mem::size_of::<SECURITY_CAPABILITIES>(),
        "UpdateProcThreadAttribute(SECURITY_CAPABILITIES)",
    )?;
    attributes
        .set(
            PROC_THREAD_ATTRIBUTE_ALL_APPLICATION_PACKAGES_POLICY,
            (&raw const lpac_policy).cast(),
            std::mem::size_of::<u32>(),
            "UpdateProcThreadAttribute(ALL_APPLICATION_PACKAGES_POLICY)",
        )
        .map_err(|e| match e {
            LaunchError::Attribute { op, code } => LaunchError::Lpac { op, code },
            other => other,
        })?;
    if !stdio.list.is_empty() {
        attributes.set(
            PROC_THREAD_ATTRIBUTE_HANDLE_LIST,
            stdio.list.as_ptr().cast(),
            std::mem::size_of_val(stdio.list.as_slice()),
            "UpdateProcThreadAttribute(HANDLE_LIST)",
        )?;
    }
    let mut startup = STARTUPINFOEXW::default();
    startup.StartupInfo.cb = u32::try_from(std::mem::size_of::<STARTUPINFOEXW>()).unwrap_or(0);
    startup.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
    startup.StartupInfo.hStdInput = stdio.input;
    startup.StartupInfo.hStdOutput = stdio.output;
    startup.StartupInfo.hStdError = stdio.error;
    startup.lpAttributeList = attributes.as_ptr();
    let mut info = PROCESS_INFORMATION::default();
    // SAFETY: every pointer is valid for the call: `line` is a mutable,
    // NUL-terminated UTF-16 buffer (CreateProcessW may write into it),
    // `env` a NUL-NUL-terminated UTF-16 block (CREATE_UNICODE_ENVIRONMENT),
    // `cwd` NUL-terminated; `startup` is a STARTUPINFOEXW whose attribute
    // list (and the values it points to: `security`, `capabilities`,
    // `lpac_policy`, `stdio.list`) outlives the call; `info` is written.
    let created = unsafe {
        CreateProcessW(
            null(),
            line.as_mut_ptr(),
            null(),
            null(),
            // Only the handle list is inherited; with no standard handle
            // at all, nothing is.
            i32::from(!stdio.list.is_empty()),
            EXTENDED_STARTUPINFO_PRESENT | CREATE_SUSPENDED | CREATE_UNICODE_ENVIRONMENT,
            env.as_ptr().cast(),
            cwd.as_ptr(),
            (&raw const startup).cast(),
            &mut info,
        )
    };
    if created == 0 {
        let code = last_error();
        if let Some(status) = exec_failure_status(code) {
            eprintln!("vetto: cannot start {program:?} in the AppContainer (error {code})");
            return Ok(Outcome::ExecFailed(status));
        }
        return Err(LaunchError::Spawn { program, code });
    }
    drop(attributes);
    drop(stdio);
    // SAFETY: CreateProcessW succeeded: both handles are open and ours.
    let (process, thread) = unsafe {
        (
            OwnedHandle::from_raw_handle(info.hProcess),
            OwnedHandle::from_raw_handle(info.hThread),
        )
    };

    // 6. Into the job before it runs a single instruction.
    // SAFETY: both handles are open; the process is suspended.
    if unsafe { AssignProcessToJobObject(job.raw(), process.as_raw_handle()) } == 0 {
        let code = last_error();
        // SAFETY: the process handle is open; it never ran.
        unsafe { TerminateProcess(process.as_raw_handle(), 1) };
        return Err(LaunchError::Job {
            op: "AssignProcessToJobObject",
            code,
        });
    }
    let _ctrl = CtrlGuard::install();
    // SAFETY: the thread handle is open; ResumeThread returns u32::MAX on
    // failure.
    if unsafe { ResumeThread(thread.as_raw_handle()) } == u32::MAX {
        let code = last_error();
        job.terminate(1);
        return Err(LaunchError::Job {
            op: "ResumeThread",
            code,
        });
    }
    drop(thread);

    // 7. The wait.
    // SAFETY: the process handle is open.
    let waited = unsafe { WaitForSingleObject(process.as_raw_handle(), limits.wait_ms) };
    let outcome = match waited {
        WAIT_OBJECT_0 => {
            let mut code = 0u32;
            // SAFETY: the process handle is open; `code` is written.
            if unsafe { GetExitCodeProcess(process.as_raw_handle(), &mut code) } == 0 {
                let err = last_error();
                job.terminate(1);
                return Err(LaunchError::Wait {
                    op: "GetExitCodeProcess",
                    code: err,
                });
            }
            Outcome::Exited(i32::from_ne_bytes(code.to_ne_bytes()))
        }
        WAIT_TIMEOUT => {
            job.terminate(1);
            // SAFETY: the process handle is open.
            unsafe { WaitForSingleObject(process.as_raw_handle(), AFTER_TERMINATE_MS) };
            Outcome::TimedOut
        }
        _ => {
            let code = last_error();
            job.terminate(1);
            return Err(LaunchError::Wait {
                op: "WaitForSingleObject",
                code,
            });
        }
    };
    // Whatever the job started and left running ends with it.
    job.terminate(1);
    Ok(outcome)
}

/// The session's AppContainer profile and its SID; deleted on drop.
struct Profile {
    name: Vec<u16>,
    sid: PSID,
}

impl Profile {
    fn create(name: &str) -> Result<Profile, LaunchError> {
        let fail = |op, code| LaunchError::Profile {
            name: name.to_owned(),
            op,
            code,
        };
        let wname = wide(OsStr::new(name), 0).map_err(|_| fail("name", 0))?;
        let mut sid: PSID = null_mut();
        // SAFETY: `wname` is NUL-terminated and doubles as display name
        // and description; no capabilities (null, 0); `sid` is written
        // with a SID to free with FreeSid.
        let hr = unsafe {
            CreateAppContainerProfile(
                wname.as_ptr(),
                wname.as_ptr(),
                wname.as_ptr(),
                null(),
                0,
                &mut sid,
            )
        };
        if hr == HRESULT_ALREADY_EXISTS {
            // The name carries a random nonce: a profile already there was
            // made by someone else, and adopting it would share its SID
            // (and whatever its grants reach) with this job.
            return Err(fail(
                "CreateAppContainerProfile (the profile already exists)",
                u32::from_ne_bytes(hr.to_ne_bytes()),
            ));
        }
        if hr < 0 {
            return Err(fail(
                "CreateAppContainerProfile",
                u32::from_ne_bytes(hr.to_ne_bytes()),
            ));
        }
        Ok(Profile { name: wname, sid })
    }
}

impl Drop for Profile {
    fn drop(&mut self) {
        // SAFETY: `name` is NUL-terminated; `sid` came from
        // CreateAppContainerProfile (a profile this session made) and is
        // freed once, here.
        unsafe {
            let hr = DeleteAppContainerProfile(self.name.as_ptr());
            if hr < 0 {
                eprintln!(
                    "vetto: warning: cannot delete the session's AppContainer profile (error {:#010x})",
                    u32::from_ne_bytes(hr.to_ne_bytes())
                );
            }
            FreeSid(self.sid);
        }
    }
}

/// The ACEs placed for the container's SID; removed on drop, exactly
/// those: the SID is the session's own, so every ACE naming it is ours.
struct Grants {
    sid: PSID,
    placed: Vec<Vec<u16>>,
}

impl Grants {
    fn add(&mut self, ace: &AceEntry, label: &'static str) -> Result<(), LaunchError> {
        let path = ace.path.as_path();
        let wpath = wide(path.as_os_str(), 0).map_err(|_| LaunchError::Grant {
            path: path.to_path_buf(),
            access: label,
            op: "path",
            code: 0,
        })?;
        let inherit = if ace.inherit {
            SUB_CONTAINERS_AND_OBJECTS_INHERIT
        } else {
            NO_INHERITANCE
        };
        let mode = match ace.mode {
            AceMode::Allow => GRANT_ACCESS,
            AceMode::Deny => DENY_ACCESS,
        };
        // Recorded before the change: a write that fails part-way through
        // propagating to what is beneath may have placed ACEs there, and
        // revoking where none was placed changes nothing.
        if !self.placed.contains(&wpath) {
            self.placed.push(wpath.clone());
        }
        change_dacl(&wpath, self.sid, ace.mask, mode, inherit).map_err(|(op, code)| {
            LaunchError::Grant {
                path: path.to_path_buf(),
                access: label,
                op,
                code,
            }
        })
    }
}

fn access_label(access: GrantAccess) -> &'static str {
    match access {
        GrantAccess::Read => "read",
        GrantAccess::Write => "write",
    }
}

fn deny_label(access: DenyAccess) -> &'static str {
    match access {
        DenyAccess::All => "a deny (mask)",
        DenyAccess::Write => "a write deny (protect)",
        DenyAccess::Delete => "a delete deny (ancestor of a protected path)",
        DenyAccess::Create => "a create deny (nearest existing ancestor of a protected path)",
    }
}

impl Drop for Grants {
    fn drop(&mut self) {
        for wpath in self.placed.iter().rev() {
            if let Err((op, code)) = change_dacl(wpath, self.sid, 0, REVOKE_ACCESS, NO_INHERITANCE)
            {
                let path = String::from_utf16_lossy(wpath.strip_suffix(&[0]).unwrap_or(wpath));
                eprintln!(
                    "vetto: warning: the container's ACE stays on {} ({op}: error {code}); its SID names a deleted profile",
                    crate::text::escape(&path)
                );
            }
        }
    }
}

/// Read the path's DACL, merge one entry for `sid`, write it back (the
/// system propagates inheritable ACEs to everything beneath).
fn change_dacl(
    wpath: &[u16],
    sid: PSID,
    access_mask: u32,
    mode: i32,
    inherit: u32,
) -> Result<(), (&'static str, u32)> {
    let mut old: *mut ACL = null_mut();
    let mut descriptor: PSECURITY_DESCRIPTOR = null_mut();
    // SAFETY: `wpath` is NUL-terminated; `old` points into `descriptor`,
    // which is freed with LocalFree below.
    let err = unsafe {
        GetNamedSecurityInfoW(
            wpath.as_ptr(),
            SE_FILE_OBJECT,
            DACL_SECURITY_INFORMATION,
            null_mut(),
            null_mut(),
            &mut old,
            null_mut(),
            &mut descriptor,
        )
    };
    if err != ERROR_SUCCESS {
        return Err(("GetNamedSecurityInfoW", err));
    }
    if old.is_null() {
        // A NULL DACL: everyone, the container too, has all access. A
        // merged entry would become the whole DACL (everyone else shut
        // out, and after the revoke, no one let in): an allow is not
        // needed, a deny cannot be placed (refused), a revoke has nothing
        // to remove.
        // SAFETY: allocated by GetNamedSecurityInfoW, freed once.
        unsafe { LocalFree(descriptor) };
        return if mode == DENY_ACCESS {
            Err(("a NULL DACL (everyone has all access) takes no deny", 0))
        } else {
            Ok(())
        };
    }
    let entry = EXPLICIT_ACCESS_W {
        grfAccessPermissions: access_mask,
        grfAccessMode: mode,
        grfInheritance: inherit,
        Trustee: TRUSTEE_W {
            pMultipleTrustee: null_mut(),
            MultipleTrusteeOperation: NO_MULTIPLE_TRUSTEE,
            TrusteeForm: TRUSTEE_IS_SID,
            TrusteeType: TRUSTEE_IS_UNKNOWN,
            ptstrName: sid.cast(),
        },
    };
    let mut new: *mut ACL = null_mut();
    // SAFETY: one entry whose trustee is a valid SID; `old` is the DACL
    // just read (not null); `new` is allocated by the call, freed below.
    let err = unsafe { SetEntriesInAclW(1, &entry, old, &mut new) };
    let result = if err != ERROR_SUCCESS {
        Err(("SetEntriesInAclW", err))
    } else {
        // SAFETY: `wpath` is NUL-terminated; `new` is a valid ACL.
        let err = unsafe {
            SetNamedSecurityInfoW(
                wpath.as_ptr(),
                SE_FILE_OBJECT,
                DACL_SECURITY_INFORMATION,
                null_mut(),
                null_mut(),
                new,
                null(),
            )
        };
        if err == ERROR_SUCCESS {
            Ok(())
        } else {
            Err(("SetNamedSecurityInfoW", err))
        }
    };
    // SAFETY: both were allocated by the calls above (LocalAlloc) and are
    // freed once; null is accepted.
    unsafe {
        LocalFree(new.cast());
        LocalFree(descriptor);
    }
    result
}

/// The capability SIDs (`ConvertStringSidToSidW`), freed on drop.
struct CapabilitySids {
    entries: Vec<SID_AND_ATTRIBUTES>,
}

impl CapabilitySids {
    fn new(caps: &[crate::plan::appcontainer::Capability]) -> Result<Self, LaunchError> {
        let mut out = CapabilitySids {
            entries: Vec::new(),
        };
        for &cap in caps {
            let text = wide(OsStr::new(capability_sid(cap)), 0)?;
            let mut sid: PSID = null_mut();
            // SAFETY: `text` is NUL-terminated; `sid` is written with a SID
            // freed by LocalFree on drop.
            if unsafe { ConvertStringSidToSidW(text.as_ptr(), &mut sid) } == 0 {
                return Err(LaunchError::Capability {
                    sid: capability_sid(cap),
                    code: last_error(),
                });
            }
            out.entries.push(SID_AND_ATTRIBUTES {
                Sid: sid,
                Attributes: SE_GROUP_ENABLED.unsigned_abs(),
            });
        }
        Ok(out)
    }
}

impl Drop for CapabilitySids {
    fn drop(&mut self) {
        for e in &self.entries {
            // SAFETY: each SID came from ConvertStringSidToSidW, freed once.
            unsafe { LocalFree(e.Sid) };
        }
    }
}

/// The Job Object; closing it kills whatever is still in it.
struct Job(OwnedHandle);

impl Job {
    fn create(limits: &JobLimits) -> Result<Job, LaunchError> {
        // SAFETY: no attributes, no name; the handle is checked below.
        let raw = unsafe { CreateJobObjectW(null(), null()) };
        if raw.is_null() {
            return Err(LaunchError::Job {
                op: "CreateJobObjectW",
                code: last_error(),
            });
        }
        // SAFETY: a fresh handle, owned from here.
        let job = Job(unsafe { OwnedHandle::from_raw_handle(raw) });
        // SAFETY: plain-data struct; all-zero is its "no limit" value.
        let mut info: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
        info.BasicLimitInformation.LimitFlags = limits.flags;
        info.BasicLimitInformation.ActiveProcessLimit = limits.active_processes.unwrap_or(0);
        info.JobMemoryLimit = match limits.job_memory.map(usize::try_from) {
            None => 0,
            Some(Ok(bytes)) => bytes,
            Some(Err(_)) => usize::MAX,
        };
        // SAFETY: the handle is open; `info` is the struct the class names,
        // with its exact size.
        let ok = unsafe {
            SetInformationJobObject(
                job.raw(),
                JobObjectExtendedLimitInformation,
                (&raw const info).cast(),
                u32::try_from(std::mem::size_of_val(&info)).unwrap_or(0),
            )
        };
        if ok == 0 {
            return Err(LaunchError::Job {
                op: "SetInformationJobObject",
                code: last_error(),
            });
        }
        Ok(job)
    }

    fn raw(&self) -> HANDLE {
        self.0.as_raw_handle()
    }

    fn terminate(&self, code: u32) {
        // SAFETY: the handle is open; terminating an empty job is harmless.
        unsafe { TerminateJobObject(self.raw(), code) };
    }
}

/// A `PROC_THREAD_ATTRIBUTE_LIST` in a buffer of its own size.
struct AttributeList {
    buf: Vec<usize>,
}

impl AttributeList {
    fn new(count: u32) -> Result<AttributeList, LaunchError> {
        let mut size = 0usize;
        // SAFETY: a null list asks for the size only (the call "fails"
        // with ERROR_INSUFFICIENT_BUFFER, expected).
        unsafe { InitializeProcThreadAttributeList(null_mut(), count, 0, &mut size) };
        let mut buf = vec![0usize; size.div_ceil(std::mem::size_of::<usize>()).max(1)];
        // SAFETY: `buf` holds at least `size` bytes, pointer-aligned.
        let ok = unsafe {
            InitializeProcThreadAttributeList(buf.as_mut_ptr().cast(), count, 0, &mut size)
        };
        if ok == 0 {
            return Err(LaunchError::Attribute {
                op: "InitializeProcThreadAttributeList",
                code: last_error(),
            });
        }
        Ok(AttributeList { buf })
    }

    fn as_ptr(&mut self) -> LPPROC_THREAD_ATTRIBUTE_LIST {
        self.buf.as_mut_ptr().cast()
    }

    /// `value` must stay valid until the process is created (the list
    /// keeps the pointer, not a copy).
    fn set(
        &mut self,
        attribute: u32,
        value: *const core::ffi::c_void,
        size: usize,
        op: &'static str,
    ) -> Result<(), LaunchError> {
        let list = self.as_ptr();
        // SAFETY: `list` was initialised for enough attributes; the caller
        // keeps `value` (of `size` bytes) alive until CreateProcessW.
        let ok = unsafe {
            UpdateProcThreadAttribute(list, 0, attribute as usize, value, size, null_mut(), null())
        };
        if ok == 0 {
            return Err(LaunchError::Attribute {
                op,
                code: last_error(),
            });
        }
        Ok(())
    }
}

impl Drop for AttributeList {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, deleted once.
        unsafe { DeleteProcThreadAttributeList(self.as_ptr()) };
    }
}

/// Inheritable copies of vetto's standard handles, the only handles the
/// job inherits (`PROC_THREAD_ATTRIBUTE_HANDLE_LIST`).
struct InheritedStdio {
    input: HANDLE,
    output: HANDLE,
    error: HANDLE,
    list: Vec<HANDLE>,
    /// Closed when the process exists (its copies are the child's).
    _owned: Vec<OwnedHandle>,
}

impl InheritedStdio {
    fn duplicate() -> Result<InheritedStdio, LaunchError> {
        let mut out = InheritedStdio {
            input: null_mut(),
            output: null_mut(),
            error: null_mut(),
            list: Vec::new(),
            _owned: Vec::new(),
        };
        for (which, slot) in [
            (STD_INPUT_HANDLE, 0usize),
            (STD_OUTPUT_HANDLE, 1),
            (STD_ERROR_HANDLE, 2),
        ] {
            // SAFETY: reads this process's standard handle (may be null or
            // INVALID_HANDLE_VALUE when there is none).
            let h = unsafe { GetStdHandle(which) };
            if h.is_null() || h == INVALID_HANDLE_VALUE {
                continue;
            }
            let mut dup: HANDLE = null_mut();
            // SAFETY: `h` is a handle of this process; the duplicate is
            // inheritable, same access, owned below.
            let ok = unsafe {
                DuplicateHandle(
                    GetCurrentProcess(),
                    h,
                    GetCurrentProcess(),
                    &mut dup,
                    0,
                    1,
                    DUPLICATE_SAME_ACCESS,
                )
            };
            if ok == 0 {
                return Err(LaunchError::Job {
                    op: "DuplicateHandle(standard handle)",
                    code: last_error(),
                });
            }
            // SAFETY: a fresh duplicate, owned from here.
            out._owned
                .push(unsafe { OwnedHandle::from_raw_handle(dup) });
            out.list.push(dup);
            match slot {
                0 => out.input = dup,
                1 => out.output = dup,
                _ => out.error = dup,
            }
        }
        Ok(out)
    }
}

/// Ctrl+C and Ctrl+Break reach the job through the console; vetto
/// ignores them while it waits, so that it lives to remove the grants.
struct CtrlGuard;

unsafe extern "system" fn ignore_ctrl(_ctrl: u32) -> i32 {
    1
}

impl CtrlGuard {
    fn install() -> CtrlGuard {
        // SAFETY: registers a handler that touches nothing.
        unsafe { SetConsoleCtrlHandler(Some(ignore_ctrl), 1) };
        CtrlGuard
    }
}

impl Drop for CtrlGuard {
    fn drop(&mut self) {
        // SAFETY: removes the handler registered in `install`.
        unsafe { SetConsoleCtrlHandler(Some(ignore_ctrl), 0) };
    }
}

/// Run on Windows only (`.github/workflows/platforms.yml`, windows-latest):
/// each shows the job's attempt working without the container and
/// failing in it.
#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests")]

    use std::path::{Path, PathBuf};

    use super::*;
    use crate::plan::appcontainer::{AclGrant, GrantPlan};
    use crate::plan::env::EnvPlan;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("vetto-ac-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn launch_plan(granted: &Path, timeout_ms: Option<u64>) -> LaunchPlan {
        let keep = ["SystemRoot", "windir", "PATH", "PATHEXT", "ComSpec"];
        LaunchPlan {
            grants: GrantPlan {
                grants: vec![AclGrant {
                    path: granted.to_path_buf(),
                    access: GrantAccess::Write,
                }],
                denies: vec![],
                capabilities: vec![],
                max_processes: None,
                max_memory_bytes: None,
                timeout_ms,
            },
            prepare_dirs: vec![],
            env: EnvPlan {
                vars: std::env::vars()
                    .filter(|(k, _)| keep.iter().any(|x| x.eq_ignore_ascii_case(k)))
                    .collect(),
                withheld: vec![],
            },
            cwd: granted.to_path_buf(),
        }
    }

    fn cmd(script: &str) -> Vec<OsString> {
        let comspec = std::env::var_os("ComSpec")
            .unwrap_or_else(|| OsString::from("C:\\Windows\\System32\\cmd.exe"));
        vec![comspec, "/d".into(), "/c".into(), script.into()]
    }

    fn ace_count(path: &Path) -> u16 {
        let wpath = wide(path.as_os_str(), 0).unwrap();
        let mut dacl: *mut ACL = null_mut();
        let mut descriptor: PSECURITY_DESCRIPTOR = null_mut();
        // SAFETY: as in `change_dacl`; the descriptor is freed below and
        // `dacl` read before that.
        unsafe {
            let err = GetNamedSecurityInfoW(
                wpath.as_ptr(),
                SE_FILE_OBJECT,
                DACL_SECURITY_INFORMATION,
                null_mut(),
                null_mut(),
                &mut dacl,
                null_mut(),
                &mut descriptor,
            );
            assert_eq!(err, ERROR_SUCCESS);
            assert!(!dacl.is_null(), "{} has no DACL", path.display());
            let count = (*dacl).AceCount;
            LocalFree(descriptor);
            count
        }
    }

    #[test]
    fn the_job_exits_with_its_own_status_and_its_aces_are_removed() {
        let dir = scratch("status");
        let before = ace_count(&dir);
        let outcome = run(&launch_plan(&dir, None), &cmd("exit 3")).unwrap();
        assert_eq!(outcome, Outcome::Exited(3));
        assert_eq!(ace_count(&dir), before, "the session's ACEs stayed");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn writing_outside_the_grants_fails_in_the_container() {
        let granted = scratch("granted");
        let outside = scratch("outside");
        // Without the container, the write works.
        let plain = outside.join("plain.txt");
        let status = std::process::Command::new(&cmd("")[0])
            .args(["/d", "/c"])
            .arg(format!("echo x> {}", plain.display()))
            .status()
            .unwrap();
        assert!(status.success() && plain.exists());
        // In it, only the granted directory takes it.
        let boxed = outside.join("boxed.txt");
        let inside = granted.join("inside.txt");
        // cmd.exe reads its command line raw (no `\"` escapes): the
        // runner's temporary directory has no spaces, so no quotes.
        let script = format!("echo x> {} & echo x> {}", inside.display(), boxed.display());
        run(&launch_plan(&granted, None), &cmd(&script)).unwrap();
        assert!(inside.exists(), "the grant did not reach the job");
        assert!(!boxed.exists(), "the job wrote outside its grants");
        std::fs::remove_dir_all(&granted).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn a_job_past_its_timeout_is_terminated() {
        let dir = scratch("timeout");
        let outcome = run(
            &launch_plan(&dir, Some(2_000)),
            &cmd("for /l %i in (0,0,1) do rem"),
        )
        .unwrap();
        assert_eq!(outcome, Outcome::TimedOut);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
