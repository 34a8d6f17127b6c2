//! `ls-env` owns the LedgerShield ControlBench episode loop.
//!
//! Code map:
//! * [`env`]: the per-session [`Environment`] (case pool, reset and case selection, curriculum,
//!   institutional memory) — the only entry point the protocol layer calls.
//! * [`episode`]: one episode's state and the step pipeline (all state transitions live here).
//! * [`action`]: the typed action (one variant and argument struct per tool, intervention and
//!   submission; parser and payload schemas from one declaration).
//! * [`tools`]: the 11 investigation tools as pure functions; [`payload`]: typed payload access.
//! * [`artifacts`]: delayed artifacts computed from fixture data; [`pressure`]: pressure events.
//! * [`sprt`], [`voi`]: belief over the 12 hypotheses and value of information.
//! * [`temporal`]: task temporal specs, their categorical composition, the compiled reward machine.
//! * [`curriculum`], [`memory`]: state that persists across episodes of a session (memory:
//!   AP-week capacities, vendor trust, loss surface, calibration-gated authority, sleepers).
//! * [`watchdog`]: analyst/watchdog dual-agent mode, Stackelberg audit strategy (multiple LPs).
//! * [`infodesign`]: tool discriminative power under the current belief (MI, Jensen–Shannon).
//! * [`designer`]: regret-driven adversarial designer that reorders a curriculum.
//! * [`observation`]: the wire types (observation, public state).
//! * [`seal`]: sealed episodes (a sealed run's): the grade withheld from every reply, kept for
//!   the run.
//! * [`terminal_info`]: the step envelope and its `info`, one typed struct per kind of step,
//!   written once and read back through the same types (runner, report).

pub mod action;
pub mod artifacts;
pub mod candidates;
pub mod channels;
pub mod curriculum;
pub mod designer;
pub mod env;
pub mod episode;
pub mod infodesign;
pub mod memory;
pub mod observation;
pub mod payload;
pub mod pressure;
pub mod reward;
pub mod seal;
pub mod sprt;
pub mod step_body;
pub mod temporal;
pub mod terminal_info;
pub mod tools;
pub mod voi;
pub mod watchdog;
pub mod watchdog_stream;

pub use action::{Action, ActionRequest};
pub use env::{
    CasePool, CaseReset, EnvConfig, EnvStepError, Environment, ResetError, ResetRequest,
};
pub use episode::{CaseDerived, Lifecycle, StepError, TrackMode};
pub use observation::{
    raw_json, InfoMap, InfoValue, Observation, PublicState, RawJson, Shared, SharedJson,
};
pub use seal::{Seal, SealedOutcome, SealedState, StateView};
pub use terminal_info::{StepEnvelope, StepInfo, TerminalInfo};
