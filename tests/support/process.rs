//! Processes a test starts (key-service servers, `git daemon`, the controller binary) never
//! outlive it.
//!
//! Each such process runs in a process group of its own, so that what it forks goes with it
//! (`git daemon` is a wrapper that runs `git-daemon` as its child: killing the wrapper alone
//! left the daemon running). A `Watchdog` shell holds the read end of a pipe whose write end
//! only the test process has: when the guard drops, or when the test process ends in any other
//! way (a panic that aborts, SIGKILL, a CI time limit) and no destructor runs, the pipe closes
//! and the watchdog kills the whole group. The watchdog has a group of its own too, so a
//! terminal's Ctrl-C reaches it no earlier than it reaches the test process.

use std::io;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};

/// Kills a process group when dropped or when the test process ends, whichever comes first.
pub struct Watchdog {
    group: u32,
    shell: Child,
}

impl Watchdog {
    /// Guards the process group `group` (the pid of a child spawned with `process_group(0)`).
    pub fn guard(group: u32) -> Watchdog {
        let shell = Command::new("sh")
            .arg("-c")
            // `read` returns at end of file: the guard dropped its pipe or the test process
            // ended. procps' kill (through env): dash's builtin takes no process group.
            .arg(format!(
                "read _ignored; env kill -s KILL -- -{group} 2>/dev/null; exit 0"
            ))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("the watchdog shell starts");
        Watchdog { group, shell }
    }

    /// Kills the group now (the guarded process and everything it forked).
    pub fn kill_group(&self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.group)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.kill_group();
        // Closing the pipe lets the shell finish.
        drop(self.shell.stdin.take());
        let _ = self.shell.wait();
    }
}

/// A child process in a group of its own, killed with that group when dropped or when the
/// test process ends.
pub struct Supervised {
    child: Child,
    watchdog: Watchdog,
}

impl Supervised {
    /// Spawns `command` in a process group of its own, under a watchdog.
    pub fn spawn(command: &mut Command) -> io::Result<Supervised> {
        let child = command.process_group(0).spawn()?;
        let watchdog = Watchdog::guard(child.id());
        Ok(Supervised { child, watchdog })
    }

    /// The process, to wait for it or read its exit status.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.watchdog.kill_group();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn alive(pid: u32) -> bool {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z ")
    }

    fn wait_gone(pid: u32) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if !alive(pid) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// What a process forks dies with it: the grandchild's pid is read from its output.
    #[test]
    fn dropping_a_supervised_process_kills_what_it_forked() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild");
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(format!(
                "sleep 600 & echo $! > {}; wait",
                pid_file.display()
            ))
            .stdout(Stdio::null());
        let supervised = Supervised::spawn(&mut command).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let grandchild = loop {
            if let Some(pid) = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|t| t.trim().parse::<u32>().ok())
            {
                break pid;
            }
            assert!(Instant::now() < deadline, "the grandchild started");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(alive(grandchild));
        drop(supervised);
        assert!(wait_gone(grandchild), "the forked sleep was killed too");
    }

    /// The pipe closing (what the end of the test process does) is enough: no destructor of
    /// the guard runs.
    #[test]
    fn the_watchdog_kills_the_group_when_its_pipe_closes() {
        let child = Command::new("sleep")
            .arg("600")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id();
        let mut watchdog = Watchdog::guard(pid);
        drop(watchdog.shell.stdin.take());
        assert!(wait_gone(pid), "the watchdog killed the group");
        let _ = watchdog.shell.wait();
        std::mem::forget(watchdog);
        std::mem::forget(child);
    }
}
