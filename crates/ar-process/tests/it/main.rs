//! Integration tests of ar-process: process groups, workdir creation, env filtering, stderr tail.

use ar_process::{group_members, spawn, EnvPolicy, ProcessSpec, StdinMode};
use tokio::io::AsyncWriteExt;

fn sh(script: &str, dir: &std::path::Path) -> ProcessSpec {
    ProcessSpec::new("sh", dir).args(["-c", script])
}

async fn wait_gone(pgid: i32) -> Vec<u32> {
    // Bounded poll: the kernel needs a moment to tear the processes down after SIGKILL.
    for _ in 0..200 {
        let left = group_members(pgid);
        if left.is_empty() {
            return left;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    group_members(pgid)
}

#[tokio::test]
async fn reads_stdout_and_exit_code_in_created_workdir() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a/b");
    let mut p = spawn(&sh("pwd; echo hi; exit 3", &dir)).unwrap();
    let mut out = p.take_stdout().unwrap();
    let mut lines = Vec::new();
    while let Some(l) = out.next_line().await.unwrap() {
        lines.push(l.text);
    }
    let exit = p.wait().await.unwrap();
    assert_eq!(exit.code, Some(3));
    assert_eq!(lines, vec![dir.display().to_string(), "hi".to_string()]);
}

#[tokio::test]
async fn relative_workdir_is_rejected_without_spawning() {
    let err = spawn(&ProcessSpec::new("true", "relative/dir")).unwrap_err();
    assert!(err.to_string().contains("absolute"), "{err}");
}

#[tokio::test]
async fn env_is_an_allow_list() {
    let tmp = tempfile::tempdir().unwrap();
    std::env::set_var("AR_PROCESS_SECRET_FOR_TEST", "leak");
    let spec = sh("env", tmp.path()).env(EnvPolicy::standard().with("ONLY_ME", "1"));
    let mut p = spawn(&spec).unwrap();
    let mut out = p.take_stdout().unwrap();
    let mut env = Vec::new();
    while let Some(l) = out.next_line().await.unwrap() {
        env.push(l.text);
    }
    p.wait().await.unwrap();
    assert!(env.iter().any(|l| l == "ONLY_ME=1"));
    assert!(!env
        .iter()
        .any(|l| l.starts_with("AR_PROCESS_SECRET_FOR_TEST")));
}

#[tokio::test]
async fn dropping_kills_the_whole_group() {
    let tmp = tempfile::tempdir().unwrap();
    let p = spawn(&sh("sleep 300 & sleep 300 & wait", tmp.path())).unwrap();
    let pgid = p.pid() as i32;
    // Bounded wait until both sleeps exist.
    for _ in 0..200 {
        if group_members(pgid).len() >= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(group_members(pgid).len() >= 3);
    drop(p);
    assert_eq!(wait_gone(pgid).await, Vec::<u32>::new());
}

#[tokio::test]
async fn wait_sweeps_background_children() {
    let tmp = tempfile::tempdir().unwrap();
    let mut p = spawn(&sh("sleep 300 >/dev/null 2>&1 & exit 0", tmp.path())).unwrap();
    let pgid = p.pid() as i32;
    let exit = p.wait().await.unwrap();
    assert!(exit.success());
    assert_eq!(wait_gone(pgid).await, Vec::<u32>::new());
}

#[tokio::test]
async fn kill_keeps_signal_exit() {
    let tmp = tempfile::tempdir().unwrap();
    let mut p = spawn(&sh("sleep 300", tmp.path())).unwrap();
    p.killer().kill();
    let exit = p.wait().await.unwrap();
    assert_eq!(exit.code, None);
    assert_eq!(exit.signal, Some(9));
    assert_eq!(exit.code_or_minus_one(), -1);
}

#[tokio::test]
async fn stdin_and_stderr_tail() {
    let tmp = tempfile::tempdir().unwrap();
    let spec =
        sh("read x; echo \"err:$x\" >&2; echo \"out:$x\"", tmp.path()).stdin(StdinMode::Piped);
    let mut p = spawn(&spec).unwrap();
    let mut stdin = p.take_stdin().unwrap();
    stdin.write_all(b"hello\n").await.unwrap();
    let mut out = p.take_stdout().unwrap();
    let line = out.next_line().await.unwrap().unwrap();
    assert_eq!(line.text, "out:hello");
    p.wait().await.unwrap();
    assert_eq!(p.stderr_tail().snapshot(), "err:hello");
    let mut errs = p.take_stderr_lines().unwrap();
    assert_eq!(errs.recv().await.unwrap().text, "err:hello");
}

#[tokio::test]
async fn long_lines_are_cut_at_one_mib() {
    let tmp = tempfile::tempdir().unwrap();
    let mut p = spawn(&sh(
        "head -c 1500000 /dev/zero | tr '\\0' a; echo; echo next",
        tmp.path(),
    ))
    .unwrap();
    let mut out = p.take_stdout().unwrap();
    let first = out.next_line().await.unwrap().unwrap();
    assert!(first.truncated);
    assert_eq!(first.text.len(), ar_process::MAX_LINE_BYTES);
    assert_eq!(out.next_line().await.unwrap().unwrap().text, "next");
    p.wait().await.unwrap();
}

#[tokio::test]
async fn raw_stdout_and_try_wait_see_the_exit_without_blocking() {
    use tokio::io::AsyncReadExt;
    let tmp = tempfile::tempdir().unwrap();
    let spec = sh(
        "read x; printf 'raw:%s' \"$x\"; sleep 300 & exit 4",
        tmp.path(),
    )
    .stdin(StdinMode::Piped);
    let mut p = spawn(&spec).unwrap();
    let pgid = p.pid() as i32;
    assert_eq!(p.try_wait().unwrap(), None, "still reading its stdin");
    let mut stdout = p.take_stdout_raw().unwrap();
    assert!(p.take_stdout().is_none(), "stdout is taken once");
    p.take_stdin().unwrap().write_all(b"x1\n").await.unwrap();
    // The background sleep holds the pipe open: read exactly what was printed.
    let mut printed = [0u8; 6];
    stdout.read_exact(&mut printed).await.unwrap();
    assert_eq!(&printed, b"raw:x1");
    let mut exit = None;
    for _ in 0..200 {
        exit = p.try_wait().unwrap();
        if exit.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(exit.map(|e| e.code), Some(Some(4)));
    // The leader's exit swept the background sleep of its group.
    assert_eq!(wait_gone(pgid).await, Vec::<u32>::new());
}

#[tokio::test]
async fn a_confined_child_gets_its_limits_and_the_spawning_threads_setup() {
    use ar_process::{spawn_confined, ChildLimits, Resource, ResourceLimit};
    let tmp = tempfile::tempdir().unwrap();
    let caller = std::thread::current().id();
    let limits = [
        ResourceLimit::new(Resource::Data, 512 * 1024 * 1024),
        ResourceLimit::new(Resource::FileSize, 1024 * 1024),
        ResourceLimit::new(Resource::CoreFile, 0),
    ];
    let child = ChildLimits {
        limits: &limits,
        cgroup_procs: None,
    };
    let (mut p, setup_thread) =
        spawn_confined(&sh("cat /proc/self/limits", tmp.path()), child, || {
            Ok(std::thread::current().id())
        })
        .unwrap();
    // The setup ran on a thread of its own, so what it restricts stays off this one.
    assert_ne!(setup_thread, caller);
    let mut out = p.take_stdout().unwrap();
    let mut lines = Vec::new();
    while let Some(l) = out.next_line().await.unwrap() {
        lines.push(l.text);
    }
    assert!(p.wait().await.unwrap().success());
    let limit = |name: &str| {
        let line = lines.iter().find(|l| l.starts_with(name)).unwrap();
        line[name.len()..]
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(limit("Max data size"), "536870912 536870912");
    assert_eq!(limit("Max file size"), "1048576 1048576");
    assert_eq!(limit("Max core file size"), "0 0");
}

#[tokio::test]
async fn a_failing_confinement_setup_spawns_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let child = ar_process::ChildLimits::default();
    let err = ar_process::spawn_confined(&sh("touch made", tmp.path()), child, || {
        Err::<(), _>(std::io::Error::other("no sandbox here"))
    })
    .unwrap_err();
    assert!(err.to_string().contains("no sandbox here"), "{err}");
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(!tmp.path().join("made").exists());
}

#[tokio::test]
async fn a_confined_child_joins_the_cgroup_before_it_runs() {
    // A pids cgroup of cgroup v1 (this machine kind); elsewhere the test has nothing to use.
    let dir = std::path::Path::new("/sys/fs/cgroup/pids")
        .join(format!("ar-process-test-{}", std::process::id()));
    if std::fs::create_dir(&dir).is_err() {
        eprintln!("SKIPPED: no writable cgroup v1 pids hierarchy here");
        return;
    }
    let procs = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.procs"))
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let child = ar_process::ChildLimits {
        limits: &[],
        cgroup_procs: Some(std::os::fd::AsFd::as_fd(&procs)),
    };
    let (mut p, ()) =
        ar_process::spawn_confined(&sh("cat /proc/self/cgroup", tmp.path()), child, || Ok(()))
            .unwrap();
    let mut out = p.take_stdout().unwrap();
    let mut lines = Vec::new();
    while let Some(l) = out.next_line().await.unwrap() {
        lines.push(l.text);
    }
    p.wait().await.unwrap();
    let name = dir.file_name().unwrap().to_string_lossy().to_string();
    assert!(
        lines
            .iter()
            .any(|l| l.contains(":pids:") && l.ends_with(&name)),
        "{lines:?}"
    );
    for _ in 0..100 {
        if std::fs::remove_dir(&dir).is_ok() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("the test cgroup could not be removed");
}
