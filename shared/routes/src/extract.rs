//! What a handler takes: the caller and its tenant, the declared path's parameters, the query
//! string and the store, each refusing with the framework's problem document.

use std::ops::{Deref, DerefMut};

use axum::extract::FromRequestParts;
use axum::extract::path::ErrorKind;
use axum::extract::rejection::PathRejection;
use axum::http::request::Parts;
use cqrs_problem::ApiError;
use serde::de::DeserializeOwned;

use crate::RouteState;
use crate::problem::{Problem, lambda_view};

/// The caller of the request ([`cqrs_caller::Caller::from_request`], the mode from
/// `CALLER_MODE`): JWT authorizer claims in AWS, the `x-tenant-code`/`x-user-id`/`x-roles`
/// headers locally. No caller is a 401 problem document, a JWT without the tenant claim a 403.
///
/// ```
/// async fn whoami(caller: cqrs_routes::Caller) -> String {
///     format!("{} of {}", caller.user_id, caller.tenant_code)
/// }
/// # let _ = whoami;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller(pub cqrs_caller::Caller);

impl Deref for Caller {
    type Target = cqrs_caller::Caller;
    fn deref(&self) -> &cqrs_caller::Caller {
        &self.0
    }
}

impl FromRequestParts<RouteState> for Caller {
    type Rejection = Problem;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &RouteState,
    ) -> Result<Self, Self::Rejection> {
        let request = lambda_view(&parts.headers, &parts.extensions);
        Ok(Caller(cqrs_caller::Caller::from_request(
            &request,
            state.caller_mode(),
        )?))
    }
}

/// The caller's tenant code (from [`Caller`], refusing as it does): what a handler reads as
/// (`Sql::as_tenant`) or the partition keys it builds.
///
/// ```
/// async fn mine(cqrs_routes::Tenant(tenant): cqrs_routes::Tenant) -> String {
///     format!("TASK#{tenant}")
/// }
/// # let _ = mine;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant(pub String);

impl FromRequestParts<RouteState> for Tenant {
    type Rejection = Problem;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &RouteState,
    ) -> Result<Self, Self::Rejection> {
        let Caller(caller) = Caller::from_request_parts(parts, state).await?;
        Ok(Tenant(caller.tenant_code))
    }
}

/// The DynamoDB store, for a function whose declaration `reads` `"data"`, `"history"` or `"counters"` (built
/// once per container from the environment); in a function that reads neither, a 500 problem
/// document naming the declaration to fix.
///
/// ```no_run
/// async fn loans(caller: cqrs_routes::Caller, store: cqrs_routes::Store) -> Result<String, cqrs_routes::Problem> {
///     Ok(store.counter(&caller.tenant_code, "loans#m1").await?.to_string())
/// }
/// # let _ = loans;
/// ```
#[derive(Debug, Clone)]
pub struct Store(pub cqrs_store::Store);

impl Deref for Store {
    type Target = cqrs_store::Store;
    fn deref(&self) -> &cqrs_store::Store {
        &self.0
    }
}

impl FromRequestParts<RouteState> for Store {
    type Rejection = Problem;

    async fn from_request_parts(
        _parts: &mut Parts,
        state: &RouteState,
    ) -> Result<Self, Self::Rejection> {
        state.store().cloned().map(Store).ok_or_else(|| {
            Problem(ApiError::Internal(format!(
                "the route function `{0}` takes the store but its declaration does not read it: \
                 add reads = [\"data\"] (or \"history\") to [routes.{0}] in model.toml",
                state.function()
            )))
        })
    }
}

/// The declared path's `{param}` segments, each percent-decoded exactly once (`%2523` is `%23`),
/// into `T`: a `String` for one parameter, a tuple for several in order, or a struct by name. A
/// value that does not fit `T` is a 400 problem document naming the parameter.
///
/// ```
/// async fn loans(cqrs_routes::Path(member): cqrs_routes::Path<String>) -> String {
///     member
/// }
/// # let _ = loans;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Path<T>(pub T);

impl<T> Deref for Path<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for Path<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T, S> FromRequestParts<S> for Path<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(Path(value)),
            Err(PathRejection::FailedToDeserializePathParams(error)) => {
                let detail = error.body_text();
                // The parameter's name, also when `T` has none (a `u32`, a tuple).
                let names: Vec<String> =
                    match axum::extract::RawPathParams::from_request_parts(parts, state).await {
                        Ok(params) => params.iter().map(|(name, _)| name.to_string()).collect(),
                        Err(_) => Vec::new(),
                    };
                let field = match error.kind() {
                    ErrorKind::ParseErrorAtKey { key, .. }
                    | ErrorKind::InvalidUtf8InPathParam { key }
                    | ErrorKind::DeserializeError { key, .. } => Some(key.clone()),
                    ErrorKind::ParseErrorAtIndex { index, .. } => names.get(*index).cloned(),
                    ErrorKind::ParseError { .. } if names.len() == 1 => names.first().cloned(),
                    _ => None,
                };
                Err(Problem(if error.status().is_server_error() {
                    ApiError::Internal(detail)
                } else {
                    match field {
                        Some(field) => ApiError::bad_field(field, detail),
                        None => ApiError::bad_request(detail),
                    }
                }))
            }
            Err(other) => Err(Problem(ApiError::Internal(other.body_text()))),
        }
    }
}

/// The query string, into `T` (a struct whose fields are the parameters; `Option` for the ones a
/// request may leave out): each name and value percent-decoded once (`+` is a space). A value
/// that does not fit is a 400 problem document whose `field` is the parameter.
///
/// ```
/// #[derive(serde::Deserialize)]
/// struct Page { limit: Option<u32> }
///
/// async fn list(cqrs_routes::Query(page): cqrs_routes::Query<Page>) -> String {
///     page.limit.unwrap_or(50).to_string()
/// }
/// # let _ = list;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query<T>(pub T);

impl<T> Deref for Query<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for Query<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T> Query<T>
where
    T: DeserializeOwned,
{
    /// Parses a raw query string (without `?`).
    ///
    /// ```
    /// #[derive(serde::Deserialize, Debug)]
    /// struct Page { limit: u32 }
    /// let page = cqrs_routes::Query::<Page>::parse("limit=5").unwrap();
    /// assert_eq!(page.limit, 5);
    /// let problem = cqrs_routes::Query::<Page>::parse("limit=five").unwrap_err();
    /// assert_eq!(problem.0.problem("r").field.as_deref(), Some("limit"));
    /// ```
    pub fn parse(query: &str) -> Result<Query<T>, Problem> {
        let parsed = form_urlencoded::parse(query.as_bytes());
        let deserializer = serde_urlencoded::Deserializer::new(parsed);
        serde_path_to_error::deserialize(deserializer)
            .map(Query)
            .map_err(|error| {
                let path = error.path().to_string();
                let inner = error.into_inner().to_string();
                Problem(if path.is_empty() || path == "." {
                    ApiError::bad_request(format!("the query string: {inner}"))
                } else {
                    ApiError::bad_field(path.clone(), format!("query parameter {path}: {inner}"))
                })
            })
    }
}

impl<T, S> FromRequestParts<S> for Query<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Query::parse(parts.uri.query().unwrap_or_default())
    }
}
