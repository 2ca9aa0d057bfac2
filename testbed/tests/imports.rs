//! No file of polld-testbed's source imports, through a chain of other files, a file that
//! imports it: a file-level import cycle is a shared helper waiting for a module of its
//! own.
//!
//! The graph is read from each file's code (its comments and its `#[cfg(test)] mod
//! tests` left out): every `crate::`, `super::` and `self::` path, groups expanded, is an
//! edge to the file of the longest module it names, followed through that module's
//! `pub use` re-exports to the file that declares the item.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module by its path from the crate root (`["seeds", "report"]`; the root is `[]`).
type Module = Vec<String>;

/// The code of every file under `dir`, by module; `under` is `dir`'s module.
fn read_modules(dir: &Path, under: &[String], out: &mut BTreeMap<Module, String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let mut module = under.to_vec();
        if path.is_dir() {
            module.push(name);
            read_modules(&path, &module, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            if name != "mod" && name != "lib" {
                module.push(name);
            }
            out.insert(module, code(&std::fs::read_to_string(&path).unwrap()));
        }
    }
}

/// A file's code: without its comments and its unit tests.
fn code(text: &str) -> String {
    let text = text
        .split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap_or_default();
    let lines = text.lines().filter(|l| !l.trim_start().starts_with("//"));
    lines.collect::<Vec<_>>().join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The paths the path or use tree at the start of `s` names, groups (`{a, b::c}`)
/// expanded, each as its segments.
fn tree(s: &str) -> Vec<Vec<String>> {
    if let Some(group) = s.strip_prefix('{') {
        let (mut depth, mut start, mut items) = (0, 0, Vec::new());
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    items.push(&group[start..i]);
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(&group[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        return items.into_iter().flat_map(|i| tree(i.trim())).collect();
    }
    let ident: String = s.chars().take_while(|&c| is_ident(c)).collect();
    if ident.is_empty() {
        return vec![Vec::new()];
    }
    match s[ident.len()..].strip_prefix("::") {
        Some(rest) => tree(rest.trim_start())
            .into_iter()
            .map(|mut p| {
                p.insert(0, ident.clone());
                p
            })
            .collect(),
        None => vec![vec![ident]],
    }
}

/// The paths in `code` that begin at one of `heads` (`crate::`, ...), each as its
/// segments.
fn paths_from<'a>(code: &'a str, heads: &'a [&str]) -> impl Iterator<Item = Vec<String>> + 'a {
    code.char_indices()
        .filter(move |&(i, _)| {
            let before = code[..i].chars().next_back();
            !before.is_some_and(is_ident) && heads.iter().any(|h| code[i..].starts_with(h))
        })
        .flat_map(move |(i, _)| tree(&code[i..]))
}

/// `path`, written in `module`, from the crate root.
fn absolute(module: &[String], path: &[String]) -> Module {
    if path.first().is_some_and(|s| s == "crate") {
        return path[1..].to_vec();
    }
    let mut at = module.to_vec();
    let mut rest = path;
    while let Some((head, tail)) = rest.split_first() {
        match head.as_str() {
            "super" => drop(at.pop()),
            "self" => {}
            _ => break,
        }
        rest = tail;
    }
    at.extend_from_slice(rest);
    at
}

/// The file-level import graph of `modules`.
fn graph(modules: &BTreeMap<Module, String>) -> BTreeMap<Module, BTreeSet<Module>> {
    // (module, name) -> the path it re-exports.
    let mut reexports = BTreeMap::new();
    for (module, code) in modules {
        for (at, _) in code.match_indices("use ") {
            let line = &code[code[..at].rfind('\n').map_or(0, |i| i + 1)..at];
            let visibility = line.trim();
            if visibility != "pub" && !visibility.starts_with("pub(") {
                continue;
            }
            for path in tree(&code[at + "use ".len()..]) {
                if let Some(name) = path.last() {
                    reexports.insert((module.clone(), name.clone()), absolute(module, &path));
                }
            }
        }
    }
    let resolve = |path: Module| -> Module {
        let mut path = path;
        for _ in 0..8 {
            let known = (0..=path.len())
                .rev()
                .find(|&i| modules.contains_key(&path[..i]));
            let Some(i) = known else { return Vec::new() };
            match path
                .get(i)
                .and_then(|name| reexports.get(&(path[..i].to_vec(), name.clone())))
            {
                Some(target) => path = [target.clone(), path[i + 1..].to_vec()].concat(),
                None => return path[..i].to_vec(),
            }
        }
        path
    };
    let heads = ["crate::", "super::", "self::"];
    modules
        .iter()
        .map(|(module, code)| {
            let deps = paths_from(code, &heads)
                .map(|path| resolve(absolute(module, &path)))
                .filter(|dep| dep != module)
                .collect();
            (module.clone(), deps)
        })
        .collect()
}

/// Each set of modules that import one another in a circle.
fn cycles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> BTreeSet<BTreeSet<String>> {
    let reach = |from: &Module| {
        let (mut seen, mut todo) = (BTreeSet::new(), vec![from.clone()]);
        while let Some(m) = todo.pop() {
            for dep in graph.get(&m).into_iter().flatten() {
                if seen.insert(dep.clone()) {
                    todo.push(dep.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&Module, BTreeSet<Module>> =
        graph.keys().map(|m| (m, reach(m))).collect();
    reaches
        .iter()
        .filter(|(m, r)| r.contains(**m))
        .map(|(m, r)| {
            r.iter()
                .filter(|other| reaches[other].contains(*m))
                .map(|other| other.join("/"))
                .collect()
        })
        .collect()
}

#[test]
fn no_file_of_the_testbed_imports_itself_through_others() {
    let mut modules = BTreeMap::new();
    read_modules(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &[],
        &mut modules,
    );
    assert!(modules.len() > 40, "read {} files", modules.len());
    let found = cycles(&graph(&modules));
    assert!(found.is_empty(), "file-level import cycles: {found:?}");
}

#[test]
fn a_cycle_through_a_group_a_parent_and_a_reexport_is_found() {
    let module = |path: &str, text: &str| {
        let path = path.split('/').filter(|s| !s.is_empty()).map(String::from);
        (path.collect::<Module>(), code(text))
    };
    let modules = BTreeMap::from([
        module("", "mod a;\nmod b;\npub use b::Helper;"),
        module(
            "a",
            "// crate::gone::X\nuse crate::{Helper, other::{X, Y}};\npub fn g() {}",
        ),
        module("b", "pub struct Helper;\nfn f() { super::a::g() }"),
        module("other", "pub struct X;"),
    ]);
    let graph = graph(&modules);
    assert_eq!(graph[&vec!["a".to_string()]].len(), 2, "{graph:?}");
    let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(cycles(&graph), BTreeSet::from([names(&["a", "b"])]));
}
