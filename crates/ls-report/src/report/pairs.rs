//! Stage: the headline's twin pairs ([`crate::headline`]). Every ladder agent plays both members
//! of every pair (blind, a fresh environment per trial) and gets its headline; the pairs are also
//! the `twins` pool of the gaming-resistance section, and a stored run that played them (`run
//! --suite pairs`) gets its headline from its records.

use super::{factory, Ctx, Unavailable};
use crate::headline::{self, Headline, TwinPair};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The report's description of the headline and its pairs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HeadlineSection {
    pub definition: String,
    pub seeds: Vec<u64>,
    pub pair_count: usize,
    pub pairs_per_family: BTreeMap<String, usize>,
    /// Most an evidence-independent policy may score.
    pub evidence_independent_bound: f64,
    /// What an honest analyst is expected to reach.
    pub analyst_bar: f64,
}

/// The pairs and every ladder agent's headline.
#[derive(Debug, Clone, Default)]
pub struct PairsRun {
    pub pairs: Vec<TwinPair>,
    pub section: Option<HeadlineSection>,
    pub by_agent: BTreeMap<String, Headline>,
}

pub const DEFINITION: &str = "Paired discrimination over twin pairs: the benign twin and the risky counterpart of every risky curated case with a pair (families B-E, seed + case index per seed), both played blind. A pair earns min(benign score, risky score) when the benign member is PAID and the risky member is NOT; -1 when the risky member is paid and the benign one held; 0 when both get the same side. Headline = max(0, mean credit). A policy whose decision reads no evidence gives both members of a pair the same side (their public structure is identical), so it scores 0.";

pub fn run(ctx: &Ctx<'_>, unavailable: &mut Vec<Unavailable>) -> PairsRun {
    let seeds = &ctx.cfg.headline_seeds;
    let pairs = match headline::pairs(ctx.set, ctx.gen, seeds) {
        Ok(p) if !p.is_empty() => p,
        Ok(_) => return PairsRun::default(),
        Err(e) => {
            unavailable.push(Unavailable {
                track: "headline".into(),
                reason: e,
            });
            return PairsRun::default();
        }
    };
    let mut per_family: BTreeMap<String, usize> = BTreeMap::new();
    for p in &pairs {
        *per_family.entry(p.family.clone()).or_default() += 1;
    }
    let by_agent = ctx
        .agents
        .iter()
        .map(|a| {
            let (h, _) = headline::play(&factory(a), &ctx.master, &pairs, seeds, &ctx.base);
            (a.clone(), h)
        })
        .collect();
    PairsRun {
        section: Some(HeadlineSection {
            definition: DEFINITION.into(),
            seeds: seeds.clone(),
            pair_count: pairs.len(),
            pairs_per_family: per_family,
            evidence_independent_bound: crate::gaming::HEADLINE_BOUND,
            analyst_bar: 0.85,
        }),
        pairs,
        by_agent,
    }
}
