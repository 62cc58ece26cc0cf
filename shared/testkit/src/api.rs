//! A client of a running HTTP API (the local stack of `cqrs dev up`, or `cargo lambda watch`) for
//! end-to-end tests: JSON in, status and JSON out, with the local caller headers
//! (`CALLER_MODE=local`: `x-tenant-code`, `x-user-id`).
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

    /// The base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Sends `method path` as a caller of `tenant` (user [`USER`]) with `body` as JSON; returns the
    /// status and the answer as JSON (`Null` when it is not JSON). Waits up to 5 minutes: the first
    /// request to a function under `cargo lambda watch` compiles it.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        tenant: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let request = hyper::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("x-tenant-code", tenant)
            .header("x-user-id", USER)
            .header("content-type", "application/json")
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
