//! Embeds the curated fixture files (`fixtures/controlbench`) into the binary so the server runs
//! with no setup. Every `cases/*.json` file is included in file-name order.

use std::{env, fs, path::PathBuf};

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let root = manifest
        .join("../../fixtures/controlbench")
        .canonicalize()
        .expect("fixtures/controlbench exists");
    println!("cargo:rerun-if-changed={}", root.display());
    let cases_dir = root.join("cases");
    println!("cargo:rerun-if-changed={}", cases_dir.display());
    let mut case_files: Vec<PathBuf> = fs::read_dir(&cases_dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect()
        })
        .unwrap_or_default();
    case_files.sort();
    let mut out = String::from("/// Curated case files embedded at build time: (file name, JSON text).\npub const EMBEDDED_CASES: &[(&str, &str)] = &[\n");
    for p in &case_files {
        println!("cargo:rerun-if-changed={}", p.display());
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        out.push_str(&format!(
            "    ({name:?}, include_str!({:?})),\n",
            p.display().to_string()
        ));
    }
    out.push_str("];\n");
    for f in [
        "vendors",
        "vendor_history",
        "po_records",
        "receipts",
        "ledger_index",
        "email_threads",
        "policy_rules",
    ] {
        let p = root.join(format!("{f}.json"));
        println!("cargo:rerun-if-changed={}", p.display());
        let konst = f.to_uppercase();
        if p.exists() {
            out.push_str(&format!(
                "pub const EMBEDDED_{konst}: &str = include_str!({:?});\n",
                p.display().to_string()
            ));
        } else {
            out.push_str(&format!("pub const EMBEDDED_{konst}: &str = \"[]\";\n"));
        }
    }
    let dest = PathBuf::from(env::var("OUT_DIR").expect("out dir")).join("embedded_fixtures.rs");
    fs::write(dest, out).expect("write embedded fixture list");
}
