//! Small models the tests of several crates share, so that each is written once.

/// A lending library with one declared constraint of each kind (issue 38): copies are unique by
/// `(isbn, copyNo)` in their tenant, a member has at most 3 loans out (`loan.loans_out`, per
/// `memberId` while `status = out`), and a loan names a live copy that is not a reference copy
/// (`loan.copy`). The loan's id is `loanId` (a ULID when a create gives none). The last table is
/// `[entities.loan]`, so a test may append keys to the loan, then entities of its own.
///
/// ```
/// let model = cqrs_model::Model::parse(cqrs_testkit::models::CONSTRAINED_LIBRARY).unwrap();
/// let loan = model.entity("loan").unwrap();
/// assert_eq!((loan.limits.len(), loan.references.len()), (1, 1));
/// assert_eq!(model.entity("copy").unwrap().unique[0].name, "copy_number");
/// ```
pub const CONSTRAINED_LIBRARY: &str = r#"
[entities.copy]
pk = "COPY#{tenant}"
sk = "{copyId}"
attributes.copyId = { type = "string", required = true, max = 40 }
attributes.isbn = { type = "string", required = true, max = 13 }
attributes.copyNo = { type = "number", required = true }
attributes.reference = { type = "boolean" }
unique.copy_number = { attributes = ["isbn", "copyNo"] }

[entities.loan]
pk = "LOAN#{tenant}"
sk = "{loanId}"
id = "loanId"
attributes.loanId = { type = "string", max = 26 }
attributes.memberId = { type = "string", required = true, max = 40 }
attributes.copyId = { type = "string", required = true, max = 40 }
attributes.status = { type = "enum", values = ["out", "returned"], required = true }
limits.loans_out = { per = "memberId", when = { status = ["out"] }, at_most = 3 }
references.copy = { entity = "copy", unless = { reference = ["true"] } }
"#;
