//! The workspace as Cargo describes it (`cargo metadata --no-deps`): its packages, their targets
//! and the dependencies each manifest declares, renames and `workspace = true` resolved by Cargo
//! rather than by reading the manifests again.

use std::path::{Path, PathBuf};
use std::process::Command;

/// How a dependency is declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepKind {
    Normal,
    Dev,
    Build,
}

/// One declared dependency (the package's name, not a rename).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dep {
    pub name: String,
    pub kind: DepKind,
}

/// One target (`lib`, `bin`, `cdylib`, `custom-build`, `test`, ...).
#[derive(Debug, Clone)]
pub struct Target {
    pub name: String,
    pub kinds: Vec<String>,
    pub src_path: PathBuf,
}

impl Target {
    /// Whether it is shipped code (a library, binary or build script), as opposed to tests,
    /// examples and benchmarks.
    pub fn is_product(&self) -> bool {
        self.kinds.iter().any(|k| {
            matches!(
                k.as_str(),
                "lib"
                    | "rlib"
                    | "dylib"
                    | "cdylib"
                    | "staticlib"
                    | "proc-macro"
                    | "bin"
                    | "custom-build"
            )
        })
    }
}

#[derive(Debug, Clone)]
pub struct Package {
    pub name: String,
    pub targets: Vec<Target>,
    pub deps: Vec<Dep>,
}

#[derive(Debug, Clone)]
pub struct Workspace {
    pub root: PathBuf,
    pub packages: Vec<Package>,
}

impl Workspace {
    /// Ask Cargo (`$CARGO`, which `cargo test` sets, else `cargo`) about the workspace whose
    /// manifest is `manifest`.
    pub fn load(manifest: &Path) -> Result<Self, String> {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let out = Command::new(cargo)
            .args([
                "metadata",
                "--format-version",
                "1",
                "--no-deps",
                "--offline",
            ])
            .arg("--manifest-path")
            .arg(manifest)
            .output()
            .map_err(|e| format!("cargo metadata: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "cargo metadata failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata: {e}"))?;
        Self::from_metadata(&v)
    }

    /// Read `cargo metadata`'s JSON.
    pub fn from_metadata(v: &serde_json::Value) -> Result<Self, String> {
        let text = |v: &serde_json::Value, k: &str| -> Result<String, String> {
            v[k].as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("cargo metadata: no `{k}` in {v}"))
        };
        let root = PathBuf::from(text(v, "workspace_root")?);
        let mut packages = Vec::new();
        for p in v["packages"].as_array().into_iter().flatten() {
            let mut targets = Vec::new();
            for t in p["targets"].as_array().into_iter().flatten() {
                targets.push(Target {
                    name: text(t, "name")?,
                    kinds: t["kind"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|k| k.as_str().map(str::to_owned))
                        .collect(),
                    src_path: PathBuf::from(text(t, "src_path")?),
                });
            }
            let mut deps = Vec::new();
            for d in p["dependencies"].as_array().into_iter().flatten() {
                let kind = match d["kind"].as_str() {
                    None => DepKind::Normal,
                    Some("dev") => DepKind::Dev,
                    Some("build") => DepKind::Build,
                    Some(other) => return Err(format!("cargo metadata: dependency kind {other}")),
                };
                deps.push(Dep {
                    name: text(d, "name")?,
                    kind,
                });
            }
            packages.push(Package {
                name: text(p, "name")?,
                targets,
                deps,
            });
        }
        debug_assert!(
            packages
                .iter()
                .all(|p| p.targets.iter().all(|t| t.src_path.is_absolute())),
            "Cargo reports absolute source paths"
        );
        Ok(Workspace { root, packages })
    }

    pub fn package(&self, name: &str) -> Option<&Package> {
        self.packages.iter().find(|p| p.name == name)
    }

    /// `path` relative to the workspace root, with `/` separators (how keys and messages name a
    /// file on every platform).
    pub fn relative(&self, path: &Path) -> String {
        let rel = path.strip_prefix(&self.root).unwrap_or(path);
        rel.components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/")
    }
}
