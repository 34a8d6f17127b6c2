//! `ls-gen`: LedgerShield ControlBench case generation.
//!
//! Every generator is a pure function of the curated fixture set and explicit seeds
//! (`ChaCha8Rng::seed_from_u64`): the same inputs give byte-identical cases on every machine.
//!
//! * [`ecosystem`]: the editable AP ecosystem of a case ([`ecosystem::Scenario`]: vendor,
//!   invoices, emails, POs, receipts, ledger, vendor history, anchored gold codes) and its
//!   renderer, which writes documents in the line conventions of `docs/fixtures.md`.
//! * [`catalog`]: the attack and look-alike kinds, one table row each (wire name and properties).
//! * [`attacks`]: the apply stage of each attack; each edits documents, threads, ledger or vendor
//!   data.
//! * [`lookalike`]: benign look-alikes of the attack families, made by the same machinery.
//! * [`generators`]: challenge variants, holdout suites, benign twins, certificate-required
//!   clones and ControlBench AP quarters (with sleeper vendors).
//! * [`fraudgen`]: FraudGen ecosystems, one row per scenario type.
//! * [`pool`]: the case pool assembled from the documented `LEDGERSHIELD_*` variables.
//! * [`shape`]: label-independent document structure (routine mail up to a per-family target).
//! * [`checks`]: generator self-checks on top of `ls_core::validate::validate_case`.
//! * [`tasks`]: the task distribution of random episodes: every family and generator, drawn
//!   on the fly per seed, with train / validation / test splits by template and by generator.

pub mod attacks;
pub mod catalog;
pub mod checks;
pub mod ecosystem;
pub mod fraudgen;
pub mod generators;
pub mod lookalike;
pub mod pool;
pub mod shape;
pub mod tasks;

pub use attacks::Attack;
pub use fraudgen::fraudgen;
pub use generators::{
    certificate_required, challenge, controlbench, controlbench_slot, counterpart, holdout,
    holdout_variant, opaque_id, twin, twins, Plan, QuarterConfig,
};
pub use lookalike::Lookalike;
pub use pool::{build_pool, GenKind, PoolConfig};
pub use tasks::{Draw, Generator, Selection, Split, TaskDistribution, TaskError};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GenError {
    #[error("generated case {case_id} failed checks: {issues:?}")]
    Invalid {
        case_id: String,
        issues: Vec<String>,
    },
    #[error("duplicate case id {0} in the assembled pool")]
    DuplicateId(String),
    #[error("{0}")]
    Fixture(String),
}
