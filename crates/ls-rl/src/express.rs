//! Re-expressing another agent's action (the teacher's) as factored actions: for behaviour
//! cloning, and to show the factored space can say what the teacher says.

use crate::factored::{
    Check, Composer, FactoredAction, Field, Layout, Pending, Target, Tool, Verification,
};
use crate::ledger::{Ledger, Row, MAX_ROWS};
use crate::vocab::affinity;
use ls_core::{ActionName, Decision, ReasonCode};
use serde_json::{json, Map, Value};

/// An action the factored space cannot express (see [`Composer::express`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unexpressible;

/// Does a submission's evidence entry cite row `r` (a shared token id, or the same record id)?
fn cites(entry: &Value, r: &Row) -> bool {
    let entries: Vec<&Value> = match entry {
        Value::Array(a) => a.iter().collect(),
        other => vec![other],
    };
    entries.iter().any(|e| {
        let toks = |v: &Value| -> Vec<String> {
            v.get("token_ids")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|t| t.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let mine = toks(&r.reference);
        if !mine.is_empty() {
            return toks(e).iter().any(|t| mine.contains(t));
        }
        match (e.as_object(), r.reference.as_object()) {
            (Some(e), Some(m)) => m
                .iter()
                .all(|(k, v)| e.get(k).is_some_and(|x| norm(x) == norm(v))),
            _ => false,
        }
    })
}

fn norm(v: &Value) -> String {
    ls_core::text::normalize_id(v.as_str().unwrap_or_default())
}

impl Composer {
    /// The factored actions that express an agent's action `action_type`/`payload` now (the
    /// teacher's, for behaviour cloning and the expressiveness test): a tool and the row its
    /// argument is read from, an intervention, or — for `submit_decision` — every part of the
    /// submission then `submit`. `Ok(empty)` for an action the interface does not repeat (an
    /// intervention already taken, the policy read again, a tool call already played with that
    /// argument); `Err` when it cannot be expressed (a zoom, a crop, an argument no revealed row
    /// carries). Nothing here is played; the caller plays the indices in order (each legal when
    /// its turn comes).
    pub fn express(
        &self,
        layout: &Layout,
        l: &Ledger,
        action_type: &str,
        payload: &Map<String, Value>,
    ) -> Result<Vec<usize>, Unexpressible> {
        let idx = |a: FactoredAction| layout.index_of(&a).expect("laid out");
        let legal = self.mask(layout, l);
        let once = |a: FactoredAction| {
            Ok(if legal[idx(a)] {
                vec![idx(a)]
            } else {
                Vec::new()
            })
        };
        let Some(name) = ActionName::from_wire(action_type) else {
            return Err(Unexpressible);
        };
        if name.is_intervention() {
            return once(FactoredAction::Intervene(name));
        }
        match name {
            ActionName::LookupPolicy => once(FactoredAction::LookupPolicy),
            ActionName::SubmitDecision => Ok(self.express_submission(layout, l, payload)),
            _ => {
                let Some(tool) = Tool::ALL.into_iter().find(|t| t.action() == name) else {
                    return Err(Unexpressible);
                };
                let arg = |k: &str| {
                    payload
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                let wanted = match tool {
                    Tool::Ocr | Tool::Zoom => arg("doc_id"),
                    Tool::EmailThread => arg("thread_id"),
                    Tool::Vendor | Tool::VendorHistory => arg("vendor_key"),
                    Tool::CompareBank => arg("proposed_bank_account"),
                    Tool::SearchLedger => arg("invoice_number"),
                    Tool::Po => arg("po_id"),
                    Tool::Receipt => arg("receipt_id"),
                };
                let same = |v: &str| match tool {
                    Tool::CompareBank => {
                        ls_core::text::compact_account(v) == ls_core::text::compact_account(&wanted)
                    }
                    _ => ls_core::text::normalize_id(v) == ls_core::text::normalize_id(&wanted),
                };
                if self
                    .played
                    .get(&tool)
                    .is_some_and(|played| played.iter().any(|v| same(v)))
                {
                    return Ok(Vec::new());
                }
                let row = (0..l.rows.len().min(MAX_ROWS)).find(|i| {
                    self.row_ok_for(l, Pending::Tool(tool), *i)
                        && l.rows[*i].value.as_deref().is_some_and(same)
                });
                row.map(|r| {
                    vec![
                        idx(FactoredAction::Tool(tool)),
                        idx(FactoredAction::Point(r)),
                    ]
                })
                .ok_or(Unexpressible)
            }
        }
    }

    /// A submission as its parts: the decision, each code with the row it cites, the
    /// verifications, Task A's fields and items, the links, the checks, then `submit`.
    fn express_submission(
        &self,
        layout: &Layout,
        l: &Ledger,
        p: &Map<String, Value>,
    ) -> Vec<usize> {
        let mut plan = Plan {
            layout,
            l,
            out: Vec::new(),
        };
        let evidence = p
            .get("evidence_map")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let decision = p
            .get("decision")
            .and_then(Value::as_str)
            .and_then(Decision::parse_lenient);
        if let Some(d) = decision.filter(|_| self.decision.is_none()) {
            plan.push(FactoredAction::Decide(d));
        }
        for c in named_codes(p)
            .into_iter()
            .filter(|c| !self.codes.contains_key(c))
        {
            let entry = evidence
                .iter()
                .find(|(k, _)| ReasonCode::canonical(k) == Some(c))
                .map(|(_, v)| v);
            plan.fill(Target::Code(c), entry);
        }
        for v in Verification::ALL {
            if let Some(e) = evidence.get(v.key()) {
                plan.fill(Target::Verify(v), Some(e));
            }
        }
        if let Some(fields) = p.get("extracted_fields").and_then(Value::as_object) {
            for f in Field::ALL.iter().filter(|f| fields.contains_key(f.key())) {
                plan.fill(Target::Field(*f), evidence.get(f.key()));
            }
        }
        plan.items(
            p.get("line_items")
                .and_then(Value::as_array)
                .map_or(0, Vec::len),
        );
        plan.links(p);
        for (c, pass) in checks(p)
            .into_iter()
            .filter(|(c, _)| !self.checks.contains_key(c))
        {
            plan.push(FactoredAction::Check(c, pass));
        }
        if decision.is_some() || self.decision.is_some() {
            plan.push(FactoredAction::Submit);
        }
        plan.out
    }
}

/// The factored actions of a submission being expressed.
struct Plan<'a> {
    layout: &'a Layout,
    l: &'a Ledger,
    out: Vec<usize>,
}

impl Plan<'_> {
    fn push(&mut self, a: FactoredAction) {
        self.out.push(self.layout.index_of(&a).expect("laid out"));
    }

    fn rows(&self) -> std::ops::Range<usize> {
        0..self.l.rows.len().min(MAX_ROWS)
    }

    /// A target and the row the agent cited for it, else the row the observation rates best.
    fn fill(&mut self, t: Target, entry: Option<&Value>) {
        let l = self.l;
        let takes = |i: &usize| t.takes(l, &l.rows[*i]);
        let cited = entry.and_then(|e| self.rows().filter(takes).find(|i| cites(e, &l.rows[*i])));
        let best = || {
            self.rows().filter(takes).max_by(|a, b| {
                affinity(t, &l.rows[*a])
                    .total_cmp(&affinity(t, &l.rows[*b]))
                    .then(b.cmp(a))
            })
        };
        if let Some(r) = cited.or_else(best) {
            self.push(FactoredAction::Target(t));
            self.push(FactoredAction::Point(r));
        }
    }

    /// As many item lines as the submission lists, in reveal order.
    fn items(&mut self, wanted: usize) {
        let l = self.l;
        let rows: Vec<usize> = self
            .rows()
            .filter(|i| Target::LineItem.takes(l, &l.rows[*i]))
            .take(wanted)
            .collect();
        for r in rows {
            self.push(FactoredAction::Target(Target::LineItem));
            self.push(FactoredAction::Point(r));
        }
    }

    /// Each duplicate and cross-invoice link whose record or invoice a row carries.
    fn links(&mut self, p: &Map<String, Value>) {
        let l = self.l;
        for (key, target) in [
            ("duplicate_links", Target::DuplicateLink),
            ("cross_invoice_links", Target::CrossLink),
        ] {
            for id in p
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                let row = self.rows().find(|i| {
                    target.takes(l, &l.rows[*i])
                        && l.rows[*i]
                            .value
                            .as_deref()
                            .is_some_and(|v| norm(&json!(v)) == norm(&json!(id)))
                });
                if let Some(r) = row {
                    self.push(FactoredAction::Target(target));
                    self.push(FactoredAction::Point(r));
                }
            }
        }
    }
}

/// Every code a submission names, in whichever of the families' fields it sits, once each.
fn named_codes(p: &Map<String, Value>) -> Vec<ReasonCode> {
    let mut codes: Vec<ReasonCode> = Vec::new();
    for key in [
        "reason_codes",
        "discrepancies",
        "fraud_flags",
        "campaign_signals",
    ] {
        for c in p.get(key).and_then(Value::as_array).into_iter().flatten() {
            if let Some(c) = c.as_str().and_then(ReasonCode::canonical) {
                if !codes.contains(&c) {
                    codes.push(c);
                }
            }
        }
    }
    codes
}

/// A submission's policy-check states (`pass`/`fail` or booleans), in check order.
fn checks(p: &Map<String, Value>) -> Vec<(Check, bool)> {
    let Some(checks) = p.get("policy_checks").and_then(Value::as_object) else {
        return Vec::new();
    };
    Check::ALL
        .into_iter()
        .filter_map(|c| {
            let state = match checks.get(c.as_str())? {
                Value::Bool(b) => Some(*b),
                Value::String(s) => match ls_core::text::normalize_text(s).as_str() {
                    "pass" | "passed" | "true" => Some(true),
                    "fail" | "failed" | "false" => Some(false),
                    _ => None,
                },
                _ => None,
            };
            state.map(|s| (c, s))
        })
        .collect()
}
