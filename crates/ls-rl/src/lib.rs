//! `ls-rl`: LedgerShield as a learner meets it.
//!
//! * [`facts`]: OCR tokens read into invoice and e-mail lines, each kept with the token it came
//!   from (the teacher reads the same lines).
//! * [`ledger`]: the evidence ledger — everything an episode revealed, folded from its replies into
//!   typed rows (document lines, vendor, history, ledger, PO and receipt records, e-mail threads,
//!   bank comparisons, artifacts) with relations computed between revealed rows only (an amount
//!   against its PO, an account against the vendor master, a sender against the approved domains).
//! * [`observe`]: the structured observation — the ledger as fixed-shape typed arrays with masks,
//!   every index documented ([`observe::GLOBAL_FEATURES`], [`observe::ROW_FEATURES`]).
//! * [`vocab`]: the factored action vocabulary (tools, targets, the index layout) and where each
//!   target's fact shows in the ledger; [`submission`]: the payload a composer writes;
//!   [`express`]: another agent's action re-expressed as factored actions.
//! * [`factored`]: the factored action space — one masked `Discrete` choice per step: a tool and
//!   then its argument as a pointer into the ledger's rows, an intervention, or one part of the
//!   submission (the decision, a reason code and the row that shows it, a policy check, a link, a
//!   Task A field), then `submit`. Composing steps cost nothing and reach no environment.
//!
//! Invariants: everything here reads the replies an agent was given, never the case, the hidden
//! world or the gold (the crate depends on `ls-env` for the reply types only); the same replies
//! give the same ledger, observation and masks; every table has a fixed bound ([`ledger::MAX_ROWS`],
//! [`ledger::MAX_DOCS`]) and what does not fit is dropped, counted, never a panic.

pub mod express;
pub mod factored;
pub mod facts;
pub mod ledger;
pub mod observe;
pub mod submission;
pub mod vocab;

pub use factored::{Composer, FactoredAction, Layout, Step};
pub use ledger::Ledger;
