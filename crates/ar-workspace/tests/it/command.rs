//! `run_command`: refusals, bounds (fork bomb, infinite loop, output flood, memory) and the
//! Landlock sandbox (writes only inside the root, none in a read-only workspace).

use std::time::Duration;

use ar_workspace::{Access, CommandPolicy};
use serde_json::json;

use crate::support::{
    err, fixture, fixture_with, landlock_enforced, ok, test_policy, wait_gone, SECRET,
};

#[tokio::test]
async fn shell_syntax_paths_and_unlisted_programs_are_refused() {
    let fx = fixture(Access::ReadWrite);
    let before = fx.outside_snapshot();
    let cases = [
        (
            json!({"program": "ls", "args": ["|", "rm", "-rf", "."]}),
            "shell operators",
        ),
        (
            json!({"program": "echo", "args": ["x", ">", "../outside/secret.rs"]}),
            "shell operators",
        ),
        (
            json!({"program": "echo", "args": [">../outside/secret.rs"]}),
            "shell operators",
        ),
        (
            json!({"program": "ls", "args": ["&&", "rm", "x"]}),
            "shell operators",
        ),
        (
            json!({"program": "echo", "args": ["$(cat /etc/passwd)"]}),
            "shell operators",
        ),
        (json!({"command": "ls; rm -rf ."}), "shell operators"),
        (
            json!({"command": "cat /etc/passwd | head"}),
            "shell operators",
        ),
        (json!({"program": "ls;rm"}), "one name"),
        (
            json!({"program": "bash", "args": ["-c", "rm -rf /"]}),
            "not allowed",
        ),
        (json!({"program": "sh"}), "not allowed"),
        (json!({"program": "/bin/ls"}), "not a path"),
        (json!({"program": "./ls"}), "not a path"),
        (json!({}), "program is required"),
        (
            json!({"program": "ls", "timeout_seconds": 901}),
            "between 1 and 900",
        ),
        (
            json!({"program": "ls", "working_directory": "../outside"}),
            "escapes the workspace root",
        ),
    ];
    for (input, expected) in cases {
        let out = fx.call("run_command", input.clone()).await;
        assert!(err(&out).contains(expected), "{input}: {}", out.content);
    }
    assert_eq!(fx.outside_snapshot(), before);
}

#[tokio::test]
async fn a_command_runs_in_the_root_or_its_working_directory() {
    let fx = fixture(Access::ReadWrite);
    if !landlock_enforced(&fx).await {
        return;
    }
    let out = fx.call("run_command", json!({"program": "pwd"})).await;
    assert!(
        ok(&out).starts_with(&format!("{}\n", fx.tools.root().display())),
        "{}",
        out.content
    );
    let out = fx
        .call(
            "run_command",
            json!({"program": "ls", "working_directory": "src"}),
        )
        .await;
    assert!(ok(&out).starts_with("main.rs\n"), "{}", out.content);
    assert!(out.content.contains("[exit status 0]"));
    let failed = fx
        .call(
            "run_command",
            json!({"program": "ls", "args": ["no-such-file"]}),
        )
        .await;
    assert!(
        err(&failed).contains("Command failed: exit status 2"),
        "{}",
        failed.content
    );
    assert!(failed.content.contains("[stderr]"));
    // The environment is filtered: nothing of this process's but the allow-list.
    std::env::set_var("AR_WORKSPACE_TEST_SECRET", "leak-me");
    let env = fx
        .call(
            "run_command",
            json!({"program": "python3", "args": ["-c", "import os; print(sorted(os.environ))"]}),
        )
        .await;
    assert!(
        !ok(&env).contains("AR_WORKSPACE_TEST_SECRET"),
        "{}",
        env.content
    );
}

#[tokio::test]
async fn writes_outside_the_root_are_refused_by_the_kernel() {
    let fx = fixture(Access::ReadWrite);
    if !landlock_enforced(&fx).await {
        return;
    }
    let before = fx.outside_snapshot();
    let target = fx.outside().join("pwned.txt");
    let script = format!("open({:?}, 'w').write('x')", target.display().to_string());
    let out = fx
        .call(
            "run_command",
            json!({"program": "python3", "args": ["-c", script]}),
        )
        .await;
    assert!(err(&out).contains("PermissionError"), "{}", out.content);
    assert!(out.content.contains("can write only inside the workspace"));
    assert!(!target.exists());
    let overwrite = format!(
        "open({:?}, 'w').write('x')",
        fx.outside().join("secret.rs").display().to_string()
    );
    err(&fx
        .call(
            "run_command",
            json!({"program": "python3", "args": ["-c", overwrite]}),
        )
        .await);
    // Reads outside the root and the system paths are refused too.
    let read = fx
        .call(
            "run_command",
            json!({"program": "cat", "args": [fx.outside().join("secret.rs")]}),
        )
        .await;
    assert!(
        err(&read).contains("Permission denied") && !read.content.contains(SECRET),
        "{}",
        read.content
    );
    let environ = fx
        .call(
            "run_command",
            json!({"program": "cat", "args": [format!("/proc/{}/environ", std::process::id())]}),
        )
        .await;
    assert!(
        err(&environ).contains("Permission denied"),
        "{}",
        environ.content
    );
    // Signals to processes outside the sandbox (this one) are refused.
    let kill = format!("import os; os.kill({}, 0)", std::process::id());
    let signalled = fx
        .call(
            "run_command",
            json!({"program": "python3", "args": ["-c", kill]}),
        )
        .await;
    assert!(
        err(&signalled).contains("PermissionError"),
        "{}",
        signalled.content
    );
    // Writing inside works.
    let inside = fx
        .call(
            "run_command",
            json!({"program": "python3", "args": ["-c", "open('made.txt', 'w').write('ok')"]}),
        )
        .await;
    ok(&inside);
    assert_eq!(
        std::fs::read_to_string(fx.root().join("made.txt")).unwrap(),
        "ok"
    );
    assert_eq!(fx.outside_snapshot(), before);
}

#[tokio::test]
async fn a_read_only_workspace_refuses_writes_inside_too() {
    let fx = fixture(Access::ReadOnly);
    if !landlock_enforced(&fx).await {
        return;
    }
    let out = fx
        .call(
            "run_command",
            json!({"program": "python3", "args": ["-c", "open('made.txt', 'w').write('x')"]}),
        )
        .await;
    assert!(err(&out).contains("PermissionError"), "{}", out.content);
    assert!(out.content.contains("read-only"));
    assert!(!fx.root().join("made.txt").exists());
    let unlink = fx
        .call(
            "run_command",
            json!({"program": "python3", "args": ["-c", "import os; os.remove('src/main.rs')"]}),
        )
        .await;
    err(&unlink);
    assert!(fx.root().join("src/main.rs").exists());
    // Reading still works, and the read-only subset is enforced before spawning.
    assert!(ok(&fx
        .call(
            "run_command",
            json!({"program": "cat", "args": ["src/main.rs"]})
        )
        .await)
    .contains("println"));
    let mkdir = fx
        .call("run_command", json!({"program": "mkdir", "args": ["x"]}))
        .await;
    assert!(err(&mkdir).contains("not permitted in a read-only workspace"));
    let commit = fx
        .call(
            "run_command",
            json!({"program": "git", "args": ["commit", "-m", "x"]}),
        )
        .await;
    assert!(err(&commit).contains("not permitted in a read-only workspace"));
}

#[tokio::test]
async fn an_infinite_loop_is_stopped_at_the_timeout() {
    let fx = fixture(Access::ReadWrite);
    if !landlock_enforced(&fx).await {
        return;
    }
    let marker = "ar_ws_loop_marker";
    let script = format!("# {marker}\nwhile True: pass");
    let started = std::time::Instant::now();
    let out = fx
        .call(
            "run_command",
            json!({"program": "python3", "args": ["-c", script], "timeout_seconds": 1}),
        )
        .await;
    assert!(
        err(&out).contains("timed out after 1 seconds"),
        "{}",
        out.content
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(wait_gone(marker).await, Vec::<u32>::new());
}

#[tokio::test]
async fn a_fork_bomb_is_stopped_and_leaves_nothing() {
    let policy = CommandPolicy {
        max_processes: 32,
        ..test_policy()
    };
    let fx = fixture_with(Access::ReadWrite, policy);
    if !landlock_enforced(&fx).await {
        return;
    }
    // Without a kernel cap a fork bomb as root can exhaust the machine's process table and
    // take every other test (and the CI machine) with it: never launch one then.
    if !ar_workspace::kernel_process_limit_available() {
        let why = "no writable pids cgroup: the fork bomb test cannot be contained here";
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
        eprintln!("!!!!! SKIPPED a_fork_bomb_is_stopped_and_leaves_nothing: {why}");
        return;
    }
    let marker = "ar_ws_forkbomb_marker";
    let script = format!("# {marker}\nimport os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)");
    let out = fx
        .call(
            "run_command",
            json!({"program": "python3", "args": ["-c", script], "timeout_seconds": 20}),
        )
        .await;
    assert!(
        err(&out).contains("reached its limit of 32 processes and threads and was stopped"),
        "{}",
        out.content
    );
    assert_eq!(
        wait_gone(marker).await,
        Vec::<u32>::new(),
        "fork bomb processes left"
    );
    // Where the pids controller is writable (cgroup v1 as root here) the kernel held the bomb
    // to 32 tasks in the run's cgroup (its removal is tested in `pids.rs`).
    let limit = out.structured.as_ref().unwrap()["process_limit"].clone();
    eprintln!("fork bomb contained by: {limit}");
}

#[tokio::test]
async fn a_flood_of_output_is_cut_and_stopped() {
    let fx = fixture(Access::ReadWrite);
    if !landlock_enforced(&fx).await {
        return;
    }
    let script =
        "import sys\nchunk = 'x' * (1024 * 1024)\nfor _ in range(100): sys.stdout.write(chunk)";
    let out = fx
        .call(
            "run_command",
            json!({"program": "python3", "args": ["-c", script]}),
        )
        .await;
    assert!(
        err(&out).contains("printed more than 33554432 bytes and was stopped"),
        "{}",
        &out.content[..200.min(out.content.len())]
    );
    assert!(
        out.content
            .starts_with("[output cut: showing the last 50000 of "),
        "{}",
        &out.content[..100]
    );
    assert!(
        out.content.len() < 60_000,
        "{} bytes returned",
        out.content.len()
    );
    // Under the stop limit, the output is cut to its tail and the command succeeds.
    let policy = CommandPolicy {
        output_stop_bytes: 200 * 1024 * 1024,
        ..test_policy()
    };
    let big = fixture_with(Access::ReadWrite, policy);
    let out = big
        .call(
            "run_command",
            json!({"program": "python3", "args": ["-c", script]}),
        )
        .await;
    assert!(
        ok(&out).starts_with("[output cut: showing the last 50000 of 104857600 bytes]"),
        "{}",
        &out.content[..100]
    );
    assert!(out.content.len() < 60_000);
}

#[tokio::test]
async fn memory_is_bounded_by_rlimits() {
    let policy = CommandPolicy {
        memory_bytes: 256 * 1024 * 1024,
        ..test_policy()
    };
    let fx = fixture_with(Access::ReadWrite, policy);
    if !landlock_enforced(&fx).await {
        return;
    }
    let out = fx
        .call(
            "run_command",
            json!({"program": "python3", "args": ["-c", "b = bytearray(1 << 30)"]}),
        )
        .await;
    assert!(err(&out).contains("MemoryError"), "{}", out.content);
    ok(&fx
        .call(
            "run_command",
            json!({"program": "python3", "args": ["-c", "b = bytearray(1 << 20)"]}),
        )
        .await);
}

#[tokio::test]
async fn a_command_that_closes_its_output_is_waited_for() {
    let fx = fixture(Access::ReadWrite);
    if !landlock_enforced(&fx).await {
        return;
    }
    let script = "import os, time\nos.close(1)\nos.close(2)\ntime.sleep(0.5)\nopen('done.txt', 'w').write('yes')";
    let out = fx
        .call(
            "run_command",
            json!({"program": "python3", "args": ["-c", script]}),
        )
        .await;
    ok(&out);
    assert_eq!(
        std::fs::read_to_string(fx.root().join("done.txt")).unwrap(),
        "yes"
    );
}
