//! The factored action space: one masked `Discrete` choice per step that can express everything
//! the teacher does.
//!
//! An action is one of ([`Layout`] gives each group its index range, in this order):
//!
//! | group | count | what it does |
//! |---|---|---|
//! | `tool(t)` | 9 | chooses a tool that takes an argument; the **next** action is `point(r)`, the ledger row the argument is read from (a document, a vendor name or key, an account, an invoice number, a PO or receipt reference) |
//! | `lookup_policy` | 1 | the policy lookup (again only while artifacts are pending: a wait) |
//! | `intervene(a)` | 9 | an intervention, on the vendor the ledger knows ([`Ledger::vendor_key`]) |
//! | `decide(d)` | 4 | the submission's decision (once) |
//! | `target(x)` | 44 | chooses what the next `point(r)` fills: a reason code (27, cited at row `r`), a Task A field (10, value and citation from row `r`), a line item (row `r`), a verification a PAY cites (PO, receipt, vendor master, invoice total), a duplicate link (a ledger hit), a cross-invoice link (an invoice) |
//! | `check(c, pass\|fail)` | 8 | a policy check's state (once each) |
//! | `submit` | 1 | submits the composed decision (needs a decision) |
//! | `point.best` | 1 | the legal row the observation rates best for what is pending (highest affinity, then first revealed): an alias of one `point(r)` |
//! | `point(r)` | [`MAX_ROWS`] | the pending tool's or target's row |
//!
//! Tools, the policy lookup, interventions and `submit` are environment steps; every other
//! action only composes and costs nothing (no environment step, reward 0, the episode's clock
//! does not move). Composing is bounded: each target, check and the decision once, each row
//! once per target, so an episode cannot compose forever. An action its mask forbids is played
//! as a refused action (a penalised environment step), as the server treats an unknown tool.

use crate::ledger::{Ledger, MAX_ROWS};
pub use crate::vocab::*;
use ls_core::{ActionName, Decision, ReasonCode};
use rust_decimal::Decimal;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// What playing a factored action does.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// An environment step: the typed action as `{action_type, payload}` parts.
    Env {
        action_type: String,
        payload: Map<String, Value>,
    },
    /// A composing step: nothing reaches the environment.
    Composed,
}

/// The submission being composed, and what the next `point` fills.
#[derive(Debug, Clone, Default)]
pub struct Composer {
    pub pending: Option<Pending>,
    pub decision: Option<Decision>,
    /// Reason codes with the row that shows each.
    pub codes: BTreeMap<ReasonCode, usize>,
    pub fields: BTreeMap<Field, usize>,
    pub items: Vec<usize>,
    pub verifications: BTreeMap<Verification, usize>,
    pub duplicate_links: Vec<usize>,
    pub cross_links: Vec<usize>,
    pub checks: BTreeMap<Check, bool>,
    /// The argument values already played with each tool: not offered again.
    pub(crate) played: BTreeMap<Tool, BTreeSet<String>>,
    /// Composing steps taken (bounded by the masks; asserted).
    pub composed_steps: usize,
}

/// The longest hand-off summary the composer writes (well inside the payload's field limit).
pub const SUMMARY_CHARS: usize = 240;

/// The region a `zoom` reads: the whole first page.
pub const ZOOM_BBOX: [u32; 4] = [0, 0, 600, 800];

/// The action an index past the layout or a masked-out action plays (no tool has this name).
pub const REFUSED_ACTION: &str = "invalid_factored_action";

impl Composer {
    pub fn new() -> Self {
        Self::default()
    }

    fn filled(&self, t: Target) -> bool {
        match t {
            Target::Code(c) => self.codes.contains_key(&c),
            Target::Field(f) => self.fields.contains_key(&f),
            Target::Verify(v) => self.verifications.contains_key(&v),
            Target::LineItem | Target::DuplicateLink | Target::CrossLink => false,
        }
    }

    fn used(&self, t: Target, row: usize) -> bool {
        match t {
            Target::LineItem => self.items.contains(&row),
            Target::DuplicateLink => self.duplicate_links.contains(&row),
            Target::CrossLink => self.cross_links.contains(&row),
            _ => false,
        }
    }

    pub(crate) fn row_ok_for(&self, l: &Ledger, p: Pending, i: usize) -> bool {
        let Some(r) = l.rows.get(i) else { return false };
        match p {
            Pending::Tool(t) => {
                t.takes(l, r)
                    && !self
                        .played
                        .get(&t)
                        .is_some_and(|v| v.contains(r.value.as_deref().unwrap_or_default()))
            }
            Pending::Target(t) => t.takes(l, r) && !self.used(t, i),
        }
    }

    /// The legal row rated best for what is pending: the highest affinity with a pending target
    /// (`observe::affinity`), else the first revealed legal row.
    pub fn best_row(&self, l: &Ledger) -> Option<usize> {
        let p = self.pending?;
        let legal = (0..l.rows.len().min(MAX_ROWS)).filter(|i| self.row_ok_for(l, p, *i));
        match p {
            Pending::Tool(_) => legal.min(),
            Pending::Target(t) => legal.max_by(|a, b| {
                crate::observe::affinity(t, &l.rows[*a])
                    .total_cmp(&crate::observe::affinity(t, &l.rows[*b]))
                    .then(b.cmp(a))
            }),
        }
    }

    /// The legal actions now, one flag per layout index.
    pub fn mask(&self, layout: &Layout, l: &Ledger) -> Vec<bool> {
        let mut m = vec![false; layout.len()];
        self.mask_into(layout, l, &mut m);
        m
    }

    /// [`Composer::mask`] written into `m` (`layout.len()` flags, every one overwritten).
    pub fn mask_into(&self, layout: &Layout, l: &Ledger, m: &mut [bool]) {
        m.fill(false);
        if l.done {
            return;
        }
        let rows = 0..l.rows.len().min(MAX_ROWS);
        if let Some(p) = self.pending {
            for i in rows {
                if self.row_ok_for(l, p, i) {
                    m[layout.point(i).expect("laid out")] = true;
                }
            }
            debug_assert!(m.iter().any(|x| *x), "a pending choice always has a row");
            m[layout.point_best()] = true;
            return;
        }
        for (i, a) in layout.actions().iter().enumerate() {
            m[i] = match *a {
                FactoredAction::Tool(t) => rows
                    .clone()
                    .any(|r| self.row_ok_for(l, Pending::Tool(t), r)),
                // Read once; again only to wait for pending artifacts (the cheapest step).
                FactoredAction::LookupPolicy => {
                    !l.succeeded.contains(&ActionName::LookupPolicy) || l.pending_events > 0
                }
                FactoredAction::Intervene(a) => {
                    !l.interventions.contains(&a)
                        && (a == ActionName::CreateHumanHandoff || l.vendor_key().is_some())
                }
                FactoredAction::Decide(_) => self.decision.is_none(),
                FactoredAction::Target(t) => {
                    (!self.filled(t) || t.repeats())
                        && rows
                            .clone()
                            .any(|r| self.row_ok_for(l, Pending::Target(t), r))
                }
                FactoredAction::Check(c, _) => !self.checks.contains_key(&c),
                FactoredAction::Submit => self.decision.is_some(),
                FactoredAction::Point(_) | FactoredAction::PointBest => false,
            };
        }
    }

    /// Play layout index `index` against the ledger: what reaches the environment, if anything.
    /// A masked-out index is refused ([`REFUSED_ACTION`], a penalised environment step).
    pub fn apply(&mut self, layout: &Layout, l: &Ledger, index: usize) -> Step {
        let mask = self.mask(layout, l);
        self.apply_masked(layout, l, index, &mask)
    }

    /// [`Composer::apply`] with the mask of the current state already computed (`mask` must be
    /// what [`Composer::mask`] answers now).
    pub fn apply_masked(
        &mut self,
        layout: &Layout,
        l: &Ledger,
        index: usize,
        mask: &[bool],
    ) -> Step {
        debug_assert_eq!(mask, self.mask(layout, l).as_slice(), "the current mask");
        let legal = mask.get(index).copied().unwrap_or(false);
        let Some(action) = layout.action(index).filter(|_| legal) else {
            return Step::Env {
                action_type: REFUSED_ACTION.into(),
                payload: Map::new(),
            };
        };
        let step = self.play(l, action);
        if step == Step::Composed {
            self.composed_steps += 1;
            debug_assert!(
                self.composed_steps <= 4 * layout.len() + 4 * MAX_ROWS,
                "composing is bounded"
            );
        }
        step
    }

    fn play(&mut self, l: &Ledger, action: FactoredAction) -> Step {
        let vendor = || l.vendor_key().unwrap_or_default();
        match action {
            FactoredAction::Tool(t) => {
                self.pending = Some(Pending::Tool(t));
                Step::Composed
            }
            FactoredAction::LookupPolicy => env("lookup_policy", json!({})),
            FactoredAction::Intervene(a) => {
                let payload = if a == ActionName::CreateHumanHandoff {
                    json!({"summary": self.summary(), "recommended_next_step": "manual_review", "confidence": 0.8})
                } else {
                    json!({"vendor_key": vendor()})
                };
                env(a.as_str(), payload)
            }
            FactoredAction::Decide(d) => {
                self.decision = Some(d);
                Step::Composed
            }
            FactoredAction::Target(t) => {
                self.pending = Some(Pending::Target(t));
                Step::Composed
            }
            FactoredAction::Check(c, pass) => {
                self.checks.insert(c, pass);
                Step::Composed
            }
            FactoredAction::Submit => env_map("submit_decision", self.submission(l)),
            FactoredAction::PointBest => {
                let i = self
                    .best_row(l)
                    .expect("point.best is legal only when a row is");
                self.play(l, FactoredAction::Point(i))
            }
            FactoredAction::Point(i) => {
                let p = self
                    .pending
                    .take()
                    .expect("a point is legal only when something is pending");
                match p {
                    Pending::Tool(t) => self.tool_step(l, t, i),
                    Pending::Target(t) => {
                        match t {
                            Target::Code(c) => {
                                self.codes.insert(c, i);
                            }
                            Target::Field(f) => {
                                self.fields.insert(f, i);
                            }
                            Target::LineItem => self.items.push(i),
                            Target::Verify(v) => {
                                self.verifications.insert(v, i);
                            }
                            Target::DuplicateLink => self.duplicate_links.push(i),
                            Target::CrossLink => self.cross_links.push(i),
                        }
                        Step::Composed
                    }
                }
            }
        }
    }

    fn tool_step(&mut self, l: &Ledger, t: Tool, i: usize) -> Step {
        let r = &l.rows[i];
        // An argument is read from a row; it stays inside the payload's field limit.
        let value: String = r
            .value
            .as_deref()
            .unwrap_or_default()
            .chars()
            .take(ls_env::payload::MAX_FIELD_CHARS)
            .collect();
        self.played.entry(t).or_default().insert(value.clone());
        let vendor = l.vendor_key().unwrap_or_default();
        let payload = match t {
            Tool::Ocr => json!({"doc_id": value, "mode": "accurate"}),
            Tool::Zoom => json!({"doc_id": value, "page": 1, "bbox": ZOOM_BBOX}),
            Tool::EmailThread => json!({"thread_id": value}),
            Tool::Vendor | Tool::VendorHistory => json!({"vendor_key": value}),
            Tool::CompareBank => json!({"vendor_key": vendor, "proposed_bank_account": value}),
            Tool::SearchLedger => {
                let amount = l.invoice_of_row(i).and_then(|inv| inv.total_value());
                json!({"vendor_key": vendor, "invoice_number": value, "amount": amount.map(decimal_json)})
            }
            Tool::Po => json!({"po_id": value}),
            Tool::Receipt => json!({"receipt_id": value}),
        };
        env(t.action().as_str(), payload)
    }

    /// The hand-off's summary: the decision and codes composed so far, within the payload's
    /// length limit.
    fn summary(&self) -> String {
        let codes: Vec<&str> = self.codes.keys().map(|c| c.as_str()).collect();
        let s = match self.decision {
            Some(d) => format!("{} recommended: {}.", d.as_str(), codes.join(", ")),
            None => "Handing the case to a human reviewer.".to_owned(),
        };
        s.chars().take(SUMMARY_CHARS).collect()
    }
}

fn env(action_type: &str, payload: Value) -> Step {
    env_map(
        action_type,
        payload.as_object().cloned().unwrap_or_default(),
    )
}

fn env_map(action_type: &str, payload: Map<String, Value>) -> Step {
    Step::Env {
        action_type: action_type.to_owned(),
        payload,
    }
}

fn decimal_json(d: Decimal) -> Value {
    d.normalize()
        .to_string()
        .parse::<f64>()
        .map(|f| json!(f))
        .unwrap_or(Value::Null)
}
