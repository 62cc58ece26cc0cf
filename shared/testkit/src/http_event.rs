//! Requests to the HTTP functions as API Gateway's HTTP API hands them over: payload format 2.0
//! events, with or without JWT authorizer claims, turned into the `lambda_http::Request` the
//! handlers take. One builder, so every test suite sends the same shape.

use base64::Engine;
use lambda_http::Request;
use serde_json::{Map, Value, json};

/// One HTTP request to an HTTP function, as API Gateway would describe it.
///
/// ```
/// use cqrs_testkit::http_event::HttpApiRequest;
///
/// let request = HttpApiRequest::new("GET", "/items/PRODUCT%23t1?limit=5")
///     .claims("u1", "t1", "admin")
///     .header("if-none-match", "\"3\"")
///     .request();
/// assert_eq!(request.method(), "GET");
/// assert_eq!(request.headers()["if-none-match"], "\"3\"");
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HttpApiRequest {
    /// The method, e.g. `POST`.
    pub method: String,
    /// The raw (percent-encoded) path.
    pub path: String,
    /// The raw query string, without `?`.
    pub query: String,
    /// Headers in order; API Gateway joins repeated ones with commas.
    pub headers: Vec<(String, String)>,
    /// The body; one that is not UTF-8 is sent base64-encoded, as API Gateway does.
    pub body: Option<Vec<u8>>,
    /// JWT authorizer claims, if the request passed an authorizer.
    pub claims: Option<Map<String, Value>>,
}

impl HttpApiRequest {
    /// `method target`, where `target` is a raw path with an optional raw query string.
    ///
    /// ```
    /// let r = cqrs_testkit::http_event::HttpApiRequest::new("GET", "/items/a?b=c");
    /// assert_eq!((r.path.as_str(), r.query.as_str()), ("/items/a", "b=c"));
    /// ```
    pub fn new(method: &str, target: &str) -> Self {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        HttpApiRequest {
            method: method.into(),
            path: path.into(),
            query: query.into(),
            ..Self::default()
        }
    }

    /// `method /commands` with a JSON body.
    ///
    /// ```
    /// let r = cqrs_testkit::http_event::HttpApiRequest::command("POST", "{}");
    /// assert_eq!(r.body.as_deref(), Some(&b"{}"[..]));
    /// ```
    pub fn command(method: &str, body: &str) -> Self {
        Self::new(method, "/commands")
            .header("content-type", "application/json")
            .body(body.as_bytes())
    }

    /// Adds a header.
    ///
    /// ```
    /// let r = cqrs_testkit::http_event::HttpApiRequest::new("GET", "/").header("a", "b");
    /// assert_eq!(r.headers, [("a".to_string(), "b".to_string())]);
    /// ```
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the body.
    ///
    /// ```
    /// let r = cqrs_testkit::http_event::HttpApiRequest::new("POST", "/").body(&[0xff]);
    /// assert_eq!(r.body.as_deref(), Some(&[0xff][..]));
    /// ```
    pub fn body(mut self, bytes: &[u8]) -> Self {
        self.body = Some(bytes.to_vec());
        self
    }

    /// Sets the JWT authorizer claims `sub`, `custom:tenant` and `custom:roles`.
    ///
    /// ```
    /// let r = cqrs_testkit::http_event::HttpApiRequest::new("GET", "/").claims("u", "t", "r");
    /// assert_eq!(r.claims.unwrap()["custom:tenant"], "t");
    /// ```
    pub fn claims(mut self, user: &str, tenant: &str, roles: &str) -> Self {
        let mut claims = Map::new();
        claims.insert("sub".into(), json!(user));
        claims.insert("custom:tenant".into(), json!(tenant));
        claims.insert("custom:roles".into(), json!(roles));
        self.claims = Some(claims);
        self
    }

    /// The payload 2.0 event as JSON.
    ///
    /// ```
    /// let event = cqrs_testkit::http_event::HttpApiRequest::new("GET", "/items/x?limit=2").event();
    /// assert_eq!(event["version"], "2.0");
    /// assert_eq!(event["queryStringParameters"]["limit"], "2");
    /// assert!(event["requestContext"].get("authorizer").is_none());
    /// ```
    pub fn event(&self) -> Value {
        let mut headers = Map::new();
        for (name, value) in &self.headers {
            let joined = match headers.get(name.as_str()).and_then(Value::as_str) {
                Some(before) => format!("{before},{value}"),
                None => value.clone(),
            };
            headers.insert(name.clone(), json!(joined));
        }
        let mut query_parameters = Map::new();
        for pair in self.query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let (name, value) = (decode(name), decode(value));
            let joined = match query_parameters.get(&name).and_then(Value::as_str) {
                Some(before) => format!("{before},{value}"),
                None => value,
            };
            query_parameters.insert(name, json!(joined));
        }
        let (body, base64) = match &self.body {
            None => (Value::Null, false),
            Some(bytes) => match std::str::from_utf8(bytes) {
                Ok(text) => (json!(text), false),
                Err(_) => (
                    json!(base64::engine::general_purpose::STANDARD.encode(bytes)),
                    true,
                ),
            },
        };
        let route_key = format!("{} {}", self.method, self.path);
        let mut context = json!({
            "accountId": "123456789012",
            "apiId": "api",
            "domainName": "api.example.test",
            "domainPrefix": "api",
            "http": {"method": self.method, "path": self.path, "protocol": "HTTP/1.1",
                     "sourceIp": "192.0.2.10", "userAgent": "tests"},
            "requestId": "apigw-request",
            "routeKey": route_key,
            "stage": "$default",
            "time": "01/Jan/2026:00:00:00 +0000",
            "timeEpoch": 1767225600000i64
        });
        if let Some(claims) = &self.claims {
            context["authorizer"] = json!({"jwt": {"claims": claims, "scopes": null}});
        }
        json!({
            "version": "2.0",
            "routeKey": route_key,
            "rawPath": self.path,
            "rawQueryString": self.query,
            "headers": headers,
            "queryStringParameters": query_parameters,
            "requestContext": context,
            "body": body,
            "isBase64Encoded": base64
        })
    }

    /// The request a `lambda_http` handler receives for this event.
    ///
    /// ```
    /// let request = cqrs_testkit::http_event::HttpApiRequest::command("PATCH", "{}").request();
    /// assert_eq!(request.method(), "PATCH");
    /// ```
    pub fn request(&self) -> Request {
        lambda_http::request::from_str(&self.event().to_string())
            .expect("the builder makes valid HTTP API events")
    }
}

/// Percent-decodes a query component (lossy), as the runtime hands query parameters over.
fn decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}
