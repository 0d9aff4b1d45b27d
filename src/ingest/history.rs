//! A source tree's git history: which files change together.
//!
//! When the ingested directory is inside a git work tree, `ingest` reads
//! the commits it has not read yet with `git log` (the `git` found on
//! `PATH`), newest last. Each commit that changes at least two files of
//! the tree and at most [`MAX_COMMIT_FILES`] files (larger ones are
//! reformattings, renames and merges of branches, which say little about
//! which files belong together) links every pair of its files with a
//! `co_changed` edge whose weight grows with each such commit, more for
//! recent ones (see [`weight`]). Merges are left out: their changes are
//! those of the commits merged.
//!
//! No git, no repository, a repository without commits, or a git that
//! refuses the directory (another user's, "dubious ownership") means no
//! history: the ingest goes on without it, and its report says why.

use std::path::Path;
use std::process::Command;

/// Commits that change more files than this are passed over.
pub const MAX_COMMIT_FILES: usize = 30;
/// The most commits a first reading takes (the newest): their weights fall
/// with age, and a commit this far back weighs under 1 % of the newest.
pub const MAX_COMMITS: usize = 5000;
/// The age, in commits, over which a commit's weight falls by a factor of e.
pub const TAU: f64 = 1000.0;

/// The weight a commit adds to each pair of its `files` files, when it is
/// the `clock`-th commit read and `base` the clock at which the weights'
/// scale was last set: `exp((clock - base) / TAU) / (files - 1)`. A newer
/// commit weighs more (an older one has decayed by the same factor
/// relative to it), and a commit of many files less per pair, so that
/// each file's links from one commit sum to its weight.
pub fn weight(clock: u64, base: u64, files: usize) -> f64 {
    ((clock as f64 - base as f64) / TAU).exp() / (files.max(2) - 1) as f64
}

/// Commits read from a repository, oldest first.
#[derive(Debug, Default)]
pub struct History {
    /// The commit read last (HEAD when reading ended).
    pub head: String,
    /// Each commit: its id and the files it changed, relative to the ingested directory.
    pub commits: Vec<(String, Vec<String>)>,
    /// The recorded commit is no longer an ancestor of HEAD (history was
    /// rewritten, or another branch checked out): what was read before
    /// must be forgotten, and `commits` are read afresh.
    pub restarted: bool,
}

/// Why there is no history to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoHistory(pub String);

/// The commits of the repository holding `dir` after `since` (all of them,
/// up to [`MAX_COMMITS`], when `since` is `None` or no longer an ancestor),
/// restricted to files under `dir` and named relative to it.
///
/// # Errors
/// [`NoHistory`] when `dir` is not in a git work tree, `git` cannot run, or
/// the repository has no commit.
pub fn read(dir: &Path, since: Option<&str>) -> Result<History, NoHistory> {
    let head = git(dir, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])?.trim().to_owned();
    if head.is_empty() {
        return Err(NoHistory("the repository has no commit".into()));
    }
    let mut history = History { head: head.clone(), ..History::default() };
    let range = match since {
        Some(s) if s == head => return Ok(history),
        Some(s) if git(dir, &["merge-base", "--is-ancestor", s, &head]).is_ok() => format!("{s}..{head}"),
        Some(_) => {
            history.restarted = true;
            head.clone()
        }
        None => head.clone(),
    };
    let limit = format!("--max-count={MAX_COMMITS}");
    // %x01 marks a commit's line; the file names follow, relative to `dir`.
    let log = git(
        dir,
        &[
            "-c",
            "core.quotepath=off",
            "log",
            "--no-merges",
            "--no-renames",
            "--relative",
            "--name-only",
            "--format=%x01%H",
            &limit,
            &range,
            "--",
            ".",
        ],
    )?;
    let mut commits: Vec<(String, Vec<String>)> = Vec::new();
    for line in log.lines() {
        if let Some(id) = line.strip_prefix('\u{1}') {
            commits.push((id.to_owned(), Vec::new()));
        } else if !line.is_empty() && !line.starts_with('"') {
            // A quoted name holds a byte that is not UTF-8 or a control
            // character: no ingested file has such a name.
            if let Some((_, files)) = commits.last_mut() {
                files.push(line.to_owned());
            }
        }
    }
    // A shallow clone's oldest commits show every file of their tree as
    // added (their parents are not there): they say nothing of what
    // changes together.
    let shallow = shallow_commits(dir);
    commits.retain(|(id, _)| !shallow.contains(id));
    commits.reverse();
    history.commits = commits;
    Ok(history)
}

/// The commits at a shallow clone's boundary (none for a full clone).
fn shallow_commits(dir: &Path) -> Vec<String> {
    let Ok(path) = git(dir, &["rev-parse", "--git-path", "shallow"]) else { return Vec::new() };
    let path = dir.join(path.trim());
    std::fs::read_to_string(path).map(|t| t.lines().map(str::to_owned).collect()).unwrap_or_default()
}

/// Runs `git -C dir ARGS` and returns its standard output.
fn git(dir: &Path, args: &[&str]) -> Result<String, NoHistory> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .map_err(|e| NoHistory(format!("git cannot run: {e}")))?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        let why = why.lines().find(|l| !l.trim().is_empty()).unwrap_or("no git repository").trim();
        return Err(NoHistory(why.strip_prefix("fatal: ").unwrap_or(why).to_owned()));
    }
    String::from_utf8(out.stdout).map_err(|_| NoHistory("git's output is not UTF-8".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_and_smaller_commits_weigh_more() {
        assert!((weight(10, 10, 2) - 1.0).abs() < 1e-12);
        assert!(weight(11, 10, 2) > weight(10, 10, 2));
        assert!((weight(10, 10, 5) - 0.25).abs() < 1e-12);
        assert!((weight(1010, 10, 2) / weight(10, 10, 2) - std::f64::consts::E).abs() < 1e-9);
    }
}
