//! Function length: the lines of each non-test function body, counted as clippy's
//! `too_many_lines` counts them, and the ratchet that keeps them short.
//!
//! A body's lines are the text between its braces, trimmed, where a line counts when it holds
//! code outside comments (blank lines, `//` lines and the inside of `/* .. */` do not count);
//! [`body_lines`] is that rule. Every `fn` with a body is measured: free functions, methods,
//! trait methods with a default body, and functions nested in a body (which also count toward
//! the body around them); closures count toward their function. Functions a macro generates are
//! not seen (clippy skips them too).
//!
//! The ratchet ([`ratchet`]): a function over the limit must be in the allowlist, pinned at its
//! length. It may shrink but not grow; when it shrinks, its pin comes down with it (or it leaves
//! the list once within the limit), so the list only ever gets shorter and its numbers smaller.

use crate::modtree::{is_test_only, ModuleTree};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use syn::visit::Visit;

/// One measured function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FnLength {
    /// `file::Owner::name`, the key of the allowlist (file relative to the workspace root; an
    /// impl's type, `<Type as Trait>` for a trait impl, a trait, an enclosing function or inline
    /// module as the owner; `#2`, `#3` for a repeated key in one file).
    pub key: String,
    /// Counted lines of the body.
    pub lines: usize,
    /// The line the body opens on.
    pub line: usize,
    /// Whether its signature (parameters, return type, generics) names untyped JSON:
    /// `serde_json`'s `Value` or `Map` ([`crate::json_sigs`]).
    pub json: bool,
    /// `assert!`-family invocations in its body (`assert`, `assert_eq`, `assert_ne` and their
    /// `debug_` forms), those of functions nested in it included.
    pub asserts: usize,
}

/// Lines of a function body as clippy's `too_many_lines` counts them. `body` is the block's
/// text, braces included. The braces are dropped before counting except for an `async fn`
/// (`is_async`), whose body clippy sees desugared, not as a block, so it counts the lines of
/// the braces too (measured: the same count as clippy for all 156 workspace functions over 50
/// lines, async ones included).
pub fn body_lines(body: &str, is_async: bool) -> usize {
    let inner = match body.strip_prefix('{').and_then(|b| b.strip_suffix('}')) {
        Some(inner) if !is_async => inner,
        _ => body,
    };
    let mut count = 0;
    let mut in_comment = false;
    for line in inner.trim().lines() {
        let mut line = line;
        let mut code = false;
        loop {
            line = line.trim_start();
            if line.is_empty() {
                break;
            }
            if in_comment {
                match line.find("*/") {
                    Some(i) => {
                        line = &line[i + 2..];
                        in_comment = false;
                        continue;
                    }
                    None => break,
                }
            }
            let multi = line.find("/*").unwrap_or(line.len());
            let single = line.find("//").unwrap_or(line.len());
            code |= multi > 0 && single > 0;
            if multi < single {
                line = &line[multi + 2..];
                in_comment = true;
                continue;
            }
            break;
        }
        count += usize::from(code);
    }
    debug_assert!(
        count <= inner.lines().count(),
        "never more than the lines there are"
    );
    count
}

/// Every non-test function of `tree` with its length; `file` names a module's file as the keys
/// should show it.
pub fn measure(tree: &ModuleTree, file: &dyn Fn(&std::path::Path) -> String) -> Vec<FnLength> {
    let mut out: Vec<FnLength> = Vec::new();
    for m in &tree.modules {
        let mut v = Measure {
            text: &m.text,
            owner: Vec::new(),
            prefix: format!("{}::", file(&m.file)),
            found: Vec::new(),
        };
        // An inline module's items are measured under its own path.
        let within_file = tree
            .modules
            .iter()
            .filter(|o| o.file == m.file && m.path.starts_with(&o.path))
            .map(|o| o.path.len())
            .min()
            .unwrap_or(m.path.len());
        v.owner.extend(m.path[within_file..].iter().cloned());
        for item in &m.items {
            v.visit_item(item);
        }
        out.extend(v.found);
    }
    // Repeated keys in one file (`fmt` of two trait impls on one type under cfg, ...) get `#n`.
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for f in &mut out {
        let n = seen.entry(f.key.clone()).or_default();
        *n += 1;
        if *n > 1 {
            f.key = format!("{}#{n}", f.key);
        }
    }
    out
}

struct Measure<'a> {
    text: &'a str,
    owner: Vec<String>,
    prefix: String,
    found: Vec<FnLength>,
}

impl Measure<'_> {
    fn body(&mut self, sig: &syn::Signature, block: &syn::Block) {
        let span = block.brace_token.span.join();
        let range = span.byte_range();
        let Some(text) = self.text.get(range.clone()) else {
            return;
        };
        debug_assert!(text.starts_with('{') && text.ends_with('}'), "{range:?}");
        let mut key = self.prefix.clone();
        for o in &self.owner {
            key.push_str(o);
            key.push_str("::");
        }
        key.push_str(&sig.ident.to_string());
        self.found.push(FnLength {
            key,
            lines: body_lines(text, sig.asyncness.is_some()),
            line: span.start().line,
            json: crate::json_sigs::names_json(sig),
            asserts: assertions(block),
        });
    }

    fn within(&mut self, owner: String, f: impl FnOnce(&mut Self)) {
        self.owner.push(owner);
        f(self);
        self.owner.pop();
    }
}

/// The `assert!`-family macros invoked in `block` (not inside other macros' tokens).
pub fn assertions(block: &syn::Block) -> usize {
    struct Count(usize);
    impl<'ast> Visit<'ast> for Count {
        fn visit_macro(&mut self, m: &'ast syn::Macro) {
            let name = m.path.segments.last().map(|s| s.ident.to_string());
            if let Some(name) = name {
                let base = name.strip_prefix("debug_").unwrap_or(&name);
                self.0 += usize::from(matches!(base, "assert" | "assert_eq" | "assert_ne"));
            }
        }
    }
    let mut c = Count(0);
    c.visit_block(block);
    c.0
}

fn type_name(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default(),
        syn::Type::Reference(r) => type_name(&r.elem),
        _ => "_".to_owned(),
    }
}

impl<'ast> Visit<'ast> for Measure<'_> {
    fn visit_item(&mut self, i: &'ast syn::Item) {
        let skip = match i {
            syn::Item::Fn(f) => is_test_only(&f.attrs),
            syn::Item::Impl(x) => is_test_only(&x.attrs),
            syn::Item::Trait(t) => is_test_only(&t.attrs),
            // A module is measured as a node of its own (a test-only one not at all).
            syn::Item::Mod(_) => true,
            _ => false,
        };
        if !skip {
            syn::visit::visit_item(self, i);
        }
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.body(&f.sig, &f.block);
        let name = f.sig.ident.to_string();
        self.within(name, |v| syn::visit::visit_block(v, &f.block));
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        let ty = type_name(&i.self_ty);
        let owner = match &i.trait_ {
            Some((_, t, _)) => {
                let tr = t.segments.last().map(|s| s.ident.to_string());
                format!("<{ty} as {}>", tr.unwrap_or_default())
            }
            None => ty,
        };
        self.within(owner, |v| syn::visit::visit_item_impl(v, i));
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if is_test_only(&f.attrs) {
            return;
        }
        self.body(&f.sig, &f.block);
        let name = f.sig.ident.to_string();
        self.within(name, |v| syn::visit::visit_block(v, &f.block));
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        let name = t.ident.to_string();
        self.within(name, |v| syn::visit::visit_item_trait(v, t));
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        let Some(block) = &f.default else { return };
        if is_test_only(&f.attrs) {
            return;
        }
        self.body(&f.sig, block);
        let name = f.sig.ident.to_string();
        self.within(name, |v| syn::visit::visit_block(v, block));
    }
}

/// The allowlist: function key → its pinned length. One entry a line, `LINES KEY`; `#` starts a
/// comment line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowlist {
    pub pins: BTreeMap<String, usize>,
}

impl Allowlist {
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut pins = BTreeMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (lines, key) = line
                .split_once(' ')
                .ok_or_else(|| format!("line {}: expected `LINES KEY`", n + 1))?;
            let lines = lines
                .parse()
                .map_err(|e| format!("line {}: {lines:?}: {e}", n + 1))?;
            if pins.insert(key.trim().to_owned(), lines).is_some() {
                return Err(format!("line {}: {key} listed twice", n + 1));
            }
        }
        Ok(Allowlist { pins })
    }

    /// The list written back under `header` (the lines of `#` comments it starts with).
    pub fn render(&self, header: &str) -> String {
        let mut out = header.to_owned();
        for (key, lines) in &self.pins {
            let _ = writeln!(out, "{lines} {key}");
        }
        out
    }
}

/// What the ratchet found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Ratchet {
    /// Over the limit and not listed.
    pub new: Vec<FnLength>,
    /// Listed, and longer than its pin.
    pub grown: Vec<(FnLength, usize)>,
    /// Listed, shorter than its pin but still over the limit: the pin must come down.
    pub shrunk: Vec<(FnLength, usize)>,
    /// Listed, and within the limit now or gone: the entry must go.
    pub stale: Vec<String>,
    /// The allowlist with every shrunk pin lowered and every stale entry removed (never with an
    /// entry added or raised).
    pub tightened: Allowlist,
}

impl Ratchet {
    /// Whether the code and the list agree.
    pub fn ok(&self) -> bool {
        self.new.is_empty()
            && self.grown.is_empty()
            && self.shrunk.is_empty()
            && self.stale.is_empty()
    }
}

/// Compare measured functions with the limit and the allowlist.
pub fn ratchet(found: &[FnLength], limit: usize, allow: &Allowlist) -> Ratchet {
    let mut r = Ratchet {
        tightened: allow.clone(),
        ..Ratchet::default()
    };
    let mut listed_seen = std::collections::BTreeSet::new();
    for f in found {
        match allow.pins.get(&f.key) {
            None if f.lines > limit => r.new.push(f.clone()),
            None => {}
            Some(&pin) => {
                listed_seen.insert(f.key.clone());
                if f.lines <= limit {
                    r.stale.push(f.key.clone());
                    r.tightened.pins.remove(&f.key);
                } else if f.lines > pin {
                    r.grown.push((f.clone(), pin));
                } else if f.lines < pin {
                    r.shrunk.push((f.clone(), pin));
                    r.tightened.pins.insert(f.key.clone(), f.lines);
                }
            }
        }
    }
    for key in allow.pins.keys() {
        if !listed_seen.contains(key) {
            r.stale.push(key.clone());
            r.tightened.pins.remove(key);
        }
    }
    debug_assert!(
        r.tightened.pins.len() <= allow.pins.len(),
        "the list never grows"
    );
    debug_assert!(
        r.tightened
            .pins
            .iter()
            .all(|(k, v)| allow.pins.get(k).is_some_and(|p| v <= p)),
        "no pin rises"
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    /// The functions of a crate written in memory (`src/lib.rs` is the root).
    fn measure_files(files: &[(&str, String)]) -> Vec<FnLength> {
        let src: BTreeMap<PathBuf, String> = files
            .iter()
            .map(|(p, t)| (PathBuf::from(p), t.clone()))
            .collect();
        let tree = ModuleTree::load(Path::new("src/lib.rs"), &src).unwrap();
        measure(&tree, &|p: &Path| p.display().to_string())
    }

    /// A function of `n` statement lines, with blank and comment lines that do not count.
    fn long_fn(name: &str, n: usize) -> String {
        let body: String = (0..n)
            .map(|i| format!("    let x{i} = {i};\n\n    // x{i}\n"))
            .collect();
        format!("pub fn {name}() {{\n{body}}}\n")
    }

    #[test]
    fn an_over_long_function_is_caught_and_may_only_shrink() {
        let limit = 70;
        let found = measure_files(&[
            ("src/lib.rs", format!("mod a;\n{}", long_fn("short", 70))),
            ("src/a.rs", long_fn("long", 71)),
        ]);
        let lines: Vec<(&str, usize)> = found.iter().map(|f| (f.key.as_str(), f.lines)).collect();
        assert_eq!(lines, [("src/lib.rs::short", 70), ("src/a.rs::long", 71)]);
        // Not listed: a new offender.
        let r = ratchet(&found, limit, &Allowlist::default());
        assert_eq!(
            r.new.iter().map(|f| f.key.as_str()).collect::<Vec<_>>(),
            ["src/a.rs::long"]
        );
        // Pinned at its length: fine; one line longer: it grew.
        let pinned = Allowlist::parse("71 src/a.rs::long").unwrap();
        assert!(ratchet(&found, limit, &pinned).ok());
        let grown = measure_files(&[
            ("src/lib.rs", "mod a;".into()),
            ("src/a.rs", long_fn("long", 72)),
        ]);
        assert_eq!(ratchet(&grown, limit, &pinned).grown.len(), 1);
    }

    #[test]
    fn keys_name_owners_and_test_code_is_not_measured() {
        let src = "pub struct T;\n\
                   impl T { pub fn m(&self) { fn inner() {} } }\n\
                   impl std::fmt::Display for T { fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result { Ok(()) } }\n\
                   pub trait Tr { fn d(&self) { } fn r(&self); }\n\
                   mod inline { pub fn g() {} }\n\
                   #[cfg(test)] mod tests { fn t() {} }\n\
                   #[test] fn t() {}\n\
                   impl T { #[cfg(test)] fn helper() {} }\n";
        let keys: Vec<String> = measure_files(&[("src/lib.rs", src.into())])
            .into_iter()
            .map(|f| f.key)
            .collect();
        assert_eq!(
            keys,
            [
                "src/lib.rs::T::m",
                "src/lib.rs::T::m::inner",
                "src/lib.rs::<T as Display>::fmt",
                "src/lib.rs::Tr::d",
                "src/lib.rs::inline::g",
            ]
        );
    }

    #[test]
    fn assertions_are_counted_by_name_wherever_they_stand() {
        let src = "pub fn f(x: u32) {\n\
                   assert!(x > 0);\n\
                   debug_assert_eq!(x, 1, \"one\");\n\
                   if x > 1 { std::debug_assert_ne!(x, 2); }\n\
                   let _v = vec![x];\n\
                   println!(\"assert!(x)\");\n\
                   }\n\
                   pub fn g() { assert_matches(); }\n\
                   fn assert_matches() {}\n";
        let found = measure_files(&[("src/lib.rs", src.into())]);
        let asserts: Vec<(&str, usize)> =
            found.iter().map(|f| (f.key.as_str(), f.asserts)).collect();
        assert_eq!(
            asserts,
            [
                ("src/lib.rs::f", 3),
                ("src/lib.rs::g", 0),
                ("src/lib.rs::assert_matches", 0)
            ]
        );
    }

    #[test]
    fn counts_lines_as_clippy_does() {
        assert_eq!(body_lines("{}", false), 0);
        assert_eq!(body_lines("{ x }", false), 1);
        let body = "{\n    let a = 1;\n\n    // note\n    /* block\n       still */ let b = 2;\n    /* only */\n    a + b // sum\n}";
        // `let a`, the line after the block comment closes, `a + b`.
        assert_eq!(body_lines(body, false), 3);
        // An async body: its two brace lines count too.
        assert_eq!(body_lines(body, true), 5);
    }

    #[test]
    fn allowlist_round_trips() {
        let a = Allowlist::parse("# head\n120 src/a.rs::f\n 90 src/b.rs::T::g\n").unwrap();
        assert_eq!(a.pins["src/b.rs::T::g"], 90);
        assert_eq!(Allowlist::parse(&a.render("# head\n")).unwrap(), a);
        assert!(Allowlist::parse("x src/a.rs::f").is_err());
        assert!(Allowlist::parse("1 a\n2 a").is_err());
    }

    #[test]
    fn the_ratchet_only_tightens() {
        let f = |key: &str, lines| FnLength {
            key: key.into(),
            lines,
            line: 1,
            json: false,
            asserts: 0,
        };
        let allow =
            Allowlist::parse("100 grew\n100 shrank\n100 fixed\n100 gone\n100 same").unwrap();
        let found = [
            f("grew", 101),
            f("shrank", 80),
            f("fixed", 70),
            f("same", 100),
            f("new", 71),
            f("short", 70),
        ];
        let r = ratchet(&found, 70, &allow);
        assert_eq!(r.new, vec![f("new", 71)]);
        assert_eq!(r.grown, vec![(f("grew", 101), 100)]);
        assert_eq!(r.shrunk, vec![(f("shrank", 80), 100)]);
        assert_eq!(r.stale, vec!["fixed".to_owned(), "gone".to_owned()]);
        let expect = Allowlist::parse("100 grew\n80 shrank\n100 same").unwrap();
        assert_eq!(r.tightened, expect);
        assert!(!r.ok());
    }
}
