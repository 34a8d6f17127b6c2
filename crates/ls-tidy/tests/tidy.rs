//! The structure checks over this workspace. The fixtures that show each check catches what it
//! claims are the unit tests beside the checks (`src/cycles.rs`, `src/deps.rs`,
//! `src/fn_length.rs`).

use ls_tidy::fn_length::{ratchet, Allowlist};
use ls_tidy::workspace::Workspace;
use ls_tidy::{
    deps, fn_lengths, module_cycles, product_trees, FN_LENGTH_ALLOWLIST, FN_LENGTH_LIMIT,
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
