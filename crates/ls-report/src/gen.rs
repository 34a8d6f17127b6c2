//! The boundary to case generation. The report asks for generated cases through [`CaseSource`];
//! [`LsGen`] answers from the `ls-gen` crate (a source that cannot answer returns `Err`, and
//! the report lists the track as unavailable).

use ls_core::schema::Case;
use ls_core::FixtureSet;

/// What the report needs from a generator.
pub trait CaseSource {
    fn name(&self) -> String;
    /// Holdout suite for one seed.
    fn holdout(&self, seed: u64, variants: usize) -> Result<Vec<Case>, String>;
    /// Challenge variants for one seed (a source without them says so).
    fn challenge(&self, _seed: u64, _variants: usize) -> Result<Vec<Case>, String> {
        Err("challenge variants are not available from this generator".into())
    }
    /// Benign contrastive twin of a curated case.
    fn twin(&self, base: &Case, seed: u64) -> Result<Option<Case>, String>;
    /// Risky counterpart of [`CaseSource::twin`] (same clean documents, the base mechanism
    /// re-applied), so twin and counterpart form a benign/risky pair.
    fn counterpart(&self, base: &Case, seed: u64) -> Result<Option<Case>, String>;
    /// A ControlBench AP quarter.
    fn quarter(&self, length: usize, seed: u64) -> Result<Vec<Case>, String>;
    /// Certificate-required clones of the curated cases.
    fn certificate_required(&self) -> Result<Vec<Case>, String>;
    /// Independent FraudGen ecosystem.
    fn fraudgen(&self, count: usize, seed: u64) -> Result<Vec<Case>, String>;
}

/// `ls-gen` over a fixture set.
pub struct LsGen {
    pub set: FixtureSet,
}

impl CaseSource for LsGen {
    fn name(&self) -> String {
        "ls-gen".into()
    }
    fn holdout(&self, seed: u64, variants: usize) -> Result<Vec<Case>, String> {
        Ok(ls_gen::holdout(&self.set, variants, seed))
    }
    fn challenge(&self, seed: u64, variants: usize) -> Result<Vec<Case>, String> {
        Ok(ls_gen::challenge(&self.set, variants, seed))
    }
    fn twin(&self, base: &Case, seed: u64) -> Result<Option<Case>, String> {
        Ok(ls_gen::generators::twin(&self.set, base, seed))
    }
    fn counterpart(&self, base: &Case, seed: u64) -> Result<Option<Case>, String> {
        Ok(ls_gen::generators::counterpart(&self.set, base, seed))
    }
    fn quarter(&self, length: usize, seed: u64) -> Result<Vec<Case>, String> {
        let cfg = ls_gen::QuarterConfig {
            length,
            seed,
            ..Default::default()
        };
        Ok(ls_gen::controlbench(&self.set, &cfg))
    }
    fn certificate_required(&self) -> Result<Vec<Case>, String> {
        Ok(ls_gen::certificate_required(&self.set))
    }
    fn fraudgen(&self, count: usize, seed: u64) -> Result<Vec<Case>, String> {
        Ok(ls_gen::fraudgen(count, seed))
    }
}
