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

use crate::dimensions::CounterfactualText;
use ls_core::enums::ReasonCode;
use ls_core::{ActionName, Decision, Hypothesis};
use serde::Serialize;
use std::collections::BTreeSet;
use std::ops::{BitAnd, BitOr, Index, Not};

/// Declares the variables once, in `Ord` order (the latent hypothesis, the mechanisms, the
/// decision and the outcome), with their names: the enum, `Var::ALL`, `MECHANISMS`, `Var::name`.
macro_rules! variables {
    (
        $latent:ident => $latent_name:literal,
        mechanisms { $( $mechanism:ident => $mechanism_name:literal, )* }
        $( $var:ident => $name:literal, )*
    ) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        pub enum Var { $latent, $( $mechanism, )* $( $var, )* }

        pub const MECHANISMS: [Var; [$( $mechanism_name ),*].len()] = [$( Var::$mechanism, )*];

        impl Var {
            pub const COUNT: usize = 1 + MECHANISMS.len() + [$( $name ),*].len();
            /// Every variable in declaration (= `Ord`) order.
            pub const ALL: [Var; Var::COUNT] = [Var::$latent, $( Var::$mechanism, )* $( Var::$var, )*];

            pub fn name(self) -> &'static str {
                match self {
                    Var::$latent => $latent_name,
                    $( Var::$mechanism => $mechanism_name, )*
                    $( Var::$var => $name, )*
                }
            }
        }
    };
}

variables! {
    LH => "latent_hypothesis",
    mechanisms {
        VL => "vendor_legitimacy",
        SA => "sender_authenticity",
        BA => "bank_alignment",
        DI => "document_integrity",
        AC => "approval_chain_integrity",
        DP => "duplicate_pattern",
        PL => "portfolio_linkage",
        CR => "callback_result",
    }
    D => "decision",
    PO => "payment_outcome",
}

impl Var {
    /// Mechanism parents among mechanisms (besides LH).
    fn mech_parents(self) -> &'static [Var] {
        match self {
            Var::SA | Var::BA | Var::CR => &[Var::VL],
            Var::DP => &[Var::DI],
            _ => &[],
        }
    }
}

/// A set of variables as a bit mask (bit i is `Var::ALL[i]`); iterates in `Var` order, like a
/// `BTreeSet<Var>`. The model has 11 variables, so every graph query is a few mask operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct VarSet(u16);

impl VarSet {
    pub const EMPTY: VarSet = VarSet(0);

    pub fn of(v: Var) -> Self {
        VarSet(1 << v as u16)
    }
    pub fn contains(self, v: Var) -> bool {
        self.0 & (1 << v as u16) != 0
    }
    pub fn insert(&mut self, v: Var) {
        self.0 |= 1 << v as u16;
    }
    pub fn with(self, v: Var) -> Self {
        VarSet(self.0 | 1 << v as u16)
    }
    pub fn without(self, v: Var) -> Self {
        VarSet(self.0 & !(1 << v as u16))
    }
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    pub fn iter(self) -> impl Iterator<Item = Var> {
        Var::ALL.into_iter().filter(move |v| self.contains(*v))
    }
}

impl BitOr for VarSet {
    type Output = VarSet;
    fn bitor(self, o: VarSet) -> VarSet {
        VarSet(self.0 | o.0)
    }
}

impl BitAnd for VarSet {
    type Output = VarSet;
    fn bitand(self, o: VarSet) -> VarSet {
        VarSet(self.0 & o.0)
    }
}

impl Not for VarSet {
    type Output = VarSet;
    fn not(self) -> VarSet {
        VarSet(!self.0 & ((1 << Var::COUNT) - 1))
    }
}

impl FromIterator<Var> for VarSet {
    fn from_iter<I: IntoIterator<Item = Var>>(it: I) -> Self {
        it.into_iter().fold(VarSet::EMPTY, VarSet::with)
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
        Ocr
        | Zoom
        | GetDocCrop
        | LookupPo
        | LookupReceipt
        | RequestPoReconciliation
        | RequestAdditionalReceiptEvidence => &[Var::DI],
        _ => &[],
    }
}

/// Values of the variables in one world (uninstantiated variables read 0, clean).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct World([u8; Var::COUNT]);

impl Index<Var> for World {
    type Output = u8;
    fn index(&self, v: Var) -> &u8 {
        &self.0[v as usize]
    }
}

/// The instantiated model: a DAG over at most 11 variables, held as parent and child masks.
pub struct Scm {
    /// The instantiated variables (LH, the relevant mechanisms, D, PO).
    pub nodes: VarSet,
    parents: [VarSet; Var::COUNT],
    children: [VarSet; Var::COUNT],
    pub hypothesis: Hypothesis,
    driven: VarSet,
    /// Abduced exogenous values per mechanism: (U_M, F_M).
    noise: [(bool, bool); Var::COUNT],
}

impl Scm {
    /// Build for a case: `factual` are the mechanism states the case exhibits; `has_email` gates SA.
    pub fn build(hypothesis: Hypothesis, factual: VarSet, has_email: bool) -> Self {
        let driven: VarSet = drives(hypothesis).iter().copied().collect();
        let mut relevant = (driven | factual).with(Var::DI).with(Var::BA);
        if !has_email {
            relevant = relevant.without(Var::SA);
        }
        let mechanisms = relevant & MECHANISMS.into_iter().collect();
        let mut scm = Scm {
            nodes: mechanisms.with(Var::LH).with(Var::D).with(Var::PO),
            parents: [VarSet::EMPTY; Var::COUNT],
            children: [VarSet::EMPTY; Var::COUNT],
            hypothesis,
            driven,
            noise: [(false, false); Var::COUNT],
        };
        for m in mechanisms.iter() {
            scm.add_edge(Var::LH, m);
            for &p in m.mech_parents().iter().filter(|p| mechanisms.contains(**p)) {
                scm.add_edge(p, m);
            }
            scm.add_edge(m, Var::D);
        }
        scm.add_edge(Var::D, Var::PO);
        scm.add_edge(Var::LH, Var::PO);
        scm.abduct(factual);
        scm
    }

    fn add_edge(&mut self, from: Var, to: Var) {
        self.parents[to as usize].insert(from);
        self.children[from as usize].insert(to);
    }

    /// The instantiated mechanisms (iterated in `MECHANISMS` order).
    pub fn mechanisms(&self) -> VarSet {
        self.nodes & MECHANISMS.into_iter().collect()
    }

    /// Abduction: the least noise that reproduces the factual mechanism states. Mechanisms are
    /// visited in `Var` order, which is topological (VL before SA/BA/CR, DI before DP).
    fn abduct(&mut self, factual: VarSet) {
        let mut on_now = VarSet::EMPTY;
        for m in self.mechanisms().iter() {
            let parent_on = m.mech_parents().iter().any(|p| on_now.contains(*p));
            let on = factual.contains(m);
            let u = on && self.driven.contains(m);
            let f = on && !u && !parent_on;
            self.noise[m as usize] = (u, f);
            if on || parent_on {
                on_now.insert(m);
            }
        }
    }

    /// Evaluate the structural equations under `do(interventions)` (a later entry for the same
    /// variable wins).
    pub fn evaluate(&self, interventions: &[(Var, u8)]) -> (World, Decision) {
        let mut w = World::default();
        for m in self.mechanisms().iter() {
            w.0[m as usize] =
                if let Some((_, v)) = interventions.iter().rev().find(|(x, _)| *x == m) {
                    *v
                } else {
                    let (u, f) = self.noise[m as usize];
                    let parent_on = m.mech_parents().iter().any(|p| w[*p] == 1);
                    u8::from((self.driven.contains(m) && u) || parent_on || f)
                };
        }
        let on = |v: Var| w[v] == 1;
        let d = if [Var::SA, Var::BA, Var::CR, Var::PL, Var::VL]
            .iter()
            .any(|v| on(*v))
        {
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
        w.0[Var::D as usize] = d as u8;
        w.0[Var::PO as usize] = po;
        (w, d)
    }

    /// Counterfactual decision had the named mechanisms been clean.
    pub fn counterfactual_clean(&self, mechanisms: VarSet) -> Decision {
        let iv: Vec<(Var, u8)> = (mechanisms & self.nodes).iter().map(|m| (m, 0)).collect();
        self.evaluate(&iv).1
    }

    fn descendants(&self, v: Var) -> VarSet {
        let mut out = VarSet::EMPTY;
        let mut frontier = VarSet::of(v);
        while !frontier.is_empty() {
            let next = frontier
                .iter()
                .fold(VarSet::EMPTY, |acc, n| acc | self.children[n as usize])
                & !out;
            out = out | next;
            frontier = next;
        }
        out
    }

    /// d-separation of x and y given z (ancestral moral graph), optionally without x's out-edges.
    pub fn d_separated(&self, x: Var, y: Var, z: VarSet, cut_out_of_x: bool) -> bool {
        if z.contains(x) || z.contains(y) {
            // A conditioned endpoint is not "trivially separated": the query is ill-posed.
            return false;
        }
        let parents = |v: Var| {
            let p = self.parents[v as usize];
            if cut_out_of_x {
                p.without(x)
            } else {
                p
            }
        };
        // Ancestral set of {x, y} ∪ z.
        let mut anc = z.with(x).with(y);
        loop {
            let next = anc.iter().fold(anc, |acc, v| acc | parents(v));
            if next == anc {
                break;
            }
            anc = next;
        }
        // Moral graph over the ancestral set: every edge undirected, co-parents married. The
        // parents of an ancestral node are ancestral themselves.
        let mut adj = [VarSet::EMPTY; Var::COUNT];
        for child in anc.iter() {
            let ps = parents(child);
            for p in ps.iter() {
                adj[p as usize] = adj[p as usize] | ps.without(p).with(child);
                adj[child as usize].insert(p);
            }
        }
        // Reachability from x avoiding z.
        let mut seen = VarSet::of(x);
        let mut frontier = seen;
        while !frontier.is_empty() {
            let next = frontier
                .iter()
                .fold(VarSet::EMPTY, |acc, n| acc | adj[n as usize])
                & !z
                & !seen;
            seen = seen | next;
            frontier = next;
        }
        !seen.contains(y)
    }

    /// Back-door criterion for X → D with adjustment set Z.
    pub fn backdoor_ok(&self, x: Var, z: VarSet) -> bool {
        if !(z & self.descendants(x)).is_empty() {
            return false;
        }
        self.d_separated(x, Var::D, z, true)
    }
}

/// Factual mechanism states from canonical hidden signals and the callback simulation.
pub fn factual_mechanisms(signals: &BTreeSet<ReasonCode>, callback_suspicious: bool) -> VarSet {
    let has = |s: &[ReasonCode]| s.iter().any(|x| signals.contains(x));
    let mut out = VarSet::EMPTY;
    let rules: [(Var, &[ReasonCode]); 7] = [
        (
            Var::SA,
            &[ReasonCode::SenderDomainSpoof, ReasonCode::VendorNameSpoof],
        ),
        (
            Var::BA,
            &[
                ReasonCode::BankOverrideAttempt,
                ReasonCode::BankAccountMismatch,
                ReasonCode::SharedBankAccount,
            ],
        ),
        (Var::DP, &[ReasonCode::DuplicateNearMatch]),
        (
            Var::AC,
            &[
                ReasonCode::ApprovalThresholdEvasion,
                ReasonCode::PolicyBypassAttempt,
                ReasonCode::UrgentPaymentPressure,
                ReasonCode::InstructionOverrideAttempt,
            ],
        ),
        (
            Var::PL,
            &[ReasonCode::SharedBankAccount, ReasonCode::CoordinatedTiming],
        ),
        (
            Var::VL,
            &[
                ReasonCode::VendorAccountTakeoverSuspected,
                ReasonCode::VendorMasterMismatch,
            ],
        ),
        (
            Var::DI,
            &[
                ReasonCode::PriceMismatch,
                ReasonCode::QuantityMismatch,
                ReasonCode::TotalMismatch,
                ReasonCode::MissingReceipt,
                ReasonCode::PartialReceiptOnly,
                ReasonCode::MissingPo,
                ReasonCode::InvalidInvoiceDate,
                ReasonCode::TaxIdMismatch,
                ReasonCode::ReceiptDateMismatch,
                ReasonCode::DuplicatePoReference,
            ],
        ),
    ];
    for (v, s) in rules {
        if has(s) {
            out.insert(v);
        }
    }
    if callback_suspicious
        || has(&[
            ReasonCode::CallbackVerificationFailed,
            ReasonCode::CallbackSuspiciousConfirm,
            ReasonCode::CallbackDisputeConfirmed,
        ])
    {
        out.insert(Var::CR);
    }
    out
}

/// Mechanisms a counterfactual text talks about.
pub fn mentioned_mechanisms(cf: &CounterfactualText<'_>) -> VarSet {
    let any = |ws: &[&str]| ws.iter().any(|w| cf.has_word(w));
    let mut out = VarSet::EMPTY;
    let table: [(Var, &[&str]); 7] = [
        (Var::SA, &["sender", "domain", "email", "spoof", "spoofed"]),
        (Var::BA, &["bank", "iban", "remittance", "account"]),
        (Var::CR, &["callback"]),
        (Var::DP, &["duplicate", "duplicates", "ledger"]),
        (
            Var::AC,
            &[
                "approval",
                "threshold",
                "policy",
                "workflow",
                "override",
                "urgent",
                "urgency",
            ],
        ),
        (Var::PL, &["campaign", "coordinated", "linked", "shared"]),
        (
            Var::DI,
            &[
                "receipt",
                "po",
                "price",
                "quantity",
                "total",
                "tampered",
                "reconciliation",
            ],
        ),
    ];
    for (v, ws) in table {
        if any(ws) {
            out.insert(v);
        }
    }
    let norm = &cf.normalized;
    if norm.contains("vendor master")
        || norm.contains("vendor history")
        || norm.contains("takeover")
    {
        out.insert(Var::VL);
    }
    out
}

/// The alternative decision a counterfactual claims ("… would PAY …").
pub fn claimed_decision(cf: &CounterfactualText<'_>) -> Option<Decision> {
    let map = |w: &str| match w {
        "pay" | "paid" | "release" | "released" | "approve" | "approved" => Some(Decision::Pay),
        "hold" | "held" => Some(Decision::Hold),
        "review" => Some(Decision::NeedsReview),
        "escalate" | "escalated" | "escalating" => Some(Decision::EscalateFraud),
        _ => None,
    };
    let mut words = cf.words();
    let after_would = words
        .by_ref()
        .position(|w| w == "would" || w == "could")
        .and_then(|_| words.find_map(map));
    after_would.or_else(|| cf.words().find_map(map))
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
    /// Canonical gold signals.
    pub signals: &'a BTreeSet<ReasonCode>,
    pub callback_suspicious: bool,
    pub has_email: bool,
    pub successful: &'a BTreeSet<ActionName>,
    pub decision_correct: bool,
    pub code_f1: f64,
    pub counterfactual: &'a CounterfactualText<'a>,
}

pub fn grade(i: &CausalInput<'_>) -> CausalReport {
    let factual = factual_mechanisms(i.signals, i.callback_suspicious);
    let scm = Scm::build(i.hypothesis, factual, i.has_email);
    let mechs = scm.mechanisms();
    let observed = i
        .successful
        .iter()
        .flat_map(|a| observes(*a).iter().copied())
        .collect::<VarSet>()
        & mechs;
    let association = 0.55 * f64::from(u8::from(i.decision_correct)) + 0.45 * i.code_f1;
    let intervention = if mechs.is_empty() {
        1.0
    } else {
        (mechs & observed).len() as f64 / mechs.len() as f64
    };
    let dsep = if mechs.is_empty() {
        1.0
    } else {
        mechs
            .iter()
            .filter(|&x| observed.contains(x) && scm.backdoor_ok(x, observed.without(x)))
            .count() as f64
            / mechs.len() as f64
    };
    let factual_decision = scm.evaluate(&[]).1;
    let mentioned = mentioned_mechanisms(i.counterfactual) & scm.nodes;
    let claimed = claimed_decision(i.counterfactual);
    let (cf, scm_cf) = if i.counterfactual.text.trim().is_empty() || mentioned.is_empty() {
        (0.0, None)
    } else {
        let predicted = scm.counterfactual_clean(mentioned);
        let relevance = (mentioned & factual).len() as f64 / mentioned.len() as f64;
        let agreement = match claimed {
            Some(c) if c == predicted => 1.0,
            // Right direction (less severe than the factual decision, as the SCM predicts) earns half.
            Some(c)
                if severity(c) < severity(factual_decision)
                    && severity(predicted) < severity(factual_decision) =>
            {
                0.5
            }
            _ => 0.0,
        };
        let relevance = if factual.is_empty() { 1.0 } else { relevance };
        (0.5 * relevance + 0.5 * agreement, Some(predicted))
    };
    let overall = 0.35 * association + 0.25 * intervention + 0.20 * dsep + 0.20 * cf;
    let r = crate::round4;
    let names = |s: VarSet| s.iter().map(|m| m.name().to_owned()).collect();
    CausalReport {
        hypothesis: i.hypothesis.as_str().to_owned(),
        mechanisms: names(mechs),
        factual_suspicious: names(factual),
        observed: names(observed),
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
    use std::collections::{BTreeMap, BTreeSet};

    fn set(v: &[Var]) -> VarSet {
        v.iter().copied().collect()
    }

    #[test]
    fn interventions_and_counterfactuals() {
        // CEO fraud with a spoofed sender, bypassed approval and a suspicious callback.
        let factual = set(&[Var::SA, Var::AC, Var::CR]);
        let scm = Scm::build(Hypothesis::CeoBec, factual, true);
        assert_eq!(scm.evaluate(&[]).1, Decision::EscalateFraud);
        // Fixing the sender alone is not enough: the callback still disputes.
        assert_eq!(
            scm.counterfactual_clean(set(&[Var::SA])),
            Decision::EscalateFraud
        );
        assert_eq!(
            scm.counterfactual_clean(set(&[Var::SA, Var::CR])),
            Decision::NeedsReview
        );
        assert_eq!(
            scm.counterfactual_clean(set(&[Var::SA, Var::CR, Var::AC])),
            Decision::Pay
        );
        // do(VL = 1) propagates to its children through the equations.
        let scm2 = Scm::build(Hypothesis::PhantomVendor, set(&[Var::VL]), false);
        let (w, d) = scm2.evaluate(&[(Var::VL, 1)]);
        assert_eq!((w[Var::BA], d), (1, Decision::EscalateFraud));
    }

    #[test]
    fn d_separation_and_backdoor() {
        let scm = Scm::build(Hypothesis::BankFraud, set(&[Var::BA, Var::CR]), false);
        // BA ← LH → CR → D is open unless CR (and DI) are observed.
        assert!(!scm.backdoor_ok(Var::BA, VarSet::EMPTY));
        assert!(!scm.backdoor_ok(Var::BA, set(&[Var::CR])));
        assert!(scm.backdoor_ok(Var::BA, set(&[Var::CR, Var::DI])));
        // Conditioning on the payment outcome (a collider of D and LH) opens a path.
        assert!(!scm.d_separated(Var::BA, Var::D, set(&[Var::CR, Var::DI, Var::PO]), true));
        // A conditioned endpoint is not trivially separated.
        assert!(!scm.d_separated(Var::BA, Var::D, set(&[Var::BA]), true));
    }

    /// The model's edges, written out independently of `Scm`'s masks.
    fn reference_edges(h: Hypothesis, factual: VarSet, has_email: bool) -> Vec<(Var, Var)> {
        let mut relevant: BTreeSet<Var> = drives(h).iter().copied().chain(factual.iter()).collect();
        relevant.insert(Var::DI);
        relevant.insert(Var::BA);
        if !has_email {
            relevant.remove(&Var::SA);
        }
        let mut edges = Vec::new();
        for &m in MECHANISMS.iter().filter(|m| relevant.contains(m)) {
            edges.push((Var::LH, m));
            edges.extend(
                m.mech_parents()
                    .iter()
                    .filter(|p| relevant.contains(p))
                    .map(|p| (*p, m)),
            );
            edges.push((m, Var::D));
        }
        edges.push((Var::D, Var::PO));
        edges.push((Var::LH, Var::PO));
        edges
    }

    /// d-separation over an edge list with ordered sets (the straightforward formulation).
    fn reference_d_separated(
        all: &[(Var, Var)],
        x: Var,
        y: Var,
        z: &BTreeSet<Var>,
        cut: bool,
    ) -> bool {
        if z.contains(&x) || z.contains(&y) {
            return false;
        }
        let edges: Vec<(Var, Var)> = all
            .iter()
            .copied()
            .filter(|(a, _)| !(cut && *a == x))
            .collect();
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
        for (a, b) in edges
            .iter()
            .filter(|(a, b)| anc.contains(a) && anc.contains(b))
        {
            link(*a, *b);
        }
        for child in &anc {
            let parents: Vec<Var> = edges
                .iter()
                .filter(|(a, b)| b == child && anc.contains(a))
                .map(|(a, _)| *a)
                .collect();
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

    fn reference_backdoor_ok(edges: &[(Var, Var)], x: Var, z: &BTreeSet<Var>) -> bool {
        let mut desc = BTreeSet::new();
        let mut stack = vec![x];
        while let Some(n) = stack.pop() {
            for &(_, c) in edges.iter().filter(|(a, _)| *a == n) {
                if desc.insert(c) {
                    stack.push(c);
                }
            }
        }
        !z.iter().any(|v| desc.contains(v)) && reference_d_separated(edges, x, Var::D, z, true)
    }

    #[test]
    fn mask_graph_queries_match_the_reference_formulation() {
        // A small deterministic generator of variable subsets.
        let mut state = 0x2545_f491_u32;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state
        };
        let mechanisms: VarSet = MECHANISMS.into_iter().collect();
        for h in Hypothesis::ALL {
            for has_email in [false, true] {
                let factuals = [
                    VarSet::EMPTY,
                    mechanisms,
                    VarSet(next() as u16) & mechanisms,
                    VarSet(next() as u16) & mechanisms,
                ];
                for factual in factuals {
                    let scm = Scm::build(h, factual, has_email);
                    let edges = reference_edges(h, factual, has_email);
                    // Every back-door query grading can ask: x observed, z = the other observed.
                    for observed in (0u16..256).map(|b| VarSet(b << 1) & scm.mechanisms()) {
                        for x in observed.iter() {
                            let z = observed.without(x);
                            let zs: BTreeSet<Var> = z.iter().collect();
                            assert_eq!(
                                scm.backdoor_ok(x, z),
                                reference_backdoor_ok(&edges, x, &zs),
                                "{h:?} {factual:?} {x:?} {z:?}"
                            );
                        }
                    }
                    // Arbitrary d-separation queries, with and without the cut.
                    for _ in 0..6 {
                        let z = VarSet(next() as u16) & !VarSet::EMPTY;
                        let zs: BTreeSet<Var> = z.iter().collect();
                        for x in Var::ALL {
                            for y in Var::ALL {
                                for cut in [false, true] {
                                    assert_eq!(
                                        scm.d_separated(x, y, z, cut),
                                        reference_d_separated(&edges, x, y, &zs, cut),
                                        "{h:?} {x:?} {y:?} {z:?} {cut}"
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn var_set_iterates_in_var_order() {
        let s = set(&[Var::PO, Var::SA, Var::LH, Var::CR]);
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            vec![Var::LH, Var::SA, Var::CR, Var::PO]
        );
        assert_eq!((s.len(), s.without(Var::SA).len(), (!s).len()), (4, 3, 7));
        assert_eq!(
            MECHANISMS
                .into_iter()
                .collect::<VarSet>()
                .iter()
                .collect::<Vec<_>>(),
            MECHANISMS.to_vec()
        );
    }

    #[test]
    fn grade_rewards_observation_and_aligned_counterfactual() {
        let signals: BTreeSet<ReasonCode> = [ReasonCode::BankOverrideAttempt].into();
        let all: BTreeSet<ActionName> = [
            ActionName::CompareBankAccount,
            ActionName::RequestCallbackVerification,
            ActionName::Ocr,
        ]
        .into();
        let none = BTreeSet::new();
        let good_cf = CounterfactualText::new("If the bank account had matched the vendor master and the callback had confirmed it, we would pay.");
        let no_cf = CounterfactualText::new("");
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
        let good = grade(&mk(&all, &good_cf));
        let bare = grade(&mk(&none, &no_cf));
        assert!(
            good.adjustment > 0.02 && good.d_separation_score == 1.0,
            "{good:?}"
        );
        assert_eq!(good.scm_counterfactual_decision.as_deref(), Some("PAY"));
        assert!(bare.adjustment < good.adjustment);
        assert!(good.adjustment <= 0.025 && bare.adjustment >= -0.025);
    }
}
