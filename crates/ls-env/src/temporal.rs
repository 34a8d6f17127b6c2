//! Task temporal specifications, their categorical composition, and the reward machine compiled
//! from them.
//!
//! A specification is a conjunction of ordered obligations, the LTLf fragment
//! `F(a₁ ∧ F(a₂ ∧ … F aₙ))`. Task families are composed from components (the composition is the
//! union of action/state/observation sets and the conjunction of specifications), and the reward
//! machine is the minimal DFA of that conjunction over the action alphabet, built once per task
//! by exploring formula progression. Shortest distances to acceptance drive the machine's reward:
//! every unit of progress is paid exactly once.

use ls_core::{ActionName, TaskType};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::OnceLock;

/// Upper bound on compiled DFA states (TigerBeetle-style limit; the five tasks need < 600).
pub const MAX_DFA_STATES: usize = 20_000;

/// A conjunction of ordered obligations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TemporalSpec {
    pub chains: Vec<Vec<ActionName>>,
}

impl TemporalSpec {
    /// LTLf rendering, e.g. `F(ocr ∧ F(zoom)) ∧ F(submit_decision)`.
    pub fn to_ltlf(&self) -> String {
        self.chains
            .iter()
            .map(|c| {
                let mut s = String::new();
                for (i, a) in c.iter().enumerate() {
                    if i > 0 {
                        s.push_str(" & ");
                    }
                    s.push_str("F(");
                    s.push_str(a.as_str());
                }
                s.push_str(&")".repeat(c.len()));
                s
            })
            .collect::<Vec<_>>()
            .join(" & ")
    }

    fn conjoin(&mut self, other: &TemporalSpec) {
        for c in &other.chains {
            if !self.chains.contains(c) {
                self.chains.push(c.clone());
            }
        }
    }
}

/// One MDP component of the categorical composition.
#[derive(Debug, Clone, Serialize)]
pub struct Component {
    pub name: &'static str,
    pub action_space: BTreeSet<&'static str>,
    pub state_space: BTreeSet<&'static str>,
    pub required_observations: BTreeSet<&'static str>,
    pub spec: TemporalSpec,
}

fn component(
    name: &'static str,
    actions: &[ActionName],
    states: &[&'static str],
    obs: &[&'static str],
    chains: &[&[ActionName]],
) -> Component {
    Component {
        name,
        action_space: actions.iter().map(|a| a.as_str()).collect(),
        state_space: states.iter().copied().collect(),
        required_observations: obs.iter().copied().collect(),
        spec: TemporalSpec {
            chains: chains.iter().map(|c| c.to_vec()).collect(),
        },
    }
}

fn components() -> [Component; 6] {
    use ActionName::*;
    [
        component(
            "BaseInvestigation",
            &[Ocr, Zoom, LookupPolicy],
            &["intake", "document_review", "decision"],
            &["document_text"],
            &[&[SubmitDecision]],
        ),
        component(
            "DocumentExtraction",
            &[Ocr, Zoom],
            &["document_review"],
            &["invoice_fields"],
            &[&[Ocr, Zoom]],
        ),
        component(
            "ThreeWayMatch",
            &[LookupPolicy, LookupPo, LookupReceipt],
            &["matching"],
            &["po_record", "receipt_record"],
            &[&[LookupPolicy, LookupPo, LookupReceipt]],
        ),
        component(
            "DuplicateDetection",
            &[SearchLedger, FlagDuplicateClusterReview, CompareBankAccount],
            &["ledger_review"],
            &["ledger_hits"],
            &[&[SearchLedger, CompareBankAccount]],
        ),
        component(
            "IdentityVerification",
            &[
                InspectEmailThread,
                LookupVendorHistory,
                CompareBankAccount,
                RequestCallbackVerification,
            ],
            &["identity_review", "awaiting_callback"],
            &["sender_profile", "bank_comparison", "callback_result"],
            &[&[
                InspectEmailThread,
                LookupVendorHistory,
                CompareBankAccount,
                RequestCallbackVerification,
            ]],
        ),
        component(
            "CampaignDetection",
            &[SearchLedger, RouteToSecurity, FreezeVendorProfile],
            &["campaign_review"],
            &["duplicate_cluster", "linked_invoices"],
            &[&[SearchLedger, RouteToSecurity]],
        ),
    ]
}

/// The composition (union of sets, conjunction of specs) of several components.
#[derive(Debug, Clone, Serialize)]
pub struct Composite {
    pub component_name: String,
    pub action_space: Vec<&'static str>,
    pub state_space: Vec<&'static str>,
    pub required_observations: Vec<&'static str>,
    pub temporal_spec: String,
    #[serde(skip)]
    pub spec: TemporalSpec,
}

/// `compose(task)` as JSON (the reset observation's `case_metadata.mdp_component`), serialized
/// once per task family.
pub fn mdp_component_json(task: TaskType) -> &'static ls_json::RawJson {
    static CACHE: OnceLock<BTreeMap<TaskType, ls_json::RawJson>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| {
        TaskType::ALL
            .iter()
            .map(|&t| (t, ls_json::RawJson::from_serialize(&compose(t))))
            .collect()
    });
    &cache[&task]
}

/// Task families are built by adding one component at a time: A = Base ⊕ DocumentExtraction,
/// B = A ⊕ ThreeWayMatch, C = B ⊕ DuplicateDetection, D = C ⊕ IdentityVerification,
/// E = D ⊕ CampaignDetection.
pub fn compose(task: TaskType) -> Composite {
    let all = components();
    let upto = match task {
        TaskType::TaskA => 2,
        TaskType::TaskB => 3,
        TaskType::TaskC => 4,
        TaskType::TaskD => 5,
        TaskType::TaskE => 6,
    };
    let parts = &all[..upto];
    let mut spec = TemporalSpec { chains: Vec::new() };
    let mut actions = BTreeSet::new();
    let mut states = BTreeSet::new();
    let mut obs = BTreeSet::new();
    for c in parts {
        spec.conjoin(&c.spec);
        actions.extend(c.action_space.iter().copied());
        states.extend(c.state_space.iter().copied());
        obs.extend(c.required_observations.iter().copied());
    }
    Composite {
        component_name: parts.iter().map(|c| c.name).collect::<Vec<_>>().join("+"),
        action_space: actions.into_iter().collect(),
        state_space: states.into_iter().collect(),
        required_observations: obs.into_iter().collect(),
        temporal_spec: spec.to_ltlf(),
        spec,
    }
}

/// The compiled DFA of a specification.
#[derive(Debug)]
pub struct CompiledMachine {
    pub spec: TemporalSpec,
    /// Progress index per chain, per state.
    states: Vec<Vec<u8>>,
    delta: Vec<[u32; ActionName::COUNT]>,
    /// Shortest number of actions to acceptance per state.
    pub distance: Vec<u32>,
}

impl CompiledMachine {
    /// Explore progression from the initial state over every action.
    pub fn compile(spec: TemporalSpec) -> Self {
        let start = vec![0u8; spec.chains.len()];
        let mut index: HashMap<Vec<u8>, u32> = HashMap::new();
        let mut states = vec![start.clone()];
        index.insert(start, 0);
        let mut delta: Vec<[u32; ActionName::COUNT]> = Vec::new();
        let mut i = 0;
        while i < states.len() {
            let mut row = [0u32; ActionName::COUNT];
            for (ai, a) in ActionName::ALL.iter().enumerate() {
                let next: Vec<u8> = states[i]
                    .iter()
                    .zip(&spec.chains)
                    .map(|(p, chain)| {
                        if (*p as usize) < chain.len() && chain[*p as usize] == *a {
                            p + 1
                        } else {
                            *p
                        }
                    })
                    .collect();
                let id = match index.get(&next) {
                    Some(id) => *id,
                    None => {
                        assert!(states.len() < MAX_DFA_STATES, "temporal spec too large");
                        let id = states.len() as u32;
                        index.insert(next.clone(), id);
                        states.push(next);
                        id
                    }
                };
                row[ai] = id;
            }
            delta.push(row);
            i += 1;
        }
        // Reverse BFS from accepting states for exact shortest distances.
        let accepting = |s: &Vec<u8>| {
            s.iter()
                .zip(&spec.chains)
                .all(|(p, c)| *p as usize == c.len())
        };
        let mut rev: Vec<Vec<u32>> = vec![Vec::new(); states.len()];
        for (s, row) in delta.iter().enumerate() {
            for t in row {
                rev[*t as usize].push(s as u32);
            }
        }
        let mut distance = vec![u32::MAX; states.len()];
        let mut q = VecDeque::new();
        for (s, st) in states.iter().enumerate() {
            if accepting(st) {
                distance[s] = 0;
                q.push_back(s);
            }
        }
        while let Some(s) = q.pop_front() {
            for p in &rev[s] {
                if distance[*p as usize] == u32::MAX {
                    distance[*p as usize] = distance[s] + 1;
                    q.push_back(*p as usize);
                }
            }
        }
        Self {
            spec,
            states,
            delta,
            distance,
        }
    }

    pub fn state_count(&self) -> usize {
        self.states.len()
    }

    pub fn step(&self, state: u32, action: ActionName) -> u32 {
        let ai = ActionName::ALL
            .iter()
            .position(|a| *a == action)
            .expect("action in catalogue");
        self.delta[state as usize][ai]
    }
}

/// The compiled machine of a task family (built once per process).
pub fn machine(task: TaskType) -> &'static CompiledMachine {
    static MACHINES: OnceLock<BTreeMap<TaskType, CompiledMachine>> = OnceLock::new();
    let all = MACHINES.get_or_init(|| {
        TaskType::ALL
            .into_iter()
            .map(|t| (t, CompiledMachine::compile(compose(t).spec)))
            .collect()
    });
    &all[&task]
}

pub const RM_PROGRESS_BONUS: f64 = 0.02;
pub const RM_FAILURE_PENALTY: f64 = -0.01;
pub const RM_PREMATURE_SUBMIT_PENALTY: f64 = -0.02;

/// Runtime state of a task's reward machine.
#[derive(Debug, Clone, PartialEq)]
pub struct RewardMachine {
    pub task: TaskType,
    pub state_id: u32,
    best_distance: u32,
    pub completed_markers: Vec<ActionName>,
    pub rejecting: bool,
}

impl RewardMachine {
    pub fn new(task: TaskType) -> Self {
        let m = machine(task);
        Self {
            task,
            state_id: 0,
            best_distance: m.distance[0],
            completed_markers: Vec::new(),
            rejecting: false,
        }
    }

    fn m(&self) -> &'static CompiledMachine {
        machine(self.task)
    }

    pub fn progress_fraction(&self) -> f64 {
        let d0 = f64::from(self.m().distance[0].max(1));
        let d = f64::from(self.m().distance[self.state_id as usize]);
        ls_core::text::round_to((1.0 - d / d0).clamp(0.0, 1.0), 4)
    }

    /// The best progress reached so far, in [0, 1]: `1 − best distance / initial distance`.
    /// Monotone (a step back in the automaton does not lower it); the public-progress potential
    /// of the `score` reward ([`crate::reward::potential`]).
    pub fn best_progress(&self) -> f64 {
        let d0 = f64::from(self.m().distance[0].max(1));
        (1.0 - f64::from(self.best_distance) / d0).clamp(0.0, 1.0)
    }

    pub fn accepting(&self) -> bool {
        self.m().distance[self.state_id as usize] == 0
    }

    /// Advance on an action; returns the bonus (each unit of progress is paid once).
    pub fn transition(&mut self, action: ActionName, success: bool) -> f64 {
        if !success {
            return RM_FAILURE_PENALTY;
        }
        let premature = action == ActionName::SubmitDecision && self.progress_fraction() < 0.5;
        let next = self.m().step(self.state_id, action);
        self.state_id = next;
        let d = self.m().distance[next as usize];
        let mut bonus = 0.0;
        if d < self.best_distance && !premature {
            bonus = RM_PROGRESS_BONUS * f64::from(self.best_distance - d);
            self.best_distance = d;
            self.completed_markers.push(action);
        }
        if premature {
            self.rejecting = true;
            bonus += RM_PREMATURE_SUBMIT_PENALTY;
        }
        bonus
    }

    pub fn payload(&self) -> RewardMachinePayload {
        RewardMachinePayload {
            task_type: self.task.as_str(),
            state_id: self.state_id,
            state_count: self.m().state_count(),
            distance_to_accepting: self.m().distance[self.state_id as usize],
            completed_markers: self.completed_markers.iter().map(|a| a.as_str()).collect(),
            progress_fraction: self.progress_fraction(),
            accepting: self.accepting(),
            rejecting: self.rejecting,
            temporal_spec: self.m().spec.to_ltlf(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RewardMachinePayload {
    pub task_type: &'static str,
    pub state_id: u32,
    pub state_count: usize,
    pub distance_to_accepting: u32,
    pub completed_markers: Vec<&'static str>,
    pub progress_fraction: f64,
    pub accepting: bool,
    pub rejecting: bool,
    pub temporal_spec: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use ActionName::*;

    #[test]
    fn task_e_is_task_d_plus_campaign_detection() {
        let d = compose(TaskType::TaskD);
        let e = compose(TaskType::TaskE);
        assert!(e.component_name.starts_with(&d.component_name));
        assert!(e.component_name.ends_with("+CampaignDetection"));
        assert!(d.spec.chains.iter().all(|c| e.spec.chains.contains(c)));
        assert!(e.action_space.contains(&"route_to_security"));
        assert!(e.temporal_spec.contains("F(route_to_security"));
    }

    #[test]
    fn task_a_machine_pays_each_marker_once() {
        let mut rm = RewardMachine::new(TaskType::TaskA);
        assert_eq!(machine(TaskType::TaskA).distance[0], 3);
        assert_eq!(
            rm.transition(Zoom, true),
            0.0,
            "zoom before ocr is out of order"
        );
        assert_eq!(rm.transition(Ocr, true), RM_PROGRESS_BONUS);
        assert_eq!(rm.transition(Ocr, true), 0.0, "repeat pays nothing");
        assert_eq!(rm.transition(Zoom, true), RM_PROGRESS_BONUS);
        assert_eq!(rm.transition(SubmitDecision, true), RM_PROGRESS_BONUS);
        assert!(rm.accepting());
        assert_eq!(rm.transition(LookupPo, false), RM_FAILURE_PENALTY);
    }

    #[test]
    fn premature_submit_is_rejected() {
        let mut rm = RewardMachine::new(TaskType::TaskD);
        let b = rm.transition(SubmitDecision, true);
        assert!(b < 0.0);
        assert!(rm.rejecting);
    }

    #[test]
    fn all_machines_compile_within_limits() {
        for t in TaskType::ALL {
            let m = machine(t);
            assert!(m.state_count() < MAX_DFA_STATES);
            assert!(
                m.distance.iter().all(|d| *d != u32::MAX),
                "every state can still reach acceptance"
            );
        }
    }
}
