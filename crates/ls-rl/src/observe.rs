//! The structured observation: the ledger and the composer as fixed-shape `f32` arrays.
//!
//! * `global` ([`GLOBAL_FEATURES`] entries, named in [`global_names`]): the task family, budget,
//!   steps, pending events, which tools succeeded or failed, interventions taken, artifacts
//!   delivered, the observed risk signals (a detector reading of revealed content), and the
//!   submission being composed (decision, codes, fields, items, verifications, links, checks, what
//!   is pending).
//! * `rows` ([`MAX_ROWS`] × [`ROW_FEATURES`], named in [`row_names`]) and `row_mask`: one row per
//!   ledger row — its kind, line class, document slot and type, amount, the relations
//!   ([`Flag`]), whether it is a failed lookup, its affinity with what is pending (how well it could
//!   fill the pending target: 1 when it is a place that shows the code's fact and a relation
//!   supports it, 0.5 a place without that support, 0 otherwise), whether a `point` at it is legal
//!   now, and whether the submission already uses it.
//!
//! Everything is read from the [`Ledger`] and the [`Composer`]; both read only replies.

use crate::factored::{Check, Composer, Field, Pending, Target, Tool, Verification, DECISIONS};
use crate::ledger::{Flag, Ledger, LineClass, Row, RowKind, MAX_DOCS, MAX_ROWS};
pub use crate::vocab::affinity;
use ls_core::{ActionName, ArtifactId, ReasonCode, TaskType};
use rust_decimal::prelude::ToPrimitive;

/// Entries of the `global` vector.
pub const GLOBAL_FEATURES: usize = global_len();
/// Entries of each row of `rows`.
pub const ROW_FEATURES: usize = row_len();

const TOOLS: usize = 11;
const INTERVENTIONS: usize = 9;
const TARGETS: usize = 27 + 10 + 1 + 4 + 2;
const DOC_TYPES: [&str; 4] = ["invoice", "email", "internal_message", "system_alert"];

const fn global_len() -> usize {
    5 + 4 + 2 * TOOLS + INTERVENTIONS + 5 + 27 + 5 + 27 + 10 + 1 + 4 + 2 + 8 + 10 + TARGETS + 1
}

const fn row_len() -> usize {
    10 + 16 + MAX_DOCS + DOC_TYPES.len() + 2 + 2 + 19 + 1 + 3
}

/// The investigation tools in the order of their `global` flags.
fn tools() -> Vec<ActionName> {
    ActionName::ALL
        .into_iter()
        .filter(|a| !a.is_intervention() && *a != ActionName::SubmitDecision)
        .collect()
}

fn interventions() -> Vec<ActionName> {
    crate::factored::interventions()
}

/// The name of every `global` entry, in order.
pub fn global_names() -> Vec<String> {
    let mut v: Vec<String> = TaskType::ALL
        .iter()
        .map(|t| format!("family.{}", t.as_str()))
        .collect();
    v.extend(
        [
            "budget_left",
            "steps_used",
            "steps_left_over_50",
            "pending_events_over_4",
        ]
        .map(String::from),
    );
    v.extend(tools().iter().map(|t| format!("succeeded.{}", t.as_str())));
    v.extend(tools().iter().map(|t| format!("failed.{}", t.as_str())));
    v.extend(
        interventions()
            .iter()
            .map(|t| format!("intervention.{}", t.as_str())),
    );
    v.extend(
        ArtifactId::ALL
            .iter()
            .map(|a| format!("artifact.{}", a.as_str())),
    );
    v.extend(
        ReasonCode::ALL
            .iter()
            .map(|c| format!("signal.{}", c.as_str())),
    );
    v.push("decision.none".into());
    v.extend(DECISIONS.iter().map(|d| format!("decision.{}", d.as_str())));
    v.extend(
        ReasonCode::ALL
            .iter()
            .map(|c| format!("claimed.{}", c.as_str())),
    );
    v.extend(Field::ALL.iter().map(|f| format!("field.{}", f.key())));
    v.push("line_items_over_8".into());
    v.extend(
        Verification::ALL
            .iter()
            .map(|x| format!("verified.{}", x.key())),
    );
    v.extend(["duplicate_links_over_4", "cross_links_over_4"].map(String::from));
    for c in Check::ALL {
        v.push(format!("check.{}.pass", c.as_str()));
        v.push(format!("check.{}.fail", c.as_str()));
    }
    v.push("pending.none".into());
    v.extend(
        Tool::ALL
            .iter()
            .map(|t| format!("pending.tool.{}", t.action().as_str())),
    );
    v.extend(
        Target::all()
            .iter()
            .map(|t| format!("pending.target.{}", target_name(*t))),
    );
    v.push("rows_dropped".into());
    debug_assert_eq!(v.len(), GLOBAL_FEATURES);
    v
}

/// The name of every entry of a row, in order.
pub fn row_names() -> Vec<String> {
    let mut v: Vec<String> = RowKind::ALL
        .iter()
        .map(|k| format!("kind.{}", k.as_str()))
        .collect();
    v.extend(
        LineClass::ALL
            .iter()
            .map(|c| format!("class.{}", c.as_str())),
    );
    v.extend((0..MAX_DOCS).map(|d| format!("doc_slot.{d}")));
    v.extend(DOC_TYPES.iter().map(|t| format!("doc_type.{t}")));
    v.extend(
        [
            "doc_type.other",
            "doc_type.none",
            "has_amount",
            "log10_amount_over_7",
        ]
        .map(String::from),
    );
    v.extend(Flag::ALL.iter().map(|f| format!("flag.{}", f.as_str())));
    v.extend(["missing", "affinity", "point_legal", "used"].map(String::from));
    debug_assert_eq!(v.len(), ROW_FEATURES);
    v
}

/// A target's name (`code.<code>`, `field.<key>`, `line_item`, `verify.<key>`, ...).
pub fn target_name(t: Target) -> String {
    match t {
        Target::Code(c) => format!("code.{}", c.as_str()),
        Target::Field(f) => format!("field.{}", f.key()),
        Target::LineItem => "line_item".into(),
        Target::Verify(v) => format!("verify.{}", v.key()),
        Target::DuplicateLink => "duplicate_link".into(),
        Target::CrossLink => "cross_link".into(),
    }
}

/// The structured observation's arrays.
#[derive(Debug, Clone, PartialEq)]
pub struct Structured {
    pub global: Vec<f32>,
    /// `MAX_ROWS * ROW_FEATURES`, row-major.
    pub rows: Vec<f32>,
    pub row_mask: Vec<u8>,
}

impl Structured {
    pub fn zeros() -> Self {
        Self {
            global: vec![0.0; GLOBAL_FEATURES],
            rows: vec![0.0; MAX_ROWS * ROW_FEATURES],
            row_mask: vec![0; MAX_ROWS],
        }
    }
}

/// Write the observation of `ledger` and `composer` into `out` (reused buffers).
pub fn observe(ledger: &Ledger, composer: &Composer, point_legal: &[bool], out: &mut Structured) {
    out.global.fill(0.0);
    out.rows.fill(0.0);
    out.row_mask.fill(0);
    write_global(ledger, composer, &mut out.global);
    for (i, r) in ledger.rows.iter().enumerate().take(MAX_ROWS) {
        out.row_mask[i] = 1;
        let row = &mut out.rows[i * ROW_FEATURES..(i + 1) * ROW_FEATURES];
        write_row(
            ledger,
            composer,
            r,
            i,
            point_legal.get(i).copied().unwrap_or(false),
            row,
        );
    }
}

fn write_global(l: &Ledger, c: &Composer, g: &mut [f32]) {
    let mut at = 0;
    let put = |g: &mut [f32], on: bool, n: &mut usize| {
        if on {
            g[*n] = 1.0;
        }
        *n += 1;
    };
    for t in TaskType::ALL {
        put(g, l.task == Some(t), &mut at);
    }
    for v in [
        l.budget_fraction,
        l.step_fraction,
        (f64::from(l.steps_left) / 50.0).min(1.0),
        (l.pending_events as f64 / 4.0).min(1.0),
    ] {
        g[at] = v as f32;
        at += 1;
    }
    for t in tools() {
        put(g, l.succeeded.contains(&t), &mut at);
    }
    for t in tools() {
        put(g, l.failed.contains(&t), &mut at);
    }
    for a in interventions() {
        put(g, l.interventions.contains(&a), &mut at);
    }
    for a in ArtifactId::ALL {
        put(g, l.artifacts.contains(&a), &mut at);
    }
    for code in ReasonCode::ALL {
        put(g, l.signals.contains(&code), &mut at);
    }
    put(g, c.decision.is_none(), &mut at);
    for d in DECISIONS {
        put(g, c.decision == Some(d), &mut at);
    }
    for code in ReasonCode::ALL {
        put(g, c.codes.contains_key(&code), &mut at);
    }
    for f in Field::ALL {
        put(g, c.fields.contains_key(&f), &mut at);
    }
    g[at] = (c.items.len() as f32 / 8.0).min(1.0);
    at += 1;
    for v in Verification::ALL {
        put(g, c.verifications.contains_key(&v), &mut at);
    }
    for n in [c.duplicate_links.len(), c.cross_links.len()] {
        g[at] = (n as f32 / 4.0).min(1.0);
        at += 1;
    }
    for check in Check::ALL {
        put(g, c.checks.get(&check) == Some(&true), &mut at);
        put(g, c.checks.get(&check) == Some(&false), &mut at);
    }
    put(g, c.pending.is_none(), &mut at);
    for t in Tool::ALL {
        put(g, c.pending == Some(Pending::Tool(t)), &mut at);
    }
    for t in Target::all() {
        put(g, c.pending == Some(Pending::Target(t)), &mut at);
    }
    put(g, l.dropped_rows > 0, &mut at);
    debug_assert_eq!(at, GLOBAL_FEATURES);
}

fn write_row(l: &Ledger, c: &Composer, r: &Row, i: usize, legal: bool, out: &mut [f32]) {
    let mut at = 0;
    out[at + r.kind.index()] = 1.0;
    at += RowKind::ALL.len();
    out[at + r.class.index()] = 1.0;
    at += LineClass::ALL.len();
    if let Some(d) = r.doc.filter(|d| *d < MAX_DOCS) {
        out[at + d] = 1.0;
    }
    at += MAX_DOCS;
    let doc_type = r
        .doc
        .and_then(|d| l.docs.get(d))
        .map(|d| d.doc_type.as_str());
    match doc_type {
        Some(t) => match DOC_TYPES.iter().position(|x| *x == t) {
            Some(p) => out[at + p] = 1.0,
            None => out[at + DOC_TYPES.len()] = 1.0,
        },
        None => out[at + DOC_TYPES.len() + 1] = 1.0,
    }
    at += DOC_TYPES.len() + 2;
    if let Some(a) = r.amount.and_then(|a| a.abs().to_f64()) {
        out[at] = 1.0;
        out[at + 1] = ((1.0 + a).log10() / 7.0).min(1.0) as f32;
    }
    at += 2;
    for (k, f) in Flag::ALL.iter().enumerate() {
        if r.flags.has(*f) {
            out[at + k] = 1.0;
        }
    }
    at += Flag::ALL.len();
    out[at] = f32::from(u8::from(r.missing));
    out[at + 1] = match c.pending {
        Some(Pending::Target(t)) => affinity(t, r),
        Some(Pending::Tool(_)) => f32::from(u8::from(legal)),
        None => 0.0,
    };
    out[at + 2] = f32::from(u8::from(legal));
    out[at + 3] = f32::from(u8::from(used(c, i)));
    at += 4;
    debug_assert_eq!(at, ROW_FEATURES);
}

fn used(c: &Composer, i: usize) -> bool {
    c.codes.values().any(|x| *x == i)
        || c.fields.values().any(|x| *x == i)
        || c.verifications.values().any(|x| *x == i)
        || c.items.contains(&i)
        || c.duplicate_links.contains(&i)
        || c.cross_links.contains(&i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_declared_sizes() {
        assert_eq!(global_names().len(), GLOBAL_FEATURES);
        assert_eq!(row_names().len(), ROW_FEATURES);
        let g: std::collections::BTreeSet<String> = global_names().into_iter().collect();
        assert_eq!(g.len(), GLOBAL_FEATURES, "global names are distinct");
        assert_eq!(Target::all().len(), TARGETS);
    }
}
