//! Where this crate's unit tests write the Python files they import by path: one directory
//! per test process, removed when the process exits. A module stays imported, and its file
//! may be read again, until the process ends, so no single test can own the directory.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

static DIR: OnceLock<PathBuf> = OnceLock::new();

extern "C" {
    /// libc's: the test harness leaves through `exit`, which runs these.
    fn atexit(callback: extern "C" fn()) -> i32;
}

extern "C" fn remove_dir() {
    if let Some(dir) = DIR.get() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// `sub` of this process's directory, created.
pub fn dir(sub: &str) -> PathBuf {
    let root: &Path = DIR.get_or_init(|| {
        let root = std::env::temp_dir().join(format!("ccswitch-agent-test-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        // SAFETY: registers a plain function that only reads a set-once static.
        assert_eq!(unsafe { atexit(remove_dir) }, 0, "atexit refused the cleanup");
        root
    });
    let dir = root.join(sub);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
