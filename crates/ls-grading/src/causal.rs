//! The causal grader over a structural causal model of the case.
//!
//! Variables: the latent hypothesis `LH` (exogenous, one of the 12 hypotheses), binary mechanism
//! variables (0 = clean, 1 = suspicious) — vendor legitimacy `VL`, sender authenticity `SA`, bank
//! alignment `BA`, document integrity `DI`, approval-chain integrity `AC`, duplicate pattern `DP`,
//! portfolio linkage `PL`, callback result `CR` — the decision `D` and the payment outcome `PO`.
//! Only the mechanisms relevant to this case are instantiated (those the hypothesis drives or the
//! case exhibits, plus `DI` and `BA`, which every payment depends on; `SA` only with an email).
//!
//! Structural equations (U = "the hypothesis manifests in M", F = independent false alarm):
//!   M  := (drives(LH, M) ∧ U_M) ∨ (∃ mechanism parent P of M: P) ∨ F_M
//!   D  := ESCALATE_FRAUD if any of SA, BA, CR, PL, VL; else HOLD if DP or DI; else NEEDS_REVIEW if AC; else PAY
//!   PO := released_loss if D = PAY ∧ LH ≠ safe, etc.
//! Interventions replace an equation (graph surgery); counterfactuals run abduction (noise values
//! consistent with the case's factual mechanism states) → action → prediction. Sufficiency of
//! the agent's observed set is the back-door criterion for each relevant mechanism → D, checked by
//! d-separation on the mutilated graph (ancestral moral graph), with conditioned variables never
//! counted as trivially separated.

use ls_core::{ActionName, Decision, Hypothesis};
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::Direction;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Var {
    LH,
    VL,
    SA,
    BA,
    DI,
    AC,
    DP,
    PL,
    CR,
    D,
    PO,
}

pub const MECHANISMS: [Var; 8] = [Var::VL, Var::SA, Var::BA, Var::DI, Var::AC, Var::DP, Var::PL, Var::CR];

impl Var {
    pub fn name(self) -> &'static str {
        match self {
            Var::LH => "latent_hypothesis",
            Var::VL => "vendor_legitimacy",
            Var::SA => "sender_authenticity",
            Var::BA => "bank_alignment",
            Var::DI => "document_integrity",
            Var::AC => "approval_chain_integrity",
            Var::DP => "duplicate_pattern",
            Var::PL => "portfolio_linkage",
            Var::CR => "callback_result",
            Var::D => "decision",
            Var::PO => "payment_outcome",
        }
    }
    /// Mechanism parents among mechanisms (besides LH).
    fn mech_parents(self) -> &'static [Var] {
        match self {
            Var::SA | Var::BA | Var::CR => &[Var::VL],
            Var::DP => &[Var::DI],
            _ => &[],
        }
    }
}

/// Which mechanisms a hypothesis drives.
pub fn drives(h: Hypothesis) -> &'static [Var] {
    use Hypothesis::*;
    match h {
        Safe => &[],
        BankFraud => &[Var::BA, Var::CR],
        DuplicateBilling => &[Var::DP, Var::DI],
        VendorTakeover => &[Var::SA, Var::BA],
        CeoBec => &[Var::SA, Var::AC],
        PhantomVendor => &[Var::VL, Var::DI],
        SupplyChainCompromise => &[Var::BA, Var::CR, Var::VL],
        InsiderCollusion => &[Var::AC, Var::CR],
        MultiEntityLayering => &[Var::PL, Var::CR, Var::BA],
        CampaignFraud => &[Var::PL, Var::DP],
        SplitPayment => &[Var::DP, Var::AC],
        ThresholdEvasion => &[Var::AC],
    }
}

/// Mechanisms a tool observes.
pub fn observes(a: ActionName) -> &'static [Var] {
    use ActionName::*;
    match a {
        InspectEmailThread => &[Var::SA, Var::AC],
        CompareBankAccount => &[Var::BA],
        SearchLedger | FlagDuplicateClusterReview => &[Var::DP, Var::PL],
        LookupVendor | LookupVendorHistory => &[Var::VL],
        RequestCallbackVerification => &[Var::CR],
        RequestBankChangeApprovalChain => &[Var::AC, Var::BA],
        LookupPolicy => &[Var::AC],
        Ocr | Zoom | GetDocCrop | LookupPo | LookupReceipt | RequestPoReconciliation | RequestAdditionalReceiptEvidence => &[Var::DI],
        _ => &[],
    }
}

/// The instantiated model.
pub struct Scm {
    pub graph: DiGraph<Var, ()>,
    pub index: BTreeMap<Var, NodeIndex>,
    pub hypothesis: Hypothesis,
    /// Abduced exogenous values per mechanism: (U_M, F_M).
    pub noise: BTreeMap<Var, (bool, bool)>,
}

pub type World = BTreeMap<Var, u8>;

impl Scm {
    /// Build for a case: `factual` are the mechanism states the case exhibits; `has_email` gates SA.
    pub fn build(hypothesis: Hypothesis, factual: &BTreeSet<Var>, has_email: bool) -> Self {
        let mut relevant: BTreeSet<Var> = drives(hypothesis).iter().copied().chain(factual.iter().copied()).collect();
        relevant.insert(Var::DI);
        relevant.insert(Var::BA);
        if !has_email {
            relevant.remove(&Var::SA);
        }
        let mut graph = DiGraph::new();
        let mut index = BTreeMap::new();
        for v in std::iter::once(Var::LH).chain(MECHANISMS.iter().copied().filter(|m| relevant.contains(m))).chain([Var::D, Var::PO]) {
            index.insert(v, graph.add_node(v));
        }
        for &m in MECHANISMS.iter().filter(|m| relevant.contains(m)) {
            graph.add_edge(index[&Var::LH], index[&m], ());
            for p in m.mech_parents() {
                if let Some(&pi) = index.get(p) {
                    graph.add_edge(pi, index[&m], ());
                }
            }
            graph.add_edge(index[&m], index[&Var::D], ());
        }
        graph.add_edge(index[&Var::D], index[&Var::PO], ());
        graph.add_edge(index[&Var::LH], index[&Var::PO], ());
        let mut scm = Scm { graph, index, hypothesis, noise: BTreeMap::new() };
        scm.abduct(factual);
        scm
    }

    pub fn mechanisms(&self) -> Vec<Var> {
        MECHANISMS.iter().copied().filter(|m| self.index.contains_key(m)).collect()
    }

    /// Abduction: the least noise that reproduces the factual mechanism states.
    fn abduct(&mut self, factual: &BTreeSet<Var>) {
        let driven: BTreeSet<Var> = drives(self.hypothesis).iter().copied().collect();
        let mut world = World::new();
        for m in self.topo_mechanisms() {
            let parent_on = m.mech_parents().iter().any(|p| world.get(p) == Some(&1));
            let on = factual.contains(&m);
            let u = on && driven.contains(&m);
            let f = on && !u && !parent_on;
            self.noise.insert(m, (u, f));
            world.insert(m, u8::from(on || parent_on));
        }
    }

    fn topo_mechanisms(&self) -> Vec<Var> {
        petgraph::algo::toposort(&self.graph, None)
            .map(|order| order.into_iter().map(|i| self.graph[i]).filter(|v| MECHANISMS.contains(v)).collect())
            .unwrap_or_else(|_| self.mechanisms())
    }

    /// Evaluate the structural equations under `do(interventions)`.
    pub fn evaluate(&self, interventions: &BTreeMap<Var, u8>) -> (World, Decision) {
        let driven: BTreeSet<Var> = drives(self.hypothesis).iter().copied().collect();
        let mut w = World::new();
        for m in self.topo_mechanisms() {
            let v = if let Some(v) = interventions.get(&m) {
                *v
            } else {
                let (u, f) = self.noise.get(&m).copied().unwrap_or((false, false));
                let parent_on = m.mech_parents().iter().any(|p| w.get(p) == Some(&1));
                u8::from((driven.contains(&m) && u) || parent_on || f)
            };
            w.insert(m, v);
        }
        let on = |v: Var| w.get(&v) == Some(&1);
        let d = if [Var::SA, Var::BA, Var::CR, Var::PL, Var::VL].iter().any(|v| on(*v)) {
            Decision::EscalateFraud
        } else if on(Var::DP) || on(Var::DI) {
            Decision::Hold
        } else if on(Var::AC) {
            Decision::NeedsReview
        } else {
            Decision::Pay
        };
        let po = match (d, self.hypothesis == Hypothesis::Safe) {
            (Decision::Pay, false) => 3,
            (Decision::Pay, true) => 0,
            (_, false) => 1,
            (_, true) => 2,
        };
        w.insert(Var::D, d as u8);
        w.insert(Var::PO, po);
        (w, d)
    }

    /// Counterfactual decision had the named mechanisms been clean.
    pub fn counterfactual_clean(&self, mechanisms: &BTreeSet<Var>) -> Decision {
        let iv: BTreeMap<Var, u8> = mechanisms.iter().filter(|m| self.index.contains_key(m)).map(|m| (*m, 0)).collect();
        self.evaluate(&iv).1
    }

    fn descendants(&self, v: Var) -> BTreeSet<Var> {
        let mut out = BTreeSet::new();
        let Some(&start) = self.index.get(&v) else { return out };
        let mut stack = vec![start];
        while let Some(n) = stack.pop() {
            for c in self.graph.neighbors_directed(n, Direction::Outgoing) {
                if out.insert(self.graph[c]) {
                    stack.push(c);
                }
            }
        }
        out
    }

    /// d-separation of x and y given z (ancestral moral graph), optionally without x's out-edges.
    pub fn d_separated(&self, x: Var, y: Var, z: &BTreeSet<Var>, cut_out_of_x: bool) -> bool {
        if z.contains(&x) || z.contains(&y) {
            // A conditioned endpoint is not "trivially separated": the query is ill-posed.
            return false;
        }
        let edges: Vec<(Var, Var)> = self
            .graph
            .edge_indices()
            .filter_map(|e| self.graph.edge_endpoints(e))
            .map(|(a, b)| (self.graph[a], self.graph[b]))
            .filter(|(a, _)| !(cut_out_of_x && *a == x))
            .collect();
        // Ancestral set of {x, y} ∪ z.
        let mut anc: BTreeSet<Var> = z.iter().copied().chain([x, y]).collect();
        loop {
            let before = anc.len();
            for (a, b) in &edges {
                if anc.contains(b) {
                    anc.insert(*a);
                }
            }
            if anc.len() == before {
                break;
            }
        }
        let mut adj: BTreeMap<Var, BTreeSet<Var>> = BTreeMap::new();
        let mut link = |a: Var, b: Var| {
            adj.entry(a).or_default().insert(b);
            adj.entry(b).or_default().insert(a);
        };
        for (a, b) in edges.iter().filter(|(a, b)| anc.contains(a) && anc.contains(b)) {
            link(*a, *b);
        }
        for child in &anc {
            let parents: Vec<Var> = edges.iter().filter(|(a, b)| b == child && anc.contains(a)).map(|(a, _)| *a).collect();
            for i in 0..parents.len() {
                for j in i + 1..parents.len() {
                    link(parents[i], parents[j]);
                }
            }
        }
        let mut seen = BTreeSet::from([x]);
        let mut stack = vec![x];
        while let Some(n) = stack.pop() {
            if n == y {
                return false;
            }
            for m in adj.get(&n).into_iter().flatten() {
                if !z.contains(m) && seen.insert(*m) {
                    stack.push(*m);
                }
            }
        }
        true
    }

    /// Back-door criterion for X → D with adjustment set Z.
    pub fn backdoor_ok(&self, x: Var, z: &BTreeSet<Var>) -> bool {
        let desc = self.descendants(x);
        if z.iter().any(|v| desc.contains(v)) {
            return false;
        }
        self.d_separated(x, Var::D, z, true)
    }
}

/// Factual mechanism states from canonical hidden signals and the callback simulation.
pub fn factual_mechanisms(signals: &BTreeSet<String>, callback_suspicious: bool) -> BTreeSet<Var> {
    let has = |s: &[&str]| s.iter().any(|x| signals.contains(*x));
    let mut out = BTreeSet::new();
    let rules: [(Var, &[&str]); 7] = [
        (Var::SA, &["sender_domain_spoof", "vendor_name_spoof"]),
        (Var::BA, &["bank_override_attempt", "bank_account_mismatch", "shared_bank_account"]),
        (Var::DP, &["duplicate_near_match"]),
        (Var::AC, &["approval_threshold_evasion", "policy_bypass_attempt", "urgent_payment_pressure", "instruction_override_attempt"]),
        (Var::PL, &["shared_bank_account", "coordinated_timing"]),
        (Var::VL, &["vendor_account_takeover_suspected", "vendor_master_mismatch"]),
        (
            Var::DI,
            &["price_mismatch", "quantity_mismatch", "total_mismatch", "missing_receipt", "partial_receipt_only", "missing_po", "invalid_invoice_date", "tax_id_mismatch", "receipt_date_mismatch", "duplicate_po_reference"],
        ),
    ];
    for (v, s) in rules {
        if has(s) {
            out.insert(v);
        }
    }
    if callback_suspicious || has(&["callback_verification_failed", "callback_suspicious_confirm", "callback_dispute_confirmed"]) {
        out.insert(Var::CR);
    }
    out
}

/// Mechanisms a counterfactual text talks about.
pub fn mentioned_mechanisms(text: &str) -> BTreeSet<Var> {
    let words: BTreeSet<String> = crate::dimensions::cf_words(text).into_iter().collect();
    let norm = ls_core::text::normalize_text(text);
    let any = |ws: &[&str]| ws.iter().any(|w| words.contains(*w));
    let mut out = BTreeSet::new();
    let table: [(Var, &[&str]); 7] = [
        (Var::SA, &["sender", "domain", "email", "spoof", "spoofed"]),
        (Var::BA, &["bank", "iban", "remittance", "account"]),
        (Var::CR, &["callback"]),
        (Var::DP, &["duplicate", "duplicates", "ledger"]),
        (Var::AC, &["approval", "threshold", "policy", "workflow", "override", "urgent", "urgency"]),
        (Var::PL, &["campaign", "coordinated", "linked", "shared"]),
        (Var::DI, &["receipt", "po", "price", "quantity", "total", "tampered", "reconciliation"]),
    ];
    for (v, ws) in table {
        if any(ws) {
            out.insert(v);
        }
    }
    if norm.contains("vendor master") || norm.contains("vendor history") || norm.contains("takeover") {
        out.insert(Var::VL);
    }
    out
}

/// The alternative decision a counterfactual claims ("… would PAY …").
pub fn claimed_decision(text: &str) -> Option<Decision> {
    let words = crate::dimensions::cf_words(text);
    let map = |w: &str| match w {
        "pay" | "paid" | "release" | "released" | "approve" | "approved" => Some(Decision::Pay),
        "hold" | "held" => Some(Decision::Hold),
        "review" => Some(Decision::NeedsReview),
        "escalate" | "escalated" | "escalating" => Some(Decision::EscalateFraud),
        _ => None,
    };
    let after_would = words.iter().position(|w| w == "would" || w == "could").and_then(|i| words[i + 1..].iter().find_map(|w| map(w)));
    after_would.or_else(|| words.iter().find_map(|w| map(w)))
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CausalReport {
    pub hypothesis: String,
    pub mechanisms: Vec<String>,
    pub factual_suspicious: Vec<String>,
    pub observed: Vec<String>,
    pub association_score: f64,
    pub intervention_score: f64,
    pub d_separation_score: f64,
    pub counterfactual_score: f64,
    /// The SCM's counterfactual decision under do(mentioned mechanisms = clean).
    pub scm_counterfactual_decision: Option<String>,
    pub claimed_counterfactual_decision: Option<String>,
    pub overall: f64,
    pub adjustment: f64,
}

pub struct CausalInput<'a> {
    pub hypothesis: Hypothesis,
    pub signals: &'a BTreeSet<String>,
    pub callback_suspicious: bool,
    pub has_email: bool,
    pub successful: &'a BTreeSet<ActionName>,
    pub decision_correct: bool,
    pub code_f1: f64,
    pub counterfactual: &'a str,
}

pub fn grade(i: &CausalInput<'_>) -> CausalReport {
    let factual = factual_mechanisms(i.signals, i.callback_suspicious);
    let scm = Scm::build(i.hypothesis, &factual, i.has_email);
    let mechs = scm.mechanisms();
    let observed: BTreeSet<Var> = i.successful.iter().flat_map(|a| observes(*a).iter().copied()).filter(|v| scm.index.contains_key(v)).collect();
    let association = 0.55 * f64::from(u8::from(i.decision_correct)) + 0.45 * i.code_f1;
    let intervention = if mechs.is_empty() { 1.0 } else { mechs.iter().filter(|m| observed.contains(m)).count() as f64 / mechs.len() as f64 };
    let dsep = if mechs.is_empty() {
        1.0
    } else {
        mechs
            .iter()
            .filter(|x| {
                let z: BTreeSet<Var> = observed.iter().copied().filter(|v| v != *x).collect();
                observed.contains(x) && scm.backdoor_ok(**x, &z)
            })
            .count() as f64
            / mechs.len() as f64
    };
    let factual_decision = scm.evaluate(&BTreeMap::new()).1;
    let mentioned: BTreeSet<Var> = mentioned_mechanisms(i.counterfactual).into_iter().filter(|m| scm.index.contains_key(m)).collect();
    let claimed = claimed_decision(i.counterfactual);
    let (cf, scm_cf) = if i.counterfactual.trim().is_empty() || mentioned.is_empty() {
        (0.0, None)
    } else {
        let predicted = scm.counterfactual_clean(&mentioned);
        let relevance = mentioned.intersection(&factual).count() as f64 / mentioned.len() as f64;
        let agreement = match claimed {
            Some(c) if c == predicted => 1.0,
            // Right direction (less severe than the factual decision, as the SCM predicts) earns half.
            Some(c) if severity(c) < severity(factual_decision) && severity(predicted) < severity(factual_decision) => 0.5,
            _ => 0.0,
        };
        let relevance = if factual.is_empty() { 1.0 } else { relevance };
        (0.5 * relevance + 0.5 * agreement, Some(predicted))
    };
    let overall = 0.35 * association + 0.25 * intervention + 0.20 * dsep + 0.20 * cf;
    let r = crate::round4;
    CausalReport {
        hypothesis: i.hypothesis.as_str().to_owned(),
        mechanisms: mechs.iter().map(|m| m.name().to_owned()).collect(),
        factual_suspicious: factual.iter().map(|m| m.name().to_owned()).collect(),
        observed: observed.iter().map(|m| m.name().to_owned()).collect(),
        association_score: r(association),
        intervention_score: r(intervention),
        d_separation_score: r(dsep),
        counterfactual_score: r(cf),
        scm_counterfactual_decision: scm_cf.map(|d| d.as_str().to_owned()),
        claimed_counterfactual_decision: claimed.map(|d| d.as_str().to_owned()),
        overall: r(overall),
        adjustment: r(0.05 * (overall - 0.5)),
    }
}

fn severity(d: Decision) -> u8 {
    match d {
        Decision::Pay => 0,
        Decision::NeedsReview => 1,
        Decision::Hold => 2,
        Decision::EscalateFraud => 3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[Var]) -> BTreeSet<Var> {
        v.iter().copied().collect()
    }

    #[test]
    fn interventions_and_counterfactuals() {
        // CEO fraud with a spoofed sender, bypassed approval and a suspicious callback.
        let factual = set(&[Var::SA, Var::AC, Var::CR]);
        let scm = Scm::build(Hypothesis::CeoBec, &factual, true);
        assert_eq!(scm.evaluate(&BTreeMap::new()).1, Decision::EscalateFraud);
        // Fixing the sender alone is not enough: the callback still disputes.
        assert_eq!(scm.counterfactual_clean(&set(&[Var::SA])), Decision::EscalateFraud);
        assert_eq!(scm.counterfactual_clean(&set(&[Var::SA, Var::CR])), Decision::NeedsReview);
        assert_eq!(scm.counterfactual_clean(&set(&[Var::SA, Var::CR, Var::AC])), Decision::Pay);
        // do(VL = 1) propagates to its children through the equations.
        let scm2 = Scm::build(Hypothesis::PhantomVendor, &set(&[Var::VL]), false);
        let (w, d) = scm2.evaluate(&BTreeMap::from([(Var::VL, 1)]));
        assert_eq!((w[&Var::BA], d), (1, Decision::EscalateFraud));
    }

    #[test]
    fn d_separation_and_backdoor() {
        let scm = Scm::build(Hypothesis::BankFraud, &set(&[Var::BA, Var::CR]), false);
        // BA ← LH → CR → D is open unless CR (and DI) are observed.
        assert!(!scm.backdoor_ok(Var::BA, &BTreeSet::new()));
        assert!(!scm.backdoor_ok(Var::BA, &set(&[Var::CR])));
        assert!(scm.backdoor_ok(Var::BA, &set(&[Var::CR, Var::DI])));
        // Conditioning on the payment outcome (a collider of D and LH) opens a path.
        assert!(!scm.d_separated(Var::BA, Var::D, &set(&[Var::CR, Var::DI, Var::PO]), true));
        // A conditioned endpoint is not trivially separated.
        assert!(!scm.d_separated(Var::BA, Var::D, &set(&[Var::BA]), true));
    }

    #[test]
    fn grade_rewards_observation_and_aligned_counterfactual() {
        let signals: BTreeSet<String> = ["bank_override_attempt".to_owned()].into();
        let all: BTreeSet<ActionName> =
            [ActionName::CompareBankAccount, ActionName::RequestCallbackVerification, ActionName::Ocr].into();
        let none = BTreeSet::new();
        let cf = "If the bank account had matched the vendor master and the callback had confirmed it, we would pay.";
        let mk = |acts, cf| CausalInput {
            hypothesis: Hypothesis::BankFraud,
            signals: &signals,
            callback_suspicious: true,
            has_email: false,
            successful: acts,
            decision_correct: true,
            code_f1: 1.0,
            counterfactual: cf,
        };
        let good = grade(&mk(&all, cf));
        let bare = grade(&mk(&none, ""));
        assert!(good.adjustment > 0.02 && good.d_separation_score == 1.0, "{good:?}");
        assert_eq!(good.scm_counterfactual_decision.as_deref(), Some("PAY"));
        assert!(bare.adjustment < good.adjustment);
        assert!(good.adjustment <= 0.025 && bare.adjustment >= -0.025);
    }
}
