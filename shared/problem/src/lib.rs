//! The one error type of the HTTP functions, [`ApiError`], and the RFC 9457 problem document it
//! becomes.
//!
//! Every refusal the command and query handlers give is an [`ApiError`]; HTTP status codes are chosen
//! here and nowhere else. [`ApiError::into_response`] renders the error as
//! `application/problem+json` with `type`, `title`, `status`, `detail` and the request id, plus the
//! extension members that help a client act on it (`field`, `currentVersion`), and a `Retry-After`
//! header on a 503. A store failure becomes an `ApiError` through `From<StoreError>`, so every
//! function answers a write conflict with 409 and throttling with 503.
//!
//! ```
//! use cqrs_problem::ApiError;
//!
//! let error = ApiError::bad_field("version", "expected an integer");
//! assert_eq!(error.status(), 400);
//! let problem = error.problem("req-1");
//! assert_eq!(problem.problem_type, "urn:cqrs:problem:invalid-field");
//! assert_eq!(problem.field.as_deref(), Some("version"));
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use cqrs_store::StoreError;
use lambda_http::{
    Body, Response,
    http::header::{CONTENT_TYPE, RETRY_AFTER},
};
use serde::Serialize;

/// Seconds a client is asked to wait (`Retry-After`) after a 503.
///
/// ```
/// let response = cqrs_problem::ApiError::Unavailable("throttled".into()).into_response("r");
/// assert_eq!(response.status(), 503);
/// assert_eq!(
///     response.headers()["retry-after"],
///     cqrs_problem::RETRY_AFTER_SECONDS.to_string().as_str()
/// );
/// ```
pub const RETRY_AFTER_SECONDS: u64 = 1;

/// The media type of a problem document (RFC 9457).
///
/// ```
/// assert_eq!(cqrs_problem::PROBLEM_CONTENT_TYPE, "application/problem+json");
/// ```
pub const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";

/// Everything an HTTP function can answer instead of success.
///
/// Each variant says how a caller handles it; [`ApiError::status`] gives the HTTP status.
///
/// ```
/// use cqrs_problem::ApiError;
///
/// let conflict = ApiError::VersionConflict {
///     detail: "version 4 of PRODUCT#t1/p1 already exists".into(),
///     current_version: Some(4),
/// };
/// assert_eq!(conflict.status(), 409);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// 400: the request is malformed (body, query, path). Fix the request; `field` names the culprit.
    #[error("{detail}")]
    BadRequest {
        /// What is wrong, in words a client developer understands.
        detail: String,
        /// The field, parameter or header at fault, when one is.
        field: Option<String>,
    },
    /// 401: no caller could be established (no JWT claims, or no local caller headers).
    #[error("{0}")]
    Unauthenticated(String),
    /// 403: the caller is known but may not touch this tenant or key. Do not retry.
    #[error("{0}")]
    Forbidden(String),
    /// 404: no such item, version or route.
    #[error("{0}")]
    NotFound(String),
    /// 405: the route exists but not with this method.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// 409: the version written already exists (a lost race, or a stale `version`). Re-read the
    /// item (its current version is given where known) and decide again.
    #[error("{detail}")]
    VersionConflict {
        /// What conflicted.
        detail: String,
        /// The newest version stored, when it could be read.
        current_version: Option<i64>,
    },
    /// 409: a concurrent write to the same item got in the way (a DynamoDB transaction conflict).
    /// Nothing was written; send the same request again (with the same `Idempotency-Key`).
    #[error("{0}")]
    WriteConflict(String),
    /// 413: the item the request would create is over DynamoDB's 400 KB limit.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// 413: the request body is larger than any command can be; refused before it is parsed.
    #[error("{0}")]
    BodyTooLarge(String),
    /// 415: the body is not JSON.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 422: the `Idempotency-Key` was already used with a different request. Use a new key.
    #[error("{0}")]
    IdempotencyKeyReused(String),
    /// 503: the store throttled or was unavailable after retries. Retry later with the same
    /// `Idempotency-Key`.
    #[error("{0}")]
    Unavailable(String),
    /// 500: a fault of ours. The detail is logged, never shown to the caller.
    #[error("internal error: {0}")]
    Internal(String),
    /// A 4xx of the service's choosing: one of its rules (a command hook) refused the request, and
    /// nothing was written. Made by [`ApiError::refused`], which keeps the status one of
    /// [`REFUSAL_STATUSES`].
    #[error("{detail}")]
    Refused {
        /// The HTTP status, one of [`REFUSAL_STATUSES`].
        status: u16,
        /// The problem `type` URI.
        problem_type: String,
        /// The problem `title`.
        title: String,
        /// What the caller is told.
        detail: String,
    },
    /// 409 / 422 / 503: a constraint the model declares (`unique`, `limits`, `references` of an
    /// entity in `model.toml`) refused the command, and nothing was written. `constraint` names it
    /// (`<entity>.<name>`); [`ConstraintKind`] says how, and so the status.
    ///
    /// ```
    /// use cqrs_problem::{ApiError, ConstraintKind};
    /// let e = ApiError::Constraint {
    ///     kind: ConstraintKind::LimitReached { limit: 3 },
    ///     constraint: "loan.loans_out".into(),
    ///     detail: "loan.loans_out: memberId \"m1\" already has 3 (at most 3)".into(),
    /// };
    /// assert_eq!(e.status(), 409);
    /// let json = serde_json::to_value(e.problem("r")).unwrap();
    /// assert_eq!(json["type"], "urn:cqrs:problem:limit-reached");
    /// assert_eq!((json["constraint"].as_str(), json["limit"].as_u64()), (Some("loan.loans_out"), Some(3)));
    /// ```
    #[error("{detail}")]
    Constraint {
        /// Which kind of refusal.
        kind: ConstraintKind,
        /// The constraint, `<entity>.<name>`.
        constraint: String,
        /// What the caller is told.
        detail: String,
    },
}

/// How a declared constraint refused a command ([`ApiError::Constraint`]).
///
/// ```
/// use cqrs_problem::{ConstraintKind, ReferenceReason};
/// assert_eq!(ConstraintKind::UniqueTaken.status(), 409);
/// assert_eq!(ConstraintKind::ReferenceRefused { reason: ReferenceReason::Deleted }.status(), 422);
/// assert_eq!(ConstraintKind::NotRebuilt.status(), 503);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConstraintKind {
    /// 409 `urn:cqrs:problem:unique-taken`: another live item holds the unique value. It may be
    /// free after that item changes.
    UniqueTaken,
    /// 409 `urn:cqrs:problem:limit-reached`: the bounded group already has `limit` members.
    LimitReached {
        /// The group's bound (`at_most`).
        limit: u32,
    },
    /// 422 `urn:cqrs:problem:reference-refused`: the item the command names is missing, deleted
    /// or does not satisfy the reference's condition.
    ReferenceRefused {
        /// Why.
        reason: ReferenceReason,
    },
    /// 503 `urn:cqrs:problem:constraints-not-rebuilt`: the referenced item's head does not describe
    /// its latest version (heads seeded, or written by an older release): an operator runs
    /// `cqrs rebuild --constraints`.
    NotRebuilt,
}

impl ConstraintKind {
    /// The HTTP status of this refusal.
    pub fn status(self) -> u16 {
        match self {
            ConstraintKind::UniqueTaken | ConstraintKind::LimitReached { .. } => 409,
            ConstraintKind::ReferenceRefused { .. } => 422,
            ConstraintKind::NotRebuilt => 503,
        }
    }
}

/// Why a reference refused a command (the problem's `reason` member).
///
/// ```
/// assert_eq!(cqrs_problem::ReferenceReason::Missing.as_str(), "missing");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReferenceReason {
    /// No item has the key the command names.
    Missing,
    /// The item is soft-deleted.
    Deleted,
    /// The item does not satisfy the reference's `when` / `unless`.
    Condition,
}

impl ReferenceReason {
    /// `missing`, `deleted` or `condition`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReferenceReason::Missing => "missing",
            ReferenceReason::Deleted => "deleted",
            ReferenceReason::Condition => "condition",
        }
    }
}

/// The statuses a service's rule (a command hook) may refuse a command with: the 4xx statuses the
/// HTTP contract (`openapi.yaml`) documents for every operation that runs the hooks (`POST` and
/// `PATCH /commands`, `POST /master-data/copy`), so that a service's refusals stay inside the
/// contract its clients are generated from. The operator CLI's OpenAPI test holds the two equal.
///
/// ```
/// assert!(cqrs_problem::REFUSAL_STATUSES.contains(&409));
/// assert!(!cqrs_problem::REFUSAL_STATUSES.contains(&418));
/// ```
pub const REFUSAL_STATUSES: [u16; 5] = [400, 403, 404, 409, 422];

impl ApiError {
    /// A refusal of the service's own (a command hook's): `status` must be one of
    /// [`REFUSAL_STATUSES`] (400, 403, 404, 409, 422; anything else becomes a 500: a rule that
    /// refuses a request says what the caller did, never that we failed, and in a status the
    /// contract documents), `problem_type` a URI the service documents, `title` short and stable.
    ///
    /// ```
    /// let e = cqrs_problem::ApiError::refused(409, "urn:library:loan-limit", "Loan limit", "m1 holds 3 loans");
    /// assert_eq!(e.status(), 409);
    /// let p = e.problem("r-1");
    /// assert_eq!((p.problem_type.as_str(), p.title.as_str()), ("urn:library:loan-limit", "Loan limit"));
    /// assert_eq!(cqrs_problem::ApiError::refused(200, "x", "y", "z").status(), 500);
    /// // A 4xx the contract does not document for commands is a fault of the service's rule too.
    /// assert_eq!(cqrs_problem::ApiError::refused(418, "x", "y", "z").status(), 500);
    /// ```
    pub fn refused(
        status: u16,
        problem_type: impl Into<String>,
        title: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        let detail = detail.into();
        if !REFUSAL_STATUSES.contains(&status) {
            return ApiError::Internal(format!(
                "a service rule refused with status {status}, which is not one the HTTP contract \
                 documents for a command ({REFUSAL_STATUSES:?}): {detail}"
            ));
        }
        ApiError::Refused {
            status,
            problem_type: problem_type.into(),
            title: title.into(),
            detail,
        }
    }

    /// A 400 about one field of the request.
    ///
    /// ```
    /// let e = cqrs_problem::ApiError::bad_field("pk", "must not be empty");
    /// assert_eq!(e.to_string(), "pk: must not be empty");
    /// ```
    pub fn bad_field(field: impl Into<String>, detail: impl std::fmt::Display) -> Self {
        let field = field.into();
        ApiError::BadRequest {
            detail: format!("{field}: {detail}"),
            field: Some(field),
        }
    }

    /// A 400 about the request as a whole.
    ///
    /// ```
    /// let e = cqrs_problem::ApiError::bad_request("the body is empty");
    /// assert_eq!(e.status(), 400);
    /// ```
    pub fn bad_request(detail: impl Into<String>) -> Self {
        ApiError::BadRequest {
            detail: detail.into(),
            field: None,
        }
    }

    /// The HTTP status this error becomes.
    ///
    /// ```
    /// assert_eq!(cqrs_problem::ApiError::Forbidden("no".into()).status(), 403);
    /// ```
    pub fn status(&self) -> u16 {
        match self {
            ApiError::BadRequest { .. } => 400,
            ApiError::Unauthenticated(_) => 401,
            ApiError::Forbidden(_) => 403,
            ApiError::NotFound(_) => 404,
            ApiError::MethodNotAllowed(_) => 405,
            ApiError::VersionConflict { .. } | ApiError::WriteConflict(_) => 409,
            ApiError::PayloadTooLarge(_) | ApiError::BodyTooLarge(_) => 413,
            ApiError::UnsupportedMediaType(_) => 415,
            ApiError::IdempotencyKeyReused(_) => 422,
            ApiError::Internal(_) => 500,
            ApiError::Unavailable(_) => 503,
            ApiError::Refused { status, .. } => *status,
            ApiError::Constraint { kind, .. } => kind.status(),
        }
    }

    /// The problem `type` URI and `title` of this error.
    ///
    /// ```
    /// let (uri, title) = cqrs_problem::ApiError::NotFound("x".into()).kind();
    /// assert_eq!(uri, "urn:cqrs:problem:not-found");
    /// assert_eq!(title, "Not found");
    /// ```
    pub fn kind(&self) -> (&'static str, &'static str) {
        match self {
            ApiError::BadRequest { field: Some(_), .. } => {
                ("urn:cqrs:problem:invalid-field", "Invalid field")
            }
            ApiError::BadRequest { field: None, .. } => {
                ("urn:cqrs:problem:bad-request", "Bad request")
            }
            ApiError::Unauthenticated(_) => ("urn:cqrs:problem:unauthenticated", "No caller"),
            ApiError::Forbidden(_) => ("urn:cqrs:problem:forbidden", "Forbidden"),
            ApiError::NotFound(_) => ("urn:cqrs:problem:not-found", "Not found"),
            ApiError::MethodNotAllowed(_) => {
                ("urn:cqrs:problem:method-not-allowed", "Method not allowed")
            }
            ApiError::VersionConflict { .. } => {
                ("urn:cqrs:problem:version-conflict", "Version conflict")
            }
            ApiError::WriteConflict(_) => ("urn:cqrs:problem:write-conflict", "Write conflict"),
            ApiError::PayloadTooLarge(_) => ("urn:cqrs:problem:item-too-large", "Item too large"),
            ApiError::BodyTooLarge(_) => ("urn:cqrs:problem:body-too-large", "Body too large"),
            ApiError::UnsupportedMediaType(_) => (
                "urn:cqrs:problem:unsupported-media-type",
                "Unsupported media type",
            ),
            ApiError::IdempotencyKeyReused(_) => (
                "urn:cqrs:problem:idempotency-key-reused",
                "Idempotency key reused",
            ),
            ApiError::Unavailable(_) => ("urn:cqrs:problem:store-unavailable", "Store unavailable"),
            ApiError::Internal(_) => ("urn:cqrs:problem:internal", "Internal error"),
            ApiError::Refused { .. } => ("urn:cqrs:problem:refused", "Refused"),
            ApiError::Constraint { kind, .. } => match kind {
                ConstraintKind::UniqueTaken => {
                    ("urn:cqrs:problem:unique-taken", "Unique value taken")
                }
                ConstraintKind::LimitReached { .. } => {
                    ("urn:cqrs:problem:limit-reached", "Limit reached")
                }
                ConstraintKind::ReferenceRefused { .. } => {
                    ("urn:cqrs:problem:reference-refused", "Reference refused")
                }
                ConstraintKind::NotRebuilt => (
                    "urn:cqrs:problem:constraints-not-rebuilt",
                    "Constraints not rebuilt",
                ),
            },
        }
    }

    /// How many seconds a client should wait before trying again (`Retry-After`), for the errors
    /// that are worth retrying unchanged later (503).
    ///
    /// ```
    /// use cqrs_problem::ApiError;
    /// assert_eq!(ApiError::Unavailable("x".into()).retry_after(), Some(1));
    /// assert_eq!(ApiError::NotFound("x".into()).retry_after(), None);
    /// ```
    pub fn retry_after(&self) -> Option<u64> {
        (self.status() == 503).then_some(RETRY_AFTER_SECONDS)
    }

    /// The problem document of this error, for the request `request_id`.
    ///
    /// An internal error's detail stays in the logs; the caller sees only the request id to quote.
    ///
    /// ```
    /// let p = cqrs_problem::ApiError::Internal("db exploded".into()).problem("r-9");
    /// assert!(!p.detail.contains("exploded"));
    /// assert_eq!(p.request_id, "r-9");
    /// ```
    pub fn problem(&self, request_id: &str) -> Problem {
        let (problem_type, title) = match self {
            ApiError::Refused {
                problem_type,
                title,
                ..
            } => (problem_type.as_str(), title.as_str()),
            other => other.kind(),
        };
        let detail = match self {
            ApiError::Internal(_) => format!(
                "the request failed on our side; quote request id {request_id} when reporting it"
            ),
            other => other.to_string(),
        };
        Problem {
            problem_type: problem_type.to_string(),
            title: title.to_string(),
            status: self.status(),
            detail,
            request_id: request_id.to_string(),
            field: match self {
                ApiError::BadRequest { field, .. } => field.clone(),
                _ => None,
            },
            current_version: match self {
                ApiError::VersionConflict {
                    current_version, ..
                } => *current_version,
                _ => None,
            },
            constraint: match self {
                ApiError::Constraint { constraint, .. } => Some(constraint.clone()),
                _ => None,
            },
            reason: match self {
                ApiError::Constraint {
                    kind: ConstraintKind::ReferenceRefused { reason },
                    ..
                } => Some(reason.as_str().to_string()),
                _ => None,
            },
            limit: match self {
                ApiError::Constraint {
                    kind: ConstraintKind::LimitReached { limit },
                    ..
                } => Some(*limit),
                _ => None,
            },
        }
    }

    /// The HTTP response: the status and the problem document as `application/problem+json`.
    ///
    /// ```
    /// let response = cqrs_problem::ApiError::NotFound("no item".into()).into_response("r-1");
    /// assert_eq!(response.status(), 404);
    /// assert_eq!(response.headers()["content-type"], "application/problem+json");
    /// ```
    pub fn into_response(self, request_id: &str) -> Response<Body> {
        let retry_after = self.retry_after();
        let problem = self.problem(request_id);
        let body = serde_json::to_string(&problem).unwrap_or_else(|_| {
            // Serialising plain strings and numbers cannot fail; keep a valid document anyway.
            format!(
                r#"{{"status":{},"title":"Internal error"}}"#,
                problem.status
            )
        });
        let mut response = Response::new(Body::Text(body));
        *response.status_mut() = lambda_http::http::StatusCode::from_u16(problem.status)
            .unwrap_or(lambda_http::http::StatusCode::INTERNAL_SERVER_ERROR);
        response.headers_mut().insert(
            CONTENT_TYPE,
            lambda_http::http::HeaderValue::from_static(PROBLEM_CONTENT_TYPE),
        );
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(RETRY_AFTER, lambda_http::http::HeaderValue::from(seconds));
        }
        response
    }
}

/// How the HTTP functions answer a store failure: a moved head or a taken key is a version
/// conflict (409, with the current version where the store knows it), a transaction conflict a
/// write conflict (409), throttling 503 with `Retry-After`, anything else a 500.
///
/// ```
/// use cqrs_problem::ApiError;
/// use cqrs_store::StoreError;
///
/// assert_eq!(ApiError::from(StoreError::WriteConflict("TransactionConflict".into())).status(), 409);
/// assert_eq!(ApiError::from(StoreError::Throttled("slow down".into())).status(), 503);
/// let stale = ApiError::from(StoreError::StaleVersion { id: "P#t#a".into(), latest: Some(4) });
/// assert_eq!(stale, ApiError::VersionConflict {
///     detail: "the latest version of P#t#a is 4".into(),
///     current_version: Some(4),
/// });
/// assert_eq!(ApiError::from(StoreError::Dynamo("boom".into())).status(), 500);
/// ```
impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Throttled(detail) => ApiError::Unavailable(detail),
            StoreError::WriteConflict(_) => ApiError::WriteConflict(
                "a concurrent write to this item got in the way and nothing was written; \
                 send the request again"
                    .into(),
            ),
            StoreError::StaleVersion { id, latest } => ApiError::VersionConflict {
                detail: match latest {
                    Some(latest) => format!("the latest version of {id} is {latest}"),
                    None => format!("{id} has no version"),
                },
                current_version: latest,
            },
            StoreError::AlreadyExists { pk, sk } => ApiError::VersionConflict {
                detail: format!("{pk} / {sk} already exists"),
                current_version: None,
            },
            StoreError::IdempotencyKeyTaken(_) | StoreError::IdempotencyReplay(_) => {
                ApiError::WriteConflict(
                    "a concurrent request with this Idempotency-Key is being written; send the \
                 request again"
                        .into(),
                )
            }
            other => ApiError::Internal(other.to_string()),
        }
    }
}

/// An RFC 9457 problem document, as serialised to the client.
///
/// ```
/// let p = cqrs_problem::ApiError::bad_request("empty body").problem("r-2");
/// let json = serde_json::to_value(&p).unwrap();
/// assert_eq!(json["type"], "urn:cqrs:problem:bad-request");
/// assert_eq!(json["status"], 400);
/// assert_eq!(json["requestId"], "r-2");
/// assert!(json.get("field").is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    /// A URI naming the kind of problem (`urn:cqrs:problem:...`).
    #[serde(rename = "type")]
    pub problem_type: String,
    /// A short, fixed summary of the kind.
    pub title: String,
    /// The HTTP status.
    pub status: u16,
    /// What went wrong with this request.
    pub detail: String,
    /// The request id, to find the request in the logs.
    pub request_id: String,
    /// The field, parameter or header at fault (400 only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The newest stored version (409 only, where known).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_version: Option<i64>,
    /// The declared constraint that refused the command, `<entity>.<name>` (409 `unique-taken`
    /// and `limit-reached`, 422 `reference-refused`, 503 `constraints-not-rebuilt`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constraint: Option<String>,
    /// Why a reference refused: `missing`, `deleted` or `condition` (422 `reference-refused`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The bound of the group that is full (409 `limit-reached`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<ApiError> {
        vec![
            ApiError::bad_field("f", "x"),
            ApiError::bad_request("x"),
            ApiError::Unauthenticated("x".into()),
            ApiError::Forbidden("x".into()),
            ApiError::NotFound("x".into()),
            ApiError::MethodNotAllowed("x".into()),
            ApiError::VersionConflict {
                detail: "x".into(),
                current_version: Some(3),
            },
            ApiError::WriteConflict("x".into()),
            ApiError::PayloadTooLarge("x".into()),
            ApiError::BodyTooLarge("x".into()),
            ApiError::UnsupportedMediaType("x".into()),
            ApiError::IdempotencyKeyReused("x".into()),
            ApiError::Unavailable("x".into()),
            ApiError::Internal("x".into()),
            ApiError::Constraint {
                kind: ConstraintKind::UniqueTaken,
                constraint: "copy.copy_number".into(),
                detail: "x".into(),
            },
            ApiError::Constraint {
                kind: ConstraintKind::LimitReached { limit: 3 },
                constraint: "loan.loans_out".into(),
                detail: "x".into(),
            },
            ApiError::Constraint {
                kind: ConstraintKind::ReferenceRefused {
                    reason: ReferenceReason::Condition,
                },
                constraint: "loan.copy".into(),
                detail: "x".into(),
            },
            ApiError::Constraint {
                kind: ConstraintKind::NotRebuilt,
                constraint: "loan.copy".into(),
                detail: "x".into(),
            },
        ]
    }

    #[test]
    fn every_error_renders_a_complete_problem_document() {
        for error in all() {
            let status = error.status();
            let response = error.clone().into_response("req");
            assert_eq!(response.status().as_u16(), status, "{error:?}");
            let Body::Text(text) = response.body() else {
                panic!("problem body is not text")
            };
            let json: serde_json::Value = serde_json::from_str(text).unwrap();
            for member in ["type", "title", "status", "detail", "requestId"] {
                assert!(json.get(member).is_some(), "{member} missing for {error:?}");
            }
            assert_eq!(json["status"], status);
        }
    }

    #[test]
    fn only_a_503_asks_to_retry_after() {
        for error in all() {
            let status = error.status();
            let response = error.into_response("req");
            assert_eq!(
                response.headers().get(RETRY_AFTER).is_some(),
                status == 503,
                "{status}"
            );
        }
    }

    #[test]
    fn store_failures_are_never_a_500_when_retryable() {
        let cases = [
            (StoreError::WriteConflict("TransactionConflict".into()), 409),
            (StoreError::Throttled("ThrottlingException".into()), 503),
            (
                StoreError::StaleVersion {
                    id: "i".into(),
                    latest: None,
                },
                409,
            ),
            (
                StoreError::AlreadyExists {
                    pk: "p".into(),
                    sk: "s@1".into(),
                },
                409,
            ),
            (StoreError::IdempotencyKeyTaken("k".into()), 409),
            (StoreError::Dynamo("x".into()), 500),
        ];
        for (error, status) in cases {
            assert_eq!(ApiError::from(error).status(), status);
        }
    }

    #[test]
    fn kinds_are_distinct() {
        let mut kinds: Vec<_> = all().iter().map(|e| e.kind().0).collect();
        kinds.sort();
        kinds.dedup();
        assert_eq!(kinds.len(), all().len());
    }

    #[test]
    fn conflict_carries_the_current_version() {
        let p = ApiError::VersionConflict {
            detail: "v".into(),
            current_version: Some(7),
        }
        .problem("r");
        assert_eq!(
            serde_json::to_value(&p).unwrap()["currentVersion"],
            serde_json::json!(7)
        );
    }
}
