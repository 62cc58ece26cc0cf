//! `GET /settings/{category}/{code}`: a setting of the caller's tenant with mbc-cqrs-serverless'
//! cascade: the tenant's own `MASTER#tenant` / `SETTING#category#code`, else the `common`
//! tenant's. The answer says where the value came from (`"source": "tenant"` or `"common"`).
//!
//! A soft-deleted or expired tenant setting counts as absent (the `common` value applies again). A caller
//! reads its own tenant's settings; `tenantCode` names another tenant: `common`, or any tenant for
//! a global `system_admin` (403 otherwise, before anything is read). `404` when neither the tenant
//! nor `common` has the setting. The `common` fallback obeys the entity model's read rules like
//! every read of `common` ([`crate::App::partition_readers`]): a model that kept `MASTER#common` for
//! a global `system_admin` would refuse the route to everyone else (the example model does not).

use cqrs_caller::Caller;
use cqrs_keys::TENANT_COMMON;
use cqrs_keys::master::{setting_sk, tenant_master_pk};
use cqrs_problem::ApiError;
use lambda_http::{Body, Request, RequestExt, Response, http::Method, http::StatusCode};
use serde::Serialize;

use crate::params::Params;
use crate::route::decode_segment;
use crate::{App, ItemView, json, store_error};

/// The answer of `GET /settings/{category}/{code}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SettingAnswer {
    /// The tenant the setting was asked for.
    pub tenant_code: String,
    /// Where the value came from: `tenant` or `common`.
    pub source: &'static str,
    /// The setting item (its value is `attributes`), as the caller may see it.
    pub item: ItemView,
}

/// Answers `GET /settings/{category}/{code}` (segments still percent-encoded).
pub async fn get_setting(
    app: &App,
    request: &Request,
    category: &str,
    code: &str,
) -> Result<Response<Body>, ApiError> {
    if request.method() != Method::GET {
        return Err(ApiError::MethodNotAllowed(format!(
            "{} /settings/{{category}}/{{code}}: settings are read with GET (written as commands)",
            request.method()
        )));
    }
    let caller = Caller::from_request(request, app.caller_mode)?;
    let query = request.query_string_parameters();
    let params = Params::new(&query, &["tenantCode"])?;
    let tenant = params
        .get("tenantCode")?
        .unwrap_or(caller.tenant_code.as_str())
        .to_string();
    let pk = tenant_master_pk(&tenant).map_err(|e| ApiError::bad_field("tenantCode", e))?;
    // Another tenant's settings (other than `common`), or a `common` partition the model keeps from
    // this caller: refused before anything is read. Both partitions are read (the tenant's and the
    // `common` fallback), so both are checked.
    caller.authorize_read_with(&pk, || app.partition_readers(&pk))?;
    let common = cqrs_keys::master_pk(Some(TENANT_COMMON));
    caller.authorize_read_with(&common, || app.partition_readers(&common))?;
    let category = decode_segment("category", category)?;
    let code = decode_segment("code", code)?;
    let sk = setting_sk(&category, &code).map_err(|e| {
        let field = if cqrs_keys::validate_component("category", &category).is_err() {
            "category"
        } else {
            "code"
        };
        ApiError::bad_field(field, e)
    })?;
    match app
        .store
        .master_item_with_common(&tenant, &sk, crate::now_epoch_seconds())
        .await
        .map_err(store_error)?
    {
        Some((item, source)) => Ok(json(
            StatusCode::OK,
            &SettingAnswer {
                tenant_code: tenant,
                source: source.as_str(),
                item: ItemView::for_caller(item, &caller),
            },
        )),
        None => Err(ApiError::NotFound(format!(
            "no setting {sk} for tenant {tenant} nor for common"
        ))),
    }
}
