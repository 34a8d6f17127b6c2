//! Stage 11: the certificate-required track (the generator's certificate-required clones, every
//! ladder agent) and the certificate ablation on it (`teacher-no-certificate`).

use super::ablation::{ablation, Ablation, ABLATION_AGENT};
use super::{Ctx, Unavailable};
use crate::eval::pool_of;
use crate::metrics::{r4, SectionSummary};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CertificateTrack {
    pub track: String,
    pub track_label: String,
    pub certificate_required_missing_rate: f64,
    pub summary: SectionSummary,
}

/// What the certificate stage hands on.
#[derive(Debug, Clone, Default)]
pub struct CertificateRun {
    /// The primary agent's track.
    pub primary: Option<CertificateTrack>,
    pub by_agent: BTreeMap<String, CertificateTrack>,
    pub ablation: Option<Ablation>,
}

pub fn run(ctx: &Ctx<'_>, unavailable: &mut Vec<Unavailable>) -> CertificateRun {
    let cases = match ctx.gen.certificate_required() {
        Err(e) => {
            unavailable.push(Unavailable {
                track: "certificate_required".into(),
                reason: e,
            });
            return CertificateRun::default();
        }
        Ok(cases) => cases,
    };
    let pool = pool_of(&ctx.master, &cases);
    let run = |a: &str| {
        let rows = ctx.evaluate(a, &pool, &cases, Some("certificate_required"));
        let missing = if rows.is_empty() {
            0.0
        } else {
            r4(rows
                .iter()
                .filter(|r| r.result_class == "certificate_required_missing")
                .count() as f64
                / rows.len() as f64)
        };
        CertificateTrack {
            track: "certificate_required".into(),
            track_label: "Certificate-Required Track".into(),
            certificate_required_missing_rate: missing,
            summary: ctx.section(rows),
        }
    };
    let by_agent: BTreeMap<String, CertificateTrack> =
        ctx.agents.iter().map(|a| (a.clone(), run(a))).collect();
    let without = run("teacher-no-certificate");
    let primary = by_agent.get(ctx.primary).cloned();
    // "With" is the ablated agent's own run, whichever agent is primary.
    let with = by_agent
        .get(ABLATION_AGENT)
        .cloned()
        .unwrap_or_else(|| run(ABLATION_AGENT));
    let ablation = {
        let mut ab = ablation(
            "certificate_ablation",
            "agent-authored decision certificate",
            "teacher re-run on the certificate-required clones without attaching a certificate",
            &with.summary,
            &without.summary,
        );
        ab.note = format!(
            "missing-certificate rate without the component: {:.4}",
            without.certificate_required_missing_rate
        );
        Some(ab)
    };
    CertificateRun {
        primary,
        by_agent,
        ablation,
    }
}
