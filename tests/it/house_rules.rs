//! The house rules of `src/`, checked on the source text: imports between files point
//! one way (no file reaches itself through `crate::` and `super::` paths), and no module
//! grows past 800 lines but those listed below, each a known debt.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Modules over the limit today, with their lines when they were listed: one that grows
/// past its figure, or a new one over the limit, fails. None now.
const KNOWN_LARGE: [(&str, usize); 0] = [];
const MAX_MODULE_LINES: usize = 800;

type Module = Vec<String>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/a/b.rs` as `[a, b]`; `mod.rs`, `lib.rs` and `main.rs` name their folder.
fn module_of(src: &Path, file: &Path) -> Module {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Module = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// The paths a file's code names through `crate::` or `super::` (with each item of a
/// `{...}` group), up to its tests: what it imports, as module paths to resolve.
fn named_paths(code: &str, module: &Module) -> Vec<Module> {
    let code = code.split("#[cfg(test)]").next().unwrap_or(code);
    let code: String = code.lines().map(|line| line.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for head in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(head) {
            let start = from + at;
            from = start + head.len();
            if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
                continue;
            }
            let rest = &code[from..];
            let path_len =
                rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')).unwrap_or(rest.len());
            let segments: Module = rest[..path_len].split("::").filter(|s| !s.is_empty()).map(str::to_string).collect();
            let base: Module = match head {
                "crate::" => Vec::new(),
                // `super` of a folder's mod.rs and of a file beside it is the same parent.
                _ => module[..module.len().saturating_sub(1)].to_vec(),
            };
            let path: Module = base.iter().cloned().chain(segments.iter().cloned()).collect();
            if rest[path_len..].starts_with('{') {
                let group = &rest[path_len + 1..rest[path_len..].find('}').map_or(rest.len(), |e| path_len + e)];
                for item in group.split(',') {
                    let name: String =
                        item.trim().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                    if !name.is_empty() {
                        out.push(path.iter().cloned().chain([name]).collect());
                    }
                }
            }
            out.push(path);
        }
    }
    out
}

/// The longest prefix of `path` that is a module of `modules`.
fn resolve(path: &Module, modules: &BTreeSet<Module>) -> Option<Module> {
    (1..=path.len()).rev().map(|n| path[..n].to_vec()).find(|prefix| modules.contains(prefix))
}

/// Strongly connected groups of more than one module (Tarjan), each sorted.
fn circles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<String>> {
    struct Walk<'e> {
        edges: &'e BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        on_stack: BTreeSet<Module>,
        found: Vec<Vec<String>>,
    }
    impl Walk<'_> {
        fn visit(&mut self, v: &Module) {
            let n = self.index.len();
            self.index.insert(v.clone(), n);
            self.low.insert(v.clone(), n);
            self.stack.push(v.clone());
            self.on_stack.insert(v.clone());
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v.clone(), low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v.clone(), low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut group = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(&w);
                    let done = w == *v;
                    group.push(w.join("/"));
                    if done {
                        break;
                    }
                }
                if group.len() > 1 {
                    group.sort();
                    self.found.push(group);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_file_of_src_reaches_itself_through_its_imports() {
    let src = src();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<Module> = files.iter().map(|f| module_of(&src, f)).collect();
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for file in &files {
        let module = module_of(&src, file);
        let code = std::fs::read_to_string(file).unwrap();
        let targets = edges.entry(module.clone()).or_default();
        for path in named_paths(&code, &module) {
            if let Some(target) = resolve(&path, &modules).filter(|t| *t != module && !t.is_empty()) {
                targets.insert(target);
            }
        }
    }
    assert!(edges.values().map(BTreeSet::len).sum::<usize>() > 200, "the import graph was read");
    assert_eq!(circles(&edges), Vec::<Vec<String>>::new(), "import circles between files of src/");
}

#[test]
fn a_made_up_circle_is_found() {
    let m = |s: &str| s.split('/').map(str::to_string).collect::<Module>();
    let modules: BTreeSet<Module> = ["a", "a/b", "c"].iter().map(|s| m(s)).collect();
    let paths = named_paths("use crate::c::Thing;\nuse super::{b, Other}; // crate::x", &m("a/b"));
    let resolved: BTreeSet<Module> = paths.iter().filter_map(|p| resolve(p, &modules)).collect();
    assert_eq!(resolved, [m("a"), m("a/b"), m("c")].into_iter().collect());
    let edges: BTreeMap<Module, BTreeSet<Module>> =
        [(m("a"), [m("c")].into()), (m("c"), [m("a/b")].into()), (m("a/b"), [m("a")].into())].into();
    assert_eq!(circles(&edges), vec![vec!["a".to_string(), "a/b".to_string(), "c".to_string()]]);
}

#[test]
fn no_module_grows_past_800_lines_but_the_known_ones() {
    let src = src();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut over = Vec::new();
    for file in &files {
        let lines = std::fs::read_to_string(file).unwrap().lines().count();
        let name = file.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
        let allowed = KNOWN_LARGE.iter().find(|(known, _)| *known == name).map_or(MAX_MODULE_LINES, |(_, n)| *n);
        if lines > allowed {
            over.push(format!("{name}: {lines} lines (at most {allowed})"));
        }
    }
    assert!(files.len() > 100, "{} files read", files.len());
    assert_eq!(over, Vec::<String>::new(), "split these along their jobs");
}
