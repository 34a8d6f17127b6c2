//! Stage 1: the public benchmark, every ladder agent (blind, fresh environment per trial).

use super::Ctx;
use crate::metrics::SectionSummary;
use std::collections::BTreeMap;

/// Every ladder agent's public-benchmark section, by agent.
pub fn run(ctx: &Ctx<'_>) -> BTreeMap<String, SectionSummary> {
    ctx.agents
        .iter()
        .map(|a| (a.clone(), ctx.evaluate_public(a)))
        .collect()
}
