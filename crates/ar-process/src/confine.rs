//! Confined spawns: resource limits set and a cgroup joined in the child before exec, and
//! per-thread restrictions (Landlock) the child inherits from the thread that starts it.
//!
//! This is the one place in the workspace with `unsafe` code: `pre_exec` is how a child gets
//! its rlimits and its cgroup before it runs a single instruction of the program (doing it
//! after spawn would leave a window in which a fork bomb escapes, and doing it to this
//! process would limit the service itself). The hook only makes raw system calls through
//! rustix (`setrlimit(2)`, `write(2)` to an already open `cgroup.procs`), which neither
//! allocate nor take a lock, over values prepared before the fork: what code running between
//! `fork` and `exec` of a multi-threaded process may do.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

use crate::{spawn_command, Process, ProcessError, ProcessSpec};

/// A resource whose limit a confined child gets (`setrlimit(2)`; soft and hard set alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// `RLIMIT_DATA`: bytes of data segment and private writable mappings (heap memory).
    /// Unlike `RLIMIT_AS` it leaves inaccessible reservations alone (V8, Go, the JVM).
    Data,
    /// `RLIMIT_AS`: bytes of address space.
    AddressSpace,
    /// `RLIMIT_FSIZE`: the largest file the child may write, in bytes.
    FileSize,
    /// `RLIMIT_NPROC`: processes of the child's real user (not enforced for root).
    Processes,
    /// `RLIMIT_CPU`: seconds of CPU time.
    CpuSeconds,
    /// `RLIMIT_CORE`: bytes of core dump (0: none).
    CoreFile,
    /// `RLIMIT_NOFILE`: open file descriptors.
    OpenFiles,
}

impl Resource {
    fn raw(self) -> rustix::process::Resource {
        use rustix::process::Resource as R;
        match self {
            Resource::Data => R::Data,
            Resource::AddressSpace => R::As,
            Resource::FileSize => R::Fsize,
            Resource::Processes => R::Nproc,
            Resource::CpuSeconds => R::Cpu,
            Resource::CoreFile => R::Core,
            Resource::OpenFiles => R::Nofile,
        }
    }
}

/// One resource limit for a confined child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceLimit {
    /// The resource.
    pub resource: Resource,
    /// Its limit, soft and hard.
    pub limit: u64,
}

impl ResourceLimit {
    /// A limit on `resource`.
    pub fn new(resource: Resource, limit: u64) -> Self {
        Self { resource, limit }
    }
}

/// What a confined child gets before it runs its program.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChildLimits<'a> {
    /// Resource limits.
    pub limits: &'a [ResourceLimit],
    /// A cgroup's `cgroup.procs`, open for writing: the child moves itself into that cgroup
    /// (a pids cgroup bounds how many processes it and its descendants may have).
    pub cgroup_procs: Option<BorrowedFd<'a>>,
}

/// Starts a child like [`crate::spawn`], confined two ways:
///
/// - `prepare` runs first on a fresh OS thread, and the child is spawned from that thread, so
///   whatever `prepare` restricted on it (a Landlock domain, `no_new_privs`) the child
///   inherits; the thread ends right after, so the restriction never reaches this process's
///   other threads. Its value comes back with the process (e.g. how fully a sandbox applied).
/// - `child` limits are set and its cgroup joined in the child before it runs the program.
///
/// Must be called within a tokio runtime (the child is supervised by it). `prepare` must not
/// start threads or tokio tasks: they would inherit its restrictions.
pub fn spawn_confined<T, F>(
    spec: &ProcessSpec,
    child: ChildLimits<'_>,
    prepare: F,
) -> Result<(Process, T), ProcessError>
where
    F: FnOnce() -> io::Result<T> + Send,
    T: Send,
{
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|_| ProcessError::InvalidSpec("a confined spawn needs a tokio runtime".into()))?;
    let limits: Vec<(rustix::process::Resource, u64)> = child
        .limits
        .iter()
        .map(|l| (l.resource.raw(), l.limit))
        .collect();
    // The hook owns a duplicate, closed in this process once the spawn is done.
    let cgroup = match child
        .cgroup_procs
        .map(|fd| fd.try_clone_to_owned())
        .transpose()
    {
        Ok(fd) => fd,
        Err(source) => {
            return Err(ProcessError::Spawn {
                program: spec.program.clone(),
                source,
            })
        }
    };
    std::thread::scope(|scope| {
        let spawner = scope.spawn(move || {
            let _runtime = runtime.enter();
            let prepared = prepare().map_err(|source| ProcessError::Spawn {
                program: spec.program.clone(),
                source,
            })?;
            let process = spawn_command(spec, |cmd| set_limits_before_exec(cmd, limits, cgroup))?;
            Ok((process, prepared))
        });
        spawner.join().unwrap_or_else(|_| {
            Err(ProcessError::Spawn {
                program: spec.program.clone(),
                source: io::Error::other("the spawning thread panicked"),
            })
        })
    })
}

#[allow(unsafe_code)]
fn set_limits_before_exec(
    cmd: &mut tokio::process::Command,
    limits: Vec<(rustix::process::Resource, u64)>,
    cgroup: Option<OwnedFd>,
) {
    if limits.is_empty() && cgroup.is_none() {
        return;
    }
    let hook = move || -> io::Result<()> {
        if let Some(procs) = &cgroup {
            // "0" is the writing process: the child, before it can fork.
            rustix::io::write(procs, b"0")?;
        }
        for &(resource, limit) in &limits {
            let value = rustix::process::Rlimit {
                current: Some(limit),
                maximum: Some(limit),
            };
            rustix::process::setrlimit(resource, value)?;
        }
        Ok(())
    };
    // SAFETY: the hook runs in the child between fork and exec. It reads a vector and a
    // descriptor prepared before the fork and makes raw `write` and `setrlimit` system calls:
    // no allocation, no lock, no other state shared with the parent's threads (see the
    // module comment).
    unsafe {
        cmd.pre_exec(hook);
    }
}
