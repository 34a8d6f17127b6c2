//! The attack and look-alike kinds, each declared once: one row of the [`ATTACKS`] table per attack holds
//! its wire name and every property the generators read (family, severity, the latent hypothesis
//! it realises, the control weakness it exploits and the attacker-belief key that weights it, its
//! pressure profile, its benign mirror and the gold codes it adds). How an attack edits a scenario
//! is its apply stage in [`crate::attacks`]; a look-alike's is in [`crate::lookalike`].
//!
//! This module holds data only (it names no other module of the crate), so the scenario can
//! record applied kinds without depending on the code that applies them.

use ls_core::Hypothesis;

/// A property enum and its wire spelling, declared together.
macro_rules! spelled {
    ($(#[$doc:meta])* $t:ident { $( $v:ident => $s:literal, )* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $t { $( $v, )* }
        impl $t {
            pub fn as_str(self) -> &'static str { match self { $( $t::$v => $s, )* } }
        }
    };
}

spelled!(
    /// Attack family (`generator_metadata.attack_category`, `attack_family` mechanism hint).
    Family { Identity => "identity", Document => "document", Process => "process", Apt => "apt", }
);
spelled!(
    /// How bad a successful attack is.
    Severity { Medium => "medium", High => "high", Critical => "critical", }
);
spelled!(
    /// Control weakness an attack exploits (the `control_weakness` mechanism hint).
    Weakness {
        CallbackGap => "callback_gap",
        DuplicateControlGap => "duplicate_control_gap",
        WorkflowOverrideGap => "workflow_override_gap",
    }
);
spelled!(
    /// Attacker-belief key (`QuarterConfig::attacker_belief`) whose value weights an attack.
    BeliefKey {
        CallbackGap => "callback_gap",
        DuplicateControlGap => "duplicate_control_gap",
        QueuePressureExploit => "queue_pressure_exploit",
        PaymentReleaseWeakness => "payment_release_weakness",
    }
);
spelled!(
    /// Pressure profile hint of an attack.
    Pressure { Elevated => "elevated", UrgentOverride => "urgent_override", }
);

/// The properties of one attack (its row of the table).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttackSpec {
    pub attack: Attack,
    /// Wire name (`generator_metadata.applied_attacks`).
    pub name: &'static str,
    pub family: Family,
    pub severity: Severity,
    /// Latent hypothesis the attack realises (agrees with `ls_core::world::attack_hypothesis`).
    pub hypothesis: Hypothesis,
    pub weakness: Weakness,
    pub belief: BeliefKey,
    pub pressure: Pressure,
    /// The benign look-alike of the attack's surface.
    pub mirror: Lookalike,
    /// The gold codes the attack's apply stage adds.
    pub signals: &'static [&'static str],
}

/// Declares a kind enum and `ALL`, its variants in declaration order.
macro_rules! kinds {
    ($(#[$doc:meta])* $t:ident { $( $v:ident, )* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $t { $( $v, )* }
        impl $t {
            pub const ALL: [$t; [$( $t::$v, )*].len()] = [ $( $t::$v, )* ];
        }
    };
}

kinds!(
    /// One attack of the library; what it is and does is its row of [`ATTACKS`].
    Attack {
        BankOverride,
        VendorTakeover,
        CeoFraud,
        DomainTyposquat,
        NearDuplicateInvoice,
        FakeReceipt,
        PhantomVendor,
        InflatedLineItems,
        UrgencySpoof,
        ApprovalThresholdEvasion,
        WorkflowOverride,
        SplitPayment,
        CoordinatedCampaign,
        SupplyChainCompromise,
        InsiderCollusion,
        MultiEntityLayering,
    }
);

/// The attack table: one row per attack in [`Attack`] order (its length is the number of
/// attacks, and a compile-time check below keeps rows and variants in step). Every column is
/// named, so two columns of look-alike values (a weakness and a belief key share spellings)
/// cannot be swapped unnoticed.
pub const ATTACKS: [AttackSpec; Attack::ALL.len()] = [
    AttackSpec {
        attack: Attack::BankOverride,
        name: "bank_override_attack",
        family: Family::Identity,
        severity: Severity::High,
        hypothesis: Hypothesis::BankFraud,
        weakness: Weakness::CallbackGap,
        belief: BeliefKey::CallbackGap,
        pressure: Pressure::Elevated,
        mirror: Lookalike::VerifiedBankChange,
        signals: &["bank_override_attempt", "policy_bypass_attempt"],
    },
    AttackSpec {
        attack: Attack::VendorTakeover,
        name: "vendor_takeover_attack",
        family: Family::Identity,
        severity: Severity::High,
        hypothesis: Hypothesis::VendorTakeover,
        weakness: Weakness::CallbackGap,
        belief: BeliefKey::CallbackGap,
        pressure: Pressure::Elevated,
        mirror: Lookalike::VerifiedBankChange,
        signals: &[
            "vendor_account_takeover_suspected",
            "sender_domain_spoof",
            "vendor_name_spoof",
        ],
    },
    AttackSpec {
        attack: Attack::CeoFraud,
        name: "ceo_fraud_attack",
        family: Family::Identity,
        severity: Severity::Critical,
        hypothesis: Hypothesis::CeoBec,
        weakness: Weakness::WorkflowOverrideGap,
        belief: BeliefKey::PaymentReleaseWeakness,
        pressure: Pressure::UrgentOverride,
        mirror: Lookalike::InternalApproval,
        signals: &[
            "urgent_payment_pressure",
            "policy_bypass_attempt",
            "sender_domain_spoof",
        ],
    },
    AttackSpec {
        attack: Attack::DomainTyposquat,
        name: "domain_typosquat_attack",
        family: Family::Identity,
        severity: Severity::High,
        hypothesis: Hypothesis::VendorTakeover,
        weakness: Weakness::WorkflowOverrideGap,
        belief: BeliefKey::PaymentReleaseWeakness,
        pressure: Pressure::Elevated,
        mirror: Lookalike::VerifiedBankChange,
        signals: &["sender_domain_spoof", "vendor_account_takeover_suspected"],
    },
    AttackSpec {
        attack: Attack::NearDuplicateInvoice,
        name: "near_duplicate_invoice_attack",
        family: Family::Document,
        severity: Severity::High,
        hypothesis: Hypothesis::DuplicateBilling,
        weakness: Weakness::DuplicateControlGap,
        belief: BeliefKey::DuplicateControlGap,
        pressure: Pressure::Elevated,
        mirror: Lookalike::BenignResend,
        signals: &["duplicate_near_match"],
    },
    AttackSpec {
        attack: Attack::FakeReceipt,
        name: "fake_receipt_attack",
        family: Family::Document,
        severity: Severity::Medium,
        hypothesis: Hypothesis::DuplicateBilling,
        weakness: Weakness::WorkflowOverrideGap,
        belief: BeliefKey::PaymentReleaseWeakness,
        pressure: Pressure::Elevated,
        mirror: Lookalike::BenignResend,
        signals: &["partial_receipt_only", "policy_bypass_attempt"],
    },
    AttackSpec {
        attack: Attack::PhantomVendor,
        name: "phantom_vendor_attack",
        family: Family::Document,
        severity: Severity::Critical,
        hypothesis: Hypothesis::PhantomVendor,
        weakness: Weakness::WorkflowOverrideGap,
        belief: BeliefKey::PaymentReleaseWeakness,
        pressure: Pressure::Elevated,
        mirror: Lookalike::VerifiedBankChange,
        signals: &[
            "vendor_account_takeover_suspected",
            "missing_po",
            "vendor_name_spoof",
        ],
    },
    AttackSpec {
        attack: Attack::InflatedLineItems,
        name: "inflated_line_items_attack",
        family: Family::Document,
        severity: Severity::Medium,
        hypothesis: Hypothesis::DuplicateBilling,
        weakness: Weakness::WorkflowOverrideGap,
        belief: BeliefKey::PaymentReleaseWeakness,
        pressure: Pressure::Elevated,
        mirror: Lookalike::BenignResend,
        signals: &["price_mismatch", "quantity_mismatch", "total_mismatch"],
    },
    AttackSpec {
        attack: Attack::UrgencySpoof,
        name: "urgency_spoof_attack",
        family: Family::Process,
        severity: Severity::Medium,
        hypothesis: Hypothesis::CeoBec,
        weakness: Weakness::WorkflowOverrideGap,
        belief: BeliefKey::QueuePressureExploit,
        pressure: Pressure::UrgentOverride,
        mirror: Lookalike::VendorDeadline,
        signals: &["urgent_payment_pressure", "sender_domain_spoof"],
    },
    AttackSpec {
        attack: Attack::ApprovalThresholdEvasion,
        name: "approval_threshold_evasion_attack",
        family: Family::Process,
        severity: Severity::Medium,
        hypothesis: Hypothesis::ThresholdEvasion,
        weakness: Weakness::WorkflowOverrideGap,
        belief: BeliefKey::QueuePressureExploit,
        pressure: Pressure::Elevated,
        mirror: Lookalike::ThresholdAdjacent,
        signals: &["approval_threshold_evasion"],
    },
    AttackSpec {
        attack: Attack::WorkflowOverride,
        name: "workflow_override_attack",
        family: Family::Process,
        severity: Severity::High,
        hypothesis: Hypothesis::InsiderCollusion,
        weakness: Weakness::WorkflowOverrideGap,
        belief: BeliefKey::QueuePressureExploit,
        pressure: Pressure::Elevated,
        mirror: Lookalike::InternalApproval,
        signals: &["policy_bypass_attempt", "sender_domain_spoof"],
    },
    AttackSpec {
        attack: Attack::SplitPayment,
        name: "split_payment_attack",
        family: Family::Process,
        severity: Severity::High,
        hypothesis: Hypothesis::SplitPayment,
        weakness: Weakness::DuplicateControlGap,
        belief: BeliefKey::DuplicateControlGap,
        pressure: Pressure::Elevated,
        mirror: Lookalike::ThresholdAdjacent,
        signals: &["duplicate_near_match", "approval_threshold_evasion"],
    },
    AttackSpec {
        attack: Attack::CoordinatedCampaign,
        name: "coordinated_campaign_attack",
        family: Family::Apt,
        severity: Severity::Critical,
        hypothesis: Hypothesis::CampaignFraud,
        weakness: Weakness::WorkflowOverrideGap,
        belief: BeliefKey::PaymentReleaseWeakness,
        pressure: Pressure::Elevated,
        mirror: Lookalike::RoutineBatch,
        signals: &[
            "shared_bank_account",
            "coordinated_timing",
            "duplicate_near_match",
        ],
    },
    AttackSpec {
        attack: Attack::SupplyChainCompromise,
        name: "supply_chain_compromise_attack",
        family: Family::Apt,
        severity: Severity::Critical,
        hypothesis: Hypothesis::SupplyChainCompromise,
        weakness: Weakness::WorkflowOverrideGap,
        belief: BeliefKey::PaymentReleaseWeakness,
        pressure: Pressure::Elevated,
        mirror: Lookalike::VerifiedBankChange,
        signals: &[
            "vendor_account_takeover_suspected",
            "bank_override_attempt",
            "policy_bypass_attempt",
        ],
    },
    AttackSpec {
        attack: Attack::InsiderCollusion,
        name: "insider_collusion_attack",
        family: Family::Apt,
        severity: Severity::Critical,
        hypothesis: Hypothesis::InsiderCollusion,
        weakness: Weakness::WorkflowOverrideGap,
        belief: BeliefKey::PaymentReleaseWeakness,
        pressure: Pressure::Elevated,
        mirror: Lookalike::InternalApproval,
        signals: &["policy_bypass_attempt", "approval_threshold_evasion"],
    },
    AttackSpec {
        attack: Attack::MultiEntityLayering,
        name: "multi_entity_layering_attack",
        family: Family::Apt,
        severity: Severity::Critical,
        hypothesis: Hypothesis::MultiEntityLayering,
        weakness: Weakness::WorkflowOverrideGap,
        belief: BeliefKey::PaymentReleaseWeakness,
        pressure: Pressure::Elevated,
        mirror: Lookalike::VerifiedBankChange,
        signals: &[
            "vendor_account_takeover_suspected",
            "shared_bank_account",
            "coordinated_timing",
        ],
    },
];

ls_core::rows_in_enum_order!(ATTACKS.attack, "ATTACKS lists its rows in Attack order");

impl Attack {
    /// The attack's row of the table.
    pub const fn spec(self) -> &'static AttackSpec {
        &ATTACKS[self as usize]
    }

    /// Wire name (`bank_override_attack`, ...).
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// identity / document / process / apt.
    pub fn category(self) -> &'static str {
        self.spec().family.as_str()
    }

    /// medium / high / critical.
    pub fn severity(self) -> &'static str {
        self.spec().severity.as_str()
    }

    /// The attack named `name` (the wire name, with or without its `_attack` suffix).
    pub fn parse(name: &str) -> Option<Self> {
        let n = ls_core::text::normalize_text(name);
        Self::ALL
            .into_iter()
            .find(|a| a.name() == n || a.name().trim_end_matches("_attack") == n)
    }

    /// Latent hypothesis the attack realises.
    pub fn hypothesis(self) -> Hypothesis {
        self.spec().hypothesis
    }

    /// Control weakness the attack exploits (mechanism hint).
    pub fn control_weakness(self) -> &'static str {
        self.spec().weakness.as_str()
    }

    /// Pressure profile hint (`urgent_override` for urgency and executive fraud).
    pub fn pressure_profile(self) -> &'static str {
        self.spec().pressure.as_str()
    }
}

macro_rules! lookalikes {
    ($( $v:ident => $name:literal; )*) => {
        /// One benign look-alike.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Lookalike { $( $v, )* }
        impl Lookalike {
            pub const ALL: [Lookalike; [$( Lookalike::$v, )*].len()] = [ $( Lookalike::$v, )* ];
            /// Wire name (`generator_metadata.benign_lookalikes`).
            pub fn name(self) -> &'static str { match self { $( Lookalike::$v => $name, )* } }
        }
    };
}

lookalikes! {
    VerifiedBankChange => "verified_bank_change";
    VendorDeadline => "vendor_payment_deadline";
    InternalApproval => "internal_approval_record";
    BenignResend => "benign_resend";
    ThresholdAdjacent => "threshold_adjacent_amount";
    RoutineBatch => "routine_invoice_batch";
}

impl Lookalike {
    /// The look-alike named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        let n = ls_core::text::normalize_text(name);
        Self::ALL.into_iter().find(|l| l.name() == n)
    }

    /// The benign mirror of an attack: what the attack's surface looks like when nothing is wrong.
    pub fn mirror(a: Attack) -> Self {
        a.spec().mirror
    }

    /// Mirrors of `attacks`, deduplicated, at most `max`.
    pub fn mirrors(attacks: &[Attack], max: usize) -> Vec<Self> {
        let mut out: Vec<Self> = Vec::new();
        for a in attacks {
            let l = Self::mirror(*a);
            if !out.contains(&l) && out.len() < max {
                out.push(l);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_attack_round_trips_its_wire_name_and_agrees_with_the_core_hypothesis_table() {
        let mut names = std::collections::BTreeSet::new();
        for a in Attack::ALL {
            assert!(names.insert(a.name()), "{} listed twice", a.name());
            assert_eq!(Attack::parse(a.name()), Some(a));
            assert_eq!(Attack::parse(a.name().trim_end_matches("_attack")), Some(a));
            assert_eq!(
                Attack::parse(&format!(" {} ", a.name().to_uppercase())),
                Some(a),
                "{}",
                a.name()
            );
            // The environment reads the hypothesis back from the wire name: both tables agree.
            assert_eq!(
                ls_core::world::attack_hypothesis(a.name()),
                Some(a.hypothesis()),
                "{}",
                a.name()
            );
            assert!(!a.spec().signals.is_empty(), "{} adds no code", a.name());
            for code in a.spec().signals {
                assert_eq!(
                    ls_core::text::canonical_code(code),
                    Some(*code),
                    "{}",
                    a.name()
                );
            }
        }
        assert_eq!(Attack::parse("no_such_attack"), None);
        assert_eq!(Attack::parse(""), None);
    }

    #[test]
    fn every_lookalike_round_trips_and_mirrors_an_attack() {
        let mirrored: std::collections::BTreeSet<Lookalike> =
            Attack::ALL.iter().map(|a| Lookalike::mirror(*a)).collect();
        assert_eq!(mirrored.len(), Lookalike::ALL.len());
        for l in Lookalike::ALL {
            assert_eq!(Lookalike::parse(l.name()), Some(l));
        }
        assert_eq!(Lookalike::parse("bank_override_attack"), None);
    }
}
