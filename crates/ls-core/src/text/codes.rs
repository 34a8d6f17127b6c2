//! The reason-code vocabulary: the 27 canonical codes with their kind and risk level in one
//! table, the signals built on them, and how free text is canonicalised to a code. Part of the
//! text rules: every comparison of a code or signal goes through here.

use super::{normalize_text, slug};
use serde::{Deserialize, Serialize};

wire_enum! {
    /// How much risk a signal marks: the `risk_bucket` of a hidden or observed signal set is its
    /// highest level.
    pub enum RiskLevel {
        Low = "low",
        Medium = "medium",
        High = "high",
    }
}

/// Whether a reason code reports a document discrepancy or a fraud indicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CodeKind {
    Discrepancy,
    Fraud,
}

/// The reason-code table: each code's wire spelling, its kind (the section it sits in) and the
/// risk level it marks, written once. `ReasonCode`, `DISCREPANCY_CODES` and `FRAUD_CODES` (in
/// this order) and [`ReasonCode::risk`] all come from it.
macro_rules! reason_codes {
    (
        discrepancy { $( $dv:ident = $dw:literal, $dr:ident; )* }
        fraud { $( $fv:ident = $fw:literal, $fr:ident; )* }
    ) => {
        wire_enum! {
            #[doc = "The 27 canonical reason codes (12 discrepancy, 15 fraud) in their documented order."]
            pub enum ReasonCode { $( $dv = $dw, )* $( $fv = $fw, )* }
        }

        impl ReasonCode {
            pub fn kind(self) -> CodeKind {
                match self { $( Self::$dv => CodeKind::Discrepancy, )* $( Self::$fv => CodeKind::Fraud, )* }
            }

            /// The risk level this code marks when it is a signal.
            pub fn risk(self) -> RiskLevel {
                match self { $( Self::$dv => RiskLevel::$dr, )* $( Self::$fv => RiskLevel::$fr, )* }
            }
        }

        /// Discrepancy reason codes (12), in their documented order.
        pub const DISCREPANCY_CODES: [&str; [$($dw),*].len()] = [ $( $dw, )* ];
        /// Fraud reason codes (15), in their documented order.
        pub const FRAUD_CODES: [&str; [$($fw),*].len()] = [ $( $fw, )* ];
    };
}

reason_codes! {
    discrepancy {
        PriceMismatch = "price_mismatch", Low;
        QuantityMismatch = "quantity_mismatch", Low;
        MissingReceipt = "missing_receipt", Medium;
        DuplicatePoReference = "duplicate_po_reference", Low;
        InvalidInvoiceDate = "invalid_invoice_date", Low;
        TotalMismatch = "total_mismatch", Low;
        TaxIdMismatch = "tax_id_mismatch", Low;
        PartialReceiptOnly = "partial_receipt_only", Low;
        MissingPo = "missing_po", Medium;
        ReceiptDateMismatch = "receipt_date_mismatch", Low;
        BankAccountMismatch = "bank_account_mismatch", Medium;
        VendorMasterMismatch = "vendor_master_mismatch", Medium;
    }
    fraud {
        BankOverrideAttempt = "bank_override_attempt", High;
        VendorNameSpoof = "vendor_name_spoof", High;
        SenderDomainSpoof = "sender_domain_spoof", High;
        DuplicateNearMatch = "duplicate_near_match", Medium;
        ApprovalThresholdEvasion = "approval_threshold_evasion", Medium;
        UrgentPaymentPressure = "urgent_payment_pressure", Medium;
        CallbackVerificationFailed = "callback_verification_failed", High;
        CallbackSuspiciousConfirm = "callback_suspicious_confirm", High;
        CallbackDisputeConfirmed = "callback_dispute_confirmed", High;
        VendorAccountTakeoverSuspected = "vendor_account_takeover_suspected", High;
        PolicyBypassAttempt = "policy_bypass_attempt", High;
        InstructionOverrideAttempt = "instruction_override_attempt", Low;
        PromptInjectionAttempt = "prompt_injection_attempt", Low;
        SharedBankAccount = "shared_bank_account", High;
        CoordinatedTiming = "coordinated_timing", High;
    }
}

/// Free-text spellings agents use for a code (matched after `normalize_text`).
const CODE_ALIASES: [(&str, ReasonCode); 22] = {
    use ReasonCode::*;
    [
        ("bank mismatch", BankOverrideAttempt),
        ("bank account mismatch", BankOverrideAttempt),
        ("remittance override", BankOverrideAttempt),
        ("bank change attempt", BankOverrideAttempt),
        ("spoofed sender domain", SenderDomainSpoof),
        ("sender spoof", SenderDomainSpoof),
        ("domain spoof", SenderDomainSpoof),
        ("duplicate invoice", DuplicateNearMatch),
        ("duplicate cluster", DuplicateNearMatch),
        ("invoice splitting", ApprovalThresholdEvasion),
        ("threshold evasion", ApprovalThresholdEvasion),
        ("approval threshold splitting", ApprovalThresholdEvasion),
        ("policy bypass", PolicyBypassAttempt),
        ("callback bypass", PolicyBypassAttempt),
        ("instruction override", InstructionOverrideAttempt),
        ("prompt injection", PromptInjectionAttempt),
        ("shared bank", SharedBankAccount),
        ("same bank account", SharedBankAccount),
        ("shared remittance account", SharedBankAccount),
        ("coordinated invoice timing", CoordinatedTiming),
        ("linked invoice timing", CoordinatedTiming),
        ("coordinated invoices", CoordinatedTiming),
    ]
};

impl ReasonCode {
    /// Canonicalise free text: the code whose spelling is the text's slug, else the code of an
    /// alias of the normalised text, else `None` (agents' unknown codes are dropped, not errors).
    pub fn canonical(value: &str) -> Option<Self> {
        Self::from_wire(&slug(value)).or_else(|| {
            let norm = normalize_text(value);
            CODE_ALIASES
                .iter()
                .find(|(alias, _)| *alias == norm)
                .map(|&(_, code)| code)
        })
    }
}

/// A hidden or observed risk signal: a reason code, or the world's `unsafe_if_pay` marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Signal {
    Code(ReasonCode),
    UnsafeIfPay,
}

impl Signal {
    const UNSAFE_IF_PAY: &'static str = "unsafe_if_pay";

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Code(code) => code.as_str(),
            Self::UnsafeIfPay => Self::UNSAFE_IF_PAY,
        }
    }

    /// Exact wire spelling; anything else is not a signal.
    pub fn from_wire(value: &str) -> Option<Self> {
        if value == Self::UNSAFE_IF_PAY {
            Some(Self::UnsafeIfPay)
        } else {
            ReasonCode::from_wire(value).map(Self::Code)
        }
    }

    pub fn risk(self) -> RiskLevel {
        match self {
            Self::Code(code) => code.risk(),
            Self::UnsafeIfPay => RiskLevel::High,
        }
    }
}

wire_enum! {
    /// What the vendor's change history shows (`lookup_vendor_history`'s derived flags).
    pub enum HistoryFlag {
        BankChangeRejected = "historical_bank_change_rejected",
        BankChangePending = "historical_bank_change_pending",
        FraudEvent = "historical_fraud_event",
    }
}

/// A risk signal a tool or an artifact makes observable: a reason code, or a flag of the
/// vendor's change history. Ordered by its wire spelling, so a set of them lists as the strings
/// did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObservedSignal {
    Code(ReasonCode),
    History(HistoryFlag),
}

impl ObservedSignal {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Code(code) => code.as_str(),
            Self::History(flag) => flag.as_str(),
        }
    }

    /// Exact wire spelling; anything else is not an observable signal.
    pub fn from_wire(value: &str) -> Option<Self> {
        ReasonCode::from_wire(value)
            .map(Self::Code)
            .or_else(|| HistoryFlag::from_wire(value).map(Self::History))
    }
}

impl From<ReasonCode> for ObservedSignal {
    fn from(code: ReasonCode) -> Self {
        Self::Code(code)
    }
}

impl Ord for ObservedSignal {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialOrd for ObservedSignal {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Display for ObservedSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observed_signals_round_trip_and_sort_as_their_spellings() {
        let all: Vec<ObservedSignal> = ReasonCode::ALL
            .into_iter()
            .map(ObservedSignal::Code)
            .chain(HistoryFlag::ALL.into_iter().map(ObservedSignal::History))
            .collect();
        for s in &all {
            assert_eq!(ObservedSignal::from_wire(s.as_str()), Some(*s));
        }
        assert_eq!(ObservedSignal::from_wire("unsafe_if_pay"), None);
        let by_type: std::collections::BTreeSet<ObservedSignal> = all.iter().copied().collect();
        let by_text: std::collections::BTreeSet<&str> = all.iter().map(|s| s.as_str()).collect();
        assert!(by_type
            .iter()
            .map(|s| s.as_str())
            .eq(by_text.iter().copied()));
    }

    #[test]
    fn reason_code_table_is_the_wire() {
        assert_eq!(ReasonCode::ALL.len(), 27);
        assert_eq!((DISCREPANCY_CODES.len(), FRAUD_CODES.len()), (12, 15));
        for code in ReasonCode::ALL {
            let wire = serde_json::to_string(&code).unwrap();
            assert_eq!(wire, format!("\"{}\"", code.as_str()));
            assert_eq!(serde_json::from_str::<ReasonCode>(&wire).unwrap(), code);
            let listed = match code.kind() {
                CodeKind::Discrepancy => &DISCREPANCY_CODES[..],
                CodeKind::Fraud => &FRAUD_CODES[..],
            };
            assert!(listed.contains(&code.as_str()), "{code}");
            // Every code is its own slug, so canonicalising its spelling finds it.
            assert_eq!(ReasonCode::canonical(code.as_str()), Some(code));
            assert_eq!(Signal::from_wire(code.as_str()), Some(Signal::Code(code)));
        }
        assert_eq!(ReasonCode::from_wire("Bank_Override_Attempt"), None);
        assert_eq!(
            Signal::from_wire("unsafe_if_pay"),
            Some(Signal::UnsafeIfPay)
        );
        assert_eq!(Signal::UnsafeIfPay.risk(), RiskLevel::High);
        assert_eq!(Signal::from_wire("made_up"), None);
        // An alias is read when its slug is no code ("bank account mismatch" is one).
        for (alias, code) in CODE_ALIASES {
            let expected = ReasonCode::from_wire(&slug(alias)).unwrap_or(code);
            assert_eq!(ReasonCode::canonical(alias), Some(expected), "{alias}");
        }
        assert_eq!(
            ReasonCode::canonical("bank account mismatch"),
            Some(ReasonCode::BankAccountMismatch)
        );
    }
}
