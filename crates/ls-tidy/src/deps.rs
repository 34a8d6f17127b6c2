//! The direction of crate dependencies: the rules ARCHITECTURE.md states, as data ([`RULES`]).
//!
//! A crate *reaches* what it declares (normal, dev or build dependencies) and, through each
//! workspace crate it reaches, that crate's normal and build dependencies, transitively. A rule
//! names crates a crate must never reach (workspace or external), or the only workspace crates it
//! may reach. External crates are seen where a workspace crate declares them: a library outside
//! the workspace that pulls in an HTTP stack on its own is not followed.

use crate::workspace::{DepKind, Workspace};
use std::collections::{BTreeMap, BTreeSet};

/// What a crate may reach.
#[derive(Debug, Clone, Copy)]
pub enum Limit {
    /// None of these crates, workspace or external.
    Never(&'static [&'static str]),
    /// Of the workspace's crates, only these.
    OnlyWorkspace(&'static [&'static str]),
}

/// One rule: the crates it governs, their limit, and why.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    pub crates: &'static [&'static str],
    pub limit: Limit,
    /// Workspace crates the governed crates may declare as direct dev-dependencies only (test
    /// fixtures: generated cases for a property test), whatever the limit; never at runtime.
    pub test_fixtures: &'static [&'static str],
    pub why: &'static str,
}

/// The crates that make up the domain: pure libraries, no protocol.
const DOMAIN: &[&str] = &[
    "ls-core",
    "ls-grading",
    "ls-env",
    "ls-gen",
    "audit-env",
    "ls-json",
];

/// The crates whose types are HTTP's or a socket's.
const HTTP: &[&str] = &[
    "axum",
    "hyper",
    "hyper-util",
    "http",
    "http-body-util",
    "tower",
    "tower-http",
    "reqwest",
    "tokio-tungstenite",
];

/// The workspace's dependency rules (ARCHITECTURE.md, "Structure checks").
pub const RULES: &[Rule] = &[
    Rule {
        crates: &["ls-server"],
        limit: Limit::Never(&["ls-report", "ls-store", "ls-agents", "ls-ui", "ls-product"]),
        test_fixtures: &[],
        why: "the protocol layer knows no reports, stores, agents or workbench: those routes are \
              ls-product's, over ls-server",
    },
    Rule {
        crates: &["ls-core", "ls-json"],
        limit: Limit::OnlyWorkspace(&[]),
        test_fixtures: &[],
        why: "the vocabulary and the JSON writer sit at the bottom",
    },
    Rule {
        crates: &["ls-grading"],
        limit: Limit::OnlyWorkspace(&["ls-core"]),
        test_fixtures: &[],
        why: "grading is pure judgement over the vocabulary: it knows no episodes",
    },
    Rule {
        crates: &["ls-env"],
        limit: Limit::OnlyWorkspace(&["ls-core", "ls-grading", "ls-json"]),
        test_fixtures: &["ls-gen"],
        why: "the episode loop knows no sessions, sockets, agents or reports",
    },
    Rule {
        crates: DOMAIN,
        limit: Limit::Never(HTTP),
        test_fixtures: &[],
        why: "domain crates hold no HTTP types",
    },
];

/// Every crate `name` reaches, with how: `(crate, via)`, `via` being the direct dependency it
/// was reached through (itself for a direct one).
pub fn reach(ws: &Workspace, name: &str) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    let Some(pkg) = ws.package(name) else {
        return out;
    };
    let mut todo: Vec<(String, String)> = pkg
        .deps
        .iter()
        .map(|d| (d.name.clone(), d.name.clone()))
        .collect();
    while let Some((dep, via)) = todo.pop() {
        if out.contains_key(&dep) || dep == name {
            continue;
        }
        out.insert(dep.clone(), via.clone());
        if let Some(p) = ws.package(&dep) {
            let next = p.deps.iter().filter(|d| d.kind != DepKind::Dev);
            todo.extend(next.map(|d| (d.name.clone(), via.clone())));
        }
    }
    debug_assert!(!out.contains_key(name), "a crate does not reach itself");
    out
}

/// Each broken rule: `crate -> dependency (through via): why`.
pub fn violations(ws: &Workspace, rules: &[Rule]) -> Vec<String> {
    let members: BTreeSet<&str> = ws.packages.iter().map(|p| p.name.as_str()).collect();
    let mut out = Vec::new();
    for rule in rules {
        for &name in rule.crates {
            let fixture = |via: &str| {
                rule.test_fixtures.contains(&via)
                    && ws.package(name).is_some_and(|p| {
                        p.deps
                            .iter()
                            .filter(|d| d.name == via)
                            .all(|d| d.kind == DepKind::Dev)
                    })
            };
            if !members.contains(name) {
                out.push(format!(
                    "{name}: a rule names a crate the workspace does not have"
                ));
                continue;
            }
            for (dep, via) in reach(ws, name) {
                let broken = match rule.limit {
                    Limit::Never(banned) => banned.contains(&dep.as_str()),
                    Limit::OnlyWorkspace(allowed) => {
                        members.contains(dep.as_str()) && !allowed.contains(&dep.as_str())
                    }
                };
                if broken && !fixture(&via) {
                    let how = if via == dep {
                        "directly".to_owned()
                    } else {
                        format!("through {via}")
                    };
                    out.push(format!("{name} -> {dep} ({how}): {}", rule.why));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    /// A workspace with the five crates `ls-server`'s rule names (no dependencies) and `crates`.
    fn server_workspace(name: &str, crates: &[(&str, &str)]) -> Workspace {
        let banned = ["ls-report", "ls-store", "ls-agents", "ls-ui", "ls-product"];
        let mut all: Vec<(&str, &str)> = crates.to_vec();
        all.extend(banned.map(|c| (c, "")));
        workspace(name, &all)
    }

    /// A workspace on disk: `(crate, manifest lines after [package])`, each with an empty
    /// library, read back through `cargo metadata` as the real one is.
    fn workspace(name: &str, crates: &[(&str, &str)]) -> Workspace {
        let dir = std::env::temp_dir().join(format!("ls-tidy-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let members: Vec<String> = crates.iter().map(|(c, _)| format!("\"{c}\"")).collect();
        write(
            &dir.join("Cargo.toml"),
            &format!(
                "[workspace]\nresolver = \"2\"\nmembers = [{}]\n",
                members.join(", ")
            ),
        );
        for (c, deps) in crates {
            let manifest = format!(
                "[package]\nname = \"{c}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n{deps}\n"
            );
            write(&dir.join(c).join("Cargo.toml"), &manifest);
            write(&dir.join(c).join("src/lib.rs"), "");
        }
        let ws = Workspace::load(&dir.join("Cargo.toml")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        ws
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap_or(&PathBuf::new())).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn a_forbidden_dependency_is_caught_directly_or_through_another_crate() {
        let rules = &RULES[..1]; // ls-server reaches none of report, store, agents, ui, product
        let ws = server_workspace(
            "through",
            &[
                ("ls-server", "[dependencies]\nmid = { path = \"../mid\" }"),
                (
                    "mid",
                    "[dependencies]\nls-report = { path = \"../ls-report\" }",
                ),
            ],
        );
        let bad = violations(&ws, rules);
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert!(
            bad[0].starts_with("ls-server -> ls-report (through mid)"),
            "{bad:?}"
        );

        // A direct dev-dependency counts; a dev-dependency of a crate it reaches does not.
        let ws = server_workspace(
            "dev",
            &[
                ("ls-server", "[dependencies]\nmid = { path = \"../mid\" }\n[dev-dependencies]\nstore = { package = \"ls-store\", path = \"../ls-store\" }"),
                ("mid", "[dev-dependencies]\nls-report = { path = \"../ls-report\" }"),
            ],
        );
        let bad = violations(&ws, rules);
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert!(
            bad[0].starts_with("ls-server -> ls-store (directly)"),
            "{bad:?}"
        );
    }

    #[test]
    fn only_the_listed_workspace_crates_and_no_http_crate() {
        let rules = [
            Rule {
                crates: &["core"],
                limit: Limit::OnlyWorkspace(&[]),
                test_fixtures: &[],
                why: "bottom",
            },
            Rule {
                crates: &["env"],
                limit: Limit::Never(HTTP),
                test_fixtures: &[],
                why: "domain",
            },
        ];
        let ws = workspace(
            "only",
            &[
                ("core", "[build-dependencies]\nenv = { path = \"../env\" }"),
                (
                    "env",
                    "[dependencies]\nhttp-edge = { path = \"../http-edge\" }",
                ),
                ("http-edge", "[dependencies]\naxum = \"0.8\""),
            ],
        );
        let bad = violations(&ws, &rules);
        assert_eq!(
            bad,
            [
                "core -> env (directly): bottom",
                "core -> http-edge (through env): bottom",
                "env -> axum (through http-edge): domain",
            ]
        );
        // A rule naming a crate the workspace lacks is itself an error, not a pass.
        let missing = [Rule {
            crates: &["gone"],
            limit: Limit::Never(&[]),
            test_fixtures: &[],
            why: "",
        }];
        assert_eq!(violations(&ws, &missing).len(), 1);
    }

    /// A test fixture crate is allowed as a direct dev-dependency only: the same crate as a
    /// normal dependency, or a crate it reaches at runtime, still breaks the rule.
    #[test]
    fn a_test_fixture_is_allowed_as_a_dev_dependency_only() {
        let rules = [Rule {
            crates: &["env"],
            limit: Limit::OnlyWorkspace(&["core"]),
            test_fixtures: &["gen"],
            why: "loop",
        }];
        let dev = workspace(
            "fixture-dev",
            &[
                ("core", ""),
                ("gen", "[dependencies]\ncore = { path = \"../core\" }"),
                (
                    "env",
                    "[dependencies]\ncore = { path = \"../core\" }\n[dev-dependencies]\ngen = { path = \"../gen\" }",
                ),
            ],
        );
        assert!(
            violations(&dev, &rules).is_empty(),
            "{:?}",
            violations(&dev, &rules)
        );
        let normal = workspace(
            "fixture-normal",
            &[
                ("core", ""),
                ("gen", ""),
                ("env", "[dependencies]\ngen = { path = \"../gen\" }"),
            ],
        );
        assert_eq!(violations(&normal, &rules), ["env -> gen (directly): loop"]);
    }
}
