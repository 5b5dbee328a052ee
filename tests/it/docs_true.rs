//! The docs name only what exists: every `af` command they show (inline code spans and
//! lines of fenced blocks that start with `af `) is a command of this build, checked
//! against its own `--help`, and every `src/` path they name is a file or folder here.
//! A renamed command or module that leaves a doc behind fails here, not with a reader.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The docs a reader meets: README, ARCHITECTURE, docs/ and ledger-spec/.
fn docs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    let mut dirs = vec![root.join("docs"), root.join("ledger-spec")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().map(Result::unwrap) {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The texts a doc shows as commands: inline code spans and lines of fenced blocks
/// that start with `af ` (a `$ ` prompt dropped).
fn shown_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            let line = line.trim_start().trim_start_matches("$ ");
            if line.starts_with("af ") {
                out.push(line.to_string());
            }
            continue;
        }
        for (i, span) in line.split('`').enumerate() {
            if i % 2 == 1 && span.starts_with("af ") {
                out.push(span.to_string());
            }
        }
    }
    out
}

/// The subcommands `af WORDS --help` lists (empty for a command without any), cached.
fn subcommands<'a>(cache: &'a mut BTreeMap<Vec<String>, Option<Vec<String>>>, path: &[String]) -> Option<&'a [String]> {
    cache
        .entry(path.to_vec())
        .or_insert_with(|| {
            let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
            args.push("--help");
            let out = crate::af(&args);
            out.status.success().then(|| {
                let help = String::from_utf8_lossy(&out.stdout).into_owned();
                let Some((_, commands)) = help.split_once("\nCommands:\n") else { return Vec::new() };
                commands
                    .lines()
                    .take_while(|l| l.starts_with("  "))
                    .filter_map(|l| l.split_whitespace().next().map(str::to_string))
                    .filter(|name| name != "help")
                    .collect()
            })
        })
        .as_deref()
}

/// Where `shown` (a text starting `af `) names a command this build lacks, why.
fn wrong_command(cache: &mut BTreeMap<Vec<String>, Option<Vec<String>>>, shown: &str) -> Option<String> {
    let mut path: Vec<String> = Vec::new();
    for word in shown.split_whitespace().skip(1) {
        let Some(known) = subcommands(cache, &path).map(<[String]>::to_vec) else {
            return Some(format!("`af {} --help` fails", path.join(" ")));
        };
        if known.is_empty() {
            return None; // a command with arguments from here on
        }
        // `status\|neurons` (a table's alternatives) names each.
        let alternatives: Vec<&str> = word.split('|').map(|w| w.trim_end_matches('\\')).collect();
        let argument =
            |w: &&str| w.is_empty() || w.starts_with('-') || !w.chars().all(|c| c.is_ascii_lowercase() || c == '-');
        if alternatives.iter().any(argument) {
            return None; // a flag, a placeholder or a value: what follows is arguments
        }
        for alternative in &alternatives {
            if !known.iter().any(|k| k == alternative) {
                return Some(format!(
                    "`af {}` has no command `{alternative}` (it has: {})",
                    path.join(" "),
                    known.join(", ")
                ));
            }
        }
        if alternatives.len() > 1 {
            return None;
        }
        path.push(word.to_string());
    }
    subcommands(cache, &path).is_none().then(|| format!("`af {} --help` fails", path.join(" ")))
}

/// Whether the docs' `path` names something here: a file or folder, a bench or module
/// named without `.rs`, or a chapter of ledger-spec named by its number (`ledger-spec/02`).
fn exists(root: &Path, path: &str) -> bool {
    if root.join(path).exists() || root.join(format!("{path}.rs")).exists() {
        return true;
    }
    let Some(chapter) = path.strip_prefix("ledger-spec/") else { return false };
    std::fs::read_dir(root.join("ledger-spec"))
        .unwrap()
        .map(Result::unwrap)
        .any(|entry| entry.file_name().to_string_lossy().starts_with(&format!("{chapter}-")))
}

#[test]
fn every_command_and_source_path_the_docs_show_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cache = BTreeMap::new();
    let mut wrong = Vec::new();
    let mut n_commands = 0;
    for doc in docs() {
        let text = std::fs::read_to_string(&doc).unwrap();
        let name = doc.strip_prefix(root).unwrap().display().to_string();
        for shown in shown_commands(&text) {
            n_commands += 1;
            if let Some(why) = wrong_command(&mut cache, &shown) {
                wrong.push(format!("{name}: `{shown}`: {why}"));
            }
        }
        // Paths of the repository (`src/...`, `scripts/...`, ...), placeholders (an
        // upper-case NAME, a `*`) aside.
        for room in ["src/", "scripts/", "tests/", "benches/", "fixtures/", "deploy/", "docs/", "ledger-spec/"] {
            for (at, _) in text.match_indices(room) {
                let before = text[..at].chars().next_back();
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '-' | '_')) {
                    continue; // part of a longer path or a word (`target/docs/`, `../src/`)
                }
                let path: String = text[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '.' | '-' | '*'))
                    .collect();
                let path = path.trim_end_matches(['.', '/']);
                if path.chars().any(|c| c.is_ascii_uppercase() || c == '*') || path == room.trim_end_matches('/') {
                    continue;
                }
                if !exists(root, path) {
                    wrong.push(format!("{name}: names `{path}`, which does not exist"));
                }
            }
        }
    }
    // Every relative link resolves from the doc's own folder.
    for doc in docs() {
        let text = std::fs::read_to_string(&doc).unwrap();
        let name = doc.strip_prefix(root).unwrap().display().to_string();
        for (at, _) in text.match_indices("](") {
            let target: String = text[at + 2..].chars().take_while(|c| !matches!(c, ')' | '#' | ' ')).collect();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            if !doc.parent().unwrap().join(&target).exists() {
                wrong.push(format!("{name}: links `{target}`, which does not resolve"));
            }
        }
    }
    assert!(n_commands > 50, "the docs show commands: {n_commands} found");
    assert!(wrong.is_empty(), "docs that name what does not exist:\n{}", wrong.join("\n"));
}

/// The two a newcomer reads first stay short: the README a pitch and three journeys, the
/// architecture a map (issue 77).
#[test]
fn the_readme_and_the_architecture_stay_short() {
    for (name, most) in [("README.md", 300), ("ARCHITECTURE.md", 450)] {
        let lines = std::fs::read_to_string(crate::repo_path(name)).unwrap().lines().count();
        assert!(lines <= most, "{name} has {lines} lines, over {most}: move detail to docs/");
    }
}

#[test]
fn a_made_up_command_and_a_placeholder_are_told_apart() {
    let mut cache = BTreeMap::new();
    assert_eq!(wrong_command(&mut cache, "af ledger verify --data DIR"), None);
    assert_eq!(wrong_command(&mut cache, "af chain status\\|neurons SPEC"), None);
    assert_eq!(wrong_command(&mut cache, "af ledger <COMMAND>"), None);
    assert_eq!(wrong_command(&mut cache, "af transcripts --data DIR"), None, "a flag where subcommands may be");
    assert!(wrong_command(&mut cache, "af ledger verifyy --data DIR").is_some_and(|why| why.contains("verifyy")));
    assert!(wrong_command(&mut cache, "af nonsense").is_some());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    assert!(exists(root, "ledger-spec/02") && exists(root, "benches/ledger") && exists(root, "src/replay"));
    assert!(!exists(root, "ledger-spec/99") && !exists(root, "src/replay/nope.rs"));
    assert_eq!(
        shown_commands("run `af audit --data d` then\n```sh\n$ af mirror --from U\ncargo x\n```"),
        ["af audit --data d", "af mirror --from U"]
    );
}

/// The line of docs/cli.md after which a test writes every command's `--help`; what is
/// above it (the conventions every command keeps) is written by hand.
const GENERATED_BELOW: &str = "<!-- Below: every command's --help, written by tests/it/docs_true.rs. -->";

/// Every command's `--help`, depth first, as docs/cli.md shows it below its marker.
fn cli_reference() -> String {
    let mut cache = BTreeMap::new();
    let mut out = String::new();
    let mut stack = vec![Vec::<String>::new()];
    while let Some(path) = stack.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = crate::stdout(&crate::af(&args));
        let name: String = path.iter().map(|w| format!(" {w}")).collect();
        out.push_str(&format!("\n## `af{name}`\n\n```text\n{}\n```\n", help.trim_end()));
        let subs = subcommands(&mut cache, &path).map(<[String]>::to_vec).unwrap_or_default();
        for sub in subs.into_iter().rev() {
            let mut next = path.clone();
            next.push(sub);
            stack.push(next);
        }
    }
    out
}

#[test]
fn the_cli_reference_is_this_builds_help() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cli.md");
    let written = std::fs::read_to_string(&path).unwrap();
    let (by_hand, generated) = written.split_once(GENERATED_BELOW).expect("docs/cli.md has its marker line");
    let now = cli_reference();
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(&path, format!("{by_hand}{GENERATED_BELOW}\n{now}")).unwrap();
    } else {
        assert!(
            generated.strip_prefix('\n') == Some(now.as_str()),
            "docs/cli.md is not this build's --help: UPDATE_EXPECT=1 cargo test --test it docs_true"
        );
    }
}
