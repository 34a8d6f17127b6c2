//! The module graph of one target and its cycles.
//!
//! Module A depends on module B when A's non-test code names B or an item in it: a path in a `use`
//! tree, in an expression, type, pattern, trait bound or attribute, a path written inside a
//! macro's tokens (`format!("{}", crate::b::f())`, a `macro_rules!` body's `$crate::b::X`), or a
//! path spelled in an attribute string (`#[serde(with = "crate::b::money")]`). Paths start at
//! `crate`, `super`, `self`, a child module, or a name the module imported; a name re-exported by
//! another module (`pub use`, globs included) is followed to the module that defines it, so a
//! path through the crate root's re-exports (`crate::parse_action`) reaches the module it names.
//!
//! Not edges: a module naming one of its ancestors (a child module is part of its parent's
//! implementation, as the `grade/` stages use the types of `grade/mod.rs`), and anything about the
//! crate root, which declares every module and is the crate's facade, not a node. A strongly
//! connected component of more than one module is a cycle.
//!
//! Strings and comments are tokens to `syn`, never code: a string continued with `\` cannot hide
//! the code after it (the regular expressions of the Python script this replaces could).

use crate::modtree::{is_test_only, ModuleTree};
use proc_macro2::{Spacing, TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet};
use syn::visit::Visit;
use syn::{Item, UseTree};

/// What a module's scope holds, for resolving the paths that go through it.
#[derive(Default)]
struct Scope {
    /// `use` imports: the name in scope → the path it was imported from (as written).
    imports: BTreeMap<String, Vec<String>>,
    /// `use a::b::*` prefixes.
    globs: Vec<Vec<String>>,
    /// Names of items defined here (types, functions, constants, traits, statics).
    defs: BTreeSet<String>,
}

/// One dependency of a module on another, with the first place that creates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    pub from: usize,
    pub to: usize,
    /// `file:line: path` of the first reference.
    pub witness: String,
}

/// The dependency graph of a [`ModuleTree`]'s modules.
pub struct ModuleGraph<'t> {
    pub tree: &'t ModuleTree,
    scopes: Vec<Scope>,
    /// `edges[from]`: target module → its witness.
    edges: Vec<BTreeMap<usize, String>>,
}

/// A cycle: the modules of one strongly connected component and the edges between them.
#[derive(Debug)]
pub struct Cycle {
    pub modules: Vec<String>,
    pub edges: Vec<String>,
}

impl std::fmt::Display for Cycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "module cycle: {}", self.modules.join(" <-> "))?;
        for e in &self.edges {
            writeln!(f, "    {e}")?;
        }
        Ok(())
    }
}

/// How deep re-exports are followed (a chain longer than this is a loop of imports).
const MAX_HOPS: usize = 16;

impl<'t> ModuleGraph<'t> {
    /// Build the graph of `tree`; `file` names a module's file as witnesses should show it.
    pub fn new(tree: &'t ModuleTree, file: &dyn Fn(&std::path::Path) -> String) -> Self {
        let scopes = tree.modules.iter().map(|m| scope(&m.items)).collect();
        let mut g = ModuleGraph {
            tree,
            scopes,
            edges: vec![BTreeMap::new(); tree.modules.len()],
        };
        for from in 0..tree.modules.len() {
            let mut refs = Refs::default();
            for item in &tree.modules[from].items {
                refs.visit_item(item);
            }
            for (path, line) in refs.paths {
                let Some(to) = g.resolve(from, &path, 0) else {
                    continue;
                };
                if g.is_edge(from, to) {
                    let m = &tree.modules[from];
                    let witness = format!("{}:{line}: {}", file(&m.file), path.join("::"));
                    g.edges[from].entry(to).or_insert(witness);
                }
            }
        }
        debug_assert!(
            g.edges.iter().enumerate().all(|(f, e)| !e.contains_key(&f)),
            "no module depends on itself"
        );
        g
    }

    /// Whether a reference from `from` to `to` is a dependency: not itself, not an ancestor (the
    /// root included).
    fn is_edge(&self, from: usize, to: usize) -> bool {
        let (a, b) = (&self.tree.modules[from].path, &self.tree.modules[to].path);
        from != to && !a.starts_with(b)
    }

    /// The edges out of `from`, with their witnesses.
    pub fn edges(&self, from: usize) -> impl Iterator<Item = Edge> + '_ {
        self.edges[from].iter().map(move |(&to, w)| Edge {
            from,
            to,
            witness: w.clone(),
        })
    }

    /// The module a path written in `from` names (the deepest module on it, after following
    /// imports and re-exports), or `None` for a path outside the crate.
    fn resolve(&self, from: usize, path: &[String], hops: usize) -> Option<usize> {
        if hops > MAX_HOPS || path.is_empty() {
            return None;
        }
        let modules = &self.tree.modules;
        let first = path[0].as_str();
        let (start, rest) = match first {
            "crate" | "$crate" => (0, &path[1..]),
            "self" | "super" => {
                let mut here = modules[from].path.clone();
                let mut n = 0;
                while let Some(seg) = path.get(n).filter(|s| *s == "self" || *s == "super") {
                    if seg == "super" {
                        here.pop()?;
                    }
                    n += 1;
                }
                (self.tree.index(&here)?, &path[n..])
            }
            name if modules[from].children.contains(name) => (self.child(from, name)?, &path[1..]),
            name => return self.resolve_imported(from, name, path, hops),
        };
        self.walk(start, rest, hops)
    }

    /// A path whose first segment is a name `from` imported, by name or through a glob; `None`
    /// for anything else (another crate, a local item, a type parameter).
    fn resolve_imported(
        &self,
        from: usize,
        name: &str,
        path: &[String],
        hops: usize,
    ) -> Option<usize> {
        let scope = &self.scopes[from];
        if let Some(imported) = scope.imports.get(name) {
            let full: Vec<String> = imported.iter().chain(&path[1..]).cloned().collect();
            return self.resolve(from, &full, hops + 1);
        }
        scope.globs.iter().find_map(|glob| {
            let g = self.resolve(from, glob, hops + 1)?;
            (g != from && self.names(g, name)).then(|| self.walk(g, path, hops + 1))?
        })
    }

    /// Follow `rest` down from module `at`.
    fn walk(&self, mut at: usize, rest: &[String], hops: usize) -> Option<usize> {
        for (i, seg) in rest.iter().enumerate() {
            if let Some(child) = self.child(at, seg) {
                at = child;
                continue;
            }
            let scope = &self.scopes[at];
            if scope.defs.contains(seg) {
                return Some(at);
            }
            if let Some(imported) = scope.imports.get(seg) {
                let full: Vec<String> = imported.iter().chain(&rest[i + 1..]).cloned().collect();
                return self.resolve(at, &full, hops + 1).or(Some(at));
            }
            for glob in &scope.globs {
                let Some(g) = self.resolve(at, glob, hops + 1) else {
                    continue;
                };
                if g != at && self.names(g, seg) {
                    return self.walk(g, &rest[i..], hops + 1);
                }
            }
            return Some(at);
        }
        Some(at)
    }

    /// Whether module `at` has `name` in scope as a child, definition or import.
    fn names(&self, at: usize, name: &str) -> bool {
        let s = &self.scopes[at];
        self.tree.modules[at].children.contains(name)
            || s.defs.contains(name)
            || s.imports.contains_key(name)
    }

    fn child(&self, at: usize, name: &str) -> Option<usize> {
        if !self.tree.modules[at].children.contains(name) {
            return None;
        }
        let mut p = self.tree.modules[at].path.clone();
        p.push(name.to_owned());
        self.tree.index(&p)
    }

    /// The cycles: strongly connected components of more than one module, each with its edges.
    pub fn cycles(&self) -> Vec<Cycle> {
        let n = self.tree.modules.len();
        let adj: Vec<Vec<usize>> = (0..n)
            .map(|v| self.edges[v].keys().copied().collect())
            .collect();
        let mut out = Vec::new();
        for comp in tarjan(&adj) {
            if comp.len() < 2 {
                continue;
            }
            let set: BTreeSet<usize> = comp.iter().copied().collect();
            let mut modules: Vec<String> =
                comp.iter().map(|&m| self.tree.modules[m].name()).collect();
            modules.sort();
            let mut edges = Vec::new();
            for &m in &comp {
                for e in self.edges(m).filter(|e| set.contains(&e.to)) {
                    let (a, b) = (&self.tree.modules[m], &self.tree.modules[e.to]);
                    edges.push(format!("{} -> {} ({})", a.name(), b.name(), e.witness));
                }
            }
            edges.sort();
            out.push(Cycle { modules, edges });
        }
        out
    }
}

/// Strongly connected components (Tarjan), each a list of vertices.
fn tarjan(adj: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        adj: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        stack: Vec<usize>,
        on: Vec<bool>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on[v] = true;
        for &w in s.adj[v].iter() {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(comp);
        }
    }
    let n = adj.len();
    let mut s = State {
        adj,
        index: vec![None; n],
        low: vec![0; n],
        stack: Vec::new(),
        on: vec![false; n],
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    debug_assert_eq!(s.out.iter().map(Vec::len).sum::<usize>(), n, "a partition");
    debug_assert!(s.stack.is_empty());
    s.out
}

/// The scope table of a module's items.
fn scope(items: &[Item]) -> Scope {
    let mut s = Scope::default();
    for item in items {
        if is_test_only(item_attrs(item)) {
            continue;
        }
        let ident = match item {
            Item::Use(u) => {
                use_leaves(&u.tree, &mut Vec::new(), &mut |path, alias| match alias {
                    Some(name) => {
                        s.imports.insert(name, path);
                    }
                    None => s.globs.push(path),
                });
                continue;
            }
            Item::Const(i) => &i.ident,
            Item::Enum(i) => &i.ident,
            Item::Fn(i) => &i.sig.ident,
            Item::Static(i) => &i.ident,
            Item::Struct(i) => &i.ident,
            Item::Trait(i) => &i.ident,
            Item::TraitAlias(i) => &i.ident,
            Item::Type(i) => &i.ident,
            Item::Union(i) => &i.ident,
            Item::Macro(i) => match &i.ident {
                Some(id) => id,
                None => continue,
            },
            _ => continue,
        };
        s.defs.insert(ident.to_string());
    }
    s
}

fn item_attrs(item: &Item) -> &[syn::Attribute] {
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// Each leaf of a `use` tree: its full path and the name it brings into scope (`None` for a
/// glob, whose path is the prefix). `self` in a group names the prefix itself.
fn use_leaves(
    tree: &UseTree,
    prefix: &mut Vec<String>,
    f: &mut dyn FnMut(Vec<String>, Option<String>),
) {
    match tree {
        UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_leaves(&p.tree, prefix, f);
            prefix.pop();
        }
        UseTree::Name(n) if n.ident == "self" => {
            let name = prefix.last().cloned();
            f(prefix.clone(), name);
        }
        UseTree::Name(n) => {
            let mut p = prefix.clone();
            p.push(n.ident.to_string());
            f(p, Some(n.ident.to_string()));
        }
        UseTree::Rename(r) => {
            let mut p = prefix.clone();
            if r.ident != "self" {
                p.push(r.ident.to_string());
            }
            f(p, Some(r.rename.to_string()));
        }
        UseTree::Glob(_) => f(prefix.clone(), None),
        UseTree::Group(g) => {
            for t in &g.items {
                use_leaves(t, prefix, f);
            }
        }
    }
}

/// Collects every path a module's non-test code writes, with its line.
#[derive(Default)]
struct Refs {
    paths: Vec<(Vec<String>, usize)>,
}

impl Refs {
    fn push(&mut self, path: Vec<String>, line: usize) {
        self.paths.push((path, line));
    }

    /// Paths in a token stream: `a::b(::c)*` runs (a leading `$` only before `crate`, since
    /// `$name::x` is a macro variable), and, where `strings` is set, string literals that parse as
    /// multi-segment paths.
    fn tokens(&mut self, ts: TokenStream, strings: bool) {
        let toks: Vec<TokenTree> = ts.into_iter().collect();
        let mut i = 0;
        while i < toks.len() {
            match &toks[i] {
                TokenTree::Group(g) => self.tokens(g.stream(), strings),
                TokenTree::Ident(id) => {
                    let after_dollar = i > 0 && is_punct(&toks[i - 1], '$');
                    let after_colons = i > 1 && is_colons(&toks[i - 2], &toks[i - 1]);
                    let mut path = vec![id.to_string()];
                    while let (Some(a), Some(b), Some(TokenTree::Ident(next))) =
                        (toks.get(i + 1), toks.get(i + 2), toks.get(i + 3))
                    {
                        if !is_colons(a, b) {
                            break;
                        }
                        path.push(next.to_string());
                        i += 3;
                    }
                    if path.len() > 1 && !after_colons && (!after_dollar || path[0] == "crate") {
                        self.push(path, id.span().start().line);
                    }
                }
                TokenTree::Literal(lit) if strings => {
                    if let Some(path) = string_path(&lit.to_string()) {
                        self.push(path, lit.span().start().line);
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
}

/// The segments of a string literal that spells a relative multi-segment path
/// (`"crate::schema::money"`).
fn string_path(literal: &str) -> Option<Vec<String>> {
    let syn::Lit::Str(s) = syn::parse_str::<syn::Lit>(literal).ok()? else {
        return None;
    };
    let p = syn::parse_str::<syn::Path>(&s.value()).ok()?;
    (p.segments.len() > 1 && p.leading_colon.is_none())
        .then(|| p.segments.iter().map(|s| s.ident.to_string()).collect())
}

fn is_punct(t: &TokenTree, c: char) -> bool {
    matches!(t, TokenTree::Punct(p) if p.as_char() == c)
}

fn is_colons(a: &TokenTree, b: &TokenTree) -> bool {
    matches!((a, b), (TokenTree::Punct(x), TokenTree::Punct(y))
        if x.as_char() == ':' && x.spacing() == Spacing::Joint && y.as_char() == ':')
}

impl<'ast> Visit<'ast> for Refs {
    fn visit_item(&mut self, i: &'ast Item) {
        // Test code is not part of the graph; child modules are nodes of their own.
        if is_test_only(item_attrs(i)) || matches!(i, Item::Mod(_)) {
            return;
        }
        syn::visit::visit_item(self, i);
    }

    fn visit_impl_item(&mut self, i: &'ast syn::ImplItem) {
        let attrs = match i {
            syn::ImplItem::Const(c) => &c.attrs,
            syn::ImplItem::Fn(f) => &f.attrs,
            syn::ImplItem::Type(t) => &t.attrs,
            syn::ImplItem::Macro(m) => &m.attrs,
            _ => return syn::visit::visit_impl_item(self, i),
        };
        if !is_test_only(attrs) {
            syn::visit::visit_impl_item(self, i);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let line = u.use_token.span.start().line;
        use_leaves(&u.tree, &mut Vec::new(), &mut |path, _| {
            self.push(path, line)
        });
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.segments.len() > 1 && p.leading_colon.is_none() {
            let segs = p.segments.iter().map(|s| s.ident.to_string()).collect();
            let line = p.segments[0].ident.span().start().line;
            self.push(segs, line);
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.visit_path(&m.path);
        self.tokens(m.tokens.clone(), false);
    }

    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        if a.path().is_ident("doc") {
            return;
        }
        self.visit_path(a.path());
        if let syn::Meta::List(l) = &a.meta {
            self.tokens(l.tokens.clone(), true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    /// The cycles of a crate written in memory (`src/lib.rs` is the root).
    fn cycles_of(files: &[(&str, &str)]) -> Vec<Cycle> {
        let src: BTreeMap<PathBuf, String> = files
            .iter()
            .map(|(p, t)| (PathBuf::from(p), (*t).to_owned()))
            .collect();
        let tree = ModuleTree::load(Path::new("src/lib.rs"), &src).unwrap();
        let show = |p: &Path| p.display().to_string();
        ModuleGraph::new(&tree, &show).cycles()
    }

    fn names(cycles: &[Cycle]) -> Vec<String> {
        cycles.iter().map(|c| c.modules.join(" <-> ")).collect()
    }

    /// A string continued with `\` hides nothing: the regular expression of the old Python check
    /// could not match the first literal, paired its closing quote with the next string's opening
    /// one, and so dropped the `crate::b::g()` call between them.
    #[test]
    fn a_string_continued_with_a_backslash_hides_no_code() {
        let a = "pub const HELP: &str = \"one line \\\n    and the next\";\n\
                 pub fn f() -> usize { crate::b::g() }\n\
                 pub const OTHER: &str = \"x\";\n";
        let found = cycles_of(&[
            ("src/lib.rs", "mod a; mod b;"),
            ("src/a.rs", a),
            ("src/b.rs", "pub fn g() -> usize { crate::a::HELP.len() }"),
        ]);
        assert_eq!(names(&found), ["a <-> b"]);
        assert!(
            found[0].edges[0].contains("src/a.rs:3: crate::b::g"),
            "{}",
            found[0]
        );
    }

    /// The ls-agents cycle the old check missed: `prompt` calls `crate::llm::parse_action` in an
    /// expression, closing llm -> teacher -> runner -> prompt -> llm.
    #[test]
    fn a_cycle_through_a_call_path() {
        let files = [
            ("src/lib.rs", "pub mod llm; pub mod prompt; pub mod runner; pub mod teacher;"),
            (
                "src/llm.rs",
                "pub struct Llm { hint: crate::teacher::Teacher }\n\
                 pub fn parse_action(t: &str) -> Option<String> { Some(t.into()) }",
            ),
            ("src/teacher.rs", "use crate::runner::Agent; pub struct Teacher;"),
            ("src/runner.rs", "use crate::prompt::step_prompt; pub trait Agent {}"),
            (
                "src/prompt.rs",
                "pub fn step_prompt() {}\n\
                 pub fn choose(t: &str) -> Option<String> { let a = crate::llm::parse_action(t)?; Some(a) }",
            ),
        ];
        let found = cycles_of(&files);
        assert_eq!(names(&found), ["llm <-> prompt <-> runner <-> teacher"]);
        assert!(
            found[0]
                .edges
                .iter()
                .any(|e| e.starts_with("prompt -> llm") && e.contains("crate::llm::parse_action")),
            "{}",
            found[0]
        );
        // Moving the parser below both users breaks it.
        let mut fixed = files;
        fixed[1].1 = "pub struct Llm { hint: crate::teacher::Teacher }";
        fixed[4].1 = "pub fn step_prompt() {}\n\
                      pub fn choose(t: &str) -> Option<String> { crate::action::parse(t) }";
        fixed[0].1 =
            "pub mod action; pub mod llm; pub mod prompt; pub mod runner; pub mod teacher;";
        let mut fixed = fixed.to_vec();
        fixed.push((
            "src/action.rs",
            "pub fn parse(t: &str) -> Option<String> { None }",
        ));
        assert!(cycles_of(&fixed).is_empty());
    }

    /// Paths inside macros, re-exports through the crate root, attribute strings and globs all
    /// count; a child naming its parent and test-only code do not.
    #[test]
    fn every_way_of_naming_a_module_counts_and_nothing_else() {
        let root = "mod a; mod b; pub use b::parse;";
        let cycle_with = |a: &str| {
            names(&cycles_of(&[
                ("src/lib.rs", root),
                ("src/a.rs", a),
                ("src/b.rs", "pub fn parse() {} pub fn g() { crate::a::f() }"),
            ]))
        };
        let both = ["a <-> b"];
        assert_eq!(
            cycle_with("pub fn f() { println!(\"{:?}\", crate::b::g()) }"),
            both
        );
        assert_eq!(cycle_with("pub fn f() { crate::parse() }"), both);
        assert_eq!(cycle_with("#[derive(serde::Serialize)] pub struct S { #[serde(with = \"crate::b::m\")] x: u8 } pub fn f() {}"), both);
        assert_eq!(
            cycle_with("use crate::b as other; pub fn f() { other::g() }"),
            both
        );
        assert_eq!(cycle_with("use crate::*; pub fn f() { b::g() }"), both);
        assert_eq!(
            cycle_with("macro_rules! m { () => { $crate::b::g() } } pub fn f() {}"),
            both
        );
        let none: [&str; 0] = [];
        // Named only in a doc comment, a string, a test module or a test function.
        assert_eq!(
            cycle_with("/// See [`crate::b::g`].\npub fn f() { let _ = \"crate::b::g\"; }"),
            none
        );
        assert_eq!(
            cycle_with("pub fn f() {} #[cfg(test)] mod tests { fn t() { crate::b::g() } }"),
            none
        );
        assert_eq!(
            cycle_with("pub fn f() {} #[test] fn t() { crate::b::g() }"),
            none
        );
        // A macro variable is not a path: `$b::g` is whatever the caller passes.
        assert_eq!(
            cycle_with("macro_rules! m { ($b:ident) => { $b::g() } } pub fn f() {}"),
            none
        );
        // A child module naming its parent is part of the parent, not a dependency.
        let parent_child = cycles_of(&[
            ("src/lib.rs", "mod grade;"),
            (
                "src/grade/mod.rs",
                "mod intake; pub struct Input; pub fn run() { intake::stage() }",
            ),
            (
                "src/grade/intake.rs",
                "use super::Input; pub fn stage() { let _ = super::Input; }",
            ),
        ]);
        assert!(parent_child.is_empty());
    }
}
