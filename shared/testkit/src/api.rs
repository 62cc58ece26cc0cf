//! A client of a running HTTP API (the local stack of `cqrs dev up`, or `cargo lambda watch`) for
//! end-to-end tests: JSON in, status and JSON out, with the local caller headers
//! (`CALLER_MODE=local`: `x-tenant-code`, `x-user-id`, and `x-roles` with [`Api::with_roles`]).
//!
//! ```no_run
//! # async fn example() {
//! use cqrs_testkit::api::Api;
//! let api = Api::new("http://127.0.0.1:9000");
//! let (status, body) = api.call("GET", "/items/TASK%23t1", "t1", None).await;
//! assert_eq!(status, 200, "{body}");
//! # }
//! ```

use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::TokioExecutor,
};
use serde_json::Value;

/// The user id [`Api::call`] sends.
pub const USER: &str = "e2e-user";

/// A client of one base URL.
#[derive(Debug, Clone)]
pub struct Api {
    base: String,
    roles: Option<String>,
    client: Client<HttpConnector, Full<bytes::Bytes>>,
}

impl Api {
    /// A client of `base` (e.g. `http://127.0.0.1:9000`).
    ///
    /// ```
    /// let api = cqrs_testkit::api::Api::new("http://127.0.0.1:9000/");
    /// assert_eq!(api.base(), "http://127.0.0.1:9000");
    /// ```
    pub fn new(base: &str) -> Self {
        Api {
            base: base.trim_end_matches('/').to_string(),
            roles: None,
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    /// A client of the URL in the environment variable `var`; panics, naming it, when it is unset.
    ///
    /// ```should_panic
    /// cqrs_testkit::api::Api::from_env("CQRS_TESTKIT_NO_SUCH_VARIABLE");
    /// ```
    pub fn from_env(var: &str) -> Self {
        let base = std::env::var(var).unwrap_or_else(|_| {
            panic!("{var}: the running stack's base URL, e.g. http://127.0.0.1:9000")
        });
        Api::new(&base)
    }

    /// The same client, its calls sent with the caller's roles `roles` (the `x-roles` header,
    /// e.g. `"librarian"` or `"viewer, editor"`); without it a call sends none.
    ///
    /// ```
    /// let api = cqrs_testkit::api::Api::new("http://127.0.0.1:9000").with_roles("librarian");
    /// assert_eq!(api.roles(), Some("librarian"));
    /// ```
    pub fn with_roles(mut self, roles: &str) -> Self {
        self.roles = Some(roles.to_string());
        self
    }

    /// The roles the calls send, if any ([`Api::with_roles`]).
    pub fn roles(&self) -> Option<&str> {
        self.roles.as_deref()
    }

    /// The base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Sends `method path` as a caller of `tenant` (user [`USER`], the roles of [`Api::with_roles`])
    /// with `body` as JSON; returns the
    /// status and the answer as JSON (`Null` when it is not JSON). Waits up to 5 minutes: the first
    /// request to a function under `cargo lambda watch` compiles it.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        tenant: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut request = hyper::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("x-tenant-code", tenant)
            .header("x-user-id", USER)
            .header("content-type", "application/json");
        if let Some(roles) = &self.roles {
            request = request.header("x-roles", roles);
        }
        let request = request
            .body(Full::new(bytes::Bytes::from(
                body.map(|b| b.to_string()).unwrap_or_default(),
            )))
            .expect("a valid request");
        let response = tokio::time::timeout(Duration::from_secs(300), self.client.request(request))
            .await
            .expect("the stack answers within 5 minutes (the first call compiles the function)")
            .expect("the stack is reachable");
        let status = response.status().as_u16();
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("the answer's body")
            .to_bytes();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    /// GETs `path` as a caller of `tenant` until `done` holds for its answer (projection is
    /// asynchronous); returns the answer and how long it took. Panics after 60 s with the last
    /// answer.
    pub async fn wait_for(
        &self,
        path: &str,
        tenant: &str,
        done: impl Fn(u16, &Value) -> bool,
    ) -> (Value, Duration) {
        let start = Instant::now();
        loop {
            let (status, body) = self.call("GET", path, tenant, None).await;
            if done(status, &body) {
                return (body, start.elapsed());
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{path} never got there: last answer {status} {body}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
