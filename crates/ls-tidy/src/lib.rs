//! LedgerShield's structure checks, as tests over the workspace's own sources (in the manner of
//! rust-analyzer's `tidy` tests): `cargo test -p ls-tidy` (and so `cargo test --workspace`) fails
//! on
//!
//! * a module cycle in any crate ([`cycles`]): sources parsed with `syn`, so strings, comments
//!   and macros are read as the compiler reads them;
//! * a crate dependency against the direction ARCHITECTURE.md states ([`deps::RULES`], read from
//!   `cargo metadata`);
//! * a function body longer than [`FN_LENGTH_LIMIT`] lines that is not in the allowlist, or one
//!   in it that grew ([`fn_length`]);
//! * a function with untyped JSON (`serde_json::Value`/`Map`) in its signature outside a declared
//!   edge and not in the shrinking domain allowlist, or a domain allowlist longer than
//!   [`JSON_DOMAIN_CEILING`] ([`json_sigs`]);
//! * assertions thinning out: `assert!`-family invocations per non-trivial function below
//!   [`ASSERTION_DENSITY_FLOOR_PERMILLE`] ([`fn_length::assertions`]).
//!
//! Each check has fixtures beside it (small sources built in memory or on disk) that show it
//! catches what it claims. The crate is dev-only: nothing depends on it, so it costs the shipped
//! binaries nothing.

pub mod cycles;
pub mod deps;
pub mod fn_length;
pub mod json_sigs;
pub mod modtree;
pub mod workspace;

use modtree::{Disk, ModuleTree};
use std::path::Path;
use workspace::Workspace;

/// The most lines a function body may have unless the allowlist pins it (the ratchet's goal is
/// 70; see `fn_length_allowlist.txt`).
pub const FN_LENGTH_LIMIT: usize = 70;

/// The allowlist file of functions over [`FN_LENGTH_LIMIT`], relative to this crate.
pub const FN_LENGTH_ALLOWLIST: &str = "fn_length_allowlist.txt";

/// The edge prefixes where JSON in a signature is the protocol (`json_sigs`), relative to this
/// crate.
pub const JSON_EDGES: &str = "json_edges.txt";

/// The domain functions that still take or return JSON, each with why, relative to this crate.
pub const JSON_DOMAIN_ALLOWLIST: &str = "json_domain_allowlist.txt";

/// The most domain (non-edge) functions with JSON in their signature: the length of the domain
/// allowlist, which only comes down (lower this with it).
pub const JSON_DOMAIN_CEILING: usize = 4;

/// Where [`JSON_DOMAIN_CEILING`] is headed.
pub const JSON_DOMAIN_GOAL: usize = 10;

/// A function this long or longer is "non-trivial" for the assertion density.
pub const NON_TRIVIAL_FN_LINES: usize = 10;

/// The least assertions per non-trivial function, in thousandths: a floor that only rises (raise it
/// as assertions are added; TigerStyle's direction is two per function, 2,000).
pub const ASSERTION_DENSITY_FLOOR_PERMILLE: usize = 66;

/// The module tree of every shipped target (libraries, binaries, build scripts) of every
/// workspace package: `(package/target, tree)`.
pub fn product_trees(ws: &Workspace) -> Result<Vec<(String, ModuleTree)>, String> {
    let mut out = Vec::new();
    for p in &ws.packages {
        for t in p.targets.iter().filter(|t| t.is_product()) {
            let tree = ModuleTree::load(&t.src_path, &Disk)
                .map_err(|e| format!("{}/{}: {e}", p.name, t.name))?;
            out.push((format!("{}/{}", p.name, t.name), tree));
        }
    }
    Ok(out)
}

/// Every module cycle of every shipped target, described with the edges that make it.
pub fn module_cycles(ws: &Workspace, trees: &[(String, ModuleTree)]) -> Vec<String> {
    let rel = |p: &Path| ws.relative(p);
    let mut out = Vec::new();
    for (name, tree) in trees {
        for c in cycles::ModuleGraph::new(tree, &rel).cycles() {
            out.push(format!("{name}: {c}"));
        }
    }
    out
}

/// Every non-test function of the shipped targets, keyed by workspace-relative file.
pub fn fn_lengths(ws: &Workspace, trees: &[(String, ModuleTree)]) -> Vec<fn_length::FnLength> {
    let rel = |p: &Path| ws.relative(p);
    let mut out: Vec<fn_length::FnLength> = trees
        .iter()
        .flat_map(|(_, t)| fn_length::measure(t, &rel))
        .collect();
    // A file in two targets' trees (a binary that includes the library's module) once.
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out.dedup_by(|a, b| a.key == b.key);
    out
}
