//! No import cycles between the source files of one crate (ARCHITECTURE.md, "Invariants").
//!
//! A cycle between files means none of them can be read, changed or split without the
//! others; it is how a crate's layering rots. This test scans every `crates/*/src` tree
//! with std alone (no python, no syn: CI machines may have neither) and fails on any
//! cycle not listed in [`ALLOWED`], and on any listed cycle that is gone (so the list
//! stays honest and only shrinks).
//!
//! The rules:
//!
//! - A crate is a package's `src/lib.rs`, `src/main.rs` or `src/bin/*` with the files its
//!   `mod x;` declarations reach (a binary and the library of one package are separate
//!   crates: `ibsmd::x` in main.rs is not an edge). Nodes are the non-test files: not
//!   `tests.rs`, nothing under `tests/` or `benches/`, and a `#[cfg(test)] mod NAME { .. }`
//!   (or `#[cfg(test)] mod NAME;`) is cut out of its file.
//! - File A refers to file B when A's code (comments, doc comments and literals are
//!   skipped) names a path that resolves to B: `crate::a::b`, `super::b`, `self::b`, a
//!   path starting with a child module or with a name a `use` brought in, and every leaf
//!   of a `use` group (`use crate::{a, b::{c, d}}`). A path resolves to the deepest
//!   module with a file of its own: `crate::a::b::Item` is `a/b.rs` (or `a/b/mod.rs`) if
//!   that module has a file, else `a.rs` / `a/mod.rs`; an item re-exported by a `mod.rs`
//!   (or the crate root) therefore counts as that file.
//! - Declaring a child (`mod x;`, `pub mod x;`) is not an edge, and neither is a re-export
//!   (`pub use x::Item;`, `pub(crate) use ..`) unless the file's own code uses the name it
//!   re-exports. A `mod.rs` whose code uses a child's item has an edge to the child; a
//!   child using `super::Item` defined (or re-exported) in the `mod.rs` has an edge back.
//! - Each strongly connected component (Tarjan) of more than one file is a cycle; the
//!   report shows one cycle through it, with the line that makes each step.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::Path;

/// A set of files that forms one import cycle today.
#[derive(Clone, Copy)]
struct Allowed {
    files: &'static [&'static str],
    why: &'static str,
}

/// The cycles known when this check landed. An entry goes in the commit that breaks its
/// cycle; nothing is added (a new cycle is fixed, not listed). The test fails when an
/// entry no longer matches a cycle exactly, so the list cannot go stale.
const ALLOWED: &[Allowed] = &[];

// ---------------------------------------------------------------------------------------
// Lexing: identifiers, `::` and punctuation; comments and literals dropped.

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    PathSep,
    Punct(char),
    Literal,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    line: usize,
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn is_ident_continue(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// Index just past a `"..."` body whose opening quote is at `i - 1`.
fn skip_string(c: &[char], mut i: usize, line: &mut usize) -> usize {
    while i < c.len() && c[i] != '"' {
        if c[i] == '\\' {
            i += 1;
        }
        if c.get(i) == Some(&'\n') {
            *line += 1;
        }
        i += 1;
    }
    i + 1
}

/// At `i` (just after an `r`/`br`/`cr` prefix): does a raw string start here?
fn raw_string_at(c: &[char], i: usize) -> bool {
    let mut j = i;
    while c.get(j) == Some(&'#') {
        j += 1;
    }
    c.get(j) == Some(&'"')
}

/// Index just past a raw string whose hashes (or quote) start at `i`.
fn skip_raw_string(c: &[char], mut i: usize, line: &mut usize) -> usize {
    let mut hashes = 0;
    while c.get(i) == Some(&'#') {
        hashes += 1;
        i += 1;
    }
    i += 1; // the opening quote
    while i < c.len() {
        if c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#')) {
            return i + 1 + hashes;
        }
        if c[i] == '\n' {
            *line += 1;
        }
        i += 1;
    }
    i
}

/// At a `'` at `i`: the index past the char literal, or `None` for a lifetime or label.
fn char_literal_end(c: &[char], i: usize) -> Option<usize> {
    if c.get(i + 1) == Some(&'\\') {
        let mut j = i + 3; // quote, backslash, escaped char
        while j < c.len() && c[j] != '\'' {
            j += 1;
        }
        return Some(j + 1);
    }
    (c.get(i + 2) == Some(&'\'')).then_some(i + 3)
}

fn lex(src: &str) -> Vec<Token> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let push = |out: &mut Vec<Token>, tok, line| out.push(Token { tok, line });
    while i < c.len() {
        let ch = c[i];
        let start_line = line;
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if ch == '"' {
            i = skip_string(&c, i + 1, &mut line);
            push(&mut out, Tok::Literal, start_line);
        } else if ch == '\'' {
            match char_literal_end(&c, i) {
                Some(end) => {
                    i = end;
                    push(&mut out, Tok::Literal, start_line);
                }
                None => {
                    i += 1;
                    push(&mut out, Tok::Punct('\''), start_line);
                }
            }
        } else if is_ident_start(ch) {
            let s = i;
            while i < c.len() && is_ident_continue(c[i]) {
                i += 1;
            }
            let word: String = c[s..i].iter().collect();
            match (word.as_str(), c.get(i)) {
                ("r" | "br" | "cr", Some('"' | '#')) if raw_string_at(&c, i) => {
                    i = skip_raw_string(&c, i, &mut line);
                    push(&mut out, Tok::Literal, start_line);
                }
                ("b" | "c", Some('"')) => {
                    i = skip_string(&c, i + 1, &mut line);
                    push(&mut out, Tok::Literal, start_line);
                }
                ("b", Some('\'')) if char_literal_end(&c, i).is_some() => {
                    i = char_literal_end(&c, i).unwrap_or(i + 1);
                    push(&mut out, Tok::Literal, start_line);
                }
                ("r", Some('#')) if c.get(i + 1).is_some_and(|&n| is_ident_start(n)) => {
                    let s = i + 1;
                    i = s;
                    while i < c.len() && is_ident_continue(c[i]) {
                        i += 1;
                    }
                    push(&mut out, Tok::Ident(c[s..i].iter().collect()), start_line);
                }
                _ => push(&mut out, Tok::Ident(word), start_line),
            }
        } else if ch.is_ascii_digit() {
            while i < c.len() && is_ident_continue(c[i]) {
                i += 1;
            }
            push(&mut out, Tok::Literal, start_line);
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            i += 2;
            push(&mut out, Tok::PathSep, start_line);
        } else {
            i += 1;
            push(&mut out, Tok::Punct(ch), start_line);
        }
    }
    out
}

fn is_ident(t: Option<&Token>, s: &str) -> bool {
    matches!(t, Some(Token { tok: Tok::Ident(x), .. }) if x == s)
}

fn is_punct(t: Option<&Token>, p: char) -> bool {
    matches!(t, Some(Token { tok: Tok::Punct(x), .. }) if *x == p)
}

/// Index of the token that closes the bracket opened at `i` (`(`, `[` or `{`).
fn matching_close(t: &[Token], i: usize) -> usize {
    let mut depth = 0usize;
    for (j, tok) in t.iter().enumerate().skip(i) {
        match tok.tok {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    t.len() - 1
}

/// The tokens without any `#[cfg(test)] [more attributes] [pub[(..)]] mod NAME { .. }`
/// or `.. mod NAME;`: test code is not part of the crate's dependency structure.
fn strip_test_modules(t: Vec<Token>) -> Vec<Token> {
    let mut out = Vec::with_capacity(t.len());
    let mut i = 0;
    while i < t.len() {
        let cfg_test = is_punct(t.get(i), '#')
            && is_punct(t.get(i + 1), '[')
            && is_ident(t.get(i + 2), "cfg")
            && is_punct(t.get(i + 3), '(')
            && is_ident(t.get(i + 4), "test")
            && is_punct(t.get(i + 5), ')')
            && is_punct(t.get(i + 6), ']');
        if cfg_test {
            let mut j = i + 7;
            while is_punct(t.get(j), '#') && is_punct(t.get(j + 1), '[') {
                j = matching_close(&t, j + 1) + 1;
            }
            if is_ident(t.get(j), "pub") {
                j += 1;
                if is_punct(t.get(j), '(') {
                    j = matching_close(&t, j) + 1;
                }
            }
            if is_ident(t.get(j), "mod")
                && matches!(
                    t.get(j + 1),
                    Some(Token {
                        tok: Tok::Ident(_),
                        ..
                    })
                )
            {
                if is_punct(t.get(j + 2), '{') {
                    i = matching_close(&t, j + 2) + 1;
                    continue;
                }
                if is_punct(t.get(j + 2), ';') {
                    i = j + 3;
                    continue;
                }
            }
        }
        out.push(t[i].clone());
        i += 1;
    }
    out
}

// ---------------------------------------------------------------------------------------
// Parsing one file: child modules, `use` leaves, paths, identifiers.

/// One leaf of a `use` tree.
#[derive(Debug, Clone)]
struct UseLeaf {
    /// Inline module path inside the file where the `use` is.
    scope: Vec<String>,
    /// `["crate", "a", "B"]`; a leading `::` is kept as `"::"`.
    segs: Vec<String>,
    /// The name it binds (`None` for a glob or `as _`).
    name: Option<String>,
    /// `pub use` / `pub(..) use`.
    reexport: bool,
    line: usize,
}

/// A path in code (outside `use` items) of at least two segments.
#[derive(Debug, Clone)]
struct PathRef {
    scope: Vec<String>,
    segs: Vec<String>,
    line: usize,
}

#[derive(Debug, Default)]
struct Parsed {
    /// `mod x;` declarations: the inline module path they are in, and `x`.
    children: Vec<(Vec<String>, String)>,
    /// Every inline `mod x { .. }`, as its full inline path.
    inline: BTreeSet<Vec<String>>,
    uses: Vec<UseLeaf>,
    paths: Vec<PathRef>,
    /// Identifiers the code uses (not after `.` or `::`), per inline scope.
    idents: BTreeSet<(Vec<String>, String)>,
    /// Names a glob import of this file's module gets: its top-level `pub` items and
    /// `pub use` names.
    pub_names: BTreeSet<String>,
}

/// The name of the `pub` item whose `pub` is at `i` (`pub(crate) const fn f`: `f`).
fn pub_item_name(t: &[Token], i: usize) -> Option<String> {
    let mut j = i + 1;
    if is_punct(t.get(j), '(') {
        j = matching_close(t, j) + 1;
    }
    loop {
        match t.get(j).map(|x| &x.tok) {
            Some(Tok::Ident(k)) if matches!(k.as_str(), "async" | "unsafe" | "default") => j += 1,
            Some(Tok::Ident(k)) if k == "extern" => {
                j += 1;
                if matches!(t.get(j).map(|x| &x.tok), Some(Tok::Literal)) {
                    j += 1;
                }
            }
            Some(Tok::Ident(k)) if k == "const" && is_ident(t.get(j + 1), "fn") => j += 1,
            _ => break,
        }
    }
    let kind = match t.get(j).map(|x| &x.tok) {
        Some(Tok::Ident(k)) => k.as_str(),
        _ => return None,
    };
    if !matches!(
        kind,
        "struct" | "enum" | "fn" | "trait" | "type" | "const" | "static" | "mod" | "union"
    ) {
        return None;
    }
    j += 1;
    if is_ident(t.get(j), "mut") {
        j += 1;
    }
    match t.get(j).map(|x| &x.tok) {
        Some(Tok::Ident(name)) => Some(name.clone()),
        _ => None,
    }
}

fn use_tree(
    t: &[Token],
    i: &mut usize,
    mut segs: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    loop {
        match t.get(*i).map(|x| &x.tok) {
            Some(Tok::PathSep) => {
                if segs.is_empty() {
                    segs.push("::".to_owned());
                }
                *i += 1;
            }
            Some(Tok::Punct('*')) => {
                *i += 1;
                out.push((segs, None));
                return;
            }
            Some(Tok::Punct('{')) => {
                *i += 1;
                loop {
                    match t.get(*i).map(|x| &x.tok) {
                        None => return,
                        Some(Tok::Punct('}')) => {
                            *i += 1;
                            return;
                        }
                        Some(Tok::Punct(',')) => *i += 1,
                        Some(_) => {
                            let before = *i;
                            use_tree(t, i, segs.clone(), out);
                            if *i == before {
                                *i += 1;
                            }
                        }
                    }
                }
            }
            Some(Tok::Ident(s)) => {
                segs.push(s.clone());
                *i += 1;
                if matches!(t.get(*i).map(|x| &x.tok), Some(Tok::PathSep)) {
                    *i += 1;
                    continue;
                }
                break;
            }
            _ => return,
        }
    }
    let mut name = None;
    if is_ident(t.get(*i), "as") {
        if let Some(Tok::Ident(a)) = t.get(*i + 1).map(|x| &x.tok) {
            name = Some(a.clone());
        }
        *i += 2;
    }
    if segs.last().is_some_and(|s| s == "self") {
        segs.pop();
    }
    let name = name.or_else(|| segs.last().cloned()).filter(|n| n != "_");
    out.push((segs, name));
}

/// Is the `use` at `i` a re-export (`pub use`, `pub(crate) use`, ...)?
fn is_reexport(t: &[Token], i: usize) -> bool {
    if i == 0 {
        return false;
    }
    if is_ident(t.get(i - 1), "pub") {
        return true;
    }
    if is_punct(t.get(i - 1), ')') {
        let mut depth = 0usize;
        for j in (0..i).rev() {
            match t[j].tok {
                Tok::Punct(')') => depth += 1,
                Tok::Punct('(') => {
                    depth -= 1;
                    if depth == 0 {
                        return j > 0 && is_ident(t.get(j - 1), "pub");
                    }
                }
                _ => {}
            }
        }
    }
    false
}

fn parse(src: &str) -> Parsed {
    let t = strip_test_modules(lex(src));
    let mut p = Parsed::default();
    // Open inline modules: name and the brace depth inside them.
    let mut open: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut pending_mod: Option<String> = None;
    let mut i = 0;
    while i < t.len() {
        let scope: Vec<String> = open.iter().map(|(n, _)| n.clone()).collect();
        let after_sep = i > 0 && matches!(t[i - 1].tok, Tok::PathSep);
        let after_dot = i > 0 && is_punct(t.get(i - 1), '.');
        if depth == 0 && is_ident(t.get(i), "pub") {
            p.pub_names.extend(pub_item_name(&t, i));
        }
        match &t[i].tok {
            Tok::Punct('{') => {
                depth += 1;
                if let Some(name) = pending_mod.take() {
                    open.push((name, depth));
                }
                i += 1;
            }
            Tok::Punct('}') => {
                if open.last().is_some_and(|(_, d)| *d == depth) {
                    open.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            Tok::Ident(k) if k == "mod" && !after_sep => {
                if let Some(Tok::Ident(name)) = t.get(i + 1).map(|x| &x.tok) {
                    if is_punct(t.get(i + 2), '{') {
                        let mut path = scope.clone();
                        path.push(name.clone());
                        p.inline.insert(path);
                        pending_mod = Some(name.clone());
                    } else if is_punct(t.get(i + 2), ';') {
                        p.children.push((scope.clone(), name.clone()));
                    }
                    i += 2;
                } else {
                    i += 1;
                }
            }
            Tok::Ident(k) if k == "use" && !after_sep => {
                let reexport = is_reexport(&t, i);
                let line = t[i].line;
                i += 1;
                let mut leaves = Vec::new();
                use_tree(&t, &mut i, Vec::new(), &mut leaves);
                while i < t.len() && !is_punct(t.get(i), ';') {
                    i += 1;
                }
                for (segs, name) in leaves {
                    if reexport && depth == 0 {
                        p.pub_names.extend(name.clone());
                    }
                    p.uses.push(UseLeaf {
                        scope: scope.clone(),
                        segs,
                        name,
                        reexport,
                        line,
                    });
                }
            }
            Tok::Ident(first) if !after_sep && !after_dot => {
                p.idents.insert((scope.clone(), first.clone()));
                // `pub(in crate::a)` restricts visibility; it uses nothing.
                let vis_in = i >= 3
                    && is_ident(t.get(i - 1), "in")
                    && is_punct(t.get(i - 2), '(')
                    && is_ident(t.get(i - 3), "pub");
                let mut segs = vec![first.clone()];
                let mut j = i + 1;
                while matches!(t.get(j).map(|x| &x.tok), Some(Tok::PathSep)) {
                    match t.get(j + 1).map(|x| &x.tok) {
                        Some(Tok::Ident(s)) => {
                            segs.push(s.clone());
                            j += 2;
                        }
                        _ => break,
                    }
                }
                if segs.len() > 1 && !vis_in {
                    p.paths.push(PathRef {
                        scope,
                        segs,
                        line: t[i].line,
                    });
                }
                i = j.max(i + 1);
            }
            _ => i += 1,
        }
    }
    p
}

// ---------------------------------------------------------------------------------------
// Crates: module trees, path resolution, edges.

struct FileNode {
    /// Module path from the crate root (`[]` for the root).
    module: Vec<String>,
    parsed: Parsed,
}

struct Crate {
    name: String,
    files: BTreeMap<String, FileNode>,
    /// Modules that have a file of their own.
    modules: BTreeMap<Vec<String>, String>,
}

/// Why a file that exists is not a node: a test file.
fn is_test_file(path: &str) -> bool {
    let in_src = path.split_once("/src/").map_or(path, |(_, rest)| rest);
    path.ends_with("/tests.rs")
        || in_src
            .split('/')
            .rev()
            .skip(1)
            .any(|d| d == "tests" || d == "benches")
}

fn dir_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}

fn load_crate(name: String, root: &str, vfs: &BTreeMap<String, String>) -> Crate {
    let mut krate = Crate {
        name,
        files: BTreeMap::new(),
        modules: BTreeMap::new(),
    };
    let mut queue = VecDeque::from([(root.to_owned(), Vec::<String>::new(), true)]);
    while let Some((path, module, mod_rs)) = queue.pop_front() {
        if krate.files.contains_key(&path) {
            continue;
        }
        let parsed = parse(&vfs[&path]);
        let base = if mod_rs {
            dir_of(&path).to_owned()
        } else {
            path.trim_end_matches(".rs").to_owned()
        };
        for (inline, child) in &parsed.children {
            let mut stem = base.clone();
            for seg in inline.iter().chain([child]) {
                stem.push('/');
                stem.push_str(seg);
            }
            let flat = format!("{stem}.rs");
            let nested = format!("{stem}/mod.rs");
            let Some(file) = [flat, nested].into_iter().find(|f| vfs.contains_key(f)) else {
                continue;
            };
            if is_test_file(&file) {
                continue;
            }
            let mut m = module.clone();
            m.extend(inline.iter().cloned());
            m.push(child.clone());
            let child_mod_rs = file.ends_with("/mod.rs");
            queue.push_back((file, m, child_mod_rs));
        }
        krate.modules.insert(module.clone(), path.clone());
        krate.files.insert(path, FileNode { module, parsed });
    }
    krate
}

/// Where a reference comes from and what it says, for the report.
#[derive(Debug, Clone)]
struct Evidence {
    line: usize,
    text: String,
}

impl Crate {
    /// The file of the deepest module along `abs` that has one.
    fn file_of(&self, abs: &[String]) -> &str {
        (0..=abs.len())
            .rev()
            .find_map(|k| self.modules.get(&abs[..k]))
            .map_or("", String::as_str)
    }

    /// `segs`, written in `file` inside inline module `scope`, as a path from the crate
    /// root; `None` when it names something outside the crate (or a local item).
    fn absolute(
        &self,
        node: &FileNode,
        scope: &[String],
        segs: &[String],
        aliases: &BTreeMap<(Vec<String>, String), Vec<String>>,
    ) -> Option<Vec<String>> {
        let mut here = node.module.clone();
        here.extend(scope.iter().cloned());
        let first = segs.first()?;
        let (mut base, rest) = match first.as_str() {
            "crate" => (Vec::new(), &segs[1..]),
            "self" => (here, &segs[1..]),
            "super" => {
                let mut k = 0;
                while segs.get(k).is_some_and(|s| s == "super") {
                    here.pop()?;
                    k += 1;
                }
                (here, &segs[k..])
            }
            _ => {
                let mut child = scope.to_vec();
                child.push(first.clone());
                let declared = node
                    .parsed
                    .children
                    .iter()
                    .any(|(s, n)| s == scope && n == first)
                    || node.parsed.inline.contains(&child);
                if declared {
                    here.push(first.clone());
                    (here, &segs[1..])
                } else {
                    let target = aliases.get(&(scope.to_vec(), first.clone()))?;
                    (target.clone(), &segs[1..])
                }
            }
        };
        base.extend(rest.iter().filter(|s| *s != "self").cloned());
        Some(base)
    }

    /// Every edge out of `path` to another file of this crate, with its first evidence.
    fn edges_of(&self, path: &str) -> BTreeMap<String, Evidence> {
        let node = &self.files[path];
        let none = BTreeMap::new();
        let mut aliases = BTreeMap::new();
        for u in &node.parsed.uses {
            if let (Some(name), Some(abs)) =
                (&u.name, self.absolute(node, &u.scope, &u.segs, &none))
            {
                aliases.insert((u.scope.clone(), name.clone()), abs);
            }
        }
        let mut out: BTreeMap<String, Evidence> = BTreeMap::new();
        let mut add = |abs: Vec<String>, line: usize, text: String| {
            let target = self.file_of(&abs);
            if target != path && !target.is_empty() {
                out.entry(target.to_owned())
                    .or_insert(Evidence { line, text });
            }
        };
        for u in &node.parsed.uses {
            let Some(abs) = self.absolute(node, &u.scope, &u.segs, &none) else {
                continue;
            };
            let used = |n: &String| node.parsed.idents.contains(&(u.scope.clone(), n.clone()));
            let used_here = match &u.name {
                Some(n) => used(n),
                // A glob re-export of a module file: is any name it brings in used here?
                None => self
                    .modules
                    .get(&abs)
                    .is_some_and(|f| self.files[f].parsed.pub_names.iter().any(used)),
            };
            if !u.reexport || used_here {
                let what = if u.reexport { "pub use" } else { "use" };
                let glob = if u.name.is_none() { "::*" } else { "" };
                add(abs, u.line, format!("{what} {}{glob}", u.segs.join("::")));
            }
        }
        for r in &node.parsed.paths {
            if let Some(abs) = self.absolute(node, &r.scope, &r.segs, &aliases) {
                add(abs, r.line, r.segs.join("::"));
            }
        }
        out
    }
}

/// Strongly connected components of more than one node (Tarjan).
fn tarjan(graph: &BTreeMap<String, BTreeMap<String, Evidence>>) -> Vec<BTreeSet<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeMap<String, Evidence>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        let graph = s.graph;
        for w in graph.get(v).into_iter().flat_map(|e| e.keys()) {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                comp.insert(w.to_owned());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// A shortest cycle through the first file of `comp`, as a list ending where it began.
fn one_cycle(
    graph: &BTreeMap<String, BTreeMap<String, Evidence>>,
    comp: &BTreeSet<String>,
) -> Vec<String> {
    let start = comp.iter().next().expect("non-empty component");
    let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start.as_str()]);
    while let Some(u) = queue.pop_front() {
        for v in graph[u].keys().filter(|v| comp.contains(*v)) {
            if v == start {
                let mut chain = Vec::new();
                let mut cur = u;
                while cur != start {
                    chain.push(cur.to_owned());
                    cur = parent[cur];
                }
                chain.reverse();
                let mut path = vec![start.clone()];
                path.extend(chain);
                path.push(start.clone());
                return path;
            }
            if !parent.contains_key(v.as_str()) && v != start {
                parent.insert(v.as_str(), u);
                queue.push_back(v);
            }
        }
    }
    unreachable!("a strongly connected component has a cycle through each member")
}

#[derive(Debug)]
struct Cycle {
    krate: String,
    files: BTreeSet<String>,
    /// `a -> b -> a`.
    path: Vec<String>,
    /// One line per step of `path`: where it names the next file.
    steps: Vec<String>,
    /// The component's other edges, when it is more than the cycle shown.
    others: Vec<String>,
}

impl Cycle {
    fn line(&self) -> String {
        self.path.join(" -> ")
    }

    fn describe(&self) -> String {
        let mut s = format!("  {}\n", self.line());
        for step in &self.steps {
            s.push_str(&format!("      {step}\n"));
        }
        if !self.others.is_empty() {
            s.push_str("    the other edges between these files:\n");
            for e in &self.others {
                s.push_str(&format!("      {e}\n"));
            }
        }
        s
    }
}

struct Analysis {
    cycles: Vec<Cycle>,
    /// Non-test files under a `src/` that no crate root reaches by `mod` declarations.
    unreached: Vec<String>,
}

/// The crate roots of the packages in `vfs` (keys like `crates/x/src/lib.rs`).
fn crate_roots(vfs: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let mut roots = Vec::new();
    for path in vfs.keys() {
        let Some((pkg, in_src)) = path.split_once("/src/") else {
            continue;
        };
        let pkg_name = pkg.rsplit('/').next().unwrap_or(pkg);
        let kind = match in_src.split('/').collect::<Vec<_>>().as_slice() {
            ["lib.rs"] => "lib".to_owned(),
            ["main.rs"] => "bin main.rs".to_owned(),
            ["bin", file] if file.ends_with(".rs") => format!("bin {file}"),
            ["bin", dir, "main.rs"] => format!("bin {dir}"),
            _ => continue,
        };
        roots.push((format!("{pkg_name} ({kind})"), path.clone()));
    }
    roots
}

fn analyze(vfs: &BTreeMap<String, String>) -> Analysis {
    let mut cycles = Vec::new();
    let mut reached = BTreeSet::new();
    for (name, root) in crate_roots(vfs) {
        let krate = load_crate(name, &root, vfs);
        let graph: BTreeMap<String, BTreeMap<String, Evidence>> = krate
            .files
            .keys()
            .map(|f| (f.clone(), krate.edges_of(f)))
            .collect();
        reached.extend(krate.files.keys().cloned());
        for comp in tarjan(&graph) {
            let path = one_cycle(&graph, &comp);
            let step = |from: &String, to: &String| {
                let e = &graph[from][to];
                format!("{from}:{} `{}`", e.line, e.text)
            };
            let steps = path.windows(2).map(|w| step(&w[0], &w[1])).collect();
            let on_path: BTreeSet<(&String, &String)> =
                path.windows(2).map(|w| (&w[0], &w[1])).collect();
            let others = comp
                .iter()
                .flat_map(|f| {
                    graph[f]
                        .keys()
                        .filter(|t| comp.contains(*t))
                        .map(move |t| (f, t))
                })
                .filter(|e| !on_path.contains(e))
                .map(|(f, t)| format!("{} -> {t}", step(f, t)))
                .collect();
            cycles.push(Cycle {
                krate: krate.name.clone(),
                files: comp,
                path,
                steps,
                others,
            });
        }
    }
    let unreached = vfs
        .keys()
        .filter(|p| {
            p.contains("/src/") && p.ends_with(".rs") && !is_test_file(p) && !reached.contains(*p)
        })
        .cloned()
        .collect();
    cycles.sort_by(|a, b| a.files.cmp(&b.files));
    Analysis { cycles, unreached }
}

// ---------------------------------------------------------------------------------------
// The workspace check.

fn read_tree(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .path();
        if path.is_dir() {
            read_tree(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text =
                fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let rel = path
                .strip_prefix(root)
                .expect("under the workspace")
                .to_string_lossy()
                .replace('\\', "/");
            out.insert(rel, text);
        }
    }
}

#[test]
fn no_import_cycles_between_files_of_a_crate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is in the workspace");
    let mut vfs = BTreeMap::new();
    let crates = fs::read_dir(root.join("crates")).expect("crates/");
    for entry in crates {
        let src = entry.expect("crates/ entry").path().join("src");
        if src.is_dir() {
            read_tree(root, &src, &mut vfs);
        }
    }
    assert!(
        vfs.len() > 20,
        "found only {} source files under crates/*/src",
        vfs.len()
    );
    let problems = judge(&analyze(&vfs), ALLOWED);
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// What is wrong with the crates' files given the allow-list: new cycles, allowed
/// cycles that are gone or changed, files no crate reaches. Prints the allowed ones.
fn judge(analysis: &Analysis, allowed: &[Allowed]) -> Vec<String> {
    let mut problems = Vec::new();
    for f in &analysis.unreached {
        problems.push(format!(
            "{f}: no crate root reaches it by `mod` declarations (a dead file, or a #[path] this check does not follow)"
        ));
    }
    let mut matched = vec![false; allowed.len()];
    for c in &analysis.cycles {
        let hit = allowed.iter().position(|a| {
            a.files
                .iter()
                .map(|f| f.to_string())
                .collect::<BTreeSet<_>>()
                == c.files
        });
        match hit {
            Some(k) => {
                matched[k] = true;
                println!(
                    "allowed cycle ({}: {}):\n{}",
                    c.krate,
                    allowed[k].why,
                    c.describe()
                );
            }
            None => {
                let near = allowed
                    .iter()
                    .find(|a| a.files.iter().any(|f| c.files.contains(*f)));
                let note = match near {
                    Some(a) => format!(
                        "\n  it overlaps the allowed cycle {:?}: if it only lost files, replace that entry with these files; never add any",
                        a.files
                    ),
                    None => String::new(),
                };
                problems.push(format!(
                    "import cycle between files of {} (break it: move what both need into a file both import):\n{}{note}",
                    c.krate,
                    c.describe()
                ));
            }
        }
    }
    for (a, m) in allowed.iter().zip(&matched) {
        if !m {
            problems.push(format!(
                "the allowed cycle {:?} ({}) is not a cycle any more (or not these files): remove it from the list in {}",
                a.files,
                a.why,
                file!()
            ));
        }
    }
    problems
}

// ---------------------------------------------------------------------------------------
// The parser and resolver on small examples.

fn vfs(files: &[(&str, &str)]) -> BTreeMap<String, String> {
    files
        .iter()
        .map(|(p, s)| (format!("crates/x/src/{p}"), s.to_string()))
        .collect()
}

fn cycle_lines(files: &[(&str, &str)]) -> Vec<String> {
    analyze(&vfs(files))
        .cycles
        .iter()
        .map(Cycle::line)
        .collect()
}

#[test]
fn a_cycle_through_crate_paths_is_found() {
    let lines = cycle_lines(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("a.rs", "pub struct A;\nfn f() -> crate::b::B { todo!() }\n"),
        ("b.rs", "use crate::c::C;\npub struct B(C);\n"),
        ("c.rs", "pub struct C(Option<Box<crate::a::A>>);\n"),
    ]);
    assert_eq!(
        lines,
        ["crates/x/src/a.rs -> crates/x/src/b.rs -> crates/x/src/c.rs -> crates/x/src/a.rs"]
    );
}

#[test]
fn declaring_a_child_is_not_an_edge_but_using_it_is() {
    // mod.rs declares and re-exports its child; the child uses the parent: no cycle.
    let files = [
        ("lib.rs", "pub mod m;\n"),
        (
            "m/mod.rs",
            "mod kid;\npub use kid::Kid;\npub struct Parent;\n",
        ),
        ("m/kid.rs", "use super::Parent;\npub struct Kid(Parent);\n"),
    ];
    assert!(cycle_lines(&files).is_empty());
    // The parent's own code uses the child's item: now it is a cycle.
    let files = [
        files[0],
        (
            "m/mod.rs",
            "mod kid;\npub use kid::Kid;\npub struct Parent;\nfn f(_: Kid) {}\n",
        ),
        files[2],
    ];
    assert_eq!(
        cycle_lines(&files),
        ["crates/x/src/m/kid.rs -> crates/x/src/m/mod.rs -> crates/x/src/m/kid.rs"]
    );
    // A private `use` of the child is a use too.
    let files = [
        files[0],
        ("m/mod.rs", "mod kid;\nuse kid::Kid;\npub struct Parent;\n"),
        files[2],
    ];
    assert_eq!(cycle_lines(&files).len(), 1);
}

#[test]
fn comments_strings_and_doc_comments_are_ignored() {
    let lines = cycle_lines(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "use crate::b::B;\n"),
        (
            "b.rs",
            "//! See [`crate::a::A`].\n/// Like [`crate::a::A`].\npub struct B;\n\
             // crate::a::A\n/* crate::a::A /* nested */ crate::a::A */\n\
             const S: &str = \"crate::a::A\";\nconst R: &str = r#\"crate::a::A \"quoted\"\"#;\n\
             const C: char = '\"'; fn l<'a>(x: &'a str) -> &'a str { x }\n\
             #[doc = \"crate::a::A\"] pub struct D;\n",
        ),
    ]);
    assert!(lines.is_empty(), "{lines:?}");
}

#[test]
fn use_groups_and_nested_groups_are_parsed() {
    let p =
        parse("use crate::{a, b::{c, d::{self, E as F}}, g::*};\npub(crate) use super::h::I;\n");
    let leaves: Vec<(String, Option<String>, bool)> = p
        .uses
        .iter()
        .map(|u| (u.segs.join("::"), u.name.clone(), u.reexport))
        .collect();
    let s = |x: &str| Some(x.to_owned());
    assert_eq!(
        leaves,
        [
            ("crate::a".to_owned(), s("a"), false),
            ("crate::b::c".to_owned(), s("c"), false),
            ("crate::b::d".to_owned(), s("d"), false),
            ("crate::b::d::E".to_owned(), s("F"), false),
            ("crate::g".to_owned(), None, false),
            ("super::h::I".to_owned(), s("I"), true),
        ]
    );
    // A leaf deep in a group is an edge like any other.
    let lines = cycle_lines(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        (
            "a.rs",
            "use crate::{b::{self as bee}};\nfn f() { bee::g() }\n",
        ),
        ("b.rs", "pub fn g() {}\nuse crate::{a};\n"),
    ]);
    assert_eq!(
        lines,
        ["crates/x/src/a.rs -> crates/x/src/b.rs -> crates/x/src/a.rs"]
    );
}

#[test]
fn paths_resolve_to_the_deepest_module_file() {
    let files = vfs(&[
        ("lib.rs", "pub mod a;\npub mod pb { pub struct P; }\n"),
        ("a.rs", "pub mod b;\npub mod inline { pub struct Q; }\n"),
        ("a/b/mod.rs", "pub struct B;\n"),
        ("c.rs", ""),
    ]);
    let krate = load_crate("x".into(), "crates/x/src/lib.rs", &files);
    let abs = |s: &str| s.split("::").map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(
        krate.file_of(&abs("a::b::B::new")),
        "crates/x/src/a/b/mod.rs"
    );
    assert_eq!(krate.file_of(&abs("a::inline::Q")), "crates/x/src/a.rs");
    assert_eq!(krate.file_of(&abs("pb::P")), "crates/x/src/lib.rs");
    // c.rs is declared by no one.
    assert_eq!(analyze(&files).unreached, ["crates/x/src/c.rs"]);
}

#[test]
fn test_modules_and_test_files_are_not_nodes() {
    let lines = cycle_lines(&[
        ("lib.rs", "mod a;\nmod b;\n#[cfg(test)]\nmod tests;\n"),
        ("a.rs", "use crate::b::B;\npub struct A;\n"),
        (
            "b.rs",
            "pub struct B;\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n    mod deeper { fn f() { super::super::A; } }\n}\n\
             pub struct After;\n",
        ),
        ("tests.rs", "use crate::a::A;\nuse crate::b::B;\n"),
    ]);
    assert!(lines.is_empty(), "{lines:?}");
    // ...but code after an inline test module still counts.
    let lines = cycle_lines(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "use crate::b::B;\npub struct A;\n"),
        (
            "b.rs",
            "pub struct B;\n#[cfg(test)]\nmod tests {\n}\nfn f(_: crate::a::A) {}\n",
        ),
    ]);
    assert_eq!(lines.len(), 1);
}

#[test]
fn super_self_and_inline_modules_resolve_from_where_they_are_written() {
    // Inside an inline module of a.rs, `super::` is a.rs itself, not the crate root.
    let lines = cycle_lines(&[
        ("lib.rs", "mod a;\npub struct Root;\nfn f() { a::g() }\n"),
        (
            "a.rs",
            "pub fn g() {}\nmod inner { use super::g; fn h() { self::x(); } fn x() {} }\n",
        ),
    ]);
    assert!(lines.is_empty(), "{lines:?}");
    let lines = cycle_lines(&[
        ("lib.rs", "mod a;\npub struct Root;\nfn f() { a::g() }\n"),
        (
            "a.rs",
            "pub fn g() {}\nmod inner { use super::super::Root; }\n",
        ),
    ]);
    assert_eq!(
        lines,
        ["crates/x/src/a.rs -> crates/x/src/lib.rs -> crates/x/src/a.rs"]
    );
}

#[test]
fn a_binary_and_its_library_are_separate_crates() {
    let files = [
        ("lib.rs", "pub mod a;\n"),
        ("a.rs", "pub fn f() {}\n"),
        (
            "main.rs",
            "mod cli;\nuse x::a::f;\nfn main() { cli::run() }\n",
        ),
        ("cli.rs", "pub fn run() { x::a::f() }\n"),
        ("bin/tool.rs", "fn main() { x::a::f() }\n"),
    ];
    let lines = cycle_lines(&files);
    assert!(lines.is_empty(), "{lines:?}");
    let a = analyze(&vfs(&files));
    assert!(a.unreached.is_empty(), "{:?}", a.unreached);
    // main.rs's own tree is a crate: main.rs <-> cli.rs is found there.
    let lines = cycle_lines(&[
        (
            "main.rs",
            "mod cli;\nfn helper() {}\nfn main() { cli::run() }\n",
        ),
        ("cli.rs", "pub fn run() { crate::helper() }\n"),
    ]);
    assert_eq!(
        lines,
        ["crates/x/src/cli.rs -> crates/x/src/main.rs -> crates/x/src/cli.rs"]
    );
}

#[test]
fn a_reexport_counts_as_the_file_that_makes_it() {
    // b.rs names `crate::A`, which lib.rs re-exports from a.rs: the edge is b -> lib.
    // lib.rs's code uses b: b <-> lib is a cycle, a is not part of it.
    let lines = cycle_lines(&[
        (
            "lib.rs",
            "mod a;\nmod b;\npub use a::A;\nfn f() { b::g() }\n",
        ),
        ("a.rs", "pub struct A;\n"),
        ("b.rs", "pub fn g() -> crate::A { todo!() }\n"),
    ]);
    assert_eq!(
        lines,
        ["crates/x/src/b.rs -> crates/x/src/lib.rs -> crates/x/src/b.rs"]
    );
}

#[test]
fn a_glob_reexport_is_an_edge_only_when_the_file_uses_what_it_brings_in() {
    let files = |lib: &str| {
        cycle_lines(&[
            ("lib.rs", lib),
            ("state.rs", "pub struct Command;\npub(crate) const fn f() {}\npub fn g() -> crate::NodeId { 0 }\n"),
        ])
    };
    assert!(files("mod state;\npub use state::*;\npub type NodeId = u64;\n").is_empty());
    let lines =
        files("mod state;\npub use state::*;\npub type NodeId = u64;\nfn h(_: Command) {}\n");
    assert_eq!(
        lines,
        ["crates/x/src/lib.rs -> crates/x/src/state.rs -> crates/x/src/lib.rs"]
    );
    assert_eq!(
        files("mod state;\npub use state::*;\npub type NodeId = u64;\nfn h() { f() }\n").len(),
        1
    );
}

#[test]
fn the_allow_list_must_match_the_cycles_exactly() {
    let analysis = analyze(&vfs(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("a.rs", "use crate::b::B;\npub struct A;\n"),
        ("b.rs", "pub struct B;\nfn f(_: crate::a::A) {}\n"),
        ("c.rs", "pub struct C;\n"),
    ]));
    let ab = Allowed {
        files: &["crates/x/src/a.rs", "crates/x/src/b.rs"],
        why: "known",
    };
    let gone = Allowed {
        files: &["crates/x/src/a.rs", "crates/x/src/c.rs"],
        why: "fixed since",
    };
    assert!(judge(&analysis, &[ab]).is_empty());
    let new = judge(&analysis, &[]);
    assert_eq!(new.len(), 1);
    assert!(new[0].contains("crates/x/src/a.rs -> crates/x/src/b.rs -> crates/x/src/a.rs"));
    let stale = judge(&analysis, &[ab, gone]);
    assert_eq!(stale.len(), 1, "{stale:?}");
    assert!(stale[0].contains("remove it from the list"), "{stale:?}");
}

#[test]
fn lexer_keeps_lifetimes_and_drops_char_and_byte_literals() {
    let toks: Vec<Tok> = lex("'a: loop { b'x'; '\\''; br##\"a\"#b\"##; r#type }")
        .into_iter()
        .map(|t| t.tok)
        .collect();
    assert_eq!(toks[0], Tok::Punct('\''));
    assert_eq!(toks[1], Tok::Ident("a".into()));
    assert_eq!(toks.iter().filter(|t| **t == Tok::Literal).count(), 3);
    assert!(toks.contains(&Tok::Ident("type".into())));
    assert!(!toks.contains(&Tok::Ident("b".into())));
}
