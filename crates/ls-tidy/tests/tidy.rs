//! The structure checks over this workspace. The fixtures that show each check catches what it
//! claims are the unit tests beside the checks (`src/cycles.rs`, `src/deps.rs`,
//! `src/fn_length.rs`).

use ls_tidy::fn_length::{ratchet, Allowlist};
use ls_tidy::workspace::Workspace;
use ls_tidy::{
    deps, fn_lengths, json_sigs, module_cycles, product_trees, ASSERTION_DENSITY_FLOOR_PERMILLE,
    FN_LENGTH_ALLOWLIST, FN_LENGTH_LIMIT, JSON_DOMAIN_ALLOWLIST, JSON_DOMAIN_CEILING,
    JSON_DOMAIN_GOAL, JSON_EDGES, NON_TRIVIAL_FN_LINES,
};
use std::path::Path;
use std::sync::LazyLock;

static WORKSPACE: LazyLock<Workspace> = LazyLock::new(|| {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    Workspace::load(&manifest).expect("cargo metadata of the workspace")
});

#[test]
fn no_module_cycle_in_any_crate() {
    let trees = product_trees(&WORKSPACE).unwrap();
    // The check covers the code it claims to: every package's library and binaries.
    assert!(trees.iter().any(|(n, _)| n == "ls-agents/ls_agents"));
    assert!(trees.iter().any(|(n, _)| n == "ledgershield/ledgershield"));
    let modules: usize = trees.iter().map(|(_, t)| t.modules.len()).sum();
    assert!(modules > 150, "only {modules} modules found");
    let cycles = module_cycles(&WORKSPACE, &trees);
    assert!(cycles.is_empty(), "{}", cycles.join("\n"));
}

#[test]
fn crate_dependencies_point_one_way() {
    let bad = deps::violations(&WORKSPACE, deps::RULES);
    assert!(
        bad.is_empty(),
        "forbidden crate dependencies:\n{}",
        bad.join("\n")
    );
}

/// Functions over the limit must be listed, and may only shrink. With `LS_TIDY_BLESS=1` the test
/// lowers the pins of functions that shrank and drops entries that are within the limit (it
/// never adds an entry or raises a pin), then passes.
#[test]
fn functions_stay_short() {
    let trees = product_trees(&WORKSPACE).unwrap();
    let found = fn_lengths(&WORKSPACE, &trees);
    assert!(
        found.len() > 1000,
        "only {} functions measured",
        found.len()
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(FN_LENGTH_ALLOWLIST);
    let text = std::fs::read_to_string(&path).unwrap();
    let allow = Allowlist::parse(&text).unwrap();
    let r = ratchet(&found, FN_LENGTH_LIMIT, &allow);
    let mut msg = Vec::new();
    for f in &r.new {
        msg.push(format!(
            "NEW      {} has {} lines (line {}; the limit is {FN_LENGTH_LIMIT}): split it",
            f.key, f.lines, f.line
        ));
    }
    for (f, pin) in &r.grown {
        msg.push(format!(
            "GREW     {} has {} lines, pinned at {pin}: shrink it",
            f.key, f.lines
        ));
    }
    for (f, pin) in &r.shrunk {
        msg.push(format!(
            "SHRANK   {} has {} lines, pinned at {pin}: lower the pin",
            f.key, f.lines
        ));
    }
    for k in &r.stale {
        msg.push(format!(
            "FIXED    {k} is within the limit or gone: remove it from the list"
        ));
    }
    if std::env::var_os("LS_TIDY_BLESS").is_some() && r.new.is_empty() && r.grown.is_empty() {
        let header: String = text
            .lines()
            .take_while(|l| l.starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(&path, r.tightened.render(&header)).unwrap();
        return;
    }
    assert!(
        r.ok(),
        "{}\n(`LS_TIDY_BLESS=1 cargo test -p ls-tidy --test tidy` updates the list for functions that shrank)",
        msg.join("\n")
    );
}

/// Every function with `serde_json::Value`/`Map` in its signature is at a declared edge or in the
/// domain allowlist (which only shrinks and stays within the budget); `LS_TIDY_LIST=1` prints
/// them all.
#[test]
fn untyped_json_stays_at_the_edges() {
    let trees = product_trees(&WORKSPACE).unwrap();
    let found = fn_lengths(&WORKSPACE, &trees);
    let read = |f: &str| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(f);
        json_sigs::parse_list(&std::fs::read_to_string(&path).unwrap()).unwrap()
    };
    let edges = read(JSON_EDGES);
    let allow = read(JSON_DOMAIN_ALLOWLIST);
    let json_fns = found.iter().filter(|f| f.json).map(|f| f.key.as_str());
    let r = json_sigs::classify(json_fns, &edges, &allow);
    if std::env::var_os("LS_TIDY_LIST").is_some() {
        for (e, n) in &r.at_edges {
            println!("EDGE {n:3} {e}");
        }
        for k in r.domain.iter().chain(&r.unlisted) {
            println!("DOMAIN  {k}");
        }
    }
    let json = found.iter().filter(|f| f.json).count();
    assert!(json > 100, "only {json} JSON signatures seen");
    let mut msg: Vec<String> = r
        .unlisted
        .iter()
        .map(|k| {
            format!(
                "NEW      {k} takes or returns JSON in the domain: type it, or move it to an edge"
            )
        })
        .collect();
    msg.extend(
        r.stale
            .iter()
            .map(|k| format!("STALE    {k}: remove it from the list")),
    );
    assert!(r.ok(), "{}", msg.join("\n"));
    assert!(
        allow.len() <= JSON_DOMAIN_CEILING,
        "{} domain functions take or return JSON; the ceiling is {JSON_DOMAIN_CEILING} (the goal {JSON_DOMAIN_GOAL})",
        allow.len()
    );
    if allow.len() < JSON_DOMAIN_CEILING {
        eprintln!(
            "the domain allowlist has {} entries: lower JSON_DOMAIN_CEILING ({JSON_DOMAIN_CEILING}) to it",
            allow.len()
        );
    }
}

/// Assertions per non-trivial function (at least `NON_TRIVIAL_FN_LINES` lines) do not fall below
/// the floor; `LS_TIDY_LIST=1` prints the density per crate.
#[test]
fn assertions_do_not_thin_out() {
    let trees = product_trees(&WORKSPACE).unwrap();
    let found = fn_lengths(&WORKSPACE, &trees);
    let big: Vec<_> = found
        .iter()
        .filter(|f| f.lines >= NON_TRIVIAL_FN_LINES)
        .collect();
    assert!(big.len() > 500, "only {} non-trivial functions", big.len());
    let asserts: usize = big.iter().map(|f| f.asserts).sum();
    let with_one = big.iter().filter(|f| f.asserts > 0).count();
    let permille = asserts * 1000 / big.len();
    if std::env::var_os("LS_TIDY_LIST").is_some() {
        let mut by_crate: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
        for f in &big {
            let krate = f.key.split('/').nth(1).unwrap_or("?");
            let e = by_crate.entry(krate).or_default();
            e.0 += 1;
            e.1 += f.asserts;
        }
        for (k, (n, a)) in by_crate {
            println!(
                "ASSERT {k}: {a} in {n} functions ({:.3} each)",
                a as f64 / n as f64
            );
        }
        println!(
            "ASSERT all: {asserts} in {} non-trivial functions ({permille} per 1000; {with_one} with one or more)",
            big.len()
        );
    }
    assert!(
        permille >= ASSERTION_DENSITY_FLOOR_PERMILLE,
        "{permille} assertions per 1000 non-trivial functions, below the floor {ASSERTION_DENSITY_FLOOR_PERMILLE}"
    );
}
