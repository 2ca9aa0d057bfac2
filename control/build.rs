//! What `polld_build_info` says about the build: the commit the workspace was checked out
//! at and the compiler's version, as `POLLD_COMMIT` and `POLLD_RUSTC` for `env!`.
//!
//! The commit is read from the workspace's own `.git` (a directory, or a worktree's
//! `gitdir:` file), without running git: a build from a tarball, or from a checkout
//! without git installed, still builds, with `unknown`. The script runs again when `HEAD`
//! or the branch it names moves, and only then: it watches only files that exist, since
//! cargo reruns a script that names a missing one on every build.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace = manifest
        .parent()
        .expect("the crate is a folder of the workspace");
    let commit = commit(workspace).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=POLLD_COMMIT={commit}");
    println!("cargo:rustc-env=POLLD_RUSTC={}", rustc_version());
}

/// The compiler cargo builds with, as `rustc --version` gives it without its first word
/// (`1.88.0 (6b00bc388 2025-06-23)`).
fn rustc_version() -> String {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|v| v.trim().trim_start_matches("rustc ").to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// The commit `HEAD` names in `workspace`'s git repository, watched for changes; `None`
/// when the workspace is not a checkout or its refs cannot be read.
fn commit(workspace: &Path) -> Option<String> {
    let git = git_dir(workspace)?;
    let head_path = git.join("HEAD");
    watch(&head_path);
    let head = fs::read_to_string(&head_path).ok()?;
    let Some(name) = head.trim().strip_prefix("ref: ") else {
        // Detached: HEAD holds the commit itself.
        return hash(head.trim());
    };
    // Branches live in the common directory, shared by a repository's worktrees.
    let common = match fs::read_to_string(git.join("commondir")) {
        Ok(dir) => git.join(dir.trim()),
        Err(_) => git,
    };
    let loose = common.join(name);
    let packed = common.join("packed-refs");
    if packed.exists() {
        watch(&packed);
    }
    if loose.exists() {
        watch(&loose);
        return hash(fs::read_to_string(&loose).ok()?.trim());
    }
    // Only packed so far: the next commit writes the loose file beside its siblings.
    if let Some(dir) = loose.parent().filter(|d| d.exists()) {
        watch(dir);
    }
    let refs = fs::read_to_string(&packed).ok()?;
    refs.lines()
        .filter_map(|line| line.split_once(' '))
        .find(|(_, r)| *r == name)
        .and_then(|(h, _)| hash(h))
}

/// The repository of `workspace`: its `.git` directory, or where a worktree's `.git`
/// file points.
fn git_dir(workspace: &Path) -> Option<PathBuf> {
    let dot_git = workspace.join(".git");
    if dot_git.is_dir() {
        return Some(dot_git);
    }
    let file = fs::read_to_string(&dot_git).ok()?;
    let dir = file.trim().strip_prefix("gitdir: ")?;
    Some(workspace.join(dir))
}

/// `text` if it is a full commit hash (SHA-1, or SHA-256 in a repository that uses it).
fn hash(text: &str) -> Option<String> {
    let full = [40, 64].contains(&text.len()) && text.bytes().all(|b| b.is_ascii_hexdigit());
    full.then(|| text.to_string())
}

fn watch(path: &Path) {
    println!("cargo:rerun-if-changed={}", path.display());
}
