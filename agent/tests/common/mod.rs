//! Shared by the tests that run a real `ccswitch-agent`: the process in a temporary directory
//! of its own (its log in `agent.log` there), stopped by its PID and the directory removed on
//! drop, also on panic; and a fake CCP datapath that sends and receives framed messages on
//! the agent's datapath socket.
#![allow(dead_code)]

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ccswitch_protocol::standard::report;
use ccswitch_protocol::wire::{self, FrameReader, Msg};

pub const START_TIMEOUT: Duration = Duration::from_secs(10);
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// The fields of a standard-program report: `values` at their registers (`report::*`), 0
/// elsewhere.
pub fn report_fields(values: &[(usize, u64)]) -> Vec<u64> {
    let mut fields = vec![0; report::COUNT];
    for &(index, value) in values {
        fields[index] = value;
    }
    fields
}

/// An empty directory for the test `test` of this test binary, under the system's temporary
/// directory.
pub fn test_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ccsw-agent-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub struct AgentProcess {
    pub child: Child,
    pub dir: PathBuf,
    pub socket: PathBuf,
    pub log: PathBuf,
}

impl AgentProcess {
    /// An agent on the datapath socket `agent.sock` in `dir` (from `test_dir`), with `args`
    /// (which need `--log-level` info or finer); returns once it logged that it listens.
    pub fn start_in(dir: PathBuf, args: &[&str]) -> AgentProcess {
        AgentProcess::start_in_with_env(dir, args, &[])
    }

    /// `start_in`, with these environment variables set for the agent (e.g. `PYTHONPATH`).
    pub fn start_in_with_env(dir: PathBuf, args: &[&str], env: &[(&str, &str)]) -> AgentProcess {
        let (socket, log) = (dir.join("agent.sock"), dir.join("agent.log"));
        let log_file = File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_ccswitch-agent"))
            .args(["--socket", socket.to_str().unwrap()])
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file)
            .spawn()
            .unwrap();
        let mut agent = AgentProcess { child, dir, socket, log };
        // Waits for the log rather than connecting: a connection would count as a datapath.
        agent.wait_for_log("agent listening");
        agent
    }

    /// `start_in` a fresh `test_dir(test)`.
    pub fn start(test: &str, args: &[&str]) -> AgentProcess {
        AgentProcess::start_in(test_dir(test), args)
    }

    pub fn log_bytes(&self) -> Vec<u8> {
        std::fs::read(&self.log).unwrap_or_default()
    }

    pub fn log_text(&self) -> String {
        String::from_utf8_lossy(&self.log_bytes()).into_owned()
    }

    /// Waits until the log holds `needle`; fails if the agent exits first.
    pub fn wait_for_log(&mut self, needle: &str) {
        let deadline = Instant::now() + START_TIMEOUT;
        while !self.log_text().contains(needle) {
            assert!(self.alive(), "the agent exited before logging {needle:?}:\n{}", self.log_text());
            assert!(Instant::now() < deadline, "no {needle:?} in the log:\n{}", self.log_text());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// A datapath connected to the agent's socket, that has sent nothing yet.
    pub fn connect(&self) -> Datapath {
        let s = UnixStream::connect(&self.socket).unwrap();
        s.set_read_timeout(Some(ANSWER_TIMEOUT)).unwrap();
        Datapath { s, frames: FrameReader::new() }
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub struct Datapath {
    pub s: UnixStream,
    pub frames: FrameReader,
}

impl Datapath {
    pub fn send(&mut self, m: &Msg) {
        self.s.write_all(&m.encode().unwrap()).unwrap();
    }

    /// The agent's next message; fails if it closes the connection or says nothing for
    /// `ANSWER_TIMEOUT`.
    pub fn recv(&mut self) -> Msg {
        let mut buf = [0u8; 4096];
        loop {
            if let Some(frame) = self.frames.next_frame().unwrap() {
                return wire::decode(&frame).unwrap().0;
            }
            let n = self.s.read(&mut buf).expect("the agent answered");
            assert!(n > 0, "the agent closed the connection");
            self.frames.push(&buf[..n]);
        }
    }
}
