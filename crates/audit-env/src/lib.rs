//! Financial Audit environment: four seeded audit tasks, F1-family grading, multi-period
//! campaigns with a mutating world, an overseer, self-improvement and adversarial levels. A pure
//! library: no HTTP types, no environment variables (the protocol layer is `ls-server`).

pub mod adversarial;
pub mod baseline;
pub mod campaign;
pub mod campaign_api;
pub mod data;
pub mod episode;
pub mod error;
pub mod grading;
pub mod improve;
pub mod leaderboard;
pub mod model;
pub mod util;

pub use episode::{
    AuditAction, AuditEnv, AuditObservation, AuditResetRequest, AuditState, AuditStepEnvelope,
    AuditStepRequest, EnvConfig,
};
pub use error::{AuditError, ErrorKind};
