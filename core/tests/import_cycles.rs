//! No file-level import cycle among the files of polld-core and of polld-runtime: the
//! `use` lines of each crate's `src/` (with `crate::`, `super::`, `self::` and child
//! paths) form a graph of files with no cycle. A module's use of its own submodules is
//! its composition (it declares them), not an import; a path through a re-export leads
//! to the file the item is declared in.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path from the crate root: `["dataplane", "step"]`.
type ModPath = Vec<String>;

/// One `use` statement of a file: the inline module it sits in (relative to the file's
/// module), whether it is a `pub`/`pub(crate)` re-export, and its expanded paths.
struct Use {
    inline: ModPath,
    public: bool,
    paths: Vec<Vec<String>>,
}

/// The crate's files by module path.
fn modules(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    let mut found = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: ModPath = rel.iter().map(|p| p.to_string_lossy().into()).collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            found.insert(parts, path);
        }
    }
    found
}

/// Expands a use tree `a::{b, c::{d, e}}` into its paths (`self` in a group is the
/// group's own path; `as` renames are dropped).
fn expand(tree: &str) -> Vec<Vec<String>> {
    let tree = tree.trim();
    let split_top = |s: &str| {
        let (mut depth, mut start, mut parts) = (0, 0, Vec::new());
        for (i, c) in s.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(s[start..i].to_string());
                    start = i + 1;
                }
                _ => {}
            }
        }
        parts.push(s[start..].to_string());
        parts
    };
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open]
            .trim_end_matches("::")
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        let inner = &tree[open + 1..tree.rfind('}').unwrap()];
        return split_top(inner)
            .iter()
            .filter(|p| !p.trim().is_empty())
            .flat_map(|p| expand(p))
            .map(|tail| {
                let tail: Vec<String> = tail.into_iter().filter(|s| s != "self").collect();
                head.iter().cloned().chain(tail).collect()
            })
            .collect();
    }
    let path = tree.split(" as ").next().unwrap();
    vec![path.split("::").map(|s| s.trim().to_string()).collect()]
}

/// Whether `text` can be (the start of) a use tree: a path, braces, commas, `*`, `as`.
fn is_use_tree(text: &str) -> bool {
    text.chars()
        .all(|c| c.is_alphanumeric() || "_:{},*; ".contains(c))
}

/// The `use` statements of a file's text, with the inline module each sits in.
fn uses(text: &str) -> Vec<Use> {
    let mut found = Vec::new();
    // Open inline modules, each with the brace depth its body starts at.
    let mut inline: Vec<(String, i32)> = Vec::new();
    let mut depth = 0;
    let mut pending: Option<(bool, String)> = None;
    for line in text.lines() {
        let code = line.split("//").next().unwrap().trim();
        if let Some((public, mut tree)) = pending.take() {
            tree.push_str(code);
            if !is_use_tree(&tree) {
                continue; // text in a string that starts with `use `
            }
            match tree.strip_suffix(';') {
                Some(done) => found.push(Use {
                    inline: inline.iter().map(|(n, _)| n.clone()).collect(),
                    public,
                    paths: expand(done),
                }),
                None => pending = Some((public, tree)),
            }
            continue;
        }
        let stripped = code
            .strip_prefix("pub(crate) ")
            .or_else(|| code.strip_prefix("pub(super) "))
            .or_else(|| code.strip_prefix("pub "));
        let public = stripped.is_some();
        if let Some(tree) = stripped.unwrap_or(code).strip_prefix("use ") {
            pending = Some((public, String::new()));
            let (p, t) = pending.as_mut().unwrap();
            t.push_str(tree);
            if !is_use_tree(t) {
                pending = None;
            } else if let Some(done) = t.strip_suffix(';') {
                found.push(Use {
                    inline: inline.iter().map(|(n, _)| n.clone()).collect(),
                    public: *p,
                    paths: expand(done),
                });
                pending = None;
            }
            continue;
        }
        let word = stripped.unwrap_or(code);
        if let Some(name) = word.strip_prefix("mod ").and_then(|m| m.strip_suffix(" {")) {
            inline.push((name.trim().to_string(), depth + 1));
        }
        depth += code.matches('{').count() as i32 - code.matches('}').count() as i32;
        while inline.last().is_some_and(|&(_, d)| depth < d) {
            inline.pop();
        }
    }
    found
}

/// The file-level import graph of the crate at `src`: each file's module path and the
/// modules of the files it uses.
fn graph(src: &Path) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let files = modules(src);
    let parsed: BTreeMap<ModPath, Vec<Use>> = files
        .iter()
        .map(|(m, p)| (m.clone(), uses(&std::fs::read_to_string(p).unwrap())))
        .collect();
    // Re-exports by (module, name): the absolute path they stand for.
    let mut reexports: BTreeMap<(ModPath, String), Vec<String>> = BTreeMap::new();
    for (module, list) in &parsed {
        for u in list.iter().filter(|u| u.public && u.inline.is_empty()) {
            for path in &u.paths {
                if let Some(abs) = absolute(module, path, &files) {
                    let name = abs.last().unwrap().clone();
                    reexports.insert((module.clone(), name), abs);
                }
            }
        }
    }
    let mut edges: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (module, list) in &parsed {
        let out = edges.entry(module.clone()).or_default();
        for u in list {
            let here: ModPath = module.iter().chain(&u.inline).cloned().collect();
            for path in &u.paths {
                let Some(abs) = absolute(&here, path, &files) else {
                    continue;
                };
                let target = resolve(&abs, &files, &reexports);
                // A module declares its submodules: using them is its composition.
                if !target.starts_with(module) {
                    out.insert(target);
                }
            }
        }
    }
    edges
}

/// `path` as used in module `here`, from the crate root; `None` for another crate's.
fn absolute(
    here: &ModPath,
    path: &[String],
    files: &BTreeMap<ModPath, PathBuf>,
) -> Option<Vec<String>> {
    let mut at = here.clone();
    let mut rest = path;
    match rest.first()?.as_str() {
        "crate" => {
            at.clear();
            rest = &rest[1..];
        }
        "self" => rest = &rest[1..],
        "super" => {
            while rest.first().is_some_and(|s| s == "super") {
                at.pop()?;
                rest = &rest[1..];
            }
        }
        child => {
            let mut inner = here.clone();
            inner.push(child.to_string());
            if !files.contains_key(&inner) {
                return None;
            }
        }
    }
    Some(at.into_iter().chain(rest.iter().cloned()).collect())
}

/// The file an absolute path leads to: its longest prefix that is a file, through the
/// re-exports of that file.
fn resolve(
    abs: &[String],
    files: &BTreeMap<ModPath, PathBuf>,
    reexports: &BTreeMap<(ModPath, String), Vec<String>>,
) -> ModPath {
    let mut path = abs.to_vec();
    for _ in 0..8 {
        let len = (0..=path.len())
            .rev()
            .find(|&n| files.contains_key(&path[..n].to_vec()))
            .unwrap_or(0);
        let file = path[..len].to_vec();
        let Some(next) = path.get(len) else {
            return file;
        };
        match reexports.get(&(file.clone(), next.clone())) {
            Some(target) if target.as_slice() != &path[..=len] => {
                path = target.iter().chain(&path[len + 1..]).cloned().collect();
            }
            _ => return file,
        }
    }
    path
}

/// A cycle of the graph, as file modules in order, if there is one.
fn cycle(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Option<Vec<ModPath>> {
    fn visit(
        at: &ModPath,
        edges: &BTreeMap<ModPath, BTreeSet<ModPath>>,
        done: &mut BTreeSet<ModPath>,
        stack: &mut Vec<ModPath>,
    ) -> Option<Vec<ModPath>> {
        if let Some(i) = stack.iter().position(|m| m == at) {
            return Some(stack[i..].to_vec());
        }
        if !done.insert(at.clone()) {
            return None;
        }
        stack.push(at.clone());
        for next in edges.get(at).into_iter().flatten() {
            if let Some(found) = visit(next, edges, done, stack) {
                return Some(found);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|m| visit(m, edges, &mut done, &mut Vec::new()))
}

fn name(m: &ModPath) -> String {
    match m.is_empty() {
        true => "lib.rs".to_string(),
        false => m.join("/"),
    }
}

fn assert_no_cycle(krate: &str) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(krate)
        .join("src");
    let edges = graph(&src);
    assert!(edges.len() > 3, "{}: too few files found", src.display());
    if let Some(found) = cycle(&edges) {
        let names: Vec<String> = found.iter().chain(found.first()).map(name).collect();
        panic!("{krate}/src: import cycle {}", names.join(" -> "));
    }
}

#[test]
fn the_files_of_core_import_each_other_without_a_cycle() {
    assert_no_cycle("core");
}

#[test]
fn the_files_of_runtime_import_each_other_without_a_cycle() {
    assert_no_cycle("runtime");
}

#[test]
fn the_checker_finds_a_cycle_and_follows_re_exports() {
    let edges = |list: &[(&str, &str)]| {
        let mut g: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
        for (a, b) in list {
            let m = |s: &str| s.split('/').map(str::to_string).collect::<ModPath>();
            g.entry(m(a)).or_default().insert(m(b));
        }
        g
    };
    assert!(cycle(&edges(&[("a", "b"), ("b", "c")])).is_none());
    let found = cycle(&edges(&[("a", "b"), ("b", "c"), ("c", "a")])).unwrap();
    assert_eq!(found.len(), 3);
    assert_eq!(
        expand("crate::poll::{self, Poller, cycle::{A, B as C}}"),
        vec![
            vec!["crate", "poll"],
            vec!["crate", "poll", "Poller"],
            vec!["crate", "poll", "cycle", "A"],
            vec!["crate", "poll", "cycle", "B"],
        ]
    );
    let text =
        "use crate::x::Y;\npub use inner::Z;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n";
    let found = uses(text);
    assert_eq!(found.len(), 3);
    assert!(!found[0].public && found[1].public);
    assert_eq!(found[2].inline, vec!["tests".to_string()]);
}
