//! Problem documents: [`Problem`] (what a handler answers instead of success), and the layer every
//! route function's router has, which gives each problem document the request's id and turns
//! axum's own refusals (empty 404/405 bodies, plain-text rejections) into problem documents.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, Method, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use cqrs_problem::ApiError;
use http_body_util::BodyExt;

/// What a handler answers instead of success: a [`cqrs_problem::ApiError`], rendered as the
/// framework's problem document (`application/problem+json`, with the request id, `Retry-After`
/// on a 503). Made with `?` from an `ApiError` or a `cqrs_store::StoreError`, or with
/// `Problem::from`.
///
/// ```
/// use cqrs_problem::ApiError;
/// use cqrs_routes::{IntoResponse, Problem};
///
/// fn limit(text: &str) -> Result<u32, Problem> {
///     let n: u32 = text.parse().map_err(|_| ApiError::bad_field("limit", "must be a number"))?;
///     Ok(n)
/// }
/// let problem = limit("ten").unwrap_err();
/// assert_eq!(problem.0.status(), 400);
/// assert_eq!(problem.into_response().status(), 400);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem(pub ApiError);

impl<E: Into<ApiError>> From<E> for Problem {
    fn from(error: E) -> Self {
        Problem(error.into())
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The error of a problem document the router's layer still has to render with the request id.
#[derive(Clone)]
struct Pending(ApiError);

impl IntoResponse for Problem {
    /// The problem document; the router's layer renders it again with the request's id.
    fn into_response(self) -> Response {
        let mut response = render(self.0.clone(), "");
        response.extensions_mut().insert(Pending(self.0));
        response
    }
}

/// The framework's rendering ([`ApiError::into_response`]) as an axum response.
fn render(error: ApiError, request_id: &str) -> Response {
    if let ApiError::Internal(detail) = &error {
        tracing::error!(request_id, detail, "internal error");
    }
    let (parts, body) = error.into_response(request_id).into_parts();
    Response::from_parts(parts, Body::from(body.to_vec()))
}

/// The request as `cqrs_caller` reads it: its headers and extensions (the Lambda and API Gateway
/// contexts `lambda_http` put there), no body.
pub(crate) fn lambda_view(
    headers: &HeaderMap,
    extensions: &axum::http::Extensions,
) -> lambda_http::Request {
    let mut request = lambda_http::Request::new(lambda_http::Body::Empty);
    *request.headers_mut() = headers.clone();
    *request.extensions_mut() = extensions.clone();
    request
}

/// The layer: reads the request id, runs the router, renders pending problems with it and turns
/// any other error response that is not JSON into a problem document.
pub(crate) async fn documents(request: Request, next: Next) -> Response {
    let request_id = cqrs_caller::request_id(&lambda_view(request.headers(), request.extensions()));
    let response = next.run(request).await;
    if let Some(Pending(error)) = response.extensions().get::<Pending>().cloned() {
        return rerender(response, error, &request_id);
    }
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    // axum's own refusal (a rejection's plain text, an empty body): the same status as a problem
    // document, its text as the detail.
    let (parts, body) = response.into_parts();
    let text = match body.collect().await {
        Ok(bytes) => String::from_utf8_lossy(&bytes.to_bytes())
            .trim()
            .to_string(),
        Err(_) => String::new(),
    };
    let text = if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("refused")
            .to_lowercase()
    } else {
        text
    };
    let error = match status.as_u16() {
        401 => ApiError::Unauthenticated(text),
        403 => ApiError::Forbidden(text),
        404 => ApiError::NotFound(text),
        405 => ApiError::MethodNotAllowed(text),
        413 => ApiError::BodyTooLarge(text),
        415 => ApiError::UnsupportedMediaType(text),
        503 => ApiError::Unavailable(text),
        400..=499 => ApiError::bad_request(text),
        _ => ApiError::Internal(text),
    };
    rerender(
        Response::from_parts(parts, Body::empty()),
        error,
        &request_id,
    )
}

/// `response` with `error`'s problem document (status, body, its headers) in place of its own,
/// keeping the headers it set besides (`Allow` on a 405, a handler's own).
fn rerender(response: Response, error: ApiError, request_id: &str) -> Response {
    let (mut parts, _) = response.into_parts();
    let (problem, body) = render(error, request_id).into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    for (name, value) in &problem.headers {
        parts.headers.insert(name.clone(), value.clone());
    }
    parts.status = problem.status;
    parts.extensions.remove::<Pending>();
    Response::from_parts(parts, body)
}

/// The operations of a function, for the 404 and 405 details.
pub(crate) struct Served {
    function: String,
    operations: Vec<(String, String)>,
}

impl Served {
    pub(crate) fn of(function: &cqrs_model::RouteFunction) -> Served {
        Served {
            function: function.name.clone(),
            operations: function
                .operations
                .iter()
                .map(|o| (o.method.clone(), o.path.clone()))
                .collect(),
        }
    }

    fn list(&self) -> String {
        self.operations
            .iter()
            .map(|(m, p)| format!("{m} {p}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

pub(crate) async fn not_found(served: Arc<Served>, method: Method, uri: Uri) -> Problem {
    Problem(ApiError::NotFound(format!(
        "no route {method} {}: the function {} serves {}",
        uri.path(),
        served.function,
        served.list()
    )))
}

pub(crate) async fn not_allowed(served: Arc<Served>, method: Method, uri: Uri) -> Problem {
    let path = uri.path();
    let allowed: Vec<&str> = served
        .operations
        .iter()
        .filter(|(_, declared)| matches(declared, path))
        .map(|(m, _)| m.as_str())
        .collect();
    // axum sets `Allow` on this answer itself.
    Problem(ApiError::MethodNotAllowed(format!(
        "{path} does not take {method}: use {}",
        allowed.join(" or ")
    )))
}

/// Whether the raw `path` fits the declared one (`{param}` takes one segment).
fn matches(declared: &str, path: &str) -> bool {
    let (declared, path): (Vec<&str>, Vec<&str>) =
        (declared.split('/').collect(), path.split('/').collect());
    declared.len() == path.len()
        && declared
            .iter()
            .zip(&path)
            .all(|(d, p)| d == p || (d.starts_with('{') && !p.is_empty()))
}
