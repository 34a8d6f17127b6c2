//! The case generators. Each is a pure function of the curated set and an explicit seed.

use crate::attacks::Attack;
use crate::catalog::Pressure;
use crate::ecosystem::*;
use crate::lookalike::Lookalike;
use ls_core::fixtures::FixtureSet;
use ls_core::schema::*;
use ls_core::text::vendor_alias_match;
use ls_core::{Decision, TaskType};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rust_decimal::Decimal;

use std::collections::BTreeMap;

/// Largest sequence / batch any generator produces in one call.
pub const MAX_GENERATED: usize = 20_000;

pub(crate) fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// The vendor-master record a case's first invoice is issued by.
pub fn case_vendor(set: &FixtureSet, case: &Case) -> Option<VendorProfile> {
    let world = set.world(case);
    if let Some(v) = case.vendor_key.as_deref().and_then(|k| world.vendor(k)) {
        return Some(VendorProfile::from_master(v));
    }
    let display = case
        .invoices()
        .next()
        .and_then(|d| d.accurate_ocr.first())
        .map(|t| t.text.clone())?;
    world
        .vendors
        .iter()
        .find(|v| {
            vendor_alias_match(
                &display,
                &[
                    v.vendor_name.as_str(),
                    v.canonical_name.as_str(),
                    v.vendor_key.as_str(),
                ],
            )
        })
        .map(VendorProfile::from_master)
}

/// Is `c` an archetype of the held-out suites (a task C/D/E case: [`holdout`] and [`challenge`]
/// build their variants from these)?
pub fn hard(c: &Case) -> bool {
    matches!(
        c.task_type,
        TaskType::TaskC | TaskType::TaskD | TaskType::TaskE
    )
}

fn template_attacks(c: &Case) -> Vec<Attack> {
    if !c.gold.unsafe_if_pay {
        return Vec::new();
    }
    let sig = c.gold.canonical_signals();
    let mut a = Attack::for_signals(&sig);
    if a.is_empty() {
        a.push(Attack::BankOverride);
    }
    a
}

fn invoice_count(c: &Case) -> usize {
    c.invoices().count().clamp(1, 3)
}

/// Difficulty tier of a generated case: a seeded draw per task family, independent of the
/// label (the count of applied attacks used to set it, which told a benign case from a risky one).
fn difficulty(task: TaskType, seed: u64) -> Difficulty {
    let mut r = rng(seed ^ DIFFICULTY_STREAM);
    let tiers: [Difficulty; 4] = match task {
        TaskType::TaskA | TaskType::TaskB | TaskType::TaskC => [
            Difficulty::Easy,
            Difficulty::Medium,
            Difficulty::Medium,
            Difficulty::Hard,
        ],
        TaskType::TaskD | TaskType::TaskE => [
            Difficulty::Medium,
            Difficulty::Hard,
            Difficulty::Hard,
            Difficulty::Expert,
        ],
    };
    tiers[r.random_range(0..tiers.len())]
}

const DIFFICULTY_STREAM: u64 = 0x4449_4646_4943_554C;

/// An opaque, stable case id `LS-` + 10 hex digits of a 64-bit FNV-1a hash of `key` (generator,
/// base case, variant and seed): the id names neither the suite, the base case nor the pairing.
pub fn opaque_id(key: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("LS-{:010X}", h >> 24)
}

/// Label plan of one generated case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Benign look-alikes only (gold PAY).
    Benign,
    /// One billing-control attack whose policy routes to HOLD or NEEDS_REVIEW.
    Review,
    /// The generator's attack mechanism (mostly ESCALATE_FRAUD).
    Escalate,
}

impl Plan {
    pub fn as_str(self) -> &'static str {
        match self {
            Plan::Benign => "benign",
            Plan::Review => "review",
            Plan::Escalate => "escalate",
        }
    }
}

/// Share of benign cases in a planned pool (at least a third, by the documented mix).
pub const BENIGN_SHARE: f64 = 0.40;
/// Share of HOLD/NEEDS_REVIEW cases in a planned pool.
pub const REVIEW_SHARE: f64 = 0.20;

/// `n` plans with exact shares (`ceil(0.4 n)` benign, `floor(0.2 n)` review, the rest escalate)
/// in a seeded order.
pub fn plans(n: usize, r: &mut ChaCha8Rng) -> Vec<Plan> {
    let benign = (n as f64 * BENIGN_SHARE).ceil() as usize;
    let review = ((n as f64 * REVIEW_SHARE).floor() as usize).min(n - benign.min(n));
    let mut v: Vec<Plan> = (0..n)
        .map(|i| {
            if i < benign {
                Plan::Benign
            } else if i < benign + review {
                Plan::Review
            } else {
                Plan::Escalate
            }
        })
        .collect();
    v.shuffle(r);
    v
}

/// The billing-control attacks a review case is built from, per task (each routes to HOLD or
/// NEEDS_REVIEW and is read from the ledger, the invoice lines or the amounts).
fn review_attacks(task: TaskType) -> &'static [Attack] {
    match task {
        TaskType::TaskC => &[
            Attack::ApprovalThresholdEvasion,
            Attack::NearDuplicateInvoice,
        ],
        _ => &[Attack::NearDuplicateInvoice],
    }
}

/// Apply a plan to a clean scenario: look-alikes mirroring `mechanism` (benign), one review
/// attack, or the `mechanism` attacks themselves.
fn realise(s: &mut Scenario, r: &mut ChaCha8Rng, plan: Plan, mechanism: &[Attack]) {
    match plan {
        Plan::Benign => {
            let mut mirrors = Lookalike::mirrors(mechanism, 2);
            if mirrors.is_empty() {
                mirrors.push(Lookalike::ALL[r.random_range(0..Lookalike::ALL.len())]);
            }
            for l in mirrors {
                l.apply(s, r);
            }
        }
        Plan::Review => {
            let pool = review_attacks(s.task);
            pool[r.random_range(0..pool.len())].apply(s, r);
        }
        Plan::Escalate => {
            for a in mechanism {
                a.apply(s, r);
            }
        }
    }
}

/// Latent mechanism fields describing what the documents actually contain.
pub fn mechanism(s: &Scenario) -> BTreeMap<String, String> {
    let first = s.applied_attacks.first();
    let has = |a: Attack| s.applied_attacks.contains(&a);
    let bank_changed = s
        .invoices
        .iter()
        .any(|i| i.bank_account != s.vendor.bank_account);
    let channel = if s
        .emails
        .iter()
        .any(|e| !e.from.ends_with(&s.vendor.domain) && !e.from.ends_with(COMPANY_DOMAIN))
    {
        "spoofed_email"
    } else if s.emails.iter().any(|e| e.from.ends_with(COMPANY_DOMAIN)) {
        "internal_channel"
    } else if bank_changed {
        "vendor_master_change"
    } else if s.applied_attacks.is_empty() {
        "routine"
    } else {
        "document_stack"
    };
    let pressure = if s
        .applied_attacks
        .iter()
        .any(|a| a.spec().pressure == Pressure::UrgentOverride)
    {
        "urgent_override"
    } else if s.applied_attacks.is_empty() {
        "routine"
    } else {
        "elevated"
    };
    let history = if s
        .history
        .iter()
        .any(|h| h.change_type.contains("bank") && h.status != "approved")
    {
        "prior_bank_change_anomaly"
    } else {
        "steady_vendor"
    };
    let bank = if has(Attack::MultiEntityLayering) || has(Attack::CoordinatedCampaign) {
        "shared_account_pattern"
    } else if bank_changed {
        "proposed_unverified_change"
    } else {
        "approved_on_file"
    };
    let linkage = match s.invoices.len() {
        1 => "standalone",
        2 => "linked_pair",
        _ => "campaign_linked",
    };
    [
        ("attack_family", first.map_or("clean", |a| a.category())),
        ("compromise_channel", channel),
        ("pressure_profile", pressure),
        (
            "control_weakness",
            first.map_or("baseline_control", |a| a.control_weakness()),
        ),
        ("vendor_history_state", history),
        ("bank_adjustment_state", bank),
        ("campaign_linkage", linkage),
        ("portfolio_context", "standard_queue"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// Tracks before contract recomputation (§2.11 of the generation spec).
/// Official and primary tracks by task family and split, never by label (a Task D case is on
/// the adversarial track whether or not it is unsafe to pay: the reference's label-dependent
/// choice would announce the gold decision in the case metadata).
fn tracks(case: &Case) -> (Vec<String>, String) {
    let mut t: Vec<String> = match case.task_type {
        TaskType::TaskE | TaskType::TaskD => {
            vec!["case".into(), "portfolio".into(), "adversarial".into()]
        }
        _ => vec!["case".into()],
    };
    if case.task_type == TaskType::TaskD {
        t.retain(|x| x != "portfolio");
    }
    let mut primary = if case.task_type == TaskType::TaskE {
        "portfolio"
    } else if case.task_type == TaskType::TaskD {
        "adversarial"
    } else {
        "case"
    }
    .to_owned();
    match case.benchmark_split.as_str() {
        "challenge" | "holdout" | "generated" | "generated_holdout" => {
            t.push("generated_holdout".into());
            primary = "generated_holdout".into();
        }
        "controlbench" => {
            t.push("controlbench".into());
            primary = "controlbench".into();
            let sleeper = case
                .controlbench
                .as_ref()
                .is_some_and(|c| c.sleeper_phase.is_sleeper());
            if sleeper {
                t.push("sleeper_vigilance".into());
                primary = "sleeper_vigilance".into();
            }
        }
        "contrastive" => {
            t = vec!["case".into(), "adversarial".into()];
            primary = "case".into();
        }
        _ => {}
    }
    (t, primary)
}

/// The most e-mails a generated case of the family is given room for in its limits.
fn mail_room(task: TaskType) -> usize {
    match task {
        TaskType::TaskA => 2,
        TaskType::TaskB => 3,
        TaskType::TaskC => 5,
        TaskType::TaskD | TaskType::TaskE => 7,
    }
}

/// Budget and step limit of every generated case of a task family: a function of the family
/// alone (room for [`MAX_INVOICES`] invoices and the family's most mail at two budget units and
/// two steps per document beyond the first invoice), so neither says anything about the attacks
/// a case carries.
pub fn limits(task: TaskType) -> (Decimal, u32) {
    let (inv, mail) = (MAX_INVOICES as u32, mail_room(task) as u32);
    (
        Decimal::from(18 + 2 * (inv - 1) + 2 * mail),
        30 + 2 * inv + 2 * mail,
    )
}

/// The element-wise maximum of the document counts every label plan produces on `s` with the
/// random stream `r` (see [`crate::shape`]): what the case is padded to whatever its plan.
fn plan_room(s: &Scenario, r: &ChaCha8Rng, mechanism: &[Attack]) -> crate::shape::Room {
    let alt = |p: Plan| move |s: &mut Scenario, r: &mut ChaCha8Rng| realise(s, r, p, mechanism);
    let (b, v, e) = (alt(Plan::Benign), alt(Plan::Review), alt(Plan::Escalate));
    crate::shape::room_over(s, r, &[&b, &v, &e])
}

/// Report-only metadata of a generated case: suite, pairing and label plan.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Meta<'a> {
    pub(crate) suite: &'a str,
    pub(crate) pair_id: Option<&'a str>,
    pub(crate) plan: Option<Plan>,
}

pub(crate) fn finish(
    s: &Scenario,
    mut case: Case,
    generator: &str,
    base: Option<&str>,
    seed: u64,
    meta: Meta<'_>,
) -> Case {
    case.difficulty = difficulty(s.task, seed);
    // Budget and step limit are the task family's ([`limits`]), never the documents': the
    // documents' counts follow what the attacks added, and so did the limits.
    (case.budget_total, case.max_steps) = limits(s.task);
    case.latent_mechanism = mechanism(s);
    if let Some(g) = case.generator_metadata.as_mut() {
        g.generator = Some(generator.to_owned());
        g.base_case_id = base.map(str::to_owned);
        g.seed = seed;
        g.suite = Some(meta.suite.to_owned());
        g.pair_id = meta.pair_id.map(str::to_owned);
        g.label_plan = meta.plan.map(|p| p.as_str().to_owned());
        let first = s.applied_attacks.first();
        g.mechanism_hints = first
            .map(|a| {
                vec![
                    format!("attack_family={}", a.category()),
                    format!("pressure_profile={}", a.pressure_profile()),
                    format!("control_weakness={}", a.control_weakness()),
                ]
            })
            .unwrap_or_default();
    }
    let (t, p) = tracks(&case);
    case.official_tracks = t;
    case.primary_track = Some(p);
    case
}

/// Challenge variants of the hard curated cases (task C/D/E): each variant rebuilds the case's
/// documents around the same vendor and goods (new invoice numbers, dates, POs) and realises a
/// label plan drawn for the batch ([`plans`]): benign look-alikes mirroring the base case's own
/// mechanism, one billing-control attack (HOLD/NEEDS_REVIEW), or the base mechanism plus one
/// (A/B) or two (C–E) sampled attacks.
pub fn challenge(set: &FixtureSet, variants: usize, seed: u64) -> Vec<Case> {
    let mut batch = rng(seed);
    let bases: Vec<&Case> = set.cases.iter().filter(|c| hard(c)).collect();
    let variants = variants.min(64);
    let mut jobs = Vec::new();
    for base in &bases {
        for k in 0..variants {
            let vseed: u64 = batch.random_range(1..=10_000_000);
            jobs.push((*base, k, vseed));
        }
    }
    jobs.truncate(MAX_GENERATED);
    let plan = plans(jobs.len(), &mut batch);
    jobs.into_iter()
        .zip(plan)
        .map(|((base, k, vseed), p)| challenge_variant(set, base, k, vseed, p))
        .collect()
}

pub fn challenge_variant(set: &FixtureSet, base: &Case, k: usize, vseed: u64, plan: Plan) -> Case {
    let mut r = rng(vseed);
    let id = opaque_id(&format!("challenge|{}|{k}|{vseed}", base.case_id));
    let vendor = case_vendor(set, base).unwrap_or_else(|| VendorProfile::synthetic(&mut r, 0));
    let mut s = Scenario::clean(
        &mut r,
        base.task_type,
        &id,
        vendor,
        &template_lines(base),
        invoice_count(base),
    );
    let mut attacks = template_attacks(base);
    let extra = if matches!(base.task_type, TaskType::TaskA | TaskType::TaskB) {
        1
    } else {
        2
    };
    for _ in 0..extra {
        if let Some(a) = Attack::sample(&mut r, &BTreeMap::new(), &Attack::ALL, &attacks) {
            attacks.push(a);
        }
    }
    let room = plan_room(&s, &r, &attacks);
    realise(&mut s, &mut r, plan, &attacks);
    crate::shape::pad(&mut s, room, vseed);
    let mut case = s.render("challenge", vseed, None);
    case.controlbench = None;
    let mut c = finish(
        &s,
        case,
        "challenge_variant",
        Some(&base.case_id),
        vseed,
        Meta {
            suite: "challenge",
            pair_id: None,
            plan: Some(plan),
        },
    );
    c.latent_mechanism
        .insert("portfolio_context".into(), "challenge_queue".into());
    c
}

/// The three held-out latent-mechanism tuples. Each names the attacks that realise it, so the
/// documents of a holdout case carry the mechanism its labels claim.
pub const HOLDOUT_PROFILES: [(&str, [Attack; 3]); 3] = [
    (
        "identity_erp_shared_account",
        [
            Attack::DomainTyposquat,
            Attack::WorkflowOverride,
            Attack::MultiEntityLayering,
        ],
    ),
    (
        "campaign_urgent_callback_gap",
        [
            Attack::CoordinatedCampaign,
            Attack::UrgencySpoof,
            Attack::BankOverride,
        ],
    ),
    (
        "process_vendor_master_duplicates",
        [
            Attack::SplitPayment,
            Attack::NearDuplicateInvoice,
            Attack::VendorTakeover,
        ],
    ),
];

/// Holdout suite: hard curated cases as archetypes (task and goods), a fresh synthetic vendor,
/// and a mechanism tuple from [`HOLDOUT_PROFILES`] realised under a label plan ([`plans`]): two or
/// three of its attacks, one billing-control attack of the process tuple (review), or benign
/// look-alikes of the tuple's attacks.
pub fn holdout(set: &FixtureSet, variants: usize, seed: u64) -> Vec<Case> {
    let mut batch = rng(seed);
    let variants = variants.min(64);
    let mut jobs = Vec::new();
    for base in set.cases.iter().filter(|c| hard(c)) {
        for k in 0..variants {
            let vseed: u64 = batch.random_range(1..=10_000_000);
            jobs.push((base, k, vseed));
        }
    }
    jobs.truncate(MAX_GENERATED);
    let plan = plans(jobs.len(), &mut batch);
    jobs.into_iter()
        .zip(plan)
        .enumerate()
        .map(|(index, ((base, k, vseed), p))| holdout_case(base, k, vseed, index, p))
        .collect()
}

/// One holdout case of `base` (variant `k`, variant seed `vseed`, synthetic vendor ordinal
/// `index`) under `plan`: what [`holdout`] builds for that job.
pub fn holdout_variant(base: &Case, k: usize, vseed: u64, index: usize, plan: Plan) -> Case {
    holdout_case(base, k, vseed, index, plan)
}

fn holdout_case(base: &Case, k: usize, vseed: u64, index: usize, plan: Plan) -> Case {
    let mut r = rng(vseed);
    let id = opaque_id(&format!("holdout|{}|{k}|{vseed}", base.case_id));
    let vendor = VendorProfile::synthetic(&mut r, index);
    let (mut profile, attacks) = HOLDOUT_PROFILES[r.random_range(0..HOLDOUT_PROFILES.len())];
    let n = r.random_range(2..=3usize);
    let mut chosen: Vec<Attack> = attacks.to_vec();
    chosen.shuffle(&mut r);
    chosen.truncate(n);
    let mut s = Scenario::clean(
        &mut r,
        base.task_type,
        &id,
        vendor,
        &template_lines(base),
        invoice_count(base),
    );
    if plan == Plan::Review {
        profile = HOLDOUT_PROFILES[2].0;
    }
    let room = plan_room(&s, &r, &chosen);
    realise(&mut s, &mut r, plan, &chosen);
    crate::shape::pad(&mut s, room, vseed);
    let case = s.render("holdout", vseed, None);
    let mut c = finish(
        &s,
        case,
        "holdout_suite",
        Some(&base.case_id),
        vseed,
        Meta {
            suite: "holdout",
            pair_id: None,
            plan: Some(plan),
        },
    );
    c.latent_mechanism
        .insert("holdout_profile".into(), profile.into());
    c.latent_mechanism
        .insert("split_policy".into(), "unseen_mechanism_tuple".into());
    c.latent_mechanism
        .insert("portfolio_context".into(), "holdout_queue".into());
    c
}

/// The clean scenario behind a contrastive pair of a risky curated case: same vendor, invoice
/// numbers and goods; every bank line carries the vendor-master account; every email is a clean
/// thread from the vendor's approved domain; its own clean PO, receipt and (empty) payment history;
/// amounts moved out of just-under-limit bands; multi-invoice dates spread apart.
fn pair_scenario(set: &FixtureSet, base: &Case, id: &str, r: &mut ChaCha8Rng) -> Option<Scenario> {
    let vendor = case_vendor(set, base)?;
    let mut s = Scenario::clean(r, base.task_type, id, vendor.clone(), &[], 1);
    s.invoices.clear();
    s.emails.clear();
    s.ledger.clear();
    s.history.clear();
    let tag: String = base
        .case_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    for (i, doc) in base.invoices().take(MAX_INVOICES).enumerate() {
        let f = ls_core::validate::invoice_facts(doc);
        let lines: Vec<LineSpec> = f
            .line_items
            .iter()
            .take(MAX_LINES)
            .filter(|(_, q, u, _)| *q > Decimal::ZERO && *u > Decimal::ZERO)
            .map(|(desc, q, u, _)| LineSpec {
                description: desc.clone(),
                qty: q.round_dp(0).max(Decimal::ONE),
                unit: r2(*u),
            })
            .collect();
        let lines = if lines.is_empty() {
            vec![LineSpec {
                description: "General services".into(),
                qty: Decimal::ONE,
                unit: Decimal::from(1000),
            }]
        } else {
            lines
        };
        let day0 = f.invoice_date.as_deref().and_then(parse_day).unwrap_or(120);
        let mut inv = InvoiceSpec {
            doc_id: format!("{id}-INV{}", i + 1),
            number: f
                .invoice_number
                .clone()
                .unwrap_or_else(|| format!("INV-{tag}-{i}")),
            day: (day0 + 9 * i as u32).min(365),
            currency: f
                .currency
                .clone()
                .unwrap_or_else(|| vendor.currency.clone()),
            po_id: Some(
                f.po_id
                    .clone()
                    .unwrap_or_else(|| format!("PO-{tag}-T{}", i + 1)),
            ),
            receipt_id: Some(
                f.receipt_id
                    .clone()
                    .unwrap_or_else(|| format!("GRN-{tag}-T{}", i + 1)),
            ),
            lines,
            ..InvoiceSpec::billed_by(&vendor)
        };
        inv.avoid_threshold_bands();
        inv.ordered = inv.lines.clone();
        s.invoices.push(inv);
    }
    if s.invoices.is_empty() {
        return None;
    }
    // Distinct POs per invoice so that no PO is billed twice.
    for i in 1..s.invoices.len() {
        if s.invoices[..i]
            .iter()
            .any(|p| p.po_id == s.invoices[i].po_id)
        {
            s.invoices[i].po_id = Some(format!("PO-{tag}-T{}", i + 1));
            s.invoices[i].receipt_id = Some(format!("GRN-{tag}-T{}", i + 1));
        }
    }
    s.sync_records();
    for k in 0..base
        .documents
        .iter()
        .filter(|d| d.doc_type == "email")
        .count()
    {
        let mut e = clean_email(&s, 0);
        e.doc_id = format!("{id}-MAIL{k}");
        s.emails.push(e);
    }
    Some(s)
}

/// Member `role` (`twin` or `counterpart`) of the contrastive pair of `base`.
fn pair_member(set: &FixtureSet, base: &Case, seed: u64, role: &str) -> Option<Case> {
    let mut r = rng(seed);
    let pair = opaque_id(&format!("pair|{}|{seed}", base.case_id));
    let id = opaque_id(&format!("{role}|{}|{seed}", base.case_id));
    let mut s = pair_scenario(set, base, &id, &mut r)?;
    // The twin carries the benign look-alikes of the base mechanism (same senders, subjects and
    // record kinds as the counterpart's attacks); the counterpart re-applies the base case's own
    // mechanism to the same clean documents. Both members are padded to the counts of both
    // realisations, so the pair differs in what the evidence says, not in how many documents
    // it has.
    let mirror = |s: &mut Scenario, _: &mut ChaCha8Rng| {
        let mut lr = rng(seed ^ 0x5457_494E_4C4F_4F4B);
        for l in Lookalike::mirrors(&template_attacks(base), 2) {
            l.apply(s, &mut lr);
        }
    };
    let attack = |s: &mut Scenario, _: &mut ChaCha8Rng| {
        let mut ar = rng(seed ^ 0x434F_554E_5445_5250);
        for a in template_attacks(base) {
            a.apply(s, &mut ar);
        }
    };
    let room = crate::shape::room_over(&s, &r, &[&mirror, &attack]);
    let plan = if role == "twin" {
        mirror(&mut s, &mut r);
        s.forced_decision = Some(Decision::Pay);
        Plan::Benign
    } else {
        attack(&mut s, &mut r);
        Plan::Escalate
    };
    crate::shape::pad(&mut s, room, seed);
    let mut case = s.render("contrastive", seed, None);
    case.contrastive_pair_id = Some(pair.clone());
    case.contrastive_role = Some(role.into());
    case.simulation = if role == "twin" {
        CaseSimulation::default()
    } else {
        CaseSimulation {
            callback_outcome: s.callback,
            callback_no_answer_clocks: Vec::new(),
        }
    };
    let generator = if role == "twin" {
        "benign_twin"
    } else {
        "twin_counterpart"
    };
    let mut c = finish(
        &s,
        case,
        generator,
        Some(&base.case_id),
        seed,
        Meta {
            suite: "twins",
            pair_id: Some(&pair),
            plan: Some(plan),
        },
    );
    // Both members of a pair carry the base case's difficulty; budget and step limit are the
    // family's (`finish`), the same for both, so neither says which member is which.
    c.difficulty = base.difficulty;
    c.latent_mechanism
        .insert("portfolio_context".into(), "contrastive_pair".into());
    Some(c)
}

/// Benign contrastive twin of a risky curated case ([`pair_scenario`], gold PAY), with an opaque
/// id; its pair id (shared with [`counterpart`]) is in `contrastive_pair_id` and
/// `generator_metadata.pair_id`, the base case in `generator_metadata.base_case_id`.
pub fn twin(set: &FixtureSet, base: &Case, seed: u64) -> Option<Case> {
    pair_member(set, base, seed, "twin")
}

/// Risky counterpart of [`twin`]: the same clean documents with the base case's mechanism
/// re-applied, so a pair differs only in what the attack changed.
pub fn counterpart(set: &FixtureSet, base: &Case, seed: u64) -> Option<Case> {
    pair_member(set, base, seed, "counterpart")
}

/// Contrastive pairs (twin, then counterpart) of the curated task D/E cases with `unsafe_if_pay`
/// (seed = `seed` + index in the set): half the pool is benign.
pub fn twins(set: &FixtureSet, seed: u64) -> Vec<Case> {
    set.cases
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            matches!(c.task_type, TaskType::TaskD | TaskType::TaskE) && c.gold.unsafe_if_pay
        })
        .flat_map(|(i, c)| {
            let s = seed.wrapping_add(i as u64);
            [twin(set, c, s), counterpart(set, c, s)]
        })
        .flatten()
        .collect()
}

/// Certificate-required clones of the curated cases.
pub fn certificate_required(set: &FixtureSet) -> Vec<Case> {
    set.cases
        .iter()
        .map(|c| {
            let mut x = c.clone();
            x.case_id = format!("{}::certificate-required", c.case_id);
            x.benchmark_split = "certificate_required".into();
            x.certificate_required = true;
            let mut t = if c.official_tracks.is_empty() {
                vec!["case".to_owned()]
            } else {
                c.official_tracks.clone()
            };
            if !t.iter().any(|x| x == "certificate_required") {
                t.push("certificate_required".into());
            }
            x.official_tracks = t;
            x.primary_track = Some("certificate_required".into());
            let g = x.generator_metadata.get_or_insert_with(Default::default);
            g.generator = Some("certificate_required_clone".into());
            g.base_case_id = Some(c.case_id.clone());
            x
        })
        .collect()
}

/// ControlBench AP-quarter parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct QuarterConfig {
    pub length: usize,
    pub seed: u64,
    pub sleepers: usize,
    pub warmups: usize,
    pub fraud_prevalence: f64,
    /// Attacker belief (`callback_gap`, `duplicate_control_gap`, `queue_pressure_exploit`,
    /// `payment_release_weakness`) that weights the attack families of risky cases.
    pub attacker_belief: BTreeMap<String, f64>,
}

impl Default for QuarterConfig {
    fn default() -> Self {
        Self {
            length: 100,
            seed: 2026,
            sleepers: 3,
            warmups: 3,
            fraud_prevalence: 0.14,
            attacker_belief: BTreeMap::new(),
        }
    }
}

/// Regular (non-sleeper) vendors of one quarter.
pub const QUARTER_REGULAR_VENDORS: usize = 12;
/// Seed offset of a slot's hypothetical risky draw (document room only).
const HYPOTHESIS_STREAM: u64 = 0x4859_504F_5448_4553;
/// Seed offset of the activation-slot jitter.
const SCHEDULE_STREAM: u64 = 0x534C_4545_5045_5253;
const SLEEPER_ATTACKS: [Attack; 3] = [
    Attack::BankOverride,
    Attack::VendorTakeover,
    Attack::SupplyChainCompromise,
];

fn round_half_even(x: f64) -> usize {
    let f = x.floor();
    let diff = x - f;
    let r = if (diff - 0.5).abs() < 1e-9 {
        if (f as i64) % 2 == 0 {
            f
        } else {
            f + 1.0
        }
    } else {
        x.round()
    };
    r.max(0.0) as usize
}

/// Activation slots and forced warm-up slots (1-based) of a quarter.
///
/// Each activation slot is moved by a seeded offset of at most `length / (4·(sleepers + 1))`
/// slots, so the position in the quarter (which the instruction shows) does not say which case
/// is an activation.
pub fn sleeper_schedule(
    length: usize,
    sleepers: usize,
    warmups: usize,
    seed: u64,
) -> (Vec<usize>, BTreeMap<usize, usize>) {
    let mut jr = rng(seed ^ SCHEDULE_STREAM);
    let reach = (length / (4 * (sleepers + 1))) as i64;
    let mut activations: Vec<usize> = Vec::new();
    for i in 1..=sleepers {
        let base = round_half_even(length as f64 * i as f64 / (sleepers + 1) as f64) as i64;
        let offset = if reach > 0 {
            jr.random_range(-reach..=reach)
        } else {
            0
        };
        let mut slot = (base + offset).max(2) as usize;
        while activations.contains(&slot) && slot < length {
            slot += 1;
        }
        let slot = slot.min(length);
        if !activations.contains(&slot) {
            activations.push(slot);
        }
    }
    let mut forced: BTreeMap<usize, usize> = BTreeMap::new();
    for (si, &slot) in activations.iter().enumerate() {
        for offset in (1..=warmups).rev() {
            let preferred = slot.saturating_sub(offset).max(1);
            let mut cand = preferred as i64;
            while cand >= 1
                && (activations.contains(&(cand as usize))
                    || forced.contains_key(&(cand as usize))
                    || cand as usize >= slot)
            {
                cand -= 1;
            }
            if cand < 1 {
                cand = preferred as i64 + 1;
                while (cand as usize) < slot
                    && (activations.contains(&(cand as usize))
                        || forced.contains_key(&(cand as usize)))
                {
                    cand += 1;
                }
            }
            let c = cand as usize;
            if c >= 1 && c < slot && !activations.contains(&c) && !forced.contains_key(&c) {
                forced.insert(c, si);
            }
        }
    }
    (activations, forced)
}

/// Share of a quarter's clean slots that carry a benign look-alike.
pub const QUARTER_LOOKALIKE_SHARE: f64 = 0.35;
/// Share of a quarter's non-sleeper risky slots built from one billing-control attack (HOLD/NEEDS_REVIEW).
pub const QUARTER_REVIEW_SHARE: f64 = 0.30;
/// Look-alikes used in quarters: none edits the vendor master, which the quarter's cases of one
/// vendor share.
const QUARTER_LOOKALIKES: [Lookalike; 5] = [
    Lookalike::VendorDeadline,
    Lookalike::InternalApproval,
    Lookalike::BenignResend,
    Lookalike::ThresholdAdjacent,
    Lookalike::RoutineBatch,
];

/// Realise one quarter slot: clean slots get a look-alike with [`QUARTER_LOOKALIKE_SHARE`],
/// risky non-sleeper slots become review cases with [`QUARTER_REVIEW_SHARE`].
fn quarter_plan(s: &mut Scenario, r: &mut ChaCha8Rng, attacks: &[Attack]) -> Plan {
    if attacks.is_empty() {
        if r.random_bool(QUARTER_LOOKALIKE_SHARE) {
            QUARTER_LOOKALIKES[r.random_range(0..QUARTER_LOOKALIKES.len())].apply(s, r);
        }
        return Plan::Benign;
    }
    let sleeper = attacks.iter().all(|a| SLEEPER_ATTACKS.contains(a)) && attacks.len() == 1;
    if !sleeper && r.random_bool(QUARTER_REVIEW_SHARE) {
        realise(s, r, Plan::Review, attacks);
        return Plan::Review;
    }
    for a in attacks {
        a.apply(s, r);
    }
    Plan::Escalate
}

/// The curated templates a quarter draws from.
///
/// A regular slot's template is drawn from one pool whatever the slot's label: risky and clean
/// slots then share the family and template distribution, so a case's task family says nothing
/// about its gold decision. (Drawing clean slots from the safe B/C/D cases and risky ones from
/// the risky C/D/E cases made every Task E case of a quarter risky and every Task B case safe.)
struct QuarterPools<'a> {
    /// The task B–E cases, safe and risky (all cases if there is none).
    regular: Vec<&'a Case>,
    /// The clean task D cases (with their email thread) a sleeper activation is built on, else
    /// the regular pool.
    email_clean: Vec<&'a Case>,
}

impl<'a> QuarterPools<'a> {
    fn new(templates: &[&'a Case]) -> Self {
        let or_all =
            |v: Vec<&'a Case>, all: &[&'a Case]| if v.is_empty() { all.to_vec() } else { v };
        let regular = or_all(
            templates
                .iter()
                .copied()
                .filter(|c| c.task_type != TaskType::TaskA)
                .collect(),
            templates,
        );
        let email_clean = or_all(
            regular
                .iter()
                .copied()
                .filter(|c| c.task_type == TaskType::TaskD && !c.gold.unsafe_if_pay)
                .collect(),
            &regular,
        );
        Self {
            regular,
            email_clean,
        }
    }

    /// A regular slot's template (drawn the same way for a risky and a clean slot).
    fn draw(&self, r: &mut ChaCha8Rng) -> &'a Case {
        self.regular[r.random_range(0..self.regular.len())]
    }
}

// A slot's sleeper phase (`controlbench.sleeper_phase`; a quarter draws no `trust_building`).
use ls_core::schema::SleeperPhase as Phase;

/// What one quarter slot is made of, drawn from the quarter's stream.
struct Slot<'a> {
    phase: Phase,
    vendor: VendorProfile,
    template: &'a Case,
    attacks: Vec<Attack>,
    /// `controlbench.fraud_vector` (empty outside sleeper slots).
    vector: &'static str,
    /// `controlbench.sleeper_vendor_id` (empty outside sleeper slots).
    sleeper_id: String,
}

/// The quarter's fixed parts: its vendors and sleeper schedule.
struct Quarter<'a, 'c> {
    cfg: &'c QuarterConfig,
    length: usize,
    warmups: usize,
    prevalence: f64,
    sequence_id: String,
    pools: QuarterPools<'a>,
    sleeper_vendors: Vec<VendorProfile>,
    regular: Vec<VendorProfile>,
    activations: Vec<usize>,
    forced: BTreeMap<usize, usize>,
}

impl<'a> Quarter<'a, '_> {
    /// The sleeper whose warm-up slot `index` is, if any: a forced warm-up slot, else with 20 %
    /// one of the sleepers still to activate.
    fn warm_vendor(&self, index: usize, r: &mut ChaCha8Rng) -> Option<usize> {
        self.forced.get(&index).copied().or_else(|| {
            let later: Vec<usize> = self
                .activations
                .iter()
                .enumerate()
                .filter(|(_, &s)| s > index)
                .map(|(i, _)| i)
                .collect();
            if later.is_empty() || r.random_range(0.0..1.0) >= 0.20 {
                None
            } else {
                Some(later[r.random_range(0..later.len())])
            }
        })
    }

    /// Draw slot `index`: a sleeper activation or warm-up, a risky case at the fraud prevalence
    /// (attacks sampled from the attacker belief plus the template's own), or a clean case.
    fn draw_slot(&self, index: usize, r: &mut ChaCha8Rng) -> Slot<'a> {
        let pools = &self.pools;
        let activation = self.activations.iter().position(|&s| s == index);
        let warm_vendor = if activation.is_some() {
            None
        } else {
            self.warm_vendor(index, r)
        };
        if let Some(si) = activation {
            let template = pools.email_clean[r.random_range(0..pools.email_clean.len())];
            let a = Attack::sample(r, &self.cfg.attacker_belief, &SLEEPER_ATTACKS, &[])
                .unwrap_or(Attack::BankOverride);
            let vendor = self.sleeper_vendors[si].clone();
            Slot {
                phase: Phase::Activation,
                sleeper_id: vendor.key.clone(),
                vendor,
                template,
                attacks: vec![a],
                vector: "trust_exploiting_bank_or_bec_shift",
            }
        } else if let Some(si) = warm_vendor {
            let template = pools.draw(r);
            let vendor = self.sleeper_vendors[si].clone();
            Slot {
                phase: Phase::Warmup,
                sleeper_id: vendor.key.clone(),
                vendor,
                template,
                attacks: Vec::new(),
                vector: "trust_building_clean_history",
            }
        } else if r.random_range(0.0..1.0) < self.prevalence {
            let template = pools.draw(r);
            let attacks = self.risky_attacks(template, r);
            self.regular_slot(template, attacks, r)
        } else {
            let template = pools.draw(r);
            self.regular_slot(template, Vec::new(), r)
        }
    }

    fn regular_slot(
        &self,
        template: &'a Case,
        attacks: Vec<Attack>,
        r: &mut ChaCha8Rng,
    ) -> Slot<'a> {
        Slot {
            phase: Phase::None,
            vendor: self.regular[r.random_range(0..self.regular.len())].clone(),
            template,
            attacks,
            vector: "",
            sleeper_id: String::new(),
        }
    }

    /// Build, render and finish the case of slot `index` from its own seed.
    fn case(&self, index: usize, slot: Slot<'_>) -> Case {
        let (length, sequence_id) = (self.length, &self.sequence_id);
        let case_seed = self.cfg.seed.wrapping_add(index as u64);
        let mut cr = rng(case_seed);
        let id = format!("{sequence_id}-CASE-{index:03}");
        let template = slot.template;
        let task = if slot.phase == Phase::Activation
            && template.task_type != TaskType::TaskD
            && template.task_type != TaskType::TaskE
        {
            TaskType::TaskD
        } else {
            template.task_type
        };
        let mut s = Scenario::clean(
            &mut cr,
            task,
            &id,
            slot.vendor.clone(),
            &template_lines(template),
            invoice_count(template),
        );
        let room = self.room(&s, &cr, &slot, case_seed);
        let plan = quarter_plan(&mut s, &mut cr, &slot.attacks);
        s.instruction_notes.push(format!("This is case {index} of {length} in AP quarter {sequence_id}: preserve institutional value and report calibrated confidence."));
        crate::shape::pad(&mut s, room, case_seed);
        let mut case = s.render("controlbench", case_seed, None);
        case.controlbench = Some(self.controlbench_meta(index, &slot));
        let mut c = finish(
            &s,
            case,
            "controlbench_quarter",
            Some(&template.case_id),
            case_seed,
            Meta {
                suite: "controlbench",
                pair_id: None,
                plan: Some(plan),
            },
        );
        c.latent_mechanism
            .insert("portfolio_context".into(), "simulated_ap_quarter".into());
        if slot.phase == Phase::Activation {
            c.latent_mechanism
                .insert("pressure_profile".into(), "sleeper_activation".into());
        }
        c
    }

    /// The attacks a regular risky slot on `template` carries: one sampled from the attacker
    /// belief, then the template's own (at most three in all).
    fn risky_attacks(&self, template: &Case, r: &mut ChaCha8Rng) -> Vec<Attack> {
        let mut attacks = Vec::new();
        if let Some(x) = Attack::sample(r, &self.cfg.attacker_belief, &Attack::ALL, &[]) {
            attacks.push(x);
        }
        for x in template_attacks(template) {
            if !attacks.contains(&x) && attacks.len() < 3 {
                attacks.push(x);
            }
        }
        attacks
    }

    /// The attacks a regular risky slot on `template` would carry, drawn for slot seed
    /// `case_seed` from a stream of its own (document room only).
    fn hypothetical(&self, case_seed: u64, template: &Case) -> Vec<Attack> {
        self.risky_attacks(template, &mut rng(case_seed ^ HYPOTHESIS_STREAM))
    }

    /// The sleeper attack an activation of this quarter carries, drawn for slot seed
    /// `case_seed` from a stream of its own (the same way [`Quarter::draw_slot`] draws it).
    fn hypothetical_sleeper(&self, case_seed: u64) -> Attack {
        let mut hr = rng(case_seed ^ HYPOTHESIS_STREAM ^ 0x534C);
        Attack::sample(&mut hr, &self.cfg.attacker_belief, &SLEEPER_ATTACKS, &[])
            .unwrap_or(Attack::BankOverride)
    }

    /// The document room of a slot (see [`crate::shape`]): the element-wise maximum over the
    /// clean path and every quarter look-alike, a regular risky slot's paths (its attacks, the
    /// review path, the escalation) and a sleeper activation's, all on the slot's scenario. Where
    /// the slot is not of a kind, that kind's draw is hypothetical ([`Quarter::hypothetical`],
    /// [`Quarter::hypothetical_sleeper`]), so every slot draws its room from the same
    /// distribution, whatever its label.
    fn room(
        &self,
        s: &Scenario,
        r: &ChaCha8Rng,
        slot: &Slot<'_>,
        case_seed: u64,
    ) -> crate::shape::Room {
        let regular_risky = slot.phase == Phase::None && !slot.attacks.is_empty();
        let base = s.clone();
        let mechanism = if regular_risky {
            slot.attacks.clone()
        } else {
            self.hypothetical(case_seed, slot.template)
        };
        let sleeper = if slot.phase == Phase::Activation {
            slot.attacks.clone()
        } else {
            vec![self.hypothetical_sleeper(case_seed)]
        };
        let risky = |s: &mut Scenario, r: &mut ChaCha8Rng| {
            quarter_plan(s, r, &mechanism);
        };
        let review = |s: &mut Scenario, r: &mut ChaCha8Rng| realise(s, r, Plan::Review, &mechanism);
        let escalate = |s: &mut Scenario, r: &mut ChaCha8Rng| {
            for a in &mechanism {
                a.apply(s, r);
            }
        };
        let activation = |s: &mut Scenario, r: &mut ChaCha8Rng| {
            quarter_plan(s, r, &sleeper);
        };
        let clean = |s: &mut Scenario, r: &mut ChaCha8Rng| {
            quarter_plan(s, r, &[]);
        };
        let looks: Vec<_> = QUARTER_LOOKALIKES
            .iter()
            .map(|&l| move |s: &mut Scenario, r: &mut ChaCha8Rng| l.apply(s, r))
            .collect();
        let mut alts: Vec<crate::shape::Realise<'_>> =
            vec![&clean, &activation, &risky, &review, &escalate];
        alts.extend(looks.iter().map(|f| f as crate::shape::Realise<'_>));
        crate::shape::room_over(&base, r, &alts)
    }

    /// The case's `controlbench` block (sequence position, enabled mechanics, sleeper slot).
    fn controlbench_meta(&self, index: usize, slot: &Slot<'_>) -> ControlbenchMeta {
        ControlbenchMeta {
            calibration_gate_enabled: true,
            fraud_vector: slot.vector.to_owned(),
            is_sleeper_case: slot.phase.is_sleeper(),
            loss_surface_enabled: true,
            sequence_id: self.sequence_id.clone(),
            sequence_index: index,
            sequence_seed: self.cfg.seed,
            sleeper_phase: slot.phase,
            sleeper_vendor_id: slot.sleeper_id.clone(),
            sleeper_vigilance_enabled: true,
            sleeper_warmup_target: self.warmups,
            source_case_id: slot.template.case_id.clone(),
            standard_case_count: self.length,
            vendor_key: slot.vendor.key.clone(),
        }
    }
}

/// A ControlBench AP quarter: `length` cases over a population of synthetic vendors, with
/// `sleepers` distinct sleeper vendors, each warmed up by clean invoices before its activation
/// (a bank or BEC shift on the same vendor), and other risky cases at `fraud_prevalence` whose
/// attacks follow the attacker belief.
pub fn controlbench(set: &FixtureSet, cfg: &QuarterConfig) -> Vec<Case> {
    let templates: Vec<&Case> = set.cases.iter().collect();
    let Some((quarter, mut r)) = quarter(&templates, cfg) else {
        return Vec::new();
    };
    (1..=quarter.length)
        .map(|index| {
            let slot = quarter.draw_slot(index, &mut r);
            quarter.case(index, slot)
        })
        .collect()
}

/// Case `index` (1-based) of the quarter [`controlbench`] would build from `templates` with
/// `cfg`, byte for byte, without rendering the others (the slots before it are drawn, which is
/// cheap, so that the quarter's stream reaches slot `index` as it does there). `None` for an
/// index outside the quarter or an empty template list. Every case of the quarter is built from
/// one of `templates`.
pub fn controlbench_slot(templates: &[&Case], cfg: &QuarterConfig, index: usize) -> Option<Case> {
    let (quarter, mut r) = quarter(templates, cfg)?;
    if index == 0 || index > quarter.length {
        return None;
    }
    for i in 1..index {
        quarter.draw_slot(i, &mut r);
    }
    let slot = quarter.draw_slot(index, &mut r);
    Some(quarter.case(index, slot))
}

/// The quarter's fixed parts (vendors, sleeper schedule, template pools) and its stream, ready
/// to draw slot 1.
fn quarter<'a, 'c>(
    templates: &[&'a Case],
    cfg: &'c QuarterConfig,
) -> Option<(Quarter<'a, 'c>, ChaCha8Rng)> {
    let length = cfg.length.clamp(1, 1000);
    let sleepers = cfg.sleepers.min(length / 2).min(8);
    let warmups = cfg.warmups.min(10);
    let prevalence = if cfg.fraud_prevalence.is_finite() {
        cfg.fraud_prevalence.clamp(0.0, 1.0)
    } else {
        0.14
    };
    let mut r = rng(cfg.seed);
    let pools = QuarterPools::new(templates);
    if pools.regular.is_empty() {
        return None;
    }
    // Vendor population: distinct names; the first `sleepers` ordinals are the sleeper vendors.
    let mut ordinals: Vec<usize> = (0..24).collect();
    ordinals.shuffle(&mut r);
    let mut regular: Vec<VendorProfile> = ordinals
        .iter()
        .take(sleepers + QUARTER_REGULAR_VENDORS)
        .map(|o| VendorProfile::synthetic(&mut r, *o))
        .collect();
    let sleeper_vendors: Vec<VendorProfile> = regular.drain(..sleepers).collect();
    let (activations, forced) = sleeper_schedule(length, sleepers, warmups, cfg.seed);
    let quarter = Quarter {
        cfg,
        length,
        warmups,
        prevalence,
        sequence_id: format!("CONTROLBENCH-{}", cfg.seed),
        pools,
        sleeper_vendors,
        regular,
        activations,
        forced,
    };
    Some((quarter, r))
}

#[cfg(test)]
mod structure_tests {
    use super::*;
    use rand::Rng;

    /// What an agent sees of a case before it reads a line: counts per document kind, the
    /// instruction's length, budget, step limit and difficulty.
    fn structure(c: &Case) -> (usize, usize, usize, Decimal, u32, Difficulty) {
        let inv = c.invoices().count();
        (
            inv,
            c.documents.len() - inv,
            c.instruction.split_whitespace().count(),
            c.budget_total,
            c.max_steps,
            c.difficulty,
        )
    }

    const PLANS: [Plan; 3] = [Plan::Benign, Plan::Review, Plan::Escalate];

    /// A challenge variant or holdout case has the same structure whichever label plan it is
    /// given (random seeds, printed): the structure is drawn before the plan is applied.
    #[test]
    fn the_structure_of_a_case_does_not_depend_on_its_plan() {
        let set = FixtureSet::embedded().expect("fixtures");
        let mut rng = rand::rng();
        let seeds: Vec<u64> = (0..12).map(|_| rng.random_range(1..=10_000_000)).collect();
        eprintln!("plan-invariance seeds {seeds:?}");
        for base in set.cases.iter().filter(|c| hard(c)) {
            for (k, &vseed) in seeds.iter().enumerate() {
                let of = |p: Plan| structure(&challenge_variant(&set, base, k, vseed, p));
                let (b, r, e) = (of(Plan::Benign), of(Plan::Review), of(Plan::Escalate));
                assert!(
                    b == r && r == e,
                    "challenge {} {vseed}: {b:?} {r:?} {e:?}",
                    base.case_id
                );
                let of = |p: Plan| structure(&holdout_case(base, k, vseed, k, p));
                let v: Vec<_> = PLANS.iter().map(|&p| of(p)).collect();
                assert!(
                    v.windows(2).all(|w| w[0] == w[1]),
                    "holdout {} {vseed}: {v:?}",
                    base.case_id
                );
            }
        }
    }

    /// Both members of a contrastive pair have the same structure; every generated case of a
    /// family has the family's budget and step limit.
    #[test]
    fn pair_members_share_their_structure_and_limits_follow_the_family() {
        let set = FixtureSet::embedded().expect("fixtures");
        let seed = rand::rng().random_range(1..90_000u64);
        eprintln!("pair seed {seed}");
        for pair in twins(&set, seed).chunks(2) {
            assert_eq!(
                structure(&pair[0]),
                structure(&pair[1]),
                "{}",
                pair[0].case_id
            );
        }
        let mut pool = challenge(&set, 2, seed);
        pool.extend(holdout(&set, 2, seed + 1));
        pool.extend(controlbench(
            &set,
            &QuarterConfig {
                length: 30,
                seed: seed + 2,
                ..Default::default()
            },
        ));
        for c in &pool {
            assert_eq!(
                (c.budget_total, c.max_steps),
                limits(c.task_type),
                "{}",
                c.case_id
            );
            assert!(c.documents.len() - c.invoices().count() <= mail_room(c.task_type));
        }
    }
}
