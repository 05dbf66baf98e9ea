//! Test fixture: a fresh directory under the system temp dir with a random name, removed on drop.

use std::path::{Path, PathBuf};

pub(crate) struct TestDir {
    /// As created (under `std::env::temp_dir()`, which may itself be a symlink).
    pub path: PathBuf,
}

impl TestDir {
    pub fn new(tag: &str) -> TestDir {
        let path =
            std::env::temp_dir().join(format!("a2a-edge-{tag}-{}", crate::crypto::random_token()));
        std::fs::create_dir(&path).unwrap();
        TestDir { path }
    }

    pub fn join(&self, rel: &str) -> PathBuf {
        self.path.join(rel)
    }

    /// `mkdir -p` of `rel`; returns its path.
    pub fn mkdir(&self, rel: &str) -> PathBuf {
        let p = self.join(rel);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    pub fn write(&self, rel: &str, bytes: &[u8]) -> PathBuf {
        let p = self.join(rel);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    /// A sparse file of `len` bytes.
    pub fn sized(&self, rel: &str, len: u64) -> PathBuf {
        let p = self.join(rel);
        std::fs::File::create(&p).unwrap().set_len(len).unwrap();
        p
    }

    /// `rel` becomes a symlink to `target` (absolute, or relative to the link's directory).
    pub fn symlink(&self, target: impl AsRef<Path>, rel: &str) -> PathBuf {
        let p = self.join(rel);
        std::os::unix::fs::symlink(target, &p).unwrap();
        p
    }

    pub fn mkfifo(&self, rel: &str) -> PathBuf {
        let p = self.join(rel);
        let status = std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .unwrap();
        assert!(status.success(), "mkfifo failed");
        p
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
