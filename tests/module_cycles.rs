//! No import circles among the files of `src/` (docs/ARCHITECTURE.md, "Layers"): every path a
//! file names through `crate::`, `super::` or `self::` (in `use` lines and in code) is an
//! arrow to the file of the longest module it names, and the arrows must not close a circle.
//! A module and its own submodules are one unit to Rust's privacy (a child uses its parent's
//! helpers, the parent re-exports its children), so arrows between a file and its ancestors
//! or descendants do not count; `#[cfg(test)]` items are left out. The binaries in `src/bin/`
//! are crates of their own.
//!
//! A circle is opened by moving the helper both sides share into a room of its own (as
//! `gateway/history.rs`, `methods/target.rs`, `http/socket.rs`,
//! `client/cli_common.rs`, `client/schema.rs` and `client/shared_item.rs` were).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

/// Every file of `src/` by its module, and the modules each one's code (tests left out) names.
fn imports() -> (PathBuf, BTreeMap<Module, PathBuf>, BTreeMap<Module, BTreeSet<Module>>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    collect(&src, &src, &mut files);
    assert!(files.len() > 50, "found only {} files under {}", files.len(), src.display());
    let modules: BTreeSet<Module> = files.keys().cloned().collect();
    let mut named_modules: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, path) in &files {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let code = without_tests(&without_comments(&text));
        for named in paths(&code) {
            let Some(absolute) = absolute(module, &named) else { continue };
            let Some(target) = longest_module(&modules, &absolute) else { continue };
            named_modules.entry(module.clone()).or_default().insert(target);
        }
    }
    (src, files, named_modules)
}

#[test]
fn src_has_no_module_cycles() {
    let (src, files, named) = imports();
    let modules: BTreeSet<Module> = files.keys().cloned().collect();
    let mut arrows: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, targets) in named {
        let targets: BTreeSet<Module> = targets.into_iter().filter(|t| !related(&module, t)).collect();
        if !targets.is_empty() {
            arrows.insert(module, targets);
        }
    }

    let circles: BTreeSet<Vec<String>> = strongly_connected(&modules, &arrows)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| {
            let mut names: Vec<String> = c.iter().map(|m| files[m].strip_prefix(&src).expect("under src").display().to_string()).collect();
            names.sort();
            names
        })
        .collect();
    assert!(circles.is_empty(), "import circles in src/ (open each by moving the shared helper into a room of its own): {circles:#?}");
}

/// The import rules docs/ARCHITECTURE.md states ("Layers"), checked on the same reading of
/// the code (tests left out).
#[test]
fn the_import_rules_of_architecture_md_hold() {
    let (_, _, named) = imports();
    let starts = |m: &Module, prefix: &[&str]| m.len() >= prefix.len() && m.iter().zip(prefix).all(|(a, b)| a == b);
    let mut broken = Vec::new();
    for (module, targets) in &named {
        if module.last().is_some_and(|m| m == "tests") {
            continue; // a test file of its own (`#[cfg(test)] mod tests;`)
        }
        for target in targets {
            let rule = if ["inbox", "outbox", "webhook", "groups"].iter().any(|t| starts(module, &["gateway", t]))
                && (starts(target, &["gateway", "api"]) || starts(target, &["http"]))
            {
                "the bot's threads import neither gateway::api nor crate::http"
            } else if starts(target, &["http"])
                && !starts(module, &["http"])
                && !starts(module, &["gateway", "api"])
                && *module != ["gateway"]
                && !starts(module, &["client", "chat", "web"])
            {
                "only gateway::api, serve (gateway/mod.rs) and the web chat (client::chat::web) import crate::http"
            } else if starts(target, &["gateway", "api"])
                && !starts(module, &["gateway", "api"])
                && *module != ["gateway"]
                && *module != ["gateway", "threads"]
            {
                "only threads and serve (gateway/mod.rs) import gateway::api"
            } else if starts(module, &["platform"]) && (starts(target, &["gateway"]) || starts(target, &["client"])) {
                "platform imports nothing of gateway or client"
            } else if starts(module, &["gateway", "store"]) && (starts(target, &["gateway", "botapi"]) || starts(target, &["gateway", "updates"])) {
                "the store knows no Bot API object"
            } else {
                continue;
            };
            broken.push(format!("{} names {}: {rule}", module.join("::"), target.join("::")));
        }
    }
    assert!(broken.is_empty(), "docs/ARCHITECTURE.md's import rules are broken:\n{}", broken.join("\n"));
}

/// docs/ARCHITECTURE.md stays a map a newcomer reads in an hour, and every path it names in
/// backticks exists.
#[test]
fn architecture_md_is_short_and_names_real_paths() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).expect("docs/ARCHITECTURE.md");
    assert!(text.len() <= 20_000, "docs/ARCHITECTURE.md has {} characters: keep it a map of at most 20,000", text.len());
    let mut missing = Vec::new();
    for (i, quoted) in text.split('`').enumerate() {
        let is_path = ["src/", "tests/", "docs/", "scripts/", "proto/", "dist/"].iter().any(|p| quoted.starts_with(p));
        if i % 2 == 1 && is_path && !quoted.contains(char::is_whitespace) && !quoted.contains('<') && !quoted.contains('*') {
            let path = quoted.trim_end_matches(['/', ',', '.']);
            if !root.join(path).exists() {
                missing.push(path.to_string());
            }
        }
    }
    assert!(missing.is_empty(), "docs/ARCHITECTURE.md names paths that do not exist: {missing:?}");
}

/// Every production file over 600 lines (the lines before its first `#[cfg(test)]`; a file
/// that is all tests, such as `groups/tests.rs`, is none) has its sentence under "Files over
/// 600 lines" in docs/ARCHITECTURE.md, with its count as it is.
#[test]
fn architecture_md_explains_every_file_over_600_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).expect("docs/ARCHITECTURE.md");
    let section = text.split("## Files over 600 lines").nth(1).expect("the section").split("\n## ").next().unwrap_or("");
    let mut files = BTreeMap::new();
    collect(&root.join("src"), &root.join("src"), &mut files);
    let mut unexplained = Vec::new();
    for path in files.values() {
        let rel = path.strip_prefix(root).expect("under the root").to_string_lossy().into_owned();
        if rel.ends_with("tests.rs") {
            continue;
        }
        let code = std::fs::read_to_string(path).expect("read");
        let production = code.lines().take_while(|l| !l.starts_with("#[cfg(test)]")).count();
        if production > 600 && !section.contains(&format!("`{rel}` ({production})")) {
            unexplained.push(format!("{rel} ({production})"));
        }
    }
    assert!(unexplained.is_empty(), "files over 600 lines without their sentence (and count) in docs/ARCHITECTURE.md: {unexplained:?}");
}

/// Every `.rs` file under `dir` but `src/bin/`, by its module path.
fn collect(root: &Path, dir: &Path, out: &mut BTreeMap<Module, PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src").flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path != root.join("bin") {
                collect(root, &path, out);
            }
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let rel = path.strip_prefix(root).expect("under src").with_extension("");
        let mut module: Module = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
        if matches!(module.last().map(String::as_str), Some("mod" | "lib" | "main")) {
            module.pop();
        }
        if module.is_empty() && path.file_name().is_some_and(|n| n == "main.rs") {
            continue;
        }
        out.insert(module, path);
    }
}

/// The text without `//` comments (doc comments included); string contents are kept.
fn without_comments(text: &str) -> String {
    text.lines().map(|line| match line.find("//") {
        Some(i) if !line[..i].contains('"') => &line[..i],
        _ => line,
    })
    .collect::<Vec<_>>()
    .join("\n")
}

/// The code without the items marked `#[cfg(test)]` (a module or a function: up to the
/// brace that closes the item's first block, or its `;`).
fn without_tests(code: &str) -> String {
    let bytes = code.as_bytes();
    let mut out = String::with_capacity(code.len());
    let mut i = 0;
    while let Some(at) = code[i..].find("#[cfg(test)]") {
        let start = i + at;
        out.push_str(&code[i..start]);
        let mut j = start + "#[cfg(test)]".len();
        // The item ends at its first `;` before any `{`, or at the brace closing its block.
        while j < bytes.len() && bytes[j] != b'{' && bytes[j] != b';' {
            j += 1;
        }
        if j < bytes.len() && bytes[j] == b'{' {
            j = closing_brace(bytes, j);
        }
        i = (j + 1).min(bytes.len());
    }
    out.push_str(&code[i..]);
    out
}

/// The index of the brace that closes the one at `open`, skipping strings and characters.
fn closing_brace(b: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    let mut i = open;
    while i < b.len() {
        match b[i] {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            b'r' if b.get(i + 1).is_some_and(|c| *c == b'"' || *c == b'#') && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) => {
                // A raw string r"…" or r#"…"#.
                let hashes = b[i + 1..].iter().take_while(|c| **c == b'#').count();
                if b.get(i + 1 + hashes) == Some(&b'"') {
                    let end: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
                    let from = i + 2 + hashes;
                    i = b[from..].windows(end.len()).position(|w| w == end.as_slice()).map_or(b.len(), |p| from + p + end.len() - 1);
                }
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            // A character literal ('x', '\n', '\u{7f}'); a lifetime ('a) has no closing quote.
            b'\'' if b.get(i + 2) == Some(&b'\'') => i += 2,
            b'\'' if b.get(i + 1) == Some(&b'\\') => {
                while i + 1 < b.len() && b[i + 1] != b'\'' {
                    i += 1;
                }
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    b.len() - 1
}

/// Every path starting with `crate`, `super` or `self` that the code names, with `{a, b::c}`
/// groups of `use` lines spread out.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for root in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(root) {
            let start = from + at;
            from = start + root.len();
            let before = code[..start].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            expand(&code[start..], &[], &mut out);
        }
    }
    out
}

/// Reads one path at the start of `s` (after the segments in `prefix`) into `out`, spreading
/// a `{…}` group into one path per member.
fn expand(s: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut segments = prefix.to_vec();
    let mut rest = s;
    loop {
        let word: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if word.is_empty() {
            break;
        }
        segments.push(word.clone());
        rest = &rest[word.len()..];
        match rest.strip_prefix("::") {
            Some(r) => rest = r.trim_start(),
            None => break,
        }
    }
    if let Some(group) = rest.strip_prefix('{') {
        let end = matching(group);
        for member in split_top(&group[..end]) {
            expand(member.trim(), &segments, out);
        }
        return;
    }
    if !segments.is_empty() {
        out.push(segments);
    }
}

/// The index of the `}` closing a group whose `{` was just before `s`.
fn matching(s: &str) -> usize {
    let mut depth = 1;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    s.len()
}

/// The members of a group, split at the commas outside nested groups.
fn split_top(s: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// A named path as a path from the crate root: `super` is the parent of the file's module (a
/// `mod.rs` file is its folder's module), `self` the module itself.
fn absolute(module: &Module, named: &[String]) -> Option<Module> {
    let mut base: Module = match named.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        Some("self" | "super") => module.clone(),
        _ => return None,
    };
    let mut rest = &named[1..];
    if named[0] == "super" {
        base.pop()?;
        while rest.first().is_some_and(|s| s == "super") {
            base.pop()?;
            rest = &rest[1..];
        }
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The longest module of `modules` that `path` starts with.
fn longest_module(modules: &BTreeSet<Module>, path: &[String]) -> Option<Module> {
    (0..=path.len()).rev().map(|n| path[..n].to_vec()).find(|m| modules.contains(m))
}

/// Whether one module is the other, or contains it.
fn related(a: &Module, b: &Module) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// Tarjan's strongly connected components of the arrows.
fn strongly_connected(nodes: &BTreeSet<Module>, arrows: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct State<'a> {
        arrows: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        on_stack: BTreeSet<Module>,
        next: usize,
        out: Vec<Vec<Module>>,
    }
    fn visit(s: &mut State<'_>, v: &Module) {
        s.index.insert(v.clone(), s.next);
        s.low.insert(v.clone(), s.next);
        s.next += 1;
        s.stack.push(v.clone());
        s.on_stack.insert(v.clone());
        let targets: Vec<Module> = s.arrows.get(v).map(|t| t.iter().cloned().collect()).unwrap_or_default();
        for w in targets {
            if !s.index.contains_key(&w) {
                visit(s, &w);
                let low = s.low[v].min(s.low[&w]);
                s.low.insert(v.clone(), low);
            } else if s.on_stack.contains(&w) {
                let low = s.low[v].min(s.index[&w]);
                s.low.insert(v.clone(), low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(&w);
                let done = &w == v;
                component.push(w);
                if done {
                    break;
                }
            }
            s.out.push(component);
        }
    }
    let mut s = State { arrows, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), on_stack: BTreeSet::new(), next: 0, out: Vec::new() };
    for v in nodes {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}
