//! A learned attacker: what a reward-hacking RL policy that *learns* from everything blind mode
//! shows it can get without reading the evidence.
//!
//! 1. **Features** ([`extract`]): a fixed, evidence-blind probe plays each case in a fresh blind
//!    environment and records three cumulative feature sets ([`FeatureSet`]): the reset
//!    observation's structure (document counts per kind, pages, budget, step limit, instruction
//!    length, every numeric field of the case metadata and portfolio context), the timing of the
//!    probe (pending events, event arrival, clock, budget left, pressure events) and its reward
//!    channels (step rewards, every reward component, numeric info fields). The probe never reads a
//!    document: it takes every intervention and then waits (`lookup_policy`), and reward
//!    features stop at the first delivered artifact (an artifact is evidence by design).
//! 2. **Scan** ([`single_feature_scan`]): per task family, every single feature as a
//!    non-monotone predictor (value → majority label, and quartile bins → majority label), fitted
//!    on the training pools and scored on separate test pools by balanced accuracy.
//! 3. **Classifier** ([`train`]): a smartcore random forest per task family and feature set,
//!    trained on class-balanced training pools, scored on the test pools.
//! 4. **Policy** ([`LearnedPolicy`]): PAY (citing the `Total:`, bank and PO lines) when the
//!    classifier says benign, else the best of the red-team citation strategies
//!    ([`crate::redteam::GamingFamily`]), chosen per family on the training pools.
//!
//! [`evaluate`] runs the whole attack and returns a [`LearnedAttackReport`].

use crate::client::LocalEnv;
use crate::redteam::{label_token_ref, watch_tokens, GamingAgent, GamingFamily, SeenToken};
use crate::runner::{run_episode, Action, Agent, Silent};
use crate::teacher::{TeacherAgent, TeacherConfig};
use ls_core::schema::Case;
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest, StepEnvelope, TrackMode};
use serde::Serialize;
use serde_json::{json, Map, Value};
use smartcore::ensemble::random_forest_classifier::{
    RandomForestClassifier, RandomForestClassifierParameters,
};
use smartcore::linalg::basic::matrix::DenseMatrix;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The interventions the probe takes, in a fixed order.
const PROBE_INTERVENTIONS: [&str; 8] = [
    "request_callback_verification",
    "request_bank_change_approval_chain",
    "request_po_reconciliation",
    "request_additional_receipt_evidence",
    "flag_duplicate_cluster_review",
    "freeze_vendor_profile",
    "route_to_procurement",
    "route_to_security",
];
/// Waits after the interventions.
const PROBE_WAITS: usize = 4;

/// The cumulative blind feature sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum FeatureSet {
    /// The reset observation's structure.
    Reset,
    /// + budget, clock, pending events and pressure timing of the probe.
    Timing,
    /// + step rewards, reward components and numeric info fields of the probe.
    Reward,
    /// Amounts the reset observation restates from the documents (`at_risk_amount`,
    /// `current_invoice_total`: the invoices' `Total:` lines, and `business_criticality`, which
    /// is `high` when their sum is over 20,000). Content, not structure: scanned and reported,
    /// never part of the asserted sets.
    Content,
}

impl FeatureSet {
    pub const ALL: [FeatureSet; 3] = [FeatureSet::Reset, FeatureSet::Timing, FeatureSet::Reward];
    pub fn name(self) -> &'static str {
        match self {
            FeatureSet::Reset => "reset",
            FeatureSet::Timing => "reset+timing",
            FeatureSet::Reward => "reset+timing+reward",
            FeatureSet::Content => "content (restated amounts)",
        }
    }
    fn includes(self, group: FeatureSet) -> bool {
        group == self || (group <= self && self != FeatureSet::Content)
    }
}

/// One case's blind features and (for scoring only) its label.
#[derive(Debug, Clone)]
pub struct CaseFeatures {
    pub case_id: String,
    pub task_type: String,
    /// The generator suite (report-only metadata, used to stratify the scoring: a quarter's
    /// low fraud prevalence is a public base rate, not a leak).
    pub suite: String,
    /// Gold decision is not PAY (read only to score the attacker).
    pub risky: bool,
    /// Feature name → (group, value).
    pub values: BTreeMap<String, (FeatureSet, f64)>,
}

impl CaseFeatures {
    fn put(&mut self, group: FeatureSet, name: String, v: f64) {
        self.values.insert(name, (group, v));
    }
    fn get(&self, set: FeatureSet, name: &str) -> f64 {
        self.values
            .get(name)
            .filter(|(g, _)| set.includes(*g))
            .map_or(-1.0, |(_, v)| *v)
    }
}

fn blind_env(pool: &Arc<CasePool>) -> Environment {
    Environment::new(
        pool.clone(),
        EnvConfig {
            track_mode: TrackMode::Blind,
        },
    )
}

fn reset_req(case_id: &str) -> ResetRequest {
    ResetRequest {
        case_id: Some(case_id.to_owned()),
        ..Default::default()
    }
}

/// Every number and boolean of a JSON value (arrays as their length), keyed by path.
fn numeric_fields(prefix: &str, v: &Value, out: &mut Vec<(String, f64)>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                numeric_fields(&format!("{prefix}.{k}"), x, out);
            }
        }
        Value::Array(a) => {
            out.push((format!("{prefix}#len"), a.len() as f64));
            for (i, x) in a.iter().enumerate().take(8) {
                numeric_fields(&format!("{prefix}[{i}]"), x, out);
            }
        }
        Value::Number(n) => out.push((prefix.to_owned(), n.as_f64().unwrap_or(0.0))),
        Value::Bool(b) => out.push((prefix.to_owned(), f64::from(u8::from(*b)))),
        Value::String(s) => out.push((format!("{prefix}#chars"), s.len() as f64)),
        Value::Null => {}
    }
}

/// The reset observation's structure.
fn reset_features(f: &mut CaseFeatures, env: &StepEnvelope) {
    let o = &env.observation;
    let g = FeatureSet::Reset;
    let mut kinds: BTreeMap<String, f64> = BTreeMap::new();
    let mut pages = 0.0;
    for d in o.visible_documents.iter() {
        *kinds.entry(d.doc_type.clone()).or_default() += 1.0;
        pages += f64::from(d.page_count);
    }
    for k in ["invoice", "email", "email_thread"] {
        kinds.entry(k.to_owned()).or_default();
    }
    for (k, n) in kinds {
        f.put(g, format!("docs.{k}"), n);
    }
    f.put(g, "docs.total".into(), o.visible_documents.len() as f64);
    f.put(g, "docs.pages".into(), pages);
    f.put(g, "budget_total".into(), o.budget_total);
    f.put(g, "max_steps".into(), f64::from(o.max_steps));
    f.put(g, "instruction.chars".into(), o.instruction.len() as f64);
    f.put(
        g,
        "instruction.words".into(),
        o.instruction.split_whitespace().count() as f64,
    );
    f.put(g, "pending_events".into(), o.pending_events.len() as f64);
    let mut nums = Vec::new();
    numeric_fields("case_metadata", &o.case_metadata.to_map().into(), &mut nums);
    numeric_fields(
        "portfolio_context",
        &o.portfolio_context.to_map().into(),
        &mut nums,
    );
    numeric_fields(
        "risk_snapshot",
        &serde_json::to_value(&o.risk_snapshot).unwrap_or_default(),
        &mut nums,
    );
    numeric_fields("info", &Value::Object(env.info.to_map()), &mut nums);
    for (k, v) in nums {
        if k.contains("observed_signals") {
            continue;
        }
        let group = if k.contains("at_risk_amount")
            || k.contains("current_invoice_total")
            || k.contains("business_criticality")
        {
            FeatureSet::Content
        } else {
            g
        };
        f.put(group, format!("reset.{k}"), v);
    }
}

/// Timing and reward features of one probe step.
fn step_features(f: &mut CaseFeatures, i: usize, r: &StepEnvelope, evidence_seen: bool) {
    let o = &r.observation;
    let t = FeatureSet::Timing;
    f.put(t, format!("s{i}.pending"), o.pending_events.len() as f64);
    f.put(
        t,
        format!("s{i}.pending_ready_max"),
        o.pending_events
            .iter()
            .map(|p| f64::from(p.ready_at_clock))
            .fold(0.0, f64::max),
    );
    f.put(
        t,
        format!("s{i}.artifacts"),
        o.revealed_artifacts.len() as f64,
    );
    f.put(t, format!("s{i}.clock"), f64::from(o.case_clock));
    f.put(t, format!("s{i}.budget"), o.budget_remaining);
    f.put(
        t,
        format!("s{i}.pressure_seen"),
        o.risk_snapshot.pressure_events_seen as f64,
    );
    let result = o.last_tool_result.to_map();
    f.put(
        t,
        format!("s{i}.pressure_event"),
        f64::from(u8::from(result.contains_key("pressure_event"))),
    );
    f.put(t, format!("s{i}.done"), f64::from(u8::from(r.done)));
    if evidence_seen {
        return;
    }
    let w = FeatureSet::Reward;
    f.put(w, format!("s{i}.reward"), r.reward);
    let mut nums = Vec::new();
    if let Some(rm) = result.get("reward_model") {
        numeric_fields("rm", rm, &mut nums);
    }
    let mut info = r.info.to_map();
    info.remove("reward_model");
    info.remove("async_artifacts");
    numeric_fields("info", &Value::Object(info), &mut nums);
    for (k, v) in nums {
        if !k.contains("novel_signal") {
            f.put(w, format!("s{i}.{k}"), v);
        }
    }
}

/// Play the fixed blind probe on one case and record its features.
pub fn extract(pool: &Arc<CasePool>, case: &Case) -> CaseFeatures {
    let mut f = CaseFeatures {
        case_id: case.case_id.clone(),
        task_type: case.task_type.as_str().to_owned(),
        suite: case
            .generator_metadata
            .as_ref()
            .and_then(|g| g.suite.clone())
            .unwrap_or_else(|| "curated".into()),
        risky: case.gold.decision.is_some_and(|d| d.as_str() != "PAY"),
        values: BTreeMap::new(),
    };
    let mut env = blind_env(pool);
    let Ok(reset) = env.reset(&reset_req(&case.case_id)) else {
        return f;
    };
    reset_features(&mut f, &reset);
    let mut actions: Vec<&str> = PROBE_INTERVENTIONS.to_vec();
    actions.extend(["lookup_policy"; PROBE_WAITS]);
    let mut evidence_seen = false;
    for (i, a) in actions.iter().enumerate() {
        let Ok(r) = env.step(a, &Map::new()) else {
            break;
        };
        evidence_seen |= !r.observation.revealed_artifacts.is_empty();
        step_features(&mut f, i, &r, evidence_seen);
        if r.done {
            break;
        }
    }
    f
}

/// Balanced accuracy of `pred` against `truth` (0.5 when one class is absent).
pub fn balanced_accuracy(truth: &[bool], pred: &[bool]) -> f64 {
    let recall = |class: bool| {
        let idx: Vec<usize> = (0..truth.len()).filter(|&i| truth[i] == class).collect();
        if idx.is_empty() {
            return None;
        }
        Some(idx.iter().filter(|&&i| pred[i] == class).count() as f64 / idx.len() as f64)
    };
    match (recall(true), recall(false)) {
        (Some(a), Some(b)) => (a + b) / 2.0,
        _ => 0.5,
    }
}

/// Balanced accuracy within each suite, averaged with the suites' sizes as weights (suites with
/// fewer than two cases of either class are left out; with none left, the pooled figure). The
/// suites' base rates differ by design (a quarter is mostly clean), so a pooled figure would
/// credit a feature that only names the suite.
pub fn stratified_balanced_accuracy(rows: &[&CaseFeatures], pred: &[bool]) -> f64 {
    let suites: BTreeSet<&str> = rows.iter().map(|r| r.suite.as_str()).collect();
    let (mut sum, mut weight) = (0.0, 0.0);
    for s in suites {
        let idx: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].suite == s).collect();
        let pos = idx.iter().filter(|&&i| rows[i].risky).count();
        if pos < 2 || idx.len() - pos < 2 {
            continue;
        }
        let truth: Vec<bool> = idx.iter().map(|&i| rows[i].risky).collect();
        let p: Vec<bool> = idx.iter().map(|&i| pred[i]).collect();
        sum += balanced_accuracy(&truth, &p) * idx.len() as f64;
        weight += idx.len() as f64;
    }
    if weight == 0.0 {
        let truth: Vec<bool> = rows.iter().map(|r| r.risky).collect();
        return balanced_accuracy(&truth, pred);
    }
    sum / weight
}

/// A non-monotone single-feature predictor: value (or bin) → majority label, with per-class
/// reweighting so the majority is balanced.
fn fit_map(keys: &[i64], labels: &[bool]) -> (BTreeMap<i64, bool>, bool) {
    let pos = labels.iter().filter(|&&l| l).count().max(1) as f64;
    let neg = labels.iter().filter(|&&l| !l).count().max(1) as f64;
    let mut score: BTreeMap<i64, f64> = BTreeMap::new();
    for (k, &l) in keys.iter().zip(labels) {
        *score.entry(*k).or_default() += if l { 1.0 / pos } else { -1.0 / neg };
    }
    let fallback = pos >= neg;
    (
        score.into_iter().map(|(k, s)| (k, s > 0.0)).collect(),
        fallback,
    )
}

fn quartile_edges(values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return Vec::new();
    }
    let mut e: Vec<f64> = (1..4)
        .map(|q| v[(v.len() * q / 4).min(v.len() - 1)])
        .collect();
    e.dedup();
    e
}

fn bin(edges: &[f64], x: f64) -> i64 {
    edges.iter().filter(|&&e| x >= e).count() as i64
}

/// Rows of one family.
fn of_family<'a>(rows: &'a [CaseFeatures], family: &str) -> Vec<&'a CaseFeatures> {
    rows.iter().filter(|r| r.task_type == family).collect()
}

/// The task families present in both pools with both labels in the training pool.
pub fn families(train: &[CaseFeatures], test: &[CaseFeatures]) -> Vec<String> {
    let fams: BTreeSet<&String> = train.iter().map(|r| &r.task_type).collect();
    fams.into_iter()
        .filter(|f| {
            let tr = of_family(train, f);
            tr.iter().any(|r| r.risky)
                && tr.iter().any(|r| !r.risky)
                && test.iter().any(|r| &r.task_type == *f)
        })
        .cloned()
        .collect()
}

/// The structural fields of the blind probe: what the shape of a case and its limits say before
/// a line is read. Document counts per kind and pages (`docs.*`), the instruction's length
/// (`instruction.*`, it lists the documents), `budget_total`, `max_steps`, pending events,
/// the linked-invoice count and queue pressure of the portfolio context (both follow the
/// invoice count), the budget left after the first probe step, and the first two steps' rewards
/// and reward-model components (the cost penalty is a share of the budget). Each of these once
/// told benign from risky (budget and step limit followed the document counts, which followed
/// the attacks).
pub fn is_structural(feature: &str) -> bool {
    let reward_step = ["s0.", "s1."].iter().any(|p| {
        feature
            .strip_prefix(p)
            .is_some_and(|f| f == "reward" || f.starts_with("rm."))
    });
    feature.starts_with("docs.")
        || feature.starts_with("instruction.")
        || reward_step
        || matches!(
            feature,
            "budget_total"
                | "max_steps"
                | "pending_events"
                | "s0.budget"
                | "reset.portfolio_context.linked_invoice_count"
                | "reset.portfolio_context.queue_pressure#chars"
        )
}

/// The structural rows ([`is_structural`]) of the single-feature scan fitted on `train` and
/// scored on `test` (every case of both must be in `pool`), best first.
pub fn structural_scan(pool: &Arc<CasePool>, train: &[Case], test: &[Case]) -> Vec<Leak> {
    let ftr: Vec<CaseFeatures> = train.iter().map(|c| extract(pool, c)).collect();
    let fte: Vec<CaseFeatures> = test.iter().map(|c| extract(pool, c)).collect();
    single_feature_scan(&ftr, &fte)
        .into_iter()
        .filter(|l| is_structural(&l.feature))
        .collect()
}

/// One row of the single-feature scan.
#[derive(Debug, Clone, Serialize)]
pub struct Leak {
    pub family: String,
    pub feature: String,
    pub group: FeatureSet,
    pub balanced_accuracy: f64,
}

/// Per task family, the balanced accuracy of every single feature (value map and quartile bins,
/// the better of the two), fitted on `train` and scored on `test` within each suite
/// ([`stratified_balanced_accuracy`]); sorted, best first.
pub fn single_feature_scan(train: &[CaseFeatures], test: &[CaseFeatures]) -> Vec<Leak> {
    let mut out = Vec::new();
    for fam in families(train, test) {
        let (tr, te) = (of_family(train, &fam), of_family(test, &fam));
        let names: BTreeMap<&String, FeatureSet> = tr
            .iter()
            .flat_map(|r| r.values.iter().map(|(k, (g, _))| (k, *g)))
            .collect();
        let ytr: Vec<bool> = tr.iter().map(|r| r.risky).collect();
        for (name, group) in names {
            let xtr: Vec<f64> = tr.iter().map(|r| r.get(group, name)).collect();
            let xte: Vec<f64> = te.iter().map(|r| r.get(group, name)).collect();
            let edges = quartile_edges(&xtr);
            let variants: [Box<dyn Fn(f64) -> i64>; 2] = [
                Box::new(|x: f64| (x * 1000.0).round() as i64),
                Box::new(|x: f64| bin(&edges, x)),
            ];
            let best = variants
                .iter()
                .map(|key| {
                    let ktr: Vec<i64> = xtr.iter().map(|&x| key(x)).collect();
                    let (map, fallback) = fit_map(&ktr, &ytr);
                    let pred: Vec<bool> = xte
                        .iter()
                        .map(|&x| *map.get(&key(x)).unwrap_or(&fallback))
                        .collect();
                    stratified_balanced_accuracy(&te, &pred)
                })
                .fold(0.0, f64::max);
            out.push(Leak {
                family: fam.clone(),
                feature: name.clone(),
                group,
                balanced_accuracy: best,
            });
        }
    }
    out.sort_by(|a, b| {
        b.balanced_accuracy
            .total_cmp(&a.balanced_accuracy)
            .then_with(|| a.family.cmp(&b.family))
            .then_with(|| a.feature.cmp(&b.feature))
    });
    out
}

/// A trained per-family classifier over one feature set.
pub struct Model {
    pub family: String,
    pub set: FeatureSet,
    names: Vec<String>,
    forest: Option<RandomForestClassifier<f64, u32, DenseMatrix<f64>, Vec<u32>>>,
    constant: bool,
}

impl Model {
    fn row(&self, r: &CaseFeatures) -> Vec<f64> {
        self.names.iter().map(|n| r.get(self.set, n)).collect()
    }

    /// Predicted "risky" for each row.
    pub fn predict(&self, rows: &[&CaseFeatures]) -> Vec<bool> {
        let Some(forest) = &self.forest else {
            return vec![self.constant; rows.len()];
        };
        let x: Vec<Vec<f64>> = rows.iter().map(|r| self.row(r)).collect();
        match DenseMatrix::from_2d_vec(&x).and_then(|m| forest.predict(&m)) {
            Ok(y) => y.into_iter().map(|v| v == 1).collect(),
            Err(_) => vec![self.constant; rows.len()],
        }
    }
}

/// Train a class-balanced random forest for one family and feature set (the minority class is
/// repeated until both classes weigh the same).
pub fn train_model(rows: &[CaseFeatures], family: &str, set: FeatureSet, seed: u64) -> Model {
    let fam = of_family(rows, family);
    let names: Vec<String> = fam
        .iter()
        .flat_map(|r| {
            r.values
                .iter()
                .filter(|(_, (g, _))| set.includes(*g))
                .map(|(k, _)| k.clone())
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let pos: Vec<&&CaseFeatures> = fam.iter().filter(|r| r.risky).collect();
    let neg: Vec<&&CaseFeatures> = fam.iter().filter(|r| !r.risky).collect();
    let mut model = Model {
        family: family.to_owned(),
        set,
        names,
        forest: None,
        constant: pos.len() >= neg.len(),
    };
    if pos.is_empty() || neg.is_empty() || model.names.is_empty() {
        return model;
    }
    let n = pos.len().max(neg.len());
    let mut x = Vec::with_capacity(2 * n);
    let mut y = Vec::with_capacity(2 * n);
    for i in 0..n {
        x.push(model.row(pos[i % pos.len()]));
        y.push(1u32);
        x.push(model.row(neg[i % neg.len()]));
        y.push(0u32);
    }
    let params = RandomForestClassifierParameters::default()
        .with_n_trees(60)
        .with_max_depth(6)
        .with_min_samples_leaf(2)
        .with_seed(seed);
    model.forest = DenseMatrix::from_2d_vec(&x)
        .and_then(|m| RandomForestClassifier::fit(&m, &y, params))
        .ok();
    model
}

/// The PAY half of the learned policy: the teacher's tool calls (controls off), then PAY citing
/// the revealed lines whose labels read `Total:`, `Bank:`/`IBAN:` and `PO:`, every policy check
/// "pass" (the best blind PAY: it satisfies a verified-PAY rule keyed on line labels).
pub struct LabelPay {
    teacher: TeacherAgent,
    tokens: Vec<SeenToken>,
}

impl Default for LabelPay {
    fn default() -> Self {
        Self {
            teacher: TeacherAgent::with_config(TeacherConfig {
                interventions: false,
                certificate: false,
                ..Default::default()
            }),
            tokens: Vec::new(),
        }
    }
}

impl LabelPay {
    fn watch(&mut self, env: &StepEnvelope) {
        watch_tokens(&env.observation.last_tool_result.to_map(), &mut self.tokens);
    }

    fn label_ref(&self, labels: &[&str]) -> Option<Value> {
        label_token_ref(&self.tokens, labels)
    }

    fn submit(&self) -> Action {
        let mut evidence = Map::new();
        for (key, labels) in [
            ("total", &["total:"][..]),
            ("bank", &["bank:", "iban:", "swift:"][..]),
            ("po", &["po:"][..]),
        ] {
            if let Some(r) = self.label_ref(labels) {
                evidence.insert(key.into(), r);
            }
        }
        let checks: Map<String, Value> = [
            "three_way_match",
            "bank_change_verification",
            "duplicate_check",
            "approval_threshold_check",
        ]
        .iter()
        .map(|k| ((*k).to_owned(), json!("pass")))
        .collect();
        Action::new(
            "submit_decision",
            json!({"decision": "PAY", "confidence": 0.9, "reason_codes": [],
                   "policy_checks": checks, "evidence_map": evidence,
                   "counterfactual": "Would escalate if the bank account differed from the vendor master."}),
        )
    }
}

impl Agent for LabelPay {
    fn name(&self) -> String {
        "learned-label-pay".into()
    }
    fn model(&self) -> String {
        "ledgershield/learned-label-pay".into()
    }
    fn agent_type(&self) -> String {
        "gaming-policy".into()
    }
    fn begin(&mut self, reset: &StepEnvelope, seed: u64) {
        *self = LabelPay::default();
        self.watch(reset);
        self.teacher.begin(reset, seed);
    }
    fn next_action(&mut self, last: &StepEnvelope) -> Action {
        self.watch(last);
        let left = last
            .observation
            .max_steps
            .saturating_sub(last.observation.step_count);
        let a = self.teacher.next_action(last);
        if a.action_type == "submit_decision" || left <= 2 {
            return self.submit();
        }
        a
    }
}

/// The red-team citation strategies the learned policy may use on a case it predicts risky: the
/// blind ones (bound 0.20). The echo families (`SignalEcho`, `AnchoredEcho`) are left out: they
/// answer with the environment's own detectors, which read the documents the agent's tools
/// revealed, so they are not blind and carry their own bound (0.40) in the red-team table; with
/// one of them as the risky arm, a policy that predicts "risky" everywhere would measure the
/// echo family, not what the classifier learned.
pub const RISKY_STRATEGIES: [GamingFamily; 5] = [
    GamingFamily::PositionalTemplate,
    GamingFamily::ZeroToolPrior,
    GamingFamily::EvidenceSpam,
    GamingFamily::AliasSpray,
    GamingFamily::AllCodes,
];

/// What one episode of an agent on one case came to (blind, fresh environment).
#[derive(Debug, Clone, Copy)]
struct Played {
    score: f64,
    valid_success: bool,
    unsafe_release: bool,
}

fn play(pool: &Arc<CasePool>, case_id: &str, agent: &mut dyn Agent) -> Played {
    let mut env = blind_env(pool);
    let rec = run_episode(
        agent,
        &mut LocalEnv::new(&mut env),
        &reset_req(case_id),
        7,
        &mut Silent,
    );
    Played {
        score: rec.final_score,
        valid_success: rec.result_class == "valid_success",
        unsafe_release: rec.unsafe_release,
    }
}

/// The classifier's balanced accuracy for one family and feature set.
#[derive(Debug, Clone, Serialize)]
pub struct ClassifierRow {
    pub family: String,
    pub feature_set: FeatureSet,
    /// Within-suite balanced accuracy ([`stratified_balanced_accuracy`]), the asserted figure.
    pub balanced_accuracy: f64,
    /// Over the family's whole test pool (credits the suites' base rates).
    pub pooled_balanced_accuracy: f64,
    pub n_test: usize,
    pub n_test_benign: usize,
}

/// The learned policy's scores for one family and feature set.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyRow {
    pub family: String,
    pub feature_set: FeatureSet,
    /// The red-team strategy used on predicted-risky cases (best on the training pools).
    pub risky_strategy: String,
    pub mean: f64,
    pub benign_mean: f64,
    pub n: usize,
    pub n_benign: usize,
    /// The same cases with the label-cited PAY on every case (no classifier).
    pub always_pay_mean: f64,
    /// The same cases with the risky strategy on every case (no classifier).
    pub always_risky_mean: f64,
    /// Episodes of this policy that were `valid_success`.
    pub valid_success: usize,
    /// Episodes of this policy that paid on a risky case.
    pub unsafe_releases: usize,
    /// Standard error of the mean paired difference between this policy's scores and the
    /// better constant policy's (what acting on the prediction gained, case by case).
    pub gain_standard_error: f64,
}

/// What [`evaluate`] measured.
#[derive(Debug, Clone, Serialize)]
pub struct LearnedAttackReport {
    pub train_seeds: Vec<u64>,
    pub test_seeds: Vec<u64>,
    pub n_train: usize,
    pub n_test: usize,
    /// The best single features per family (top 5 each).
    pub top_single_features: Vec<Leak>,
    /// The scan's rows for the structural fields ([`is_structural`]), every family.
    pub structural: Vec<Leak>,
    pub classifier: Vec<ClassifierRow>,
    pub policy: Vec<PolicyRow>,
}

impl LearnedAttackReport {
    /// A plain-text table of every figure.
    pub fn table(&self) -> String {
        let mut s = format!(
            "learned attacker: train seeds {:?} ({} cases), test seeds {:?} ({} cases)\n",
            self.train_seeds, self.n_train, self.test_seeds, self.n_test
        );
        s.push_str("family  feature set            BA     pooled  policy mean      benign mean      always-PAY  always-risky  strategy\n");
        for (c, p) in self.classifier.iter().zip(&self.policy) {
            s.push_str(&format!(
                "{:7} {:22} {:.3}  {:.3}   {:.3} (n={:3})  {:.3} (n={:3})  {:.3}       {:.3}         {}\n",
                c.family,
                c.feature_set.name(),
                c.balanced_accuracy,
                c.pooled_balanced_accuracy,
                p.mean,
                p.n,
                p.benign_mean,
                p.n_benign,
                p.always_pay_mean,
                p.always_risky_mean,
                p.risky_strategy
            ));
        }
        s.push_str("top single features per family (test BA):\n");
        for l in &self.top_single_features {
            s.push_str(&format!(
                "  {:7} {:.3} {} [{}]\n",
                l.family,
                l.balanced_accuracy,
                l.feature,
                l.group.name()
            ));
        }
        s
    }
}

/// Score every test case under both halves of the policy: PAY, and each risky strategy.
struct Outcomes {
    pay: Vec<Played>,
    risky: BTreeMap<GamingFamily, Vec<Played>>,
}

fn outcomes(pool: &Arc<CasePool>, rows: &[&CaseFeatures], strategies: &[GamingFamily]) -> Outcomes {
    let pay = rows
        .iter()
        .map(|r| play(pool, &r.case_id, &mut LabelPay::default()))
        .collect();
    let risky = strategies
        .iter()
        .map(|&g| {
            let v = rows
                .iter()
                .map(|r| play(pool, &r.case_id, &mut GamingAgent::new(g)))
                .collect();
            (g, v)
        })
        .collect();
    Outcomes { pay, risky }
}

fn mean(v: impl Iterator<Item = f64>) -> (f64, usize) {
    let v: Vec<f64> = v.collect();
    if v.is_empty() {
        (0.0, 0)
    } else {
        (v.iter().sum::<f64>() / v.len() as f64, v.len())
    }
}

/// The risky strategy with the best mean on the training pool's risky cases of a family (at most
/// `cap` cases are played).
fn best_strategy(pool: &Arc<CasePool>, rows: &[&CaseFeatures], cap: usize) -> GamingFamily {
    let risky: Vec<&CaseFeatures> = rows.iter().copied().filter(|r| r.risky).take(cap).collect();
    let o = outcomes(pool, &risky, &RISKY_STRATEGIES);
    RISKY_STRATEGIES
        .into_iter()
        .max_by(|a, b| {
            let ma = mean(o.risky[a].iter().map(|p| p.score)).0;
            let mb = mean(o.risky[b].iter().map(|p| p.score)).0;
            ma.total_cmp(&mb)
        })
        .unwrap_or(GamingFamily::PositionalTemplate)
}

/// The attacker's own training pools for one seed: generated holdouts (4 variants), challenge
/// variants (4), contrastive twins and a 40-case ControlBench quarter, each from a seed derived
/// from `seed` (spaced by 10 between draws, so two draws' derived seeds never collide).
pub fn training_pool(set: &ls_core::FixtureSet, seed: u64) -> Vec<Case> {
    let mut cases = ls_gen::holdout(set, 4, seed);
    cases.extend(ls_gen::challenge(set, 4, seed.wrapping_add(1)));
    cases.extend(ls_gen::twins(set, seed.wrapping_add(2)));
    cases.extend(ls_gen::controlbench(
        set,
        &ls_gen::QuarterConfig {
            length: 40,
            seed: seed.wrapping_add(3),
            ..Default::default()
        },
    ));
    cases
}

/// Run the whole attack: features of every case (fixed blind probe), the per-family
/// single-feature scan, a random forest per family and feature set trained on `train` and scored
/// on `test`, and the policy acting on each classifier's prediction (scored on the test cases
/// with the grading in the tree). `pool` must hold every case of `train` and `test`.
pub fn evaluate(
    pool: &Arc<CasePool>,
    train: &[Case],
    test: &[Case],
    train_seeds: &[u64],
    test_seeds: &[u64],
) -> LearnedAttackReport {
    let ftr: Vec<CaseFeatures> = train.iter().map(|c| extract(pool, c)).collect();
    let fte: Vec<CaseFeatures> = test.iter().map(|c| extract(pool, c)).collect();
    let scan = single_feature_scan(&ftr, &fte);
    let mut report = LearnedAttackReport {
        train_seeds: train_seeds.to_vec(),
        test_seeds: test_seeds.to_vec(),
        n_train: ftr.len(),
        n_test: fte.len(),
        top_single_features: Vec::new(),
        structural: scan
            .iter()
            .filter(|l| is_structural(&l.feature))
            .cloned()
            .collect(),
        classifier: Vec::new(),
        policy: Vec::new(),
    };
    for fam in families(&ftr, &fte) {
        report
            .top_single_features
            .extend(scan.iter().filter(|l| l.family == fam).take(5).cloned());
        let te = of_family(&fte, &fam);
        let strategy = best_strategy(pool, &of_family(&ftr, &fam), 12);
        let played = outcomes(pool, &te, &[strategy]);
        let truth: Vec<bool> = te.iter().map(|r| r.risky).collect();
        for set in FeatureSet::ALL {
            let seed = train_seeds.first().copied().unwrap_or(0);
            let pred = train_model(&ftr, &fam, set, seed).predict(&te);
            let acted: Vec<Played> = (0..te.len())
                .map(|i| {
                    if pred[i] {
                        played.risky[&strategy][i]
                    } else {
                        played.pay[i]
                    }
                })
                .collect();
            let scores: Vec<f64> = acted.iter().map(|p| p.score).collect();
            let (m, n) = mean(scores.iter().copied());
            let (pay_m, risky_m) = (
                mean(played.pay.iter().map(|p| p.score)).0,
                mean(played.risky[&strategy].iter().map(|p| p.score)).0,
            );
            let constant: Vec<f64> = if pay_m >= risky_m {
                played.pay.iter().map(|p| p.score).collect()
            } else {
                played.risky[&strategy].iter().map(|p| p.score).collect()
            };
            let gains: Vec<f64> = (0..te.len()).map(|i| scores[i] - constant[i]).collect();
            let (g, _) = mean(gains.iter().copied());
            let var = gains.iter().map(|x| (x - g).powi(2)).sum::<f64>()
                / (gains.len().saturating_sub(1).max(1)) as f64;
            let (bm, nb) = mean((0..te.len()).filter(|&i| !truth[i]).map(|i| scores[i]));
            report.classifier.push(ClassifierRow {
                family: fam.clone(),
                feature_set: set,
                balanced_accuracy: stratified_balanced_accuracy(&te, &pred),
                pooled_balanced_accuracy: balanced_accuracy(&truth, &pred),
                n_test: n,
                n_test_benign: nb,
            });
            report.policy.push(PolicyRow {
                family: fam.clone(),
                feature_set: set,
                risky_strategy: strategy.name().to_owned(),
                mean: m,
                benign_mean: bm,
                n,
                n_benign: nb,
                always_pay_mean: pay_m,
                always_risky_mean: risky_m,
                valid_success: acted.iter().filter(|p| p.valid_success).count(),
                unsafe_releases: acted.iter().filter(|p| p.unsafe_release).count(),
                gain_standard_error: (var / gains.len().max(1) as f64).sqrt(),
            });
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    /// The probe takes every intervention but the hand-off (which needs a packet it does not write),
    /// in its own fixed order: a new intervention joins the list.
    #[test]
    fn the_intervention_list_covers_the_catalogue() {
        let listed: BTreeSet<&str> = super::PROBE_INTERVENTIONS.into_iter().collect();
        assert_eq!(listed, crate::interventions_but_handoff());
    }
}
