//! A crate target's module tree as the compiler builds it: from the target's root file, every
//! `mod name;` found where rustc finds it (`name.rs`, `name/mod.rs`, or `#[path]`), every inline
//! `mod name { .. }`, parsed with `syn`. Code compiled only for tests (`#[cfg(test)]`, or a `cfg`
//! that requires `test`) is not part of the tree: its modules are not loaded and the checks skip
//! its items ([`is_test_only`]).
//!
//! Sources come from a [`Sources`]: the disk for the workspace, an in-memory map for the checks'
//! own fixtures, so both go through the same loader.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use syn::{Attribute, Item, Meta};

/// Where source files are read from.
pub trait Sources {
    /// The text of `path`, or `None` when there is no such file.
    fn read(&self, path: &Path) -> Option<String>;
}

/// The file system.
pub struct Disk;

impl Sources for Disk {
    fn read(&self, path: &Path) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }
}

/// Files held in memory (the checks' fixtures): path → text.
impl Sources for BTreeMap<PathBuf, String> {
    fn read(&self, path: &Path) -> Option<String> {
        self.get(path).cloned()
    }
}

/// One module: its path from the crate root (`[]` for the root), the file it is written in, and
/// its items (test-only modules are not loaded; the items still include the `mod` items of its
/// children, which walkers skip).
pub struct Module {
    pub path: Vec<String>,
    pub file: PathBuf,
    /// The whole text of `file` (spans index into it).
    pub text: Arc<str>,
    pub items: Vec<Item>,
    /// Names of the non-test child modules it declares.
    pub children: BTreeSet<String>,
}

impl Module {
    /// `a::b`, or `crate` for the root.
    pub fn name(&self) -> String {
        if self.path.is_empty() {
            "crate".to_owned()
        } else {
            self.path.join("::")
        }
    }
}

/// Every module of one target, the root first, parents before their children.
pub struct ModuleTree {
    pub modules: Vec<Module>,
}

/// Why a tree could not be loaded (a check must not pass over code it could not read).
#[derive(Debug)]
pub enum TreeError {
    Missing {
        module: String,
        tried: Vec<PathBuf>,
    },
    Parse {
        file: PathBuf,
        line: usize,
        message: String,
    },
}

impl std::fmt::Display for TreeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TreeError::Missing { module, tried } => {
                write!(f, "module `{module}` declared but none of {tried:?} exists")
            }
            TreeError::Parse {
                file,
                line,
                message,
            } => write!(f, "{}:{line}: cannot parse: {message}", file.display()),
        }
    }
}

impl std::error::Error for TreeError {}

impl ModuleTree {
    /// Load the tree whose root file is `root` (a `lib.rs`, `main.rs` or build script).
    pub fn load(root: &Path, sources: &dyn Sources) -> Result<Self, TreeError> {
        let text = read(root, "crate", sources)?;
        let items = parse(root, &text)?.items;
        let dir = root.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut tree = ModuleTree {
            modules: Vec::new(),
        };
        tree.add(Vec::new(), root.to_path_buf(), text, items, dir, sources)?;
        debug_assert!(tree.modules[0].path.is_empty(), "the root comes first");
        debug_assert!(
            tree.modules
                .iter()
                .all(|m| m.path.len() <= 1 || tree.index(&m.path[..m.path.len() - 1]).is_some()),
            "every module's parent is in the tree"
        );
        Ok(tree)
    }

    /// The index of the module at `path`.
    pub fn index(&self, path: &[String]) -> Option<usize> {
        self.modules.iter().position(|m| m.path == path)
    }

    /// Add a module and, depth first, its children. `dir` is where its `mod name;` files live.
    fn add(
        &mut self,
        path: Vec<String>,
        file: PathBuf,
        text: Arc<str>,
        items: Vec<Item>,
        dir: PathBuf,
        sources: &dyn Sources,
    ) -> Result<(), TreeError> {
        let mut kids = Vec::new();
        for item in &items {
            let Item::Mod(m) = item else { continue };
            if is_test_only(&m.attrs) {
                continue;
            }
            kids.push(m.clone());
        }
        self.modules.push(Module {
            path: path.clone(),
            file: file.clone(),
            text: text.clone(),
            items,
            children: kids.iter().map(|m| m.ident.to_string()).collect(),
        });
        for m in kids {
            let name = m.ident.to_string();
            let mut child = path.clone();
            child.push(name.clone());
            if let Some((_, content)) = m.content {
                // Inline: same file; its own `mod x;` children live in `dir/name/`.
                self.add(
                    child,
                    file.clone(),
                    text.clone(),
                    content,
                    dir.join(&name),
                    sources,
                )?;
                continue;
            }
            let (child_file, child_text) = find_file(&child, &m.attrs, &file, &dir, sources)?;
            let child_items = parse(&child_file, &child_text)?.items;
            let child_dir = child_dir(&child_file);
            self.add(
                child,
                child_file,
                child_text,
                child_items,
                child_dir,
                sources,
            )?;
        }
        Ok(())
    }
}

/// Where the `mod x;` children of the module written in `file` live: beside a `mod.rs` (or a file
/// named by `#[path]`, read as a `mod.rs`), else in the directory named after the file.
fn child_dir(file: &Path) -> PathBuf {
    let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
    match file.file_stem().and_then(|s| s.to_str()) {
        Some("mod") | None => dir,
        Some(stem) => dir.join(stem),
    }
}

/// The file of module `child` (declared in `parent_file`, whose children live in `dir`).
fn find_file(
    child: &[String],
    attrs: &[Attribute],
    parent_file: &Path,
    dir: &Path,
    sources: &dyn Sources,
) -> Result<(PathBuf, Arc<str>), TreeError> {
    let name = child.last().map(String::as_str).unwrap_or_default();
    let tried: Vec<PathBuf> = match path_attr(attrs) {
        Some(p) => vec![parent_file.parent().unwrap_or(Path::new("")).join(p)],
        None => vec![
            dir.join(format!("{name}.rs")),
            dir.join(name).join("mod.rs"),
        ],
    };
    for f in &tried {
        if let Some(text) = sources.read(f) {
            return Ok((f.clone(), text.into()));
        }
    }
    Err(TreeError::Missing {
        module: child.join("::"),
        tried,
    })
}

/// The value of a `#[path = "..."]` attribute.
fn path_attr(attrs: &[Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

fn read(file: &Path, module: &str, sources: &dyn Sources) -> Result<Arc<str>, TreeError> {
    sources
        .read(file)
        .map(Arc::from)
        .ok_or_else(|| TreeError::Missing {
            module: module.to_owned(),
            tried: vec![file.to_path_buf()],
        })
}

fn parse(file: &Path, text: &str) -> Result<syn::File, TreeError> {
    syn::parse_file(text).map_err(|e| TreeError::Parse {
        file: file.to_path_buf(),
        line: e.span().start().line,
        message: e.to_string(),
    })
}

/// Whether these attributes compile the item only for tests: a `cfg` predicate that cannot hold
/// without `test` (`test`, `all(.., test, ..)`, `any` of such), or `#[test]` itself.
pub fn is_test_only(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        if a.path().is_ident("test") {
            return true;
        }
        if !a.path().is_ident("cfg") {
            return false;
        }
        a.parse_args::<Meta>().is_ok_and(|m| requires_test(&m))
    })
}

/// Whether a `cfg` predicate is false outside test builds.
fn requires_test(m: &Meta) -> bool {
    match m {
        Meta::Path(p) => p.is_ident("test"),
        Meta::List(l) => {
            let Ok(args) = l.parse_args_with(
                syn::punctuated::Punctuated::<Meta, syn::Token![,]>::parse_terminated,
            ) else {
                return false;
            };
            if l.path.is_ident("all") {
                args.iter().any(requires_test)
            } else if l.path.is_ident("any") {
                !args.is_empty() && args.iter().all(requires_test)
            } else {
                // `not(..)` and anything else can hold without `test`.
                false
            }
        }
        Meta::NameValue(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(files: &[(&str, &str)]) -> BTreeMap<PathBuf, String> {
        files
            .iter()
            .map(|(p, t)| (PathBuf::from(p), (*t).to_owned()))
            .collect()
    }

    #[test]
    fn finds_files_inline_modules_and_skips_test_modules() {
        let src = fixture(&[
            ("src/lib.rs", "mod a; mod b { mod c; } #[cfg(test)] mod t;"),
            ("src/a/mod.rs", "pub mod d;"),
            ("src/a/d.rs", ""),
            ("src/b/c.rs", "#[cfg(all(test, unix))] mod u;"),
        ]);
        let tree = ModuleTree::load(Path::new("src/lib.rs"), &src).unwrap();
        let names: Vec<String> = tree.modules.iter().map(Module::name).collect();
        assert_eq!(names, ["crate", "a", "a::d", "b", "b::c"]);
        assert_eq!(tree.modules[4].file, PathBuf::from("src/b/c.rs"));
    }

    #[test]
    fn a_missing_module_file_is_an_error() {
        let src = fixture(&[("src/lib.rs", "mod gone;")]);
        let err = ModuleTree::load(Path::new("src/lib.rs"), &src)
            .err()
            .unwrap();
        assert!(err.to_string().contains("gone"), "{err}");
    }

    #[test]
    fn test_only_predicates() {
        let only = |s: &str| {
            let f: syn::File = syn::parse_str(&format!("{s} fn f() {{}}")).unwrap();
            let Item::Fn(f) = &f.items[0] else {
                unreachable!()
            };
            is_test_only(&f.attrs)
        };
        assert!(only("#[cfg(test)]"));
        assert!(only("#[test]"));
        assert!(only("#[cfg(all(test, feature = \"x\"))]"));
        assert!(only("#[cfg(any(test, all(test, unix)))]"));
        assert!(!only("#[cfg(any(test, feature = \"x\"))]"));
        assert!(!only("#[cfg(not(test))]"));
        assert!(!only("#[inline]"));
    }
}
