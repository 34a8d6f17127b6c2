//! The fixture set: cases plus the AP master data, embedded at build time or loaded from a
//! directory with the same layout (`cases/*.json`, `vendors.json`, `vendor_history.json`,
//! `po_records.json`, `receipts.json`, `ledger_index.json`, `email_threads.json`,
//! `policy_rules.json`).

use crate::schema::*;
use std::collections::BTreeMap;
use std::path::Path;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded_fixtures.rs"));
}

/// Upper bound on cases in one fixture set (curated + generated pools stay far below it).
pub const MAX_CASES: usize = 200_000;

#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid JSON in {path}: {source}")]
    Json {
        path: String,
        source: serde_json::Error,
    },
    #[error("duplicate case id {0}")]
    DuplicateCase(String),
    #[error("too many cases: {0} (limit {MAX_CASES})")]
    TooMany(usize),
}

/// Shared AP master data the tools read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MasterData {
    pub vendors: Vec<Vendor>,
    pub vendor_history: Vec<VendorHistoryRow>,
    pub po_records: Vec<PoRecord>,
    pub receipts: Vec<Receipt>,
    pub ledger_index: Vec<LedgerRow>,
    pub email_threads: Vec<EmailThread>,
    pub policy_rules: Vec<PolicyRule>,
}

/// The master data one case sees: the shared lists, each replaced by the case's override if set.
#[derive(Debug, Clone, Copy)]
pub struct CaseWorld<'a> {
    pub vendors: &'a [Vendor],
    pub vendor_history: &'a [VendorHistoryRow],
    pub po_records: &'a [PoRecord],
    pub receipts: &'a [Receipt],
    pub ledger_index: &'a [LedgerRow],
    pub email_threads: &'a [EmailThread],
    pub policy_rules: &'a [PolicyRule],
}

impl<'a> CaseWorld<'a> {
    pub fn new(master: &'a MasterData, case: &'a Case) -> Self {
        let o = case.context_overrides.as_ref();
        Self {
            vendors: o
                .and_then(|o| o.vendors.as_deref())
                .unwrap_or(&master.vendors),
            vendor_history: o
                .and_then(|o| o.vendor_history.as_deref())
                .unwrap_or(&master.vendor_history),
            po_records: o
                .and_then(|o| o.po_records.as_deref())
                .unwrap_or(&master.po_records),
            receipts: o
                .and_then(|o| o.receipts.as_deref())
                .unwrap_or(&master.receipts),
            ledger_index: o
                .and_then(|o| o.ledger_index.as_deref())
                .unwrap_or(&master.ledger_index),
            email_threads: o
                .and_then(|o| o.email_threads.as_deref())
                .unwrap_or(&master.email_threads),
            policy_rules: o
                .and_then(|o| o.policy_rules.as_deref())
                .unwrap_or(&master.policy_rules),
        }
    }

    /// Vendor by normalised key, canonical name or vendor name.
    pub fn vendor(&self, key: &str) -> Option<&'a Vendor> {
        if key.trim().is_empty() {
            return None;
        }
        self.vendors.iter().find(|v| {
            [&v.vendor_key, &v.canonical_name, &v.vendor_name]
                .iter()
                .any(|n| crate::text::text_eq(n, key) || crate::text::id_eq(n, key))
        })
    }

    pub fn po(&self, po_id: &str) -> Option<&'a PoRecord> {
        self.po_records.iter().find(|p| p.po_id == po_id.trim())
    }

    pub fn receipt(&self, receipt_id: &str) -> Option<&'a Receipt> {
        self.receipts
            .iter()
            .find(|r| r.receipt_id == receipt_id.trim())
    }

    pub fn thread(&self, thread_id: &str) -> Option<&'a EmailThread> {
        self.email_threads
            .iter()
            .find(|t| t.thread_id == thread_id.trim())
    }

    pub fn policy(&self, rule_id: &str) -> Option<&'a PolicyRule> {
        self.policy_rules
            .iter()
            .find(|p| crate::text::id_eq(&p.rule_id, rule_id))
    }
}

/// Cases and master data.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FixtureSet {
    pub cases: Vec<Case>,
    pub master: MasterData,
}

impl FixtureSet {
    /// The curated benchmark compiled into the binary.
    pub fn embedded() -> Result<Self, FixtureError> {
        let mut cases = Vec::with_capacity(embedded::EMBEDDED_CASES.len());
        for (name, text) in embedded::EMBEDDED_CASES {
            cases.push(parse::<Case>(name, text)?);
        }
        let master = MasterData {
            vendors: parse("vendors.json", embedded::EMBEDDED_VENDORS)?,
            vendor_history: parse("vendor_history.json", embedded::EMBEDDED_VENDOR_HISTORY)?,
            po_records: parse("po_records.json", embedded::EMBEDDED_PO_RECORDS)?,
            receipts: parse("receipts.json", embedded::EMBEDDED_RECEIPTS)?,
            ledger_index: parse("ledger_index.json", embedded::EMBEDDED_LEDGER_INDEX)?,
            email_threads: parse("email_threads.json", embedded::EMBEDDED_EMAIL_THREADS)?,
            policy_rules: parse("policy_rules.json", embedded::EMBEDDED_POLICY_RULES)?,
        };
        Self::from_parts(cases, master)
    }

    /// Load a directory with the embedded layout. Missing master files count as empty lists;
    /// `cases/` may also be a single `cases.json` array.
    pub fn load_dir(dir: &Path) -> Result<Self, FixtureError> {
        let mut cases = Vec::new();
        let cases_dir = dir.join("cases");
        if cases_dir.is_dir() {
            let mut files: Vec<_> = std::fs::read_dir(&cases_dir)
                .map_err(|e| io_err(&cases_dir, e))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect();
            files.sort();
            for f in files {
                let text = std::fs::read_to_string(&f).map_err(|e| io_err(&f, e))?;
                cases.push(parse::<Case>(&f.display().to_string(), &text)?);
            }
        }
        let single = dir.join("cases.json");
        if single.is_file() {
            let text = std::fs::read_to_string(&single).map_err(|e| io_err(&single, e))?;
            cases.extend(parse::<Vec<Case>>(&single.display().to_string(), &text)?);
        }
        let master = MasterData {
            vendors: read_list(dir, "vendors.json")?,
            vendor_history: read_list(dir, "vendor_history.json")?,
            po_records: read_list(dir, "po_records.json")?,
            receipts: read_list(dir, "receipts.json")?,
            ledger_index: read_list(dir, "ledger_index.json")?,
            email_threads: read_list(dir, "email_threads.json")?,
            policy_rules: read_list(dir, "policy_rules.json")?,
        };
        Self::from_parts(cases, master)
    }

    /// A fixture set from its parts; cases that name no tracks get their task family's
    /// ([`Case::fill_default_tracks`]).
    pub fn from_parts(mut cases: Vec<Case>, master: MasterData) -> Result<Self, FixtureError> {
        cases.iter_mut().for_each(Case::fill_default_tracks);
        if cases.len() > MAX_CASES {
            return Err(FixtureError::TooMany(cases.len()));
        }
        let mut seen = BTreeMap::new();
        for c in &cases {
            if seen.insert(c.case_id.as_str(), ()).is_some() {
                return Err(FixtureError::DuplicateCase(c.case_id.clone()));
            }
        }
        Ok(Self { cases, master })
    }

    pub fn case(&self, case_id: &str) -> Option<&Case> {
        self.cases.iter().find(|c| c.case_id == case_id)
    }

    pub fn world<'a>(&'a self, case: &'a Case) -> CaseWorld<'a> {
        CaseWorld::new(&self.master, case)
    }
}

fn io_err(path: &Path, source: std::io::Error) -> FixtureError {
    FixtureError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn parse<T: serde::de::DeserializeOwned>(path: &str, text: &str) -> Result<T, FixtureError> {
    serde_json::from_str(text).map_err(|source| FixtureError::Json {
        path: path.to_owned(),
        source,
    })
}

fn read_list<T: serde::de::DeserializeOwned>(
    dir: &Path,
    name: &str,
) -> Result<Vec<T>, FixtureError> {
    let p = dir.join(name);
    if !p.is_file() {
        return Ok(Vec::new());
    }
    let text = std::fs::read_to_string(&p).map_err(|e| io_err(&p, e))?;
    parse(&p.display().to_string(), &text)
}
