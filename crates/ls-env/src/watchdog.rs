//! Analyst/watchdog dual-agent mode with a Stackelberg audit strategy.
//!
//! The watchdog (leader) commits to a mixed audit strategy over `audit_payment`,
//! `audit_identity`, `audit_duplicate`; the analyst (follower) best-responds with a decision. The
//! strong Stackelberg equilibrium is computed exactly with the multiple-LPs method (Conitzer &
//! Sandholm 2006): for every follower pure response `j`, solve
//! `max_x Σ_i x_i L[i][j]` s.t. `Σ_i x_i (F[i][j] − F[i][k]) ≥ 0 ∀k`, `Σ x = 1`, `x ≥ 0`
//! with a dense two-phase simplex, and keep the best feasible `j`. Payoffs are expectations over
//! the analyst's observable risk belief (`1 − P(safe)` of the SPRT posterior) and scale with the
//! invoice value — never the hidden label. The strategy sets the veto threshold and the focus
//! weights of the suspicion update; suspicion feeds slot 35 of the RL vector and the terminal
//! `info.watchdog` verdict (diagnostic: the verdict does not change the grade).

use ls_core::text::round4;
use ls_core::{ActionName, Decision, WatchdogAudit};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

const EPS: f64 = 1e-9;

/// Pivots one simplex phase may take. Bland's rule cannot cycle, so an LP of the audit game's
/// size (3 mixed strategies, 4 responses) ends in a handful; running out means rounding has
/// defeated the rule, and the tableau is then not an optimum.
const MAX_PIVOTS: usize = 1000;

/// Why an LP has no optimum to report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LpFailure {
    /// Dimensions disagree, `b` has a negative or non-finite entry, or the LP is larger than
    /// this dense solver takes (64 constraints, 256 variables).
    Invalid,
    Infeasible,
    Unbounded,
    /// A phase used [`MAX_PIVOTS`] pivots without reaching an optimum.
    PivotLimit,
}

/// Maximise `c·x` subject to `A x = b` (`b ≥ 0`) and `x ≥ 0` (two-phase simplex, Bland's rule).
/// `None` when infeasible, unbounded, invalid, or out of pivots: never a tableau that is not
/// an optimum.
pub fn simplex_eq(c: &[f64], a: &[Vec<f64>], b: &[f64]) -> Option<Vec<f64>> {
    simplex_eq_within(c, a, b, MAX_PIVOTS).ok()
}

/// [`simplex_eq`] with each phase limited to `max_pivots` pivots, saying why it failed.
fn simplex_eq_within(
    c: &[f64],
    a: &[Vec<f64>],
    b: &[f64],
    max_pivots: usize,
) -> Result<Vec<f64>, LpFailure> {
    let m = a.len();
    let n = c.len();
    if b.len() != m
        || a.iter().any(|r| r.len() != n)
        || b.iter().any(|v| *v < -EPS || !v.is_finite())
        || m > 64
        || n > 256
    {
        return Err(LpFailure::Invalid);
    }
    let (cols, rhs) = (n + m + 1, n + m);
    let (mut t, mut basis, mut obj) = phase_one(a, b, n);
    match run(&mut t, &mut obj, &mut basis, n + m, max_pivots) {
        // Phase 1 is bounded (artificials sum to at most Σb), so "unbounded" is rounding.
        Err(stop) => return Err(stop),
        Ok(()) if obj[rhs] < -1e-7 => return Err(LpFailure::Infeasible),
        Ok(()) => {}
    }
    // Drive zero-level artificials out of the basis where possible.
    for i in 0..m {
        if basis[i] >= n {
            if let Some(j) = (0..n).find(|&j| t[i][j].abs() > EPS) {
                pivot(&mut t, &mut obj, i, j);
                basis[i] = j;
            }
        }
    }
    // Phase 2.
    let mut obj = vec![0.0; cols];
    for j in 0..n {
        obj[j] = -c[j];
    }
    for (i, &bv) in basis.iter().enumerate() {
        let f = obj[bv];
        if f.abs() > 0.0 {
            for j in 0..cols {
                obj[j] -= f * t[i][j];
            }
        }
    }
    run(&mut t, &mut obj, &mut basis, n, max_pivots)?;
    Ok(basic_solution(&t, &basis, n, a, b))
}

/// Phase 1's tableau for `A x = b` with `n` variables: one artificial per row, all basic, and
/// the objective "maximise −Σ artificials" in terms of the non-basic columns.
fn phase_one(a: &[Vec<f64>], b: &[f64], n: usize) -> (Vec<Vec<f64>>, Vec<usize>, Vec<f64>) {
    let m = a.len();
    let (cols, rhs) = (n + m + 1, n + m);
    let t: Vec<Vec<f64>> = (0..m)
        .map(|i| {
            let mut row = vec![0.0; cols];
            row[..n].copy_from_slice(&a[i]);
            row[n + i] = 1.0;
            row[rhs] = b[i];
            row
        })
        .collect();
    let basis: Vec<usize> = (n..n + m).collect();
    let mut obj = vec![0.0; cols];
    obj[n..n + m].iter_mut().for_each(|v| *v = 1.0);
    for row in &t {
        for j in 0..cols {
            obj[j] -= row[j];
        }
    }
    (t, basis, obj)
}

/// The values of the `n` structural variables at an optimal tableau.
fn basic_solution(
    t: &[Vec<f64>],
    basis: &[usize],
    n: usize,
    a: &[Vec<f64>],
    b: &[f64],
) -> Vec<f64> {
    let rhs = t.first().map_or(0, |row| row.len() - 1);
    let mut x = vec![0.0; n];
    for (i, &bv) in basis.iter().enumerate() {
        if bv < n {
            x[bv] = t[i][rhs];
        }
    }
    debug_assert!(
        x.iter().all(|v| *v >= -1e-7),
        "an optimum is feasible: x ≥ 0"
    );
    debug_assert!(
        a.iter().zip(b).all(|(row, bi)| {
            let terms: f64 = row.iter().zip(&x).map(|(r, v)| (r * v).abs()).sum();
            let lhs: f64 = row.iter().zip(&x).map(|(r, v)| r * v).sum();
            (lhs - bi).abs() <= 1e-6 * (1.0 + terms + bi.abs())
        }),
        "an optimum is feasible: A x = b"
    );
    x
}

fn pivot(t: &mut [Vec<f64>], obj: &mut [f64], r: usize, c: usize) {
    let p = t[r][c];
    debug_assert!(p.abs() > EPS, "pivot on a non-zero element, got {p}");
    for v in t[r].iter_mut() {
        *v /= p;
    }
    let prow = t[r].clone();
    for (i, row) in t.iter_mut().enumerate() {
        if i != r {
            let f = row[c];
            if f != 0.0 {
                for (v, pv) in row.iter_mut().zip(&prow) {
                    *v -= f * pv;
                }
            }
        }
    }
    let f = obj[c];
    if f != 0.0 {
        for (v, pv) in obj.iter_mut().zip(&prow) {
            *v -= f * pv;
        }
    }
}

/// Pivot until optimal (`Ok`), unbounded, or out of pivots (`max_pivots`); only columns
/// `< allowed` may enter.
fn run(
    t: &mut [Vec<f64>],
    obj: &mut [f64],
    basis: &mut [usize],
    allowed: usize,
    max_pivots: usize,
) -> Result<(), LpFailure> {
    let rhs = obj.len() - 1;
    let mut pivots = 0;
    loop {
        let Some(e) = (0..allowed).find(|&j| obj[j] < -EPS) else {
            return Ok(());
        };
        if pivots == max_pivots {
            return Err(LpFailure::PivotLimit);
        }
        debug_assert!(!basis.contains(&e), "column {e} enters while basic");
        let mut best: Option<(usize, f64)> = None;
        for (i, row) in t.iter().enumerate() {
            if row[e] > EPS {
                let ratio = row[rhs] / row[e];
                match best {
                    Some((bi, br))
                        if ratio > br + EPS
                            || ((ratio - br).abs() <= EPS && basis[i] > basis[bi]) => {}
                    _ => best = Some((i, ratio)),
                }
            }
        }
        let Some((r, _)) = best else {
            return Err(LpFailure::Unbounded);
        };
        pivot(t, obj, r, e);
        basis[r] = e;
        pivots += 1;
        debug_assert!(
            t.iter()
                .all(|row| row[rhs] >= -1e-7 * (1.0 + row[rhs].abs())),
            "the ratio test keeps the basis feasible"
        );
    }
}

/// Strong Stackelberg equilibrium by the multiple-LPs method. `leader[i][j]`, `follower[i][j]`:
/// payoffs when the leader plays `i` and the follower `j`. Returns (mix, follower response,
/// leader value); `None` for malformed tables, when no response can be induced, or when an LP
/// ran out of pivots (its response might have been the best, so no answer is the equilibrium).
pub fn solve_sse(leader: &[Vec<f64>], follower: &[Vec<f64>]) -> Option<(Vec<f64>, usize, f64)> {
    solve_sse_within(leader, follower, MAX_PIVOTS)
}

fn solve_sse_within(
    leader: &[Vec<f64>],
    follower: &[Vec<f64>],
    max_pivots: usize,
) -> Option<(Vec<f64>, usize, f64)> {
    let l = leader.len();
    let f = leader.first()?.len();
    if l == 0
        || f == 0
        || follower.len() != l
        || follower.iter().chain(leader).any(|r| r.len() != f)
    {
        return None;
    }
    let mut best: Option<(Vec<f64>, usize, f64)> = None;
    for j in 0..f {
        // Variables: x_0..x_{l-1}, surplus s_k for k != j.
        let others: Vec<usize> = (0..f).filter(|&k| k != j).collect();
        let n = l + others.len();
        let mut a = Vec::new();
        let mut b = Vec::new();
        for (si, &k) in others.iter().enumerate() {
            let mut row = vec![0.0; n];
            for i in 0..l {
                row[i] = follower[i][j] - follower[i][k];
            }
            row[l + si] = -1.0;
            a.push(row);
            b.push(0.0);
        }
        let mut sum = vec![0.0; n];
        sum[..l].iter_mut().for_each(|v| *v = 1.0);
        a.push(sum);
        b.push(1.0);
        let mut c = vec![0.0; n];
        for i in 0..l {
            c[i] = leader[i][j];
        }
        let x = match simplex_eq_within(&c, &a, &b, max_pivots) {
            Ok(x) => x,
            // Response `j` cannot be induced by any mix (the LP is bounded: Σx = 1).
            Err(LpFailure::Infeasible | LpFailure::Unbounded) => continue,
            Err(LpFailure::PivotLimit | LpFailure::Invalid) => return None,
        };
        let mix: Vec<f64> = x[..l].iter().map(|v| v.max(0.0)).collect();
        let value: f64 = (0..l).map(|i| mix[i] * leader[i][j]).sum();
        if best.as_ref().is_none_or(|(_, _, bv)| value > bv + 1e-9) {
            best = Some((mix, j, value));
        }
    }
    debug_assert!(
        best.as_ref()
            .is_none_or(|(mix, _, _)| (mix.iter().sum::<f64>() - 1.0).abs() < 1e-6),
        "an equilibrium mix is a distribution"
    );
    best
}

pub const LEADER_ACTIONS: [&str; 3] = ["audit_payment", "audit_identity", "audit_duplicate"];
pub const FOLLOWER_ACTIONS: [&str; 4] = ["pay", "hold", "needs_review", "escalate_fraud"];

/// Payoff tables as expectations over the observable risk belief `p_risky`; the cost of a risky
/// payment grows with the invoice value.
pub fn payoff_tables(p_risky: f64, invoice_total: f64) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
    let p = if p_risky.is_finite() {
        p_risky.clamp(0.0, 1.0)
    } else {
        0.5
    };
    let v = (0.75 + (invoice_total.max(1.0) / 10_000.0).ln_1p() * 0.25).clamp(0.75, 1.6);
    let mix = |risky: f64, clean: f64| p * risky + (1.0 - p) * clean;
    // Analyst (follower): pay, hold, needs_review, escalate.
    let analyst = vec![
        vec![mix(-0.8 * v, 0.7), 0.5, 0.55, mix(0.6, 0.2)],
        vec![mix(-0.7 * v, 0.5), 0.45, 0.5, mix(0.65, 0.25)],
        vec![mix(-0.6 * v, 0.45), 0.55, 0.52, mix(0.58, 0.2)],
    ];
    // Watchdog (leader).
    let watchdog = vec![
        vec![
            mix(-v, 0.6),
            mix(0.5, 0.1),
            mix(0.45, 0.15),
            mix(0.75, -0.2),
        ],
        vec![
            mix(-0.9 * v, 0.55),
            mix(0.4, 0.1),
            mix(0.5, 0.15),
            mix(0.8, -0.15),
        ],
        vec![
            mix(-0.8 * v, 0.5),
            mix(0.55, 0.1),
            mix(0.5, 0.12),
            mix(0.7, -0.15),
        ],
    ];
    (watchdog, analyst)
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditStrategy {
    pub method: &'static str,
    pub p_risky: f64,
    pub audit_probabilities: BTreeMap<&'static str, f64>,
    pub focus_weights: BTreeMap<&'static str, f64>,
    pub anticipated_analyst_response: &'static str,
    pub leader_value: f64,
    pub veto_threshold: f64,
    pub expected_false_positive_rate: f64,
    pub expected_detection_rate: f64,
}

/// Solve the audit game for the current belief.
pub fn audit_strategy(p_risky: f64, invoice_total: f64) -> Arc<AuditStrategy> {
    // A pure function solved by several LPs. Every episode of a case starts from the same belief
    // and careful trajectories revisit the same beliefs, so solutions are memoised per thread
    // (bounded: cleared when full; results never depend on the memo).
    const MEMO_CAPACITY: usize = 4096;
    thread_local! {
        static MEMO: std::cell::RefCell<std::collections::HashMap<(u64, u64), Arc<AuditStrategy>>> = std::cell::RefCell::new(std::collections::HashMap::new());
    }
    let key = (p_risky.to_bits(), invoice_total.to_bits());
    if let Some(hit) = MEMO.with(|m| m.borrow().get(&key).cloned()) {
        return hit;
    }
    // Shared, not copied: the watchdog, its verdict and the memo hold the same solution.
    let solved = Arc::new(solve_audit_strategy(p_risky, invoice_total));
    MEMO.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() >= MEMO_CAPACITY {
            m.clear();
        }
        m.insert(key, Arc::clone(&solved));
    });
    solved
}

fn solve_audit_strategy(p_risky: f64, invoice_total: f64) -> AuditStrategy {
    solve_audit_strategy_within(p_risky, invoice_total, MAX_PIVOTS)
}

/// The strategy, or, where the game has no solution (no LP reached an optimum within
/// `max_pivots`), the uniform mix against an escalating analyst, named as such in `method`.
fn solve_audit_strategy_within(
    p_risky: f64,
    invoice_total: f64,
    max_pivots: usize,
) -> AuditStrategy {
    let (leader, follower) = payoff_tables(p_risky, invoice_total);
    let solved = solve_sse_within(&leader, &follower, max_pivots);
    let method = match solved {
        Some(_) => "strong_stackelberg_multiple_lps",
        None => "uniform_fallback_unsolved",
    };
    let (mix, resp, value) = solved.unwrap_or((vec![1.0 / 3.0; 3], 3, 0.0));
    debug_assert_eq!(mix.len(), LEADER_ACTIONS.len(), "one probability per audit");
    let p = |i: usize| mix.get(i).copied().unwrap_or(0.0);
    let probs: BTreeMap<&'static str, f64> = LEADER_ACTIONS
        .iter()
        .enumerate()
        .map(|(i, a)| (*a, round4(p(i))))
        .collect();
    let focus: BTreeMap<&'static str, f64> = [
        (focus_key(WatchdogAudit::Payment), p(0) + 0.2),
        (focus_key(WatchdogAudit::Identity), p(1) + 0.2),
        (focus_key(WatchdogAudit::Duplicate), p(2) + 0.2),
    ]
    .into_iter()
    .map(|(k, v)| (k, round4(v)))
    .collect();
    AuditStrategy {
        method,
        p_risky: round4(p_risky),
        audit_probabilities: probs,
        focus_weights: focus,
        anticipated_analyst_response: FOLLOWER_ACTIONS
            .get(resp)
            .copied()
            .unwrap_or("escalate_fraud"),
        leader_value: round4(value),
        veto_threshold: round4(0.55 + 0.25 * p(0)),
        expected_false_positive_rate: round4((0.25 - 0.1 * p(1)).max(0.05)),
        expected_detection_rate: round4((0.72 + 0.18 * p(0) + 0.08 * p(2)).min(0.99)),
    }
}

/// The key of an audit's focus weight in [`AuditStrategy::focus_weights`].
fn focus_key(audit: WatchdogAudit) -> &'static str {
    match audit {
        WatchdogAudit::Payment => "bank_change",
        WatchdogAudit::Identity => "identity",
        WatchdogAudit::Duplicate => "duplicate",
    }
}

fn signal_weight(s: &str) -> f64 {
    match s {
        "bank_override_attempt" => 0.15,
        "vendor_account_takeover_suspected" => 0.18,
        "sender_domain_spoof" => 0.12,
        "callback_verification_failed" => 0.14,
        "callback_dispute_confirmed" => 0.16,
        "duplicate_near_match" => 0.10,
        "policy_bypass_attempt" => 0.13,
        "shared_bank_account" => 0.11,
        "coordinated_timing" => 0.09,
        "approval_threshold_evasion" => 0.08,
        _ => 0.0,
    }
}

const HIGH_RISK: [&str; 6] = [
    "bank_override_attempt",
    "vendor_account_takeover_suspected",
    "callback_verification_failed",
    "callback_dispute_confirmed",
    "sender_domain_spoof",
    "policy_bypass_attempt",
];

/// Watchdog state of one episode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Watchdog {
    pub suspicion: f64,
    pub strategy: Arc<AuditStrategy>,
    pub veto_count: u32,
    pub escalation_count: u32,
    pub warning_count: u32,
    pub approval_count: u32,
    pub steps_observed: u32,
    /// Verdicts of a second agent playing the watchdog role (not serialized with the state).
    #[serde(skip)]
    pub external: Vec<ExternalVerdict>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WatchdogVerdict {
    pub verdict: &'static str,
    pub reason: &'static str,
    pub analyst_score: f64,
    pub watchdog_bonus: f64,
    pub watchdog_penalty: f64,
    pub watchdog_suspicion_final: f64,
    pub watchdog_veto_count: u32,
    pub watchdog_escalation_count: u32,
    pub joint_score: f64,
    /// The audit strategy; `None` (and absent from the JSON) where the track hides it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<Arc<AuditStrategy>>,
}

impl Watchdog {
    pub fn new(p_risky: f64, invoice_total: f64) -> Self {
        Self {
            suspicion: 0.0,
            strategy: audit_strategy(p_risky, invoice_total),
            veto_count: 0,
            escalation_count: 0,
            warning_count: 0,
            approval_count: 0,
            steps_observed: 0,
            external: Vec::new(),
        }
    }

    /// Re-solve the audit game for an updated belief.
    pub fn resolve(&mut self, p_risky: f64, invoice_total: f64) {
        self.strategy = audit_strategy(p_risky, invoice_total);
    }

    /// Suspicion update for one valid step (what the watchdog sees: the action, visible risk
    /// signals and pending events; never the analyst's confidence).
    pub fn observe(
        &mut self,
        action: ActionName,
        observed_signals: &[String],
        pending_events: usize,
    ) {
        // The action's own weight and focus are columns of its row in the action table.
        let spec = action.spec();
        let base = spec.watchdog_suspicion;
        let signals: f64 = observed_signals
            .iter()
            .map(|s| signal_weight(s))
            .sum::<f64>()
            * 0.3;
        let focus = |k: &str| self.strategy.focus_weights.get(k).copied().unwrap_or(0.0);
        let focus_term = 0.05 * spec.watchdog_focus.map_or(0.0, |a| focus(focus_key(a)));
        debug_assert!(signals >= 0.0, "revealed signals never calm the watchdog");
        self.suspicion = round4(
            (self.suspicion + base + signals + 0.03 * pending_events as f64 + focus_term)
                .clamp(0.0, 1.0),
        );
        self.steps_observed += 1;
        debug_assert!(
            (0.0..=1.0).contains(&self.suspicion),
            "suspicion is a probability"
        );
    }

    /// Verdict on the submitted decision and the joint score (diagnostic).
    pub fn verdict(
        &mut self,
        decision: Decision,
        observed_signals: &[String],
        interventions: &[ActionName],
        analyst_score: f64,
        risk_observed: bool,
    ) -> WatchdogVerdict {
        let high = observed_signals
            .iter()
            .any(|s| HIGH_RISK.contains(&s.as_str()));
        let hardened = interventions.iter().any(|a| {
            matches!(
                a,
                ActionName::RequestCallbackVerification
                    | ActionName::FreezeVendorProfile
                    | ActionName::RouteToSecurity
            )
        });
        let distinct: std::collections::BTreeSet<&ActionName> = interventions.iter().collect();
        let pay = decision == Decision::Pay;
        let (verdict, reason) = if pay && high && !hardened {
            ("VETO", "pay_with_high_risk_signal_and_no_hardening")
        } else if pay && self.suspicion > self.strategy.veto_threshold {
            ("VETO", "pay_above_veto_threshold")
        } else if high && distinct.len() < 2 {
            (
                "ESCALATE",
                "high_risk_signal_with_fewer_than_two_interventions",
            )
        } else if self.suspicion > 0.35 {
            ("WARN", "elevated_suspicion")
        } else {
            ("APPROVE", "no_objection")
        };
        match verdict {
            "VETO" => self.veto_count += 1,
            "ESCALATE" => self.escalation_count += 1,
            "WARN" => self.warning_count += 1,
            _ => self.approval_count += 1,
        }
        let (bonus, penalty) = joint_terms(
            risk_observed,
            pay,
            self.veto_count,
            self.approval_count,
            self.warning_count,
        );
        WatchdogVerdict {
            verdict,
            reason,
            analyst_score,
            watchdog_bonus: round4(bonus),
            watchdog_penalty: round4(penalty),
            watchdog_suspicion_final: self.suspicion,
            watchdog_veto_count: self.veto_count,
            watchdog_escalation_count: self.escalation_count,
            joint_score: round4((analyst_score + bonus + penalty).clamp(0.01, 0.99)),
            strategy: Some(Arc::clone(&self.strategy)),
        }
    }
}

/// The documented joint-score terms (bonus, penalty): +0.15 if risk was observed, the analyst
/// paid and the watchdog vetoed; −0.20 if risky, paid and no veto; +0.08 if clean, paid and
/// approved; −0.12 if clean and vetoed; −0.05 for more than five warnings.
pub fn joint_terms(
    risk_observed: bool,
    pay: bool,
    vetoes: u32,
    approvals: u32,
    warnings: u32,
) -> (f64, f64) {
    let (mut bonus, mut penalty) = (0.0, 0.0);
    if risk_observed && pay && vetoes > 0 {
        bonus += 0.15;
    }
    if risk_observed && pay && vetoes == 0 {
        penalty -= 0.20;
    }
    if !risk_observed && pay && approvals > 0 {
        bonus += 0.08;
    }
    if !risk_observed && vetoes > 0 {
        penalty -= 0.12;
    }
    if warnings > 5 {
        penalty -= 0.05;
    }
    (bonus, penalty)
}

/// A verdict a second agent issues in the watchdog role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum VerdictKind {
    Veto,
    Escalate,
    Warn,
    Approve,
}

impl VerdictKind {
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "veto" => Some(Self::Veto),
            "escalate" => Some(Self::Escalate),
            "warn" => Some(Self::Warn),
            "approve" => Some(Self::Approve),
            _ => None,
        }
    }
}

/// One recorded external verdict: after how many analyst steps, what, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExternalVerdict {
    pub after_step: u32,
    pub verdict: VerdictKind,
    pub reason: String,
}

/// Most verdicts an external watchdog may record per episode.
pub const MAX_EXTERNAL_VERDICTS: usize = 64;
pub(crate) const MAX_REASON_CHARS: usize = 500;

/// One analyst step as the watchdog sees it (never the analyst's confidence, never hidden state).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamStep {
    pub step: u32,
    pub analyst_action: ActionName,
    pub payload: ls_core::episode::SentPayload,
    /// `success: <first 120 characters of the message>` or `failed: <message>`.
    pub result_summary: String,
}

/// The filtered watchdog observation of an analyst's episode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WatchdogObservation {
    pub case_id: String,
    pub steps: Vec<StreamStep>,
    pub visible_risk_signals: Vec<String>,
    pub budget_remaining: f64,
    pub intervention_actions: Vec<ActionName>,
    pub pending_event_count: usize,
    pub pressure_events_seen: usize,
    pub episode_done: bool,
    pub verdicts: Vec<ExternalVerdict>,
}

/// Joint analyst + watchdog score of a finished episode with the second agent's verdicts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JointScore {
    pub analyst_score: f64,
    pub analyst_decision: String,
    pub risk_observed: bool,
    pub watchdog_veto_count: u32,
    pub watchdog_escalation_count: u32,
    pub watchdog_warning_count: u32,
    pub watchdog_approval_count: u32,
    pub watchdog_bonus: f64,
    pub watchdog_penalty: f64,
    pub joint_score: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joint_terms_follow_the_documented_table() {
        assert_eq!(joint_terms(true, true, 1, 0, 0), (0.15, 0.0));
        assert_eq!(joint_terms(true, true, 0, 0, 0), (0.0, -0.20));
        assert_eq!(joint_terms(false, true, 0, 1, 0), (0.08, 0.0));
        let (b, p) = joint_terms(false, false, 1, 0, 6);
        assert_eq!((b, round4(p)), (0.0, -0.17));
        assert_eq!(VerdictKind::parse(" Veto "), Some(VerdictKind::Veto));
        assert_eq!(VerdictKind::parse("block"), None);
    }

    #[test]
    fn simplex_solves_a_small_lp() {
        // max 3x + 2y s.t. x + y + s1 = 4, x + 3y + s2 = 6  → x = 4, y = 0, value 12.
        let x = simplex_eq(
            &[3.0, 2.0, 0.0, 0.0],
            &[vec![1.0, 1.0, 1.0, 0.0], vec![1.0, 3.0, 0.0, 1.0]],
            &[4.0, 6.0],
        )
        .unwrap();
        assert!((x[0] - 4.0).abs() < 1e-9 && x[1].abs() < 1e-9);
        // Infeasible: x = 1 and x = 2.
        assert!(simplex_eq(&[1.0], &[vec![1.0], vec![1.0]], &[1.0, 2.0]).is_none());
    }

    /// Out of pivots is not an optimum: the LP of `simplex_solves_a_small_lp` needs some pivots;
    /// one fewer than it needs gives `PivotLimit`, never the tableau it stopped at.
    #[test]
    fn running_out_of_pivots_is_no_answer() {
        let (c, a, b) = (
            [3.0, 2.0, 0.0, 0.0],
            [vec![1.0, 1.0, 1.0, 0.0], vec![1.0, 3.0, 0.0, 1.0]],
            [4.0, 6.0],
        );
        let full = simplex_eq_within(&c, &a, &b, MAX_PIVOTS).unwrap();
        let needed = (0..MAX_PIVOTS)
            .find(|&k| simplex_eq_within(&c, &a, &b, k).is_ok())
            .unwrap();
        assert!(needed >= 1);
        assert_eq!(simplex_eq_within(&c, &a, &b, needed).unwrap(), full);
        assert_eq!(
            simplex_eq_within(&c, &a, &b, needed - 1),
            Err(LpFailure::PivotLimit)
        );
        // The game: an LP out of pivots makes the equilibrium unknown, and the strategy says so.
        let (l, f) = payoff_tables(0.5, 5_000.0);
        assert!(solve_sse_within(&l, &f, MAX_PIVOTS).is_some());
        assert_eq!(solve_sse_within(&l, &f, 0), None);
        let fallback = solve_audit_strategy_within(0.5, 5_000.0, 0);
        assert_eq!(fallback.method, "uniform_fallback_unsolved");
        assert_eq!(fallback.audit_probabilities["audit_payment"], 0.3333);
        let solved = solve_audit_strategy_within(0.5, 5_000.0, MAX_PIVOTS);
        assert_eq!(solved.method, "strong_stackelberg_multiple_lps");
    }

    #[test]
    fn sse_matches_brute_force_on_a_fine_grid() {
        for p in [0.0, 0.2, 0.5, 0.8, 1.0] {
            let (l, f) = payoff_tables(p, 5_000.0);
            let (mix, resp, value) = solve_sse(&l, &f).unwrap();
            assert!((mix.iter().sum::<f64>() - 1.0).abs() < 1e-7);
            // The follower's response is a best response to the mix.
            let fu = |j: usize| (0..3).map(|i| mix[i] * f[i][j]).sum::<f64>();
            assert!((0..4).all(|k| fu(resp) >= fu(k) - 1e-7));
            // No grid point does better for the leader (with leader-favourable tie-breaking).
            let steps = 50;
            for a in 0..=steps {
                for b in 0..=(steps - a) {
                    let x = [
                        a as f64 / steps as f64,
                        b as f64 / steps as f64,
                        (steps - a - b) as f64 / steps as f64,
                    ];
                    let fu = |j: usize| (0..3).map(|i| x[i] * f[i][j]).sum::<f64>();
                    let best = (0..4).map(fu).fold(f64::NEG_INFINITY, f64::max);
                    let lv = (0..4)
                        .filter(|&j| fu(j) >= best - 1e-12)
                        .map(|j| (0..3).map(|i| x[i] * l[i][j]).sum::<f64>())
                        .fold(f64::NEG_INFINITY, f64::max);
                    assert!(lv <= value + 1e-7, "p={p}: grid {x:?} gives {lv} > {value}");
                }
            }
        }
    }

    #[test]
    fn strategy_reacts_to_belief_and_suspicion_to_signals() {
        let clean = audit_strategy(0.05, 2_000.0);
        let risky = audit_strategy(0.95, 2_000.0);
        assert_ne!(clean.audit_probabilities, risky.audit_probabilities);
        let mut w = Watchdog::new(0.5, 1000.0);
        w.observe(
            ActionName::InspectEmailThread,
            &["sender_domain_spoof".into(), "bank_override_attempt".into()],
            0,
        );
        assert!(w.suspicion > 0.05);
        let v = w.verdict(
            Decision::Pay,
            &["bank_override_attempt".into()],
            &[],
            0.3,
            true,
        );
        assert_eq!(v.verdict, "VETO");
    }
}
