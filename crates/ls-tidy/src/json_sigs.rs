//! Untyped JSON in signatures: which functions take or return `serde_json`'s `Value` or `Map`,
//! and whether each one is at an edge that speaks JSON or in the domain.
//!
//! JSON belongs at the protocol edge (HTTP bodies, the OpenEnv and MCP replies, Python objects,
//! the wire form of an observation, files on disk); the domain computes on types. Two files in
//! this crate say which is which:
//!
//! * `json_edges.txt`: path prefixes (a crate, a folder or a file) whose functions are edges,
//!   each with the reason it speaks JSON. A prefix that no longer holds a JSON signature is
//!   stale and must go.
//! * `json_domain_allowlist.txt`: every other function with JSON in its signature, by the same
//!   key as the function-length list, each with why it is not typed yet. The list only shrinks,
//!   and its length is held under [`crate::JSON_DOMAIN_CEILING`].
//!
//! A signature "names JSON" when any type in its parameters, return type or generic bounds has a
//! path whose last segment is `Value` or `Map` ([`names_json`]): `serde_json::Value`, an
//! imported `Value`, `Map<String, Value>`, `impl From<Value>`. `BTreeMap`, `HashMap` and
//! associated-type bindings (`Strategy<Value = T>`) are not JSON and are not counted.

use std::collections::{BTreeMap, BTreeSet};
use syn::visit::Visit;

/// Whether `sig` names `Value` or `Map` anywhere in its types.
pub fn names_json(sig: &syn::Signature) -> bool {
    struct Finder(bool);
    impl<'ast> Visit<'ast> for Finder {
        fn visit_path(&mut self, p: &'ast syn::Path) {
            if p.segments
                .last()
                .is_some_and(|s| s.ident == "Value" || s.ident == "Map")
            {
                self.0 = true;
            }
            syn::visit::visit_path(self, p);
        }
    }
    let mut f = Finder(false);
    f.visit_signature(sig);
    f.0
}

/// One line of either list: a key (a path prefix, or a function key) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reasoned {
    pub key: String,
    pub why: String,
}

/// Parse `KEY  why...` lines (`#` starts a comment line). Every entry must say why.
pub fn parse_list(text: &str) -> Result<Vec<Reasoned>, String> {
    let mut out: Vec<Reasoned> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // The key ends at the first space outside `<..>` (`<T as Trait>::f` is one key).
        let mut depth = 0i32;
        let end = line
            .char_indices()
            .find(|&(_, c)| {
                depth += i32::from(c == '<') - i32::from(c == '>');
                c.is_whitespace() && depth == 0
            })
            .map_or(line.len(), |(i, _)| i);
        let (key, why) = (&line[..end], line[end..].trim());
        if why.is_empty() {
            return Err(format!("line {}: `{key}` says no reason", n + 1));
        }
        if out.iter().any(|r| r.key == key) {
            return Err(format!("line {}: `{key}` listed twice", n + 1));
        }
        out.push(Reasoned {
            key: key.to_owned(),
            why: why.to_owned(),
        });
    }
    Ok(out)
}

/// What the check found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct JsonReport {
    /// JSON signatures under an edge prefix, by prefix.
    pub at_edges: BTreeMap<String, usize>,
    /// JSON signatures in the domain and listed (the allowlist's live entries).
    pub domain: Vec<String>,
    /// JSON signatures in the domain that the allowlist does not name.
    pub unlisted: Vec<String>,
    /// Allowlist entries that are gone or no longer name JSON, and edge prefixes that hold none.
    pub stale: Vec<String>,
}

impl JsonReport {
    /// Whether code and lists agree.
    pub fn ok(&self) -> bool {
        self.unlisted.is_empty() && self.stale.is_empty()
    }
}

/// Classify the keys of the functions with JSON in their signature (`FnLength::json`) by the
/// edge prefixes and the domain allowlist.
pub fn classify<'k>(
    json_fns: impl IntoIterator<Item = &'k str>,
    edges: &[Reasoned],
    allow: &[Reasoned],
) -> JsonReport {
    let mut r = JsonReport::default();
    let listed: BTreeSet<&str> = allow.iter().map(|a| a.key.as_str()).collect();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for key in json_fns {
        // The longest matching prefix owns it (a file listed under a crate that is not).
        let edge = edges
            .iter()
            .filter(|e| key.starts_with(&e.key))
            .max_by_key(|e| e.key.len());
        match edge {
            Some(e) => *r.at_edges.entry(e.key.clone()).or_default() += 1,
            None if listed.contains(key) => {
                seen.insert(key);
                r.domain.push(key.to_owned());
            }
            None => r.unlisted.push(key.to_owned()),
        }
    }
    for a in allow {
        if !seen.contains(a.key.as_str()) {
            r.stale.push(format!("allowlist: {}", a.key));
        }
    }
    for e in edges {
        if !r.at_edges.contains_key(&e.key) {
            r.stale.push(format!("edge: {}", e.key));
        }
    }
    debug_assert!(
        r.domain.len() <= allow.len(),
        "only listed functions are domain"
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fn_length::{measure, FnLength};
    use crate::modtree::ModuleTree;
    use std::path::{Path, PathBuf};

    fn found(src: &str) -> Vec<FnLength> {
        let disk = BTreeMap::from([(PathBuf::from("src/lib.rs"), src.to_owned())]);
        let tree = ModuleTree::load(Path::new("src/lib.rs"), &disk).unwrap();
        measure(&tree, &|p| p.display().to_string())
    }

    #[test]
    fn json_in_any_part_of_a_signature_is_seen_and_look_alikes_are_not() {
        let f = found(
            "use serde_json::{Map, Value};\n\
             pub fn takes(v: &Value) {}\n\
             pub fn returns() -> Option<serde_json::Value> { None }\n\
             pub fn map(o: &Map<String, Value>) {}\n\
             pub fn bound<T: From<Value>>(t: T) {}\n\
             pub fn typed(m: &std::collections::BTreeMap<String, f64>) {}\n\
             pub fn assoc() -> impl Iterator<Item = u8> { std::iter::empty() }\n\
             pub fn body_only() { let _v: Value = Value::Null; }\n\
             #[cfg(test)] mod tests { fn t(v: serde_json::Value) {} }\n",
        );
        let json: Vec<&str> = f
            .iter()
            .filter(|f| f.json)
            .map(|f| f.key.as_str())
            .collect();
        assert_eq!(
            json,
            [
                "src/lib.rs::takes",
                "src/lib.rs::returns",
                "src/lib.rs::map",
                "src/lib.rs::bound"
            ]
        );
    }

    #[test]
    fn an_unlisted_domain_signature_and_stale_entries_are_caught() {
        let f = found(
            "pub mod edge { pub fn reply() -> serde_json::Value { serde_json::Value::Null } }\n\
             pub fn listed(v: &serde_json::Value) {}\n\
             pub fn new_one(v: serde_json::Map<String, serde_json::Value>) {}\n",
        );
        // An inline module's functions are keyed under its file; an edge prefix is a key prefix.
        let edges =
            parse_list("src/lib.rs::edge:: the reply is JSON on the wire\nsrc/gone.rs stale")
                .unwrap();
        let allow =
            parse_list("src/lib.rs::listed not typed yet\nsrc/lib.rs::removed was here").unwrap();
        let json = f.iter().filter(|f| f.json).map(|f| f.key.as_str());
        let r = classify(json, &edges, &allow);
        assert_eq!(r.at_edges.get("src/lib.rs::edge::"), Some(&1));
        assert_eq!(r.domain, ["src/lib.rs::listed"]);
        assert_eq!(r.unlisted, ["src/lib.rs::new_one"]);
        assert_eq!(
            r.stale,
            ["allowlist: src/lib.rs::removed", "edge: src/gone.rs"]
        );
        assert!(!r.ok());
    }

    #[test]
    fn every_entry_must_say_why() {
        assert!(parse_list("crates/x/src/a.rs").is_err());
        assert!(parse_list("a why\na again").is_err());
        // A trait impl's key has spaces inside its angle brackets.
        assert_eq!(
            parse_list("src/a.rs::<T as From>::from why").unwrap()[0].key,
            "src/a.rs::<T as From>::from"
        );
        assert_eq!(
            parse_list("# c\n\ncrates/x/ the HTTP edge").unwrap(),
            [Reasoned {
                key: "crates/x/".into(),
                why: "the HTTP edge".into()
            }]
        );
    }
}
