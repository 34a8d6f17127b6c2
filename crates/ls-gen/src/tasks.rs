//! The task distribution: one random episode case drawn over every task family and every
//! generator, each draw a pure function of `(selection, seed)`, with fixed train / validation /
//! test splits by base template and by generator.
//!
//! A draw picks, in this order and each uniformly among what the selection leaves:
//!
//! 1. a **task family** (A–E) that has at least one (generator, template) in the selection;
//! 2. a **generator** that builds cases of that family ([`Generator::families`]);
//! 3. a **base template** of that family in the template split, among the generator's eligible
//!    templates ([`Generator::eligible`]); FraudGen has no template (a scenario type of the family
//!    instead), and an AP quarter draws its own template among the family's split templates;
//! 4. the generator's own random parts (variant seed, label plan, quarter slot, pair member),
//!    from the same stream.
//!
//! Every generated case carries `generator_metadata.base_case_id` (FraudGen: none); a held-out
//! template is never the base of a draw outside its split, under any generator, since each
//! generator is handed only the split's templates. The partitions are [`TEMPLATE_SPLITS`] and
//! [`Generator::split`]; `docs/python.md` documents both and the proportions that follow.

use crate::fraudgen::{fraudgen_case, Scenario as FraudScenario};
use crate::generators::{
    challenge_variant, controlbench_slot, counterpart, holdout_variant, twin, Plan, QuarterConfig,
    BENIGN_SHARE, REVIEW_SHARE,
};
use ls_core::fixtures::FixtureSet;
use ls_core::schema::Case;
use ls_core::TaskType;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// A split of the templates or of the generators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Split {
    Train,
    Validation,
    Test,
    /// Every template (or generator).
    #[default]
    All,
}

impl Split {
    pub const ALL: [Split; 4] = [Split::Train, Split::Validation, Split::Test, Split::All];

    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "train" => Some(Self::Train),
            "validation" | "val" => Some(Self::Validation),
            "test" => Some(Self::Test),
            "all" => Some(Self::All),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Train => "train",
            Self::Validation => "validation",
            Self::Test => "test",
            Self::All => "all",
        }
    }

    /// Does this selection admit something whose own split is `of`?
    pub fn admits(self, of: Split) -> bool {
        self == Split::All || self == of
    }
}

/// The fixed partition of the 21 curated templates: per family, the train templates, then one
/// validation and one test template where the family has at least four (B, with five, keeps
/// three for training; E, with two, has no held-out template).
pub const TEMPLATE_SPLITS: [(&str, Split); 21] = [
    ("CASE-A-001", Split::Train),
    ("CASE-A-002", Split::Train),
    ("CASE-A-003", Split::Validation),
    ("CASE-A-004", Split::Test),
    ("CASE-B-001", Split::Train),
    ("CASE-B-002", Split::Validation),
    ("CASE-B-003", Split::Train),
    ("CASE-B-004", Split::Train),
    ("CASE-B-005", Split::Test),
    ("CASE-C-001", Split::Train),
    ("CASE-C-002", Split::Train),
    ("CASE-C-003", Split::Test),
    ("CASE-C-004", Split::Validation),
    ("CASE-D-001", Split::Train),
    ("CASE-D-002", Split::Train),
    ("CASE-D-003", Split::Validation),
    ("CASE-D-004", Split::Train),
    ("CASE-D-005", Split::Train),
    ("CASE-D-006", Split::Test),
    ("CASE-E-001", Split::Train),
    ("CASE-E-002", Split::Train),
];

/// The split of a curated template (`None` for a case that is not one of the 21: a template of
/// a fixture directory beyond the curated set is a training template, see
/// [`TaskDistribution::new`]).
pub fn template_split(case_id: &str) -> Option<Split> {
    TEMPLATE_SPLITS
        .iter()
        .find(|(id, _)| *id == case_id)
        .map(|(_, s)| *s)
}

/// The generators a draw can come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Generator {
    /// The curated template itself.
    Curated,
    /// [`crate::generators::challenge_variant`].
    Challenge,
    /// [`crate::generators::holdout_variant`].
    Holdout,
    /// [`crate::generators::twin`] or [`crate::generators::counterpart`], one of the two at even odds.
    Twins,
    /// One slot of an AP quarter ([`crate::generators::controlbench_slot`]).
    Quarter,
    /// [`crate::fraudgen::fraudgen_case`].
    Fraudgen,
}

impl Generator {
    pub const ALL: [Generator; 6] = [
        Self::Curated,
        Self::Challenge,
        Self::Holdout,
        Self::Twins,
        Self::Quarter,
        Self::Fraudgen,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Curated => "curated",
            Self::Challenge => "challenge",
            Self::Holdout => "holdout",
            Self::Twins => "twins",
            Self::Quarter => "quarter",
            Self::Fraudgen => "fraudgen",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|g| g.as_str() == s.trim().to_ascii_lowercase())
    }

    /// The fixed generator split: twins are held out for validation, the holdout suite (unseen
    /// mechanism tuples) for test, the others train.
    pub fn split(self) -> Split {
        match self {
            Self::Twins => Split::Validation,
            Self::Holdout => Split::Test,
            Self::Curated | Self::Challenge | Self::Quarter | Self::Fraudgen => Split::Train,
        }
    }

    /// The families this generator builds. Task A (field extraction) is curated only: the
    /// generators' look-alikes re-send or re-number invoices, which the extraction gold of the
    /// first invoice does not follow (a challenge variant of a Task A template fails the
    /// generator checks on some seeds, an AP quarter of Task A templates on half its slots).
    pub fn families(self) -> &'static [TaskType] {
        use TaskType::*;
        match self {
            Self::Curated => &TaskType::ALL,
            Self::Challenge | Self::Holdout | Self::Quarter => &[TaskB, TaskC, TaskD, TaskE],
            Self::Twins => &[TaskD, TaskE],
            Self::Fraudgen => &[TaskB, TaskC, TaskD, TaskE],
        }
    }

    /// Can this generator build a case from `template`? Twins need a risky Task D/E template
    /// (the pair re-applies its mechanism); the others take any template of their families.
    pub fn eligible(self, template: &Case) -> bool {
        self.families().contains(&template.task_type)
            && match self {
                Self::Twins => template.gold.unsafe_if_pay,
                Self::Fraudgen => false,
                _ => true,
            }
    }
}

/// What a draw selects from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Selection {
    pub templates: Split,
    pub generators: Split,
}

/// One drawn case and where it came from.
#[derive(Debug, Clone)]
pub struct Draw {
    /// The case: a curated template is the template itself (the same `Arc`).
    pub case: Arc<Case>,
    pub generator: Generator,
    /// The base template (`None` for FraudGen).
    pub template: Option<String>,
    pub family: TaskType,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    #[error("no task family has a case in template split '{templates}' under generator split '{generators}'")]
    Empty {
        templates: &'static str,
        generators: &'static str,
    },
    #[error("generator {0} built no case from its template (a generator bug)")]
    Generation(&'static str),
}

/// One way a family is drawn: a generator and its templates for the family in the selection.
#[derive(Debug, Clone)]
pub struct Route {
    pub generator: Generator,
    /// Indices into the distribution's templates (empty for FraudGen).
    pub templates: Vec<usize>,
    /// FraudGen's scenario types of the family.
    pub scenarios: Vec<FraudScenario>,
}

/// The options of one family in a selection.
#[derive(Debug, Clone)]
pub struct FamilyOptions {
    pub family: TaskType,
    pub routes: Vec<Route>,
}

/// Seed offset of the draw stream, so a draw seed and a case-selection seed of the same value
/// are different streams.
const DRAW_STREAM: u64 = 0x5441_534B_4452_4157;

/// The curated templates, ready to draw from.
#[derive(Debug, Clone)]
pub struct TaskDistribution {
    /// The fixture set the generators read (templates and master data).
    set: Arc<FixtureSet>,
    /// The templates as shared cases, aligned with `set.cases` (a curated draw hands out these).
    templates: Vec<Arc<Case>>,
    splits: Vec<Split>,
}

impl TaskDistribution {
    /// Over the templates of `set` (shared as `templates`, aligned with `set.cases`, so a
    /// curated draw is the caller's own `Arc`). A template outside [`TEMPLATE_SPLITS`] is a
    /// training template.
    pub fn new(set: Arc<FixtureSet>, templates: Vec<Arc<Case>>) -> Self {
        debug_assert_eq!(set.cases.len(), templates.len());
        let splits = set
            .cases
            .iter()
            .map(|c| template_split(&c.case_id).unwrap_or(Split::Train))
            .collect();
        Self {
            set,
            templates,
            splits,
        }
    }

    /// Over the embedded curated set (its own `Arc`s).
    pub fn embedded() -> Result<Self, ls_core::fixtures::FixtureError> {
        let set = FixtureSet::embedded()?;
        let templates = set.cases.iter().cloned().map(Arc::new).collect();
        Ok(Self::new(Arc::new(set), templates))
    }

    pub fn templates(&self) -> &[Arc<Case>] {
        &self.templates
    }

    /// The split of template `i`.
    pub fn split_of(&self, i: usize) -> Split {
        self.splits[i]
    }

    /// What `sel` leaves, family by family (families with nothing are left out), in the order a
    /// draw indexes it.
    pub fn options(&self, sel: Selection) -> Vec<FamilyOptions> {
        TaskType::ALL
            .into_iter()
            .filter_map(|family| {
                let options: Vec<Route> = Generator::ALL
                    .into_iter()
                    .filter(|g| sel.generators.admits(g.split()) && g.families().contains(&family))
                    .filter_map(|generator| self.option(sel, family, generator))
                    .collect();
                (!options.is_empty()).then_some(FamilyOptions {
                    family,
                    routes: options,
                })
            })
            .collect()
    }

    fn option(&self, sel: Selection, family: TaskType, generator: Generator) -> Option<Route> {
        if generator == Generator::Fraudgen {
            // No template: drawn only where training templates are (a held-out template split
            // holds held-out templates only).
            let scenarios: Vec<FraudScenario> = FraudScenario::ALL
                .into_iter()
                .filter(|s| s.spec().task == family)
                .collect();
            let ok = sel.templates.admits(Split::Train) && !scenarios.is_empty();
            return ok.then_some(Route {
                generator,
                templates: Vec::new(),
                scenarios,
            });
        }
        let templates: Vec<usize> = self
            .set
            .cases
            .iter()
            .enumerate()
            .filter(|(i, c)| {
                c.task_type == family
                    && sel.templates.admits(self.splits[*i])
                    && generator.eligible(c)
            })
            .map(|(i, _)| i)
            .collect();
        (!templates.is_empty()).then_some(Route {
            generator,
            templates,
            scenarios: Vec::new(),
        })
    }

    /// The exact probability of each (family, generator) under `sel`.
    pub fn proportions(&self, sel: Selection) -> Vec<(TaskType, Generator, f64)> {
        let fams = self.options(sel);
        let nf = fams.len() as f64;
        fams.iter()
            .flat_map(|f| {
                let ng = f.routes.len() as f64;
                f.routes
                    .iter()
                    .map(move |o| (f.family, o.generator, 1.0 / nf / ng))
            })
            .collect()
    }

    /// Draw one case: a pure function of `(sel, seed)`.
    pub fn draw(&self, sel: Selection, seed: u64) -> Result<Draw, TaskError> {
        let fams = self.options(sel);
        if fams.is_empty() {
            return Err(TaskError::Empty {
                templates: sel.templates.as_str(),
                generators: sel.generators.as_str(),
            });
        }
        let mut r = ChaCha8Rng::seed_from_u64(seed ^ DRAW_STREAM);
        let fam = &fams[r.random_range(0..fams.len())];
        let opt = &fam.routes[r.random_range(0..fam.routes.len())];
        self.build(fam.family, opt, &mut r)
    }

    fn build(&self, family: TaskType, opt: &Route, r: &mut ChaCha8Rng) -> Result<Draw, TaskError> {
        let g = opt.generator;
        let pick = |r: &mut ChaCha8Rng| opt.templates[r.random_range(0..opt.templates.len())];
        let case: Arc<Case> = match g {
            Generator::Curated => self.templates[pick(r)].clone(),
            Generator::Challenge => {
                let base = &self.set.cases[pick(r)];
                let plan = plan(r);
                let vseed = r.random_range(1..=10_000_000);
                Arc::new(challenge_variant(&self.set, base, 0, vseed, plan))
            }
            Generator::Holdout => {
                let base = &self.set.cases[pick(r)];
                let plan = plan(r);
                let vseed = r.random_range(1..=10_000_000);
                let vendor = r.random_range(0..192usize);
                Arc::new(holdout_variant(base, 0, vseed, vendor, plan))
            }
            Generator::Twins => {
                let base = &self.set.cases[pick(r)];
                let benign = r.random_bool(0.5);
                let vseed = r.random_range(1..=10_000_000);
                let member = if benign {
                    twin(&self.set, base, vseed)
                } else {
                    counterpart(&self.set, base, vseed)
                };
                Arc::new(member.ok_or(TaskError::Generation(g.as_str()))?)
            }
            Generator::Quarter => Arc::new(self.quarter_slot(family, opt, r)?),
            Generator::Fraudgen => {
                let scenario = opt.scenarios[r.random_range(0..opt.scenarios.len())];
                let vseed = r.random_range(1..=10_000_000);
                let index = r.random_range(1..=1000usize);
                Arc::new(fraudgen_case(scenario, vseed, index))
            }
        };
        let mut case = case;
        if case.official_tracks.is_empty() && case.primary_track.is_none() {
            Arc::make_mut(&mut case).fill_default_tracks();
        }
        let template = match g {
            Generator::Curated => Some(case.case_id.clone()),
            _ => case
                .generator_metadata
                .as_ref()
                .and_then(|m| m.base_case_id.clone()),
        };
        Ok(Draw {
            family: case.task_type,
            case,
            generator: g,
            template,
        })
    }

    /// One slot of a family's generated quarter over the route's templates.
    fn quarter_slot(
        &self,
        family: TaskType,
        opt: &Route,
        r: &mut ChaCha8Rng,
    ) -> Result<Case, TaskError> {
        let templates: Vec<&Case> = opt.templates.iter().map(|&i| &self.set.cases[i]).collect();
        // Sleeper activations are Task D cases; only D/E quarters carry sleepers, so every slot
        // of a family's quarter is of that family.
        let sleepers = if matches!(family, TaskType::TaskD | TaskType::TaskE) {
            QuarterConfig::default().sleepers
        } else {
            0
        };
        let cfg = QuarterConfig {
            seed: r.random_range(1..=10_000_000),
            sleepers,
            ..QuarterConfig::default()
        };
        let index = r.random_range(1..=cfg.length);
        controlbench_slot(&templates, &cfg, index)
            .ok_or(TaskError::Generation(Generator::Quarter.as_str()))
    }
}

/// A label plan at the generators' documented shares ([`BENIGN_SHARE`] benign, [`REVIEW_SHARE`]
/// review, the rest escalate).
fn plan(r: &mut ChaCha8Rng) -> Plan {
    let u: f64 = r.random_range(0.0..1.0);
    if u < BENIGN_SHARE {
        Plan::Benign
    } else if u < BENIGN_SHARE + REVIEW_SHARE {
        Plan::Review
    } else {
        Plan::Escalate
    }
}
